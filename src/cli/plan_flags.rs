//! The parallelism-plan flags shared by `estimate` and `compare`: one definition, applied
//! over a [`PlanSpec`] (estimate) or written as the `[plan]` overrides of a scenario
//! (compare). Only flags the user gave change anything. Switches take a value, the same
//! in every command (`--flash-attention false`); given bare they mean `true`.

use crate::compute::Precision;
use crate::error::{Error, Result};
use crate::parallel::{Optimizer, Order, PlanSpec, Recompute, Schedule};
use crate::units::parse_bytes;
use clap::Args;
use toml::{Table, Value};

/// Plan flags.
#[derive(Debug, Clone, Default, Args)]
pub struct PlanFlags {
    /// Number of devices (default: the whole system).
    #[arg(long)]
    pub gpus: Option<u32>,
    /// Data-parallel degree (default: gpus / (tp·pp)).
    #[arg(long)]
    pub dp: Option<u32>,
    /// Tensor-parallel degree.
    #[arg(long)]
    pub tp: Option<u32>,
    /// Pipeline-parallel degree.
    #[arg(long)]
    pub pp: Option<u32>,
    /// Expert-parallel degree (MoE, within DP).
    #[arg(long)]
    pub ep: Option<u32>,
    /// Context-parallel degree (splits every sequence; devices = dp·tp·pp·cp).
    #[arg(long)]
    pub cp: Option<u32>,
    /// Context-parallel algorithm: ring (KV blocks point to point) or a2a (Ulysses).
    #[arg(long)]
    pub cp_kind: Option<String>,
    /// Sequence length (default: the model's).
    #[arg(long)]
    pub seq_len: Option<u32>,
    /// Packed sequences: samples of this many tokens share one sequence and attention spans
    /// each sample only (fine-tuning with packing; Transformer Engine THD format).
    #[arg(long, value_name = "TOKENS")]
    pub packed_sample_len: Option<u32>,
    /// Layers per pipeline stage, comma-separated (e.g. 7,8,8,…,7); sums to the layers.
    #[arg(long, value_delimiter = ',')]
    pub layers_per_stage: Option<Vec<u32>>,
    /// Megatron-core's pipeline layout (--pipeline-model-parallel-layout), e.g.
    /// "Et*4|(t*4|)*14tmL": virtual stage k runs on rank k mod pp; sets the layers per stage
    /// and, unless given, the virtual stages.
    #[arg(long, value_name = "LAYOUT")]
    pub pipeline_layout: Option<String>,
    /// Layers on the first pipeline stage (the rest split evenly; Megatron-LM).
    #[arg(long)]
    pub first_stage_layers: Option<u32>,
    /// Layers on the last pipeline stage.
    #[arg(long)]
    pub last_stage_layers: Option<u32>,
    /// Count the embedding as one layer in the pipeline split (Megatron-LM).
    #[arg(long)]
    pub account_for_embedding: bool,
    /// Count the output head and loss as one layer in the pipeline split.
    #[arg(long)]
    pub account_for_loss: bool,
    /// FP8 scaling recipe: delayed, current, block.
    #[arg(long)]
    pub fp8_recipe: Option<String>,
    /// Keep the weights only in the 8- or 4-bit format, with an fp32 master in the optimizer, and all-gather them in it (Megatron-core --fp8-param-gather; Megatron-Bridge's FP8, MXFP8 and NVFP4 recipes). Needs --precision fp8, mxfp8 or nvfp4.
    #[arg(long)]
    pub fp8_params: bool,
    /// Run fused attention with 8-bit inputs (Transformer Engine's FP8 dot-product attention; Megatron-core --fp8-dot-product-attention) at the device's measured speed-up over the 16-bit kernel. Needs --flash-attention and --precision fp8, mxfp8 or nvfp4.
    #[arg(long)]
    pub fp8_attention: bool,
    /// With --precision fp8, mxfp8 or nvfp4: run the first N layers in BF16 (Megatron-core --first-last-layers-bf16 --num-layers-at-start-in-bf16 N).
    #[arg(long, value_name = "N")]
    pub bf16_first_layers: Option<u32>,
    /// With --precision fp8, mxfp8 or nvfp4: run the last N layers in BF16 (Megatron-core --num-layers-at-end-in-bf16 N; Megatron-Bridge's Nemotron 3 Super NVFP4 recipe keeps 14).
    #[arg(long, value_name = "N")]
    pub bf16_last_layers: Option<u32>,
    /// LoRA fine-tuning with adapters of this rank (frozen base weights).
    #[arg(long)]
    pub lora_rank: Option<u32>,
    /// LoRA target layers: all (every linear layer) or qkv.
    #[arg(long)]
    pub lora_targets: Option<String>,
    /// Expert tensor-parallel degree (Megatron-LM; default tp, must divide it).
    #[arg(long)]
    pub etp: Option<u32>,
    /// MoE load imbalance: the busiest expert's tokens over the mean (or the capacity
    /// factor when experts pad to capacity), ≥ 1.
    #[arg(long, value_name = "RATIO")]
    pub moe_imbalance: Option<f64>,
    /// HSDP: shard (ZeRO-3) within groups of this many DP ranks, replicate across them
    /// (implies --zero 3).
    #[arg(long, value_name = "GROUP")]
    pub hsdp: Option<u32>,
    /// Sequence parallelism on the TP group (default: true; only with tp > 1).
    #[arg(long, value_name = "BOOL", num_args = 0..=1, default_missing_value = "true")]
    pub sequence_parallel: Option<bool>,
    /// Micro-batch size (sequences).
    #[arg(long)]
    pub micro_batch: Option<u32>,
    /// Global batch size (sequences).
    #[arg(long)]
    pub global_batch: Option<u32>,
    /// Pipeline schedule: gpipe, 1f1b, interleaved, dualpipe (DeepSeek-V3).
    #[arg(long)]
    pub schedule: Option<String>,
    /// Model chunks per stage for the interleaved schedule (implies --schedule interleaved).
    #[arg(long, value_name = "V")]
    pub virtual_stages: Option<u32>,
    /// Activation recomputation: none, selective (the attention core, Megatron-LM), full (each layer keeps its input only) or op (torchtitan's per-op selective checkpointing: matmul outputs kept but every second one, the rest recomputed).
    #[arg(long)]
    pub recompute: Option<String>,
    /// Submodules recomputed in the backward (Megatron-core --recompute-modules): none or a
    /// comma list of layernorm, mla_up_proj, moe_act (outputs discarded and rebuilt), mlp,
    /// moe, shared_experts, core_attn (checkpointed whole: dense MLPs, MoE layers, shared
    /// experts, the attention core).
    #[arg(long, value_name = "LIST")]
    pub recompute_modules: Option<String>,
    /// ZeRO stage 0–3 (1 = distributed optimizer, 3 = FSDP) (default: 1).
    #[arg(long)]
    pub zero: Option<u8>,
    /// PyTorch FSDP: --zero 3 with --zero3-impl fsdp.
    #[arg(long)]
    pub fsdp: bool,
    /// How ZeRO-3 runs: deepspeed-2021 (DeepSpeed ZeRO-3 as measured in SC'21 Table 2: 5e7-parameter buckets, ~24 GB/s per GPU; default for --zero 3) or fsdp (PyTorch FSDP/FSDP2, Megatron-FSDP: one all-gather per layer at NCCL rates; default with --fsdp or --hsdp).
    #[arg(long, value_name = "IMPL")]
    pub zero3_impl: Option<String>,
    /// Overlap the DP gradient reduction with backward (default: true).
    #[arg(long, value_name = "BOOL", num_args = 0..=1, default_missing_value = "true")]
    pub dp_overlap: Option<bool>,
    /// DP bucket size, e.g. 25MB (default: the framework's, Megatron-LM max(4e7, 1e6·dp) parameters, DeepSpeed 5e7 for ZeRO-3).
    #[arg(long)]
    pub dp_bucket: Option<String>,
    /// Memory set aside per device for the CUDA context, NCCL buffers, library workspaces
    /// and allocator fragmentation, e.g. 4GiB (default: the device's, 1.5 GiB + 3% of HBM).
    #[arg(long)]
    pub memory_reserve: Option<String>,
    /// Overlap TP communication with GEMMs (default: true).
    #[arg(long, value_name = "BOOL", num_args = 0..=1, default_missing_value = "true")]
    pub tp_overlap: Option<bool>,
    /// Run the backward's TP collectives beside the layer's other GEMM (Megatron-LM's asynchronous tensor-parallel all-reduce, since Sept. 2021; default: true). false: they block, as in 2021 Megatron-LM (SC'21).
    #[arg(long, value_name = "BOOL", num_args = 0..=1, default_missing_value = "true")]
    pub tp_bwd_overlap: Option<bool>,
    /// Overlap MoE dispatch/combine all-to-alls with another micro-batch's compute (Megatron-core overlap_moe_expert_parallel_comm; default: false). Needs ep > 1, virtual stages with pp > 1, no full recomputation, at most one MTP layer and no moe/mlp graph scope.
    #[arg(long, value_name = "BOOL", num_args = 0..=1, default_missing_value = "true")]
    pub ep_overlap: Option<bool>,
    /// Run the shared experts on a side stream beside their own micro-batch's dispatch and combine all-to-alls (Megatron-core moe_shared_expert_overlap; default: false). Needs shared experts; not with --ep-overlap.
    #[arg(long, value_name = "BOOL", num_args = 0..=1, default_missing_value = "true")]
    pub shared_expert_overlap: Option<bool>,
    /// Matrix precision: bf16, fp16, fp8, mxfp8, nvfp4, tf32, fp32.
    #[arg(long)]
    pub precision: Option<String>,
    /// Optimizer layout: adam (16 B/param), adam-fp32-grads (18 B/param, Megatron-LM),
    /// adam-bf16-moments (14 B/param: Megatron-core's precision-aware optimizer with BF16
    /// moments) or adam-bf16-state (10 B/param: Apex DistributedFusedAdam with dtype bf16,
    /// NeMo 1.x).
    #[arg(long)]
    pub optimizer: Option<String>,
    /// Fused (flash) attention (default: true).
    #[arg(long, value_name = "BOOL", num_args = 0..=1, default_missing_value = "true")]
    pub flash_attention: Option<bool>,
    /// Group order on the network: tp-dp-pp or tp-pp-dp.
    #[arg(long)]
    pub order: Option<String>,
    /// Offload to slower memory tiers, comma list: optimizer (optimizer:nvme), gradients, params (params:nvme), activations; aliases zero-offload (optimizer,gradients), zero-infinity (optimizer, gradients and params on NVMe; zero-infinity:host on the host), optimizer-cpu-offload, cpu-offloading (activations). Needs the system file's memory_tiers (docs/offload.md).
    #[arg(long, value_name = "ITEMS")]
    pub offload: Option<String>,
    /// MoE token dispatch: alltoall (Megatron-core's alltoall dispatcher) or hierarchical (DeepEP/HybridEP: once per node over the scale-out network, then NVLink forwarding).
    #[arg(long, value_name = "KIND")]
    pub ep_dispatch: Option<String>,
    /// How a rank runs its local experts' GEMMs: streams (Transformer Engine's default, one GEMM per expert on 4 CUDA streams) or fused (one grouped kernel, e.g. NVTE_CUTEDSL_FUSED_GROUPED_MLP=1).
    #[arg(long, value_name = "KIND")]
    pub grouped_gemm: Option<String>,
    /// Fused-attention kernel: te (default: the kernel Transformer Engine picks, cuDNN on Hopper and Blackwell, at the device's flash_* rates) or fa2 (FlashAttention-2: PyTorch SDPA's default backend and the flash-attn 2 package, as torchtitan, OLMo-core and Hugging Face run it; the device's fa2_* rates).
    #[arg(long, value_name = "KIND")]
    pub attention_kernel: Option<String>,
    /// Loss kernels on the last stage: unfused (Megatron-LM's default, eager VocabParallelCrossEntropy) or te (Transformer Engine's fused cross-entropy, Megatron-Bridge's recipes).
    #[arg(long, value_name = "KIND")]
    pub cross_entropy: Option<String>,
    /// Layer parts captured as CUDA graphs (Megatron-core --cuda-graph-impl/--cuda-graph-modules): none (default), full (full_iteration: no host time), or a comma list of attn, mlp, moe_router, moe_preprocess, moe, mamba. Eager parts cost host time per operation; a layer whose host time exceeds its GPU time leaves the GPU waiting (docs/modern-training.md, host launch).
    #[arg(long, value_name = "SCOPES")]
    pub cuda_graphs: Option<String>,
}

/// Parses `--optimizer`: an optimizer layout's name.
pub(crate) fn parse_optimizer(s: &str) -> Result<Optimizer> {
    parse_enum(
        "--optimizer",
        s,
        &[
            "adam",
            "adam-fp32-grads",
            "adam-bf16-moments",
            "adam-bf16-state",
        ],
    )
}

pub(crate) fn parse_enum<T: serde::de::DeserializeOwned>(
    flag: &str,
    v: &str,
    valid: &[&str],
) -> Result<T> {
    let norm = v.trim().to_ascii_lowercase().replace('_', "-");
    Value::String(norm)
        .try_into()
        .map_err(|_| Error::unknown("value", v, valid).context(flag))
}

impl PlanFlags {
    /// Applies the flags given over `p`.
    pub fn apply(&self, mut p: PlanSpec) -> Result<PlanSpec> {
        macro_rules! set {
            ($($f:ident),*) => { $(if let Some(v) = self.$f { p.$f = v; })* };
        }
        set!(
            tp,
            pp,
            ep,
            cp,
            micro_batch,
            lora_rank,
            bf16_first_layers,
            bf16_last_layers
        );
        p.seq_len = self.seq_len.or(p.seq_len);
        p.packed_sample_len = self.packed_sample_len.or(p.packed_sample_len);
        p.first_stage_layers = self.first_stage_layers.or(p.first_stage_layers);
        p.last_stage_layers = self.last_stage_layers.or(p.last_stage_layers);
        if let Some(l) = &self.layers_per_stage {
            p.layers_per_stage = Some(l.clone());
        }
        if let Some(l) = &self.pipeline_layout {
            p.pipeline_layout = Some(l.clone());
        }
        p.account_for_embedding |= self.account_for_embedding;
        p.account_for_loss |= self.account_for_loss;
        p.fp8_params |= self.fp8_params;
        p.fp8_attention |= self.fp8_attention;
        if let Some(s) = &self.cp_kind {
            p.cp_kind = parse_enum("--cp-kind", s, &["ring", "a2a"])?;
        }
        if let Some(s) = &self.lora_targets {
            p.lora_targets = parse_enum("--lora-targets", s, &["all", "qkv"])?;
        }
        if let Some(s) = &self.fp8_recipe {
            p.fp8_recipe = parse_enum("--fp8-recipe", s, &["delayed", "current", "block"])?;
        }
        p.gpus = self.gpus.or(p.gpus);
        p.dp = self.dp.or(p.dp);
        p.global_batch = self.global_batch.or(p.global_batch);
        for (dst, flag) in [
            (&mut p.sequence_parallel, self.sequence_parallel),
            (&mut p.tp_overlap, self.tp_overlap),
            (&mut p.tp_bwd_overlap, self.tp_bwd_overlap),
            (&mut p.ep_overlap, self.ep_overlap),
            (&mut p.shared_expert_overlap, self.shared_expert_overlap),
            (&mut p.flash_attention, self.flash_attention),
            (&mut p.dp_overlap, self.dp_overlap),
        ] {
            if let Some(v) = flag {
                *dst = v;
            }
        }
        if let Some(s) = &self.schedule {
            p.schedule = parse_enum(
                "--schedule",
                s,
                &["gpipe", "1f1b", "interleaved", "dualpipe"],
            )?;
        }
        if let Some(v) = self.virtual_stages {
            p.virtual_stages = v;
            if v > 1 {
                // Virtual stages are the interleaved schedule's; another schedule asked for by
                // name is not silently replaced.
                if let Some(s) = self
                    .schedule
                    .as_deref()
                    .filter(|_| p.schedule != Schedule::Interleaved)
                {
                    return Err(Error::input(
                        "--virtual-stages",
                        format!(
                            "{v} virtual stages run the interleaved schedule, but --schedule {s} was given (drop one of them)"
                        ),
                    ));
                }
                p.schedule = Schedule::Interleaved;
            }
        }
        if let Some(s) = &self.recompute {
            p.recompute =
                parse_enum::<Recompute>("--recompute", s, &["none", "selective", "full", "op"])?;
        }
        if let Some(s) = &self.recompute_modules {
            p.recompute_modules = crate::parallel::RecomputeModules::parse(s)
                .map_err(|e| Error::input("--recompute-modules", e))?;
        }
        p.zero = if self.fsdp || self.hsdp.is_some() {
            3
        } else {
            self.zero.unwrap_or(p.zero)
        };
        p.hsdp = self.hsdp.or(p.hsdp);
        p.etp = self.etp.or(p.etp);
        if let Some(x) = self.moe_imbalance {
            p.moe_imbalance = x;
        }
        if let Some(b) = &self.dp_bucket {
            p.dp_bucket = Some(parse_bytes("--dp-bucket", b)?);
        }
        if let Some(b) = &self.memory_reserve {
            p.memory_reserve = Some(parse_bytes("--memory-reserve", b)?);
        }
        if let Some(s) = &self.precision {
            p.precision = Precision::parse(s).map_err(|e| e.context("--precision"))?;
        }
        if let Some(s) = &self.optimizer {
            p.optimizer = parse_optimizer(s)?;
        }
        if let Some(s) = &self.ep_dispatch {
            p.ep_dispatch = parse_enum("--ep-dispatch", s, &["alltoall", "hierarchical"])?;
        }
        if let Some(s) = &self.grouped_gemm {
            p.grouped_gemm = parse_enum("--grouped-gemm", s, &["streams", "fused"])?;
        }
        if let Some(s) = &self.cross_entropy {
            p.cross_entropy = parse_enum("--cross-entropy", s, &["unfused", "te"])?;
        }
        if let Some(s) = &self.attention_kernel {
            p.attention_kernel = parse_enum("--attention-kernel", s, &["te", "fa2"])?;
        }
        if let Some(s) = &self.cuda_graphs {
            p.cuda_graphs = crate::parallel::CudaGraphs::parse(s)
                .map_err(|e| crate::error::Error::input("--cuda-graphs", e))?;
        }
        if let Some(s) = &self.offload {
            p.offload = crate::offload::Offload::parse(s, "--offload")?;
        }
        if let Some(s) = &self.order {
            p.order = parse_enum::<Order>("--order", s, &["tp-dp-pp", "tp-pp-dp"])?;
        }
        if let Some(s) = &self.zero3_impl {
            p.zero3_impl = Some(parse_enum("--zero3-impl", s, &["fsdp", "deepspeed-2021"])?);
        } else if self.fsdp {
            p.zero3_impl = Some(crate::parallel::Zero3Impl::Fsdp);
        }
        Ok(p)
    }

    /// The flags given, as `[plan]` overrides (TOML keys of [`PlanSpec`]) for a scenario.
    pub fn to_table(&self) -> Table {
        let mut t = Table::new();
        let ints = [
            ("gpus", self.gpus),
            ("dp", self.dp),
            ("tp", self.tp),
            ("pp", self.pp),
            ("ep", self.ep),
            ("cp", self.cp),
            ("lora_rank", self.lora_rank),
            ("seq_len", self.seq_len),
            ("packed_sample_len", self.packed_sample_len),
            ("first_stage_layers", self.first_stage_layers),
            ("last_stage_layers", self.last_stage_layers),
            ("bf16_first_layers", self.bf16_first_layers),
            ("bf16_last_layers", self.bf16_last_layers),
            ("micro_batch", self.micro_batch),
            ("global_batch", self.global_batch),
            ("virtual_stages", self.virtual_stages),
            ("hsdp", self.hsdp),
            ("etp", self.etp),
            (
                "zero",
                if self.fsdp || self.hsdp.is_some() {
                    Some(3)
                } else {
                    self.zero.map(u32::from)
                },
            ),
        ];
        for (k, v) in ints {
            if let Some(v) = v {
                t.insert(k.into(), Value::Integer(i64::from(v)));
            }
        }
        let schedule = match self.virtual_stages {
            Some(v) if v > 1 => Some("interleaved".to_string()),
            _ => self.schedule.clone(),
        };
        for (k, v) in [
            ("schedule", &schedule),
            ("recompute", &self.recompute),
            ("recompute_modules", &self.recompute_modules),
            ("precision", &self.precision),
            ("dp_bucket", &self.dp_bucket),
            ("memory_reserve", &self.memory_reserve),
            ("optimizer", &self.optimizer),
            ("order", &self.order),
            ("ep_dispatch", &self.ep_dispatch),
            ("grouped_gemm", &self.grouped_gemm),
            ("cross_entropy", &self.cross_entropy),
            ("attention_kernel", &self.attention_kernel),
            ("cuda_graphs", &self.cuda_graphs),
            ("zero3_impl", &self.zero3_impl),
            ("cp_kind", &self.cp_kind),
            ("fp8_recipe", &self.fp8_recipe),
            ("pipeline_layout", &self.pipeline_layout),
            ("lora_targets", &self.lora_targets),
            ("offload", &self.offload),
        ] {
            if let Some(v) = v {
                t.insert(k.into(), Value::String(v.clone()));
            }
        }
        if let Some(x) = self.moe_imbalance {
            t.insert("moe_imbalance".into(), Value::Float(x));
        }
        if let Some(l) = &self.layers_per_stage {
            let list = l.iter().map(|&n| Value::Integer(i64::from(n))).collect();
            t.insert("layers_per_stage".into(), Value::Array(list));
        }
        for (k, on) in [
            ("account_for_embedding", self.account_for_embedding),
            ("account_for_loss", self.account_for_loss),
            ("fp8_params", self.fp8_params),
            ("fp8_attention", self.fp8_attention),
        ] {
            if on {
                t.insert(k.into(), Value::Boolean(true));
            }
        }
        for (k, v) in [
            ("sequence_parallel", self.sequence_parallel),
            ("tp_overlap", self.tp_overlap),
            ("tp_bwd_overlap", self.tp_bwd_overlap),
            ("ep_overlap", self.ep_overlap),
            ("shared_expert_overlap", self.shared_expert_overlap),
            ("flash_attention", self.flash_attention),
            ("dp_overlap", self.dp_overlap),
        ] {
            if let Some(v) = v {
                t.insert(k.into(), Value::Boolean(v));
            }
        }
        if self.fsdp && self.zero3_impl.is_none() {
            t.insert("zero3_impl".into(), Value::String("fsdp".into()));
        }
        t
    }

    /// The settings of [`PlanSpec::practice`] that neither these flags nor `given` (the
    /// keys of a scenario's `[plan]` table) set: "flash_attention = true", …
    pub fn defaults_used(&self, given: &Table) -> Vec<String> {
        let flags = self.to_table();
        PlanSpec::PRACTICE
            .iter()
            .filter(|(k, _)| !flags.contains_key(*k) && !given.contains_key(*k))
            .map(|(k, v)| format!("{k} = {v}"))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_apply_and_tabulate_alike() {
        let f = PlanFlags {
            tp: Some(8),
            cp: Some(2),
            cp_kind: Some("a2a".into()),
            seq_len: Some(16384),
            layers_per_stage: Some(vec![7, 8, 7]),
            account_for_loss: true,
            fp8_recipe: Some("current".into()),
            virtual_stages: Some(2),
            fsdp: true,
            dp_overlap: Some(false),
            recompute: Some("selective".into()),
            ..PlanFlags::default()
        };
        let p = f.apply(PlanSpec::practice()).unwrap();
        assert_eq!((p.tp, p.virtual_stages, p.zero), (8, 2, 3));
        assert_eq!(
            (p.cp, p.cp_kind, p.seq_len),
            (2, crate::parallel::CpKind::A2a, Some(16384))
        );
        assert_eq!(p.schedule, Schedule::Interleaved);
        assert!(!p.dp_overlap);
        // The table, read back as a plan (unset keys take the practice defaults), gives
        // the same spec.
        let back: PlanSpec = Value::Table(f.to_table()).try_into().unwrap();
        assert_eq!(back, p);
    }

    #[test]
    fn switches_take_values_and_unset_ones_are_named_as_defaults() {
        let f = PlanFlags {
            flash_attention: Some(false),
            ..PlanFlags::default()
        };
        let p = f.apply(PlanSpec::practice()).unwrap();
        assert!(!p.flash_attention && p.sequence_parallel && p.tp_overlap);
        let mut given = Table::new();
        given.insert("zero".into(), Value::Integer(0));
        let used = f.defaults_used(&given);
        assert_eq!(
            used,
            [
                "sequence_parallel = true (when tp > 1)",
                "tp_overlap = true"
            ]
        );
    }

    #[test]
    fn bad_value_names_the_flag() {
        let f = PlanFlags {
            recompute: Some("ful".into()),
            ..PlanFlags::default()
        };
        let e = f.apply(PlanSpec::default()).unwrap_err().to_string();
        assert!(
            e.contains("--recompute") && e.contains("did you mean 'full'"),
            "{e}"
        );
    }
}
