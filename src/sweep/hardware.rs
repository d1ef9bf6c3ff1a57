//! Hardware axes: system parameters swept beside the plan axes, so "which of these
//! networks, with which plan" is one sweep. Each axis lists values; the grid's systems
//! are the Cartesian product of them (applied to every device-count × network system),
//! and every plan is evaluated on each.
//!
//! - `bandwidth` / `latency`: values of one network dimension's per-NPU bandwidth or
//!   per-step latency;
//! - `hbm`: device memory capacity (changes which plans fit);
//! - `peak`: the bf16 matrix peak; every matrix precision is scaled by the same ratio
//!   (value / today's bf16 peak), as a faster chip of the same design would be;
//! - `gpus_per_node`: the size of the innermost dimension, the outermost resized so the
//!   device count stays (it must divide the count).

use crate::compute::Precision;
use crate::error::{Error, Result};
use crate::system::System;
use crate::units::{Bandwidth, Bytes, FlopRate, Seconds};

/// Values of the hardware axes; an empty list leaves that parameter as the system has it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct HardwareAxes {
    /// (dimension, bandwidths).
    pub bandwidth: Vec<(usize, Vec<Bandwidth>)>,
    /// (dimension, latencies).
    pub latency: Vec<(usize, Vec<Seconds>)>,
    /// HBM capacities.
    pub hbm: Vec<Bytes>,
    /// bf16 matrix peaks.
    pub peak: Vec<FlopRate>,
    /// Devices per node (innermost dimension size).
    pub gpus_per_node: Vec<u32>,
}

/// One setting of one axis.
#[derive(Clone, Copy, Debug)]
enum Setting {
    Bandwidth(usize, Bandwidth),
    Latency(usize, Seconds),
    Hbm(Bytes),
    Peak(FlopRate),
    GpusPerNode(u32),
}

impl HardwareAxes {
    /// Whether no axis is set.
    pub fn is_empty(&self) -> bool {
        self.count() == 1
    }

    /// Number of hardware points (product of the list lengths, 1 when none is set).
    /// Allocates nothing: the hot loop decodes every index with it.
    pub fn count(&self) -> usize {
        let lists = (self.bandwidth.iter().map(|(_, l)| l.len()))
            .chain(self.latency.iter().map(|(_, l)| l.len()))
            .chain([self.hbm.len(), self.peak.len(), self.gpus_per_node.len()]);
        lists.filter(|&n| n > 0).product()
    }

    /// The hardware point that differs from point `h` only in HBM capacity, with the first
    /// capacity: points with the same twin have the same iteration time (the capacity only
    /// decides the fit), so a pruned search estimates them once.
    pub fn twin(&self, h: usize) -> usize {
        if self.hbm.is_empty() {
            return h;
        }
        // Axes before the HBM one in mixed-radix order: bandwidths, then latencies.
        let stride: usize = (self.bandwidth.iter().map(|b| b.1.len()))
            .chain(self.latency.iter().map(|l| l.1.len()))
            .filter(|&n| n > 0)
            .product();
        let digit = (h / stride) % self.hbm.len();
        h - digit * stride
    }

    fn axes(&self) -> Vec<Vec<Setting>> {
        let mut v: Vec<Vec<Setting>> = vec![];
        for (d, list) in &self.bandwidth {
            v.push(list.iter().map(|&b| Setting::Bandwidth(*d, b)).collect());
        }
        for (d, list) in &self.latency {
            v.push(list.iter().map(|&l| Setting::Latency(*d, l)).collect());
        }
        v.push(self.hbm.iter().map(|&h| Setting::Hbm(h)).collect());
        v.push(self.peak.iter().map(|&p| Setting::Peak(p)).collect());
        v.push(
            self.gpus_per_node
                .iter()
                .map(|&g| Setting::GpusPerNode(g))
                .collect(),
        );
        v.retain(|a| !a.is_empty());
        v
    }

    /// Every hardware variant of `base` (labelled `label | setting, …`), in mixed-radix
    /// order with the first axis varying fastest.
    pub fn expand(&self, base: &System, label: &str) -> Result<Vec<(String, System)>> {
        let axes = self.axes();
        let mut out = Vec::with_capacity(self.count());
        for i in 0..self.count() {
            let mut s = base.clone();
            let mut r = i;
            let mut names = vec![];
            for a in &axes {
                let set = a[r % a.len()];
                r /= a.len();
                names.push(apply(&mut s, set)?);
            }
            out.push((format!("{label} | {}", names.join(", ")), s));
        }
        Ok(out)
    }
}

/// Applies one setting; returns its label.
fn apply(s: &mut System, set: Setting) -> Result<String> {
    let n = s.topology.dims().len();
    let dim = |d: usize| -> Result<usize> {
        if d < n {
            Ok(d)
        } else {
            Err(Error::input(
                "--hw-bandwidth/--hw-latency",
                format!("dimension {d} does not exist (the system has {n})"),
            ))
        }
    };
    Ok(match set {
        Setting::Bandwidth(d, b) => {
            s.topology.dims_mut()[dim(d)?].bandwidth = b;
            format!("dim{d} {b}")
        }
        Setting::Latency(d, l) => {
            s.topology.dims_mut()[dim(d)?].latency = l;
            format!("dim{d} α {l}")
        }
        Setting::Hbm(h) => {
            s.device.spec.memory = h;
            format!("HBM {h}")
        }
        Setting::Peak(p) => {
            let now = s.device.peak(Precision::Bf16)?.get();
            let k = p.get() / now;
            for q in Precision::ALL {
                s.device = s.device.with_peak_scaled(q, k);
            }
            format!("peak {p}")
        }
        Setting::GpusPerNode(g) => {
            let total = s.gpus();
            let dims = s.topology.dims_mut();
            let last = dims.len() - 1;
            if g == 0 || last == 0 || !total.is_multiple_of(g as u64) {
                return Err(Error::input(
                    "--hw-gpus-per-node",
                    format!(
                        "{g} devices per node do not divide {total} devices over two or more dimensions"
                    ),
                ));
            }
            let inner: u64 = dims[1..last].iter().map(|d| d.size as u64).product();
            dims[0].size = g;
            let outer = total / (g as u64 * inner);
            if outer == 0 || g as u64 * inner * outer != total {
                return Err(Error::input(
                    "--hw-gpus-per-node",
                    format!("{g} devices per node do not tile {total} devices"),
                ));
            }
            dims[last].size = outer as u32;
            format!("{g}/node")
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expands_the_product_with_every_setting_applied() {
        let base = crate::catalog::system("dgx-a100")
            .unwrap()
            .with_gpus(64)
            .unwrap();
        let hw = HardwareAxes {
            bandwidth: vec![(1, vec![Bandwidth::new(25e9), Bandwidth::new(50e9)])],
            hbm: vec![
                Bytes::new(40.0 * 1024f64.powi(3)),
                Bytes::new(80.0 * 1024f64.powi(3)),
            ],
            peak: vec![FlopRate::new(624e12)],
            gpus_per_node: vec![4, 8],
            ..HardwareAxes::default()
        };
        assert_eq!(hw.count(), 8);
        let v = hw.expand(&base, "x").unwrap();
        assert_eq!(v.len(), 8);
        // index 7 = last value of every axis (first axis fastest)
        let s = &v[7].1;
        assert_eq!(s.topology.dims()[1].bandwidth.get(), 50e9);
        assert_eq!(s.device.peak(Precision::Bf16).unwrap().get(), 624e12);
        assert_eq!(s.device.peak(Precision::Tf32).unwrap().get(), 312e12);
        assert_eq!(
            (s.topology.dims()[0].size, s.topology.dims()[1].size),
            (8, 8)
        );
        assert_eq!(
            (
                v[0].1.topology.dims()[0].size,
                v[0].1.topology.dims()[1].size
            ),
            (4, 16)
        );
        assert!(v[0].0.contains("dim1 25 GB/s"), "{}", v[0].0);
        // Twins differ only in HBM capacity (index = bw + 2·hbm + 4·gpn here).
        assert_eq!(
            (hw.twin(7), hw.twin(5), hw.twin(2), hw.twin(1)),
            (5, 5, 0, 1)
        );
        for h in 0..8 {
            let (mut a, b) = (v[h].1.clone(), &v[hw.twin(h)].1);
            a.device.spec.memory = b.device.spec.memory;
            assert_eq!(format!("{a:?}"), format!("{b:?}"), "{h}");
        }
    }
}
