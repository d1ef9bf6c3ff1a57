//! Bytes resident per device: model states (weights, gradients, optimizer states, sharded
//! by ZeRO), activations kept for backward (Korthikanti et al. 2022 §4, Eq. 1–6, and the
//! number of micro-batches a pipeline schedule keeps in flight), and communication buffers.

use crate::model::Transformer;
use crate::parallel::{Optimizer, Plan, Recompute, Schedule};
use crate::units::Bytes;

/// Memory per device. `Copy`; part of an `Estimate`.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Memory {
    /// Parameters (bf16/fp16 copy).
    pub weights: Bytes,
    /// Gradients.
    pub gradients: Bytes,
    /// Optimizer states (fp32 master weights, Adam m and v).
    pub optimizer: Bytes,
    /// Activations kept for backward.
    pub activations: Bytes,
    /// Communication buffers and staging (DP buckets, TP/PP messages, logits).
    pub buffers: Bytes,
    /// Sum of the above.
    pub total: Bytes,
    /// Device capacity.
    pub capacity: Bytes,
    /// `total ≤ capacity`.
    pub fits: bool,
}

impl Memory {
    /// Sums the parts and compares against `capacity`.
    pub fn new(states: [f64; 3], activations: f64, buffers: f64, capacity: Bytes) -> Memory {
        let total = states[0] + states[1] + states[2] + activations + buffers;
        Memory {
            weights: Bytes::new(states[0]),
            gradients: Bytes::new(states[1]),
            optimizer: Bytes::new(states[2]),
            activations: Bytes::new(activations),
            buffers: Bytes::new(buffers),
            total: Bytes::new(total),
            capacity,
            fits: total <= capacity.get(),
        }
    }
}

/// Model-state bytes (weights, gradients, optimizer) for `params` parameters held by a
/// device: `(w, g, o)·params` bytes with (2, 2, 12) for mixed-precision Adam (ZeRO §3.1)
/// or (2, 4, 12) with fp32 main gradients (Megatron-LM); ZeRO-1 divides the optimizer
/// states by the DP degree, ZeRO-2 also the gradients, ZeRO-3/FSDP also the weights
/// (Rajbhandari et al. SC'20 §5).
pub fn model_states(params: f64, opt: Optimizer, zero: u8, dp: u32) -> [f64; 3] {
    let (w, g, o) = opt.bytes_per_param();
    let n = dp as f64;
    let shard = |stage: u8| if zero >= stage { n } else { 1.0 };
    [
        params * w / shard(3),
        params * g / shard(2),
        params * o / shard(1),
    ]
}

/// Activation bytes of one transformer layer for one micro-batch of `b` sequences,
/// generalising Korthikanti et al. 2022 Eq. 1–6 (fp16/bf16 activations, dropout):
///
/// - no recomputation: `s·b·h·(R + S/t + 5·a·s/(h·t))`, with SP `s·b·h·(R + S)/t + …`
///   where `R = 10` (LayerNorm inputs 4, LayerNorm outputs feeding QKV and FC1 4, dropout
///   masks 2) is replicated across TP ranks unless SP is on, and `S = 24` for GPT
///   (Q 2, K and V 4·kv/a, projection input 2, MLP 4·f/h or 6·f/h for SwiGLU, × top_k for
///   MoE) is split; `5as/h` (softmax output 2, dropout mask 1, dropout output 2) is `2as/h`
///   without dropout and 0 with flash attention;
/// - selective recomputation drops the `as/h` term (Eq. 5: `34·sbh/t` with SP);
/// - full recomputation keeps the layer input only: `2·s·b·h` (`/t` with SP).
///
/// Dropout is assumed present when the model has biases (GPT, BERT) and absent otherwise
/// (LLaMA).
pub fn layer_activation_bytes(m: &Transformer, plan: &Plan, dropout: bool) -> f64 {
    let (s, h, t) = (m.s, m.h, plan.tp as f64);
    let sbh = s * plan.micro_batch as f64 * h;
    let split_by = |sp: bool| if sp { t } else { 1.0 };
    if plan.recompute == Recompute::Full {
        return 2.0 * sbh / split_by(plan.sp);
    }
    let kv_ratio = m.kv_heads as f64 / m.heads as f64;
    let mlp = mlp_term(m, m.f, m.top_k as f64);
    let scores = if plan.flash_attention || plan.recompute == Recompute::Selective {
        0.0
    } else {
        (if dropout { 5.0 } else { 2.0 }) * m.heads as f64 * s / h
    };
    if let Some(hy) = &m.hybrid {
        return sbh * hybrid_layer_terms(m, hy, plan, dropout, kv_ratio, scores);
    }
    let split = 4.0 + 4.0 * kv_ratio + mlp;
    let replicated = if dropout { 10.0 } else { 8.0 };
    sbh * (replicated / split_by(plan.sp) + split / t + scores / t)
}

/// The MLP's split activations per `s·b·h` for `k` experts of width `f`: `4·f/h` (`6·f/h`
/// SwiGLU) each.
fn mlp_term(m: &Transformer, f: f64, k: f64) -> f64 {
    (if m.gated { 6.0 } else { 4.0 }) * f / m.h * k
}

/// A hybrid model's layer activations per `s·b·h`, averaged over its layers
/// (`model::mamba`): every layer keeps its pre-norm's input and output, `R₁ = 4` (5 with a
/// dropout mask) replicated unless SP; then its block's split terms: attention
/// `4 + 4·kv/a` and the scores, a dense MLP `4·f/h` (`6·f/h` SwiGLU), an MoE layer the same
/// × top_k, a Mamba layer [`Mamba::activation_bytes`] at `t` = 1 over `h`:
/// `(2·(2·d_in + 2·g·N + H) + 6·d_in)/h`. A transformer layer is one attention and one MLP
/// block (`R = 2·R₁`).
///
/// [`Mamba::activation_bytes`]: crate::model::Mamba::activation_bytes
fn hybrid_layer_terms(
    m: &Transformer,
    hy: &crate::model::Hybrid,
    plan: &Plan,
    dropout: bool,
    kv_ratio: f64,
    scores: f64,
) -> f64 {
    let t = plan.tp as f64;
    let r1 = if dropout { 5.0 } else { 4.0 };
    let rep = r1 / if plan.sp { t } else { 1.0 };
    let n = hy.counts;
    let mamba = hy.mamba.map_or(0.0, |mb| mb.activation_bytes(1.0) / m.h);
    let split = n.attention as f64 * (4.0 + 4.0 * kv_ratio + scores)
        + n.mlp as f64 * mlp_term(m, m.dense_f, 1.0)
        + n.moe as f64 * mlp_term(m, m.f, m.top_k as f64)
        + n.mamba as f64 * mamba;
    rep + split / t / m.layers as f64
}

/// Micro-batches whose activations the first pipeline stage holds at its peak:
/// GPipe keeps all `m`; 1F1B keeps `min(p, m)` (Narayanan et al. SC'21 §2.2); the
/// interleaved schedule multiplies by `1 + (p−1)/(p·v)` (Korthikanti et al. 2022 §4.2.3);
/// DualPipe keeps `p + 1` (DeepSeek-V3 technical report, Table 2).
pub fn in_flight(plan: &Plan) -> f64 {
    let (p, m) = (plan.pp as f64, plan.micro_batches as f64);
    match plan.schedule {
        Schedule::DualPipe => (p + 1.0).min(m),
        Schedule::Gpipe => m,
        Schedule::OneFOneB => p.min(m),
        Schedule::Interleaved if plan.v > 1 => p.min(m) * (1.0 + (p - 1.0) / (p * plan.v as f64)),
        Schedule::Interleaved => p.min(m),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog;
    use crate::parallel::PlanSpec;
    use approx::assert_relative_eq;

    const GIB: f64 = 1073741824.0;

    fn plan(tp: u32, pp: u32, b: u32, gb: u32, rc: Recompute, sp: bool) -> (Transformer, Plan) {
        let m = catalog::model("gpt3-175b").unwrap();
        let spec = PlanSpec {
            tp,
            pp,
            micro_batch: b,
            global_batch: Some(gb),
            recompute: rc,
            sequence_parallel: sp,
            ..PlanSpec::default()
        };
        let p = Plan::new(&spec, &m, tp * pp).unwrap();
        (*m.transformer().unwrap(), p)
    }

    #[test]
    fn korthikanti_equations_by_hand() {
        // GPT-3: s=2048, h=12288, a=96, b=1, t=8: 5as/h = 80.
        let (m, p) = plan(8, 1, 1, 1, Recompute::None, false);
        let sbh = 2048.0 * 12288.0;
        assert_relative_eq!(
            layer_activation_bytes(&m, &p, true),
            sbh * (10.0 + 24.0 / 8.0 + 80.0 / 8.0)
        );
        let (m, p) = plan(8, 1, 1, 1, Recompute::None, true);
        assert_relative_eq!(
            layer_activation_bytes(&m, &p, true),
            sbh * (34.0 + 80.0) / 8.0
        );
        let (m, p) = plan(8, 1, 1, 1, Recompute::Selective, true);
        assert_relative_eq!(layer_activation_bytes(&m, &p, true), 34.0 * sbh / 8.0);
        let (m, p) = plan(1, 1, 1, 1, Recompute::None, false);
        assert_relative_eq!(layer_activation_bytes(&m, &p, true), sbh * (34.0 + 80.0));
        let (m, p) = plan(8, 1, 1, 1, Recompute::Full, false);
        assert_relative_eq!(layer_activation_bytes(&m, &p, true), 2.0 * sbh);
    }

    #[test]
    fn figure1_model_states_18_bytes_per_param() {
        // Korthikanti Fig. 1: 22B on 8 GPUs = 45.5625 GiB = 12·48·6144²/8 params × 18 B.
        let params = 12.0 * 48.0 * 6144f64.powi(2) / 8.0;
        let s = model_states(params, Optimizer::AdamFp32Grads, 0, 1);
        assert_relative_eq!((s[0] + s[1] + s[2]) / GIB, 45.5625, max_relative = 1e-12);
        let s16 = model_states(params, Optimizer::Adam, 0, 1);
        assert!((s16.iter().sum::<f64>() / GIB - 40.5).abs() < 1e-9);
        // ZeRO-3 over 4 shards everything by 4.
        let z = model_states(params, Optimizer::Adam, 3, 4);
        assert_relative_eq!(z.iter().sum::<f64>() * 4.0, s16.iter().sum::<f64>());
    }
}
