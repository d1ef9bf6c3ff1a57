//! Memory tiers beyond a device's HBM, as a system file writes them (`[[memory_tiers]]`):
//! host memory behind PCIe or NVLink-C2C, NVMe behind the host, a remote pool over the
//! network (ASTRA-sim's memory API). [`TierSpec`] mirrors the TOML; [`Tiers`] is the
//! validated, `Copy` form the estimate reads, in per-GPU terms.
//!
//! Per GPU: a pool of `capacity` shared by `shared_by` GPUs gives each `capacity /
//! shared_by`; `bandwidth` is what one GPU moves each way when every GPU sharing the link
//! moves data at once (data-parallel ranks offload in lockstep), so the file states the
//! contended figure, with its derivation in a comment. The HBM tier is the device's own
//! `memory` and `memory_bandwidth`.

use crate::error::{Error, Result};
use crate::units::{Bandwidth, Bytes, Seconds, serde_units};
use serde::{Deserialize, Serialize};

/// Where a tier sits.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TierKind {
    /// Host (CPU) memory: DDR behind PCIe, LPDDR5X behind NVLink-C2C.
    Host,
    /// NVMe SSDs, reached through the host (DeepSpeed's DeepNVMe).
    Nvme,
    /// A memory pool over the network (ASTRA-sim's remote memory).
    Remote,
}

impl TierKind {
    /// "host", "nvme", "remote".
    pub fn name(self) -> &'static str {
        match self {
            TierKind::Host => "host",
            TierKind::Nvme => "nvme",
            TierKind::Remote => "remote",
        }
    }
}

/// One `[[memory_tiers]]` entry of a system file.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TierSpec {
    /// `host`, `nvme` or `remote`.
    pub kind: TierKind,
    /// The link to the GPU, for the reader ("PCIe Gen4 x16", "NVLink-C2C").
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub link: String,
    /// Capacity of the whole pool ("2TiB").
    #[serde(with = "serde_units::bytes")]
    pub capacity: Bytes,
    /// GPUs that share the pool and its link (default 1).
    #[serde(default = "one", skip_serializing_if = "is_one")]
    pub shared_by: u32,
    /// Per GPU, each direction, with every sharer moving data ("25 GB/s").
    #[serde(with = "serde_units::bandwidth")]
    pub bandwidth: Bandwidth,
    /// Latency of one transfer ("2 us").
    #[serde(with = "serde_units::seconds", default = "zero_s")]
    pub latency: Seconds,
    /// Host tiers: parameters per second the host CPU updates with Adam, all its cores
    /// (shared by `shared_by` GPUs' optimizer shards). Unset: the optimizer cannot run here.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub adam_params_per_s: Option<f64>,
}

fn one() -> u32 {
    1
}

fn is_one(n: &u32) -> bool {
    *n == 1
}

fn zero_s() -> Seconds {
    Seconds::ZERO
}

/// One validated tier, per GPU.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Tier {
    /// Where it sits.
    pub kind: TierKind,
    /// This GPU's share of the capacity: `capacity / shared_by`.
    pub capacity: Bytes,
    /// Per GPU, each direction.
    pub bandwidth: Bandwidth,
    /// Per transfer.
    pub latency: Seconds,
    /// Adam parameters per second this GPU's share of the host CPU updates:
    /// `adam_params_per_s / shared_by` (0: none).
    pub adam_rate: f64,
}

impl Tier {
    /// Time to move `bytes` in `n` transfers one way: `n·latency + bytes / bandwidth`.
    pub fn time(&self, bytes: f64, n: f64) -> Seconds {
        if bytes <= 0.0 {
            return Seconds::ZERO;
        }
        self.latency * n + Bytes::new(bytes) / self.bandwidth
    }
}

/// The tiers of a system beyond HBM (at most one of each kind). `Copy`.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Tiers {
    /// Host memory.
    pub host: Option<Tier>,
    /// NVMe.
    pub nvme: Option<Tier>,
    /// Remote pool.
    pub remote: Option<Tier>,
}

impl Tiers {
    /// Validates a system file's `[[memory_tiers]]`: each kind at most once, capacities
    /// and bandwidths > 0, `shared_by` ≥ 1, a CPU Adam rate only on the host tier.
    pub fn from_specs(specs: &[TierSpec]) -> Result<Tiers> {
        let mut t = Tiers::default();
        for (i, s) in specs.iter().enumerate() {
            let key = |k: &str| format!("memory_tiers[{i}].{k}");
            let positive = |v: f64| v > 0.0 && v.is_finite();
            if s.shared_by == 0 {
                return Err(Error::input(key("shared_by"), "must be ≥ 1"));
            }
            if !positive(s.capacity.get()) {
                return Err(Error::input(key("capacity"), "must be > 0, e.g. \"2TiB\""));
            }
            if !positive(s.bandwidth.get()) {
                return Err(Error::input(
                    key("bandwidth"),
                    "must be > 0, e.g. \"25 GB/s\"",
                ));
            }
            if !(s.latency.get() >= 0.0 && s.latency.get().is_finite()) {
                return Err(Error::input(key("latency"), "must be ≥ 0, e.g. \"2 us\""));
            }
            let rate = match s.adam_params_per_s {
                Some(r) if s.kind != TierKind::Host => {
                    return Err(Error::input(
                        key("adam_params_per_s"),
                        format!(
                            "only a host tier has a CPU (got {r} on a {} tier)",
                            s.kind.name()
                        ),
                    ));
                }
                Some(r) if !positive(r) => {
                    return Err(Error::input(
                        key("adam_params_per_s"),
                        format!("must be > 0 parameters per second, got {r}"),
                    ));
                }
                Some(r) => r / s.shared_by as f64,
                None => 0.0,
            };
            let tier = Tier {
                kind: s.kind,
                capacity: s.capacity / s.shared_by as f64,
                bandwidth: s.bandwidth,
                latency: s.latency,
                adam_rate: rate,
            };
            let slot = match s.kind {
                TierKind::Host => &mut t.host,
                TierKind::Nvme => &mut t.nvme,
                TierKind::Remote => &mut t.remote,
            };
            if slot.is_some() {
                return Err(Error::input(
                    key("kind"),
                    format!("a second '{}' tier (one of each kind)", s.kind.name()),
                ));
            }
            *slot = Some(tier);
        }
        Ok(t)
    }

    /// The tier of `kind`, if the system has one.
    pub fn get(&self, kind: TierKind) -> Option<&Tier> {
        match kind {
            TierKind::Host => self.host.as_ref(),
            TierKind::Nvme => self.nvme.as_ref(),
            TierKind::Remote => self.remote.as_ref(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use approx::assert_relative_eq;

    fn spec(text: &str) -> Result<Tiers> {
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        struct F {
            memory_tiers: Vec<TierSpec>,
        }
        let f: F = toml::from_str(text).map_err(|e| Error::input("toml", e.to_string()))?;
        Tiers::from_specs(&f.memory_tiers)
    }

    #[test]
    fn per_gpu_shares_by_hand() {
        // 2 TiB shared by 8 GPUs: 2·2^40/8 = 274877906944 B each; Adam 1.6e9 params/s over
        // 8 GPUs: 2e8 each. 64 MB over 25 GB/s + 2 us latency: 2.56 ms + 2 us.
        let t = spec(
            "[[memory_tiers]]\nkind = \"host\"\ncapacity = \"2TiB\"\nshared_by = 8\n\
             bandwidth = \"25 GB/s\"\nlatency = \"2 us\"\nadam_params_per_s = 1.6e9\n",
        )
        .unwrap();
        let h = t.host.unwrap();
        assert_relative_eq!(h.capacity.get(), 274877906944.0);
        assert_relative_eq!(h.adam_rate, 2e8);
        assert_relative_eq!(h.time(64e6, 1.0).get(), 2.562e-3, max_relative = 1e-12);
        assert_eq!(h.time(0.0, 1.0), Seconds::ZERO);
        assert!(t.nvme.is_none());
    }

    #[test]
    fn bad_tiers_are_named() {
        let e = spec("[[memory_tiers]]\nkind = \"host\"\ncapacity = \"1TB\"\nbandwidth = 5\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("has no unit"), "{e}");
        let e =
            spec("[[memory_tiers]]\nkind = \"disk\"\ncapacity = \"1TB\"\nbandwidth = \"5GB/s\"\n")
                .unwrap_err()
                .to_string();
        assert!(e.contains("unknown variant"), "{e}");
        let e = spec(
            "[[memory_tiers]]\nkind = \"nvme\"\ncapacity = \"1TB\"\nbandwidth = \"5GB/s\"\nadam_params_per_s = 1e9\n",
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("memory_tiers[0].adam_params_per_s"), "{e}");
        let two = "[[memory_tiers]]\nkind = \"nvme\"\ncapacity = \"1TB\"\nbandwidth = \"5GB/s\"\n";
        let e = spec(&format!("{two}{two}")).unwrap_err().to_string();
        assert!(e.contains("memory_tiers[1].kind"), "{e}");
        let e = spec("[[memory_tiers]]\nkind = \"host\"\ncapacity = \"1TB\"\nbandwidth = \"5GB/s\"\nspeed = 1\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("unknown field"), "{e}");
    }
}
