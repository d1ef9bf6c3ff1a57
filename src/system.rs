//! A system: one device type and the network that connects the devices.
//! [`SystemSpec`] mirrors `presets/systems/*.toml`; [`System`] is validated (device
//! resolved, topology built) and can be cut to a device count with [`System::with_gpus`].

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
}

impl System {
    /// Builds a system from its spec and the resolved device.
    pub fn new(spec: SystemSpec, device: Device) -> Result<System> {
        let topology = Topology::from_specs(&spec.network.dims)
            .map_err(|e| e.context(format!("system '{}'", spec.name)))?;
        Ok(System {
            spec,
            device,
            topology,
        })
    }

    /// The short name.
    pub fn name(&self) -> &str {
        &self.spec.name
    }

    /// Number of devices: Π p_d.
    pub fn gpus(&self) -> u64 {
        self.topology.npus()
    }

    /// The same system with `gpus` devices: the outermost dimension that is needed is
    /// resized (inner dimensions are whole building blocks such as a DGX node); a count
    /// below one node shrinks the innermost dimension. Errors when `gpus` is not a whole
    /// number of the inner blocks.
    pub fn with_gpus(&self, gpus: u32) -> Result<System> {
        if gpus == 0 {
            return Err(Error::input("--gpus", "must be ≥ 1"));
        }
        let mut dims = self.topology.dims().to_vec();
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
        let mut out = self.clone();
        out.topology = Topology::new(dims)?;
        Ok(out)
    }
}
