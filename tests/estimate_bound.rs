//! The compute floor (`estimate::bound::compute_floor`) is a lower bound of the iteration
//! time on any network, any HBM capacity and any lower peak, checked on random plans of
//! several model families (GPT, MoE, Llama with FP8 and context parallelism, DLRM,
//! layered); and the HBM capacity changes nothing in an estimate but its fit, which the
//! pruned hardware sweep relies on to share one estimate between capacities.

use astrolabe::compute::{Fp8Recipe, Precision};
use astrolabe::estimate::{self, bound::compute_floor};
use astrolabe::model::Model;
use astrolabe::parallel::CpKind;
use astrolabe::sweep::grid::{Axes, Grid};
use astrolabe::system::System;
use astrolabe::units::{Bandwidth, Bytes, Seconds};
use astrolabe::{catalog, parallel::Plan};
use proptest::prelude::*;
use std::sync::OnceLock;

const GPUS: u32 = 64;

/// (model, base system, every non-redundant plan of the default grid on 64 devices).
fn cases() -> &'static Vec<(Model, System, Vec<Plan>)> {
    static C: OnceLock<Vec<(Model, System, Vec<Plan>)>> = OnceLock::new();
    C.get_or_init(|| {
        let mut out = vec![];
        for (m, s, fp8) in [
            ("megatron-2021-7.5b", "dgx-a100", false),
            ("mixtral-8x7b", "dgx-h100", true),
            ("llama3-8b", "dgx-h100", true),
            ("dlrm", "dgx-a100", false),
            ("resnet50", "dgx-a100", false),
        ] {
            let model = catalog::model(m).unwrap();
            let system = catalog::system(s).unwrap().with_gpus(GPUS).unwrap();
            let mut axes = Axes::default_for(GPUS);
            if fp8 {
                axes.precision.push((Precision::Fp8, Fp8Recipe::Delayed));
                axes.cp.push((2, CpKind::Ring));
            }
            let grid = Grid::build(&model, &system, 512, axes).unwrap();
            let plans: Vec<Plan> = (0..grid.hot_len())
                .filter_map(|i| grid.decode(i).map(|p| p.0))
                .collect();
            assert!(!plans.is_empty(), "{m}");
            out.push((model, system, plans));
        }
        out
    })
}

/// A hardware variant of `s`: every dimension's bandwidth and latency scaled, `g`
/// devices in the innermost dimension (the outermost resized), HBM capacity `hbm` GiB,
/// every matrix peak scaled by `k`.
fn variant(s: &System, bw: f64, lat: f64, g: u32, hbm: f64, k: f64) -> System {
    let mut v = s.clone();
    let dims = v.topology.dims_mut();
    for d in dims.iter_mut() {
        d.bandwidth = Bandwidth::new(d.bandwidth.get() * bw);
        d.latency = Seconds::new(d.latency.get() * lat);
    }
    let last = dims.len() - 1;
    dims[0].size = g;
    dims[last].size = GPUS / g;
    v.device.spec.memory = Bytes::new(hbm * 1024f64.powi(3));
    for q in Precision::ALL {
        v.device = v.device.with_peak_scaled(q, k);
    }
    v
}

fn hw() -> impl Strategy<Value = (f64, f64, u32, f64)> {
    (
        0.05f64..20.0,
        0.1f64..10.0,
        prop::sample::select(vec![2u32, 4, 8, 16]),
        16.0f64..192.0,
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    /// T(plan on h) ≥ compute_floor(evaluate(plan on r)) whenever h's peaks are no higher
    /// than r's; the network and the HBM capacity of the two are independent draws.
    #[test]
    fn compute_floor_bounds_the_time_on_other_hardware(
        which in 0usize..5,
        pick in any::<prop::sample::Index>(),
        r in hw(),
        h in hw(),
        kr in 0.25f64..4.0,
        shrink in 0.1f64..=1.0,
    ) {
        let (model, base, plans) = &cases()[which];
        let plan = plans[pick.index(plans.len())];
        let sr = variant(base, r.0, r.1, r.2, r.3, kr);
        let sh = variant(base, h.0, h.1, h.2, h.3, kr * shrink);
        // A plan that cannot be placed on one of the two networks has nothing to bound.
        let (Ok(er), Ok(eh)) = (
            estimate::evaluate(model, &sr, &plan),
            estimate::evaluate(model, &sh, &plan),
        ) else {
            return Ok(());
        };
        let floor = compute_floor(&er).get();
        let t = eh.time.total.get();
        prop_assert!(floor > 0.0);
        // Memory per device does not depend on the hardware (the pruned sweep shares it).
        prop_assert_eq!(er.memory.total, eh.memory.total);
        prop_assert!(t >= floor, "T = {t} < floor {floor} for {plan:?}");
    }

    /// Two systems that differ only in HBM capacity give the same estimate but for the
    /// capacity, its reserve and the fit (`fits = total + reserve ≤ capacity`).
    #[test]
    fn hbm_capacity_changes_only_the_fit(
        which in 0usize..5,
        pick in any::<prop::sample::Index>(),
        r in hw(),
        other in 16.0f64..192.0,
    ) {
        let (model, base, plans) = &cases()[which];
        let plan = plans[pick.index(plans.len())];
        let a = variant(base, r.0, r.1, r.2, r.3, 1.0);
        let b = variant(base, r.0, r.1, r.2, other, 1.0);
        let (Ok(ea), Ok(eb)) = (
            estimate::evaluate(model, &a, &plan),
            estimate::evaluate(model, &b, &plan),
        ) else {
            return Ok(());
        };
        // The default reserve is 1.5 GiB + 3 % of the capacity.
        let cap = b.device.spec.memory;
        let reserve = 1.5 * 1073741824.0 + 0.03 * cap.get();
        let mut want = ea;
        want.memory.capacity = cap;
        want.memory.reserve = astrolabe::units::Bytes::new(reserve);
        want.memory.fits = ea.memory.total.get() + reserve <= cap.get();
        prop_assert_eq!(eb, want);
    }
}

/// On one device nothing but compute and the optimizer step takes time (no communication,
/// no bubble, no overlap; CUDA graphs over the whole iteration, so no host time): there the
/// floor is the whole iteration, `F = T_forward + T_backward + T_recompute + T_optimizer = T`.
/// Checked with and without recomputation (its term then non-zero).
#[test]
fn on_one_device_the_floor_is_the_whole_iteration() {
    use astrolabe::parallel::{CudaGraphs, PlanSpec, Recompute};
    let model = catalog::model("llama3-8b").unwrap();
    let system = catalog::system("dgx-h100").unwrap().with_gpus(1).unwrap();
    for recompute in [Recompute::None, Recompute::Full] {
        let spec = PlanSpec {
            gpus: Some(1),
            global_batch: Some(4),
            recompute,
            cuda_graphs: CudaGraphs::FULL,
            ..PlanSpec::default()
        };
        let plan = Plan::new(&spec, &model, 1).unwrap();
        let e = estimate::evaluate(&model, &system, &plan).unwrap();
        let t = &e.time;
        assert!(t.optimizer.get() > 0.0 && t.forward.get() > 0.0);
        assert_eq!(recompute == Recompute::Full, t.recompute.get() > 0.0);
        let floor = compute_floor(&e).get();
        assert!(
            (floor / t.total.get() - 1.0).abs() < 1e-12,
            "floor {floor} s against the iteration's {} s",
            t.total.get()
        );
    }
}
