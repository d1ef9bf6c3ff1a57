//! The sweep: its best plan equals the minimum over exhaustive `estimate` calls, parallel
//! and sequential runs rank identically, drops are counted, `--all` streams every row, the
//! bandwidth split beats every grid split, and bad input is a clear error.

use assert_cmd::Command;
use astrolabe::parallel::{Order, PlanSpec, Recompute, Schedule};
use astrolabe::sweep::bandwidth;
use astrolabe::sweep::driver::RunOptions;
use astrolabe::sweep::grid::{Axes, Grid, divisors};
use astrolabe::sweep::objective::Objective;
use astrolabe::sweep::search::{SearchOptions, search};
use astrolabe::units::Bandwidth;
use astrolabe::{catalog, estimate};

fn bin() -> Command {
    Command::cargo_bin("astrolabe").expect("binary is built")
}

fn opts(parallel: bool, sort: Objective) -> SearchOptions {
    SearchOptions {
        sort,
        pareto: (Objective::Time, Objective::Memory),
        run: RunOptions {
            top_k: 5,
            pareto_cap: 64,
            parallel,
            progress: false,
        },
    }
}

/// Independent enumeration: every PlanSpec built field by field, validated by
/// `estimate::plan`, evaluated, filtered on memory; returns the minimum key.
fn exhaustive_min(gpus: u32, gb: u32, sort: Objective) -> f64 {
    let model = catalog::model("gpt3-175b").unwrap();
    let system = catalog::system("dgx-a100")
        .unwrap()
        .with_gpus(gpus)
        .unwrap();
    let mut best = f64::INFINITY;
    for tp in divisors(gpus) {
        for pp in divisors(gpus) {
            for mb in [1, 2, 4] {
                for (schedule, v) in [(Schedule::OneFOneB, 1), (Schedule::Interleaved, 2)] {
                    for zero in [0u8, 1] {
                        for recompute in [Recompute::Selective, Recompute::Full] {
                            for sp in [false, true] {
                                let spec = PlanSpec {
                                    gpus: Some(gpus),
                                    tp,
                                    pp,
                                    micro_batch: mb,
                                    global_batch: Some(gb),
                                    schedule,
                                    virtual_stages: v,
                                    zero,
                                    recompute,
                                    sequence_parallel: sp,
                                    order: Order::TpDpPp,
                                    ..PlanSpec::default()
                                };
                                let Ok(plan) = estimate::plan(&model, &system, &spec) else {
                                    continue;
                                };
                                let Ok(e) = estimate::evaluate(&model, &system, &plan) else {
                                    continue;
                                };
                                if e.memory.fits {
                                    best = best.min(sort.key(&e));
                                }
                            }
                        }
                    }
                }
            }
        }
    }
    best
}

fn small_axes(gpus: u32) -> Axes {
    let mut a = Axes::default_for(gpus);
    a.micro_batch = vec![1, 2, 4];
    a.schedules = vec![(Schedule::OneFOneB, 1), (Schedule::Interleaved, 2)];
    a.zero = vec![0, 1];
    a.recompute = vec![Recompute::Selective, Recompute::Full];
    a.dp_overlap = vec![true];
    a.tp_overlap = vec![false];
    a.order = vec![Order::TpDpPp];
    a.flash = vec![false];
    a
}

#[test]
fn best_plan_equals_exhaustive_estimate_minimum() {
    let model = catalog::model("gpt3-175b").unwrap();
    let system = catalog::system("dgx-a100").unwrap();
    for sort in [Objective::Time, Objective::Mfu, Objective::Memory] {
        let grid = Grid::build(&model, &system, 64, small_axes(64)).unwrap();
        let r = search(&model, &grid, &opts(true, sort), None);
        let got = r.run.top.first().expect("some plan fits").key;
        let want = exhaustive_min(64, 64, sort);
        assert_eq!(got, want, "sort by {}", sort.name());
    }
}

#[test]
fn parallel_and_sequential_rank_identically() {
    let model = catalog::model("gpt3-175b").unwrap();
    let system = catalog::system("dgx-a100").unwrap();
    let grid = Grid::build(&model, &system, 128, Axes::default_for(128)).unwrap();
    let a = search(&model, &grid, &opts(true, Objective::Time), None);
    let b = search(&model, &grid, &opts(false, Objective::Time), None);
    let ia: Vec<u64> = a.run.top.iter().map(|e| e.index).collect();
    let ib: Vec<u64> = b.run.top.iter().map(|e| e.index).collect();
    assert_eq!(ia, ib);
    let pa: Vec<u64> = a.run.pareto.iter().map(|p| p.index).collect();
    let pb: Vec<u64> = b.run.pareto.iter().map(|p| p.index).collect();
    assert_eq!(pa, pb);
    // Every configuration is accounted for: kept + dropped = grid.
    let dropped: u64 = a.drops.iter().map(|d| d.count).sum();
    assert_eq!(a.run.kept + dropped, a.total);
}

#[test]
fn cli_summary_reports_rate_and_drops() {
    let out = bin()
        .args([
            "sweep",
            "--model",
            "gpt3-175b",
            "--system",
            "dgx-a100",
            "--gpus",
            "64",
        ])
        .args(["--global-batch", "64", "--top", "3", "--format", "json"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["top"].as_array().unwrap().len(), 3);
    let drops = v["drops"].as_array().unwrap();
    assert!(
        drops
            .iter()
            .any(|d| d["reason"].as_str().unwrap().contains("memory"))
    );
    let rate = v["estimates_per_s"].as_f64().unwrap();
    assert!(rate > 1000.0, "rate {rate}");
    // Every configuration is either dropped or valid.
    assert_eq!(
        v["dropped"].as_u64().unwrap() + v["valid"].as_u64().unwrap(),
        v["configurations"].as_u64().unwrap()
    );
}

/// The interleaved schedule as Megatron-core runs it: 96 layers on 9 stages (10, 11 × 6,
/// 10 × 1, 10) cannot take 8 equal chunks per stage, so `interleaved:8` is dropped with its
/// reason and 1F1B stays; on 8 stages (12 each) `interleaved:all` lists v = 2, 3, 4, 6 and
/// 12, all run.
#[test]
fn interleaved_depths_follow_megatron_cores_rule() {
    let run = |pp: &str, schedule: &str| -> serde_json::Value {
        sweep_json(&[
            "sweep",
            "--model",
            "gpt3-175b",
            "--system",
            "dgx-a100",
            "--gpus",
            "576",
            "--tp",
            "8",
            "--pp",
            pp,
            "--micro-batch",
            "1",
            "--schedule",
            schedule,
            "--zero",
            "1",
            "--recompute",
            "full",
            "--order",
            "tp-dp-pp",
            "--global-batch",
            "576",
            "--top",
            "20",
        ])
    };
    let v = run("9", "1f1b,interleaved:8");
    assert_eq!(v["valid"].as_u64().unwrap(), 1, "{v}"); // 1F1B alone
    assert_eq!(v["top"][0]["plan"]["virtual_stages"], 1, "{v}");
    let drops = v["drops"].as_array().unwrap();
    assert!(
        drops
            .iter()
            .any(|d| d["reason"].as_str().unwrap().contains("divisible by v")),
        "{drops:?}"
    );
    let v = run("8", "interleaved:all");
    let mut depths: Vec<u64> = (v["top"].as_array().unwrap().iter())
        .map(|r| r["plan"]["virtual_stages"].as_u64().unwrap())
        .collect();
    depths.sort_unstable();
    depths.dedup();
    assert_eq!(depths, vec![2, 3, 4, 6, 12], "{v}");
}

/// `--optimizer` is a setting of every plan. GPT-3 175B on TP 8 × PP 8 × DP 1: the first
/// stage holds P parameters (2P bytes of 16-bit weights); an FP32 Adam state takes 12P, a
/// BF16 one 6P, so the plan's memory drops by 6P = 3 × its weight bytes, and the row names
/// the layout.
#[test]
fn optimizer_layout_is_a_setting_of_every_plan() {
    let plan = [
        "--model",
        "gpt3-175b",
        "--system",
        "dgx-a100",
        "--gpus",
        "64",
        "--tp",
        "8",
        "--pp",
        "8",
        "--micro-batch",
        "1",
        "--zero",
        "1",
        "--recompute",
        "full",
        "--global-batch",
        "64",
    ];
    let run = |opt: &str| {
        let mut a = vec![
            "sweep",
            "--schedule",
            "1f1b",
            "--order",
            "tp-dp-pp",
            "--top",
            "1",
        ];
        a.extend_from_slice(&plan);
        a.extend_from_slice(&["--optimizer", opt]);
        sweep_json(&a)
    };
    let (fp32, bf16) = (run("adam"), run("adam-bf16-state"));
    assert_eq!(bf16["top"][0]["plan"]["optimizer"], "adam-bf16-state");
    let total = |v: &serde_json::Value| v["top"][0]["memory_per_device_bytes"].as_f64().unwrap();
    let out = bin()
        .arg("estimate")
        .args(plan)
        .args(["--format", "json"])
        .output()
        .unwrap();
    let est: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let weights = est["memory_breakdown"]["weights_bytes"].as_f64().unwrap();
    let drop = total(&fp32) - total(&bf16);
    assert!(
        (drop / (3.0 * weights) - 1.0).abs() < 1e-12,
        "{drop} vs {weights}"
    );
}

#[test]
fn all_streams_every_evaluated_row() {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("astrolabe-sweep-all-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let csv = dir.join("all.csv");
    let out = bin()
        .args([
            "sweep",
            "--model",
            "gpt3-175b",
            "--system",
            "dgx-a100",
            "--gpus",
            "16",
        ])
        .args([
            "--global-batch",
            "16",
            "--tp",
            "8",
            "--format",
            "json",
            "--all",
        ])
        .arg(&csv)
        .output()
        .unwrap();
    // Nothing fits GPT-3 175B on 16 A100s: the output is printed and the status is 3.
    assert_eq!(
        out.status.code(),
        Some(3),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let estimates = v["estimates"].as_u64().unwrap() as usize;
    let mut rd = csv::Reader::from_path(&csv).unwrap();
    let tp = rd
        .headers()
        .unwrap()
        .iter()
        .position(|h| h == "plan.tp")
        .unwrap();
    let rows: Vec<csv::StringRecord> = rd.records().map(|r| r.unwrap()).collect();
    assert_eq!(rows.len(), estimates);
    assert!(rows.iter().all(|r| &r[tp] == "8"), "tp column pinned to 8");
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn huge_grid_asks_for_max_configs() {
    bin()
        .args([
            "sweep",
            "--model",
            "gpt3-175b",
            "--system",
            "dgx-a100",
            "--gpus",
            "512",
        ])
        .args(["--global-batch", "1536", "--max-configs", "1000"])
        .assert()
        .code(2)
        .stderr(predicates::str::contains("--max-configs"));
}

#[test]
fn bad_input_is_a_one_line_error() {
    for (args, needle) in [
        (vec!["--sort", "tokns"], "did you mean 'tokens'"),
        (vec!["--schedule", "1f1"], "did you mean '1f1b'"),
        (vec!["--pareto", "time"], "two objectives"),
        (vec!["--zero", "4"], "stage 4"),
        (vec!["--network-grid", "wafer"], "did you mean"),
    ] {
        bin()
            .args([
                "sweep",
                "--model",
                "gpt3-175b",
                "--system",
                "dgx-a100",
                "--gpus",
                "64",
            ])
            .args(["--global-batch", "64"])
            .args(&args)
            .assert()
            .code(2)
            .stderr(predicates::str::contains(needle));
    }
    bin()
        .args(["sweep", "--model", "gpt3-175b", "--system", "dgx-a100"])
        .assert()
        .code(2)
        .stderr(predicates::str::contains("--global-batch"));
}

#[test]
fn sweep_file_unknown_key_names_the_file_and_line() {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("astrolabe-sweep-file-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let f = dir.join("sweep.toml");
    std::fs::write(
        &f,
        "model = \"gpt3-175b\"\nsystem = \"dgx-a100\"\n[axes]\ntpp = [8]\n",
    )
    .unwrap();
    bin()
        .args(["sweep", "--scenario"])
        .arg(&f)
        .assert()
        .code(2)
        .stderr(predicates::str::contains("sweep.toml"))
        .stderr(predicates::str::contains("tpp"))
        .stderr(predicates::str::contains("line 4"));
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn network_grid_compares_wafer_and_conventional() {
    let out = bin()
        .args(["sweep", "--model", "gpt3-175b", "--system", "dgx-a100"])
        .args([
            "--network-grid",
            "wafer-vs-conventional",
            "--global-batch",
            "512",
        ])
        .args([
            "--tp",
            "8",
            "--pp",
            "8",
            "--micro-batch",
            "1",
            "--schedule",
            "1f1b",
        ])
        .args(["--top", "50", "--format", "json"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let nets: std::collections::BTreeSet<String> = v["top"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["network"].as_str().unwrap().to_string())
        .collect();
    assert!(nets.len() >= 2, "several networks ranked: {nets:?}");
}

/// The closed-form split B_d ∝ √V_d, with V_d measured from the estimate, gives a
/// communication time no worse than any split on a grid over the budget simplex.
#[test]
fn bandwidth_split_beats_a_grid_of_splits() {
    let model = catalog::model("gpt3-175b").unwrap();
    let system = catalog::system("dgx-a100").unwrap().with_gpus(64).unwrap();
    let spec = PlanSpec {
        tp: 8,
        pp: 2,
        global_batch: Some(64),
        recompute: Recompute::Selective,
        sequence_parallel: true,
        ..PlanSpec::default()
    };
    let plan = estimate::plan(&model, &system, &spec).unwrap();
    let v = bandwidth::traffic(&model, &system, &plan).unwrap();
    let dims = system.topology.dims().len();
    assert_eq!(dims, 2);
    assert!(v[0] > 0.0 && v[1] > 0.0, "{v:?}");
    let budget = Bandwidth::new(350e9);
    let split = bandwidth::optimal_split(&v[..dims], budget).unwrap();
    let comm = |s: &[Bandwidth]| {
        let sys = bandwidth::with_split(&system, s);
        bandwidth::comm_time(&estimate::evaluate(&model, &sys, &plan).unwrap())
    };
    let best = comm(&split);
    for i in 1..40 {
        let f = i as f64 / 40.0;
        let s = [budget * f, budget * (1.0 - f)];
        assert!(
            comm(&s) >= best * (1.0 - 1e-3),
            "split {f} beats the closed form"
        );
    }
}

/// Redundant settings are evaluated once: with pp = 1 every pipeline schedule is the same
/// run (1F1B stands for them), and with flash attention selective recomputation is what
/// flash attention already does (the first listed of none/selective stands for both).
#[test]
fn redundant_schedules_and_recompute_are_evaluated_once() {
    let model = catalog::model("gpt3-175b").unwrap();
    let system = catalog::system("dgx-a100").unwrap();
    let mut a = small_axes(64);
    a.tp = vec![8];
    a.pp = vec![1];
    a.schedules = vec![
        (Schedule::Gpipe, 1),
        (Schedule::OneFOneB, 1),
        (Schedule::Interleaved, 2),
    ];
    a.recompute = vec![Recompute::None, Recompute::Selective];
    a.flash = vec![true];
    let grid = Grid::build(&model, &system, 64, a).unwrap();
    assert!(
        grid.structural
            .iter()
            .all(|s| s.plan.schedule == Schedule::OneFOneB)
    );
    let kept: Vec<_> = (0..grid.hot_len()).filter_map(|i| grid.decode(i)).collect();
    assert!(!kept.is_empty());
    assert!(kept.iter().all(|(p, _)| p.recompute == Recompute::None));
}

/// A data-parallel-only model (ResNet-50, layered) gets tp = pp = 1 by default, and every
/// structural plan of its grid is valid.
#[test]
fn dp_only_models_search_data_parallel_plans() {
    let model = catalog::model("resnet50").unwrap();
    let system = catalog::system("dgx-a100").unwrap();
    let grid = Grid::build(&model, &system, 8192, Axes::default_for(256)).unwrap();
    assert!(!grid.structural.is_empty());
    assert!(
        grid.structural
            .iter()
            .all(|s| s.plan.tp == 1 && s.plan.pp == 1)
    );
    assert!(grid.invalid.is_empty() || grid.invalid.iter().all(|d| !d.reason.contains("tp")));
}

/// Hardware axes beside the plan axes: the sweep's top 10 over 2 network bandwidths × 2
/// HBM capacities × 2 peaks are the 10 fastest of evaluating every (hardware, plan) pair
/// directly through `estimate::evaluate` on independently built systems.
#[test]
fn hardware_axes_top_10_equals_exhaustive_evaluation() {
    use astrolabe::compute::Precision;
    use astrolabe::sweep::hardware::HardwareAxes;
    use astrolabe::units::{Bandwidth, Bytes, FlopRate};
    let model = catalog::model("gpt3-175b").unwrap();
    let system = catalog::system("dgx-a100").unwrap();
    let mut axes = small_axes(64);
    let bws = [12e9, 48e9];
    let hbms = [40.0 * 1024f64.powi(3), 80.0 * 1024f64.powi(3)];
    let peaks = [312e12, 624e12];
    axes.hardware = HardwareAxes {
        bandwidth: vec![(1, bws.iter().map(|&b| Bandwidth::new(b)).collect())],
        hbm: hbms.iter().map(|&h| Bytes::new(h)).collect(),
        peak: peaks.iter().map(|&p| FlopRate::new(p)).collect(),
        ..HardwareAxes::default()
    };
    let grid = Grid::build(&model, &system, 64, axes.clone()).unwrap();
    assert_eq!(grid.systems.len(), 8);
    let mut o = opts(true, Objective::Time);
    o.run.top_k = 10;
    let r = search(&model, &grid, &o, None);
    let top: Vec<f64> = r
        .run
        .top
        .iter()
        .map(|h| h.item.est.time.total.get())
        .collect();
    // Exhaustive: build each hardware point by hand and evaluate every plan of the plain grid.
    let mut all = vec![];
    let plain = {
        let mut a = axes.clone();
        a.hardware = HardwareAxes::default();
        Grid::build(&model, &system, 64, a).unwrap()
    };
    for &bw in &bws {
        for &hbm in &hbms {
            for &pk in &peaks {
                let mut s = system.with_gpus(64).unwrap();
                s.topology.dims_mut()[1].bandwidth = Bandwidth::new(bw);
                s.device.spec.memory = Bytes::new(hbm);
                let k = pk / s.device.peak(Precision::Bf16).unwrap().get();
                for q in [
                    Precision::Fp16,
                    Precision::Bf16,
                    Precision::Fp8,
                    Precision::Tf32,
                    Precision::Fp32,
                ] {
                    s.device = s.device.with_peak_scaled(q, k);
                }
                for i in 0..plain.hot_len() {
                    let Some((plan, _)) = plain.decode(i) else {
                        continue;
                    };
                    if let Ok(e) = estimate::evaluate(&model, &s, &plan)
                        && e.memory.fits
                    {
                        all.push(e.time.total.get());
                    }
                }
            }
        }
    }
    all.sort_by(f64::total_cmp);
    assert_eq!(top.len(), 10);
    for (a, b) in top.iter().zip(&all[..10]) {
        assert!((a - b).abs() <= 1e-12 * b, "sweep {a} vs exhaustive {b}");
    }
}

#[test]
fn sweep_file_settings_reach_every_plan() {
    // `tp_bwd_overlap = false` (2021 Megatron-LM) in the file's [axes]: the best TP 8 plan
    // without SP exposes its backward all-reduces too, so it is slower than with the
    // asynchronous all-reduce; the flag overrides the file.
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("astrolabe-sweep-set-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let f = dir.join("sweep.toml");
    std::fs::write(
        &f,
        "model = \"gpt3-175b\"\nsystem = \"dgx-a100\"\ngpus = [64]\nglobal_batch = 64\n[axes]\ntp = [8]\npp = [8]\nsequence_parallel = [false]\ntp_overlap = [false]\nzero3_impl = \"fsdp\"\ntp_bwd_overlap = false\n",
    )
    .unwrap();
    let best = |extra: &[&str]| -> f64 {
        let out = bin()
            .args(["sweep", "--top", "1", "--format", "json", "--scenario"])
            .arg(&f)
            .args(extra)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let j: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        j["top"][0]["iteration_time_s"].as_f64().unwrap()
    };
    let (blocking, overlapped) = (best(&[]), best(&["--tp-bwd-overlap", "true"]));
    assert!(blocking > overlapped, "{blocking} vs {overlapped}");
    std::fs::remove_dir_all(&dir).ok();
}

/// `astrolabe sweep ARGS --format json` (must succeed), parsed.
fn sweep_json(args: &[&str]) -> serde_json::Value {
    let out = bin()
        .args(args)
        .args(["--format", "json"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// A MoE model's default grid offers expert TP 1 beside Megatron-core's default etp = tp
/// (NVIDIA's MoE recipes run ETP 1); a dense model's grid has no ETP choice. One TP 2 ×
/// EP 4 structure, one knob setting: 10 schedules × 2 pipeline splits (both counted, then
/// dropped as redundant for pp = 1) × 1 CP (sequence 4096) × ETP {2, 1} = 40
/// configurations for Qwen3-30B-A3B, 20 for Llama 3 8B. On B200s: with ETP 1 each rank
/// holds 32 whole experts whose optimizer states shard only over expert-DP 2, which an
/// 80 GB H100 cannot hold.
#[test]
fn default_grid_offers_expert_tp_1_for_moe_models() {
    let fixed = [
        "--gpus",
        "8",
        "--global-batch",
        "64",
        "--seq-len",
        "4096",
        "--tp",
        "2",
        "--pp",
        "1",
        "--micro-batch",
        "1",
        "--zero",
        "1",
        "--recompute",
        "none",
        "--order",
        "tp-dp-pp",
        "--top",
        "10",
    ];
    let sweep = |model: &str, ep: &str| {
        let mut a = vec![
            "sweep", "--model", model, "--system", "dgx-b200", "--ep", ep,
        ];
        a.extend_from_slice(&fixed);
        sweep_json(&a)
    };
    let moe = sweep("qwen3-30b-a3b", "4");
    assert_eq!(moe["configurations"], 40);
    let mut etps: Vec<u64> = moe["top"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["plan"]["etp"].as_u64().unwrap())
        .collect();
    etps.sort_unstable();
    etps.dedup();
    assert_eq!(etps, [1, 2]);
    assert_eq!(sweep("llama3-8b", "1")["configurations"], 20);
}

/// The default grid offers the embedding and the loss as pipeline layers (Megatron-LM's
/// `account_for_{embedding,loss}_in_pipeline_split`, NVIDIA's Llama 3.1 405B recipes):
/// Llama 3 405B's 126 layers on 16 stages × 8 chunks leave a chunk empty with the plain
/// split, and fill all 128 with the ends counted (126 + 2); with 1F1B the ends change
/// nothing (7, 8 × 14, 7 layers either way) and the
/// second copy is dropped as redundant. 2 schedules × 2 splits = 4 configurations, 2 valid.
#[test]
fn default_grid_offers_the_ends_as_pipeline_layers() {
    let v = sweep_json(&[
        "sweep",
        "--model",
        "llama3-405b",
        "--system",
        "dgx-b200",
        "--gpus",
        "128",
        "--tp",
        "8",
        "--pp",
        "16",
        "--schedule",
        "interleaved:8,1f1b",
        "--micro-batch",
        "1",
        "--zero",
        "1",
        "--recompute",
        "none",
        "--order",
        "tp-dp-pp",
        "--seq-len",
        "4096",
        "--global-batch",
        "16",
    ]);
    assert_eq!(v["configurations"], 4);
    assert_eq!(v["valid"], 2);
    let top: Vec<(String, bool)> = v["top"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            let p = &r["plan"];
            let s = p["schedule"].as_str().unwrap().to_string();
            (s, p["account_for_loss"].as_bool().unwrap())
        })
        .collect();
    assert!(top.contains(&("interleaved".into(), true)), "{top:?}");
    assert!(top.contains(&("1f1b".into(), false)), "{top:?}");
    let drops = v["drops"].to_string();
    assert!(drops.contains("leave a chunk empty"), "{drops}");
    assert!(
        drops.contains("redundant: the embedding and loss"),
        "{drops}"
    );
}

#[test]
fn attention_kernel_is_a_setting_of_every_plan() {
    // FlashAttention-2 runs the attention at about half cuDNN's rate on H100, so the best
    // plan of the same grid is slower with `--attention-kernel fa2`, and says so.
    let args = [
        "sweep",
        "--model",
        "llama3-8b",
        "--system",
        "dgx-h100",
        "--gpus",
        "8",
        "--global-batch",
        "16",
        "--seq-len",
        "8192",
        "--top",
        "1",
    ];
    let te = sweep_json(&args);
    let fa2 = sweep_json(&[&args[..], &["--attention-kernel", "fa2"]].concat());
    let time = |j: &serde_json::Value| j["top"][0]["iteration_time_s"].as_f64().unwrap();
    assert!(
        time(&fa2) > 1.05 * time(&te),
        "{} vs {}",
        time(&fa2),
        time(&te)
    );
    assert_eq!(fa2["top"][0]["plan"]["attention_kernel"], "fa2");
    assert_eq!(te["top"][0]["plan"]["attention_kernel"], "te");
}

/// ZeRO-2 with a pipeline runs in no framework, so a sweep given ZeRO-2 and pipelines of 1
/// and 2 ranks its ZeRO-2 plans without one only (`Grid::decode_plan`'s knob filter; the
/// plan check refuses the same for an estimate).
#[test]
fn sweep_ranks_zero2_only_without_a_pipeline() {
    let out = bin()
        .args(
            "sweep --model llama3-8b --system dgx-h100 --gpus 16 --global-batch 64 --zero 2 \
             --pp 1,2 --top 500 --format json"
                .split_whitespace(),
        )
        .output()
        .unwrap();
    assert!(out.status.success());
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let rows = v["top"].as_array().unwrap();
    assert!(!rows.is_empty());
    assert!(
        rows.iter()
            .all(|r| r["plan"]["zero"] == 2 && r["plan"]["pp"] == 1),
        "{rows:?}"
    );
}

/// The hot loop's first drop reason says both what it counts: knobs with no effect and knob
/// combinations no framework runs (here full recomputation beside scoped CUDA graphs).
#[test]
fn refused_knob_combinations_are_named_in_the_drops() {
    let out = bin()
        .args(
            "sweep --model qwen3-30b-a3b --system dgx-b200 --gpus 8 --seq-len 4096 \
             --global-batch 64 --cuda-graphs attn,moe_router,moe_preprocess \
             --recompute none,full --top 1 --format json"
                .split_whitespace(),
        )
        .output()
        .unwrap();
    assert!(out.status.success());
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let drops = v["drops"].to_string();
    assert!(
        drops.contains("a knob combination no framework runs")
            && drops.contains("full recomputation beside the EP overlap or scoped CUDA graphs"),
        "{drops}"
    );
}
