//! Renders a [`Comparison`]: a table whose columns are the variants and whose rows are
//! metrics (each non-baseline cell also shows its change against the baseline), and the
//! stacked time-breakdown bars of `--plot`.

use super::{Column, Comparison};
use crate::error::Result;
use crate::estimate::CommClass;
use crate::report::{Cell, Report, Table};
use crate::units::{self, Seconds};

/// A metric's value in one column.
enum V {
    /// Seconds.
    S(f64),
    /// Bytes.
    B(f64),
    /// A plain number (rate, count) printed with four significant digits.
    N(f64),
    /// A fraction printed as a percentage.
    Pct(f64),
    /// Text (no change is computed).
    T(String),
}

impl V {
    fn si(&self) -> Option<f64> {
        match self {
            V::S(x) | V::B(x) | V::N(x) | V::Pct(x) => Some(*x),
            V::T(_) => None,
        }
    }

    fn human(&self) -> String {
        match self {
            V::S(x) => Seconds::new(*x).to_string(),
            V::B(x) => format!("{:.2} GiB", x / (1u64 << 30) as f64),
            V::N(x) => units::sig(*x),
            V::Pct(x) => format!("{:.1}%", 100.0 * x),
            V::T(s) => s.clone(),
        }
    }
}

type Getter = Box<dyn Fn(&Column) -> V>;

/// A fixed row: label, getter, shown only when non-zero somewhere.
type Fixed = (&'static str, fn(&Column) -> V, bool);

fn comm(c: &Column, k: CommClass) -> f64 {
    c.estimate.time.class(k).exposed.get()
}

/// GPU-hours to train on 1e9 tokens: 1e9 / (tokens/s) · gpus / 3600.
fn gpu_hours_per_gtok(c: &Column) -> f64 {
    c.estimate.gpu_hours(1e9)
}

/// The rows: (label with its SI unit, getter, shown only when non-zero somewhere).
fn rows(priced: bool, tokens: Option<f64>) -> Vec<(String, Getter, bool)> {
    let fixed: Vec<Fixed> = vec![
        ("GPUs", |c| V::N(c.plan.gpus as f64), false),
        (
            "plan (dp·tp·pp, micro-batch, global batch)",
            |c| {
                let p = &c.plan;
                V::T(format!(
                    "{}·{}·{}, b={}, B={}",
                    p.dp, p.tp, p.pp, p.micro_batch, p.global_batch
                ))
            },
            false,
        ),
        (
            "iteration time",
            |c| V::S(c.estimate.time.total.get()),
            false,
        ),
        (
            "  80% band (published runs like it)",
            |c| {
                let b = crate::band::of(&c.model, &c.system, &c.estimate);
                V::T(format!(
                    "{} – {}",
                    crate::units::Seconds::new(b.low_s),
                    crate::units::Seconds::new(b.high_s)
                ))
            },
            false,
        ),
        ("  forward", |c| V::S(c.estimate.time.forward.get()), true),
        ("  backward", |c| V::S(c.estimate.time.backward.get()), true),
        (
            "  recompute",
            |c| V::S(c.estimate.time.recompute.get()),
            true,
        ),
        (
            "  optimizer",
            |c| V::S(c.estimate.time.optimizer.get()),
            true,
        ),
        (
            "  pipeline bubble",
            |c| V::S(c.estimate.time.bubble.get()),
            true,
        ),
        (
            "  interference",
            |c| V::S(c.estimate.time.interference.get()),
            true,
        ),
        (
            "  host-bound idle",
            |c| V::S(c.estimate.time.host.get()),
            true,
        ),
        ("  TP comm, exposed", |c| V::S(comm(c, CommClass::Tp)), true),
        ("  SP comm, exposed", |c| V::S(comm(c, CommClass::Sp)), true),
        ("  EP comm, exposed", |c| V::S(comm(c, CommClass::Ep)), true),
        ("  PP comm, exposed", |c| V::S(comm(c, CommClass::Pp)), true),
        ("  DP comm, exposed", |c| V::S(comm(c, CommClass::Dp)), true),
        (
            "comm hidden under compute (not in total)",
            |c| V::S(c.estimate.time.comm.iter().map(|x| x.hidden.get()).sum()),
            true,
        ),
        ("tokens/s", |c| V::N(c.estimate.metrics.tokens_per_s), false),
        ("MFU (BF16 peak)", |c| V::Pct(c.estimate.metrics.mfu), false),
        ("HFU", |c| V::Pct(c.estimate.metrics.hfu), false),
        (
            "memory per device",
            |c| V::B(c.estimate.memory.total.get()),
            false,
        ),
        (
            "  weights + grads + optimizer",
            |c| {
                let m = &c.estimate.memory;
                V::B(m.weights.get() + m.gradients.get() + m.optimizer.get())
            },
            false,
        ),
        (
            "  activations",
            |c| V::B(c.estimate.memory.activations.get()),
            false,
        ),
        (
            "fits in device memory",
            |c| {
                let m = &c.estimate.memory;
                V::T(format!(
                    "{} ({})",
                    if m.fits { "yes" } else { "NO" },
                    m.capacity
                ))
            },
            false,
        ),
        (
            "GPU-hours per 1B tokens [h]",
            |c| V::N(gpu_hours_per_gtok(c)),
            false,
        ),
    ];
    let mut r: Vec<(String, Getter, bool)> = fixed
        .into_iter()
        .map(|(l, g, s)| (l.to_string(), Box::new(g) as Getter, s))
        .collect();
    // Cost = GPU-hours × price per GPU-hour; "n/a" for a column without a price.
    let cost = |c: &Column, gpu_hours: f64| match c.gpu_hour_price {
        Some(p) => V::N(gpu_hours * p),
        None => V::T("n/a".into()),
    };
    if priced {
        r.push((
            "cost per 1B tokens [price units]".into(),
            Box::new(move |c: &Column| cost(c, gpu_hours_per_gtok(c))),
            false,
        ));
    }
    if let Some(t) = tokens {
        let n = count(t);
        r.push((
            format!("time to train {n} tokens"),
            Box::new(move |c: &Column| V::S(c.estimate.train_time(t).get())),
            false,
        ));
        r.push((
            format!("GPU-hours to train {n} tokens [h]"),
            Box::new(move |c: &Column| V::N(c.estimate.gpu_hours(t))),
            false,
        ));
        if priced {
            r.push((
                format!("cost to train {n} tokens [price units]"),
                Box::new(move |c: &Column| cost(c, c.estimate.gpu_hours(t))),
                false,
            ));
        }
    }
    r
}

/// A token count the way budgets are written: 300B, 1.4T, 50M.
fn count(t: f64) -> String {
    for (f, p) in [(1e12, "T"), (1e9, "B"), (1e6, "M"), (1e3, "k")] {
        if t >= f {
            return format!("{}{p}", units::sig(t / f));
        }
    }
    units::sig(t)
}

/// Relative change of `v` against `base`, as "+3.2%", or None when undefined.
fn change(v: f64, base: f64) -> Option<String> {
    if base == 0.0 || !v.is_finite() || !base.is_finite() {
        return None;
    }
    let pct = 100.0 * (v - base) / base;
    if pct.abs() < 0.05 {
        return None;
    }
    Some(format!(
        "{}{:.1}%",
        if pct > 0.0 { "+" } else { "−" },
        pct.abs()
    ))
}

fn slug(s: &str) -> String {
    let mut out: String = s
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '_'
            }
        })
        .collect();
    while out.contains("__") {
        out = out.replace("__", "_");
    }
    out.trim_matches('_').to_string()
}

/// The comparison as a report: one table, rows = metrics, columns = variants.
pub fn report(cmp: &Comparison) -> Result<Report> {
    let priced = cmp.columns.iter().any(|c| c.gpu_hour_price.is_some());
    let mut keys: Vec<(String, String)> = vec![("metric".into(), "metric".into())];
    for (i, c) in cmp.columns.iter().enumerate() {
        let mut key = slug(&c.name);
        if key.is_empty() || keys.iter().any(|k| k.0 == key) {
            key = format!("{key}_{i}");
        }
        let header = if i == 0 && c.name != "baseline" {
            format!("{} (baseline)", c.name)
        } else {
            c.name.clone()
        };
        keys.push((key, header));
    }
    let cols: Vec<(&str, &str)> = keys.iter().map(|(k, h)| (k.as_str(), h.as_str())).collect();
    let mut t = Table::new(cmp.name.clone(), &cols);
    for (label, get, sparse) in rows(priced, cmp.tokens) {
        let vals: Vec<V> = cmp.columns.iter().map(get).collect();
        if sparse && vals.iter().all(|v| v.si().is_none_or(|x| x == 0.0)) {
            continue;
        }
        let base = vals.first().and_then(V::si);
        let mut row = vec![Cell::text(label.as_str())];
        for (i, v) in vals.iter().enumerate() {
            row.push(match (v.si(), base) {
                (Some(x), Some(b)) if i > 0 => match change(x, b) {
                    Some(d) => Cell::q(format!("{} ({d})", v.human()), x),
                    None => Cell::q(v.human(), x),
                },
                (Some(x), _) => Cell::q(v.human(), x),
                (None, _) => Cell::text(v.human()),
            });
        }
        t.push(row)?;
    }
    let mut notes = Vec::new();
    if !cmp.description.is_empty() {
        notes.push(cmp.description.clone());
    }
    if !cmp.source.is_empty() {
        notes.push(format!("source: {}", cmp.source));
    }
    if cmp.columns.len() > 1 {
        notes.push(format!(
            "percentages: change against the baseline '{}'",
            cmp.columns[0].name
        ));
    }
    if !priced {
        notes.push("cost: give a price per GPU-hour (gpu_hour_price in the file, --gpu-hour-price) to add cost rows".into());
    } else if let Some(note) = one_price_note(cmp) {
        notes.push(note);
    }
    Ok(Report {
        tables: vec![t],
        notes,
        ..Report::default()
    })
}

/// When columns on different systems carry the same price per GPU-hour, their cost
/// ratio is only their GPU-hour ratio: say so, and how to price each system.
fn one_price_note(cmp: &Comparison) -> Option<String> {
    let cols = &cmp.columns;
    let systems = |c: &Column| c.system.name().to_string();
    let differ = cols.iter().any(|c| systems(c) != systems(&cols[0]));
    let prices: Vec<f64> = cols.iter().filter_map(|c| c.gpu_hour_price).collect();
    let same = prices.len() == cols.len() && prices.iter().all(|&p| p == prices[0]);
    (differ && same).then(|| {
        format!(
            "cost: every system is priced {} per GPU-hour, so cost changes equal GPU-hour changes; price each system with --gpu-hour-price SYSTEM=PRICE (or gpu_hour_price per variant)",
            units::sig(prices[0])
        )
    })
}

/// Stacked bars of each column's iteration time: compute, optimizer, bubble, interference and each
/// class of exposed communication (their sum is the iteration time).
pub fn breakdown_svg(cmp: &Comparison) -> Result<String> {
    type Part = (&'static str, fn(&Column) -> f64);
    let parts: [Part; 12] = [
        ("forward", |c| c.estimate.time.forward.get()),
        ("backward", |c| c.estimate.time.backward.get()),
        ("recompute", |c| c.estimate.time.recompute.get()),
        ("optimizer", |c| c.estimate.time.optimizer.get()),
        ("pipeline bubble", |c| c.estimate.time.bubble.get()),
        ("interference", |c| c.estimate.time.interference.get()),
        ("host-bound", |c| c.estimate.time.host.get()),
        ("TP comm", |c| comm(c, CommClass::Tp)),
        ("SP comm", |c| comm(c, CommClass::Sp)),
        ("EP comm", |c| comm(c, CommClass::Ep)),
        ("PP comm", |c| comm(c, CommClass::Pp)),
        ("DP comm", |c| comm(c, CommClass::Dp)),
    ];
    let max = cmp
        .columns
        .iter()
        .map(|c| c.estimate.time.total.get())
        .fold(0.0, f64::max);
    let (scale, unit) = if max >= 1.0 { (1.0, "s") } else { (1e3, "ms") };
    let series: Vec<(String, Vec<f64>)> = parts
        .iter()
        .map(|(name, f)| {
            (
                name.to_string(),
                cmp.columns.iter().map(|c| f(c) * scale).collect::<Vec<_>>(),
            )
        })
        .filter(|(_, v)| v.iter().any(|x| *x > 0.0))
        .collect();
    let cats: Vec<String> = cmp.columns.iter().map(|c| c.name.clone()).collect();
    let title = format!("{}: time per iteration", cmp.name);
    crate::plot::stacked_bars(
        &title,
        &format!("time per iteration ({unit})"),
        &cats,
        &series,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn change_is_signed_and_undefined_against_zero() {
        assert_eq!(change(110.0, 100.0).as_deref(), Some("+10.0%"));
        assert_eq!(change(75.0, 100.0).as_deref(), Some("−25.0%"));
        assert_eq!(change(1.0, 0.0), None);
    }

    #[test]
    fn token_counts_read_like_budgets() {
        assert_eq!(count(300e9), "300B");
        assert_eq!(count(1.4e12), "1.4T");
    }

    #[test]
    fn slugs_are_machine_keys() {
        assert_eq!(slug("W-1D 350 GB/s"), "w_1d_350_gb_s");
        assert_eq!(slug("A800 (NVLink 400)"), "a800_nvlink_400");
    }
}
