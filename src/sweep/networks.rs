//! Built-in sets of networks for `--network-grid`.
//!
//! `wafer-vs-conventional`: the 512-NPU systems compared in ASTRA-sim 2.0's first case
//! study (Won et al., ISPASS 2023, §VI-A): wafer-scale W-1D (one 512-port switch at 350,
//! 500 or 600 GB/s per NPU), W-2D (Switch 32 × Switch 16 at 250 + 250 GB/s), and the
//! conventional Conv-3D (Ring 16 × FullyConnected 8 × Switch 4 at 200/100/50 GB/s) and
//! Conv-4D (Ring 2 × FullyConnected 8 × Ring 8 × Switch 4 at 250/200/100/50 GB/s).
//! Per-step latency is 500 ns on every dimension, the value of ASTRA-sim's example
//! network configurations; the paper's comparisons are bandwidth-bound, so the latency
//! barely matters at these sizes.

use crate::error::{Error, Result};
use crate::network::Topology;

/// Names of the built-in network sets.
pub const NAMES: [&str; 1] = ["wafer-vs-conventional"];

const WAFER_VS_CONVENTIONAL: [(&str, &str); 6] = [
    ("W-1D 350", "switch(512, 350GB/s, 500ns)"),
    ("W-1D 500", "switch(512, 500GB/s, 500ns)"),
    ("W-1D 600", "switch(512, 600GB/s, 500ns)"),
    (
        "W-2D",
        "switch(32, 250GB/s, 500ns) x switch(16, 250GB/s, 500ns)",
    ),
    (
        "Conv-3D",
        "ring(16, 200GB/s, 500ns) x fully_connected(8, 100GB/s, 500ns) x switch(4, 50GB/s, 500ns)",
    ),
    (
        "Conv-4D",
        "ring(2, 250GB/s, 500ns) x fully_connected(8, 200GB/s, 500ns) x ring(8, 100GB/s, 500ns) x switch(4, 50GB/s, 500ns)",
    ),
];

/// The networks of a built-in set.
pub fn builtin(name: &str) -> Result<Vec<(String, Topology)>> {
    let list: &[(&str, &str)] = match name {
        "wafer-vs-conventional" => &WAFER_VS_CONVENTIONAL,
        _ => return Err(Error::unknown("network grid", name, &NAMES)),
    };
    list.iter()
        .map(|(n, t)| Ok((n.to_string(), Topology::parse(t)?)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_wafer_network_has_512_npus() {
        for (n, t) in builtin("wafer-vs-conventional").unwrap() {
            assert_eq!(t.npus(), 512, "{n}");
        }
        assert!(builtin("wafer").is_err());
    }
}
