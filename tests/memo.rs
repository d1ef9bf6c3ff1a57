//! The sweep's memo (reuse of placements, per-layer blocks and collectives across
//! consecutive plans) must not change any estimate: over whole sweep grids — several
//! systems, MoE with EP, context parallelism, FP8, sequence lengths, every knob — each
//! hot-loop index is estimated with one running memo, as a sweep worker does, and again
//! from scratch, and the two estimates must be bit-identical. A plan field that the
//! per-layer blocks read but the memo's key resets would fail here, and so would a
//! collective cached without the system it ran on (the scale-out bandwidth axis). The
//! collective cache's key, field by field, is tested in `estimate::memo`.

use astrolabe::catalog;
use astrolabe::compute::{Fp8Recipe, Precision};
use astrolabe::estimate::{self, Memo};
use astrolabe::parallel::CpKind;
use astrolabe::sweep::grid::{Axes, Grid};
use astrolabe::units::{Bandwidth, Bytes};

/// Estimates every hot index of `grid` both ways; returns how many were compared.
fn compare(model: &str, grid: &Grid) -> u64 {
    let model = catalog::model(model).expect("built-in model");
    let mut memo = Memo::new();
    let mut compared = 0;
    for i in 0..grid.hot_len() {
        let Some((plan, si)) = grid.decode(i) else {
            continue;
        };
        let sys = &grid.systems[si].1;
        let fresh = estimate::evaluate(&model, sys, &plan);
        let reused = estimate::evaluate_memo(&model, sys, si, &plan, &mut memo);
        match (fresh, reused) {
            (Ok(a), Ok(b)) => assert_eq!(a, b, "index {i}: {plan:?}"),
            (Err(a), Err(b)) => assert_eq!(a.to_string(), b.to_string(), "index {i}"),
            (a, b) => panic!("index {i}: {a:?} vs {b:?}"),
        }
        compared += 1;
    }
    compared
}

#[test]
fn dense_default_grid_with_hardware_axes() {
    let model = catalog::model("gpt3-175b").unwrap();
    let system = catalog::system("dgx-a100").unwrap();
    let mut axes = Axes::default_for(128);
    axes.hardware.hbm = vec![Bytes::new(40e9), Bytes::new(80e9)];
    // Two scale-out bandwidths: systems whose groups have one shape and whose collectives
    // differ (the collective cache's system index).
    axes.hardware.bandwidth = vec![(1, vec![Bandwidth::new(25e9), Bandwidth::new(12.5e9)])];
    let grid = Grid::build(&model, &system, 256, axes).unwrap();
    assert_eq!(grid.systems.len(), 4);
    let n = compare("gpt3-175b", &grid);
    assert!(n > 10_000);
}

#[test]
fn moe_cp_fp8_and_sequence_axes() {
    let model = catalog::model("mixtral-8x7b").unwrap();
    let system = catalog::system("dgx-h100").unwrap();
    let mut axes = Axes::default_for(32);
    axes.ep = vec![1, 8];
    axes.cp = vec![(1, CpKind::Ring), (2, CpKind::Ring), (2, CpKind::A2a)];
    axes.precision = vec![
        (Precision::Bf16, Fp8Recipe::default()),
        (Precision::Fp8, Fp8Recipe::default()),
    ];
    axes.seq_len = vec![4096, 8192];
    let grid = Grid::build(&model, &system, 256, axes).unwrap();
    let n = compare("mixtral-8x7b", &grid);
    assert!(n > 10_000);
}
