//! Validation against published 2024–2025 runs (tests/data/modern/runs.csv, a copy of the
//! shared modern validation set: NVIDIA NeMo performance summaries and the NVIDIA
//! Megatron-LM README; every row names its source file and commit).
//!
//! Each row whose plan the source states becomes an `astrolabe estimate` command, built
//! here by one rule for every row: the row's model, GPU type, TP, PP, CP, DP, virtual
//! stages, micro-batch, global batch, sequence length and precision, plus the defaults
//! of the framework recipe the source ran (NeMo and Megatron-LM 2024: sequence
//! parallelism, flash attention, TP communication overlap, the distributed optimizer;
//! Megatron-LM: fp32 gradient reduction for bf16; Megatron-LM 2021's GPT-3 example: full
//! recomputation, fp16, no flash attention). What a source leaves out comes from its
//! framework: NeMo fine-tuning interleaving from NVIDIA's launcher scripts for those runs,
//! an unstated micro-batch by the source's practice (`planned`). The command is parsed by
//! the real CLI and evaluated; nothing is fitted to any row.
//!
//! Measured time: the row's `step_time_s` when the source gives one (NeMo derives it from
//! tokens/s per GPU), else model FLOPs / (TFLOP/s per GPU × GPUs), with the model FLOPs of
//! the estimate (Megatron-LM/NeMo convention: the full s×s attention is counted, as both
//! sources did before mid-2025). LoRA runs use NeMo's defaults (rank 32 on the QKV projection);
//! SFT and LoRA pack SQuAD samples (`--packed-sample-len 128`: tests/data/modern/NOTES.md). Run with
//! `--nocapture` for the docs table
//! (docs/validation-modern.md).

use crate::common;
use astrolabe::catalog;
use serde::Deserialize;

#[derive(Debug, Deserialize)]
struct Run {
    source: String,
    source_path: String,
    gpu: String,
    num_gpus: u32,
    model: String,
    params_b: Option<f64>,
    seq_len: u32,
    tp: Option<u32>,
    pp: Option<u32>,
    cp: Option<u32>,
    vp: Option<u32>,
    dp: Option<u32>,
    micro_batch: Option<u32>,
    global_batch: Option<u32>,
    precision: Option<String>,
    step_time_s: Option<f64>,
    tflops_per_gpu: Option<f64>,
    /// The row's software and derivations (the container, the table it comes from).
    notes: String,
}

/// NVIDIA's H100 launcher script of a NeMo 24.07 fine-tuning row
/// (tests/data/modern/nemo-finetune-launcher.csv; NOTES.md names the commit).
#[derive(Debug, Deserialize)]
struct Script {
    model: String,
    gpus: u32,
    global_batch: u32,
    micro_batch: u32,
    tp: u32,
    pp: u32,
    vp: Option<u32>,
}

fn scripts() -> Vec<Script> {
    common::csv_rows("tests/data/modern/nemo-finetune-launcher.csv")
}

/// The launcher script of a fine-tuning row, checked against the row's own plan.
fn script_of(r: &Run) -> Option<Script> {
    let s = scripts().into_iter().find(|s| s.model == r.model)?;
    let plan = (r.num_gpus, r.global_batch, r.micro_batch, r.tp, r.pp);
    let script = (
        s.gpus,
        Some(s.global_batch),
        Some(s.micro_batch),
        Some(s.tp),
        Some(s.pp),
    );
    assert_eq!(
        plan, script,
        "{}: the launcher script runs another plan",
        r.model
    );
    Some(s)
}

fn runs() -> Vec<Run> {
    let mut rd = csv::ReaderBuilder::new()
        .flexible(true)
        .from_path("tests/data/modern/runs.csv")
        .expect("tests/data/modern/runs.csv");
    let keep = |r: csv::StringRecord| r;
    rd.records()
        .map(|r| {
            let rec = keep(r.expect("a CSV record"));
            rec.deserialize(Some(&rd_headers())).expect("a run row")
        })
        .collect()
}

fn rd_headers() -> csv::StringRecord {
    let mut rd = csv::Reader::from_path("tests/data/modern/runs.csv").expect("runs.csv");
    rd.headers().expect("header").clone()
}

/// The model preset of a row (a built-in name, or a file of tests/data/modern/).
fn model_of(r: &Run) -> Option<String> {
    let m = r.model.to_ascii_lowercase();
    let base = m.split_whitespace().next().unwrap_or("");
    let name = match base {
        "gpt3-5b" => "gpt3-5b",
        "gpt3-20b" => "gpt3-20b",
        "gpt3-175b" => "gpt3-175b",
        "llama2-7b" => "llama2-7b",
        "llama2-13b" => "llama2-13b",
        "llama2-70b" => "llama2-70b",
        "llama3-8b" => "llama3-8b",
        "llama3-70b" => "llama3-70b",
        "nemotron-8b" => "nemotron3-8b",
        "nemotron-22b" => "nemotron3-22b",
        "nemotron-340b" => "nemotron4-340b",
        "gpt" => {
            return Some(format!(
                "tests/data/modern/gpt-{}.toml",
                m.split_whitespace().nth(1)?
            ));
        }
        "gpt-3" if r.gpu == "A100" => "gpt3-175b",
        _ => return None,
    };
    Some(name.into())
}

/// Why a row cannot be a command, or its command-line arguments (after `estimate`), with
/// micro-batch `mb`.
fn command(r: &Run, mb: u32) -> Result<Vec<String>, &'static str> {
    let (Some(tp), Some(pp)) = (r.tp, r.pp) else {
        return Err("plan not stated by the source");
    };
    let model = model_of(r).ok_or("no model preset")?;
    let system = match r.gpu.as_str() {
        // Every runs.csv H100 row ran the 2024 software stack (NeMo 24.03/24.07, Megatron-LM
        // 2024): its fused-attention rates (tests/data/modern/h100-2024.toml).
        "H100" => "tests/data/modern/dgx-h100-2024.toml",
        "B200" => "dgx-b200",
        "A100" => "dgx-a100",
        _ => return Err("no system preset"),
    };
    let cp = r.cp.unwrap_or(1);
    let gpus = r.dp.map_or(r.num_gpus, |d| d * tp * pp * cp);
    let mut a: Vec<String> = vec!["--model".into(), model, "--system".into(), system.into()];
    let mut flag = |k: &str, v: String| {
        a.push(format!("--{k}"));
        a.push(v);
    };
    flag("gpus", gpus.to_string());
    flag("tp", tp.to_string());
    flag("pp", pp.to_string());
    flag("cp", cp.to_string());
    flag("seq-len", r.seq_len.to_string());
    flag("micro-batch", mb.to_string());
    flag(
        "global-batch",
        r.global_batch.ok_or("no global batch")?.to_string(),
    );
    // NeMo's fine-tuning table omits interleaving; NVIDIA's launcher script for the run has it.
    let vp = r.vp.or_else(|| script_of(r).and_then(|s| s.vp));
    if let Some(v) = vp.filter(|&v| v > 1) {
        flag("virtual-stages", v.to_string());
    }
    let prec = match r.precision.as_deref() {
        Some("FP8") => "fp8",
        Some("FP16") => "fp16",
        _ => "bf16",
    };
    flag("precision", prec.to_string());
    if r.model.contains("SFT") || r.model.contains("LoRA") {
        // NeMo packs SQuAD samples into 4096-token sequences; attention spans each sample.
        // The source's own FLOP count per token (TFLOP/s ÷ tokens/s: 39.8 GFLOP for Llama 2
        // 7B SFT, 77.3 for 13B) is the linear layers plus attention over ~100–120 tokens
        // (NeMo's Llama formula, 12·s/h per layer); 128 tokens per sample.
        flag("packed-sample-len", "128".into());
    }
    if r.model.contains("LoRA") {
        // NeMo 24.07's LoRA defaults: adapter dimension 32 on the QKV projection.
        flag("lora-rank", "32".into());
        flag("lora-targets", "qkv".into());
    }
    if r.source_path.contains("f2e5db402c") {
        // Megatron-LM 2021 GPT-3 175B example: fp16, full recomputation, fp32 gradients;
        // that release had no distributed optimizer, sequence parallelism, TP overlap or
        // fused attention (today's practice defaults, so they are turned off).
        flag("recompute", "full".into());
        flag("optimizer", "adam-fp32-grads".into());
        for off in ["zero", "sequence-parallel", "tp-overlap", "flash-attention"] {
            let v = if off == "zero" { "0" } else { "false" };
            flag(off, v.into());
        }
    } else {
        // NeMo / Megatron-LM 2024 recipes: SP, flash attention, TP overlap, distributed
        // optimizer (ZeRO-1 over DP × CP).
        flag("zero", "1".into());
        a.extend(["--flash-attention", "--tp-overlap"].map(String::from));
        if tp > 1 {
            a.push("--sequence-parallel".into());
        }
        if r.model == "Nemotron-340B" {
            // NeMo 1.x's Nemotron-4 340B recipe of the time ran Apex's DistributedFusedAdam
            // with its state in BF16 (NeMo-Framework-Launcher
            // conf/training/nemotron/nemotron_340b.yaml at 7c842fcd, June 2024: `optim:
            // distributed_fused_adam`, `dtype: bf16`, `grad_sync_dtype: bf16`; the other
            // 2024 recipes keep the FP32 state).
            a.extend(["--optimizer", "adam-bf16-state"].map(String::from));
        }
        if r.source == "Megatron-LM" {
            // Megatron-LM forces gradient accumulation and reduction in fp32 for bf16
            // (`accumulate_allreduce_grads_in_fp32`, megatron/training/arguments.py at the
            // README's commit f2e5db402c).
            a.extend(["--optimizer", "adam-fp32-grads"].map(String::from));
        }
    }
    Ok(a)
}

/// (measured, estimated) iteration time in seconds, and whether the plan fits in memory.
fn evaluate(r: &Run, args: &[String]) -> (f64, f64, bool) {
    let (e, plan) = common::estimate_cli(args);
    let measured = match (r.step_time_s, r.tflops_per_gpu) {
        (Some(t), _) => t,
        (None, Some(f)) => e.metrics.model_flops / (f * 1e12 * plan.gpus as f64),
        _ => panic!("row has neither time nor TFLOP/s"),
    };
    (measured, e.time.total.get(), e.memory.fits)
}

/// The command of a row. A micro-batch the source does not state follows its source's
/// practice (docs/validation-modern.md): NeMo's recipes run 1 (`micro_batch_size=1` in
/// nemo/collections/llm/recipes/llama3_8b*.py at the long-sequence table's commit); the
/// Megatron-LM weak-scaling table is a tuned benchmark whose authors choose the micro-batch
/// per model (Narayanan et al., SC'21, §3.5 and §5.6; their weak-scaling scripts,
/// examples/academic_paper_scripts/sc21/run_table_1.sh, run 16 down to 1), so it gets the
/// fastest micro-batch that fits among the divisors of the per-replica batch.
fn planned(r: &Run) -> Result<Vec<String>, &'static str> {
    if let Some(mb) = r.micro_batch {
        return command(r, mb);
    }
    let one = command(r, 1)?;
    if r.source != "Megatron-LM" {
        return Ok(one);
    }
    let (Some(gbs), Some(dp)) = (r.global_batch, r.dp) else {
        return Err("no global batch or data-parallel size");
    };
    let per_replica = gbs / dp;
    let mut best: Option<(f64, Vec<String>)> = None;
    for mb in (1..=per_replica).filter(|m| per_replica % m == 0) {
        let args = command(r, mb)?;
        let (_, t, fits) = evaluate(r, &args);
        if fits && best.as_ref().is_none_or(|(b, _)| t < *b) {
            best = Some((t, args));
        }
    }
    best.map(|(_, a)| a).ok_or("no micro-batch fits")
}

struct Outcome {
    /// Each estimated row's residual (the prediction bands' data).
    residuals: Vec<astrolabe::band::Residual>,
    errors: Vec<f64>,
    left_out: usize,
}

fn run_all(print: bool) -> Outcome {
    let mut residuals = Vec::new();
    let mut errors = Vec::new();
    let mut left_out = 0;
    if print {
        println!(
            "| # | source | run | command (`astrolabe estimate` …) | measured s | estimated s | error |"
        );
        println!("|---|---|---|---|---|---|---|");
    }
    for (i, r) in runs().iter().enumerate() {
        match planned(r) {
            Ok(args) => {
                let (m, e, _) = evaluate(r, &args);
                let err = e / m - 1.0;
                errors.push(err);
                let at = |k: &str| &args[args.iter().position(|a| a == k).unwrap() + 1];
                residuals.push(astrolabe::band::Residual {
                    row: i as u32 + 2,
                    gpu: r.gpu.clone(),
                    moe: false,
                    precision: at("--precision").clone(),
                    gpus: at("--gpus").parse().unwrap(),
                    log_ratio: (m / e).ln(),
                });
                if print {
                    println!(
                        "| {} | {} | {} {}×{} | `{}` | {m:.3} | {e:.3} | {:+.1}% |",
                        i + 2,
                        r.source,
                        r.model,
                        r.num_gpus,
                        r.gpu,
                        args.join(" "),
                        100.0 * err
                    );
                }
            }
            Err(why) => {
                left_out += 1;
                if print {
                    println!(
                        "| {} | {} | {} {}×{} | — ({why}) | | | |",
                        i + 2,
                        r.source,
                        r.model,
                        r.num_gpus,
                        r.gpu
                    );
                }
            }
        }
    }
    Outcome {
        residuals,
        errors,
        left_out,
    }
}

fn median_abs(v: &[f64]) -> f64 {
    let mut a: Vec<f64> = v.iter().map(|e| e.abs()).collect();
    a.sort_by(f64::total_cmp);
    let n = a.len();
    if n % 2 == 1 {
        a[n / 2]
    } else {
        (a[n / 2 - 1] + a[n / 2]) / 2.0
    }
}

#[test]
fn every_stated_plan_is_an_estimate_command() {
    let o = run_all(true);
    let max = o.errors.iter().fold(0.0f64, |m, e| m.max(e.abs()));
    println!(
        "\n{} rows estimated, {} left out; median |error| {:.1}%, max {:.1}%",
        o.errors.len(),
        o.left_out,
        100.0 * median_abs(&o.errors),
        100.0 * max
    );
    // The 16 NeMo runs without CP whose best plan is unstated and the two strong-scaling
    // endpoints without a plan are the only rows left out.
    assert_eq!(o.left_out, 18, "rows left out");
    assert!(o.errors.iter().all(|e| e.is_finite()));
}

/// Issue 11's bound on the median (|error| ≤ 7 %); it holds (2.3 %). Three preset values
/// were fitted on rows of this set (docs/validation-modern.md names the rows and gives
/// their leave-one-out errors), so this median is partly in-sample.
/// Each estimated row's residual `ln(measured / estimated)` with what groups it (the
/// prediction bands' data, `presets/bands/runs.csv`; runs.csv's rows are dense models).
#[test]
fn band_residuals_are_current() {
    let o = run_all(false);
    common::check_band_residuals("runs", &o.residuals);
}

#[test]
fn issue_11_median_bound() {
    let o = run_all(false);
    let med = median_abs(&o.errors);
    assert!(med <= 0.07, "median |error| {:.1}%", 100.0 * med);
}

/// Issue 11's bounds: median |error| ≤ 7 % and every row within 15 % (today 2.3 % and
/// 14.4 %; Llama 2 7B SFT −14.4 % and GPT 1.7B −13.9 % are the nearest to the edge, and
/// docs/validation-modern.md, "What the errors say", discusses why).
#[test]
fn issue_11_error_bounds() {
    let o = run_all(false);
    let max = o.errors.iter().fold(0.0f64, |m, e| m.max(e.abs()));
    assert!(
        median_abs(&o.errors) <= 0.07,
        "median |error| {:.1}%",
        100.0 * median_abs(&o.errors)
    );
    assert!(max <= 0.15, "max |error| {:.1}%", 100.0 * max);
}

/// The Megatron-LM weak-scaling models against the table's own "Model size" column
/// (runs.csv `params_b`): with the input embedding and the output layer untied, every row
/// is within 4 % (12·l·h² + 2·V·h: 1.75 B for "1.7B", 31.5 B for "32B", 461.5 B for
/// "462B"); tied weights would give 1.49 B and 6.60 B for "1.7B" and "7.1B" (−12 %, −7 %).
#[test]
fn weak_scaling_models_have_the_table_parameter_counts() {
    let rows: Vec<Run> = runs()
        .into_iter()
        .filter(|r| r.model.starts_with("GPT ") && r.gpu == "H100")
        .collect();
    assert_eq!(rows.len(), 9);
    for r in &rows {
        let n = catalog::model(&model_of(r).unwrap()).unwrap().params() / 1e9;
        let table = r.params_b.unwrap();
        assert!(
            (n / table - 1.0).abs() < 0.04,
            "{}: {n:.2} B against the table's {table} B",
            r.model
        );
    }
}

/// Each NeMo fine-tuning row has NVIDIA's launcher script, which runs the row's own plan
/// (checked field by field in `script_of`); the 13B and 70B SFT scripts interleave 10 and
/// 20 virtual stages (NeMo-Framework-Launcher@c9c0416ef8, examples/peft/llama/h100/).
#[test]
fn nemo_fine_tuning_rows_take_their_launcher_script() {
    let vps: Vec<(String, Option<u32>)> = runs()
        .iter()
        .filter(|r| r.model.contains("SFT") || r.model.contains("LoRA"))
        .map(|r| (r.model.clone(), script_of(r).expect("a launcher script").vp))
        .collect();
    assert_eq!(vps.len(), 6);
    let vp = |m: &str| vps.iter().find(|(n, _)| n == m).unwrap().1;
    assert_eq!(vp("LLAMA2-13B SFT"), Some(10));
    assert_eq!(vp("LLAMA2-70B SFT"), Some(20));
    assert_eq!(vp("LLAMA2-7B SFT"), None);
}

/// Runs whose software predates Megatron-core's ZeRO-2/3 (custom FSDP, February 2025): the
/// NeMo 24.03 and 24.07 containers and Megatron-LM's weak-scaling table of July 2024
/// (f2e5db402c, "New scaling figures on H100 GPUs").
fn before_megatron_fsdp(r: &Run) -> bool {
    r.notes.contains("NeMo 24.07")
        || r.notes.contains("NeMo24.03")
        || r.notes.contains("2024 weak-scaling table")
}

/// Issue 20's acceptance on this set: every pre-training row with a stated plan swept with
/// the default grid, the row's model, system, GPUs, batch, sequence, precision and the
/// switches its software lacked fixed (`common::sweep_args_of`); published time / the
/// sweep's best. Fine-tuning rows (packed samples, LoRA) are left out: the sweep has no
/// such axes.
#[test]
fn default_sweep_best_vs_published() {
    let mut ratios = Vec::new();
    println!("| row | run | published | sweep best | published/best | best plan |");
    println!("|---|---|---|---|---|---|");
    for (i, r) in runs().iter().enumerate() {
        let Ok(args) = planned(r) else { continue };
        if args.iter().any(|a| a == "--packed-sample-len") {
            continue;
        }
        let (measured, _, _) = evaluate(r, &args);
        let mut sweep = common::sweep_args_of(&args);
        if r.source_path.contains("f2e5db402c") {
            // Megatron-LM in 2021 had neither the distributed optimizer nor selective
            // recomputation (Korthikanti et al. 2022 added it): the grid of its software.
            sweep.extend(["--zero", "0", "--recompute", "none,full"].map(String::from));
        } else if before_megatron_fsdp(r) {
            // Megatron-core sharded gradients and parameters (ZeRO-2/3) only from February
            // 2025 (Megatron-LM d165a8548b, "MCore Customized FSDP"); the NeMo 24.03 and
            // 24.07 containers and the July 2024 weak-scaling table ran the distributed
            // optimizer (ZeRO-1) or none.
            sweep.extend(["--zero", "0,1"].map(String::from));
        }
        let (best, plan) =
            common::default_sweep_best(&sweep).unwrap_or_else(|e| panic!("row {}: {e}", i + 2));
        let ratio = measured / best;
        ratios.push(ratio);
        println!(
            "| {} | {} {}×{} | {measured:.3} s | {best:.3} s | {ratio:.3} | {} |",
            i + 2,
            r.model,
            r.num_gpus,
            r.gpu,
            common::plan_shape(&plan)
        );
    }
    let (median, inside) = common::sweep_ratio_stats(&ratios);
    println!(
        "{} runs: median {median:.3}, {:.1}% within [0.85, 1.20]",
        ratios.len(),
        100.0 * inside
    );
    // Issue 20 asks for a median in [0.95, 1.10] (met) and 90 % within [0.85, 1.20] (not
    // met on this set: 92.3 % (36 of 39); docs/validation.md names the rows outside and why).
    assert!((0.95..=1.10).contains(&median), "median {median}");
    assert!(inside >= 0.92, "{inside}");
}
