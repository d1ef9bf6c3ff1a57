//! The accelerator and its roofline: [`DeviceSpec`] is the TOML mirror of a device preset,
//! [`Device`] the validated form the estimate uses. It owns the time of one kernel:
//! a GEMM whose efficiency depends on its shape ([`Device::gemm_time`]), a memory-bound
//! elementwise kernel ([`Device::memory_time`]) and the launch overhead per kernel.
//!
//! Roofline (DESIGN.md §3; Williams et al. 2009): an op with F FLOPs moving M bytes takes
//! `max(F / (peak · e_f), M / (bw · e_m))`. GEMMs are compute-bound in every shape the
//! estimate produces; elementwise kernels are memory-bound.

use crate::error::{Error, Result};
use crate::units::{Bandwidth, Bytes, Flop, FlopRate, Seconds, serde_units};
use serde::{Deserialize, Serialize};

/// Number formats the matrix units run in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum Precision {
    /// IEEE half precision (with fp32 master weights for training).
    Fp16,
    /// bfloat16 (with fp32 master weights).
    #[default]
    Bf16,
    /// 8-bit floating point (E4M3/E5M2) matrix inputs, as Transformer Engine.
    Fp8,
    /// TensorFloat-32 matrix inputs.
    Tf32,
    /// Plain fp32.
    Fp32,
    /// MXFP8: FP8 elements with an E8M0 scale per 32 (OCP Microscaling spec v1.0;
    /// Blackwell tensor cores run it at the FP8 rate).
    Mxfp8,
    /// NVFP4: E2M1 elements with an E4M3 scale per 16 and a per-tensor FP32 scale
    /// (NVIDIA Blackwell; NVIDIA 2025, "Pretraining Large Language Models with NVFP4").
    Nvfp4,
}

impl Precision {
    /// Every precision, for error messages.
    pub const NAMES: [&'static str; 7] = ["fp16", "bf16", "fp8", "tf32", "fp32", "mxfp8", "nvfp4"];

    /// Every precision, in `NAMES` order.
    pub const ALL: [Precision; 7] = [
        Precision::Fp16,
        Precision::Bf16,
        Precision::Fp8,
        Precision::Tf32,
        Precision::Fp32,
        Precision::Mxfp8,
        Precision::Nvfp4,
    ];

    /// Whether the linear layers run in an 8- or 4-bit format (Transformer Engine casts
    /// their inputs; attention and everything else stay 16-bit).
    pub fn is_low(self) -> bool {
        matches!(self, Precision::Fp8 | Precision::Mxfp8 | Precision::Nvfp4)
    }

    /// Parses a name with did-you-mean.
    pub fn parse(s: &str) -> Result<Precision> {
        match s.trim().to_ascii_lowercase().as_str() {
            "fp16" | "f16" | "half" => Ok(Precision::Fp16),
            "bf16" | "bfloat16" => Ok(Precision::Bf16),
            "fp8" | "f8" => Ok(Precision::Fp8),
            "tf32" => Ok(Precision::Tf32),
            "fp32" | "f32" | "float" => Ok(Precision::Fp32),
            "mxfp8" => Ok(Precision::Mxfp8),
            "nvfp4" | "fp4" => Ok(Precision::Nvfp4),
            _ => Err(Error::unknown("precision", s, &Self::NAMES)),
        }
    }

    /// The name used in files and flags.
    pub fn name(self) -> &'static str {
        Self::NAMES[self as usize]
    }

    /// Bytes of one activation element stored between kernels. FP8 training keeps
    /// activations in bf16 between kernels (Transformer Engine casts at the GEMM inputs).
    pub fn activation_bytes(self) -> f64 {
        match self {
            Precision::Fp16
            | Precision::Bf16
            | Precision::Fp8
            | Precision::Mxfp8
            | Precision::Nvfp4 => 2.0,
            Precision::Tf32 | Precision::Fp32 => 4.0,
        }
    }
}

/// Dense matrix-unit peaks per precision, as in a datasheet. Absent = not supported.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MatrixPeaks {
    /// FP16 dense peak.
    #[serde(default, with = "opt_rate", skip_serializing_if = "Option::is_none")]
    pub fp16: Option<FlopRate>,
    /// BF16 dense peak.
    #[serde(default, with = "opt_rate", skip_serializing_if = "Option::is_none")]
    pub bf16: Option<FlopRate>,
    /// FP8 dense peak.
    #[serde(default, with = "opt_rate", skip_serializing_if = "Option::is_none")]
    pub fp8: Option<FlopRate>,
    /// TF32 dense peak.
    #[serde(default, with = "opt_rate", skip_serializing_if = "Option::is_none")]
    pub tf32: Option<FlopRate>,
    /// FP32 matrix peak.
    #[serde(default, with = "opt_rate", skip_serializing_if = "Option::is_none")]
    pub fp32: Option<FlopRate>,
    /// MXFP8 dense peak (Blackwell and later).
    #[serde(default, with = "opt_rate", skip_serializing_if = "Option::is_none")]
    pub mxfp8: Option<FlopRate>,
    /// NVFP4 dense peak (Blackwell and later).
    #[serde(default, with = "opt_rate", skip_serializing_if = "Option::is_none")]
    pub nvfp4: Option<FlopRate>,
}

/// Sustained-efficiency parameters of a device (fractions of peak), with defaults.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EfficiencySpec {
    /// Fraction of matrix peak a large, well-shaped GEMM sustains (cuBLAS plateau).
    pub gemm: f64,
    /// Fraction of its own peak a large 8- or 4-bit GEMM (FP8, MXFP8, NVFP4) sustains, when
    /// it differs from `gemm` (the denser math draws more power per second and the clocks
    /// drop further under the board's power limit). Default: `gemm`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gemm_lowp: Option<f64>,
    /// Sustained rate of a large NVFP4 GEMM as a multiple of the 8-bit (MXFP8, else FP8)
    /// GEMM's, when that is below the ratio of the peaks: the 4-bit main loop then runs at
    /// `min(peak_nvfp4, r · peak_8bit)` ([`Device::gemm_peak`]). Default: the peaks' ratio.
    /// NVIDIA's B300 measurement (Transformer Engine, "GEMM Profiling Tutorial",
    /// pre-quantized 5B-model GEMMs, M = 15,872): NVFP4 5.09 PFLOP/s against MXFP8 2.68,
    /// 1.90× where the peaks differ 3×.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gemm_fp4_vs_fp8: Option<f64>,
    /// GEMM tile (rows × columns of the output one compute unit produces per wave).
    #[serde(default = "default_tile")]
    pub gemm_tile: [u32; 2],
    /// K at which the per-tile fixed cost (prologue, epilogue, C write) equals the
    /// main-loop time: efficiency × K/(K + k0).
    #[serde(default = "default_k0")]
    pub gemm_k_overhead: u32,
    /// Extra factor on the batched attention GEMMs (QKᵀ, attention·V) of unfused attention.
    #[serde(default = "one")]
    pub attention: f64,
    /// Fraction of the 16-bit matrix peak the fused (flash) attention forward kernel
    /// sustains at long sequences (`transformer/layer.rs`, `fused_attention`). Default 0.35:
    /// FlashAttention-2 as measured on H100 (Shah et al. 2024, FlashAttention-3, Fig. 5:
    /// 335 TFLOP/s causal, head size 128); devices without a measured value of their own
    /// (A100, MI300X, …) use it as a stand-in.
    #[serde(default = "default_flash_fwd")]
    pub flash_fwd: f64,
    /// The same for the fused backward kernel (its FLOPs counted as 2.5 × forward). Default
    /// 0.33 (FlashAttention-3 paper, Fig. 6: FlashAttention-2 backward 322 TFLOP/s on H100).
    #[serde(default = "default_flash_bwd")]
    pub flash_bwd: f64,
    /// Sequence length (tokens per kernel) at which the fused attention kernel reaches half
    /// its long-sequence efficiency: `e(n) = e · n/(n + n0)`. Default 384: the forward and
    /// backward curves of FlashAttention-2 and cuDNN in the FlashAttention-3 paper (Fig. 5,
    /// 6; head size 128) reach 0.57–0.6 of their 16K value at 512 tokens.
    #[serde(default = "default_flash_n0")]
    pub flash_n0: u32,
    /// FlashAttention-2's forward efficiency on this device (fraction of the 16-bit peak at
    /// long sequences), for plans with `--attention-kernel fa2`; unset: the device has no
    /// measured FlashAttention-2 rates and such a plan is refused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fa2_fwd: Option<f64>,
    /// FlashAttention-2's backward efficiency (its FLOPs counted as 2.5 × forward).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fa2_bwd: Option<f64>,
    /// FlashAttention-2's half-saturation sequence length, as `flash_n0`; unset: `flash_n0`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fa2_n0: Option<u32>,
    /// Exponentials per second of the special-function units (written as a rate, e.g.
    /// "3.9 TFLOP/s": the FlashAttention-3 paper quotes H100 SXM5's as "3.9 TFLOPS of
    /// special functions", against 989 of BF16 matrix math). Fused attention spends one per
    /// score, whatever the head size, so heads narrower than 128 run below the measured
    /// rate ([`Device::head_size_factors`]). Unset: no head-size correction.
    #[serde(default, with = "opt_rate", skip_serializing_if = "Option::is_none")]
    pub exp_rate: Option<FlopRate>,
    /// Fused attention with 8-bit inputs (Transformer Engine's FP8 dot-product attention,
    /// Megatron-core `fp8_dot_product_attention`, `--fp8-attention`) with per-tensor FP8
    /// scaling: its `[forward, backward]` speed-up over the 16-bit fused kernel at the same
    /// shape (causal, head size 128). Also the rate under an NVFP4 recipe, whose attention
    /// runs in FP8 with current scaling (Megatron-Bridge `ffa5b7b59`). Unset: the device has
    /// no measured 8-bit attention and such a plan is refused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fp8_attention: Option<[f64; 2]>,
    /// The same with MXFP8 inputs (an E8M0 scale per 32).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mxfp8_attention: Option<[f64; 2]>,
    /// Whether the 8-bit backward kernel computes every causal tile under a sliding window
    /// (its time that of full causal attention) where the 16-bit one computes the band only:
    /// cuDNN's FP8 and MXFP8 SDPA backward on GB200 and GB300 grows with `s²` at a window
    /// of 128 (cudnn-frontend `benchmark/sdpa_benchmark_training/results/gpt_oss`, cuDNN
    /// 9.22: 0.58, 1.87, 6.65, 25.0, 96.9 ms at 2K–32K tokens, where BF16's grows with `s`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub fp8_attention_bwd_full: bool,
    /// The chunked gated delta rule's forward kernels (flash-linear-attention's
    /// `chunk_gated_delta_rule`, which Megatron-LM's Gated DeltaNet layers call; head sizes
    /// 128, chunks of 64) as `[α, β]`: `T = n·(α + β·H)` for `n` tokens of a sequence and
    /// `H` value heads, `α` the per-token time of the recurrence that runs along the
    /// sequence and `β` the time per token and head, fitted to a published kernel
    /// benchmark on this device or its generation. Unset: the device has no measured
    /// times and models with Gated DeltaNet layers are refused on it.
    #[serde(default, with = "opt_pair", skip_serializing_if = "Option::is_none")]
    pub gdn_fwd: Option<[Seconds; 2]>,
    /// The same for the backward kernels (which recompute the chunk states).
    #[serde(default, with = "opt_pair", skip_serializing_if = "Option::is_none")]
    pub gdn_bwd: Option<[Seconds; 2]>,
    /// Fraction of HBM bandwidth an elementwise kernel sustains (STREAM-like).
    pub memory: f64,
    /// Fixed cost of one kernel launch and tail.
    #[serde(with = "serde_units::seconds", default = "default_launch")]
    pub kernel_overhead: Seconds,
    /// Host (CPU) time of one eager framework operation with its launch: Python,
    /// PyTorch's dispatcher and autograd, `cudaLaunchKernel` (`estimate::transformer`'s
    /// host module). Default 20 µs, fitted on the 58 Qwen3 MoE rows of Megatron-Bridge's
    /// 2025–2026 tables (least mean over the five systems of (median + 90th percentile
    /// |error|)/2; leave-one-system-out fits 20–22.5 µs; docs/modern-training.md);
    /// an isolated `torch.nn.Linear` forward takes 13.5 µs on a DGX H100's Xeon 8480C
    /// (NVIDIA/TransformerEngine issue #2053), the floor of a training process's cost.
    #[serde(with = "serde_units::seconds", default = "default_host_op")]
    pub host_op: Seconds,
    /// Interference κ: compute that runs while a collective is in flight is stretched by
    /// `1 + κ` (collective kernels occupy SMs and HBM bandwidth). Default 0.189: the mean
    /// GEMM slowdown under overlapped NCCL collectives measured by Lee et al. 2025
    /// (arXiv 2507.03114) on A100, H100, MI250 and MI210 (maximum 0.40).
    #[serde(default = "default_overlap_slowdown")]
    pub overlap_slowdown: f64,
    /// σ: an expert-parallel dispatch or combine that runs beside compute (the EP overlap,
    /// DualPipe, the shared-expert overlap) takes `1 + σ` times as long as alone: its
    /// kernels share the SMs' issue slots, HBM and the NVLink/NIC queues with the compute
    /// kernels beside them. Default 0.31, read off Megatron-Bridge's rank-0 Nsight A/B of
    /// the EP overlap (16 H100, Qwen3-30B-A3B, HybridEP, BF16; `skills/
    /// nemo-mbridge-perf-moe-comm-overlap/SKILL.md` at 067f987df0): the same communication
    /// kernels took 8.25 s in a step without the overlap (9.079 ms concurrent with compute
    /// = 0.11 %) and 10.83 s with it (3,958.997 ms concurrent = 36.55 %), +31 % (+25…+37 %
    /// over the rounding of the 0.11 %).
    #[serde(default = "default_ep_comm_slowdown")]
    pub ep_comm_slowdown: f64,
}

fn default_host_op() -> Seconds {
    Seconds::new(20e-6)
}

fn default_overlap_slowdown() -> f64 {
    0.189
}

fn default_ep_comm_slowdown() -> f64 {
    0.31
}

fn default_flash_fwd() -> f64 {
    0.35
}
fn default_flash_bwd() -> f64 {
    0.33
}
fn default_flash_n0() -> u32 {
    384
}

fn default_tile() -> [u32; 2] {
    [256, 128]
}
fn default_k0() -> u32 {
    64
}
fn one() -> f64 {
    1.0
}
fn default_launch() -> Seconds {
    Seconds::new(25e-6)
}

/// A device preset as written in `presets/devices/*.toml`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DeviceSpec {
    /// Short name used on the command line (`a100-80gb`).
    pub name: String,
    /// Human description.
    #[serde(default)]
    pub description: String,
    /// HBM capacity, e.g. "80 GiB".
    #[serde(with = "serde_units::bytes")]
    pub memory: Bytes,
    /// Memory a training process cannot give to model states and activations (CUDA
    /// context, NCCL buffers, cuBLAS/cuDNN workspaces, allocator fragmentation), e.g.
    /// "6 GiB"; unset: [`Device::memory_reserve`]'s default.
    #[serde(
        default,
        with = "crate::parallel::opt_bytes",
        skip_serializing_if = "Option::is_none"
    )]
    pub memory_reserve: Option<Bytes>,
    /// HBM bandwidth, e.g. "2039 GB/s".
    #[serde(with = "serde_units::bandwidth")]
    pub memory_bandwidth: Bandwidth,
    /// Non-matrix (vector) FP32 peak.
    #[serde(with = "serde_units::flop_rate")]
    pub vector: FlopRate,
    /// Streaming multiprocessors / compute units (wave quantisation of GEMM tiles).
    pub compute_units: u32,
    /// The tensor cores take per-tensor-scaled FP8 operands in every layout, so FP8 keeps
    /// one copy of a quantized tensor instead of a row-wise one and a transpose (Transformer
    /// Engine, `is_non_tn_fp8_gemm_supported`: compute capability 10.x, 11.x and ≥ 13.0,
    /// i.e. Blackwell; Hopper takes only the TN layout). Default false.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub fp8_any_layout: bool,
    /// Dense matrix peaks per precision.
    pub matrix: MatrixPeaks,
    /// Sustained efficiencies.
    pub efficiency: EfficiencySpec,
}

/// A validated device. All rates are datasheet peaks; efficiencies are in (0, 1].
#[derive(Clone, Debug, PartialEq)]
pub struct Device {
    /// The spec it was built from (for `show` and `--explain`).
    pub spec: DeviceSpec,
    /// Matrix peaks in FLOP/s in [`Precision::ALL`] order; 0 = unsupported.
    peaks: [f64; 7],
}

impl Device {
    /// Validates a spec: positive rates and sizes, efficiencies in (0, 1], tile ≥ 1.
    pub fn from_spec(spec: DeviceSpec) -> Result<Device> {
        let what = format!("device '{}'", spec.name);
        let e = &spec.efficiency;
        for (k, v) in [
            ("gemm", e.gemm),
            ("gemm_lowp", e.gemm_lowp.unwrap_or(e.gemm)),
            ("attention", e.attention),
            ("flash_fwd", e.flash_fwd),
            ("flash_bwd", e.flash_bwd),
            ("fa2_fwd", e.fa2_fwd.unwrap_or(e.flash_fwd)),
            ("fa2_bwd", e.fa2_bwd.unwrap_or(e.flash_bwd)),
            ("memory", e.memory),
        ] {
            if !(v > 0.0 && v <= 1.0) {
                return Err(Error::input(
                    format!("{what}: efficiency.{k}"),
                    format!("must be in (0, 1], got {v}"),
                ));
            }
        }
        if let Some(r) = e.gemm_fp4_vs_fp8
            && !(r > 0.0 && r.is_finite())
        {
            return Err(Error::input(
                format!("{what}: efficiency.gemm_fp4_vs_fp8"),
                format!("must be a positive ratio, got {r}"),
            ));
        }
        if let Some(x) = e.exp_rate
            && !(x.get() > 0.0 && x.get().is_finite())
        {
            return Err(Error::input(
                format!("{what}: efficiency.exp_rate"),
                format!("must be a positive rate, got {}", x.get()),
            ));
        }
        for (k, v) in [
            ("fp8_attention", e.fp8_attention),
            ("mxfp8_attention", e.mxfp8_attention),
        ] {
            if let Some(r) = v
                && !r.iter().all(|x| *x > 0.0 && x.is_finite())
            {
                return Err(Error::input(
                    format!("{what}: efficiency.{k}"),
                    format!(
                        "must be two positive speed-ups [forward, backward], got {:?}",
                        r
                    ),
                ));
            }
        }
        for (k, v) in [("gdn_fwd", e.gdn_fwd), ("gdn_bwd", e.gdn_bwd)] {
            if let Some(p) = v
                && !p.iter().all(|t| t.get() >= 0.0 && t.get().is_finite())
            {
                return Err(Error::input(
                    format!("{what}: efficiency.{k}"),
                    format!(
                        "must be two finite times ≥ 0 [α, β], got [{} s, {} s]",
                        p[0].get(),
                        p[1].get()
                    ),
                ));
            }
        }
        for (key, v) in [
            ("overlap_slowdown", e.overlap_slowdown),
            ("ep_comm_slowdown", e.ep_comm_slowdown),
        ] {
            if !(0.0..=1.0).contains(&v) {
                return Err(Error::input(
                    format!("{what}: efficiency.{key}"),
                    format!("must be in [0, 1], got {v}"),
                ));
            }
        }
        if spec.compute_units == 0 || e.gemm_tile.contains(&0) {
            return Err(Error::input(
                &what,
                "compute_units and gemm_tile must be ≥ 1",
            ));
        }
        if spec.memory.get() <= 0.0 || spec.memory_bandwidth.get() <= 0.0 {
            return Err(Error::input(
                &what,
                "memory and memory_bandwidth must be > 0",
            ));
        }
        let m = &spec.matrix;
        let peaks = [m.fp16, m.bf16, m.fp8, m.tf32, m.fp32, m.mxfp8, m.nvfp4]
            .map(|p| p.map_or(0.0, |r| r.get()));
        if peaks.iter().all(|&p| p <= 0.0) {
            return Err(Error::input(&what, "matrix: needs at least one peak"));
        }
        Ok(Device { spec, peaks })
    }

    /// The short name.
    pub fn name(&self) -> &str {
        &self.spec.name
    }

    /// This device with the `p` matrix peak multiplied by `k` (sensitivity, co-design
    /// sweeps); a precision the device lacks stays absent.
    pub fn with_peak_scaled(&self, p: Precision, k: f64) -> Device {
        let mut d = self.clone();
        d.peaks[p as usize] *= k;
        let m = &mut d.spec.matrix;
        let slot = match p {
            Precision::Fp16 => &mut m.fp16,
            Precision::Bf16 => &mut m.bf16,
            Precision::Fp8 => &mut m.fp8,
            Precision::Tf32 => &mut m.tf32,
            Precision::Fp32 => &mut m.fp32,
            Precision::Mxfp8 => &mut m.mxfp8,
            Precision::Nvfp4 => &mut m.nvfp4,
        };
        if let Some(r) = slot {
            *r = *r * k;
        }
        d
    }

    /// HBM capacity.
    pub fn memory(&self) -> Bytes {
        self.spec.memory
    }

    /// Memory set aside per device before model states and activations: the preset's
    /// `memory_reserve`, else `1.5 GiB + 3 %` of the capacity (4.9 GB on an 80 GB H100).
    /// The fixed part is what a PyTorch training process holds outside its tensors: the
    /// CUDA context with its kernel images (about 0.5 GiB with lazy module loading),
    /// NCCL's communicators (each channel keeps `NCCL_BUFFSIZE` = 4 MiB per peer and
    /// protocol; NCCL documentation, "Environment Variables"; about 1 GiB for a job's TP,
    /// PP, DP and CP groups) and the cuBLAS/cuDNN/Transformer Engine workspaces (32 MiB each
    /// per stream on Hopper). The proportional part is the caching allocator's
    /// fragmentation: blocks cached but unusable for the next request (Guo et al.,
    /// "GMLake", ASPLOS 2024, measure up to about 30 % of memory wasted in LLM fine-tuning
    /// with PyTorch's default allocator; NVIDIA's benchmark recipes set
    /// `expandable_segments:True`, which maps segments on demand and removes most of it,
    /// so 3 % is kept). A documented assumption, not a fit: `--memory-reserve` or the
    /// device file's `memory_reserve` sets it.
    pub fn memory_reserve(&self) -> Bytes {
        self.spec.memory_reserve.unwrap_or(Bytes::new(
            1.5 * 1073741824.0 + 0.03 * self.spec.memory.get(),
        ))
    }

    /// The fused-attention kernel's rates on this device, `(forward, backward, n0)`: the
    /// fractions of the 16-bit peak it sustains at long sequences and the sequence length
    /// at which it reaches half of them (`e(n) = e·n/(n + n0)`). `Te` takes the `flash_*`
    /// keys; `Fa2` the `fa2_*` keys, or an error when the device file has none (only
    /// devices with a published FlashAttention-2 measurement carry them).
    pub fn attention_rates(
        &self,
        kernel: crate::parallel::AttentionKernel,
    ) -> Result<(f64, f64, u32)> {
        let e = &self.spec.efficiency;
        match kernel {
            crate::parallel::AttentionKernel::Te => Ok((e.flash_fwd, e.flash_bwd, e.flash_n0)),
            crate::parallel::AttentionKernel::Fa2 => match (e.fa2_fwd, e.fa2_bwd) {
                (Some(f), Some(b)) => Ok((f, b, e.fa2_n0.unwrap_or(e.flash_n0))),
                _ => Err(Error::input(
                    "--attention-kernel",
                    format!(
                        "device '{}' has no FlashAttention-2 rates (efficiency.fa2_fwd and fa2_bwd in its device file); use te, or give them in a device file",
                        self.spec.name
                    ),
                )),
            },
        }
    }

    /// The chunked gated delta rule's `[α, β]` on this device, `(forward, backward)`
    /// (`efficiency.gdn_fwd`, `gdn_bwd`), or an error naming the device and the keys when
    /// its file has none.
    pub fn gdn_rates(&self) -> Result<([Seconds; 2], [Seconds; 2])> {
        let e = &self.spec.efficiency;
        match (e.gdn_fwd, e.gdn_bwd) {
            (Some(f), Some(b)) => Ok((f, b)),
            _ => Err(Error::input(
                "--model",
                format!(
                    "has Gated DeltaNet layers, and device '{}' has no measured delta-rule kernel times (efficiency.gdn_fwd and gdn_bwd in its device file); give them in a device file",
                    self.spec.name
                ),
            )),
        }
    }

    /// The speed-ups of 8-bit fused attention over the 16-bit kernel under precision `p`,
    /// `(forward, backward)`: MXFP8 plans take `mxfp8_attention`, FP8 and NVFP4 plans
    /// `fp8_attention` (an NVFP4 recipe runs its attention in FP8 with current scaling).
    /// An error naming the device and the key when the device file has none, or when `p` is
    /// not an 8- or 4-bit precision.
    pub fn fp8_attention_speedup(&self, p: Precision) -> Result<(f64, f64)> {
        let e = &self.spec.efficiency;
        let (key, rates) = match p {
            Precision::Mxfp8 => ("mxfp8_attention", e.mxfp8_attention),
            Precision::Fp8 | Precision::Nvfp4 => ("fp8_attention", e.fp8_attention),
            _ => {
                return Err(Error::input(
                    "--fp8-attention",
                    format!(
                        "8-bit attention needs an fp8, mxfp8 or nvfp4 precision, not {}",
                        p.name()
                    ),
                ));
            }
        };
        rates.map(|[f, b]| (f, b)).ok_or_else(|| {
            Error::input(
                "--fp8-attention",
                format!(
                    "device '{}' has no measured {} attention rate (efficiency.{key} in its device file); drop the flag, or give the rate in a device file",
                    self.spec.name,
                    p.name()
                ),
            )
        })
    }

    /// Factors on the fused-attention time of heads narrower than 128, `(forward,
    /// backward)`, for kernel rates `(e_fwd, e_bwd)` measured at head size 128 against
    /// `peak`, and a mean head size `d̄ = (d_qk + d_v)/2`.
    ///
    /// A fused kernel spends, per score, `2·(d_qk + d_v)` FLOPs in its two GEMMs (2.5× that
    /// backward) and one exponential (backward: one, recomputing the probabilities), in
    /// series on different units (Shah et al. 2024, FlashAttention-3, §3.1: H100's 3.9
    /// TFLOPS of special functions against 989 of matrix math, so the exponentials take
    /// half the GEMMs' cycles at head size 128). With `τ = 512/(peak·e)` the measured time
    /// per score at head size 128 (`1280/(peak·e_bwd)` backward) and `τ_x = 1/exp_rate`,
    /// the GEMMs take `τ − τ_x`; at `d̄` they take `(τ − τ_x)·d̄/128` and the exponential
    /// still `τ_x`, so the time per FLOP rises by
    /// `r = ((τ − τ_x)·d̄/128 + τ_x) / (τ·d̄/128)`.
    /// Checked against the same paper's Fig. 5 (H100, forward, 16K tokens): head size 64
    /// runs at 0.69 (cuDNN), 0.88 (FlashAttention-2) and 0.77 (FlashAttention-3) of head
    /// size 128's TFLOP/s, where `1/r` gives 0.77, 0.84 and 0.76 from each kernel's own
    /// rate (tests/fused_attention.rs). Wider heads keep the measured rate (`r = 1`): the
    /// same figure has cuDNN at head size 256 at 0.97 of 128 and FlashAttention-2 at 0.88,
    /// register-bound, where the series model would promise 1.2. Without `exp_rate`, 1.
    pub fn head_size_factors(&self, rates: (f64, f64), peak: FlopRate, d_mean: f64) -> (f64, f64) {
        let Some(x) = self.spec.efficiency.exp_rate else {
            return (1.0, 1.0);
        };
        if d_mean >= 128.0 {
            return (1.0, 1.0);
        }
        let tx = 1.0 / x.get();
        let w = d_mean / 128.0;
        let r = |flop: f64, e: f64| {
            let tau = flop / (peak.get() * e);
            ((tau - tx).max(0.0) * w + tx) / (tau * w)
        };
        (r(512.0, rates.0), r(1280.0, rates.1))
    }

    /// Dense matrix peak in `p`, or an error naming the precisions the device has.
    pub fn peak(&self, p: Precision) -> Result<FlopRate> {
        let v = self.peaks[p as usize];
        if v > 0.0 {
            return Ok(FlopRate::new(v));
        }
        Err(Error::Unsupported(format!(
            "device '{}' has no {} matrix peak",
            self.spec.name,
            p.name()
        )))
    }

    /// The rate the linear layers' GEMM main loop runs at in precision `p`: the datasheet
    /// peak, except NVFP4 on a device with `gemm_fp4_vs_fp8 = r`, whose 4-bit GEMMs reach
    /// only `r` times the 8-bit ones: `min(peak_nvfp4, r · peak_mxfp8)` (FP8's peak when
    /// the device lists no MXFP8). MFU stays quoted against the datasheet peaks.
    pub fn gemm_peak(&self, p: Precision) -> Result<FlopRate> {
        let peak = self.peak(p)?;
        let (Precision::Nvfp4, Some(r)) = (p, self.spec.efficiency.gemm_fp4_vs_fp8) else {
            return Ok(peak);
        };
        let eight = self
            .peak(Precision::Mxfp8)
            .or_else(|_| self.peak(Precision::Fp8));
        Ok(eight.map_or(peak, |p8| FlopRate::new(peak.get().min(r * p8.get()))))
    }

    /// The dense 16-bit peak MFU is quoted against (BF16, else FP16, else `fallback`): one
    /// yardstick whatever the plan's precision, so MFU compares plans across precisions.
    pub fn peak16(&self, fallback: FlopRate) -> FlopRate {
        self.peak(Precision::Bf16)
            .or_else(|_| self.peak(Precision::Fp16))
            .unwrap_or(fallback)
    }

    /// Fraction of peak a GEMM C[M×N] = A[M×K]·B[K×N] (repeated `batch` times) reaches.
    ///
    /// `e(M,N,K) = e_gemm · q · K/(K + k0)` where the quantisation factor
    /// `q = M·N·batch / (⌈T/U⌉ · U · t_m · t_n)`, `T = ⌈M/t_m⌉·⌈N/t_n⌉·batch` tiles on
    /// `U` compute units, counts tile quantisation (partial tiles) and wave quantisation
    /// (a last, partly filled wave): NVIDIA, "Matrix Multiplication Background User's
    /// Guide" (Deep Learning Performance docs, §"Tile quantization", §"Wave
    /// quantization"). The K/(K+k0) term is the per-tile fixed cost that makes GEMMs with
    /// a short inner dimension (small tensor-parallel shards) slower; the guide's
    /// measured throughput curves rise with K the same way. The best of the tile and its
    /// transpose is taken, as cuBLAS picks among kernels.
    pub fn gemm_efficiency(&self, m: f64, n: f64, k: f64, batch: f64) -> f64 {
        let e = &self.spec.efficiency;
        let (tm, tn) = (e.gemm_tile[0] as f64, e.gemm_tile[1] as f64);
        let u = self.spec.compute_units as f64;
        let q = |tm: f64, tn: f64| {
            let tiles = ceil(m / tm) * ceil(n / tn) * batch;
            let waves = ceil(tiles / u);
            (m * n * batch) / (waves * u * tm * tn)
        };
        let quant = q(tm, tn).max(q(tn, tm));
        e.gemm * quant * k / (k + e.gemm_k_overhead as f64)
    }

    /// Time of a GEMM of shape M×N×K (`batch` times) at `peak`: `2·M·N·K·batch / (peak·e)`.
    pub fn gemm_time(&self, peak: FlopRate, m: f64, n: f64, k: f64, batch: f64) -> Seconds {
        self.gemm_time_at(peak, 1.0, m, n, k, batch)
    }

    /// [`Device::gemm_time`] for a GEMM whose main loop runs `speedup` times faster than
    /// the 16-bit one (FP8: peak_fp8 / peak_bf16) while the per-tile fixed cost
    /// (prologue, epilogue writing the 16-bit output) takes the same time: in units of K
    /// the overhead grows to `k0 · speedup`, so short-K GEMMs gain less than the peak ratio.
    pub fn gemm_time_at(
        &self,
        peak: FlopRate,
        speedup: f64,
        m: f64,
        n: f64,
        k: f64,
        batch: f64,
    ) -> Seconds {
        if m <= 0.0 || n <= 0.0 || k <= 0.0 || batch <= 0.0 {
            return Seconds::ZERO;
        }
        let flop = Flop::new(2.0 * m * n * k * batch);
        let eff = &self.spec.efficiency;
        let k0 = eff.gemm_k_overhead as f64;
        // Low-precision plateau: `gemm_lowp / gemm` on the whole efficiency.
        let plateau = match eff.gemm_lowp {
            Some(l) if speedup > 1.0 => l / eff.gemm,
            _ => 1.0,
        };
        let e =
            self.gemm_efficiency(m, n, k, batch) * plateau * (k + k0) / (k + k0 * speedup.max(1.0));
        flop / (peak * e) + self.spec.efficiency.kernel_overhead
    }

    /// Time of memory-bound kernels moving `bytes` in `kernels` launches:
    /// `bytes / (bw · e_mem) + kernels · overhead`.
    pub fn memory_time(&self, bytes: Bytes, kernels: f64) -> Seconds {
        let bw = self.spec.memory_bandwidth * self.spec.efficiency.memory;
        bytes / bw + self.spec.efficiency.kernel_overhead * kernels
    }
}

/// How FP8 tensors are scaled (Transformer Engine recipes; precision `fp8`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum Fp8Recipe {
    /// Per-tensor scale from the amax history of earlier steps (fused with the cast).
    #[default]
    Delayed,
    /// Per-tensor scale from this tensor's amax: one extra read pass before the cast.
    Current,
    /// Blockwise scales (1×128 activations, 128×128 weights; DeepSeek-V3 §3.3.2).
    Block,
}

impl Fp8Recipe {
    /// The name in files and flags.
    pub fn name(self) -> &'static str {
        match self {
            Fp8Recipe::Delayed => "delayed",
            Fp8Recipe::Current => "current",
            Fp8Recipe::Block => "block",
        }
    }
}

/// Serde adaptor for an optional compute rate written as a string with a unit.
/// Two durations written with their units, `["24.4 ns", "1.03 ns"]`.
mod opt_pair {
    use super::*;
    use serde::{Deserialize, Deserializer, Serializer, de::Error as _, ser::SerializeSeq};

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<[Seconds; 2]>, D::Error> {
        let v = Vec::<String>::deserialize(d)?;
        let [a, b] = v.as_slice() else {
            return Err(D::Error::custom(format!(
                "expected two durations [α, β], e.g. [\"24.4 ns\", \"1.03 ns\"], got {} values",
                v.len()
            )));
        };
        let p = |s: &str| {
            crate::units::parse_seconds("value", s).map_err(|e| D::Error::custom(e.to_string()))
        };
        Ok(Some([p(a)?, p(b)?]))
    }

    pub fn serialize<S: Serializer>(v: &Option<[Seconds; 2]>, s: S) -> Result<S::Ok, S::Error> {
        match v {
            Some(p) => {
                let mut seq = s.serialize_seq(Some(2))?;
                for t in p {
                    seq.serialize_element(&crate::units::plain(t.get(), "s"))?;
                }
                seq.end()
            }
            None => s.serialize_none(),
        }
    }
}

mod opt_rate {
    use super::*;
    use serde::{Deserializer, Serializer};

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<FlopRate>, D::Error> {
        serde_units::flop_rate::deserialize(d).map(Some)
    }

    pub fn serialize<S: Serializer>(v: &Option<FlopRate>, s: S) -> Result<S::Ok, S::Error> {
        match v {
            Some(r) => serde_units::flop_rate::serialize(r, s),
            None => s.serialize_none(),
        }
    }
}

/// `x.ceil()` for the non-negative counts of [`Device::gemm_efficiency`], without a libm
/// call (the hot path of sweeps times dozens of GEMMs per estimate; without SSE4.1 the
/// compiler calls `ceil`). Values at or above 2^52 are already whole.
#[inline(always)]
fn ceil(x: f64) -> f64 {
    if x.is_nan() || x >= 4.5e15 {
        return x.ceil();
    }
    let t = x as i64 as f64;
    if t < x { t + 1.0 } else { t }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fast_ceil_matches_the_library() {
        for x in [
            0.0,
            0.5,
            1.0,
            1.0000001,
            2.5,
            107.99,
            108.0,
            1e15 + 0.5,
            9e15,
            -1.5,
            -2.0,
        ] {
            assert_eq!(super::ceil(x), x.ceil(), "{x}");
        }
    }
    use approx::assert_relative_eq;

    fn dev() -> Device {
        let spec: DeviceSpec = toml::from_str(
            r#"
name = "t"
memory = "80 GiB"
memory_bandwidth = "2000 GB/s"
vector = "19.5 TFLOP/s"
compute_units = 108
[matrix]
bf16 = "312 TFLOP/s"
[efficiency]
gemm = 0.8
memory = 0.8
gemm_k_overhead = 64
kernel_overhead = "0 s"
"#,
        )
        .unwrap();
        Device::from_spec(spec).unwrap()
    }

    /// The two interference factors default to their sources' values (κ = 0.189, Lee et
    /// al. 2025; σ = 0.31, Megatron-Bridge's 16×H100 profile) and are refused outside
    /// [0, 1], naming the key.
    #[test]
    fn interference_factors_default_and_are_checked() {
        let d = dev();
        assert_eq!(d.spec.efficiency.overlap_slowdown, 0.189);
        assert_eq!(d.spec.efficiency.ep_comm_slowdown, 0.31);
        for key in ["overlap_slowdown", "ep_comm_slowdown"] {
            let mut spec = d.spec.clone();
            match key {
                "overlap_slowdown" => spec.efficiency.overlap_slowdown = 1.5,
                _ => spec.efficiency.ep_comm_slowdown = -0.1,
            }
            let err = Device::from_spec(spec).unwrap_err().to_string();
            assert!(err.contains(&format!("efficiency.{key}")), "{err}");
            assert!(err.contains("must be in [0, 1]"), "{err}");
        }
    }

    #[test]
    fn wave_quantisation_by_hand() {
        let d = dev();
        // 256x128 tiles: M=256*108, N=128 → exactly one full wave, K huge → e → 0.8.
        let e = d.gemm_efficiency(256.0 * 108.0, 128.0, 1e9, 1.0);
        assert_relative_eq!(e, 0.8, max_relative = 1e-6);
        // 109 tiles of 256×128 → 2 waves of 108: q = 109/216. The transposed tile
        // (128×256) gives 218 half-empty tiles in 3 waves: q = 27904·128/(3·108·128·256).
        let e = d.gemm_efficiency(256.0 * 109.0, 128.0, 1e9, 1.0);
        let q2 = 27904.0 * 128.0 / (3.0 * 108.0 * 128.0 * 256.0);
        assert!(q2 < 109.0 / 216.0);
        assert_relative_eq!(e, 0.8 * 109.0 / 216.0, max_relative = 1e-6);
        // K = k0 halves the efficiency.
        let e = d.gemm_efficiency(256.0 * 108.0, 128.0, 64.0, 1.0);
        assert_relative_eq!(e, 0.4, max_relative = 1e-9);
    }

    #[test]
    fn low_precision_plateau_by_hand() {
        // gemm 0.8, gemm_lowp 0.6, FP8 main loop 2× faster: one full wave of 256×128 tiles,
        // K = 2^20: e = 0.6 · K/(K + 64·2) → t = 2·M·N·K / (peak · e).
        let mut spec = dev().spec;
        spec.efficiency.gemm_lowp = Some(0.6);
        let d = Device::from_spec(spec).unwrap();
        let (m, n, k) = (256.0 * 108.0, 128.0, 1048576.0);
        let peak = FlopRate::new(624e12);
        let t = d.gemm_time_at(peak, 2.0, m, n, k, 1.0).get();
        let e = 0.6 * k / (k + 128.0);
        assert_relative_eq!(t, 2.0 * m * n * k / (624e12 * e), max_relative = 1e-12);
        // 16-bit GEMMs keep the `gemm` plateau.
        let t16 = d.gemm_time_at(peak, 1.0, m, n, k, 1.0).get();
        let e16 = 0.8 * k / (k + 64.0);
        assert_relative_eq!(t16, 2.0 * m * n * k / (624e12 * e16), max_relative = 1e-12);
    }

    #[test]
    fn fp4_gemm_peak_by_hand() {
        // NVFP4 9000, MXFP8 4500 TFLOP/s; 4-bit GEMMs at most 1.9× the 8-bit ones:
        // min(9000, 1.9 · 4500) = 8550 TFLOP/s. The datasheet peak stays for MFU.
        let mut spec = dev().spec;
        spec.matrix.mxfp8 = Some(FlopRate::new(4500e12));
        spec.matrix.nvfp4 = Some(FlopRate::new(9000e12));
        spec.efficiency.gemm_fp4_vs_fp8 = Some(1.9);
        let d = Device::from_spec(spec.clone()).unwrap();
        assert_relative_eq!(d.gemm_peak(Precision::Nvfp4).unwrap().get(), 8550e12);
        assert_eq!(d.peak(Precision::Nvfp4).unwrap().get(), 9000e12);
        assert_eq!(d.gemm_peak(Precision::Mxfp8).unwrap().get(), 4500e12);
        // A ratio above the peaks' (2.5 > 2): the datasheet peak.
        spec.efficiency.gemm_fp4_vs_fp8 = Some(2.5);
        let d = Device::from_spec(spec.clone()).unwrap();
        assert_eq!(d.gemm_peak(Precision::Nvfp4).unwrap().get(), 9000e12);
        // No MXFP8 peak: FP8's (4000 · 1.9 = 7600).
        spec.matrix.mxfp8 = None;
        spec.matrix.fp8 = Some(FlopRate::new(4000e12));
        spec.efficiency.gemm_fp4_vs_fp8 = Some(1.9);
        let d = Device::from_spec(spec.clone()).unwrap();
        assert_relative_eq!(d.gemm_peak(Precision::Nvfp4).unwrap().get(), 7600e12);
        // Unset: the datasheet peak.
        spec.efficiency.gemm_fp4_vs_fp8 = None;
        let d = Device::from_spec(spec.clone()).unwrap();
        assert_eq!(d.gemm_peak(Precision::Nvfp4).unwrap().get(), 9000e12);
        // A ratio that is not positive is refused, naming the key.
        spec.efficiency.gemm_fp4_vs_fp8 = Some(0.0);
        let err = Device::from_spec(spec).unwrap_err().to_string();
        assert!(err.contains("gemm_fp4_vs_fp8"), "{err}");
    }

    #[test]
    fn delta_rule_times_and_their_checks() {
        let mut spec = dev().spec;
        let ns = |x: f64| Seconds::new(x * 1e-9);
        // Without them a device refuses Gated DeltaNet models, naming the keys.
        let err = Device::from_spec(spec.clone())
            .unwrap()
            .gdn_rates()
            .unwrap_err()
            .to_string();
        assert!(err.contains("efficiency.gdn_fwd"), "{err}");
        spec.efficiency.gdn_fwd = Some([ns(17.8), ns(1.29)]);
        let d = Device::from_spec(spec.clone()).unwrap();
        assert!(d.gdn_rates().is_err(), "both passes are needed");
        spec.efficiency.gdn_bwd = Some([ns(57.1), ns(3.65)]);
        let d = Device::from_spec(spec.clone()).unwrap();
        assert_eq!(
            d.gdn_rates().unwrap(),
            ([ns(17.8), ns(1.29)], [ns(57.1), ns(3.65)])
        );
        // Times built in code (a file's are checked when parsed) must be finite and ≥ 0.
        for bad in [-1.0, f64::INFINITY, f64::NAN] {
            let mut s = spec.clone();
            s.efficiency.gdn_bwd = Some([ns(57.1), Seconds::new(bad)]);
            let err = Device::from_spec(s).unwrap_err().to_string();
            assert!(err.contains("efficiency.gdn_bwd"), "{bad}: {err}");
        }
    }

    #[test]
    fn eight_bit_attention_rates_by_precision_and_their_checks() {
        let mut spec = dev().spec;
        spec.efficiency.fp8_attention = Some([1.5, 1.2]);
        spec.efficiency.mxfp8_attention = Some([1.4, 0.9]);
        let d = Device::from_spec(spec.clone()).unwrap();
        assert_eq!(d.fp8_attention_speedup(Precision::Fp8).unwrap(), (1.5, 1.2));
        // An NVFP4 recipe's attention runs in FP8 with current scaling.
        assert_eq!(
            d.fp8_attention_speedup(Precision::Nvfp4).unwrap(),
            (1.5, 1.2)
        );
        assert_eq!(
            d.fp8_attention_speedup(Precision::Mxfp8).unwrap(),
            (1.4, 0.9)
        );
        assert!(d.fp8_attention_speedup(Precision::Bf16).is_err());
        // A device with the FP8 rate only has no MXFP8 one.
        spec.efficiency.mxfp8_attention = None;
        let d = Device::from_spec(spec.clone()).unwrap();
        let err = d
            .fp8_attention_speedup(Precision::Mxfp8)
            .unwrap_err()
            .to_string();
        assert!(err.contains("efficiency.mxfp8_attention"), "{err}");
        // Speed-ups must be positive and finite, each refusal naming its key.
        for (bad, key) in [
            ([0.0, 1.0], "fp8_attention"),
            ([1.0, -1.0], "fp8_attention"),
            ([f64::INFINITY, 1.0], "fp8_attention"),
            ([1.0, f64::NAN], "fp8_attention"),
        ] {
            let mut s = spec.clone();
            s.efficiency.fp8_attention = Some(bad);
            let err = Device::from_spec(s).unwrap_err().to_string();
            assert!(err.contains(&format!("efficiency.{key}")), "{bad:?}: {err}");
        }
        let mut s = spec.clone();
        s.efficiency.mxfp8_attention = Some([1.0, 0.0]);
        let err = Device::from_spec(s).unwrap_err().to_string();
        assert!(err.contains("efficiency.mxfp8_attention"), "{err}");
    }

    #[test]
    fn memory_and_missing_precision() {
        let d = dev();
        let t = d.memory_time(Bytes::new(1.6e9), 0.0);
        assert_relative_eq!(t.get(), 1.6e9 / (2000e9 * 0.8), max_relative = 1e-12);
        assert!(d.peak(Precision::Fp8).is_err());
        assert_eq!(d.peak(Precision::Bf16).unwrap().get(), 312e12);
    }
}
