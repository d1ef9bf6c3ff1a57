//! Limits before work (issue 21): commands that write or print a lot count it first and
//! refuse above a documented limit before writing anything; a refused or failed export
//! leaves no files; long tables cap with a note.

mod common;

use astrolabe::astra::{chakra, export, iteration};
use astrolabe::estimate::scenario::Scenario;
use common::{bin, tmp};
use predicates::str::contains;
use std::path::Path;
use std::time::{Duration, Instant};

const MODEL: &str = r#"name = "tiny"
[transformer]
layers = 6
hidden = 256
heads = 8
vocab = 1000
seq_len = 128
"#;

/// A scenario of the tiny model with these `[plan]` lines.
fn scenario(dir: &Path, name: &str, plan: &str) -> Scenario {
    std::fs::write(dir.join("tiny.toml"), MODEL).unwrap();
    let p = dir.join(format!("{name}.toml"));
    let text = format!("model = \"tiny.toml\"\nsystem = \"dgx-a100\"\n[plan]\n{plan}\n");
    std::fs::write(&p, text).unwrap();
    Scenario::load(&p).unwrap()
}

/// Nothing of an export is left in `parent`: neither the target nor a temporary directory.
#[track_caller]
fn nothing_written(parent: &Path, target: &str) {
    assert!(!parent.join(target).exists(), "{target} was created");
    let left: Vec<String> = std::fs::read_dir(parent)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains("partial"))
        .collect();
    assert!(left.is_empty(), "temporary files left: {left:?}");
}

/// The closed-form node count equals the nodes of the generated traces, rank by rank,
/// for plans that switch every term on and off (TP, SP, DP, ZeRO, PP depth, GPipe).
/// Hand count for the first plan (tp 2, sp, dp 4, pp 3, 2 layers per stage, m = 4,
/// zero 1) on stage 1 (a middle stage: q = 2 neighbours, no logits):
/// forward 2·2·(1 + 1 + 1) = 12, backward 2·2·(1 + 2 + 1) = 16, p2p 2·2 = 4 per
/// micro-batch → 4·32 = 128; DP: 2 layers × (RS + AG) = 4 → 132 nodes.
#[test]
fn node_count_matches_the_traces() {
    let d = tmp("limits_nodes");
    let plans = [
        "gpus = 24\ntp = 2\npp = 3\nglobal_batch = 16\nsequence_parallel = true\nzero = 1",
        "gpus = 8\ntp = 2\npp = 2\nglobal_batch = 8\nsequence_parallel = false\nzero = 0",
        "gpus = 8\ntp = 1\npp = 1\nglobal_batch = 16\nzero = 0",
        "gpus = 8\ntp = 1\npp = 2\nglobal_batch = 8\nschedule = \"gpipe\"",
        "gpus = 8\ntp = 4\npp = 2\nglobal_batch = 2\nsequence_parallel = true\nzero = 1",
    ];
    for (i, plan) in plans.iter().enumerate() {
        let sc = scenario(&d, &format!("p{i}"), plan);
        let g = iteration::Generator::new(&sc.model, &sc.plan).unwrap();
        let mut total = 0u128;
        let mut bytes = 0usize;
        for r in 0..g.npus() {
            let t = g.trace(r);
            let stage = r / sc.plan.tp / sc.plan.dp;
            assert_eq!(
                t.nodes.len() as u64,
                g.stage_nodes(stage),
                "plan {i} rank {r}"
            );
            total += t.nodes.len() as u128;
            bytes += chakra::encode(&t).len();
        }
        assert_eq!(total, g.total_nodes(), "plan {i}");
        // The up-front byte check's lower bound holds.
        assert!(bytes as u128 >= total * u128::from(export::MIN_NODE_BYTES));
        if i == 0 {
            assert_eq!(g.stage_nodes(1), 132);
        }
    }
}

/// The export of issue 21 (BERT-large on 512 H100s, TP 8, PP 4, global batch 65,536:
/// 183.5 M nodes, about 50 GB) is refused in well under a second, writing nothing.
/// Count: L = 6 per stage, m = 65536/16 = 4096, SP and TP on: forward 2·6·3 = 36,
/// backward 2·6·4 = 48, logits 2 on the last stage, p2p 2 or 4; DP: 6 (+1) × 2 → stage
/// nodes 4096·(84 + 2) + 14, 4096·(84 + 4) + 12 (×2), 4096·(84 + 2 + 2) + 12; × 128 ranks
/// per stage = 128·(352270 + 360460·2 + 360460) = 183,507,200.
#[test]
fn a_huge_export_is_refused_at_once_writing_nothing() {
    let d = tmp("limits_export");
    let start = Instant::now();
    bin()
        .current_dir(&d)
        .args(["export", "astra", "--out", "o", "--model", "bert-large"])
        .args([
            "--system", "dgx-h100", "--gpus", "512", "--tp", "8", "--pp", "4",
        ])
        .args(["--global-batch", "65536"])
        .assert()
        .code(2)
        .stderr(contains(
            "183507200 is more than the limit of 67108864 nodes",
        ))
        .stderr(contains("ASTROLABE_MAX_TRACE_NODES"));
    assert!(
        start.elapsed() < Duration::from_secs(1),
        "{:?}",
        start.elapsed()
    );
    nothing_written(&d, "o");
}

/// A byte limit reached while writing removes everything written so far; files alone
/// (one per NPU of a microbenchmark) are refused before writing too.
#[test]
fn a_limit_reached_while_writing_leaves_no_files() {
    let d = tmp("limits_bytes");
    std::fs::write(d.join("tiny.toml"), MODEL).unwrap();
    let args = [
        "export",
        "astra",
        "--out",
        "o",
        "--model",
        "tiny.toml",
        "--system",
        "dgx-a100",
        "--gpus",
        "8",
        "--tp",
        "2",
        "--pp",
        "2",
        "--global-batch",
        "8",
    ];
    // 8 ranks of a few hundred nodes pass the lower bound of 32 B per node against a
    // 60,000-byte limit, but their traces (≥ 100 B per node) do not fit in it.
    bin()
        .current_dir(&d)
        .args(args)
        .env("ASTROLABE_MAX_WRITE_BYTES", "60000")
        .assert()
        .code(2)
        .stderr(contains("ASTROLABE_MAX_WRITE_BYTES"));
    nothing_written(&d, "o");
    bin()
        .current_dir(&d)
        .args([
            "export",
            "astra",
            "--out",
            "m",
            "--topology",
            "ring(64, 100GB/s, 1us)",
        ])
        .env("ASTROLABE_MAX_FILES", "50")
        .assert()
        .code(2)
        .stderr(contains("67 is more than the limit of 50 files"));
    nothing_written(&d, "m");
    // Within the limits: everything lands in the target, beside what was there.
    std::fs::create_dir_all(d.join("o")).unwrap();
    std::fs::write(d.join("o/keep.txt"), "mine").unwrap();
    bin().current_dir(&d).args(args).assert().success();
    assert_eq!(
        std::fs::read_to_string(d.join("o/keep.txt")).unwrap(),
        "mine"
    );
    assert!(d.join("o/workload.7.et").exists() && d.join("o/comm_groups.json").exists());
    nothing_written(&d, "none");
}
