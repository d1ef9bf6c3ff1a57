//! AMD Instinct MLPerf Training v5.0/v5.1 results (`tests/data/amd-training.csv`, sources
//! in its header) as a held-out check of the AMD presets, and the residuals the prediction
//! bands take for AMD devices (`presets/bands/amd-mlperf.csv`).
//!
//! The rows typed here are those whose plan one `astrolabe estimate` states: MI325X and
//! MI355X on one node without activation recomputation (Llama 2 70B LoRA, rank 16 on the
//! attention; Llama 3.1 8B pretraining). The MI300X rows recompute 21 of 80 layers, which the
//! model cannot state (recomputation is all or nothing), and are left to the docs' table.

use crate::common;

use serde::Deserialize;

#[derive(Debug, Deserialize)]
struct Row {
    gpu: String,
    num_gpus: u32,
    model: String,
    tp: u32,
    pp: u32,
    cp: u32,
    micro_batch: u32,
    global_batch: u32,
    seq_len: u32,
    step_time_s_derived: f64,
    notes: String,
}

/// The rows and their line numbers in the file (1-based, counting the comment lines).
fn rows() -> Vec<(u32, Row)> {
    let text = std::fs::read_to_string("tests/data/amd-training.csv").unwrap();
    let header = text.lines().position(|l| !l.starts_with('#')).unwrap() as u32;
    let mut r = csv::ReaderBuilder::new()
        .comment(Some(b'#'))
        .from_reader(text.as_bytes());
    r.deserialize()
        .enumerate()
        .map(|(i, row)| (header + 2 + i as u32, row.unwrap()))
        .collect()
}

/// The `estimate` arguments of a row, or `None` when one command cannot state it.
fn command(r: &Row) -> Option<Vec<String>> {
    let system = match r.gpu.as_str() {
        "MI325X" => "mi325x-cluster",
        "MI355X" => "mi355x-cluster",
        _ => return None,
    };
    if r.num_gpus != 8 || r.notes.contains("ACL=21") || r.notes.contains("21 of 80") {
        return None;
    }
    let (model, extra): (&str, &[&str]) = if r.model.contains("70B LoRA") {
        // NeMo's `target_modules: ['attention']`: the QKV projection's adapter (and the
        // output projection's, whose rank-16 GEMMs the model leaves out).
        (
            "llama2-70b",
            &["--lora-rank", "16", "--lora-targets", "qkv"],
        )
    } else if r.model.contains("8B") {
        ("llama3-8b", &[])
    } else {
        return None;
    };
    let mut a = common::Shape {
        model,
        system,
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
            "fp8",
            "--fp8-recipe",
            "delayed",
            "--fp8-params",
        ]
        .map(String::from),
    );
    a.extend(extra.iter().map(|s| s.to_string()));
    Some(a)
}

fn estimate_s(args: &[String]) -> f64 {
    common::estimate_cli(args).0.time.total.get()
}

/// Each typed row's error; the AMD presets' efficiencies are assumptions, not fits, so this
/// bounds how far they may drift: every row within 20 % of the published step, and the
/// median |error| of each GPU within 15 % (measured 2026-11-27: MI325X +4.5 % median, 8.4 %
/// max; MI355X +11.0 % median, 13.3 % max).
#[test]
fn amd_mlperf_rows_within_bounds() {
    let mut by_gpu: std::collections::BTreeMap<String, Vec<f64>> = Default::default();
    for (line, r) in rows() {
        let Some(args) = command(&r) else { continue };
        let err = estimate_s(&args) / r.step_time_s_derived - 1.0;
        println!(
            "| {line} | {} {} | {:.3} s | {:+.1}% |",
            r.gpu,
            r.model,
            r.step_time_s_derived,
            100.0 * err
        );
        assert!(err.abs() < 0.20, "line {line}: {err:+.3} ({args:?})");
        by_gpu.entry(r.gpu.clone()).or_default().push(err.abs());
    }
    assert_eq!(by_gpu["MI325X"].len(), 11);
    assert_eq!(by_gpu["MI355X"].len(), 8);
    for (gpu, e) in by_gpu {
        let med = common::median(&e);
        assert!(med < 0.15, "{gpu}: median |error| {med:.3}");
    }
}

/// Each typed row's residual `ln(measured / estimated)`: the prediction bands' data for AMD
/// devices (`presets/bands/amd-mlperf.csv`).
#[test]
fn band_residuals_are_current() {
    let mut out = Vec::new();
    for (line, r) in rows() {
        let Some(args) = command(&r) else { continue };
        out.push(astrolabe::band::Residual {
            row: line,
            gpu: r.gpu.clone(),
            moe: false,
            precision: "fp8".to_string(),
            gpus: r.num_gpus,
            log_ratio: (r.step_time_s_derived / estimate_s(&args)).ln(),
        });
    }
    assert_eq!(out.len(), 19);
    common::check_band_residuals("amd-mlperf", &out);
}
