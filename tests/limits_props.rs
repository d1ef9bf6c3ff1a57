//! Property tests of the limits before work (issue 21): generated `export astra` runs
//! under generated limits write everything within the limits or nothing at all; generated
//! `sweep` and `compare` command lines (axes, `--top`, `--columns`, formats, prices such
//! as −0 or `NAME=PRICE`) either fail with an input error or print no NaN, infinity or −0
//! and no table longer than the row limit.
//!
//! CI runs a few cases per property; the long campaign raises them with
//! `PROPTEST_CASES=N` (docs/fuzzing.md).

use astrolabe::cli::{self, Cli};
use clap::Parser;
use proptest::prelude::*;
use std::path::Path;

/// Cases per property: `ci` by default, `PROPTEST_CASES` when set (the long campaign).
fn cases(ci: u32) -> ProptestConfig {
    let n = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(ci);
    ProptestConfig {
        cases: n,
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

/// No NaN, infinity or −0 anywhere in `text` (tokens split at separators).
fn assert_clean(text: &str) {
    for t in text.split(|c: char| c.is_whitespace() || "|,:;()[]{}\"".contains(c)) {
        assert!(
            t != "NaN" && t != "nan" && t != "inf" && t != "-inf",
            "'{t}' in:\n{text}"
        );
        let zero = |r: &str| !r.is_empty() && r.chars().all(|c| c == '.' || c == '0');
        let neg = t.strip_prefix('-').or_else(|| t.strip_prefix('−'));
        assert!(!neg.is_some_and(zero), "'{t}' printed in:\n{text}");
    }
}

/// Lines of the longest table body in a terminal rendering (rows start with '|').
fn longest_table(text: &str) -> usize {
    let mut best = 0;
    let mut run = 0;
    for l in text.lines() {
        if l.starts_with('|') {
            run += 1;
            best = best.max(run);
        } else if !l.starts_with('+') {
            run = 0;
        }
    }
    best
}

/// Runs a command line in-process and renders it as the user asked; an error must be an
/// input error (exit 2).
fn run(args: &[String]) {
    let argv = std::iter::once("astrolabe".to_string()).chain(args.iter().cloned());
    let Ok(c) = Cli::try_parse_from(argv) else {
        return;
    };
    match cli::execute(&c, false) {
        Ok(out) => {
            assert_clean(&out.text);
            // Header (and Markdown's rule) + at most 1,000 rows (the default row limit).
            assert!(longest_table(&out.text) <= 2 + 1000, "{args:?}");
        }
        Err(e) => assert_eq!(e.exit_code(), 2, "{args:?}: {e}"),
    }
}

fn strings(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

/// What an export left in `parent`: (files in `target`, their bytes), `None` when the
/// target does not exist; a temporary directory left behind fails the test.
fn left(parent: &Path, target: &str) -> Option<(u64, u64)> {
    for e in std::fs::read_dir(parent).unwrap() {
        let n = e.unwrap().file_name().to_string_lossy().into_owned();
        assert!(!n.contains("partial"), "left behind: {n}");
    }
    let dir = std::fs::read_dir(parent.join(target)).ok()?;
    let (mut files, mut bytes) = (0, 0);
    for e in dir {
        files += 1;
        bytes += e.unwrap().metadata().unwrap().len();
    }
    Some((files, bytes))
}

proptest! {
    #![proptest_config(cases(6))]

    #[test]
    fn exports_write_within_the_limits_or_nothing(
        tp in prop::sample::select(vec![1u32, 2, 4]), pp in prop::sample::select(vec![1u32, 2, 3]),
        m in 1u32..6, max_bytes in 1_000u64..400_000, max_nodes in 10u64..6_000,
        max_files in 1u64..40, case in any::<u64>(),
    ) {
        let parent = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
            .join(format!("astrolabe_limits_props_{}_{case}", std::process::id()));
        // A fresh directory (shrinking reruns a case with the same name).
        std::fs::remove_dir_all(&parent).ok();
        std::fs::create_dir_all(&parent).unwrap();
        std::fs::write(
            parent.join("tiny.toml"),
            "name = \"tiny\"\n[transformer]\nlayers = 6\nhidden = 256\nheads = 8\nvocab = 1000\nseq_len = 128\n",
        ).unwrap();
        let gpus = 24u32;
        let dp = gpus / (tp * pp);
        let status = assert_cmd::Command::cargo_bin("astrolabe").unwrap()
            .current_dir(&parent)
            .args(["export", "astra", "--out", "o", "--model", "tiny.toml", "--system", "dgx-a100"])
            .args(["--gpus", &gpus.to_string(), "--tp", &tp.to_string(), "--pp", &pp.to_string()])
            .args(["--global-batch", &(dp * m).to_string()])
            .env("ASTROLABE_MAX_WRITE_BYTES", max_bytes.to_string())
            .env("ASTROLABE_MAX_TRACE_NODES", max_nodes.to_string())
            .env("ASTROLABE_MAX_FILES", max_files.to_string())
            .output().unwrap();
        let code = status.status.code();
        let stderr = String::from_utf8_lossy(&status.stderr).into_owned();
        prop_assert!(code == Some(0) || code == Some(2), "{code:?}: {stderr}");
        match left(&parent, "o") {
            None => prop_assert_eq!(code, Some(2), "{}", stderr),
            Some((files, bytes)) => {
                prop_assert_eq!(code, Some(0), "{}", stderr);
                prop_assert!(files <= max_files && bytes <= max_bytes, "{files} files, {bytes} B");
            }
        }
        std::fs::remove_dir_all(&parent).ok();
    }
}

proptest! {
    #![proptest_config(cases(16))]

    #[test]
    fn sweeps_print_clean_capped_tables(
        tp in prop::sample::select(vec!["", "1", "2", "1,2,4", "8", "3"]),
        cp in prop::sample::select(vec!["", "1,2", "2", "4"]),
        top in prop::sample::select(vec!["1", "10", "1500", "0", "9223372036854775807"]),
        columns in prop::sample::select(vec!["", "plan.dp", "dp,plan.cp,variants", "plan.bogus", "iteration_time_s"]),
        format in prop::sample::select(vec!["table", "csv", "json", "markdown"]),
        sort in prop::sample::select(vec!["time", "memory", "cost"]),
    ) {
        let mut args = strings(&[
            "sweep", "--model", "megatron-2021-1.7b", "--system", "dgx-a100", "--gpus", "8",
            "--global-batch", "16", "--top", top, "--format", format, "--sort", sort, "--no-timing",
        ]);
        for (flag, v) in [("--tp", tp), ("--cp", cp), ("--columns", columns)] {
            if !v.is_empty() {
                args.extend(strings(&[flag, v]));
            }
        }
        run(&args);
    }

    #[test]
    fn compares_print_clean_prices(
        price in prop::sample::select(vec!["-0", "0", "2.5", "-1", "nan", "inf", "1e308", "dgx-h100=2", "dgx-b200=-0", "nobody=1", "dgx-h100="]),
        second in prop::sample::select(vec!["", "dgx-b200=4", "3"]),
        tokens in prop::sample::select(vec!["", "300B", "1"]),
        format in prop::sample::select(vec!["table", "csv", "json", "markdown"]),
    ) {
        let mut args = strings(&[
            "compare", "--model", "llama3-8b", "--system", "dgx-h100", "--system", "dgx-b200",
            "--gpus", "8", "--tp", "8", "--format", format,
        ]);
        args.push(format!("--gpu-hour-price={price}"));
        if !second.is_empty() {
            args.push(format!("--gpu-hour-price={second}"));
        }
        if !tokens.is_empty() {
            args.extend(strings(&["--tokens", tokens]));
        }
        run(&args);
    }
}
