//! Limits before work (issue 21): commands that write or print a lot count it first and
//! refuse above a documented limit before writing anything; a refused or failed export
//! leaves no files; long tables cap with a note.

use crate::common;

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

/// Data rows of the table titled `title` in plain ASCII table output: its lines between
/// the header rule (`+===`) and the closing rule, split into trimmed cells.
fn table_rows(out: &str, title: &str) -> Vec<Vec<String>> {
    let lines: Vec<&str> = out.lines().collect();
    let start = lines.iter().position(|l| *l == title).expect(title);
    let body = lines[start..].iter().skip_while(|l| !l.starts_with("+=="));
    body.skip(1)
        .take_while(|l| l.starts_with('|'))
        .map(|l| {
            l.trim_matches('|')
                .split('|')
                .map(|c| c.trim().to_string())
                .collect()
        })
        .collect()
}

/// The header cells of the table titled `title`.
fn table_header(out: &str, title: &str) -> Vec<String> {
    let lines: Vec<&str> = out.lines().collect();
    let start = lines.iter().position(|l| *l == title).expect(title);
    lines[start + 2]
        .trim_matches('|')
        .split('|')
        .map(|c| c.trim().to_string())
        .collect()
}

/// A table longer than the limit prints that many rows and says how many more there are
/// and how to get them; CSV writes them all.
#[test]
fn long_tables_cap_with_a_note() {
    let sweep = common::SWEEP;
    let out = bin()
        .args(sweep)
        .args(["--top", "8", "--table", "top", "--no-timing"])
        .env("ASTROLABE_MAX_TABLE_ROWS", "5")
        .output()
        .unwrap();
    let s = String::from_utf8(out.stdout).unwrap();
    assert_eq!(table_rows(&s, "top").len(), 5, "{s}");
    assert!(
        s.contains("… 3 more rows of 'top' not printed: use --format csv or --format json"),
        "{s}"
    );
    let csv = common::text(&[&sweep[..], &["--top", "8", "--format", "csv"]].concat());
    assert_eq!(csv.lines().count(), 1 + 8, "{csv}");
}

/// `--columns` takes the names the CSV prints (`plan.dp`), and their last part (`dp`).
#[test]
fn columns_take_the_csv_names() {
    let sweep = common::SWEEP;
    let run = |cols: &str| {
        let extra = ["--table", "top", "--no-timing", "--columns", cols];
        common::text(&[&sweep[..], &extra].concat())
    };
    let full = run("plan.dp,plan.tp,iteration_time_s");
    assert_eq!(table_header(&full, "top"), ["dp", "tp", "iteration"]);
    assert_eq!(full, run("dp,tp,iteration_time_s"));
    let csv = common::text(&[&sweep[..], &["--format", "csv"]].concat());
    assert!(csv.lines().next().unwrap().contains("plan.dp"), "{csv}");
    common::usage_error(
        &[&sweep[..], &["--columns", "plan.bogus"]].concat(),
        "plan.bogus",
    );
}

/// A CP sweep shows the CP column, so dp·tp·pp·cp multiplies out to the devices:
/// Llama 3 8B on 64 H100s with CP 1, 2 and 4.
#[test]
fn a_cp_sweep_shows_cp() {
    let args = [
        "sweep",
        "--model",
        "llama3-8b",
        "--system",
        "dgx-h100",
        "--gpus",
        "64",
        "--global-batch",
        "512",
        "--cp",
        "1,2,4",
        "--top",
        "10",
        "--sort",
        "memory",
        "--table",
        "top",
        "--no-timing",
    ];
    let out = common::text(&args);
    let head = table_header(&out, "top");
    let at = |name: &str| head.iter().position(|h| h == name).expect(name);
    let (dp, tp, pp, cp) = (at("dp"), at("tp"), at("pp"), at("cp"));
    let rows = table_rows(&out, "top");
    assert_eq!(rows.len(), 10);
    let n = |r: &Vec<String>, i: usize| r[i].parse::<u32>().unwrap();
    for r in &rows {
        assert_eq!(n(r, dp) * n(r, tp) * n(r, pp) * n(r, cp), 64, "{r:?}");
    }
    assert!(rows.iter().any(|r| n(r, cp) > 1), "{out}");
}

/// Drop reasons keep their numbers: Megatron-LM 1.7B on 8 A100s, global batch 16, with
/// micro-batches of 4: dp = 8 needs 8·4 = 32 sequences, 16 is not a multiple.
#[test]
fn drop_reasons_carry_their_numbers() {
    let v = common::json(
        &[
            &common::SWEEP[..],
            &["--micro-batch", "1,4", "--tp", "1", "--pp", "1"],
        ]
        .concat(),
    );
    let reasons: Vec<&str> = (v["drops"].as_array().unwrap().iter())
        .map(|d| d["reason"].as_str().unwrap())
        .collect();
    assert!(
        reasons
            .iter()
            .any(|r| r.contains("16 is not a multiple of dp·micro_batch = 32")),
        "{reasons:?}"
    );
    assert!(reasons.iter().all(|r| !r.contains("N is")), "{reasons:?}");
}

/// No −0 in any output: a price of −0 is 0, and a negative price is refused.
#[test]
fn a_negative_zero_price_prints_zero() {
    let args = [
        "compare",
        "--model",
        "llama3-8b",
        "--system",
        "dgx-h100",
        "--gpus",
        "8",
        "--tp",
        "8",
    ];
    let v = common::json(&[&args[..], &["--gpu-hour-price=-0"]].concat());
    let c = &v["variants"][0];
    assert_eq!(c["gpu_hour_price"].as_f64(), Some(0.0));
    let raw = common::text(&[&args[..], &["--gpu-hour-price=-0", "--format", "json"]].concat());
    assert!(!raw.contains("-0.0") && !raw.contains(": -0"), "{raw}");
    let table = common::ok(&[&args[..], &["--gpu-hour-price=-0"]].concat());
    assert!(!table.contains("−0") && !table.contains("-0"), "{table}");
    common::usage_error(&[&args[..], &["--gpu-hour-price=-2"]].concat(), "≥ 0");
}

/// Llama 3 8B on 8 GPUs with TP 8, on a DGX H100 and a DGX B200.
const H100_B200: [&str; 11] = [
    "compare",
    "--model",
    "llama3-8b",
    "--system",
    "dgx-h100",
    "--system",
    "dgx-b200",
    "--gpus",
    "8",
    "--tp",
    "8",
];

/// Each system its own price: cost = GPU-hours × that system's price, and the cost change
/// differs from the GPU-hour change. GPU-hours per 10⁹ tokens = 10⁹ / (tokens/s) · GPUs /
/// 3600, from each column's own tokens/s.
#[test]
fn compare_prices_each_system() {
    let prices = [
        "--gpu-hour-price",
        "dgx-h100=2.5",
        "--gpu-hour-price",
        "dgx-b200=4",
    ];
    let v = common::json(&[&H100_B200[..], &prices].concat());
    let cols = v["variants"].as_array().unwrap();
    let mut costs = Vec::new();
    for (c, price) in cols.iter().zip([2.5, 4.0]) {
        let tps = c["tokens_per_s"].as_f64().unwrap();
        let hours = 1e9 / tps * 8.0 / 3600.0;
        let cost = c["cost_per_billion_tokens"].as_f64().unwrap();
        assert!(
            (cost / (hours * price) - 1.0).abs() < 1e-9,
            "{cost} vs {hours}·{price}"
        );
        costs.push((hours, cost));
    }
    let hours_ratio = costs[1].0 / costs[0].0;
    let cost_ratio = costs[1].1 / costs[0].1;
    assert!((cost_ratio / hours_ratio - 4.0 / 2.5).abs() < 1e-9);
    common::usage_error(
        &[
            "compare",
            "--model",
            "llama3-8b",
            "--system",
            "dgx-h100",
            "--gpus",
            "8",
            "--gpu-hour-price",
            "dgx-a100=1",
        ],
        "unknown system or column 'dgx-a100'",
    );
    // One price for two systems: the note says the cost change is the GPU-hour change.
    let t = common::text(&[&H100_B200[..], &["--gpu-hour-price", "3"]].concat());
    assert!(t.contains("cost changes equal GPU-hour changes"), "{t}");
}

/// A scenario file infers the interleaved schedule from its virtual stages, as the
/// command line does: the same plan and time as `--virtual-stages 2`.
#[test]
fn a_scenario_infers_interleaved() {
    let d = tmp("limits_scenario");
    let plan = "gpus = 16\ntp = 2\npp = 4\nvirtual_stages = 2\nglobal_batch = 32";
    std::fs::write(
        d.join("run.toml"),
        format!("model = \"megatron-2021-1.7b\"\nsystem = \"dgx-a100\"\n[plan]\n{plan}\n"),
    )
    .unwrap();
    let file = common::json(&[
        "estimate",
        "--scenario",
        d.join("run.toml").to_str().unwrap(),
    ]);
    assert_eq!(file["plan"]["schedule"], "interleaved");
    assert_eq!(file["plan"]["virtual_stages"], 2);
    // The same plan from flags.
    let flags = common::json(&[
        "estimate",
        "--model",
        "megatron-2021-1.7b",
        "--system",
        "dgx-a100",
        "--gpus",
        "16",
        "--tp",
        "2",
        "--pp",
        "4",
        "--virtual-stages",
        "2",
        "--global-batch",
        "32",
    ]);
    assert_eq!(file["plan"], flags["plan"]);
    assert_eq!(file["iteration_time_s"], flags["iteration_time_s"]);
}

/// Issue 20: the top 10 of Megatron-LM's 1T model on 3072 A100s are 10 distinct plans —
/// no two rows agree in every column the table shows — and the group-order variants that
/// tie (equal time and memory) merged into one row that counts them.
#[test]
fn the_top_10_of_the_1t_sweep_are_distinct_plans() {
    let args = [
        "sweep",
        "--model",
        "megatron-2021-1t",
        "--system",
        "dgx-a100",
        "--gpus",
        "3072",
        "--global-batch",
        "3072",
        "--top",
        "10",
        "--table",
        "top",
        "--no-timing",
    ];
    let start = Instant::now();
    let out = common::text(&args);
    assert!(
        start.elapsed() < Duration::from_secs(20),
        "{:?}",
        start.elapsed()
    );
    let rows = table_rows(&out, "top");
    assert_eq!(rows.len(), 10, "{out}");
    for (i, a) in rows.iter().enumerate() {
        for b in &rows[i + 1..] {
            assert_ne!(a[1..], b[1..], "two rows look the same:\n{out}");
        }
    }
    let v = common::json(&args[..args.len() - 3]);
    let top = &v["top"][0];
    assert_eq!(top["variants"], 2);
    assert_eq!(top["variant_axes"], "order");
}

/// Found by the campaign (tests/limits_props.rs): an export whose plan the estimate
/// refuses after the traces are generated (24 GPUs, dp 12 across 8-GPU nodes: "group of 12
/// does not align with dimension 0 of size 8") left its files behind; now it leaves none.
#[test]
fn an_export_refused_by_the_estimate_leaves_no_files() {
    let d = tmp("limits_refused");
    std::fs::write(d.join("tiny.toml"), MODEL).unwrap();
    bin()
        .current_dir(&d)
        .args(["export", "astra", "--out", "o", "--model", "tiny.toml"])
        .args([
            "--system", "dgx-a100", "--gpus", "24", "--tp", "1", "--pp", "2",
        ])
        .args(["--global-batch", "12"])
        .assert()
        .code(2)
        .stderr(contains("does not align with dimension 0 of size 8"));
    nothing_written(&d, "o");
}

/// `sweep --all FILE` counts its rows before it creates the file: at most one per
/// configuration of the hot loop. With tp 1, pp 1 and micro-batch 1 on 8 GPUs there is one structural plan
/// (the schedules of a single stage are one run), times 4 ZeRO stages · 3 recomputations ·
/// 2 group orders (the practice switches stay on) = 24 rows.
#[test]
fn sweep_all_counts_its_rows_first() {
    let d = tmp("limits_all");
    let file = d.join("all.csv");
    let args = [
        &common::SWEEP[..],
        &["--tp", "1", "--pp", "1", "--micro-batch", "1"],
    ]
    .concat();
    let v = common::json(&args);
    let rows = v["evaluated"].as_u64().unwrap();
    assert_eq!(rows, 24);
    let limit = (rows - 1).to_string();
    bin()
        .args(&args)
        .arg("--all")
        .arg(&file)
        .env("ASTROLABE_MAX_ALL_ROWS", &limit)
        .assert()
        .code(2)
        .stderr(contains(format!(
            "{rows} is more than the limit of {limit} rows"
        )));
    assert!(!file.exists());
    bin()
        .args(&args)
        .arg("--all")
        .arg(&file)
        .env("ASTROLABE_MAX_ALL_ROWS", rows.to_string())
        .assert()
        .success();
    let written = std::fs::read_to_string(&file).unwrap();
    // Redundant knob settings are not written: at most one row per configuration.
    let n = written.lines().count() as u64 - 1;
    assert!(n >= 1 && n <= rows, "{n} rows");
}
