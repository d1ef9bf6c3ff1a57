//! Sensitivity and goal-seek over the estimate.
//!
//! **Elasticity** of the iteration time T with respect to a parameter x:
//! ε = ∂ln T/∂ln x, the percentage change of T per percent of x. For continuous system
//! parameters it is the central difference in log space,
//! ε ≈ [ln T(x·(1+h)) − ln T(x/(1+h))] / (2·ln(1+h)) with h = 1%;
//! for integer plan knobs the arc elasticity to the doubled value,
//! ε ≈ ln(T(2x)/T(x)) / ln 2 (n/a when the doubled plan is invalid). A compute-bound plan
//! has ε ≈ −1 for the peak FLOP/s it runs at; a term-free parameter has ε = 0.
//!
//! **Goal-seek**: the multiplier k of one parameter at which a metric (iteration time, MFU
//! or days to train) reaches a target, by bisection on ln k over [10⁻⁴, 10⁴] (the metrics
//! are monotone in each parameter); when the target lies beyond what k → 10⁻⁴ or 10⁴
//! reaches, the answer is "unreachable", with the part of the iteration that remains at
//! that limit.

use crate::compute::Precision;
use crate::error::{Error, Result};
use crate::estimate::{self, Estimate};
use crate::model::Model;
use crate::parallel::PlanSpec;
use crate::system::System;

/// A system parameter that can be varied.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Param {
    /// Dense matrix peak FLOP/s of one precision.
    Peak(Precision),
    /// HBM bandwidth.
    HbmBandwidth,
    /// HBM capacity.
    HbmCapacity,
    /// Bandwidth of network dimension i.
    Bandwidth(usize),
    /// Per-step latency of network dimension i.
    Latency(usize),
}

impl Param {
    /// Every parameter of `system`.
    pub fn all(system: &System) -> Vec<Param> {
        let mut v: Vec<Param> = [
            Precision::Fp16,
            Precision::Bf16,
            Precision::Fp8,
            Precision::Tf32,
            Precision::Fp32,
        ]
        .into_iter()
        .filter(|&p| system.device.peak(p).is_ok())
        .map(Param::Peak)
        .collect();
        v.extend([Param::HbmBandwidth, Param::HbmCapacity]);
        for i in 0..system.topology.dims().len() {
            v.extend([Param::Bandwidth(i), Param::Latency(i)]);
        }
        v
    }

    /// The name used on the command line (`peak.bf16`, `hbm_bandwidth`, `dim1.bandwidth`).
    pub fn name(self) -> String {
        match self {
            Param::Peak(p) => format!("peak.{}", p.name()),
            Param::HbmBandwidth => "hbm_bandwidth".into(),
            Param::HbmCapacity => "hbm_capacity".into(),
            Param::Bandwidth(i) => format!("dim{i}.bandwidth"),
            Param::Latency(i) => format!("dim{i}.latency"),
        }
    }

    /// Parses a name of a parameter of `system`, with did-you-mean.
    pub fn parse(s: &str, system: &System) -> Result<Param> {
        let all = Param::all(system);
        all.iter()
            .copied()
            .find(|p| p.name() == s.trim())
            .ok_or_else(|| {
                let names: Vec<String> = all.iter().map(|p| p.name()).collect();
                let refs: Vec<&str> = names.iter().map(String::as_str).collect();
                Error::unknown("parameter", s, &refs)
            })
    }

    /// The parameter's value in `system` (SI units) and its unit.
    pub fn value(self, system: &System) -> (f64, &'static str) {
        let d = &system.device.spec;
        let dims = system.topology.dims();
        match self {
            Param::Peak(p) => (system.device.peak(p).map_or(0.0, |r| r.get()), "FLOP/s"),
            Param::HbmBandwidth => (d.memory_bandwidth.get(), "B/s"),
            Param::HbmCapacity => (d.memory.get(), "B"),
            Param::Bandwidth(i) => (dims[i].bandwidth.get(), "B/s"),
            Param::Latency(i) => (dims[i].latency.get(), "s"),
        }
    }

    /// `system` with this parameter multiplied by `k`.
    pub fn scaled(self, system: &System, k: f64) -> System {
        let mut s = system.clone();
        match self {
            Param::Peak(p) => s.device = s.device.with_peak_scaled(p, k),
            Param::HbmBandwidth => {
                s.device.spec.memory_bandwidth = s.device.spec.memory_bandwidth * k
            }
            Param::HbmCapacity => s.device.spec.memory = s.device.spec.memory * k,
            Param::Bandwidth(i) => {
                let d = &mut s.topology.dims_mut()[i];
                d.bandwidth = d.bandwidth * k;
            }
            Param::Latency(i) => {
                let d = &mut s.topology.dims_mut()[i];
                d.latency = d.latency * k;
            }
        }
        s
    }
}

/// One row of the sensitivity table.
#[derive(Clone, Debug, PartialEq)]
pub struct Elasticity {
    /// Parameter or knob name.
    pub name: String,
    /// Its current value (SI) and unit.
    pub value: (f64, &'static str),
    /// ∂ln T/∂ln x, or `None` with the reason in `note`.
    pub elasticity: Option<f64>,
    /// How it was computed, or why not.
    pub note: String,
}

fn time(model: &Model, system: &System, spec: &PlanSpec) -> Result<f64> {
    let plan = estimate::plan(model, system, spec)?;
    Ok(estimate::evaluate(model, system, &plan)?.time.total.get())
}

/// Sets one plan knob of a spec.
type SetKnob = fn(&mut PlanSpec, u32);

/// Elasticities of the iteration time for every system parameter and the plan knobs
/// (micro-batch, global batch, TP, PP), ranked by |ε|, largest first.
pub fn elasticities(model: &Model, system: &System, spec: &PlanSpec) -> Result<Vec<Elasticity>> {
    let t0 = time(model, system, spec)?;
    let h: f64 = 0.01;
    let mut out = vec![];
    for p in Param::all(system) {
        let up = time(model, &p.scaled(system, 1.0 + h), spec)?;
        let down = time(model, &p.scaled(system, 1.0 / (1.0 + h)), spec)?;
        out.push(Elasticity {
            name: p.name(),
            value: p.value(system),
            elasticity: Some((up.ln() - down.ln()) / (2.0 * (1.0 + h).ln())),
            note: "central difference, ±1%".into(),
        });
    }
    let base = estimate::plan(model, system, spec)?;
    let knobs: [(&str, u32, SetKnob); 4] = [
        ("micro_batch", base.micro_batch, |s, v| s.micro_batch = v),
        ("global_batch", base.global_batch, |s, v| {
            s.global_batch = Some(v)
        }),
        ("tp", base.tp, |s, v| s.tp = v),
        ("pp", base.pp, |s, v| s.pp = v),
    ];
    for (name, v, set) in knobs {
        let mut s = spec.clone();
        set(&mut s, v * 2);
        s.dp = None;
        let (elasticity, note) = match time(model, system, &s) {
            Ok(t) => (
                Some((t / t0).ln() / 2f64.ln()),
                format!("arc to {name} = {}", v * 2),
            ),
            Err(e) => (None, format!("{name} = {} is not a valid plan: {e}", v * 2)),
        };
        out.push(Elasticity {
            name: name.into(),
            value: (v as f64, ""),
            elasticity,
            note,
        });
    }
    out.sort_by(|a, b| {
        let k = |e: &Elasticity| e.elasticity.map_or(-1.0, f64::abs);
        k(b).total_cmp(&k(a))
    });
    Ok(out)
}

/// What goal-seek aims at.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Target {
    /// Iteration time, seconds.
    Iteration(f64),
    /// Model FLOPs utilisation (0..1).
    Mfu(f64),
    /// Days to train `tokens` tokens: (days, tokens).
    Days(f64, f64),
}

impl Target {
    /// The metric of an estimate this target constrains, and the target value.
    pub fn metric(self, e: &Estimate) -> (f64, f64) {
        match self {
            Target::Iteration(t) => (e.time.total.get(), t),
            Target::Mfu(m) => (e.metrics.mfu, m),
            Target::Days(d, tokens) => (e.train_time(tokens).get() / 86400.0, d),
        }
    }
}

/// The answer of a goal-seek.
#[derive(Clone, Debug, PartialEq)]
pub enum Seek {
    /// The parameter value (SI) that reaches the target, the multiplier k on today's value,
    /// and the metric reached there.
    Reached {
        /// New value of the parameter, SI.
        value: f64,
        /// Multiplier on the current value.
        factor: f64,
        /// The metric at that value.
        metric: f64,
    },
    /// No value in [10⁻⁴, 10⁴]× reaches it: the metric at the better end and the largest
    /// part of the iteration left there (what stops it).
    Unreachable {
        /// The best metric reachable.
        best: f64,
        /// The iteration-time component that dominates at that limit.
        limit: String,
    },
}

fn estimate_at(
    model: &Model,
    system: &System,
    spec: &PlanSpec,
    p: Param,
    k: f64,
) -> Result<Estimate> {
    let s = p.scaled(system, k);
    let plan = estimate::plan(model, &s, spec)?;
    estimate::evaluate(model, &s, &plan)
}

/// The largest component of an iteration (what a parameter can no longer shrink).
fn dominant(e: &Estimate) -> String {
    let t = &e.time;
    let mut parts = vec![
        (
            "compute (forward + backward + recomputation)",
            (t.forward + t.backward + t.recompute).get(),
        ),
        ("pipeline bubble", t.bubble.get()),
        ("optimizer", t.optimizer.get()),
    ];
    for c in estimate::CommClass::ALL {
        parts.push((c.name(), t.class(c).exposed.get()));
    }
    let (name, v) = parts
        .into_iter()
        .fold(("", -1.0), |a, b| if b.1 > a.1 { b } else { a });
    format!("{name}: {:.3} s of {:.3} s", v, t.total.get())
}

/// Solves for the multiplier of `p` at which `target` is met (see the module docs).
pub fn goal_seek(
    model: &Model,
    system: &System,
    spec: &PlanSpec,
    p: Param,
    target: Target,
) -> Result<Seek> {
    let f = |lnk: f64| -> Result<(f64, Estimate)> {
        let e = estimate_at(model, system, spec, p, lnk.exp())?;
        let (m, t) = target.metric(&e);
        Ok((m - t, e))
    };
    let (mut lo, mut hi) = (1e-4f64.ln(), 1e4f64.ln());
    let (flo, elo) = f(lo)?;
    let (fhi, ehi) = f(hi)?;
    if flo.signum() == fhi.signum() {
        // Both ends on the same side: the better end is the one closer to the target.
        let (best, e) = if flo.abs() < fhi.abs() {
            (flo, elo)
        } else {
            (fhi, ehi)
        };
        return Ok(Seek::Unreachable {
            best: best + target.metric(&e).1,
            limit: dominant(&e),
        });
    }
    let mut fl = flo;
    for _ in 0..200 {
        let mid = 0.5 * (lo + hi);
        let (fm, e) = f(mid)?;
        let (m, t) = target.metric(&e);
        if (m / t - 1.0).abs() < 1e-6 || hi - lo < 1e-12 {
            return Ok(Seek::Reached {
                value: p.value(system).0 * mid.exp(),
                factor: mid.exp(),
                metric: m,
            });
        }
        if fm.signum() == fl.signum() {
            lo = mid;
            fl = fm;
        } else {
            hi = mid;
        }
    }
    Err(Error::Internal("goal-seek did not converge".into()))
}

/// Elasticity of one collective's time with respect to dimension `dim`'s bandwidth (or,
/// with `latency`, its latency), by the same central difference as [`elasticities`].
pub fn collective_elasticity(
    op: crate::collective::Collective,
    size: crate::units::Bytes,
    dims: &[crate::network::Dim],
    opts: &crate::collective::Options,
    dim: usize,
    latency: bool,
) -> Result<f64> {
    let h: f64 = 0.01;
    let t = |k: f64| -> Result<f64> {
        let mut d = dims.to_vec();
        let x = d
            .get_mut(dim)
            .ok_or_else(|| Error::input("dimension", format!("no dimension {dim}")))?;
        if latency {
            x.latency = x.latency * k;
        } else {
            x.bandwidth = x.bandwidth * k;
        }
        Ok(crate::collective::total(op, size, &d, opts)?.get())
    };
    Ok((t(1.0 + h)?.ln() - t(1.0 / (1.0 + h))?.ln()) / (2.0 * (1.0 + h).ln()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::collective::{Algorithm, Collective, Options};
    use crate::network::{Dim, DimKind};
    use crate::units::{Bandwidth, Bytes, Seconds};
    use approx::assert_relative_eq;

    #[test]
    fn a_bandwidth_bound_ring_all_reduce_has_elasticity_minus_one_in_bandwidth() {
        // T = 2(p−1)α + 2(p−1)/p·n/B on ring(8, 100 GB/s, 500 ns), n = 1 GiB:
        // ε_B = −(1.75·n/B)/T exactly (T is linear in 1/B); ε_α = 14α/T.
        let d = Dim::new(
            DimKind::Ring,
            8,
            Bandwidth::new(100e9),
            Seconds::new(500e-9),
        )
        .unwrap();
        let n = 1024f64.powi(3);
        let (lat, bw) = (14.0 * 500e-9, 1.75 * n / 100e9);
        let o = Options {
            algorithm: Algorithm::Ring,
            ..Options::default()
        };
        let e = collective_elasticity(Collective::AllReduce, Bytes::new(n), &[d], &o, 0, false)
            .unwrap();
        // Central difference of a + b/x in ln x: −b·(sinh ln(1+h))/(ln(1+h))/T to first order.
        assert_relative_eq!(e, -bw / (lat + bw), max_relative = 1e-3);
        assert!((e + 1.0).abs() < 1e-3);
        let el =
            collective_elasticity(Collective::AllReduce, Bytes::new(n), &[d], &o, 0, true).unwrap();
        assert_relative_eq!(el, lat / (lat + bw), max_relative = 1e-3);
    }
}
