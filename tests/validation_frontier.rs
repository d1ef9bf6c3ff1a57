//! Validation on model families the 2025 set does not hold: DeepSeek-V3, gpt-oss-120b,
//! Kimi K2, Nemotron 3 Super and Nemotron 3 Ultra as NVIDIA's Megatron-Bridge performance summaries publish them (containers 26.06,
//! 26.06.01 and 26.08; tests/data/modern/frontier-runs.csv, every row naming its source file
//! and commit). Nothing here was used to set a constant: the rows were added after the
//! model's constants were fixed, as a check of what generalises (issue 19's held-out aim:
//! ≥ 90 % expressible, median ≤ 8 %, 90th percentile ≤ 20 %).
//!
//! Each row becomes an `astrolabe estimate` command by one rule: the row's model, GPU type,
//! GPUs, TP, PP, CP, EP, virtual stages, micro-batch, global batch, sequence length and
//! precision, plus what the recipes of those containers set and the table omits
//! (src/megatron/bridge/perf_recipes/{deepseek,gpt_oss,kimi}/*/ at aad7d9ce2, June 2026,
//! unchanged for these plans up to 067f987df0 but for environment variables):
//! - every recipe dispatches with HybridEP (`moe_flex_dispatcher_backend = "hybridep"`) and
//!   expert TP 1, and runs Transformer Engine's fused cross-entropy (`_benchmark_common`);
//! - the MXFP8 recipes gather their weights in MXFP8 (`bf16_with_mxfp8_mixed`:
//!   `fp8_param_gather`), except Kimi K2's, which turns it off;
//! - DeepSeek-V3 and gpt-oss on GB200/GB300 capture the full iteration and overlap the EP
//!   all-to-alls (`_enable_deepseek_full_iteration_mxfp8`,
//!   `_apply_gpt_oss_120b_full_iter_fp8mx_configs`); on B300 they capture `attn`,
//!   `moe_router` and `moe_preprocess` without the overlap (`_enable_deepseek_transformer_engine_graph`
//!   and gpt_oss/b300); Kimi K2 captures nothing;
//! - DeepSeek-V3 recomputes `mla_up_proj` but on GB300, Kimi K2 `mla_up_proj`; DeepSeek-V3
//!   runs Megatron-core's precision-aware optimizer with BF16 moments
//!   (recipes/deepseek: `exp_avg_dtype = exp_avg_sq_dtype = bfloat16`);
//! - DeepSeek-V3's pipeline layout (`--pipeline-layout`, [`deepseek_v3_layout`]): on 8
//!   stages the first holds the embedding and 8 layers, the last 5 layers, the MTP layer
//!   and the loss; on 16 virtual stages (PP 4 × VP 4, PP 2 × VP 8) 4 layers each but the
//!   last, which holds one layer, the MTP layer and the loss, so rank r holds virtual
//!   stages r, r + p, …: 16, 16, 16, 13 layers on PP 4 and 32, 29 on PP 2.
//! - Nemotron 3 Super (perf_recipes/nemotronh/*/nemotronh.py and `common.py`,
//!   `_apply_nemotron_3_super_perf_defaults`) captures `attn`, `mamba`, `moe_router` and
//!   `moe_preprocess` on every system without the EP overlap or the TP overlap (its
//!   pre-training path builds no `CommOverlapConfig`: recipes/common.py
//!   `_pretrain_common`, `comm_overlap = None`), keeps FP32 optimizer state,
//!   and gathers MXFP8 weights. Its 26.08 recipes on GB200/GB300 add CuteDSL's fused grouped
//!   MLP and FP8 attention (d0debd0bd, August 2026), which the model does not have; the
//!   26.06 and 26.06.01 rows ran without them. Its NVFP4 rows keep the last 14 layers in
//!   BF16 (`nemotron_3_super_bf16_with_nvfp4_mixed`: `--bf16-last-layers 14`) and gather
//!   NVFP4 weights (`fp4_param_gather`).
//! - Nemotron 3 Ultra (the same files, `_apply_nemotron_3_ultra_perf_defaults`,
//!   `_apply_nemotron_3_ultra_fsdp_hsdp`): Megatron-FSDP within 64 ranks, CuteDSL's fused
//!   grouped MLP, `moe_act` recomputed, no CUDA graphs, no TP overlap.
//!
//! Kimi K2's row trained with the Muon optimizer (the table's note), which the model does
//! not have; it runs with Adam here and is printed apart from the bounded rows.

use crate::common;
use serde::Deserialize;

#[derive(Debug, Deserialize)]
struct Run {
    gpu: String,
    num_gpus: u32,
    model: String,
    seq_len: u32,
    tp: u32,
    pp: u32,
    cp: u32,
    vp: Option<u32>,
    ep: u32,
    micro_batch: u32,
    global_batch: u32,
    precision: String,
    step_time_s: f64,
    notes: String,
}

fn runs() -> Vec<Run> {
    common::csv_rows("tests/data/modern/frontier-runs.csv")
}

/// The estimate command of a row (arguments after `estimate`).
fn command(r: &Run) -> Vec<String> {
    let model = match r.model.as_str() {
        "DeepSeekV3" => "deepseek-v3",
        "GPT OSS 120B" => "gpt-oss-120b",
        "Kimi_K2" => "kimi-k2",
        "Nemotron_3_Super" => "nemotron3-super",
        "Nemotron_3_Ultra" => "nemotron3-ultra",
        m => panic!("no model preset for {m}"),
    };
    let system = match r.gpu.as_str() {
        "B300" => "dgx-b300",
        "GB200" => "gb200-nvl72",
        "GB300" => "gb300-nvl72",
        g => panic!("no system preset for {g}"),
    };
    let precision = match r.precision.as_str() {
        "MXFP8" => "mxfp8",
        "NVFP4" => "nvfp4",
        p => panic!("the rule covers the MXFP8 and NVFP4 recipes, not {p}"),
    };
    let rack = r.gpu.starts_with("GB");
    let mut a: Vec<String> = Vec::new();
    let mut flag = |k: &str, v: String| {
        a.push(format!("--{k}"));
        a.push(v);
    };
    flag("model", model.into());
    flag("system", system.into());
    flag("gpus", r.num_gpus.to_string());
    flag("tp", r.tp.to_string());
    flag("pp", r.pp.to_string());
    flag("cp", r.cp.to_string());
    flag("ep", r.ep.to_string());
    flag("etp", "1".into());
    flag("seq-len", r.seq_len.to_string());
    flag("micro-batch", r.micro_batch.to_string());
    flag("global-batch", r.global_batch.to_string());
    flag("precision", precision.into());
    flag("ep-dispatch", "hierarchical".into());
    // Nemotron 3 Ultra's recipes run Megatron-core's own fused cross-entropy
    // (`cross_entropy_fusion_impl = "native"`), one fused pass as Transformer Engine's.
    flag("cross-entropy", "te".into());
    if let Some(v) = r.vp.filter(|&v| v > 1) {
        flag("virtual-stages", v.to_string());
    }
    let kimi = model == "kimi-k2";
    let super3 = model == "nemotron3-super";
    let ultra = model == "nemotron3-ultra";
    let graphs = match (kimi || ultra, super3, rack) {
        (true, _, _) => "none",
        (false, true, _) => "attn,mamba,moe_router,moe_preprocess",
        (false, false, true) => "full",
        (false, false, false) => "attn,moe_router,moe_preprocess",
    };
    flag("cuda-graphs", graphs.into());
    if graphs == "full" {
        flag("ep-overlap", "true".into());
    }
    let mla_up = kimi || (model == "deepseek-v3" && r.gpu != "GB300");
    if mla_up {
        flag("recompute-modules", "mla_up_proj".into());
    }
    if model == "deepseek-v3" {
        flag("optimizer", "adam-bf16-moments".into());
        flag(
            "pipeline-layout",
            deepseek_v3_layout(r.pp, r.vp.unwrap_or(1)).into(),
        );
    }
    if ultra {
        // `_apply_nemotron_3_ultra_fsdp_hsdp`: Megatron-FSDP sharding parameters, gradients
        // and optimizer state within 64 ranks (`optim_grads_params`), 256/64 = 4 replicas;
        // CuteDSL's fused grouped MLP (NVTE_CUTEDSL_FUSED_GROUPED_MLP=1); `moe_act`
        // recomputed.
        flag("hsdp", "64".into());
        flag("grouped-gemm", "fused".into());
        flag("recompute-modules", "moe_act".into());
    }
    if super3 && precision == "nvfp4" {
        // `nemotron_3_super_bf16_with_nvfp4_mixed` (training/mixed_precision.py):
        // first_last_layers_bf16 with the last 14 layers in BF16.
        flag("bf16-last-layers", "14".into());
    }
    if super3 || ultra {
        // The Super pre-training recipes never build a CommOverlapConfig
        // (recipes/common.py `_pretrain_common`: comm_overlap = None), so TP 2 on GB200
        // runs its SP collectives without Transformer Engine's overlap.
        flag("tp-overlap", "false".into());
    }
    if !kimi && !ultra {
        a.push("--fp8-params".into());
    }
    a.push("--flash-attention".into());
    // Attention in 8 bits (`fp8_dot_product_attention = True`): gpt-oss's full-iteration
    // recipes (`_apply_gpt_oss_120b_full_iter_fp8mx_configs`), DeepSeek-V3 on GB300
    // (`_enable_deepseek_full_iteration_mxfp8(cfg, fp8_dot_product_attention=True, …)`; both
    // at aad7d9ce2 and 067f987df0) and Nemotron 3 Super's GB200/GB300 MXFP8 recipes from
    // d0debd0bd (August 2026: the 26.08 rows).
    let fp8_attention = match model {
        "gpt-oss-120b" => graphs == "full",
        "deepseek-v3" => r.gpu == "GB300",
        "nemotron3-super" => rack && precision == "mxfp8" && r.notes.contains("container 26.08;"),
        _ => false,
    };
    if fp8_attention {
        a.push("--fp8-attention".into());
    }
    a
}

/// DeepSeek-V3's pipeline layout as the recipes set it, in Megatron-core's syntax:
/// `_get_deepseek_v3_pipeline_layout` (recipes/deepseek/h100/deepseek_v3.py) for PP × VP
/// of 8 × 1 and 4 × 4, and the string the GB300 recipe passes for 2 × 8
/// (perf_recipes/deepseek/gb300/deepseek_v3.py, at aad7d9ce2 and 067f987df0).
fn deepseek_v3_layout(pp: u32, vp: u32) -> &'static str {
    match (pp, vp) {
        (8, 1) | (4, 2) => "Et*8|(t*8|)*6t*5mL",
        (4, 4) | (2, 8) | (8, 2) | (16, 1) => "Et*4|(t*4|)*14tmL",
        (4, 1) => "Et*16|t*16|t*16|t*13mL",
        _ => panic!("no DeepSeek-V3 layout for PP {pp} × VP {vp}"),
    }
}

/// Rows the bound covers: not Kimi K2 (Muon), not the container the table flags for a
/// known regression (gpt-oss in 26.06.01, cudnn-frontend issue 256).
fn bounded(r: &Run) -> bool {
    !r.notes.contains("Muon") && !r.notes.contains("known regression")
}

/// The prediction bands' residuals of this set (`presets/bands/frontier.csv`): the 20
/// bounded rows (the Muon row and the regression's rows say nothing about this model's
/// error on runs like them). With `ASTROLABE_BLESS=1` writes them.
#[test]
fn band_residuals_are_current() {
    let rows: Vec<astrolabe::band::Residual> = runs()
        .iter()
        .enumerate()
        .filter(|(_, r)| bounded(r))
        .map(|(i, r)| astrolabe::band::Residual {
            row: i as u32 + 2,
            gpu: r.gpu.clone(),
            moe: true,
            precision: r.precision.to_lowercase(),
            gpus: r.num_gpus,
            log_ratio: (r.step_time_s / common::estimate_cli(&command(r)).0.time.total.get()).ln(),
        })
        .collect();
    assert_eq!(rows.len(), 29);
    common::check_band_residuals("frontier", &rows);
}

/// The estimate of a row through the command line: (iteration time, its 80 % band), s.
fn estimate(r: &Run) -> (f64, [f64; 2]) {
    let mut args = vec!["estimate".to_string()];
    args.extend(command(r));
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    let v = common::json(&refs);
    let b = &v["band"];
    let num = |x: &serde_json::Value| x.as_f64().expect("a number");
    (
        num(&v["iteration_time_s"]),
        [num(&b["low_s"]), num(&b["high_s"])],
    )
}

/// Every row is an estimate command that evaluates; the errors, and whether each measured
/// time falls inside the estimate's 80 % band made without its own residual (leave-one-out,
/// as tests/bands.rs checks every public set), are printed (`--nocapture`;
/// docs/validation-modern.md, "Other model families"). The bounds asserted are today's, so
/// that a change which moves these rows away from their measurements fails here; issue
/// 19's aim for other families (median ≤ 8 %, 90th percentile ≤ 20 %) is not met yet.
#[test]
fn frontier_rows_as_published() {
    let rows = runs();
    assert_eq!(rows.len(), 32);
    let shipped: Vec<(astrolabe::band::Key, f64, bool, u32)> = astrolabe::band::SETS
        .iter()
        .flat_map(|(set, t)| {
            astrolabe::band::parse(t)
                .unwrap()
                .into_iter()
                .map(move |r| (r.key(), r.log_ratio, *set == "frontier", r.row))
        })
        .collect();
    let keys: Vec<(astrolabe::band::Key, f64)> = shipped.iter().map(|s| (s.0, s.1)).collect();
    let (mut errs, mut inside) = (Vec::new(), 0);
    println!(
        "| model | system | GPUs | plan | measured | estimate | error | in the 80 % band (leave-one-out) |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    for (i, r) in rows.iter().enumerate() {
        let (t, [lo, hi]) = estimate(r);
        // Without its own residual (bounded rows have one in the frontier set).
        let own = shipped.iter().position(|s| s.2 && s.3 == i as u32 + 2);
        let (lo, hi) = match own {
            Some(j) => {
                let b = astrolabe::band::band_from(t, &keys[j].0, &keys, Some(j));
                (b.low_s, b.high_s)
            }
            None => (lo, hi),
        };
        let e = t / r.step_time_s - 1.0;
        let within = (lo..=hi).contains(&r.step_time_s);
        println!(
            "| {} | {} | {} | PP {} VP {} EP {} mb {} gb {} | {:.3} s | {t:.3} s | {:+.1}%{} | {} |",
            r.model,
            r.gpu,
            r.num_gpus,
            r.pp,
            r.vp.unwrap_or(1),
            r.ep,
            r.micro_batch,
            r.global_batch,
            r.step_time_s,
            100.0 * e,
            if bounded(r) { "" } else { " (not bounded)" },
            if within { "yes" } else { "no" }
        );
        if bounded(r) {
            errs.push(e.abs());
            inside += usize::from(within);
        }
    }
    errs.sort_by(f64::total_cmp);
    let median = common::median(&errs);
    let p90 = errs[(0.9 * errs.len() as f64).ceil() as usize - 1];
    println!(
        "{} bounded rows: median |error| {:.1}%, 90th percentile {:.1}%, {inside} inside their leave-one-out band",
        errs.len(),
        100.0 * median,
        100.0 * p90
    );
    assert_eq!(errs.len(), 29);
    assert!(median <= 0.23 && p90 <= 0.36, "{median} {p90}");
    // The largest, Nemotron 3 Super on B300 at +82 % (MXFP8) and +76 % (NVFP4), are host
    // time: its 64 local experts
    // are each charged as Transformer Engine GEMM calls, a rule fitted on containers with
    // 16 (docs/validation-modern.md, "Other model families"). Without the host term it is
    // −20 %, as on GB200/GB300.
    assert!(errs.last().is_some_and(|&m| m <= 0.83), "{errs:?}");
}

/// A run of Megatron-Bridge's model verification cards (`tests/data/modern/card-runs.csv`):
/// its estimate command, as the recipe the card names sets it, and its measured step time.
#[derive(Debug, Deserialize)]
struct CardRun {
    gpu: String,
    num_gpus: u32,
    model: String,
    step_time_s: f64,
    command: String,
}

/// The runs of Megatron-Bridge's model verification cards (`examples/model_verification_cards`
/// at 067f987df0: the last ten of 50 steps, mock data, forced balancing), each with its
/// recipe's plan, held out (nothing was set from them):
/// - Qwen3-30B-A3B on 8, 32, 128 and 256 GB300 at 64 sequences per GPU (the card's
///   `pretrain_weak_scaling`): measured 5.81–5.89 s, flat within 1.3 %. The estimate must be
///   as flat (within 2 %: EP stays in the node and the DP reduction hides behind the
///   backward at every size) and each within 7 %;
/// - DeepSeek-V3 on 1,024 H100 in BF16 (`mla_up_proj` and `mlp` recomputed), Nemotron 3 Super
///   on 64 H100 (`layernorm`, `moe_act`, `moe` and `core_attn` recomputed, experts padded to
///   1.1× capacity) and on 64 GB200 in BF16, gpt-oss-120b on 64 GB200 in BF16: each must be
///   an estimate that runs; their errors are printed and recorded in
///   docs/validation-modern.md ("Verification cards"), not bounded.
#[test]
fn verification_card_runs() {
    let rows: Vec<CardRun> = common::csv_rows("tests/data/modern/card-runs.csv");
    assert_eq!(rows.len(), 8);
    println!("| model | system | GPUs | measured | estimate | error |");
    println!("|---|---|---|---|---|---|");
    let mut scaling = Vec::new();
    for r in &rows {
        let mut args = vec!["estimate"];
        args.extend(r.command.split_whitespace());
        let v = common::json(&args);
        let t = v["iteration_time_s"].as_f64().expect("a time");
        let e = t / r.step_time_s - 1.0;
        println!(
            "| {} | {} | {} | {:.3} s | {t:.3} s | {:+.1}% |",
            r.model,
            r.gpu,
            r.num_gpus,
            r.step_time_s,
            100.0 * e
        );
        if r.model == "qwen3-30b-a3b" {
            assert!(e.abs() <= 0.07, "{} GPUs: {e:+.3}", r.num_gpus);
            scaling.push(t);
        }
    }
    let (lo, hi) = scaling
        .iter()
        .fold((f64::MAX, 0.0f64), |(l, h), &t| (l.min(t), h.max(t)));
    assert_eq!(scaling.len(), 4);
    assert!(hi / lo <= 1.02, "weak scaling {lo} – {hi}");
}

/// A configuration of Megatron-Bridge's MoE hardware playbook (`tests/data/modern/tracker-runs.csv`):
/// its estimate command (empty when the plan cannot be stated) and the step time its TFLOP/s
/// give.
#[derive(Debug, Deserialize)]
struct TrackerRun {
    config: String,
    gpu: String,
    num_gpus: u32,
    precision: String,
    rounded: String,
    step_time_s: Option<f64>,
    command: String,
}

fn tracker_runs() -> Vec<TrackerRun> {
    common::csv_rows("tests/data/modern/tracker-runs.csv")
}

fn tracker_estimate(r: &TrackerRun) -> f64 {
    let mut args = vec!["estimate"];
    args.extend(r.command.split_whitespace());
    common::computed_json(&args)["iteration_time_s"]
        .as_f64()
        .expect("a time")
}

/// The `best_configs` of Megatron-Bridge's MoE hardware playbook
/// (`skills/nemo-mbridge-perf-moe-hardware-configs/card.yaml` at 067f987df0; NOTES.md beside
/// the CSV says how TFLOP/s become step times), held out: 14 configurations, 13 of them
/// expressible (DeepSeek-V3 on 1,024 H100 since its layout's MTP module apart from the loss
/// is, `Stages::mtp_apart`; Qwen3-Next 80B and Qwen3.5 397B since Gated DeltaNet layers are,
/// `model::gdn`). The other: DeepSeek-V3 without MTP (no published FLOPs per token to turn
/// its TFLOP/s into time).
/// Each expressible row must estimate (a plan that does not fit still prints its time); the
/// table is printed (`--nocapture`; docs/validation-modern.md, "MoE hardware playbook").
/// Today's errors are asserted as bounds so that a change moving these rows away from
/// their measurements fails here: the median |error| is 17.0 % and the largest 25.7 %
/// (Qwen3-235B on 128 B200, EP 16 across two nodes; 27.5 % before the EP overlap's first
/// forward and last backward ran alone, 30.4 % before the all-to-alls beside compute took
/// their measured slowdown σ); the rows are rounded (`~590`) and taken
/// on older stacks than the performance summaries, so they are a check, not a target.
#[test]
fn moe_hardware_playbook_configurations() {
    let rows = tracker_runs();
    assert_eq!(rows.len(), 14);
    println!("| configuration | system | GPUs | published | estimate | error |");
    println!("|---|---|---|---|---|---|");
    let mut errs = Vec::new();
    for r in &rows {
        let Some(measured) = r.step_time_s.filter(|_| !r.command.is_empty()) else {
            println!(
                "| {} | {} | {} | not expressible | | |",
                r.config, r.gpu, r.num_gpus
            );
            continue;
        };
        let t = tracker_estimate(r);
        let e = t / measured - 1.0;
        let approx = if r.rounded == "yes" { "~" } else { "" };
        println!(
            "| {} | {} | {} | {approx}{measured:.3} s | {t:.3} s | {:+.1}% |",
            r.config,
            r.gpu,
            r.num_gpus,
            100.0 * e
        );
        errs.push(e.abs());
    }
    assert_eq!(errs.len(), 13, "expressible configurations");
    errs.sort_by(f64::total_cmp);
    let median = common::median(&errs);
    let max = errs[errs.len() - 1];
    println!(
        "{} expressible of {}: median |error| {:.1}%, largest {:.1}%",
        errs.len(),
        rows.len(),
        100.0 * median,
        100.0 * max
    );
    assert!(median <= 0.175 && max <= 0.26, "{median} {max}");
}

/// The EP overlap on one shape as NVIDIA measured and profiled it: Qwen3-30B-A3B on 16 H100
/// (two nodes, EP 16 by HybridEP, BF16, micro-batch 1, force-balanced routing), whose
/// playbook records an A/B of Megatron-core's EP overlap alone: 244.039 → 287.305 TFLOP/s,
/// that is 24.714 s → 20.992 s per step at the shape's 20.147 s for 299.352 TFLOP/s, a gain
/// of 3.722 s. The same A/B's rank-0 profile (Megatron-Bridge
/// `skills/nemo-mbridge-perf-moe-comm-overlap/SKILL.md`) has, without the overlap, about
/// 8.25 s of communication kernels (9.079 ms of it beside compute being 0.11 %), 1.89 s of
/// idle GPU (a GPU-active union of 22.821 s) and about 14.57 s of other kernels in the
/// 24.71-s step; with the overlap 36.55 % of the communication ran beside compute.
///
/// The estimate, part by part, without the overlap:
/// - compute 14.19 s against the other kernels' 14.57 s (−2.6 %), bound 5 %;
/// - all-to-all 6.28 s against the communication kernels' 8.25 s (0.76; HybridEP's
///   measured rate across two H100 nodes, `hybridep_scaleout_efficiency`; 0.56 at NCCL's
///   rate), bound [0.73, 0.79]: a 5 % change in the scale-out phase leaves it;
/// - no idle GPU where the profile has 1.89 s (not asserted: not modelled).
///
/// With the overlap the same profile's communication kernels took 10.83 s (31 % longer):
/// beside compute the estimate's all-to-alls run at 1/(1 + σ) of their rate, σ = 0.31
/// (`ep_comm_slowdown`, read off these two totals), and still hide behind the paired
/// compute, where the profile hid 36.55 %: its gain is 4.65 s, 1.25 times the measured
/// 3.722 s (4.72 s before the first forward and last backward of its 64 micro-batches ran
/// alone, `ep_lone`; 5.09 s, 1.37 times, before σ). That is asserted as today's gap, [1.0, 1.28] times
/// the measurement (docs/validation-modern.md, "MoE hardware playbook"): what else keeps
/// Megatron-core's 1F1B overlap from hiding an all-to-all across nodes is not modelled, and
/// a change that models it has to move this bound.
#[test]
fn ep_overlap_on_16_h100_against_its_profile() {
    let rows = tracker_runs();
    let by = |name: &str| {
        rows.iter()
            .find(|r| r.config == name)
            .unwrap_or_else(|| panic!("no row {name}"))
    };
    let off = by("qwen3_30b_h100_16 (earlier A/B, overlap off)");
    let on = by("qwen3_30b_h100_16 (earlier A/B, overlap on)");
    let measured = off.step_time_s.unwrap() - on.step_time_s.unwrap();
    approx::assert_relative_eq!(measured, 3.722, max_relative = 1e-3);
    let json = |r: &TrackerRun| {
        let mut args = vec!["estimate"];
        args.extend(r.command.split_whitespace());
        common::computed_json(&args)
    };
    let v = json(off);
    let t = &v["time_breakdown"];
    let compute = t["forward_s"].as_f64().unwrap() + t["backward_s"].as_f64().unwrap();
    let a2a = t["communication"]["ep"]["exposed_s"].as_f64().unwrap();
    assert!(
        (compute / 14.57 - 1.0).abs() <= 0.05,
        "compute {compute:.3} s"
    );
    assert!(
        (0.73..=0.79).contains(&(a2a / 8.25)),
        "all-to-all {a2a:.3} s against the profile's 8.25 s"
    );
    let gain = v["iteration_time_s"].as_f64().unwrap() - tracker_estimate(on);
    assert!(
        (1.0..=1.28).contains(&(gain / measured)),
        "estimated gain {gain:.3} s against the measured {measured:.3} s"
    );
}

/// The playbook's residuals, `ln(measured / estimated)` of its expressible rows, as the
/// prediction bands read them (`presets/bands/tracker.csv`; FP8 blockwise counts as 8-bit).
#[test]
fn tracker_band_residuals_are_current() {
    let rows: Vec<astrolabe::band::Residual> = tracker_runs()
        .iter()
        .enumerate()
        .filter_map(|(i, r)| {
            let measured = r.step_time_s.filter(|_| !r.command.is_empty())?;
            Some(astrolabe::band::Residual {
                row: i as u32 + 2,
                gpu: r.gpu.clone(),
                moe: true,
                precision: r.precision.trim_end_matches("-block").to_string(),
                gpus: r.num_gpus,
                log_ratio: (measured / tracker_estimate(r)).ln(),
            })
        })
        .collect();
    assert_eq!(rows.len(), 13);
    common::check_band_residuals("tracker", &rows);
}
