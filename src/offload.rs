//! Offload plans: which training state leaves HBM for a slower tier ([`tiers`]) and what
//! that costs per iteration ([`cost`]). [`Offload`] is the plan's `Copy` setting, read from
//! `--offload` / `[plan] offload` as a list of items, each with an optional tier:
//!
//! - `optimizer[:host|:nvme]`: the fp32 master weights and Adam moments (12 B/param) and
//!   the optimizer step run on the host CPU (Megatron-core `--optimizer-cpu-offload`,
//!   `megatron/core/optimizer/cpu_offloading/hybrid_optimizer.py`); the gradients stay on
//!   the GPU and go down once per step.
//! - `gradients`: the gradients live with the optimizer too, streamed down as backward
//!   produces them (DeepSpeed ZeRO-Offload, `offload_optimizer` in
//!   `deepspeed/runtime/zero/stage_1_and_2.py`; needs `optimizer`).
//! - `params[:host|:nvme]`: the 16-bit parameter shard, fetched one layer ahead for every
//!   pass (ZeRO-Infinity `offload_param`, `deepspeed/runtime/zero/parameter_offload.py`;
//!   needs ZeRO-3).
//! - `activations`: activations kept for backward go to host memory as forward produces
//!   them and come back one layer ahead of backward (Megatron-core `--cpu-offloading`
//!   activations; ZeRO-Infinity activation-checkpoint offload); `activations=N` offloads
//!   N layers of a stage's and keeps the rest in HBM (Megatron-core
//!   `cpu_offloading_num_layers`; Transformer Engine's `get_cpu_offload_context`
//!   documents the activation memory as `(layers − offloaded layers) · T`).
//!
//! Aliases: `zero-offload` = `optimizer,gradients` (Ren et al., USENIX ATC'21);
//! `zero-infinity[:nvme|:host]` = `optimizer,gradients,params` on NVMe by default
//! (Rajbhandari et al., SC'21); `optimizer-cpu-offload` = `optimizer`; `cpu-offloading`
//! and `activation-offloading` = `activations`; `none`.

pub mod cost;
pub mod tiers;

pub use cost::{Cost, Inputs};
pub use tiers::{Tier, TierKind, TierSpec, Tiers};

use crate::error::{Error, Result};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Where one kind of state lives.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Place {
    /// On the GPU (not offloaded).
    #[default]
    Hbm,
    /// Host memory.
    Host,
    /// NVMe.
    Nvme,
}

impl Place {
    /// Whether the state has left HBM.
    pub fn off(self) -> bool {
        self != Place::Hbm
    }

    /// The tier it lives on, if offloaded.
    pub fn tier(self) -> Option<TierKind> {
        match self {
            Place::Hbm => None,
            Place::Host => Some(TierKind::Host),
            Place::Nvme => Some(TierKind::Nvme),
        }
    }
}

/// An offload plan: where the optimizer states, gradients, parameters and activations
/// live. `Copy`; the default keeps everything in HBM.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Offload {
    /// Optimizer states and the optimizer step.
    pub optimizer: Place,
    /// Gradients (only with the optimizer offloaded; on the host).
    pub gradients: Place,
    /// 16-bit parameters (ZeRO-3 shard).
    pub params: Place,
    /// Activations kept for backward (host only).
    pub activations: Place,
    /// Layers per stage whose activations go (`activations=N`); 0: every layer but the
    /// two in flight.
    pub activation_layers: u16,
}

/// The item names, for errors.
const ITEMS: [&str; 10] = [
    "none",
    "optimizer",
    "gradients",
    "params",
    "activations",
    "zero-offload",
    "zero-infinity",
    "optimizer-cpu-offload",
    "cpu-offloading",
    "activation-offloading",
];

impl Offload {
    /// Nothing offloaded.
    pub const NONE: Offload = Offload {
        optimizer: Place::Hbm,
        gradients: Place::Hbm,
        params: Place::Hbm,
        activations: Place::Hbm,
        activation_layers: 0,
    };

    /// Whether anything is offloaded.
    pub fn any(&self) -> bool {
        *self != Offload::NONE
    }

    /// Whether nothing is offloaded (for serde's `skip_serializing_if`).
    pub fn is_none(&self) -> bool {
        !self.any()
    }

    /// Parses a list of items separated by `,` or `+` (`optimizer,params:nvme`,
    /// `zero-offload`, `zero-infinity:host`); `what` names the flag or key for errors.
    pub fn parse(s: &str, what: &str) -> Result<Offload> {
        let mut o = Offload::NONE;
        for item in s.split([',', '+']).map(str::trim).filter(|i| !i.is_empty()) {
            let norm = item.to_ascii_lowercase().replace('_', "-");
            let (norm, count) = match norm.split_once('=') {
                Some((n, c)) => (n.trim().to_string(), Some(c.trim().to_string())),
                None => (norm, None),
            };
            let (name, tier) = match norm.split_once(':') {
                Some((n, t)) => (n.to_string(), Some(t.to_string())),
                None => (norm.clone(), None),
            };
            let place = |default: Place, nvme_ok: bool| -> Result<Place> {
                match tier.as_deref() {
                    None => Ok(default),
                    Some("host" | "cpu") => Ok(Place::Host),
                    Some("nvme") if nvme_ok => Ok(Place::Nvme),
                    Some(t) => Err(Error::input(
                        what,
                        format!(
                            "'{item}': tier '{t}' is not one {name} can use (expected {})",
                            if nvme_ok { "host or nvme" } else { "host" }
                        ),
                    )),
                }
            };
            let is_acts = matches!(
                name.as_str(),
                "activations" | "cpu-offloading" | "activation-offloading"
            );
            if count.is_some() && !is_acts {
                return Err(Error::input(
                    what,
                    format!("'{item}': only activations take a layer count (activations=N)"),
                ));
            }
            match name.as_str() {
                "none" => place(Place::Hbm, false).map(|_| ())?,
                "optimizer" | "optimizer-cpu-offload" => {
                    o.optimizer = place(Place::Host, name == "optimizer")?
                }
                "gradients" | "grads" => o.gradients = place(Place::Host, false)?,
                "params" | "parameters" | "weights" => o.params = place(Place::Host, true)?,
                "activations" | "cpu-offloading" | "activation-offloading" => {
                    o.activations = place(Place::Host, false)?;
                    if let Some(c) = &count {
                        o.activation_layers = c.parse().ok().filter(|&n| n > 0).ok_or_else(|| {
                            Error::input(
                                what,
                                format!("'{item}': expected a whole number of layers ≥ 1 after '=', got '{c}'"),
                            )
                        })?;
                    }
                }
                "zero-offload" => {
                    o.optimizer = place(Place::Host, false)?;
                    o.gradients = Place::Host;
                }
                "zero-infinity" => {
                    let p = place(Place::Nvme, true)?;
                    (o.optimizer, o.params, o.gradients) = (p, p, Place::Host);
                }
                _ => return Err(Error::unknown("offload item", item, &ITEMS).context(what)),
            }
        }
        if o.gradients.off() && !o.optimizer.off() {
            return Err(Error::input(
                what,
                "gradients move to the host only with the optimizer (DeepSpeed ZeRO-Offload \
                 offloads them together); write 'optimizer,gradients' or 'zero-offload'",
            ));
        }
        Ok(o)
    }

    /// The canonical list: `optimizer:nvme,gradients,params:nvme` (`none` when empty).
    pub fn name(&self) -> String {
        let mut out: Vec<String> = Vec::new();
        let mut push = |n: &str, p: Place| match p {
            Place::Hbm => {}
            Place::Host => out.push(n.to_string()),
            Place::Nvme => out.push(format!("{n}:nvme")),
        };
        push("optimizer", self.optimizer);
        push("gradients", self.gradients);
        push("params", self.params);
        match self.activation_layers {
            0 => push("activations", self.activations),
            n => out.push(format!("activations={n}")),
        }
        if out.is_empty() {
            return "none".into();
        }
        out.join(",")
    }
}

/// What an offload plan needs of the rest of the plan: a transformer model (the cost is
/// laid out per layer), and ZeRO-3 for parameter offload (DeepSpeed's `offload_param`
/// exists only in stage 3: the GPU must hold a gathered layer, not the whole model).
pub fn check_plan(p: &crate::parallel::Plan, model: &crate::model::Model) -> Result<()> {
    if !p.offload.any() {
        return Ok(());
    }
    if model.transformer().is_none() {
        return Err(crate::parallel::bad(
            "offload",
            format!(
                "is modelled for transformer models only, not '{}'",
                model.name()
            ),
        ));
    }
    if p.offload.params.off() && p.zero != 3 {
        return Err(crate::parallel::bad(
            "offload",
            format!(
                "params offload needs zero = 3 (DeepSpeed offload_param is a ZeRO-3 feature), got zero = {}",
                p.zero
            ),
        ));
    }
    let n = p.offload.activation_layers;
    if n > 0 {
        // Megatron-core's TransformerConfig refuses CPU offloading with pipeline parallelism
        // or activation recomputation, and offloads fewer layers than it runs.
        let why = if p.pp > 1 {
            Some(format!(
                "needs pp = 1, got {} (Megatron-core has no CPU offloading with pipeline parallelism)",
                p.pp
            ))
        } else if p.recompute != crate::parallel::Recompute::None {
            Some(format!(
                "needs recompute = none, got {} (Megatron-core has no CPU offloading with recomputation)",
                format!("{:?}", p.recompute).to_lowercase()
            ))
        } else if u32::from(n) >= p.stages.max_layers() {
            Some(format!(
                "must offload fewer layers than the model's {} (Megatron-core: cpu_offloading_num_layers < num_layers)",
                p.stages.max_layers()
            ))
        } else {
            None
        };
        if let Some(why) = why {
            return Err(crate::parallel::bad(
                "offload",
                format!("activations={n} (Megatron-core cpu_offloading_num_layers) {why}"),
            ));
        }
    }
    Ok(())
}

impl Serialize for Offload {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.serialize_str(&self.name())
    }
}

impl<'de> Deserialize<'de> for Offload {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Offload, D::Error> {
        let s = String::deserialize(d)?;
        Offload::parse(&s, "offload").map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[track_caller]
    fn is(s: &str, name: &str) {
        assert_eq!(Offload::parse(s, "--offload").unwrap().name(), name, "{s}");
    }

    #[test]
    fn items_and_aliases() {
        is("optimizer", "optimizer");
        is("zero-offload", "optimizer,gradients");
        is("zero-infinity", "optimizer:nvme,gradients,params:nvme");
        is("zero_infinity:host", "optimizer,gradients,params");
        is("optimizer-cpu-offload", "optimizer");
        is("cpu-offloading", "activations");
        is("optimizer+activations", "optimizer,activations");
        is("activations=40", "activations=40");
        is("cpu_offloading = 20, optimizer", "optimizer,activations=20");
        is("Optimizer:NVME, params", "optimizer:nvme,params");
        is("none", "none");
        is("", "none");
    }

    #[test]
    fn bad_items_name_the_flag() {
        let e = Offload::parse("optimiser", "--offload")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("--offload") && e.contains("did you mean 'optimizer'"),
            "{e}"
        );
        let e = Offload::parse("activations:nvme", "--offload")
            .unwrap_err()
            .to_string();
        assert!(e.contains("expected host"), "{e}");
        let e = Offload::parse("gradients", "--offload")
            .unwrap_err()
            .to_string();
        assert!(e.contains("only with the optimizer"), "{e}");
        for bad in ["activations=0", "activations=x", "activations=-3"] {
            let e = Offload::parse(bad, "--offload").unwrap_err().to_string();
            assert!(e.contains("whole number of layers"), "{e}");
        }
        let e = Offload::parse("activations=5,optimizer=3", "--offload")
            .unwrap_err()
            .to_string();
        assert!(e.contains("only activations take a layer count"), "{e}");
        let e = Offload::parse("optimizer-cpu-offload:nvme", "x")
            .unwrap_err()
            .to_string();
        assert!(e.contains("tier 'nvme'"), "{e}");
    }

    #[test]
    fn serde_round_trip() {
        #[derive(Serialize, Deserialize, PartialEq, Debug)]
        struct P {
            offload: Offload,
        }
        let p: P = toml::from_str("offload = \"zero-infinity\"").unwrap();
        let back: P = toml::from_str(&toml::to_string(&p).unwrap()).unwrap();
        assert_eq!(p, back);
        assert!(toml::from_str::<P>("offload = \"everything\"").is_err());
    }
}
