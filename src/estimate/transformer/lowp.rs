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
//! - `fp8` (delayed or current) on a device whose tensor cores take FP8 operands in any
//!   layout (Blackwell, [`crate::compute::DeviceSpec::fp8_any_layout`]): one copy, the
//!   same bytes serve both GEMM orientations (Transformer Engine's `Float8Quantizer`
//!   allocates the transpose only when `nvte_is_non_tn_fp8_gemm_supported()` is false,
//!   `pytorch/csrc/quantizer.cpp`; true for compute capability 10.x, 11.x and ≥ 13.0,
//!   `pytorch/utils.py` `is_non_tn_fp8_gemm_supported`): `2 + 1 = 3` (`+2` current);
//! - `mxfp8`: row- and column-wise copies with an E8M0 scale per 32 (OCP MX v1.0):
//!   `2 + 2·(1 + 1/32)`;
//! - `nvfp4`: row- and column-wise 4-bit copies with an E4M3 scale per 16 and a
//!   per-tensor amax pass: `2 + 2·(0.5 + 1/16) + 2`.

use crate::compute::{Fp8Recipe, Precision};

/// (bytes written per element for the quantized copies, extra bytes read per element
/// beyond the one read of the 16-bit input, kernels per quantized tensor); `any_layout`:
/// the device's FP8 GEMMs take every layout (no transposed copy for per-tensor scaling).
fn copies(p: Precision, r: Fp8Recipe, any_layout: bool) -> (f64, f64, f64) {
    let tensorwise = if any_layout { 1.0 } else { 2.0 };
    match (p, r) {
        (Precision::Fp8, Fp8Recipe::Delayed) => (tensorwise, 0.0, 1.0),
        (Precision::Fp8, Fp8Recipe::Current) => (tensorwise, 2.0, 2.0),
        (Precision::Fp8, Fp8Recipe::Block) => (2.0 * (1.0 + 4.0 / 128.0), 0.0, 1.0),
        (Precision::Mxfp8, _) => (2.0 * (1.0 + 1.0 / 32.0), 0.0, 1.0),
        (Precision::Nvfp4, _) => (2.0 * (0.5 + 1.0 / 16.0), 2.0, 2.0),
        _ => (0.0, 0.0, 0.0),
    }
}

/// Bytes moved and kernels launched to quantize `elements` 16-bit values as `p` with
/// recipe `r` (zero for 16- and 32-bit precisions).
pub(super) fn cast(p: Precision, r: Fp8Recipe, any_layout: bool, elements: f64) -> (f64, f64) {
    let (write, extra_read, kernels) = copies(p, r, any_layout);
    if write == 0.0 {
        return (0.0, 0.0);
    }
    (elements * (2.0 + extra_read + write), kernels)
}

/// Extra bytes per parameter held for the quantized weight copies (row- and column-wise).
pub(super) fn weight_copy_bytes(p: Precision, r: Fp8Recipe, any_layout: bool) -> f64 {
    copies(p, r, any_layout).0
}

/// Bytes per parameter of the data-parallel parameter all-gather with low-precision
/// parameters (Megatron-core `fp8_param_gather` / `fp4_param_gather`, which Megatron-Bridge's
/// FP8, MXFP8 and NVFP4 mixed-precision recipes set): per-tensor FP8 gathers its 1-byte
/// row-wise data; MXFP8 gathers 16-bit values into the gradient buffer and quantizes after
/// (`reuse_grad_buf_for_mxfp8_param_ag`, `param_and_grad_buffer.py` `_post_param_sync`): 2;
/// NVFP4 its packed row-wise 4-bit data with an E4M3 scale per 16: `0.5 + 1/16`. Without
/// low-precision parameters, or in 16-bit: `e`.
pub(super) fn gathered_param_bytes(p: Precision, r: Fp8Recipe, fp8_params: bool, e: f64) -> f64 {
    match (fp8_params, p, r) {
        (true, Precision::Fp8, Fp8Recipe::Delayed | Fp8Recipe::Current) => 1.0,
        (true, Precision::Nvfp4, _) => 0.5 + 1.0 / 16.0,
        _ => e,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use approx::assert_relative_eq;

    #[test]
    fn bytes_per_element_by_hand() {
        // Hopper FP8, delayed scaling: read 2 B, write 1 B row-wise + 1 B transposed.
        assert_eq!(
            cast(Precision::Fp8, Fp8Recipe::Delayed, false, 1.0),
            (4.0, 1.0)
        );
        // Current scaling reads the tensor once more for its amax.
        assert_eq!(
            cast(Precision::Fp8, Fp8Recipe::Current, false, 1.0),
            (6.0, 2.0)
        );
        // Blackwell: no transposed copy, read 2 + write 1 (+2 for the amax).
        assert_eq!(
            cast(Precision::Fp8, Fp8Recipe::Delayed, true, 1.0),
            (3.0, 1.0)
        );
        assert_eq!(
            cast(Precision::Fp8, Fp8Recipe::Current, true, 1.0),
            (5.0, 2.0)
        );
        assert_eq!(
            weight_copy_bytes(Precision::Fp8, Fp8Recipe::Current, true),
            1.0
        );
        assert_eq!(
            weight_copy_bytes(Precision::Fp8, Fp8Recipe::Current, false),
            2.0
        );
        // MXFP8: 2 + 2·(1 + 1/32) = 4.0625, on any device (both orientations are scaled
        // along different axes, so both copies exist).
        for any in [false, true] {
            assert_relative_eq!(
                cast(Precision::Mxfp8, Fp8Recipe::Delayed, any, 1.0).0,
                4.0625
            );
            // NVFP4: 2 + 2·(0.5 + 0.0625) + 2 = 5.125.
            assert_relative_eq!(
                cast(Precision::Nvfp4, Fp8Recipe::Delayed, any, 1.0).0,
                5.125
            );
        }
        // Block-scaled FP8 (DeepSeek-V3's 1×128 / 128×128 tiles): row- and column-wise
        // copies on every device, each with an FP32 scale per 128 elements:
        // 2 + 2·(1 + 4/128) = 4.0625 B per element in one kernel, 2.0625 B of copies per
        // weight.
        for any in [false, true] {
            assert_eq!(
                cast(Precision::Fp8, Fp8Recipe::Block, any, 1.0),
                (4.0625, 1.0)
            );
            assert_eq!(
                weight_copy_bytes(Precision::Fp8, Fp8Recipe::Block, any),
                2.0625
            );
        }
        assert_eq!(
            cast(Precision::Bf16, Fp8Recipe::Delayed, true, 1e9),
            (0.0, 0.0)
        );
        assert_eq!(
            weight_copy_bytes(Precision::Bf16, Fp8Recipe::Delayed, true),
            0.0
        );
    }

    #[test]
    fn gathered_parameter_bytes_by_hand() {
        let g = gathered_param_bytes;
        assert_eq!(g(Precision::Fp8, Fp8Recipe::Current, true, 2.0), 1.0);
        assert_eq!(g(Precision::Fp8, Fp8Recipe::Delayed, true, 2.0), 1.0);
        assert_eq!(g(Precision::Fp8, Fp8Recipe::Current, false, 2.0), 2.0);
        assert_eq!(g(Precision::Mxfp8, Fp8Recipe::Delayed, true, 2.0), 2.0);
        assert_eq!(g(Precision::Nvfp4, Fp8Recipe::Delayed, true, 2.0), 0.5625);
        assert_eq!(g(Precision::Bf16, Fp8Recipe::Delayed, true, 2.0), 2.0);
        // Block-scaled FP8 keeps 16-bit gathers (Megatron-Bridge sets fp8_param_gather off).
        assert_eq!(g(Precision::Fp8, Fp8Recipe::Block, true, 2.0), 2.0);
    }
}
