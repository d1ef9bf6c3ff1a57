//! A system: one device type and the network that connects the devices.
//! [`SystemSpec`] mirrors `presets/systems/*.toml`; [`System`] is validated (device
//! resolved, topology built) and can be cut to a device count with [`System::with_gpus`].
//! The optional `[collective]` table ([`CollectiveSpec`]) says how the estimate runs its
//! collectives (algorithm, chunks, schedule); it is carried as `Copy` [`Options`].

use crate::collective::{Algorithm, MAX_CHUNKS, Options, Schedule};
use crate::compute::Device;
use crate::error::{Error, Result};
use crate::network::{DimSpec, Topology};
use serde::{Deserialize, Serialize};

/// `[network]` table: dimensions innermost first.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NetworkSpec {
    /// `[[network.dims]]`, innermost (fastest) first.
    pub dims: Vec<DimSpec>,
}

/// A system preset as written.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SystemSpec {
    /// Short name (`dgx-a100`).
    pub name: String,
    /// Human description.
    #[serde(default)]
    pub description: String,
    /// Device preset name or path.
    pub device: String,
    /// The network.
    pub network: NetworkSpec,
    /// `[collective]`: how the estimate runs collectives (omitted when default).
    #[serde(default, skip_serializing_if = "CollectiveSpec::is_default")]
    pub collective: CollectiveSpec,
    /// How many innermost network dimensions form one load/store (NVLink) domain. Chunked
    /// TP comm–GEMM overlap (Transformer Engine userbuffers, Megatron `--tp-comm-overlap`)
    /// needs the whole TP group inside it: userbuffers rely on CUDA IPC / multicast handles
    /// that exist only within an NVLink domain (TransformerEngine issue #1071). Default 1
    /// (a GPU node or NVL72 rack); a TPU torus, where XLA's collective matmul runs over
    /// ICI, sets all its dimensions.
    #[serde(default = "one_dim", skip_serializing_if = "is_one_dim")]
    pub scale_up_dims: u32,
    /// GPUs per compute node (tray) when the innermost dimension is an NVLink domain of
    /// several nodes (GB200/GB300 NVL72: 18 trays of 4 GPUs). A job takes whole nodes, and
    /// beyond one domain it is cut into Slurm segments ([`segment_nodes`]). Unset: the
    /// innermost dimension is one node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpus_per_node: Option<u32>,
    /// `[calibration]`: global time factors fitted by `astrolabe calibrate step`.
    #[serde(default, skip_serializing_if = "CalibrationSpec::is_default")]
    pub calibration: CalibrationSpec,
    /// `[[memory_tiers]]`: memory beyond HBM per device (host, NVMe, a remote pool), for
    /// offload plans (`crate::offload`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub memory_tiers: Vec<crate::offload::TierSpec>,
    /// Price of one device-hour (any currency; a finite number ≥ 0) for the cost rows of
    /// `astrolabe compare`; a `--gpu-hour-price` flag or a scenario's `gpu_hour_price`
    /// overrides it.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "de::price"
    )]
    pub gpu_hour_price: Option<f64>,
}

fn one_dim() -> u32 {
    1
}

fn is_one_dim(n: &u32) -> bool {
    *n == 1
}

/// `[calibration]` table of a system: measured-over-modelled time factors, fitted by
/// `astrolabe calibrate step` (`crate::calibrate::step`). `compute` multiplies every
/// kernel's time (the device's GEMM efficiencies, 16-bit and low-precision, its fused
/// attention and memory efficiencies are divided by it and its kernel overhead and
/// measured delta-rule times multiplied: t = F/(peak·e) + o, t = M/(bw·e) + o and
/// t = n·τ scale exactly); `communication` multiplies every collective's time (each dimension's
/// bandwidth is divided by it and its latency multiplied: t = s·α + c·n/B scales exactly).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CalibrationSpec {
    /// Time factor on compute (> 0; 1 = as modelled).
    #[serde(default = "unit")]
    pub compute: f64,
    /// Time factor on communication (> 0; 1 = as modelled).
    #[serde(default = "unit")]
    pub communication: f64,
}

fn unit() -> f64 {
    1.0
}

impl Default for CalibrationSpec {
    fn default() -> Self {
        CalibrationSpec {
            compute: 1.0,
            communication: 1.0,
        }
    }
}

impl CalibrationSpec {
    /// Whether both factors are 1 (then the table is not written back).
    pub fn is_default(&self) -> bool {
        *self == CalibrationSpec::default()
    }

    /// Applies the factors to a device and a topology (see the type's documentation).
    pub(crate) fn apply(&self, device: &mut Device, topology: &mut Topology) -> Result<()> {
        for (k, v) in [
            ("compute", self.compute),
            ("communication", self.communication),
        ] {
            if !(v > 0.0 && v.is_finite()) {
                return Err(Error::input(
                    format!("calibration.{k}"),
                    format!("must be a finite factor > 0, got {v}"),
                ));
            }
        }
        let e = &mut device.spec.efficiency;
        e.gemm /= self.compute;
        e.gemm_lowp = e.gemm_lowp.map(|l| l / self.compute);
        e.flash_fwd /= self.compute;
        e.flash_bwd /= self.compute;
        e.fa2_fwd = e.fa2_fwd.map(|f| f / self.compute);
        e.fa2_bwd = e.fa2_bwd.map(|b| b / self.compute);
        e.memory /= self.compute;
        e.kernel_overhead = e.kernel_overhead * self.compute;
        e.gdn_fwd = e.gdn_fwd.map(|p| p.map(|t| t * self.compute));
        e.gdn_bwd = e.gdn_bwd.map(|p| p.map(|t| t * self.compute));
        for d in topology.dims_mut() {
            d.bandwidth = d.bandwidth / self.communication;
            d.latency = d.latency * self.communication;
        }
        Ok(())
    }
}

/// `[collective]` table of a system. Values are checked while the TOML is read, so a bad
/// one is reported with its file, line and column.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CollectiveSpec {
    /// Chunks each collective is split into to pipeline its phases across dimensions
    /// (1 ..= `MAX_CHUNKS`).
    #[serde(default = "one_chunk", deserialize_with = "de::chunks")]
    pub chunks: u32,
    /// `"nccl"` (default), `"baseline"` or `"themis"`.
    #[serde(default, with = "de::schedule")]
    pub schedule: Schedule,
    /// `"auto"` (NCCL's choice: ring for all-reduce, reduce-scatter and all-gather, the
    /// fastest applicable algorithm otherwise) or any algorithm name.
    #[serde(default = "auto", with = "de::algorithm")]
    pub algorithm: Algorithm,
    /// Overrides `algorithm` for the data-parallel gradient reduction (and ZeRO gathers).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        with = "de::opt_algorithm"
    )]
    pub dp_algorithm: Option<Algorithm>,
}

fn one_chunk() -> u32 {
    1
}

fn auto() -> Algorithm {
    Algorithm::Auto
}

impl Default for CollectiveSpec {
    fn default() -> Self {
        CollectiveSpec {
            chunks: 1,
            schedule: Schedule::Nccl,
            algorithm: Algorithm::Auto,
            dp_algorithm: None,
        }
    }
}

impl CollectiveSpec {
    /// Whether every key has its default value (then the table is not written back).
    pub fn is_default(&self) -> bool {
        *self == CollectiveSpec::default()
    }

    /// Options of every collective but the data-parallel ones.
    pub fn options(&self) -> Options {
        Options {
            algorithm: self.algorithm,
            chunks: self.chunks,
            schedule: self.schedule,
        }
    }

    /// Options of the data-parallel gradient reduction and ZeRO gathers.
    pub fn dp_options(&self) -> Options {
        Options {
            algorithm: self.dp_algorithm.unwrap_or(self.algorithm),
            ..self.options()
        }
    }
}

/// `nccl` / `baseline` / `themis`.
pub fn schedule_name(s: Schedule) -> &'static str {
    s.name()
}

/// Serde adaptors for the `[collective]` keys (errors carry toml's line and column).
mod de {
    use super::*;
    use serde::de::Error as _;
    use serde::{Deserializer, Serializer};

    pub fn chunks<'de, D: Deserializer<'de>>(d: D) -> std::result::Result<u32, D::Error> {
        let n = i64::deserialize(d)?;
        if !(1..=i64::from(MAX_CHUNKS)).contains(&n) {
            return Err(D::Error::custom(format!(
                "collective.chunks must be between 1 and {MAX_CHUNKS}, got {n}"
            )));
        }
        Ok(n as u32)
    }

    pub mod schedule {
        use super::*;
        pub fn serialize<S: Serializer>(
            v: &Schedule,
            s: S,
        ) -> std::result::Result<S::Ok, S::Error> {
            s.serialize_str(schedule_name(*v))
        }
        pub fn deserialize<'de, D: Deserializer<'de>>(
            d: D,
        ) -> std::result::Result<Schedule, D::Error> {
            let s = String::deserialize(d)?;
            Schedule::parse(&s).map_err(|_| {
                D::Error::custom(format!(
                    "collective.schedule: unknown schedule '{s}' (expected \"nccl\", \"baseline\" or \"themis\")"
                ))
            })
        }
    }

    pub mod algorithm {
        use super::*;
        pub fn serialize<S: Serializer>(
            v: &Algorithm,
            s: S,
        ) -> std::result::Result<S::Ok, S::Error> {
            s.serialize_str(v.name())
        }
        pub fn deserialize<'de, D: Deserializer<'de>>(
            d: D,
        ) -> std::result::Result<Algorithm, D::Error> {
            parse(String::deserialize(d)?, "collective.algorithm")
        }
    }

    pub mod opt_algorithm {
        use super::*;
        pub fn serialize<S: Serializer>(
            v: &Option<Algorithm>,
            s: S,
        ) -> std::result::Result<S::Ok, S::Error> {
            match v {
                Some(a) => s.serialize_str(a.name()),
                None => s.serialize_none(),
            }
        }
        pub fn deserialize<'de, D: Deserializer<'de>>(
            d: D,
        ) -> std::result::Result<Option<Algorithm>, D::Error> {
            parse(String::deserialize(d)?, "collective.dp_algorithm").map(Some)
        }
    }

    pub fn price<'de, D: Deserializer<'de>>(d: D) -> std::result::Result<Option<f64>, D::Error> {
        let p = f64::deserialize(d)?;
        if !(p >= 0.0 && p.is_finite()) {
            return Err(D::Error::custom(format!(
                "gpu_hour_price must be a finite number ≥ 0 (a price per device-hour), got {p}"
            )));
        }
        Ok(Some(p + 0.0))
    }

    fn parse<E: serde::de::Error>(s: String, key: &str) -> std::result::Result<Algorithm, E> {
        Algorithm::parse(&s).map_err(|e| E::custom(format!("{key}: {e}")))
    }
}

/// A validated system.
#[derive(Clone, Debug, PartialEq)]
pub struct System {
    /// The spec it came from.
    pub spec: SystemSpec,
    /// The device on every NPU.
    pub device: Device,
    /// The network, innermost dimension first.
    pub topology: Topology,
    /// Options of every collective (from `[collective]`; `Copy`, for the hot path).
    pub collective: Options,
    /// Options of the data-parallel gradient reduction (`dp_algorithm` applied).
    pub dp_collective: Options,
    /// Memory tiers beyond HBM, per device (from `[[memory_tiers]]`).
    pub tiers: crate::offload::Tiers,
}

impl System {
    /// Builds a system from its spec and the resolved device.
    pub fn new(spec: SystemSpec, mut device: Device) -> Result<System> {
        let mut topology = Topology::from_specs(&spec.network.dims)
            .map_err(|e| e.context(format!("system '{}'", spec.name)))?;
        spec.calibration
            .apply(&mut device, &mut topology)
            .map_err(|e| e.context(format!("system '{}'", spec.name)))?;
        let tiers = crate::offload::Tiers::from_specs(&spec.memory_tiers)
            .map_err(|e| e.context(format!("system '{}'", spec.name)))?;
        Ok(System {
            tiers,
            collective: spec.collective.options(),
            dp_collective: spec.collective.dp_options(),
            spec,
            device,
            topology,
        })
    }

    /// This system with `cal`'s factors applied on top of its own (the factors multiply).
    pub fn calibrated(&self, cal: CalibrationSpec) -> Result<System> {
        let mut s = self.clone();
        cal.apply(&mut s.device, &mut s.topology)?;
        s.spec.calibration.compute *= cal.compute;
        s.spec.calibration.communication *= cal.communication;
        Ok(s)
    }

    /// Whether the collectives run with other than the default options.
    pub fn custom_collectives(&self) -> bool {
        self.collective != Options::default() || self.dp_collective != self.collective
    }

    /// The `--explain` line for non-default collective options.
    pub fn describe_collectives(&self) -> String {
        let (o, dp) = (self.collective, self.dp_collective);
        let dp = if dp.algorithm != o.algorithm {
            format!(", data-parallel reduction {}", dp.algorithm.name())
        } else {
            String::new()
        };
        format!(
            "collectives ([collective]): algorithm {}{dp}, {} chunk(s), {} schedule \
             (Themis reorders dimensions per chunk; it needs chunks > 1)",
            o.algorithm.name(),
            o.chunks,
            schedule_name(o.schedule)
        )
    }

    /// The short name.
    pub fn name(&self) -> &str {
        &self.spec.name
    }

    /// Number of devices: Π p_d.
    pub fn gpus(&self) -> u64 {
        self.topology.npus()
    }

    /// The error for a device count beyond what the system file states (its network's
    /// Π p_d): a preset is never grown silently.
    fn too_many(&self, gpus: u32) -> Error {
        let dims: Vec<String> = self
            .topology
            .dims()
            .iter()
            .map(|d| d.size.to_string())
            .collect();
        Error::input(
            "--gpus",
            format!(
                "{gpus} is more than system '{}' has: {} devices ({}, as its network states); \
                 to model a larger system, write it out with `astrolabe show system {} > big.toml`, \
                 raise the outermost network.dims size and pass --system big.toml",
                self.name(),
                self.gpus(),
                dims.join(" × "),
                self.name()
            ),
        )
    }

    /// The same system with `gpus` devices: the outermost dimension that is needed is
    /// resized (inner dimensions are whole building blocks such as a DGX node); a count
    /// below one node shrinks the innermost dimension. Errors when `gpus` is not a whole
    /// number of the inner blocks. With `gpus_per_node` (rack-scale NVLink domains) the job
    /// takes whole nodes and, beyond one domain, domains of [`segment_nodes`] nodes each.
    pub fn with_gpus(&self, gpus: u32) -> Result<System> {
        if gpus == 0 {
            return Err(Error::input("--gpus", "must be ≥ 1"));
        }
        if u64::from(gpus) > self.gpus() {
            return Err(self.too_many(gpus));
        }
        let mut dims = self.topology.dims().to_vec();
        if let Some(node) = self.spec.gpus_per_node {
            if !gpus.is_multiple_of(node) {
                return Err(Error::input(
                    "--gpus",
                    format!(
                        "{gpus} is not a multiple of {node} (the GPUs per compute tray of \
                         system '{}'; a job takes whole trays)",
                        self.name()
                    ),
                ));
            }
            if gpus > dims[0].size {
                let per_domain = dims[0].size / node;
                dims[0].size = segment_nodes(gpus / node, per_domain) * node;
            }
        }
        let mut inner: u32 = 1;
        let mut keep = 0;
        for (i, d) in dims.iter().enumerate() {
            if inner * d.size >= gpus || i + 1 == dims.len() {
                keep = i;
                break;
            }
            inner *= d.size;
        }
        if !gpus.is_multiple_of(inner) {
            return Err(Error::input(
                "--gpus",
                format!(
                    "{gpus} is not a multiple of {inner} (the devices per block of system '{}')",
                    self.name()
                ),
            ));
        }
        dims.truncate(keep + 1);
        dims[keep].size = gpus / inner;
        let room = self.topology.dims()[keep].size;
        if dims[keep].size > room {
            return Err(Error::input(
                "--gpus",
                format!(
                    "{gpus} GPUs run as {} NVLink domains of {} (whole Slurm segments), more \
                     than the {room} of system '{}'",
                    dims[keep].size,
                    inner,
                    self.name()
                ),
            ));
        }
        let mut out = self.clone();
        out.topology = Topology::new(dims)?;
        Ok(out)
    }

    /// The NVLink domains of the job, when the innermost dimension holds several nodes:
    /// (domains, GPUs per domain), for the placement table.
    pub fn nvlink_domains(&self) -> Option<(u32, u32)> {
        self.spec.gpus_per_node?;
        let d = self.topology.dims();
        let outer = d.get(1).map_or(1, |o| o.size);
        Some((outer, d[0].size))
    }
}

/// Nodes per NVLink domain for a job of `nodes` nodes on racks of `per_domain` nodes:
/// the whole job when it fits in one rack, else the largest divisor of `nodes` that is
/// at most `per_domain`. This is the Slurm `--segment` (topology/block plugin: each
/// segment inside one NVLink block) that NVIDIA's Megatron-Bridge launcher requests for
/// 4-GPU-node systems (scripts/performance/utils/executors.py at 067f987df0: "for
/// segment_candidate in range(18, 0, -1): if nodes % segment_candidate == 0"); 64 nodes
/// (256 GB200) run as 4 domains of 16 nodes, 64 GPUs each.
pub fn segment_nodes(nodes: u32, per_domain: u32) -> u32 {
    if nodes <= per_domain {
        return nodes;
    }
    (1..=per_domain.max(1))
        .rev()
        .find(|d| nodes.is_multiple_of(*d))
        .unwrap_or(1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog;

    /// Megatron-Bridge's segment rule worked by hand: 64 trays (256 GPUs) → 16 (64 = 4·16),
    /// 128 → 16, 60 → 15, 36 → 18, 19 (prime) → 1; up to one rack the job is one segment.
    #[test]
    fn segments_are_the_largest_divisor_up_to_a_rack() {
        for (nodes, seg) in [
            (64, 16),
            (128, 16),
            (60, 15),
            (36, 18),
            (19, 1),
            (8, 8),
            (18, 18),
        ] {
            assert_eq!(segment_nodes(nodes, 18), seg, "{nodes} trays");
        }
    }

    #[test]
    fn nvl72_jobs_take_whole_trays_in_segments() {
        let s = catalog::system("gb200-nvl72").unwrap();
        let sizes = |g: u32| -> Vec<u32> {
            let t = s.with_gpus(g).unwrap().topology;
            t.dims().iter().map(|d| d.size).collect()
        };
        assert_eq!(sizes(8), vec![8]);
        assert_eq!(sizes(72), vec![72]);
        assert_eq!(sizes(256), vec![64, 4]);
        assert_eq!(sizes(144), vec![72, 2]);
        assert_eq!(sizes(512), vec![64, 8]);
        assert_eq!(s.with_gpus(256).unwrap().nvlink_domains(), Some((4, 64)));
        let e = s.with_gpus(6).unwrap_err().to_string();
        assert!(e.contains("not a multiple of 4"), "{e}");
        // 1150 trays: segments of 10 → 115 domains, more than 64 racks.
        let e = s.with_gpus(4600).unwrap_err().to_string();
        assert!(e.contains("115 NVLink domains"), "{e}");
        // A DGX system is unchanged: whole 8-GPU nodes.
        let d = catalog::system("dgx-h100").unwrap();
        assert_eq!(d.with_gpus(256).unwrap().nvlink_domains(), None);
    }
}
