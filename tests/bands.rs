//! Prediction bands (issue 20, item 7): checked by leave-one-out on the public sets. Each
//! run's band is computed without it, from the shipped residuals of the others
//! (`presets/bands/`, written and checked by the validation harnesses); 70–90 % of runs
//! must fall inside their 80 % band, and the median width must be at most 30 % of the
//! estimate.

use astrolabe::band::{self, Key};

fn runs() -> Vec<(Key, f64)> {
    band::SETS
        .iter()
        .flat_map(|(_, t)| band::parse(t).unwrap())
        .map(|r| (r.key(), r.log_ratio))
        .collect()
}

/// (share of runs inside their leave-one-out band, median width / estimate).
fn leave_one_out(runs: &[(Key, f64)]) -> (f64, f64) {
    let mut inside = 0;
    let mut widths = Vec::new();
    for (i, (k, r)) in runs.iter().enumerate() {
        // An estimate of 1 s: the run measured e^r seconds.
        let b = band::band_from(1.0, k, runs, Some(i));
        let measured = r.exp();
        inside += usize::from(b.low_s <= measured && measured <= b.high_s);
        widths.push(b.high_s - b.low_s);
    }
    widths.sort_by(f64::total_cmp);
    let n = widths.len();
    let median = (widths[(n - 1) / 2] + widths[n / 2]) / 2.0;
    (inside as f64 / n as f64, median)
}

#[test]
fn leave_one_out_coverage_and_width() {
    let runs = runs();
    assert_eq!(runs.len(), 144 + 45 + 19 + 21 + 29 + 13);
    let (coverage, width) = leave_one_out(&runs);
    println!(
        "{} runs: {:.1}% inside their leave-one-out 80% band, median width {:.1}% of the estimate",
        runs.len(),
        100.0 * coverage,
        100.0 * width
    );
    assert!((0.70..=0.90).contains(&coverage), "coverage {coverage}");
    assert!(width <= 0.30, "median width {width}");
}

#[test]
fn leave_one_out_by_hand() {
    // Ten runs of one group with residuals 0, 0.01, …, 0.09: without run 0 the nine left
    // give the band [e^0.01, e^0.09]; run 0 (e^0 = 1) falls outside, the others inside
    // (each one's band is [min, max] of the other nine, which holds it except at the ends).
    let k = Key::new("h100", false, astrolabe::compute::Precision::Bf16, 8);
    let runs: Vec<(Key, f64)> = (0..10).map(|i| (k, 0.01 * i as f64)).collect();
    let (coverage, width) = leave_one_out(&runs);
    approx::assert_relative_eq!(coverage, 0.8);
    // Widths: e^0.09 − e^0.01 (run 0), e^0.09 − e^0 (runs 1–8), e^0.08 − e^0 (run 9).
    approx::assert_relative_eq!(width, 0.09f64.exp() - 1.0);
}
