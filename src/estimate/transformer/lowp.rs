//! FP8 / MXFP8 / NVFP4 as Transformer Engine runs them: only the linear layers'
//! GEMMs take 8- or 4-bit inputs (attention BMMs, softmax, norms and the router stay
//! 16-bit); every GEMM operand is quantized by a memory-bound kernel first, and FP8
//! weight copies are kept beside the 16-bit weights (NVIDIA Transformer Engine
//! documentation, "Using FP8 with Transformer Engine"; Micikevicius et al. 2022, "FP8
//! Formats for Deep Learning" §4).
//!
//! Bytes moved to quantize one 16-bit element (read 2 B, write the low-precision copies):
//! - `fp8` on Hopper: a row-wise and a transposed column-wise copy (the FP8 tensor cores
//!   take only the TN layout, so the weight-gradient GEMM needs the transpose), 1 B
//!   each: `2 + 2 = 4`; the `current` recipe reads the tensor once more for its amax
//!   (`+2`); `block` writes an FP32 scale per 128 elements per copy (`+2·4/128`);
//! - `mxfp8`: row- and column-wise copies with an E8M0 scale per 32 (OCP MX v1.0):
//!   `2 + 2·(1 + 1/32)`;
//! - `nvfp4`: row- and column-wise 4-bit copies with an E4M3 scale per 16 and a
//!   per-tensor amax pass: `2 + 2·(0.5 + 1/16) + 2`.

use crate::compute::{Fp8Recipe, Precision};

/// (bytes written per element for the quantized copies, extra bytes read per element
/// beyond the one read of the 16-bit input, kernels per quantized tensor).
fn copies(p: Precision, r: Fp8Recipe) -> (f64, f64, f64) {
    match (p, r) {
        (Precision::Fp8, Fp8Recipe::Delayed) => (2.0, 0.0, 1.0),
        (Precision::Fp8, Fp8Recipe::Current) => (2.0, 2.0, 2.0),
        (Precision::Fp8, Fp8Recipe::Block) => (2.0 * (1.0 + 4.0 / 128.0), 0.0, 1.0),
        (Precision::Mxfp8, _) => (2.0 * (1.0 + 1.0 / 32.0), 0.0, 1.0),
        (Precision::Nvfp4, _) => (2.0 * (0.5 + 1.0 / 16.0), 2.0, 2.0),
        _ => (0.0, 0.0, 0.0),
    }
}

/// Bytes moved and kernels launched to quantize `elements` 16-bit values as `p` with
/// recipe `r` (zero for 16- and 32-bit precisions).
pub(super) fn cast(p: Precision, r: Fp8Recipe, elements: f64) -> (f64, f64) {
    let (write, extra_read, kernels) = copies(p, r);
    if write == 0.0 {
        return (0.0, 0.0);
    }
    (elements * (2.0 + extra_read + write), kernels)
}

/// Extra bytes per parameter held for the quantized weight copies (row- and column-wise).
pub(super) fn weight_copy_bytes(p: Precision, r: Fp8Recipe) -> f64 {
    copies(p, r).0
}

#[cfg(test)]
mod tests {
    use super::*;
    use approx::assert_relative_eq;

    #[test]
    fn bytes_per_element_by_hand() {
        // Hopper FP8, delayed scaling: read 2 B, write 1 B row-wise + 1 B transposed.
        assert_eq!(cast(Precision::Fp8, Fp8Recipe::Delayed, 1.0), (4.0, 1.0));
        // Current scaling reads the tensor once more for its amax.
        assert_eq!(cast(Precision::Fp8, Fp8Recipe::Current, 1.0), (6.0, 2.0));
        // MXFP8: 2 + 2·(1 + 1/32) = 4.0625.
        assert_relative_eq!(cast(Precision::Mxfp8, Fp8Recipe::Delayed, 1.0).0, 4.0625);
        // NVFP4: 2 + 2·(0.5 + 0.0625) + 2 = 5.125.
        assert_relative_eq!(cast(Precision::Nvfp4, Fp8Recipe::Delayed, 1.0).0, 5.125);
        assert_eq!(cast(Precision::Bf16, Fp8Recipe::Delayed, 1e9), (0.0, 0.0));
        assert_eq!(weight_copy_bytes(Precision::Bf16, Fp8Recipe::Delayed), 0.0);
    }
}
