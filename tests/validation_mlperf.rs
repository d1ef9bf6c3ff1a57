//! NVIDIA's MLPerf Training results for the LLM pretraining benchmarks (v4.1, v5.0, v5.1:
//! GPT-3 175B, Llama 3.1 405B and 8B on H100, B200, GB200 NVL72 and GB300 NVL72, 8 to 11 616
//! GPUs; `tests/data/mlperf/nvidia-llm.csv`, its header names the files and commits): a
//! held-out check, nothing fitted to them. Each row runs with the plan its submission's
//! config states, the DDP bucket included; the step time is the median logged
//! `train_step_time`.
//!
//! Bounded: the rows the model meets (H100 405B within 5 %, the other rows within 15 %).
//! Printed with `--nocapture` and left unbounded, with their cause in
//! docs/validation-modern.md ("MLPerf Training"): Llama 3.1 8B on 512 GPUs (global batch
//! 64, one micro-batch per replica) and GPT-3 on 11 616 GPUs (data parallelism over 484
//! nodes in 200 MB buckets).

use crate::common;

use serde::Deserialize;

#[derive(Debug, Deserialize)]
#[allow(dead_code)]
struct Row {
    round: String,
    system_dir: String,
    benchmark: String,
    gpu: String,
    num_gpus: u32,
    tp: u32,
    pp: u32,
    vp: u32,
    cp: u32,
    micro_batch: u32,
    global_batch: u32,
    seq_len: u32,
    precision: String,
    fp8_recipe: String,
    fp8_params: bool,
    tp_overlap: bool,
    sequence_parallel: bool,
    cuda_graphs: String,
    asym_pp: bool,
    dp_bucket: String,
    step_time_s: f64,
    runs: u32,
    step_time_min_s: f64,
    step_time_max_s: f64,
    commit: String,
    config_file: String,
    notes: String,
}

fn rows() -> Vec<Row> {
    let mut r = csv::ReaderBuilder::new()
        .comment(Some(b'#'))
        .from_path("tests/data/mlperf/nvidia-llm.csv")
        .unwrap();
    r.deserialize().map(|x| x.unwrap()).collect()
}

/// The GB200 NVL72 preset with room for `racks` NVLink domains (the preset has 64; the
/// 5 120-GPU submission runs 80 of 64 GPUs, its Slurm segments of 16 trays), written where
/// the tests keep their files.
fn gb200_racks(racks: u32) -> String {
    let out = common::bin()
        .args(["show", "system", "gb200-nvl72"])
        .output()
        .unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    assert_eq!(text.matches("size = 64\n").count(), 1, "{text}");
    let path = common::tmp("mlperf").join(format!("gb200-nvl72-{racks}.toml"));
    std::fs::write(
        &path,
        text.replace("size = 64\n", &format!("size = {racks}\n")),
    )
    .unwrap();
    path.to_string_lossy().into_owned()
}

/// The `estimate` arguments of a row.
fn command(r: &Row) -> Vec<String> {
    let system = match (r.gpu.as_str(), r.num_gpus) {
        ("GB200", n) if n > 64 * 72 => gb200_racks(80),
        ("GB200", _) => "gb200-nvl72".into(),
        ("GB300", _) => "gb300-nvl72".into(),
        ("B200", _) => "dgx-b200".into(),
        ("H100", _) => "dgx-h100".into(),
        (g, _) => panic!("no system for {g}"),
    };
    let model = match r.benchmark.as_str() {
        "gpt3" => "gpt3-175b",
        "llama31_405b" => "llama3-405b",
        "llama31_8b" => "llama3-8b",
        b => panic!("no model for {b}"),
    };
    let mut a = common::Shape {
        model,
        system: &system,
        gpus: r.num_gpus,
        tp: r.tp,
        pp: r.pp,
        cp: r.cp,
        seq_len: r.seq_len,
        micro_batch: r.micro_batch,
        global_batch: r.global_batch,
    }
    .args();
    a.extend(
        [
            "--precision",
            &r.precision,
            "--flash-attention",
            "--tp-overlap",
            if r.tp_overlap { "true" } else { "false" },
            "--cuda-graphs",
            // Megatron-core's per-layer graphs (`cuda_graph_scope=full`, NeMo 1's
            // `enable_cuda_graph`) capture attention and MLP; `full_iteration` the whole step.
            match r.cuda_graphs.as_str() {
                "layer" => "attn,mlp",
                g => g,
            },
        ]
        .map(String::from),
    );
    if r.vp > 1 {
        a.extend(["--virtual-stages".into(), r.vp.to_string()]);
    }
    if !r.fp8_recipe.is_empty() {
        a.extend(["--fp8-recipe".into(), r.fp8_recipe.clone()]);
    }
    if r.fp8_params {
        a.push("--fp8-params".into());
    }
    if r.sequence_parallel {
        a.push("--sequence-parallel".into());
    }
    if r.asym_pp {
        a.extend(["--account-for-embedding", "--account-for-loss"].map(String::from));
    }
    // NeMo 2 (v5.0 on) runs Transformer Engine's fused cross-entropy; NeMo 1's GPT-3 does not.
    if r.benchmark != "gpt3" {
        a.extend(["--cross-entropy", "te"].map(String::from));
    }
    // The DDP bucket: Megatron-core's `bucket_size` in parameters (BF16 gradients:
    // 2 B each), apex DistributedFusedAdam's `bucket_cap_mb` in MB. v5.0's 200 parameters
    // make one bucket per weight tensor, which the model does not state: its default then.
    match r.dp_bucket.split_once(' ') {
        Some((v, "params")) if r.round != "5.0" => {
            let params: f64 = v.parse().unwrap();
            a.extend(["--dp-bucket".into(), format!("{}B", params * 2.0)]);
        }
        Some((v, "MB")) => a.extend(["--dp-bucket".into(), format!("{v}MB")]),
        _ => {}
    }
    a
}

/// (row, estimate / published − 1) for every row, printing the table.
fn errors() -> Vec<(Row, f64)> {
    println!("| round | run | plan | published | estimate | error |");
    println!("|---|---|---|---|---|---|");
    rows()
        .into_iter()
        .map(|r| {
            let args = command(&r);
            let t = common::estimate_cli(&args).0.time.total.get();
            let err = t / r.step_time_s - 1.0;
            assert!(err.is_finite(), "{args:?}");
            println!(
                "| {} | {} {} {}×{} | TP {} PP {} VP {} CP {} mb {} gbs {} {} | {:.4} s | {t:.4} s | {:+.1}% |",
                r.round,
                r.system_dir,
                r.benchmark,
                r.num_gpus,
                r.gpu,
                r.tp,
                r.pp,
                r.vp,
                r.cp,
                r.micro_batch,
                r.global_batch,
                r.precision,
                r.step_time_s,
                100.0 * err
            );
            (r, err)
        })
        .collect()
}

/// Rows left unbounded (their cause is in docs/validation-modern.md): the 8B model on 512
/// GPUs and GPT-3 on 11 616.
fn unbounded(r: &Row) -> bool {
    (r.benchmark == "llama31_8b" && r.num_gpus == 512)
        || (r.benchmark == "gpt3" && r.num_gpus > 8192)
}

#[test]
fn mlperf_nvidia_llm_rows_as_submitted() {
    let rows = errors();
    assert_eq!(rows.len(), 21);
    let mut fails = Vec::new();
    for (r, err) in &rows {
        if unbounded(r) {
            continue;
        }
        let bound = if r.gpu == "H100" && r.benchmark == "llama31_405b" {
            0.05
        } else {
            0.15
        };
        if err.abs() > bound {
            fails.push(format!(
                "{} {} {}: {:+.1}% (bound {:.0}%)",
                r.round,
                r.system_dir,
                r.benchmark,
                100.0 * err,
                100.0 * bound
            ));
        }
    }
    assert!(fails.is_empty(), "{fails:#?}");
    let mut abs: Vec<f64> = rows
        .iter()
        .filter(|(r, _)| !unbounded(r))
        .map(|(_, e)| e.abs())
        .collect();
    abs.sort_by(f64::total_cmp);
    let median = abs[abs.len() / 2];
    println!(
        "{} bounded rows: median |error| {:.1}%",
        abs.len(),
        100.0 * median
    );
    assert!(median < 0.07, "median |error| {median}");
}

/// Each row's residual `ln(published / estimated)`: the prediction bands' data from NVIDIA's
/// MLPerf submissions (`presets/bands/nvidia-mlperf.csv`), every row included.
#[test]
fn band_residuals_are_current() {
    let text = std::fs::read_to_string("tests/data/mlperf/nvidia-llm.csv").unwrap();
    let header = text.lines().position(|l| !l.starts_with('#')).unwrap() as u32;
    let out: Vec<astrolabe::band::Residual> = rows()
        .iter()
        .enumerate()
        .map(|(i, r)| {
            let t = common::estimate_cli(&command(r)).0.time.total.get();
            astrolabe::band::Residual {
                row: header + 2 + i as u32,
                gpu: r.gpu.clone(),
                moe: false,
                precision: r.precision.clone(),
                gpus: r.num_gpus,
                log_ratio: (r.step_time_s / t).ln(),
            }
        })
        .collect();
    assert_eq!(out.len(), 21);
    common::check_band_residuals("nvidia-mlperf", &out);
}

/// Issue 20 on held-out tuned runs: the default sweep (same model, system, GPUs, batch,
/// sequence and precision; the plan's structure left to the default grid) against each
/// submission's step time, published / best (printed with `--nocapture`): median in
/// [0.95, 1.10] and at least 90 % of runs within [0.85, 1.20].
#[test]
fn default_sweep_best_vs_submitted() {
    let mut ratios = Vec::new();
    println!("| run | published | sweep best | published / best | best plan |");
    println!("|---|---|---|---|---|");
    for r in rows() {
        // The sweep runs the framework's default DDP bucket (it takes no bucket setting).
        let mut est = command(&r);
        if let Some(i) = est.iter().position(|a| a == "--dp-bucket") {
            est.drain(i..i + 2);
        }
        let args = common::sweep_args_of(&est);
        let (t, plan) = common::default_sweep_best(&args).unwrap_or_else(|e| panic!("{e}"));
        let ratio = r.step_time_s / t;
        println!(
            "| {} {} {}×{} | {:.4} s | {t:.4} s | {ratio:.3} | TP {} PP {} VP {} CP {} mb {} |",
            r.system_dir,
            r.benchmark,
            r.num_gpus,
            r.gpu,
            r.step_time_s,
            plan["tp"],
            plan["pp"],
            plan["virtual_stages"],
            plan["cp"],
            plan["micro_batch"]
        );
        ratios.push(ratio);
    }
    let (median, within) = common::sweep_ratio_stats(&ratios);
    println!(
        "{} runs: median {median:.3}, {:.1}% within [0.85, 1.20]",
        ratios.len(),
        100.0 * within
    );
    // Issue 20's bounds, on runs nothing was tuned on (the two 8B rows on 512 GPUs, whose
    // estimate is itself 38-42 % fast, are the ones outside).
    assert!((0.95..=1.10).contains(&median), "median {median}");
    assert!(within >= 0.9, "within [0.85, 1.20]: {within}");
}
