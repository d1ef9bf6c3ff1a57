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
    /// Sequence parallelism on the TP group (default: true; only with tp > 1).
    #[arg(long, value_name = "BOOL", num_args = 0..=1, default_missing_value = "true")]
    pub sequence_parallel: Option<bool>,
    /// Micro-batch size (sequences).
    #[arg(long)]
    pub micro_batch: Option<u32>,
    /// Global batch size (sequences).
    #[arg(long)]
    pub global_batch: Option<u32>,
    /// Pipeline schedule: gpipe, 1f1b, interleaved.
    #[arg(long)]
    pub schedule: Option<String>,
    /// Model chunks per stage for the interleaved schedule (implies --schedule interleaved).
    #[arg(long, value_name = "V")]
    pub virtual_stages: Option<u32>,
    /// Activation recomputation: none, selective, full.
    #[arg(long)]
    pub recompute: Option<String>,
    /// ZeRO stage 0–3 (1 = distributed optimizer, 3 = FSDP) (default: 1).
    #[arg(long)]
    pub zero: Option<u8>,
    /// Same as --zero 3.
    #[arg(long)]
    pub fsdp: bool,
    /// Overlap the DP gradient reduction with backward (default: true).
    #[arg(long, value_name = "BOOL", num_args = 0..=1, default_missing_value = "true")]
    pub dp_overlap: Option<bool>,
    /// DP bucket size, e.g. 25MB.
    #[arg(long)]
    pub dp_bucket: Option<String>,
    /// Overlap TP communication with GEMMs (default: true).
    #[arg(long, value_name = "BOOL", num_args = 0..=1, default_missing_value = "true")]
    pub tp_overlap: Option<bool>,
    /// Matrix precision: bf16, fp16, fp8, tf32, fp32.
    #[arg(long)]
    pub precision: Option<String>,
    /// Optimizer layout: adam (16 B/param) or adam-fp32-grads (18 B/param, Megatron-LM).
    #[arg(long)]
    pub optimizer: Option<String>,
    /// Fused (flash) attention (default: true).
    #[arg(long, value_name = "BOOL", num_args = 0..=1, default_missing_value = "true")]
    pub flash_attention: Option<bool>,
    /// Group order on the network: tp-dp-pp or tp-pp-dp.
    #[arg(long)]
    pub order: Option<String>,
}

fn parse_enum<T: serde::de::DeserializeOwned>(flag: &str, v: &str, valid: &[&str]) -> Result<T> {
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
        set!(tp, pp, ep, micro_batch);
        p.gpus = self.gpus.or(p.gpus);
        p.dp = self.dp.or(p.dp);
        p.global_batch = self.global_batch.or(p.global_batch);
        for (dst, flag) in [
            (&mut p.sequence_parallel, self.sequence_parallel),
            (&mut p.tp_overlap, self.tp_overlap),
            (&mut p.flash_attention, self.flash_attention),
            (&mut p.dp_overlap, self.dp_overlap),
        ] {
            if let Some(v) = flag {
                *dst = v;
            }
        }
        if let Some(s) = &self.schedule {
            p.schedule = parse_enum("--schedule", s, &["gpipe", "1f1b", "interleaved"])?;
        }
        if let Some(v) = self.virtual_stages {
            p.virtual_stages = v;
            if v > 1 {
                p.schedule = Schedule::Interleaved;
            }
        }
        if let Some(s) = &self.recompute {
            p.recompute =
                parse_enum::<Recompute>("--recompute", s, &["none", "selective", "full"])?;
        }
        p.zero = if self.fsdp {
            3
        } else {
            self.zero.unwrap_or(p.zero)
        };
        if let Some(b) = &self.dp_bucket {
            p.dp_bucket = parse_bytes("--dp-bucket", b)?;
        }
        if let Some(s) = &self.precision {
            p.precision = Precision::parse(s).map_err(|e| e.context("--precision"))?;
        }
        if let Some(s) = &self.optimizer {
            p.optimizer = parse_enum::<Optimizer>("--optimizer", s, &["adam", "adam-fp32-grads"])?;
        }
        if let Some(s) = &self.order {
            p.order = parse_enum::<Order>("--order", s, &["tp-dp-pp", "tp-pp-dp"])?;
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
            ("micro_batch", self.micro_batch),
            ("global_batch", self.global_batch),
            ("virtual_stages", self.virtual_stages),
            (
                "zero",
                if self.fsdp {
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
            ("precision", &self.precision),
            ("dp_bucket", &self.dp_bucket),
            ("optimizer", &self.optimizer),
            ("order", &self.order),
        ] {
            if let Some(v) = v {
                t.insert(k.into(), Value::String(v.clone()));
            }
        }
        for (k, v) in [
            ("sequence_parallel", self.sequence_parallel),
            ("tp_overlap", self.tp_overlap),
            ("flash_attention", self.flash_attention),
            ("dp_overlap", self.dp_overlap),
        ] {
            if let Some(v) = v {
                t.insert(k.into(), Value::Boolean(v));
            }
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
            virtual_stages: Some(2),
            fsdp: true,
            dp_overlap: Some(false),
            recompute: Some("selective".into()),
            ..PlanFlags::default()
        };
        let p = f.apply(PlanSpec::practice()).unwrap();
        assert_eq!((p.tp, p.virtual_stages, p.zero), (8, 2, 3));
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
