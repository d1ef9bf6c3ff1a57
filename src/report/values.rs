//! Typed result values shared by every command: the plan as an object ([`PlanValue`]), the
//! [`Data`] a command computed (serialized by serde for JSON and CSV, with a
//! [`SCHEMA_VERSION`]), and the flattening of records into one CSV table per file.
//!
//! Field names carry their SI unit (`iteration_time_s`, `memory_per_device_bytes`,
//! `busbw_bytes_per_s`); fractions (`mfu`) are fractions, never percentages. Adding a field
//! is backwards compatible and does not change [`SCHEMA_VERSION`]; renaming or removing
//! one does. docs/schema.md documents every field; `astrolabe schema NAME` prints the
//! JSON Schema generated from these types (schemars).

use super::collective::CollectiveResult;
use super::compare::CompareResult;
use super::estimate::EstimateResult;
use super::sweep::{SweepAllRow, SweepResult};
use crate::error::{Error, Result};
use crate::parallel::{Optimizer, Order, Plan, Recompute, Schedule};
use schemars::JsonSchema;
use serde::Serialize;
use serde_json::{Map, Value};

/// Version of the JSON/CSV schema. Bumped when a field is renamed or removed.
pub const SCHEMA_VERSION: u32 = 1;

/// A validated plan, as written in every output (`plan` object in JSON, `plan.*` columns
/// in CSV). Names match the CLI flags and the `[plan]` keys of scenario files.
#[derive(Clone, Debug, PartialEq, Serialize, JsonSchema)]
pub struct PlanValue {
    /// Devices = dp · tp · pp.
    pub gpus: u32,
    /// Data-parallel degree.
    pub dp: u32,
    /// Tensor-parallel degree.
    pub tp: u32,
    /// Pipeline-parallel degree (stages).
    pub pp: u32,
    /// Expert-parallel degree (within DP).
    pub ep: u32,
    /// Sequence parallelism in effect (only with tp > 1).
    pub sequence_parallel: bool,
    /// Micro-batch size, sequences.
    pub micro_batch: u32,
    /// Global batch, sequences.
    pub global_batch: u32,
    /// Micro-batches per pipeline per iteration, m = global_batch / (dp · micro_batch).
    pub micro_batches: u32,
    /// Pipeline schedule: "gpipe", "1f1b" or "interleaved".
    pub schedule: String,
    /// Model chunks per stage (1 unless interleaved).
    pub virtual_stages: u32,
    /// Activation recomputation: "none", "selective", "full" or "op".
    pub recompute: String,
    /// Submodules recomputed besides: "none" or a comma list (layernorm, mla_up_proj,
    /// moe_act, mlp, moe, shared_experts, core_attn).
    pub recompute_modules: String,
    /// ZeRO stage 0–3 (1 = distributed optimizer, 3 = FSDP).
    pub zero: u8,
    /// How ZeRO-3 runs: "fsdp" or "deepspeed-2021" (meaningful with zero = 3).
    pub zero3_impl: String,
    /// DP gradient reduction overlapped with backward.
    pub dp_overlap: bool,
    /// DP bucket size, bytes.
    pub dp_bucket_bytes: f64,
    /// TP communication overlapped with GEMMs.
    pub tp_overlap: bool,
    /// Backward TP collectives beside the layer's other GEMM (asynchronous all-reduce).
    pub tp_bwd_overlap: bool,
    /// MoE all-to-alls overlapped with another micro-batch's compute.
    pub ep_overlap: bool,
    /// Shared experts beside their micro-batch's dispatch and combine all-to-alls.
    pub shared_expert_overlap: bool,
    /// Matrix precision: "bf16", "fp16", "fp8", "mxfp8", "nvfp4", "tf32" or "fp32".
    pub precision: String,
    /// FP8 scaling recipe: "delayed", "current" or "block" (FP8 family only).
    pub fp8_recipe: String,
    /// Context-parallel degree (1 = none).
    pub cp: u32,
    /// Context-parallel algorithm: "ring" or "a2a".
    pub cp_kind: String,
    /// Sequence length, tokens.
    pub seq_len: u32,
    /// HSDP shard-group size (0 = not HSDP).
    pub hsdp: u32,
    /// Expert tensor-parallel degree.
    pub etp: u32,
    /// LoRA adapter rank (0 = full training).
    pub lora_rank: u32,
    /// Optimizer layout: "adam", "adam-fp32-grads", "adam-bf16-moments" or "adam-bf16-state".
    pub optimizer: String,
    /// Fused (flash) attention.
    pub flash_attention: bool,
    /// Group order on the network: "tp-dp-pp" or "tp-pp-dp".
    pub order: String,
    /// MoE token dispatch: "alltoall" or "hierarchical".
    pub ep_dispatch: String,
    /// Local experts' GEMMs: "streams" or "fused".
    pub grouped_gemm: String,
    /// Loss kernels on the last stage: "unfused" or "te".
    pub cross_entropy: String,
    /// Fused-attention kernel: "te" or "fa2".
    pub attention_kernel: String,
    /// Fused attention with 8-bit inputs (`--fp8-attention`).
    pub fp8_attention: bool,
    /// CUDA-graph-captured parts: "none", "full" or a comma list of scopes.
    pub cuda_graphs: String,
    /// The embedding counted as a layer of the pipeline split.
    pub account_for_embedding: bool,
    /// The output head and loss counted as a layer of the pipeline split.
    pub account_for_loss: bool,
    /// Weights kept only in the low-precision format (`--fp8-params`).
    pub fp8_params: bool,
    /// Layers run in BF16 at the start of a low-precision plan (`--bf16-first-layers`).
    pub bf16_first_layers: u32,
    /// Layers run in BF16 at the end (`--bf16-last-layers`).
    pub bf16_last_layers: u32,
    /// Offload plan: "none", or the items offloaded with their tier, e.g.
    /// "optimizer,gradients" or "optimizer:nvme,gradients,params:nvme" (docs/offload.md).
    pub offload: String,
}

/// "gpipe", "1f1b", "interleaved", "dualpipe".
pub fn schedule_name(s: Schedule) -> &'static str {
    match s {
        Schedule::Gpipe => "gpipe",
        Schedule::OneFOneB => "1f1b",
        Schedule::Interleaved => "interleaved",
        Schedule::DualPipe => "dualpipe",
    }
}

/// "none", "selective", "full".
pub fn recompute_name(r: Recompute) -> &'static str {
    match r {
        Recompute::None => "none",
        Recompute::Selective => "selective",
        Recompute::Full => "full",
        Recompute::Op => "op",
    }
}

/// "tp-dp-pp", "tp-pp-dp".
pub fn order_name(o: Order) -> &'static str {
    match o {
        Order::TpDpPp => "tp-dp-pp",
        Order::TpPpDp => "tp-pp-dp",
    }
}

/// "adam", "adam-fp32-grads", "adam-bf16-moments", "adam-bf16-state".
pub fn optimizer_name(o: Optimizer) -> &'static str {
    match o {
        Optimizer::Adam => "adam",
        Optimizer::AdamFp32Grads => "adam-fp32-grads",
        Optimizer::AdamBf16Moments => "adam-bf16-moments",
        Optimizer::AdamBf16State => "adam-bf16-state",
    }
}

impl From<&Plan> for PlanValue {
    fn from(p: &Plan) -> PlanValue {
        PlanValue {
            gpus: p.gpus,
            dp: p.dp,
            tp: p.tp,
            pp: p.pp,
            ep: p.ep,
            sequence_parallel: p.sp,
            micro_batch: p.micro_batch,
            global_batch: p.global_batch,
            micro_batches: p.micro_batches,
            schedule: schedule_name(p.schedule).into(),
            virtual_stages: p.v,
            recompute: recompute_name(p.recompute).into(),
            recompute_modules: p.recompute_modules.to_string(),
            zero: p.zero,
            zero3_impl: p.zero3_impl.name().into(),
            dp_overlap: p.dp_overlap,
            dp_bucket_bytes: p.dp_bucket_bytes().get(),
            tp_overlap: p.tp_overlap,
            tp_bwd_overlap: p.tp_bwd_overlap,
            ep_overlap: p.ep_overlap,
            shared_expert_overlap: p.shared_expert_overlap,
            precision: p.precision.name().into(),
            fp8_recipe: p.fp8_recipe.name().into(),
            cp: p.cp,
            cp_kind: p.cp_kind.name().into(),
            seq_len: p.seq_len,
            hsdp: p.hsdp,
            etp: p.etp,
            lora_rank: p.lora_rank,
            optimizer: optimizer_name(p.optimizer).into(),
            flash_attention: p.flash_attention,
            order: order_name(p.order).into(),
            ep_dispatch: match p.ep_dispatch {
                crate::parallel::EpDispatch::Alltoall => "alltoall",
                crate::parallel::EpDispatch::Hierarchical => "hierarchical",
            }
            .into(),
            grouped_gemm: match p.grouped_gemm {
                crate::parallel::GroupedGemm::Streams => "streams",
                crate::parallel::GroupedGemm::Fused => "fused",
            }
            .into(),
            cross_entropy: match p.cross_entropy {
                crate::parallel::CrossEntropy::Unfused => "unfused",
                crate::parallel::CrossEntropy::Te => "te",
            }
            .into(),
            attention_kernel: match p.attention_kernel {
                crate::parallel::AttentionKernel::Te => "te",
                crate::parallel::AttentionKernel::Fa2 => "fa2",
            }
            .into(),
            fp8_attention: p.fp8_attention,
            cuda_graphs: p.cuda_graphs.to_string(),
            account_for_embedding: p.account_for_embedding,
            account_for_loss: p.account_for_loss,
            fp8_params: p.fp8_params,
            bf16_first_layers: p.bf16_layers[0],
            bf16_last_layers: p.bf16_layers[1],
            offload: p.offload.name(),
        }
    }
}

/// What a command computed, as a typed value.
#[derive(Clone, Debug)]
pub enum Data {
    /// `astrolabe estimate`.
    Estimate(Box<EstimateResult>),
    /// `astrolabe sweep`.
    Sweep(Box<SweepResult>),
    /// `astrolabe compare`.
    Compare(Box<CompareResult>),
    /// `astrolabe collective`.
    Collective(Box<CollectiveResult>),
}

/// Generates one JSON Schema.
pub type SchemaFn = fn() -> schemars::Schema;

/// The schemas `astrolabe schema NAME` prints: (name, generator).
pub const SCHEMAS: [(&str, SchemaFn); 5] = [
    ("estimate", || schemars::schema_for!(EstimateResult)),
    ("sweep", || schemars::schema_for!(SweepResult)),
    ("sweep-all-row", || schemars::schema_for!(SweepAllRow)),
    ("compare", || schemars::schema_for!(CompareResult)),
    ("collective", || schemars::schema_for!(CollectiveResult)),
];

/// The JSON Schema named `name` (see [`SCHEMAS`]), pretty-printed.
pub fn schema(name: &str) -> Result<String> {
    let names: Vec<&str> = SCHEMAS.iter().map(|s| s.0).collect();
    let (_, f) = SCHEMAS
        .iter()
        .find(|s| s.0 == name)
        .ok_or_else(|| Error::unknown("schema", name, &names))?;
    pretty(&f())
}

/// Pretty JSON with a final newline; −0 is written as 0 ([`no_negative_zero`]).
pub fn pretty<T: Serialize + ?Sized>(v: &T) -> Result<String> {
    let mut v = serde_json::to_value(v).map_err(|e| Error::Internal(e.to_string()))?;
    no_negative_zero(&mut v);
    let mut s = serde_json::to_string_pretty(&v).map_err(|e| Error::Internal(e.to_string()))?;
    s.push('\n');
    Ok(s)
}

/// Replaces every −0 in a JSON value by 0: a computed −0 (a zero price times a
/// duration, a difference of equal numbers) means 0, and is never printed.
pub fn no_negative_zero(v: &mut Value) {
    match v {
        Value::Number(n) if n.as_f64().is_some_and(|x| x == 0.0 && x.is_sign_negative()) => {
            *v = Value::from(0.0);
        }
        Value::Array(a) => a.iter_mut().for_each(no_negative_zero),
        Value::Object(m) => m.values_mut().for_each(no_negative_zero),
        _ => {}
    }
}

/// A named CSV table: records that [`flatten`] turns into rows.
pub type Records = (&'static str, Vec<Value>);

/// Serializes `v` to a JSON value (for CSV records).
pub fn record<T: Serialize>(v: &T) -> Result<Value> {
    serde_json::to_value(v).map_err(|e| Error::Internal(e.to_string()))
}

impl Data {
    /// The whole value as pretty JSON.
    pub fn to_json(&self) -> Result<String> {
        match self {
            Data::Estimate(v) => pretty(v),
            Data::Sweep(v) => pretty(v),
            Data::Compare(v) => pretty(v),
            Data::Collective(v) => pretty(v),
        }
    }

    /// The CSV tables this value has, the default first.
    pub fn tables(&self) -> Result<Vec<Records>> {
        match self {
            Data::Estimate(v) => v.tables(),
            Data::Sweep(v) => v.tables(),
            Data::Compare(v) => v.tables(),
            Data::Collective(v) => v.tables(),
        }
    }
}

/// Flattens a JSON object into (column, cell) pairs: nested objects join their keys with
/// '.' (`plan.tp`); arrays (notes, explanations) are left out; null is an empty cell.
pub fn flatten(prefix: &str, v: &Value, out: &mut Vec<(String, String)>) {
    match v {
        Value::Object(m) => flatten_map(prefix, m, out),
        Value::Array(_) => {}
        Value::Null => out.push((prefix.to_string(), String::new())),
        Value::String(s) => out.push((prefix.to_string(), s.clone())),
        Value::Bool(b) => out.push((prefix.to_string(), b.to_string())),
        Value::Number(n) => out.push((prefix.to_string(), number(n))),
    }
}

/// A number as CSV writes it: integral values without ".0" (bytes, counts), others in
/// serde_json's shortest round-trip form.
fn number(n: &serde_json::Number) -> String {
    match n.as_f64() {
        Some(0.0) => "0".into(),
        Some(x) if !n.is_f64() || (x.fract() == 0.0 && x.abs() < 9e15) => format!("{x:.0}"),
        _ => n.to_string(),
    }
}

fn flatten_map(prefix: &str, m: &Map<String, Value>, out: &mut Vec<(String, String)>) {
    for (k, v) in m {
        let key = if prefix.is_empty() {
            k.clone()
        } else {
            format!("{prefix}.{k}")
        };
        flatten(&key, v, out);
    }
}

/// Writes records as one CSV table: the union of their columns, in first-seen order, as
/// the header; one row per record. No records, no text (there is no header to write).
pub fn csv_table(records: &[Value]) -> Result<String> {
    if records.is_empty() {
        return Ok(String::new());
    }
    let rows: Vec<Vec<(String, String)>> = records
        .iter()
        .map(|r| {
            let mut v = Vec::new();
            flatten("", r, &mut v);
            v
        })
        .collect();
    let mut header: Vec<&str> = Vec::new();
    for (k, _) in rows.iter().flatten() {
        if !header.contains(&k.as_str()) {
            header.push(k);
        }
    }
    let err = |e: csv::Error| Error::Internal(format!("csv: {e}"));
    let mut w = csv::Writer::from_writer(Vec::new());
    w.write_record(&header).map_err(err)?;
    for r in &rows {
        w.write_record(header.iter().map(|h| {
            r.iter()
                .find(|(k, _)| k == h)
                .map_or("", |(_, v)| v.as_str())
        }))
        .map_err(err)?;
    }
    let bytes = w
        .into_inner()
        .map_err(|e| Error::Internal(format!("csv: {e}")))?;
    String::from_utf8(bytes).map_err(|e| Error::Internal(format!("csv: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn records_flatten_to_one_header_with_integers_as_integers() {
        let rows = [
            json!({"a": 64, "plan": {"tp": 8, "sp": true}, "t_s": 0.5, "notes": ["x"]}),
            json!({"a": 85899345920.0, "plan": {"tp": 1, "sp": false}, "t_s": null}),
        ];
        let csv = csv_table(&rows).unwrap();
        assert_eq!(
            csv, "a,plan.tp,plan.sp,t_s\n64,8,true,0.5\n85899345920,1,false,\n",
            "{csv}"
        );
    }

    #[test]
    fn every_schema_generates_and_names_its_version() {
        for (name, f) in SCHEMAS {
            let s = serde_json::to_value(f()).unwrap();
            assert!(
                s["properties"]["schema_version"].is_object() || name == "sweep-all-row",
                "{name}: {s}"
            );
        }
        assert!(
            schema("estimat")
                .unwrap_err()
                .to_string()
                .contains("estimate")
        );
    }
}
