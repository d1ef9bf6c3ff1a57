//! `astrolabe collective` end to end: the README examples, every output format, bad input
//! (one line on stderr, exit code 2, what was expected), TOML network files and the
//! built-in systems.

use assert_cmd::Command;
use predicates::prelude::*;
use std::io::Write;

fn cmd() -> Command {
    Command::cargo_bin("astrolabe").unwrap()
}

const RING8: &str = "ring(8, 100GB/s, 500ns)";

/// Runs a failing command and checks: exit 2, one line on stderr, containing `words`.
#[track_caller]
fn fails(args: &[&str], words: &[&str]) {
    let out = cmd().args(args).output().unwrap();
    assert_eq!(out.status.code(), Some(2), "{args:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        err.trim_end().lines().count(),
        1,
        "{args:?}: not one line:\n{err}"
    );
    for w in words {
        assert!(err.contains(w), "{args:?}: '{err}' lacks '{w}'");
    }
}

#[test]
fn collective_acceptance_table() {
    cmd()
        .args([
            "collective",
            "all-reduce",
            "--size",
            "1GB",
            "--topology",
            RING8,
        ])
        .assert()
        .success()
        .stdout(predicate::str::contains("17507.00"))
        .stdout(predicate::str::contains("busbw (GB/s)"))
        .stdout(predicate::str::contains("99.96"))
        .stdout(predicate::str::contains("ring"));
}

#[test]
fn collective_acceptance_json_carries_si_values() {
    let out = cmd()
        .args([
            "collective",
            "all-reduce",
            "--size",
            "1GB",
            "--topology",
            RING8,
            "--format",
            "json",
        ])
        .output()
        .unwrap();
    assert!(out.status.success());
    let j: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let row = &j["rows"][0];
    let t = row["time_s"].as_f64().unwrap();
    approx::assert_relative_eq!(
        t,
        2.0 * 7.0 * 500e-9 + 2.0 * 7.0 / 8.0 * 1e9 / 1e11,
        max_relative = 1e-12
    );
    let bus = row["busbw_bytes_per_s"].as_f64().unwrap();
    approx::assert_relative_eq!(bus, 1e9 / t * 1.75, max_relative = 1e-12);
    assert_eq!(row["size_bytes"].as_f64(), Some(1e9));
    assert_eq!(row["nranks"], 8);
}

#[test]
fn collective_size_range_prints_one_row_per_power_of_two() {
    let out = cmd()
        .args([
            "collective",
            "all-gather",
            "--size",
            "1KiB..1MiB",
            "--topology",
            "ring(4, 200GB/s, 0.5us) x switch(8, 50GB/s, 1us)",
            "--format",
            "csv",
        ])
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    let mut lines = text.lines();
    let header = lines.next().unwrap();
    assert!(
        header
            .starts_with("size_bytes,nranks,time_s,algbw_bytes_per_s,busbw_bytes_per_s,algorithm"),
        "{header}"
    );
    let sizes: Vec<f64> = lines
        .take_while(|l| !l.is_empty())
        .map(|l| l.split(',').next().unwrap().parse().unwrap())
        .collect();
    let expect: Vec<f64> = (10..=20).map(|k| 2f64.powi(k)).collect();
    assert_eq!(sizes, expect);
}

#[test]
fn collective_markdown_and_explain() {
    cmd()
        .args([
            "collective",
            "all-reduce",
            "--size",
            "1GB",
            "--topology",
            RING8,
            "--format",
            "markdown",
        ])
        .assert()
        .success()
        .stdout(predicate::str::contains("| 1000000000 | 8 | 17507.00 |"));
    cmd()
        .args([
            "collective",
            "all-reduce",
            "--size",
            "1GB",
            "--topology",
            RING8,
            "--explain",
        ])
        .assert()
        .success()
        .stdout(predicate::str::contains("2(p−1)·α = 14 × 500 ns = 7 us"))
        .stdout(predicate::str::contains(
            "2(p−1)/p · n / B = 1.75 × 1 GB / 100 GB/s = 17.5 ms",
        ))
        .stdout(predicate::str::contains("T = 17.507 ms"));
}

#[test]
fn collective_system_and_nodes() {
    cmd()
        .args([
            "collective",
            "all-to-all",
            "--size",
            "64MiB",
            "--system",
            "dgx-h100",
            "--nodes",
            "16",
            "--explain",
        ])
        .assert()
        .success()
        .stdout(predicate::str::contains("128 NPUs"));
    cmd()
        .args([
            "collective",
            "all-reduce",
            "--size",
            "1GB",
            "--system",
            "dgx-a100",
            "--nodes",
            "2",
        ])
        .assert()
        .success()
        .stdout(predicate::str::contains("16 NPUs"));
    fails(
        &[
            "collective",
            "all-reduce",
            "--size",
            "1GB",
            "--system",
            "dgx-h10",
        ],
        &["unknown system 'dgx-h10'", "did you mean"],
    );
}

#[test]
fn collective_network_toml_file() {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("astrolabe-collective-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let good = dir.join("net.toml");
    let text = "[[network.dims]]\nkind = \"ring\"\nsize = 8\nbandwidth = \"100 GB/s\"\nlatency = \"500 ns\"\n";
    std::fs::File::create(&good)
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    cmd()
        .args(["collective", "all-reduce", "--size", "1GB", "--network"])
        .arg(&good)
        .assert()
        .success()
        .stdout(predicate::str::contains("17507.00"));
    let bad = dir.join("bad.toml");
    std::fs::write(&bad, text.replace("latency", "latncy")).unwrap();
    let out = cmd()
        .args(["collective", "all-reduce", "--size", "1GB", "--network"])
        .arg(&bad)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("bad.toml") && err.contains("line 5") && err.contains("latncy"),
        "{err}"
    );
    let zero = dir.join("zero.toml");
    std::fs::write(&zero, text.replace("100 GB/s", "0 GB/s")).unwrap();
    let out = cmd()
        .args(["collective", "all-reduce", "--size", "1GB", "--network"])
        .arg(&zero)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("zero.toml") && err.contains("'0 GB/s' is zero; it must be > 0"),
        "{err}"
    );
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn collective_bad_names_get_did_you_mean() {
    fails(
        &[
            "collective",
            "all-reduc",
            "--size",
            "1GB",
            "--topology",
            RING8,
        ],
        &[
            "unknown collective 'all-reduc'",
            "did you mean 'all-reduce'",
        ],
    );
    fails(
        &[
            "collective",
            "all-reduce",
            "--size",
            "1GB",
            "--topology",
            RING8,
            "--algorithm",
            "rng",
        ],
        &["unknown algorithm 'rng'", "did you mean 'ring'"],
    );
    fails(
        &[
            "collective",
            "all-reduce",
            "--size",
            "1GB",
            "--topology",
            RING8,
            "--schedule",
            "themsi",
        ],
        &["unknown schedule", "did you mean 'themis'"],
    );
}

#[test]
fn collective_bad_sizes_and_networks() {
    fails(
        &[
            "collective",
            "all-reduce",
            "--size",
            "64x",
            "--topology",
            RING8,
        ],
        &["--size", "64x"],
    );
    fails(
        &[
            "collective",
            "all-reduce",
            "--size",
            "-1GB",
            "--topology",
            RING8,
        ],
        &["--size", "negative"],
    );
    fails(
        &[
            "collective",
            "all-reduce",
            "--size",
            "1GB..1KB",
            "--topology",
            RING8,
        ],
        &["--size", "range"],
    );
    fails(
        &[
            "collective",
            "all-reduce",
            "--size",
            "1GB",
            "--topology",
            "ring(8, 0GB/s, 500ns)",
        ],
        &["bandwidth", "is zero; it must be > 0"],
    );
    fails(
        &[
            "collective",
            "all-reduce",
            "--size",
            "1GB",
            "--topology",
            "ring(8, -5GB/s, 500ns)",
        ],
        &["negative"],
    );
    fails(
        &[
            "collective",
            "all-reduce",
            "--size",
            "1GB",
            "--topology",
            "ring(8, 100GB/s, 500ns) x swich(4, 1GB/s, 1us)",
        ],
        &["column 27", "did you mean 'switch'"],
    );
    fails(
        &["collective", "all-reduce", "--size", "1GB"],
        &["--topology"],
    );
    fails(
        &[
            "collective",
            "all-reduce",
            "--size",
            "1GB",
            "--topology",
            RING8,
            "--chunks",
            "0",
        ],
        &["--chunks"],
    );
}

#[test]
fn collective_algorithm_that_does_not_apply() {
    fails(
        &[
            "collective",
            "all-to-all",
            "--size",
            "1GB",
            "--topology",
            "switch(8, 100GB/s, 1us)",
            "--algorithm",
            "halving-doubling",
        ],
        &["halving-doubling", "all-to-all", "dimension 0"],
    );
    fails(
        &[
            "collective",
            "all-reduce",
            "--size",
            "1GB",
            "--topology",
            RING8,
            "--algorithm",
            "in-network",
        ],
        &["in-network", "ring"],
    );
}
