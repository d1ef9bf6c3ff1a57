//! The pruned hardware × plan sweep (`sweep::prune`) against exhaustive evaluation: on a
//! sub-grid of about 190,000 (plan, hardware) points, every (plan, hardware) pair is built
//! by hand and evaluated through `estimate::evaluate`; the sweep's top 10 equal the 10
//! best of them (key, then grid index `plan · H + h`) for every objective, while most
//! points are pruned or share an estimate.

use astrolabe::catalog;
use astrolabe::compute::Precision;
use astrolabe::estimate::{self, Estimate};
use astrolabe::model::Model;
use astrolabe::parallel::{Order, Recompute, Schedule};
use astrolabe::sweep::driver::RunOptions;
use astrolabe::sweep::grid::{Axes, Grid};
use astrolabe::sweep::hardware::HardwareAxes;
use astrolabe::sweep::objective::Objective;
use astrolabe::sweep::prune;
use astrolabe::sweep::search::{SearchOptions, search, tie_bin};
use astrolabe::system::System;
use astrolabe::units::{Bandwidth, Bytes, FlopRate};

const BWS: [f64; 4] = [6.25e9, 12.5e9, 25e9, 100e9];
const HBMS: [f64; 3] = [40.0, 80.0, 141.0];
const PEAKS: [f64; 3] = [312e12, 624e12, 989e12];
const GPN: [u32; 2] = [4, 8];
const GPUS: u32 = 64;

fn axes() -> Axes {
    let mut a = Axes::default_for(GPUS);
    a.micro_batch = vec![1, 2, 4];
    a.schedules = vec![(Schedule::OneFOneB, 1), (Schedule::Interleaved, 2)];
    a.zero = vec![0, 1];
    a.recompute = vec![Recompute::Selective, Recompute::Full];
    a.dp_overlap = vec![true];
    a.tp_overlap = vec![false, true];
    a.order = vec![Order::TpDpPp];
    a.flash = vec![true];
    a
}

fn hardware() -> HardwareAxes {
    HardwareAxes {
        bandwidth: vec![(1, BWS.iter().map(|&b| Bandwidth::new(b)).collect())],
        hbm: HBMS.iter().map(|&h| Bytes::new(h * 1e9)).collect(),
        peak: PEAKS.iter().map(|&p| FlopRate::new(p)).collect(),
        gpus_per_node: GPN.to_vec(),
        ..HardwareAxes::default()
    }
}

/// Hardware point `h` built by hand: axes in mixed radix, bandwidth fastest, then HBM,
/// peak, devices per node (the order `HardwareAxes` documents).
fn system_at(base: &System, h: usize) -> System {
    let (b, r) = (h % 4, h / 4);
    let (m, r) = (r % 3, r / 3);
    let (p, g) = (r % 3, r / 3);
    let mut s = base.clone();
    s.topology.dims_mut()[1].bandwidth = Bandwidth::new(BWS[b]);
    s.device.spec.memory = Bytes::new(HBMS[m] * 1e9);
    let k = PEAKS[p] / s.device.peak(Precision::Bf16).unwrap().get();
    for q in Precision::ALL {
        s.device = s.device.with_peak_scaled(q, k);
    }
    let dims = s.topology.dims_mut();
    dims[0].size = GPN[g];
    dims[1].size = GPUS / GPN[g];
    s
}

fn opts(sort: Objective) -> SearchOptions {
    SearchOptions {
        sort,
        pareto: (Objective::Time, Objective::Memory),
        run: RunOptions {
            top_k: 10,
            pareto_cap: 4096,
            parallel: true,
            progress: false,
        },
    }
}

/// Every fitting (index, estimate) of the grid, evaluated directly.
fn exhaustive(model: &Model, base: &System) -> Vec<(u64, Estimate)> {
    let plain = Grid::build(model, base, 128, axes()).unwrap();
    let systems: Vec<System> = (0..72).map(|h| system_at(base, h)).collect();
    let mut out = vec![];
    for p in 0..plain.hot_len() {
        let Some((plan, _)) = plain.decode(p) else {
            continue;
        };
        for (h, s) in systems.iter().enumerate() {
            if let Ok(e) = estimate::evaluate(model, s, &plan)
                && e.memory.fits
            {
                out.push((p * 72 + h as u64, e));
            }
        }
    }
    out
}

/// GPT-3 175B at batch 128 on the test's DGX A100 cluster, with the hardware axes.
fn codesign_grid() -> (Model, System, Grid) {
    let model = catalog::model("gpt3-175b").unwrap();
    let base = catalog::system("dgx-a100")
        .unwrap()
        .with_gpus(GPUS)
        .unwrap();
    let mut ax = axes();
    ax.hardware = hardware();
    let grid = Grid::build(&model, &base, 128, ax).unwrap();
    (model, base, grid)
}

#[test]
fn pruned_hardware_sweep_top_10_equals_exhaustive_evaluation() {
    let (model, base, grid) = codesign_grid();
    assert_eq!(grid.hw_count(), 72);
    let all = exhaustive(&model, &base);
    assert!(all.len() > 1000, "{} fitting points", all.len());
    for sort in Objective::ALL {
        let r = search(&model, &grid, &opts(sort), None);
        let c = r.pruning.expect("a hardware grid runs the pruned search");
        // One entry per tie class (structural plan, system, 0.1% bins of time and memory:
        // `search::Hit`'s class), its best.
        let k = grid.axes.knob_count();
        let class = |i: u64, e: &Estimate| {
            let bins = (tie_bin(e.time.total.get()), tie_bin(e.memory.total.get()));
            (i / 72 / k, i % 72, bins)
        };
        let mut want: Vec<(f64, u64, _)> = (all.iter())
            .map(|(i, e)| (sort.key(e), *i, class(*i, e)))
            .collect();
        want.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
        let mut seen = std::collections::HashSet::new();
        want.retain(|w| seen.insert(w.2));
        let want: Vec<(f64, u64)> = want.iter().map(|w| (w.0, w.1)).collect();
        let got: Vec<(f64, u64)> = (r.run.top.iter()).map(|t| (t.key, t.index)).collect();
        assert_eq!(got, want[..10].to_vec(), "sort by {}", sort.name());
        // Each hit's estimate is that of its own point, evaluated directly.
        for t in &r.run.top {
            let e = all.iter().find(|(i, _)| *i == t.index).unwrap().1;
            assert_eq!(t.item.est, e, "sort by {}", sort.name());
            assert_eq!(t.item.system as u64, t.index % 72);
        }
        // Far fewer estimates than points.
        assert!(c.estimates * 4 < grid.hot_len(), "{c:?}");
        if matches!(sort, Objective::Time | Objective::Tokens | Objective::Cost) {
            assert!(c.pruned > 0, "sort by {}: {c:?}", sort.name());
        }
    }
}

#[test]
fn pruning_changes_neither_the_top_k_nor_the_pareto_front() {
    let (model, _, grid) = codesign_grid();
    let o = opts(Objective::Time);
    let (a, ca) = prune::search(&model, &grid, &o, true);
    let (b, cb) = prune::search(&model, &grid, &o, false);
    assert_eq!(cb.pruned, 0);
    assert!(
        ca.pruned > 0 && ca.estimates < cb.estimates,
        "{ca:?} vs {cb:?}"
    );
    let idx =
        |v: &[astrolabe::sweep::rank::Ranked<_>]| v.iter().map(|e| e.index).collect::<Vec<_>>();
    assert_eq!(idx(&a.top), idx(&b.top));
    let front =
        |v: &[astrolabe::sweep::rank::Point<_>]| v.iter().map(|p| p.index).collect::<Vec<_>>();
    assert_eq!(front(&a.pareto), front(&b.pareto));
    assert_eq!(a.evaluated, grid.hot_len());
}
