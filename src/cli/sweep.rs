//! `astrolabe sweep`: flags, assembling the grid from flags and a sweep file, running it,
//! and the optional `--all` stream and `--plot`.

use super::OutputArgs;
use crate::catalog;
use crate::error::{Error, Result};
use crate::estimate::report::EXIT_DOES_NOT_FIT;
use crate::report::sweep::SweepResult;
use crate::report::{Data, Report};
use crate::sweep::driver::{Outcome, RunOptions};
use crate::sweep::file::{self, SweepFile};
use crate::sweep::grid::{self, Axes, Grid};
use crate::sweep::objective::Objective;
use crate::sweep::search::{self, Hit, SearchOptions};
use crate::sweep::{all, report};
use crate::units::parse_bandwidth;
use clap::Args;
use std::io::IsTerminal;
use std::path::PathBuf;

/// Flags of `astrolabe sweep`. Lists are comma-separated (`--tp 2,4,8`); an axis not given
/// takes its default list (see `Axes::default_for`).
#[derive(Debug, Args)]
pub struct SweepArgs {
    /// Model name (see `astrolabe list`) or path to a model TOML.
    #[arg(long)]
    pub model: Option<String>,
    /// System name or path to a system TOML.
    #[arg(long)]
    pub system: Option<String>,
    /// Device counts to search (comma-separated).
    #[arg(long, value_delimiter = ',')]
    pub gpus: Vec<u32>,
    /// Global batch in sequences.
    #[arg(long)]
    pub global_batch: Option<u32>,
    /// A sweep file (TOML); flags override its fields.
    #[arg(long)]
    pub scenario: Option<PathBuf>,
    /// How many ranked plans to print (at most 100,000 when the grid has more configurations;
    /// ASTROLABE_MAX_TOP raises it).
    #[arg(long)]
    pub top: Option<usize>,
    /// Rank by: time, tokens, mfu, memory, headroom, cost.
    #[arg(long)]
    pub sort: Option<String>,
    /// The two objectives of the Pareto front, e.g. "time,memory".
    #[arg(long)]
    pub pareto: Option<String>,
    /// Tensor-parallel degrees.
    #[arg(long, value_delimiter = ',')]
    pub tp: Vec<u32>,
    /// Pipeline degrees.
    #[arg(long, value_delimiter = ',')]
    pub pp: Vec<u32>,
    /// Expert-parallel degrees.
    #[arg(long, value_delimiter = ',')]
    pub ep: Vec<u32>,
    /// Micro-batch sizes.
    #[arg(long, value_delimiter = ',')]
    pub micro_batch: Vec<u32>,
    /// Pipeline schedules: gpipe, 1f1b, interleaved:V, interleaved:all (every V that splits
    /// the stages into equal chunks, as Megatron-core requires; the default list is gpipe,
    /// 1f1b, interleaved:all), dualpipe.
    #[arg(long, value_delimiter = ',')]
    pub schedule: Vec<String>,
    /// ZeRO stages (0–3).
    #[arg(long, value_delimiter = ',')]
    pub zero: Vec<u8>,
    /// How ZeRO-3 runs in the plans with --zero 3: fsdp (default) or deepspeed-2021 (see `estimate --help`).
    #[arg(long, value_name = "IMPL")]
    pub zero3_impl: Option<String>,
    /// Recomputation modes: none, selective, full.
    #[arg(long, value_delimiter = ',')]
    pub recompute: Vec<String>,
    /// Sequence parallel values, e.g. true,false (default: true, today's practice).
    #[arg(long, value_delimiter = ',', value_name = "BOOLS", num_args = 0..=1, default_missing_value = "true")]
    pub sequence_parallel: Vec<bool>,
    /// DP overlap values (default: true, today's practice).
    #[arg(long, value_delimiter = ',', value_name = "BOOLS", num_args = 0..=1, default_missing_value = "true")]
    pub dp_overlap: Vec<bool>,
    /// TP overlap values (default: true, today's practice).
    #[arg(long, value_delimiter = ',', value_name = "BOOLS", num_args = 0..=1, default_missing_value = "true")]
    pub tp_overlap: Vec<bool>,
    /// Backward TP collectives beside the other GEMM in every plan (default: true; false: 2021 Megatron-LM, see `estimate --help`).
    #[arg(long, value_name = "BOOL", num_args = 0..=1, default_missing_value = "true")]
    pub tp_bwd_overlap: Option<bool>,
    /// MoE all-to-alls beside another micro-batch's compute in every plan (default: false; see `estimate --help`).
    #[arg(long, value_name = "BOOL", num_args = 0..=1, default_missing_value = "true")]
    pub ep_overlap: Option<bool>,
    /// Shared experts beside their micro-batch's all-to-alls in every plan (default: false; see `estimate --help`).
    #[arg(long, value_name = "BOOL", num_args = 0..=1, default_missing_value = "true")]
    pub shared_expert_overlap: Option<bool>,
    /// MoE token dispatch in every plan: alltoall or hierarchical (see `estimate --help`).
    #[arg(long, value_name = "KIND")]
    pub ep_dispatch: Option<String>,
    /// Local experts' GEMMs in every plan: streams or fused (see `estimate --help`).
    #[arg(long, value_name = "KIND")]
    pub grouped_gemm: Option<String>,
    /// Loss kernels in every plan: unfused or te (see `estimate --help`).
    #[arg(long, value_name = "KIND")]
    pub cross_entropy: Option<String>,
    /// Fused-attention kernel in every plan: te or fa2 (see `estimate --help`).
    #[arg(long, value_name = "KIND")]
    pub attention_kernel: Option<String>,
    /// Optimizer layout in every plan: adam, adam-fp32-grads, adam-bf16-moments or
    /// adam-bf16-state (see `estimate --help`; default adam).
    #[arg(long, value_name = "LAYOUT")]
    pub optimizer: Option<String>,
    /// Weights only in the 8- or 4-bit format in every low-precision plan (see `estimate --help`).
    #[arg(long)]
    pub fp8_params: bool,
    /// 8-bit fused attention in every low-precision plan with flash attention (see `estimate --help`).
    #[arg(long)]
    pub fp8_attention: bool,
    /// Layer parts captured as CUDA graphs in every plan: none, full or scope names (see `estimate --help`).
    #[arg(long, value_name = "SCOPES")]
    pub cuda_graphs: Option<String>,
    /// Submodules recomputed in every plan without full recomputation: none or a comma list of layernorm, mla_up_proj, moe_act, mlp, moe, shared_experts, core_attn (see `estimate --help`).
    #[arg(long, value_name = "LIST")]
    pub recompute_modules: Option<String>,
    /// Memory set aside per device in every plan, e.g. 4GiB (default: the device's, 1.5 GiB + 3% of HBM; see `estimate --help`).
    #[arg(long)]
    pub memory_reserve: Option<String>,
    /// Group orders: tp-dp-pp, tp-pp-dp.
    #[arg(long, value_delimiter = ',')]
    pub order: Vec<String>,
    /// Offload plans as an axis, comma-separated, items of one plan joined by '+': none, optimizer, zero-offload, zero-infinity, optimizer+activations, … (default: none; docs/offload.md).
    #[arg(long, value_delimiter = ',', value_name = "PLANS")]
    pub offload: Vec<String>,
    /// Flash attention values (default: true, today's practice).
    #[arg(long, value_delimiter = ',', value_name = "BOOLS", num_args = 0..=1, default_missing_value = "true")]
    pub flash_attention: Vec<bool>,
    /// Count the embedding and the loss as pipeline layers (uneven first/last stages, Megatron-LM's account_for_{embedding,loss}_in_pipeline_split), e.g. true,false (default: both, for plans with pipeline stages).
    #[arg(long, value_delimiter = ',', value_name = "BOOLS", num_args = 0..=1, default_missing_value = "true")]
    pub account_for_ends: Vec<bool>,
    /// Context-parallel degrees.
    #[arg(long, value_delimiter = ',')]
    pub cp: Vec<u32>,
    /// Context-parallel kinds: ring, a2a.
    #[arg(long, value_delimiter = ',')]
    pub cp_kind: Vec<String>,
    /// Sequence lengths (default: the model's).
    #[arg(long, value_delimiter = ',')]
    pub seq_len: Vec<u32>,
    /// Precisions: bf16, fp16, fp8, fp8:current, fp8:block, mxfp8, nvfp4.
    #[arg(long, value_delimiter = ',')]
    pub precision: Vec<String>,
    /// Expert tensor-parallel degrees (MoE; each must divide tp; default etp = tp).
    #[arg(long, value_delimiter = ',')]
    pub etp: Vec<u32>,
    /// A network to compare, `NAME=TOPOLOGY` (repeatable), replacing the system's network.
    #[arg(long = "network")]
    pub networks: Vec<String>,
    /// A built-in set of networks to compare: `wafer-vs-conventional` (512 NPUs,
    /// ASTRA-sim 2.0 case study 1).
    #[arg(long)]
    pub network_grid: Option<String>,
    /// Split this per-NPU bandwidth across the network's dimensions optimally for the best
    /// plan (B_d ∝ √traffic_d), e.g. "600GB/s".
    #[arg(long)]
    pub bandwidth_budget: Option<String>,
    /// Hardware axis: one network dimension's bandwidths, `DIM=LIST`, e.g.
    /// `1=25GB/s,50GB/s,100GB/s` (repeatable, one per dimension).
    #[arg(long = "hw-bandwidth", value_name = "DIM=LIST")]
    pub hw_bandwidth: Vec<String>,
    /// Hardware axis: one network dimension's latencies, `DIM=LIST`, e.g. `1=5us,10us`.
    #[arg(long = "hw-latency", value_name = "DIM=LIST")]
    pub hw_latency: Vec<String>,
    /// Hardware axis: HBM capacities, e.g. 40GiB,80GiB.
    #[arg(long = "hw-hbm", value_delimiter = ',')]
    pub hw_hbm: Vec<String>,
    /// Hardware axis: bf16 matrix peaks (every precision scaled alike), e.g. 312TFLOP/s,624TFLOP/s.
    #[arg(long = "hw-peak", value_delimiter = ',')]
    pub hw_peak: Vec<String>,
    /// Hardware axis: devices per node (innermost dimension), e.g. 4,8,16.
    #[arg(long = "hw-gpus-per-node", value_delimiter = ',')]
    pub hw_gpus_per_node: Vec<u32>,
    /// Refuse grids with more configurations than this.
    #[arg(long)]
    pub max_configs: Option<u64>,
    /// Stream every evaluated configuration to FILE (.csv, or .json / .jsonl for JSON lines).
    #[arg(long, value_name = "FILE")]
    pub all: Option<PathBuf>,
    /// Draw the Pareto front and the top plans to an SVG file.
    #[arg(long, value_name = "FILE.svg")]
    pub plot: Option<PathBuf>,
    /// Evaluate on one thread (for checking determinism and timing).
    #[arg(long)]
    pub sequential: bool,
    /// Output format and file.
    #[command(flatten)]
    pub out: OutputArgs,
}

/// Hot-loop configurations from which a sweep shows a progress bar (on a terminal only):
/// about half a second of work.
const PROGRESS_FROM: u64 = 500_000;

/// Grids larger than this need `--max-configs`.
pub const DEFAULT_MAX_CONFIGS: u64 = 200_000_000;

/// Runs `astrolabe sweep`.
pub fn run(args: &SweepArgs) -> Result<Report> {
    let f = match &args.scenario {
        Some(p) => {
            let text = crate::limits::read_text(p)?;
            catalog::parse_toml::<SweepFile>(&text, p)?
        }
        None => SweepFile::default(),
    };
    let model_name = args.model.clone().or(f.model.clone()).ok_or_else(|| {
        Error::input(
            "--model",
            "required (a built-in name such as gpt3-175b, or a file)",
        )
    })?;
    let system_name = args.system.clone().or(f.system.clone()).ok_or_else(|| {
        Error::input(
            "--system",
            "required (a built-in name such as dgx-a100, or a file)",
        )
    })?;
    let model = catalog::model(&model_name)?;
    let system = catalog::system(&system_name)?;
    let global_batch = args.global_batch.or(f.global_batch).ok_or_else(|| {
        Error::input(
            "--global-batch",
            "required: the global batch in sequences, e.g. 1536",
        )
    })?;
    let axes = build_axes(args, &f, &system)?;
    let sort = Objective::parse(args.sort.as_deref().or(f.sort.as_deref()).unwrap_or("time"))?;
    let pareto = Objective::parse_pair(
        args.pareto
            .as_deref()
            .or(f.pareto.as_deref())
            .unwrap_or("time,memory"),
    )?;
    let top = args.top.or(f.top).unwrap_or(10);
    if top == 0 {
        return Err(Error::input("--top", "must be at least 1 plan"));
    }
    if global_batch == 0 {
        return Err(Error::input(
            "--global-batch",
            "must be at least 1 sequence, e.g. 1536",
        ));
    }
    check_outputs(args)?;
    let limit = args
        .max_configs
        .or(f.max_configs)
        .unwrap_or(DEFAULT_MAX_CONFIGS);
    // Counted before anything is built, so an exploding grid is refused at once.
    let total = grid::count_configs(&model, &axes);
    if total > limit {
        return Err(Error::input(
            "--max-configs",
            format!(
                "the grid has {total} configurations, more than the limit {limit}; pin some axes or pass --max-configs {total}"
            ),
        ));
    }
    let grid = Grid::build(&model, &system, global_batch, axes)?;
    // The ranking holds at most one plan per configuration of the grid.
    let top = top
        .min(usize::try_from(grid.hot_len()).unwrap_or(usize::MAX))
        .max(1);
    crate::limits::TOP_PLANS.check(top as u64, "--top")?;
    let opts = SearchOptions {
        sort,
        pareto,
        run: RunOptions {
            top_k: top,
            pareto_cap: 256,
            parallel: !args.sequential,
            progress: grid.hot_len() > PROGRESS_FROM && std::io::stderr().is_terminal(),
        },
    };
    let result = match &args.all {
        Some(path) => {
            crate::limits::ALL_ROWS.check(grid.hot_len(), "--all")?;
            let mut w = all::Writer::create(path, &grid)?;
            let res = {
                let mut sink = |i: u64, o: &Outcome<Hit>| w.row(&grid, i, o);
                search::search(&model, &grid, &opts, Some(&mut sink))
            };
            w.finish()?;
            res
        }
        None => search::search(&model, &grid, &opts, None),
    };
    let budget = args
        .bandwidth_budget
        .as_deref()
        .or(f.bandwidth_budget.as_deref())
        .map(|b| parse_bandwidth("--bandwidth-budget", b))
        .transpose()?;
    let mut rep = report::build(
        &model,
        &grid,
        global_batch,
        &opts,
        &result,
        budget,
        !args.out.no_timing,
    )?;
    let Some(Data::Sweep(v)) = &mut rep.data else {
        return Err(Error::Internal("sweep report without its value".into()));
    };
    if grid.structural.is_empty() && grid.axes.networks.is_empty() {
        let g = grid.axes.gpus.iter().copied().max().unwrap_or(1);
        let near = grid::nearest_valid_gpus(&model, &system, global_batch, &grid.axes, g);
        v.notes.push(match near {
            Some(n) => format!(
                "no plan uses exactly {g} devices with a global batch of {global_batch}; the nearest smaller count with valid plans is {n} (try --gpus {n})"
            ),
            None => format!("no plan is valid for {g} devices with a global batch of {global_batch}"),
        });
    }
    if let Some(p) = &args.plot {
        crate::plot::write_svg(p, &report::plot(&grid, &opts, &result)?)?;
        v.notes.push(format!("plot written to {}", p.display()));
    }
    if v.valid == 0 {
        let (code, msg) = nothing_valid(v);
        v.notes.push(msg.clone());
        rep.exit_code = code;
        rep.failure = Some(msg);
    }
    report::views(&mut rep)?;
    Ok(rep)
}

/// Flags override the file; an axis given in neither takes its default list.
fn build_axes(a: &SweepArgs, f: &SweepFile, system: &crate::system::System) -> Result<Axes> {
    let gpus = pick(&a.gpus, &f.gpus).unwrap_or_else(|| vec![system.gpus() as u32]);
    let mut ax = Axes::default_for(gpus[0]);
    ax.gpus = gpus;
    let fa = &f.axes;
    ax.tp = pick(&a.tp, &fa.tp).unwrap_or_default();
    ax.pp = pick(&a.pp, &fa.pp).unwrap_or_default();
    ax.ep = pick(&a.ep, &fa.ep).unwrap_or_default();
    if let Some(v) = pick(&a.micro_batch, &fa.micro_batch) {
        ax.micro_batch = v;
    }
    if let Some(v) = pick(&a.schedule, &fa.schedule) {
        ax.schedules = v
            .iter()
            .map(|s| file::parse_schedule(s))
            .collect::<Result<_>>()?;
    }
    if let Some(v) = pick(&a.zero, &fa.zero) {
        ax.zero = v;
    }
    if let Some(v) = pick(&a.recompute, &fa.recompute) {
        ax.recompute = v
            .iter()
            .map(|s| file::parse_recompute(s))
            .collect::<Result<_>>()?;
    }
    if let Some(v) = pick(&a.order, &fa.order) {
        ax.order = v
            .iter()
            .map(|s| file::parse_order(s))
            .collect::<Result<_>>()?;
    }
    for (dst, flag, key) in [
        (&mut ax.sp, &a.sequence_parallel, &fa.sequence_parallel),
        (&mut ax.dp_overlap, &a.dp_overlap, &fa.dp_overlap),
        (&mut ax.tp_overlap, &a.tp_overlap, &fa.tp_overlap),
        (&mut ax.flash, &a.flash_attention, &fa.flash_attention),
        (&mut ax.ends, &a.account_for_ends, &fa.account_for_ends),
    ] {
        if let Some(v) = pick(flag, key) {
            *dst = v;
        }
    }
    extra_axes(a, fa, &mut ax)?;
    if let Some(v) = pick(&a.offload, &fa.offload) {
        ax.offload = v
            .iter()
            .map(|s| crate::offload::Offload::parse(s, "--offload"))
            .collect::<Result<_>>()?;
    }
    if let Some(z) = ax.zero.iter().find(|&&z| z > 3) {
        return Err(Error::input(
            "--zero",
            format!("stage {z} does not exist; expected 0–3"),
        ));
    }
    ax.networks = networks(a, f)?;
    ax.hardware = hardware(a)?;
    if let Some(b) = a.tp_bwd_overlap.or(fa.tp_bwd_overlap) {
        ax.tp_bwd_overlap = b;
    }
    if let Some(b) = a.ep_overlap.or(fa.ep_overlap) {
        ax.ep_overlap = b;
    }
    if let Some(b) = a.shared_expert_overlap.or(fa.shared_expert_overlap) {
        ax.shared_expert_overlap = b;
    }
    if let Some(s) = a.memory_reserve.as_ref().or(fa.memory_reserve.as_ref()) {
        ax.memory_reserve = Some(crate::units::parse_bytes("--memory-reserve", s)?);
    }
    if let Some(s) = a.ep_dispatch.as_ref().or(fa.ep_dispatch.as_ref()) {
        ax.ep_dispatch =
            crate::cli::plan_flags::parse_enum("--ep-dispatch", s, &["alltoall", "hierarchical"])?;
    }
    if let Some(s) = a.grouped_gemm.as_ref().or(fa.grouped_gemm.as_ref()) {
        ax.grouped_gemm =
            crate::cli::plan_flags::parse_enum("--grouped-gemm", s, &["streams", "fused"])?;
    }
    if let Some(s) = a.cross_entropy.as_ref().or(fa.cross_entropy.as_ref()) {
        ax.cross_entropy =
            crate::cli::plan_flags::parse_enum("--cross-entropy", s, &["unfused", "te"])?;
    }
    if let Some(s) = a.attention_kernel.as_ref().or(fa.attention_kernel.as_ref()) {
        ax.attention_kernel =
            crate::cli::plan_flags::parse_enum("--attention-kernel", s, &["te", "fa2"])?;
    }
    if let Some(s) = a.optimizer.as_ref().or(fa.optimizer.as_ref()) {
        ax.optimizer = crate::cli::plan_flags::parse_optimizer(s)?;
    }
    ax.fp8_params = a.fp8_params || fa.fp8_params.unwrap_or(false);
    ax.fp8_attention = a.fp8_attention || fa.fp8_attention.unwrap_or(false);
    let graphs_from = [
        ("--cuda-graphs", &a.cuda_graphs),
        ("cuda_graphs", &fa.cuda_graphs),
    ];
    if let Some((what, Some(g))) = graphs_from.into_iter().find(|(_, v)| v.is_some()) {
        ax.cuda_graphs = crate::parallel::CudaGraphs::parse(g)
            .map_err(|e| crate::error::Error::input(what, e))?;
    }
    let modules_from = [
        ("--recompute-modules", &a.recompute_modules),
        ("recompute_modules", &fa.recompute_modules),
    ];
    if let Some((what, Some(g))) = modules_from.into_iter().find(|(_, v)| v.is_some()) {
        ax.recompute_modules = crate::parallel::RecomputeModules::parse(g)
            .map_err(|e| crate::error::Error::input(what, e))?;
    }
    let impl_from = [
        ("--zero3-impl", &a.zero3_impl),
        ("zero3_impl", &fa.zero3_impl),
    ];
    if let Some((what, Some(z))) = impl_from.into_iter().find(|(_, v)| v.is_some()) {
        ax.zero3_impl = crate::cli::plan_flags::parse_enum(what, z, &["fsdp", "deepspeed-2021"])?;
    }
    if !ax.networks.is_empty() && a.gpus.is_empty() && f.gpus.is_none() {
        ax.gpus = vec![ax.networks[0].1.npus() as u32];
    }
    check_nonempty(&ax)?;
    check_counts(&[
        ("--gpus", &ax.gpus),
        ("--tp", &ax.tp),
        ("--pp", &ax.pp),
        ("--ep", &ax.ep),
        ("--micro-batch", &ax.micro_batch),
    ])?;
    Ok(ax)
}

/// The CP, sequence-length and precision axes.
fn extra_axes(a: &SweepArgs, fa: &file::AxesFile, ax: &mut Axes) -> Result<()> {
    if let Some(v) = pick(&a.seq_len, &fa.seq_len) {
        ax.seq_len = v;
    }
    if let Some(v) = pick(&a.etp, &fa.etp) {
        ax.etp = v;
    }
    let kinds = match pick(&a.cp_kind, &fa.cp_kind) {
        Some(v) => Some(
            v.iter()
                .map(|s| file::parse_cp_kind(s))
                .collect::<Result<Vec<_>>>()?,
        ),
        None => None,
    };
    match (pick(&a.cp, &fa.cp), kinds) {
        // No CP axis given: the grid's default (CP for sequences of 8,192 tokens and more).
        (None, None) => {}
        (None, Some(_)) => {
            return Err(Error::input(
                "--cp-kind",
                "needs the CP degrees to sweep (--cp 1,2,4 or `cp` in the sweep file)",
            ));
        }
        (Some(cps), kinds) => {
            let kinds = kinds.unwrap_or_else(|| vec![crate::parallel::CpKind::Ring]);
            // CP 1 has no kind: list it once.
            ax.cp = cps
                .iter()
                .flat_map(|&c| kinds.iter().map(move |&k| (c, k)))
                .filter(|&(c, k)| c > 1 || k == kinds[0])
                .collect();
        }
    }
    if let Some(v) = pick(&a.precision, &fa.precision) {
        ax.precision = v
            .iter()
            .map(|s| file::parse_precision(s))
            .collect::<Result<_>>()?;
    }
    Ok(())
}

/// `--all`, `--plot` and `-o` must name different files, or one would overwrite another.
fn check_outputs(args: &SweepArgs) -> Result<()> {
    let outs = [
        ("--all", args.all.as_deref()),
        ("--plot", args.plot.as_deref()),
        ("--output", args.out.output.as_deref()),
    ];
    for (i, (fa, a)) in outs.iter().enumerate() {
        for (fb, b) in &outs[i + 1..] {
            if let (Some(a), Some(b)) = (a, b)
                && same_file(a, b)
            {
                return Err(Error::input(
                    *fb,
                    format!(
                        "'{}' is also given to {fa}; one would overwrite the other, give two files",
                        b.display()
                    ),
                ));
            }
        }
    }
    Ok(())
}

/// The hardware axes of the `--hw-*` flags.
fn hardware(a: &SweepArgs) -> Result<crate::sweep::hardware::HardwareAxes> {
    use crate::units::{parse_bytes, parse_flop_rate, parse_seconds};
    fn per_dim<T>(
        flag: &str,
        items: &[String],
        parse: impl Fn(&str) -> Result<T>,
    ) -> Result<Vec<(usize, Vec<T>)>> {
        items
            .iter()
            .map(|s| {
                let (d, list) = s.split_once('=').ok_or_else(|| {
                    Error::input(
                        flag,
                        format!("'{s}': expected DIM=LIST, e.g. 1=25GB/s,50GB/s"),
                    )
                })?;
                let d = d.trim().parse::<usize>().map_err(|_| {
                    Error::input(flag, format!("'{d}' is not a dimension index (0, 1, …)"))
                })?;
                Ok((
                    d,
                    list.split(',')
                        .map(|v| parse(v.trim()))
                        .collect::<Result<Vec<_>>>()?,
                ))
            })
            .collect()
    }
    Ok(crate::sweep::hardware::HardwareAxes {
        bandwidth: per_dim("--hw-bandwidth", &a.hw_bandwidth, |v| {
            parse_bandwidth("--hw-bandwidth", v)
        })?,
        latency: per_dim("--hw-latency", &a.hw_latency, |v| {
            parse_seconds("--hw-latency", v)
        })?,
        hbm: a
            .hw_hbm
            .iter()
            .map(|v| parse_bytes("--hw-hbm", v))
            .collect::<Result<_>>()?,
        peak: a
            .hw_peak
            .iter()
            .map(|v| parse_flop_rate("--hw-peak", v))
            .collect::<Result<_>>()?,
        gpus_per_node: a.hw_gpus_per_node.clone(),
    })
}

/// Whether two paths name the same file (the same text, or the same file once resolved).
fn same_file(a: &std::path::Path, b: &std::path::Path) -> bool {
    if a == b {
        return true;
    }
    let resolve = |p: &std::path::Path| {
        let dir = p.parent().filter(|d| !d.as_os_str().is_empty());
        let dir = std::fs::canonicalize(dir.unwrap_or(std::path::Path::new("."))).ok()?;
        Some(dir.join(p.file_name()?))
    };
    matches!((resolve(a), resolve(b)), (Some(x), Some(y)) if x == y)
}

/// Degrees, device counts and micro-batch sizes are whole numbers ≥ 1.
fn check_counts(flags: &[(&str, &[u32])]) -> Result<()> {
    for (flag, v) in flags {
        if v.contains(&0) {
            return Err(Error::input(
                *flag,
                "0 is not allowed; every value must be a whole number ≥ 1",
            ));
        }
    }
    Ok(())
}

/// The exit status and message of a sweep where no configuration is valid and fits:
/// 3 when some plans were valid but none fits in memory, else 2 (the grid admits no plan).
/// The message names the constraint that dropped the most configurations.
fn nothing_valid(v: &SweepResult) -> (u8, String) {
    let memory = v
        .drops
        .iter()
        .any(|d| d.reason.contains("memory") && d.count > 0);
    let code = if memory { EXIT_DOES_NOT_FIT } else { 2 };
    match v.main_drop() {
        Some(d) => (
            code,
            format!(
                "no configuration is valid and fits{}: the constraint that dropped the most was '{}' ({} of {} configurations)",
                if memory {
                    " (the valid plans do not fit in device memory)"
                } else {
                    ""
                },
                d.reason,
                d.count,
                v.configurations
            ),
        ),
        None => (
            code,
            "no configuration is valid and fits: the grid is empty".into(),
        ),
    }
}

fn pick<T: Clone>(flag: &[T], file: &Option<Vec<T>>) -> Option<Vec<T>> {
    if !flag.is_empty() {
        Some(flag.to_vec())
    } else {
        file.clone()
    }
}

fn networks(a: &SweepArgs, f: &SweepFile) -> Result<Vec<(String, crate::network::Topology)>> {
    let mut out = Vec::new();
    if let Some(g) = &a.network_grid {
        out.extend(crate::sweep::networks::builtin(g)?);
    }
    for n in &a.networks {
        out.push(file::parse_network(n).map_err(|e| e.context("--network"))?);
    }
    for (i, n) in f.networks.iter().enumerate() {
        let t = crate::network::Topology::parse(&n.topology)
            .map_err(|e| e.context(format!("networks[{i}] '{}'", n.name)))?;
        out.push((n.name.clone(), t));
    }
    Ok(out)
}

fn check_nonempty(ax: &Axes) -> Result<()> {
    let lens = [
        ("micro_batch", ax.micro_batch.len()),
        ("schedule", ax.schedules.len()),
        ("zero", ax.zero.len()),
        ("recompute", ax.recompute.len()),
        ("sequence_parallel", ax.sp.len()),
        ("dp_overlap", ax.dp_overlap.len()),
        ("tp_overlap", ax.tp_overlap.len()),
        ("order", ax.order.len()),
        ("flash_attention", ax.flash.len()),
        ("account_for_ends", ax.ends.len()),
        ("offload", ax.offload.len()),
        ("precision", ax.precision.len()),
    ];
    match lens.iter().find(|(_, n)| *n == 0) {
        Some((k, _)) => Err(Error::input(
            *k,
            "the list is empty; give at least one value",
        )),
        None => Ok(()),
    }
}
