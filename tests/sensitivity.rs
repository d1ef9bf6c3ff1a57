//! Sensitivity and goal-seek. Expectations by hand:
//! - the iteration time is T = A + B/peak in the matrix peak (GEMM time ∝ 1/peak, the rest
//!   does not depend on it), so ε_peak = −B/peak / T = −(T(peak) − T(∞))/T(peak), with
//!   T(∞) the time at a 10⁹× peak; a compute-bound plan (GPT-3 175B on one GPU, flash
//!   attention) has it close to −1;
//! - a goal-seek answer put back into the estimate reaches its target within 0.5%;
//! - an iteration time below what the rest of the iteration takes is unreachable, and the
//!   answer names what remains.

use assert_cmd::Command;
use astrolabe::catalog;
use astrolabe::compute::Precision;
use astrolabe::estimate;
use astrolabe::parallel::PlanSpec;
use astrolabe::sensitivity::{self, Param, Seek, Target};

fn setup(
    gpus: u32,
    tp: u32,
    pp: u32,
) -> (astrolabe::model::Model, astrolabe::system::System, PlanSpec) {
    let model = catalog::model("gpt3-175b").unwrap();
    let system = catalog::system("dgx-a100")
        .unwrap()
        .with_gpus(gpus)
        .unwrap();
    let spec = PlanSpec {
        tp,
        pp,
        micro_batch: if gpus == 1 { 8 } else { 1 },
        global_batch: Some(if gpus == 1 { 64 } else { 1536 }),
        flash_attention: gpus == 1,
        ..PlanSpec::default()
    };
    (model, system, spec)
}

fn total(m: &astrolabe::model::Model, s: &astrolabe::system::System, spec: &PlanSpec) -> f64 {
    let plan = estimate::plan(m, s, spec).unwrap();
    estimate::evaluate(m, s, &plan).unwrap().time.total.get()
}

#[test]
fn compute_bound_plan_has_peak_elasticity_near_minus_one() {
    let (m, s, spec) = setup(1, 1, 1);
    let rows = sensitivity::elasticities(&m, &s, &spec).unwrap();
    let e = rows
        .iter()
        .find(|r| r.name == "peak.bf16")
        .unwrap()
        .elasticity
        .unwrap();
    let t = total(&m, &s, &spec);
    let t_inf = total(&m, &Param::Peak(Precision::Bf16).scaled(&s, 1e9), &spec);
    let by_hand = -(t - t_inf) / t;
    assert!((e - by_hand).abs() < 1e-3, "numeric {e}, by hand {by_hand}");
    assert!(e < -0.95 && e > -1.0, "{e}");
    // The peak of a precision the plan does not use does not matter.
    let fp16 = rows
        .iter()
        .find(|r| r.name == "peak.fp16")
        .unwrap()
        .elasticity
        .unwrap();
    assert_eq!(fp16, 0.0);
    // Ranked by |ε|: the global batch first (T ∝ batch), then the peak.
    assert_eq!(rows[0].name, "global_batch");
    assert!(
        rows.windows(2)
            .all(|w| w[0].elasticity.map_or(-1.0, f64::abs)
                >= w[1].elasticity.map_or(-1.0, f64::abs))
    );
}

#[test]
fn goal_seek_answers_reach_their_targets_within_half_a_percent() {
    let (m, s, spec) = setup(1024, 8, 8);
    let base = {
        let plan = estimate::plan(&m, &s, &spec).unwrap();
        estimate::evaluate(&m, &s, &plan).unwrap()
    };
    let t0 = base.time.total.get();
    let cases = [
        (Param::Peak(Precision::Bf16), Target::Iteration(0.8 * t0)),
        (Param::Bandwidth(1), Target::Iteration(0.99 * t0)),
        (Param::HbmBandwidth, Target::Mfu(base.metrics.mfu * 1.02)),
        (Param::Peak(Precision::Bf16), Target::Days(20.0, 300e9)),
    ];
    for (p, target) in cases {
        let Seek::Reached { factor, .. } =
            sensitivity::goal_seek(&m, &s, &spec, p, target).unwrap()
        else {
            panic!("{p:?} {target:?} unreachable");
        };
        let s2 = p.scaled(&s, factor);
        let plan = estimate::plan(&m, &s2, &spec).unwrap();
        let e = estimate::evaluate(&m, &s2, &plan).unwrap();
        let (got, want) = target.metric(&e);
        assert!(
            (got / want - 1.0).abs() < 0.005,
            "{p:?}: {got} vs target {want}"
        );
    }
}

#[test]
fn an_iteration_faster_than_compute_is_unreachable_by_network_bandwidth() {
    let (m, s, spec) = setup(1024, 8, 8);
    let t0 = total(&m, &s, &spec);
    let r = sensitivity::goal_seek(
        &m,
        &s,
        &spec,
        Param::Bandwidth(1),
        Target::Iteration(0.1 * t0),
    )
    .unwrap();
    match r {
        Seek::Unreachable { best, limit } => {
            assert!(best > 0.1 * t0);
            assert!(limit.contains("compute"), "{limit}");
        }
        other => panic!("expected unreachable, got {other:?}"),
    }
}

/// Two DGX A100 nodes joined at 0.1 GB/s, GPT-3 175B with TP 8 inside each node and DP 2
/// across: the only traffic between the nodes is the DP all-reduce of each TP shard's
/// gradients, 2·½·(175·10⁹/8·2 B)/0.1 GB/s ≈ 437 s. With the matrix peak 10⁴ times higher a
/// 1 s iteration is still out of reach, and the answer names that class.
#[test]
fn an_unreachable_target_names_the_communication_class_that_limits_it() {
    let (m, mut s, spec) = setup(16, 8, 1);
    s.topology =
        astrolabe::network::Topology::parse("switch(8, 300GB/s, 1us) x switch(2, 0.1GB/s, 5us)")
            .unwrap();
    let r = sensitivity::goal_seek(
        &m,
        &s,
        &spec,
        Param::Peak(Precision::Bf16),
        Target::Iteration(1.0),
    )
    .unwrap();
    match r {
        Seek::Unreachable { limit, .. } => assert!(limit.starts_with("DP: "), "{limit}"),
        other => panic!("expected unreachable, got {other:?}"),
    }
}

#[test]
fn sensitivity_command_ranks_and_goal_seeks() {
    let out = Command::cargo_bin("astrolabe")
        .unwrap()
        .args([
            "sensitivity",
            "--model",
            "gpt3-175b",
            "--system",
            "dgx-a100",
            "--gpus",
            "1024",
        ])
        .args([
            "--tp",
            "8",
            "--pp",
            "8",
            "--global-batch",
            "1536",
            "--target-iteration",
            "20s",
            "--vary",
            "peak.bf16",
        ])
        .assert()
        .success();
    let text = String::from_utf8(out.get_output().stdout.clone()).unwrap();
    for want in ["∂ln T/∂ln x", "dim1.bandwidth", "goal-seek: peak.bf16"] {
        assert!(text.contains(want), "missing {want}:\n{text}");
    }
    Command::cargo_bin("astrolabe")
        .unwrap()
        .args([
            "sensitivity",
            "--model",
            "gpt3-175b",
            "--system",
            "dgx-a100",
            "--target-mfu",
            "0.5",
            "--vary",
            "peak.bf17",
        ])
        .assert()
        .code(2)
        .stderr(predicates::str::contains("did you mean 'peak.bf16'"));
}
