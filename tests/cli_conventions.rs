//! Command-line conventions (issue 14): the output format from `-o`'s extension,
//! nccl-tests size ranges (`--size 8..128M`, `-b/-e/-f`) with an `nranks` column and one
//! unit per column, plain ASCII when piped, completions, the man page and an example in
//! every `--help`.

use crate::common;

use common::{GPT3, bin, json, text};
use serde_json::Value;

#[test]
fn output_format_follows_the_file_extension() {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("astrolabe-o-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join("x.json");
    bin().args(GPT3).arg("-o").arg(&p).assert().success();
    let v: Value = serde_json::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap();
    assert!(v["iteration_time_s"].is_f64());
}

#[test]
fn nccl_tests_size_ranges_and_nranks() {
    let a = json(&[
        "collective",
        "all-reduce",
        "--system",
        "dgx-h100",
        "--nodes",
        "4",
        "--size",
        "8..128M",
    ]);
    let b = json(&[
        "collective",
        "all-reduce",
        "--system",
        "dgx-h100",
        "--nodes",
        "4",
        "-b",
        "8",
        "-e",
        "128M",
        "-f",
        "2",
    ]);
    let rows = a["rows"].as_array().unwrap();
    // 8 B, 16 B, …, 128 MiB = 2^27: 25 sizes.
    assert_eq!(rows.len(), 25);
    assert_eq!(rows[24]["size_bytes"], 134217728.0);
    assert_eq!(a["rows"], b["rows"]);
    assert_eq!(rows[0]["nranks"], 32);
    let t = text(&[
        "collective",
        "all-reduce",
        "--system",
        "dgx-h100",
        "-b",
        "1K",
        "-e",
        "1M",
        "-f",
        "4",
    ]);
    assert!(t.contains("size (B)") && t.contains("time (us)") && t.contains("busbw (GB/s)"));
    assert!(
        t.contains("1048576") && !t.contains('│'),
        "plain ASCII when piped: {t}"
    );
}

#[test]
fn completions_man_page_and_help_examples() {
    for shell in ["bash", "zsh", "fish"] {
        let c = text(&["completions", shell]);
        assert!(
            c.contains("estimate") && c.contains("global-batch"),
            "{shell}"
        );
    }
    assert!(text(&["man"]).contains(".TH astrolabe"));
    for cmd in [
        "estimate",
        "sweep",
        "compare",
        "collective",
        "list",
        "show",
        "astra",
        "export",
        "schema",
        "completions",
        "man",
    ] {
        let h = text(&[cmd, "--help"]);
        assert!(
            h.contains("Examples:\n  astrolabe "),
            "{cmd} --help has no example"
        );
    }
}
