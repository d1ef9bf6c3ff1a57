//! Helpers shared by the end-to-end tests of the output contract: run the binary, read
//! its JSON or text, and the GPT-3 175B estimate used as the running example.

use assert_cmd::Command;
use serde_json::Value;

/// The built binary.
pub fn bin() -> Command {
    Command::cargo_bin("astrolabe").expect("binary built")
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
