//! Validation against NVIDIA's Megatron-Bridge performance summaries (tests/data/modern/
//! runs-2025.csv, a copy of the shared set: 166 published runs of Llama 3 and Qwen3 MoE on
//! H100, B200, B300, GB200 and GB300; every row names its source file and commit).
//!
//! Each of the 144 rows that state their precision becomes an `astrolabe estimate` command
//! by one rule: the row's model, GPU type, GPUs, TP, PP, CP, EP, virtual stages,
//! micro-batch, global batch, sequence length and precision, with FSDP where the row says
//! so, plus what Megatron-Bridge's recipes at the same commit set and the table omits
//! (tests/data/modern/NOTES.md names each recipe file): expert TP 1 for Qwen3, the
//! embedding and loss as pipeline layers for Llama 3.1 405B, LoRA rank 32 on QKV, packed
//! SQuAD samples for fine-tuning. The command is parsed by the real CLI and evaluated;
//! nothing is fitted to any row here. Measured time is `step_time_s` (the table's tokens/s
//! per GPU turned into seconds per step). Run with `--nocapture` for the per-row table.

use crate::common;
use serde::Deserialize;
use std::collections::BTreeMap;

#[derive(Debug, Deserialize)]
struct Run {
    gpu: String,
    num_gpus: u32,
    model: String,
    seq_len: u32,
    tp: u32,
    pp: u32,
    cp: u32,
    ep: Option<u32>,
    vp: Option<u32>,
    micro_batch: u32,
    global_batch: u32,
    precision: Option<String>,
    step_time_s: f64,
    notes: String,
}

fn runs() -> Vec<Run> {
    common::csv_rows("tests/data/modern/runs-2025.csv")
}

/// The row's model family name without the "(tokendrop)" mark.
fn base(r: &Run) -> &str {
    r.model.split_whitespace().next().unwrap_or("")
}

fn is_moe(r: &Run) -> bool {
    base(r).starts_with("Qwen3")
}

/// The estimate command of a row (arguments after `estimate`), or why it has none.
fn command(r: &Run) -> Result<Vec<String>, String> {
    let model = match base(r) {
        "LLAMA3_8B" => "llama3-8b",
        "LLAMA3_70B" => "llama3-70b",
        "LLAMA3.1_405B" => "llama3-405b",
        "Qwen3_30B_a3B" => "qwen3-30b-a3b",
        "Qwen3_235B_a22B" => "qwen3-235b-a22b",
        m => return Err(format!("no model preset for {m}")),
    };
    let system = match r.gpu.as_str() {
        "H100" => "dgx-h100",
        "B200" => "dgx-b200",
        "B300" => "dgx-b300",
        "GB200" => "gb200-nvl72",
        "GB300" => "gb300-nvl72",
        g => return Err(format!("no system preset for {g}")),
    };
    // FP8 (current scaling, the default of these tables' FP8 rows), MXFP8, NVFP4.
    let precision = match r.precision.as_deref() {
        Some("BF16") => "bf16",
        Some("FP8" | "FP8-CS") => "fp8",
        Some("FP8-MX" | "MXFP8") => "mxfp8",
        Some("NVFP4") => "nvfp4",
        Some(p) => return Err(format!("unknown precision {p}")),
        None => return Err("precision not stated".into()),
    };
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
    flag("seq-len", r.seq_len.to_string());
    flag("micro-batch", r.micro_batch.to_string());
    flag("global-batch", r.global_batch.to_string());
    flag("precision", precision.into());
    if let Some(ep) = r.ep.filter(|&e| e > 1) {
        flag("ep", ep.to_string());
    }
    if is_moe(r) {
        // recipes/qwen/*/qwen3_moe.py: expert_tensor_parallel_size = 1.
        flag("etp", "1".into());
        let (overlap, hybrid) = qwen_recipe(r);
        if overlap {
            flag("ep-overlap", "true".into());
        }
        if hybrid {
            flag("ep-dispatch", "hierarchical".into());
        }
        flag("cuda-graphs", qwen_graphs(r).into());
    }
    if let Some(v) = r.vp.filter(|&v| v > 1) {
        flag("virtual-stages", v.to_string());
    }
    if r.precision.as_deref() == Some("FP8-CS") || r.precision.as_deref() == Some("FP8") {
        flag("fp8-recipe", "current".into());
    }
    if r.notes.contains("task SFT") || r.notes.contains("task LoRA") {
        flag("packed-sample-len", "128".into());
    }
    if r.notes.contains("task LoRA") {
        // perf_recipes/llama/*/llama3.py: peft.target_modules = ["linear_qkv"]; dim 32.
        flag("lora-rank", "32".into());
        flag("lora-targets", "qkv".into());
    }
    if (base(r) == "LLAMA3.1_405B" || base(r).starts_with("Qwen3_235B")) && r.pp > 1 {
        // recipes/llama and recipes/qwen/h100/qwen3_moe.py (Qwen3-235B-A22B, which the
        // performance recipes build on; at 067f987df0):
        // account_for_{embedding,loss}_in_pipeline_split = True: 94 + 2 = 96 units, so
        // PP 8 × VP 4 cuts 3 per chunk and PP 4 × VP 12 cuts 2.
        a.extend(["--account-for-embedding", "--account-for-loss"].map(String::from));
    }
    if r.notes.contains("FSDP=") {
        a.push("--fsdp".into());
        if let Some(n) = fsdp_offload_layers(r) {
            flag_offload(&mut a, n);
        }
    }
    // Megatron-Bridge's mixed-precision recipes (training/mixed_precision.py:
    // bf16_with_fp8_current_scaling_mixed, bf16_with_mxfp8_mixed, bf16_with_nvfp4_mixed) set
    // fp8_param_gather / fp4_param_gather: the weights live only in the low-precision format.
    if precision != "bf16" {
        a.push("--fp8-params".into());
    }
    a.push("--flash-attention".into());
    if is_moe(r) && qwen_graphs(r) == "full" {
        // `_enable_hybridep_full_iteration_mxfp8` (perf_recipes/qwen/common.py at aad7d9ce2
        // and 067f987df0) also runs attention in 8 bits (`fp8_dot_product_attention`).
        a.push("--fp8-attention".into());
    }
    // TP communication overlap (Transformer Engine userbuffers) is on in the Llama recipes
    // except with NVFP4: `tp_comm_overlap = False if precision == "nvfp4"`
    // (scripts/performance/configs/llama/llama3_llm_pretrain.py and llama31_llm_pretrain.py
    // at b9819cec5; perf_recipes/llama/*/llama3{,1}.py at 067f987df0 set it False in every
    // NVFP4 recipe).
    let tp_overlap = precision != "nvfp4";
    a.extend(["--tp-overlap".into(), tp_overlap.to_string()]);
    // The performance scripts' common settings since August 2025 (568b3a3ef,
    // scripts/performance; now perf_recipes/_common.py `_benchmark_common`):
    // cross_entropy_fusion_impl = "te" with the provider's cross_entropy_loss_fusion.
    a.extend(["--cross-entropy", "te"].map(String::from));
    if r.tp > 1 {
        a.push("--sequence-parallel".into());
    }
    Ok(a)
}

fn flag_offload(a: &mut Vec<String>, layers: u32) {
    a.push("--offload".into());
    a.push(format!("activations={layers}"));
}

/// Layers whose activations Megatron-Bridge's Llama 3 70B FSDP recipes offload to the Grace
/// CPU (`cpu_offloading_num_layers`; scripts/performance/configs/llama/
/// llama3_workload_base_configs.py at b9819cec5, February 2026, and
/// perf_recipes/llama/{gb200,gb300}/llama3.py at 067f987df0): GB300 FP8 20, GB200 FP8 40.
fn fsdp_offload_layers(r: &Run) -> Option<u32> {
    match (r.gpu.as_str(), base(r), r.precision.as_deref()) {
        ("GB300", "LLAMA3_70B", Some("FP8" | "FP8-CS")) => Some(20),
        ("GB200", "LLAMA3_70B", Some("FP8" | "FP8-CS")) => Some(40),
        _ => None,
    }
}

/// What Megatron-Bridge's Qwen3 performance recipes set and the table omits: (EP
/// all-to-all overlap, HybridEP dispatch).
///
/// - Containers 26.06 and later: src/megatron/bridge/perf_recipes/qwen/{gpu}/qwen3_moe.py
///   at 067f987df0 turn on `overlap_moe_expert_parallel_comm` in the MXFP8 recipes on
///   Blackwell (`_enable_hybridep_full_iteration_mxfp8`, except the 64-GPU 235B ones on
///   B200 and B300), in both H100 235B recipes and in the H100 30B BF16 one.
/// - Earlier containers: scripts/performance/configs/qwen/qwen3_workload_base_configs.py
///   at 196c41b7fa (April 2026) sets `moe_a2a_overlap=True` only for H100 235B.
/// - Both use the flex dispatcher with `moe_flex_dispatcher_backend="hybridep"` everywhere
///   except H100 235B and the B200 235B recipes other than 256-GPU MXFP8 (plain alltoall).
/// - B300 235B with PP 8 × VP 4 (containers 26.02 and 26.02.01): the recipe of January to
///   March 2026 (qwen3_workload_base_configs.py from 5ccbfdfc0, January 2026, to 592711afc,
///   which dropped the virtual stages "to match Qwen3 B200") is the only one with that
///   plan, and every version of it sets `moe_a2a_overlap=True` with the flex dispatcher
///   (DeepEP; at 90bdd9f1f, February 2026).
/// - H100 30B before container 26.04 ran PP 2 × VP 12 (or 24) with EP 8 inside a node,
///   `moe_a2a_overlap=True` and the alltoall dispatcher (qwen3_workload_base_configs.py at
///   34a815a19, December 2025: no flex backend, so `apply_flex_dispatcher_backend` skips;
///   the EP 16 layout with HybridEP and without the overlap came with 4a6450755, February
///   2026).
fn qwen_recipe(r: &Run) -> (bool, bool) {
    let mx = matches!(r.precision.as_deref(), Some("MXFP8" | "FP8-MX"));
    let big = base(r).starts_with("Qwen3_235B");
    let flat = container(r) >= (26, 6);
    match r.gpu.as_str() {
        "H100" if !big && container(r) < (26, 4) => (true, false),
        "H100" => (
            big || (flat && r.precision.as_deref() == Some("BF16")),
            !big,
        ),
        "B200" => (
            flat && mx && !(big && r.num_gpus == 64),
            !big || (mx && r.num_gpus == 256),
        ),
        "B300" if big && r.vp.is_some() && container(r) < (26, 4) => (true, true),
        "B300" => (flat && mx && !(big && r.num_gpus == 64), true),
        _ => (flat && mx, true),
    }
}

/// The CUDA graph capture of Megatron-Bridge's Qwen3 performance recipes (`cuda_graph_impl`,
/// `cuda_graph_scope`):
///
/// - Containers 26.06 and later (perf_recipes/qwen/{gpu}/qwen3_moe.py at 067f987df0): the
///   MXFP8 recipes that call `_enable_hybridep_full_iteration_mxfp8` capture the full
///   iteration (padded expert capacity, no token counts on the host): every Blackwell one
///   but B200 30B (`attn`, `moe_router`, `moe_preprocess`) and B200 64-GPU 235B (none);
///   H100 30B FP8 captures `attn`, `moe_router`, `moe_preprocess`, H100 235B nothing.
/// - Earlier containers (scripts/performance/configs/qwen/qwen3_workload_base_configs.py at
///   196c41b7fa, and at 34a815a19 for December 2025): 30B captures `moe_router`,
///   `moe_preprocess` (B200 and GB200 BF16/FP8-CS also `attn`) but on H100 in FP8 nothing
///   (its `QWEN3_30B_A3B_PRETRAIN_CONFIG_H100_FP8_CS` sets no CUDA graph; the BF16 one
///   captures the router); 235B on GB200/GB300 `attn`, `moe_router`, `moe_preprocess`; 235B
///   on B200, B300 and H100 nothing.
fn qwen_graphs(r: &Run) -> &'static str {
    let mx = matches!(r.precision.as_deref(), Some("MXFP8" | "FP8-MX"));
    let big = base(r).starts_with("Qwen3_235B");
    let blackwell = r.gpu != "H100";
    const PARTIAL: &str = "attn,moe_router,moe_preprocess";
    const ROUTER: &str = "moe_router,moe_preprocess";
    if container(r) >= (26, 6) {
        return match (r.gpu.as_str(), big) {
            ("B200", false) => PARTIAL,
            ("B200", true) if r.num_gpus == 64 => "none",
            ("H100", false) => PARTIAL,
            ("H100", true) => "none",
            _ if blackwell && mx => "full",
            _ => "none",
        };
    }
    match (r.gpu.as_str(), big) {
        ("GB200" | "GB300", true) => PARTIAL,
        (_, true) => "none",
        ("H100", false) if r.precision.as_deref() != Some("BF16") => "none",
        ("B200", false) => PARTIAL,
        ("GB200", false) if !mx => PARTIAL,
        _ => ROUTER,
    }
}

/// The NeMo container of a row (year, month), from its notes ("NeMo container 26.04.01").
fn container(r: &Run) -> (u32, u32) {
    let v = r.notes.split("container ").nth(1).unwrap_or("");
    let mut it = v.split(['.', ';', ' ']).map(|x| x.parse().unwrap_or(0));
    (it.next().unwrap_or(0), it.next().unwrap_or(0))
}

/// The estimated iteration time of a command, in seconds.
fn estimate_s(args: &[String]) -> f64 {
    common::estimate_cli(args).0.time.total.get()
}

/// Errors (estimate / measured − 1) by group (GPU × dense/MoE), printing each row.
fn errors_by_group(print: bool) -> BTreeMap<String, Vec<f64>> {
    let mut groups: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    for (i, r) in runs().iter().enumerate() {
        if r.precision.is_none() {
            continue;
        }
        let args = command(r).unwrap_or_else(|e| panic!("row {}: {e}", i + 2));
        let err = estimate_s(&args) / r.step_time_s - 1.0;
        assert!(err.is_finite(), "row {}: {args:?}", i + 2);
        let kind = if is_moe(r) { "MoE" } else { "dense" };
        groups
            .entry(format!("{} {kind}", r.gpu))
            .or_default()
            .push(err);
        if print {
            println!(
                "| {} | {} {}×{} {} | `{}` | {:.3} | {:+.1}% |",
                i + 2,
                r.model,
                r.num_gpus,
                r.gpu,
                r.precision.as_deref().unwrap_or(""),
                args.join(" "),
                r.step_time_s,
                100.0 * err
            );
        }
    }
    groups
}

/// The host time per eager operation (`host_op`, every preset's 20 µs; the host module of
/// `estimate::transformer`) is fitted here: of the grid 12.5, 15, …, 30 µs, the value with
/// the least mean over systems of each system's score on its MoE rows, the score being the
/// mean of the two statistics issue 19 bounds, `(median |error| + 90th percentile
/// |error|)/2` (each system weighs the same; a median pooled over all rows lets the
/// systems with the most rows decide). Until the thirty-fourth session the score was the
/// median alone; once the EP all-to-alls beside compute took their measured slowdown
/// (`ep_comm_slowdown`) the H100 235B rows moved from −19…−25 % to −6…+1 %, below the
/// group's middle, and H100's median became one row (row 95, host-bound, +17.7 % at 20 µs,
/// about +5 % at 17.5 µs): the median-only minimum jumped to 17.5 µs on that row while
/// every group's 90th percentile grew (B200 MoE 12.6 → 21.2 %, B300 and H100 MoE 34 → 41 %),
/// and leaving one system out put the fit anywhere from 17.5 to 30 µs. Leaving each
/// system's rows out, the fit on the others and the held-out system's median |error|
/// (printed with `--nocapture`; the table in docs/modern-training.md).
#[test]
fn host_op_fit_is_current() {
    let grid: Vec<f64> = (5..=12).map(|i| 2.5e-6 * i as f64).collect();
    let moe: Vec<(String, Vec<String>, f64)> = runs()
        .iter()
        .filter(|r| r.precision.is_some() && is_moe(r))
        .map(|r| (r.gpu.clone(), command(r).unwrap(), r.step_time_s))
        .collect();
    // errs[g][i]: |error| of row i with host_op = grid[g].
    let errs: Vec<Vec<f64>> = grid
        .iter()
        .map(|&t| {
            moe.iter()
                .map(|(_, a, meas)| {
                    let set = |s: &mut astrolabe::system::System| {
                        s.device.spec.efficiency.host_op = astrolabe::units::Seconds::new(t)
                    };
                    let est = common::estimate_cli_with(a, set).0.time.total.get();
                    (est / meas - 1.0).abs()
                })
                .collect()
        })
        .collect();
    let stats_where = |g: usize, keep: &dyn Fn(&str) -> bool| {
        let v: Vec<f64> = (0..moe.len())
            .filter(|&i| keep(&moe[i].0))
            .map(|i| errs[g][i])
            .collect();
        stats(&v)
    };
    let median_where = |g: usize, keep: &dyn Fn(&str) -> bool| stats_where(g, keep).0;
    let mut systems: Vec<&str> = moe.iter().map(|m| m.0.as_str()).collect();
    systems.sort();
    systems.dedup();
    // The criterion: the mean over the kept systems of each one's (median + p90)/2.
    let balanced = |g: usize, keep: &dyn Fn(&str) -> bool| {
        let kept: Vec<&str> = systems.iter().copied().filter(|s| keep(s)).collect();
        kept.iter()
            .map(|sys| {
                let (m, p) = stats_where(g, &|s| s == *sys);
                (m + p) / 2.0
            })
            .sum::<f64>()
            / kept.len() as f64
    };
    let best = |keep: &dyn Fn(&str) -> bool| {
        (0..grid.len())
            .min_by(|&a, &b| balanced(a, keep).total_cmp(&balanced(b, keep)))
            .unwrap()
    };
    println!(
        "| host_op | mean of the systems' (median + p90)/2 |error| | mean of their medians | pooled median |error| |"
    );
    println!("|---|---|---|---|");
    for (g, t) in grid.iter().enumerate() {
        let medians = systems
            .iter()
            .map(|sys| median_where(g, &|s| s == *sys))
            .sum::<f64>()
            / systems.len() as f64;
        println!(
            "| {:.1} µs | {:.2}% | {:.2}% | {:.2}% |",
            t * 1e6,
            100.0 * balanced(g, &|_| true),
            100.0 * medians,
            100.0 * median_where(g, &|_| true)
        );
    }
    let all = best(&|_| true);
    let at_fit = grid.iter().position(|&t| t == 20e-6).unwrap();
    // The preset value stays while it is within a quarter of a point of the grid's best.
    assert!(
        balanced(at_fit, &|_| true) - balanced(all, &|_| true) <= 0.0025,
        "the fit moved: {:.1} µs (mean of the systems' (median + p90)/2 |error| {:.2}% against {:.2}% at 20 µs); update host_op in compute.rs and the docs",
        grid[all] * 1e6,
        100.0 * balanced(all, &|_| true),
        100.0 * balanced(at_fit, &|_| true)
    );
    println!("| held out | MoE rows | fit on the rest | held-out median |error| | at 20 µs |");
    println!("|---|---|---|---|---|");
    for &sys in &systems {
        let g = best(&|s| s != sys);
        let n = moe.iter().filter(|m| m.0 == sys).count();
        println!(
            "| {sys} | {n} | {:.1} µs | {:.1}% | {:.1}% |",
            grid[g] * 1e6,
            100.0 * median_where(g, &|s| s == sys),
            100.0 * median_where(at_fit, &|s| s == sys)
        );
        assert!(
            (10e-6..=30.5e-6).contains(&grid[g]),
            "without {sys} the fit is {:.1} µs",
            grid[g] * 1e6
        );
    }
}

/// The value of flag `--{k}` in a command.
fn flag_value<'a>(args: &'a [String], k: &str) -> &'a str {
    let i = args.iter().position(|a| a == &format!("--{k}")).unwrap();
    &args[i + 1]
}

/// Each row's residual `ln(measured / estimated)` with what groups it (the prediction
/// bands' data, `presets/bands/runs-2025.csv`).
#[test]
fn band_residuals_are_current() {
    let mut rows = Vec::new();
    for (i, r) in runs().iter().enumerate() {
        if r.precision.is_none() {
            continue;
        }
        let args = command(r).unwrap();
        rows.push(astrolabe::band::Residual {
            row: i as u32 + 2,
            gpu: r.gpu.clone(),
            moe: is_moe(r),
            precision: flag_value(&args, "precision").to_string(),
            gpus: r.num_gpus,
            log_ratio: (r.step_time_s / estimate_s(&args)).ln(),
        });
    }
    assert_eq!(rows.len(), 144);
    common::check_band_residuals("runs-2025", &rows);
}

/// (median |error|, 90th percentile |error|) of a group (nearest rank).
fn stats(v: &[f64]) -> (f64, f64) {
    let mut a: Vec<f64> = v.iter().map(|e| e.abs()).collect();
    a.sort_by(f64::total_cmp);
    let n = a.len();
    let med = if n % 2 == 1 {
        a[n / 2]
    } else {
        (a[n / 2 - 1] + a[n / 2]) / 2.0
    };
    let p90 = a[((0.9 * n as f64).ceil() as usize).clamp(1, n) - 1];
    (med, p90)
}

#[test]
fn stats_by_hand() {
    // |errors| 0.01..0.10: median (0.05 + 0.06)/2, 90th percentile the 9th of 10.
    let v: Vec<f64> = (1..=10).map(|i| -(i as f64) / 100.0).collect();
    let (m, p) = stats(&v);
    assert!(
        (m - 0.055).abs() < 1e-12 && (p - 0.09).abs() < 1e-12,
        "{m} {p}"
    );
}

/// Issue 19's first acceptance point, its expressibility half: every row that states its
/// precision is an estimate command that evaluates (144 rows). The per-group errors are
/// printed (docs/validation-modern.md, "Megatron-Bridge 2025–2026").
#[test]
fn every_row_with_a_precision_is_an_estimate_command() {
    let groups = errors_by_group(true);
    let n: usize = groups.values().map(Vec::len).sum();
    assert_eq!(n, 144, "rows estimated");
    println!("\n| group | runs | median |error| | 90th percentile |");
    println!("|---|---|---|---|");
    for (g, v) in &groups {
        let (m, p) = stats(v);
        println!(
            "| {g} | {} | {:.1}% | {:.1}% |",
            v.len(),
            100.0 * m,
            100.0 * p
        );
    }
}

/// The groups that meet issue 19's bounds (median |error| ≤ 7 %, 90th percentile ≤ 15 %)
/// keep meeting them: the dense groups of B200, GB200 and GB300, and GB200 MoE.
#[test]
fn groups_within_issue_19_bounds_stay_there() {
    let groups = errors_by_group(false);
    for g in [
        "B200 MoE",
        "B200 dense",
        "GB200 MoE",
        "GB200 dense",
        "GB300 MoE",
        "GB300 dense",
        "H100 dense",
    ] {
        let (m, p) = stats(&groups[g]);
        assert!(
            m <= 0.07 && p <= 0.15,
            "{g}: median {:.1}%, p90 {:.1}%",
            100.0 * m,
            100.0 * p
        );
    }
}

/// Issue 19's bounds per group (system × dense/MoE): median |error| ≤ 7 % and 90th
/// percentile ≤ 15 %. Not met yet (docs/validation-modern.md gives today's numbers and
/// what is missing); run with `--ignored` to see which groups fail.
#[test]
#[ignore = "issue 19 open: per-group bounds not met yet"]
fn issue_19_group_bounds() {
    let mut fails = Vec::new();
    for (g, v) in errors_by_group(false) {
        let (m, p) = stats(&v);
        if m > 0.07 || p > 0.15 {
            fails.push(format!(
                "{g}: median {:.1}%, p90 {:.1}%",
                100.0 * m,
                100.0 * p
            ));
        }
    }
    assert!(fails.is_empty(), "{fails:#?}");
}

/// Issue 20's acceptance on this set: each pre-training configuration (its newest
/// container's row: the same plan measured again in an older container is superseded)
/// swept with the default grid, the row's model, system, GPUs, batch, sequence, precision
/// and recipe settings fixed (`common::sweep_args_of`); published time / the sweep's best.
#[test]
fn default_sweep_best_vs_published() {
    let rows = runs();
    let mut newest: BTreeMap<String, usize> = BTreeMap::new();
    for (i, r) in rows.iter().enumerate() {
        if r.precision.is_none() || !r.notes.contains("task Pre-Training") {
            continue;
        }
        let args = command(r).unwrap();
        let key = format!(
            "{} {} {} {} {} {}",
            r.gpu,
            r.num_gpus,
            r.model,
            flag_value(&args, "precision"),
            r.seq_len,
            r.global_batch
        );
        let e = newest.entry(key).or_insert(i);
        if container(r) > container(&rows[*e]) {
            *e = i;
        }
    }
    let mut ratios = Vec::new();
    println!("| row | run | published | sweep best | published/best | best plan |");
    println!("|---|---|---|---|---|---|");
    for &i in newest.values() {
        let r = &rows[i];
        let (best, plan) = common::default_sweep_best(&common::sweep_args_of(&command(r).unwrap()))
            .unwrap_or_else(|e| panic!("row {}: {e}", i + 2));
        let ratio = r.step_time_s / best;
        ratios.push(ratio);
        println!(
            "| {} | {} {}×{} {} | {:.3} s | {best:.3} s | {ratio:.3} | {} |",
            i + 2,
            r.model,
            r.num_gpus,
            r.gpu,
            r.precision.as_deref().unwrap_or(""),
            r.step_time_s,
            common::plan_shape(&plan)
        );
    }
    let (median, inside) = common::sweep_ratio_stats(&ratios);
    println!(
        "{} configurations: median {median:.3}, {:.1}% within [0.85, 1.20]",
        ratios.len(),
        100.0 * inside
    );
    // Issue 20 asks for a median in [0.95, 1.10] (met) and 90 % within [0.85, 1.20] (not
    // yet: 85 % is today's floor (34 of 40); docs/validation.md names the rows outside and why).
    assert!((0.95..=1.10).contains(&median), "median {median}");
    assert!(inside >= 0.85, "{inside}");
}
