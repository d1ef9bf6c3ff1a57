//! Helpers shared by the integration tests: run the binary, expect a usage error or a
//! clean success (no NaN, infinity or −0 printed), scratch directories, read its JSON or
//! text, and the GPT-3 175B estimate used as the running example.
#![allow(dead_code)] // each test binary uses its own subset

use assert_cmd::Command;
use predicates::prelude::*;
use predicates::str::contains;
use serde_json::Value;
use std::path::PathBuf;
use std::time::{Duration, Instant};

pub fn bin() -> Command {
    Command::cargo_bin("astrolabe").unwrap()
}

pub fn tmp(name: &str) -> PathBuf {
    let d = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("astrolabe_reg_{name}_{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

pub const SWEEP: [&str; 9] = [
    "sweep",
    "--model",
    "megatron-2021-1.7b",
    "--system",
    "dgx-a100",
    "--gpus",
    "8",
    "--global-batch",
    "16",
];

/// Runs the binary and expects a usage error (exit 2) whose message contains `what`.
#[track_caller]
pub fn usage_error(args: &[&str], what: &str) {
    bin()
        .args(args)
        .assert()
        .code(2)
        .stderr(contains(what))
        .stdout(contains("NaN").not());
}

/// `collective all-reduce --size SIZE --topology TOPOLOGY`.
pub fn all_reduce_on<'a>(size: &'a str, topology: &'a str) -> [&'a str; 6] {
    [
        "collective",
        "all-reduce",
        "--size",
        size,
        "--topology",
        topology,
    ]
}

/// The old code took 10–25 s on these inputs; the guards answer in milliseconds.
#[track_caller]
pub fn assert_quick(start: Instant) {
    assert!(
        start.elapsed() < Duration::from_secs(5),
        "{:?}",
        start.elapsed()
    );
}

/// Runs the binary and returns stdout, asserting success and no NaN/inf/-0 printed.
#[track_caller]
pub fn ok(args: &[&str]) -> String {
    let out = bin()
        .args(args)
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let s = String::from_utf8(out).unwrap();
    for bad in ["NaN", "inf ", "inf\n", "-0 "] {
        assert!(!s.contains(bad), "{args:?} printed '{bad}':\n{s}");
    }
    s
}

/// The arguments of `astrolabe {cmd}` on Llama 3 8B and the DGX H100 preset, followed by
/// `extra`.
pub fn llama8b_args<'a>(cmd: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec![cmd, "--model", "llama3-8b", "--system", "dgx-h100"];
    args.extend_from_slice(extra);
    args
}

/// `astrolabe {cmd}` on Llama 3 8B and 8 H100 (one DGX) at a global batch of 64, the
/// small run several tests share, followed by `extra`; with `--format json`, parsed.
#[track_caller]
pub fn llama8b_on_dgx_h100(cmd: &str, extra: &[&str]) -> Value {
    let mut args = vec!["--gpus", "8", "--global-batch", "64"];
    args.extend_from_slice(extra);
    json(&llama8b_args(cmd, &args))
}

/// Runs with `--format json` (must succeed) and parses the output.
#[track_caller]
pub fn json(args: &[&str]) -> Value {
    let out = bin()
        .args(args)
        .args(["--format", "json"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("json")
}

/// Runs (must succeed) and returns standard output.
#[track_caller]
pub fn text(args: &[&str]) -> String {
    let out = bin().args(args).output().unwrap();
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// Runs and returns standard output when the estimate was computed: exit 0, or 3 (the plan
/// does not fit in memory; its times are still printed).
#[track_caller]
pub fn computed(args: &[&str]) -> String {
    let out = bin().args(args).output().unwrap();
    assert!(
        matches!(out.status.code(), Some(0 | 3)),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// The JSON estimate of `args` (`--format json` added) that computes with exit 0 or 3 (a
/// plan that does not fit is still estimated).
pub fn computed_json(args: &[&str]) -> Value {
    serde_json::from_str(&computed(&[args, &["--format", "json"]].concat())).unwrap()
}

/// GPT-3 175B on 1024 A100s, TP 8, PP 16, global batch 1536 (Narayanan et al. SC'21).
pub const GPT3: [&str; 13] = [
    "estimate",
    "--model",
    "gpt3-175b",
    "--system",
    "dgx-a100",
    "--gpus",
    "1024",
    "--tp",
    "8",
    "--pp",
    "16",
    "--global-batch",
    "1536",
];

/// The `--explain` line containing `needle` for `model` on one DGX H100 with TP 8,
/// sequence 4096, micro-batch 1, BF16 and fused attention, plus `extra` flags (the
/// configuration of the hand-checked kernel tests).
pub fn h100_tp8_explain_line(model: &str, extra: &[&str], needle: &str) -> String {
    let out = bin()
        .args(["estimate", "--model", model, "--system", "dgx-h100"])
        .args(["--gpus", "8", "--tp", "8", "--seq-len", "4096"])
        .args(["--micro-batch", "1", "--global-batch", "1"])
        .args(["--precision", "bf16", "--flash-attention", "--explain"])
        .args(extra)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    line_after(&String::from_utf8(out.stdout).unwrap(), needle, needle)
}

/// The first line of `text` containing `needle` at or after the first line containing
/// `from` (an explain's block of one layer kind starts at its first GEMM line).
#[track_caller]
pub fn line_after(text: &str, from: &str, needle: &str) -> String {
    let mut lines = text.lines().skip_while(|l| !l.contains(from));
    lines
        .find(|l| l.contains(needle))
        .unwrap_or_else(|| panic!("a line with '{needle}' after '{from}'"))
        .to_string()
}

/// The time (in µs) an explain clause starting with `key` ends on: the value after its
/// last `=`, or the whole clause up to the next comma (`fwd 563.7 us`).
pub fn micros(line: &str, key: &str) -> f64 {
    let part = line.split(key).nth(1).expect("clause present");
    let part = part.split(',').next().unwrap();
    let v = part.rsplit('=').next().unwrap().trim();
    let (num, unit) = v.split_once(' ').expect("value with unit");
    let x: f64 = num.parse().expect("a number");
    match unit {
        "us" => x,
        "ms" => x * 1e3,
        "s" => x * 1e6,
        u => panic!("unit {u}"),
    }
}

/// Parses `args` (after `estimate`) with the real command line and builds the plan as
/// `astrolabe estimate` does (today's practice under the flags given: ZeRO-1, SP with
/// TP), then evaluates it through the library: the validation harnesses' one path from a
/// published row's command to its estimate, so a printed command reproduces its number.
pub fn estimate_cli(args: &[String]) -> (astrolabe::estimate::Estimate, astrolabe::parallel::Plan) {
    estimate_cli_with(args, |_| {})
}

/// [`estimate_cli`] with the system changed by `edit` first (a fit's candidate constant).
pub fn estimate_cli_with(
    args: &[String],
    edit: impl FnOnce(&mut astrolabe::system::System),
) -> (astrolabe::estimate::Estimate, astrolabe::parallel::Plan) {
    use astrolabe::cli::{Cli, Command};
    use clap::Parser;
    let argv = ["astrolabe", "estimate"]
        .into_iter()
        .map(String::from)
        .chain(args.iter().cloned());
    let cli = Cli::try_parse_from(argv).unwrap_or_else(|e| panic!("{args:?}: {e}"));
    let Command::Estimate(a) = cli.command else {
        panic!("not an estimate command")
    };
    let (mut sc, ..) =
        astrolabe::cli::estimate::scenario(&a).unwrap_or_else(|e| panic!("{args:?}: {e}"));
    edit(&mut sc.system);
    let e = astrolabe::estimate::evaluate(&sc.model, &sc.system, &sc.plan)
        .unwrap_or_else(|e| panic!("{args:?}: {e}"));
    (e, sc.plan)
}

/// Checks the shipped residuals of public set `set` (`presets/bands/{set}.csv`, read by
/// the prediction bands) against `rows`, as this model computes them today; with
/// `ASTROLABE_BLESS=1` writes them instead.
pub fn check_band_residuals(set: &str, rows: &[astrolabe::band::Residual]) {
    let path = format!("presets/bands/{set}.csv");
    if std::env::var_os("ASTROLABE_BLESS").is_some() {
        let mut w = csv::Writer::from_path(&path).expect("writable presets/bands");
        for r in rows {
            w.serialize(r).unwrap();
        }
        w.flush().unwrap();
        return;
    }
    let text = std::fs::read_to_string(&path).unwrap();
    let shipped = astrolabe::band::parse(&text).unwrap();
    let stale = shipped.len() != rows.len()
        || shipped.iter().zip(rows).any(|(a, b)| {
            (a.row, &a.gpu, a.moe, &a.precision, a.gpus)
                != (b.row, &b.gpu, b.moe, &b.precision, b.gpus)
                || (a.log_ratio - b.log_ratio).abs() > 1e-6
        });
    assert!(
        !stale,
        "{path} is stale (the model's errors on this set changed): rerun this test with ASTROLABE_BLESS=1"
    );
}

/// The `astrolabe sweep` arguments for a published row's estimate command `est`: the same
/// model, system, GPUs, batch, sequence and precision, and the settings that hold for every
/// plan (FP8 recipe as `fp8:current`, EP overlap and dispatch, a practice switch turned
/// off); the plan's structure (TP, PP, CP, EP, ETP, virtual stages, micro-batch, ZeRO,
/// recomputation, FSDP, the pipeline split, activation offload) is left to the default grid.
pub fn sweep_args_of(est: &[String]) -> Vec<String> {
    // The plan's structure and its offload: the sweep chooses them. The optimizer layout is
    // the software's and passes through as a setting.
    const STRUCTURE: [&str; 14] = [
        "tp",
        "pp",
        "cp",
        "ep",
        "etp",
        "virtual-stages",
        "micro-batch",
        "zero",
        "recompute",
        "offload",
        "pipeline-layout",
        "layers-per-stage",
        "first-stage-layers",
        "last-stage-layers",
    ];
    const BARE: [&str; 6] = [
        "fsdp",
        "flash-attention",
        "tp-overlap",
        "sequence-parallel",
        "account-for-embedding",
        "account-for-loss",
    ];
    let mut out: Vec<String> = ["sweep", "--top", "1"].map(String::from).to_vec();
    let mut current = false;
    let mut i = 0;
    while i < est.len() {
        let k = est[i].trim_start_matches("--");
        let value = est.get(i + 1).filter(|v| !v.starts_with("--"));
        i += 1 + usize::from(value.is_some());
        match (k, value) {
            ("fp8-recipe", Some(v)) => current = v == "current",
            (k, None) if BARE.contains(&k) => {}
            (k, _) if STRUCTURE.contains(&k) => {}
            (_, v) => {
                out.push(format!("--{k}"));
                out.extend(v.cloned());
            }
        }
    }
    if current {
        let p = out
            .iter()
            .position(|a| a == "--precision")
            .expect("a precision");
        out[p + 1] = "fp8:current".into();
    }
    out
}

/// The best plan of `astrolabe sweep ARGS` (from [`sweep_args_of`]): its iteration time
/// in seconds and the plan, or why there is none.
pub fn default_sweep_best(args: &[String]) -> Result<(f64, Value), String> {
    let out = bin()
        .args(args)
        .args(["--format", "json"])
        .output()
        .unwrap();
    if !out.status.success() {
        return Err(format!(
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    let v: Value = serde_json::from_slice(&out.stdout).expect("sweep json");
    let best = &v["top"][0];
    match best["iteration_time_s"].as_f64() {
        Some(t) => Ok((t, best["plan"].clone())),
        None => Err(format!("{args:?}: no plan fits")),
    }
}

/// Issue 20's acceptance on `ratios` (published time / default-sweep best, one per
/// configuration): (median, share within [0.85, 1.20]).
pub fn sweep_ratio_stats(ratios: &[f64]) -> (f64, f64) {
    let inside = ratios.iter().filter(|x| (0.85..=1.20).contains(*x)).count();
    (median(ratios), inside as f64 / ratios.len() as f64)
}

/// The median of `v` (the mean of the middle two for an even count).
pub fn median(v: &[f64]) -> f64 {
    let mut r = v.to_vec();
    r.sort_by(f64::total_cmp);
    let n = r.len();
    if n % 2 == 1 {
        r[n / 2]
    } else {
        (r[n / 2 - 1] + r[n / 2]) / 2.0
    }
}

/// A sweep row's plan as one short string: "TP 2 PP 8 VP 4 CP 2 EP 8 ETP 1 mb 1 ZeRO 1".
pub fn plan_shape(p: &Value) -> String {
    let mut s = String::new();
    for (k, name) in [
        ("tp", "TP"),
        ("pp", "PP"),
        ("virtual_stages", "VP"),
        ("cp", "CP"),
        ("ep", "EP"),
        ("etp", "ETP"),
        ("micro_batch", "mb"),
        ("zero", "ZeRO"),
    ] {
        let v = p[k].as_u64().unwrap_or(0);
        let moe = p["ep"].as_u64().unwrap_or(1) > 1;
        let shown = match k {
            "tp" | "pp" | "micro_batch" | "zero" => true,
            "etp" => moe,
            _ => v > 1,
        };
        if shown {
            s.push_str(&format!("{name} {v} "));
        }
    }
    s.push_str(p["recompute"].as_str().unwrap_or(""));
    s
}

/// The plan shape a published row states, as `estimate` arguments: model and system (names
/// or paths), GPUs, TP × PP × CP, sequence length, micro-batch and global batch (the
/// validation harnesses add each framework's switches after it).
pub struct Shape<'a> {
    pub model: &'a str,
    pub system: &'a str,
    pub gpus: u32,
    pub tp: u32,
    pub pp: u32,
    pub cp: u32,
    pub seq_len: u32,
    pub micro_batch: u32,
    pub global_batch: u32,
}

impl Shape<'_> {
    pub fn args(&self) -> Vec<String> {
        let mut a: Vec<String> = ["--model", self.model, "--system", self.system]
            .map(String::from)
            .to_vec();
        for (flag, v) in [
            ("--gpus", self.gpus),
            ("--tp", self.tp),
            ("--pp", self.pp),
            ("--cp", self.cp),
            ("--seq-len", self.seq_len),
            ("--micro-batch", self.micro_batch),
            ("--global-batch", self.global_batch),
        ] {
            a.extend([flag.to_string(), v.to_string()]);
        }
        a
    }
}

/// Every row of the CSV file at `path` (relative to the crate root), deserialized; a missing
/// file or a malformed row fails the test naming it.
#[track_caller]
pub fn csv_rows<T: serde::de::DeserializeOwned>(path: &str) -> Vec<T> {
    csv::Reader::from_path(path)
        .unwrap_or_else(|e| panic!("{path}: {e}"))
        .deserialize()
        .enumerate()
        .map(|(i, r)| r.unwrap_or_else(|e| panic!("{path}, row {}: {e}", i + 2)))
        .collect()
}
