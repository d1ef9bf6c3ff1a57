//! One test per defect of the reliability campaign (issue 13), named after what broke. Each
//! failed before the fix: a panic (exit 101), an internal error (exit 1), a hang, a NaN or
//! infinity printed, a silently wrong answer, or exit 0 on an input that cannot be computed.
//! The ASTRA-sim and Chakra defects are in `regression_astra.rs`.

use crate::common;
use common::*;
use predicates::prelude::*;
use predicates::str::contains;
use std::io::Read;
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

#[test]
fn top_k_of_usize_max_does_not_panic() {
    let mut a = SWEEP.to_vec();
    a.extend(["--top", "9223372036854775807", "--format", "json"]);
    ok(&a);
}

#[test]
fn closed_stderr_does_not_panic_while_printing_an_error() {
    // A pipe whose reading end is closed before the process starts: writing fails (EPIPE).
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    let status = std::process::Command::new(assert_cmd::cargo::cargo_bin("astrolabe"))
        .args(["collective", "all-reduce", "--size", "bogus"])
        .args(["--system", "dgx-a100"])
        .stdout(Stdio::null())
        .stderr(writer)
        .status()
        .unwrap();
    assert_eq!(status.code(), Some(2));
}

#[test]
fn themis_sizes_with_different_phase_counts_make_one_table() {
    let t = "ring(4, 100GB/s, 1us) x switch(8, 50GB/s, 2us)";
    let args = [
        "collective",
        "all-reduce",
        "--size",
        "2MiB..4MiB",
        "--chunks",
        "4",
    ];
    let mut a = args.to_vec();
    a.extend(["--schedule", "themis", "--topology", t]);
    let out = ok(&a);
    assert!(out.contains("2097152") && out.contains("4194304"), "{out}");
}

#[test]
fn grid_size_guard_counts_before_building() {
    let gpus: Vec<String> = (1..=20000).map(|i| (8 * i).to_string()).collect();
    let gpus = gpus.join(",");
    let start = Instant::now();
    let mut a = SWEEP.to_vec();
    a[6] = &gpus;
    usage_error(&a, "--max-configs");
    // The guard used to build the whole grid first (25 s); counting takes milliseconds.
    assert_quick(start);
}

#[test]
fn sweep_on_a_large_system_with_no_valid_plan_ends_quickly() {
    let dir = tmp("big_system");
    let sys = dir.join("big.toml");
    std::fs::write(
        &sys,
        "name = \"big\"\ndevice = \"h100-sxm\"\n[[network.dims]]\nkind = \"switch\"\nsize = 8\n\
         bandwidth = \"370 GB/s\"\nlatency = \"3.4 us\"\n[[network.dims]]\nkind = \"switch\"\n\
         size = 8192\nbandwidth = \"47 GB/s\"\nlatency = \"14 us\"\n",
    )
    .unwrap();
    let start = Instant::now();
    let s = sys.to_str().unwrap();
    // Nothing valid is an error (exit 2) that names the constraint that dropped the most.
    bin()
        .args([
            "sweep",
            "--model",
            "megatron-2021-1.7b",
            "--system",
            s,
            "--gpus",
            "65536",
            "--global-batch",
            "16",
            "--no-timing",
        ])
        .assert()
        .code(2)
        .stderr(contains("no configuration is valid"));
    // The nearest-count hint used to try 32,768 device counts (10.7 s).
    assert_quick(start);
}

#[test]
fn gpus_beyond_the_presets_stated_maximum_is_an_error() {
    let mut a = SWEEP.to_vec();
    a[4] = "dgx-h100";
    a[6] = "65536";
    usage_error(&a, "more than system 'dgx-h100' has: 24576 devices");
    usage_error(
        &[
            "estimate",
            "--model",
            "gpt3-175b",
            "--system",
            "dgx-h100",
            "--gpus",
            "32768",
        ],
        "--gpus",
    );
}

#[test]
fn input_files_have_a_size_cap() {
    let dir = tmp("cap");
    let f = dir.join("model.toml");
    std::fs::write(&f, format!("# {}\n", "x".repeat(4096))).unwrap();
    bin()
        .env("ASTROLABE_MAX_INPUT_BYTES", "1024")
        .args([
            "estimate",
            "--model",
            f.to_str().unwrap(),
            "--system",
            "dgx-a100",
        ])
        .assert()
        .code(2)
        .stderr(contains("limit of 1024 bytes").and(contains("ASTROLABE_MAX_INPUT_BYTES")));
    // A device with no size (an endless stream) stops at the cap instead of running out
    // of memory.
    if Path::new("/dev/zero").exists() {
        bin()
            .env("ASTROLABE_MAX_INPUT_BYTES", "1048576")
            .args(["estimate", "--model", "/dev/zero", "--system", "dgx-a100"])
            .timeout(Duration::from_secs(20))
            .assert()
            .code(2)
            .stderr(contains("ASTROLABE_MAX_INPUT_BYTES"));
    }
}

#[test]
fn tiny_rates_are_refused_instead_of_printing_nan() {
    let c = ["collective", "all-reduce", "--size", "1MiB", "--topology"];
    let mut a = c.to_vec();
    a.push("ring(8, 1e-308B/s, 500ns)");
    usage_error(&a, "between 1 B/s and 1 EB/s");
    let dir = tmp("tiny_device");
    let dev = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/presets/devices/a100-80gb.toml"
    ))
    .unwrap();
    let line = dev
        .lines()
        .find(|l| l.starts_with("memory_bandwidth"))
        .unwrap();
    let f = dir.join("dev.toml");
    std::fs::write(&f, dev.replace(line, "memory_bandwidth = \"1e-308 B/s\"")).unwrap();
    let sys = dir.join("sys.toml");
    let s = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/presets/systems/dgx-a100.toml"
    ))
    .unwrap()
    .replace("device = \"a100-80gb\"", "device = \"dev.toml\"");
    std::fs::write(&sys, s).unwrap();
    usage_error(
        &[
            "estimate",
            "--model",
            "gpt3-175b",
            "--system",
            sys.to_str().unwrap(),
            "--gpus",
            "64",
        ],
        "between 1 B/s and 1 EB/s",
    );
}

#[test]
fn overflow_after_unit_scaling_is_refused() {
    let e = [
        "estimate",
        "--model",
        "megatron-2021-1.7b",
        "--system",
        "dgx-a100",
        "--gpus",
        "8",
    ];
    let mut a = e.to_vec();
    a.extend(["--global-batch", "16", "--dp-bucket", "1e300EB"]);
    usage_error(&a, "between 1 bit and 1 PiB");
    let mut a = e.to_vec();
    a.extend(["--global-batch", "16", "--tokens", "1e308B"]);
    usage_error(&a, "between 1 and 1e18");
}

#[test]
fn zero_bandwidth_budget_is_refused() {
    let mut a = SWEEP.to_vec();
    a.extend(["--bandwidth-budget", "0B/s"]);
    usage_error(&a, "--bandwidth-budget: '0B/s' is zero");
}

#[test]
fn negative_zero_is_refused() {
    let t = "ring(8, 100GB/s, 500ns)";
    usage_error(
        &["collective", "all-reduce", "--size=-0B", "--topology", t],
        "negative",
    );
    let t = "ring(8, 100GB/s, -0us)";
    usage_error(
        &["collective", "all-reduce", "--size=1MiB", "--topology", t],
        "negative",
    );
}

#[test]
fn npu_count_does_not_wrap_to_zero() {
    let d = "switch(65536, 100GB/s, 1us)";
    let t = [d, d, d, d].join(" x ");
    usage_error(&all_reduce_on("1MiB", &t), "NPUs in a network");
}

#[test]
fn zero_sizes_are_refused() {
    let t = "ring(8, 100GB/s, 500ns)";
    usage_error(&all_reduce_on("0B", t), "zero");
    let mut a = vec![
        "estimate",
        "--model",
        "megatron-2021-1.7b",
        "--system",
        "dgx-a100",
    ];
    a.extend(["--gpus", "8", "--global-batch", "16", "--dp-bucket", "0B"]);
    usage_error(&a, "dp_bucket: must be > 0");
}

#[test]
fn sweep_all_and_output_to_the_same_file_is_refused() {
    let dir = tmp("same_file");
    let f = dir.join("f.csv");
    let f = f.to_str().unwrap();
    let mut a = SWEEP.to_vec();
    a.extend(["--all", f, "-o", f]);
    usage_error(&a, "is also given to --all");
}

#[test]
fn zero_batch_or_degree_is_a_usage_error_naming_the_flag() {
    for (flag, v) in [
        ("--global-batch", "0"),
        ("--micro-batch", "0"),
        ("--pp", "0"),
    ] {
        let mut a = SWEEP.to_vec();
        a.retain(|&s| s != "--global-batch" && s != "16");
        a.extend(["--global-batch", "16", flag, v]);
        if flag == "--global-batch" {
            a.truncate(a.len() - 4);
            a.extend(["--global-batch", "0"]);
        }
        usage_error(&a, &format!("{flag}:"));
    }
}

#[test]
fn broken_pipe_on_the_all_stream_is_success() {
    let mut child = std::process::Command::new(assert_cmd::cargo::cargo_bin("astrolabe"))
        .args(SWEEP)
        .args(["--all", "/dev/stdout"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = child.stdout.take().unwrap();
    let mut first = [0u8; 16];
    out.read_exact(&mut first).unwrap();
    drop(out); // as `| head -c 16` does
    let mut err = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(0), "stderr: {err}");
    assert!(err.is_empty(), "{err}");
}

#[test]
fn dimensions_joined_by_anything_but_x_say_so() {
    for sep in [" X ", " * ", ","] {
        let t = format!("ring(8, 100GB/s, 1us){sep}switch(4, 50GB/s, 1us)");
        usage_error(
            &all_reduce_on("1MiB", &t),
            "dimensions are joined with ' x '",
        );
    }
}

#[test]
fn errors_blame_the_right_thing() {
    let c = ["collective", "all-reduce", "--size", "1MiB", "--topology"];
    let mut a = c.to_vec();
    a.push("ring(8, 1e308EB/s, 1us)");
    usage_error(&a, "'1e308EB/s' is out of range");
    let mut a = c.to_vec();
    a.push("switch(4294967296, 100GB/s, 1us)");
    usage_error(&a, "more than the limit of 1048576 NPUs");
    let mut a = vec![
        "estimate",
        "--model",
        "megatron-2021-1.7b",
        "--system",
        "dgx-a100",
    ];
    a.extend(["--gpus", "8", "--global-batch", "0"]);
    usage_error(&a, "global_batch: must be ≥ 1");
}

#[test]
fn compare_type_errors_name_the_key_and_line() {
    let dir = tmp("compare_type");
    let f = dir.join("s.toml");
    std::fs::write(
        &f,
        "model = \"gpt3-175b\"\nsystem = \"dgx-a100\"\n\n[plan]\ngpus = 64\ntp = 8\npp = 8\n\
         global_batch = 64\nsequence_parallel = \"yes\"\n",
    )
    .unwrap();
    usage_error(
        &["compare", f.to_str().unwrap()],
        "line 9, baseline: plan: sequence_parallel: invalid type",
    );
}

#[test]
fn no_timing_makes_identical_runs_byte_identical() {
    let mut a = SWEEP.to_vec();
    a.push("--no-timing");
    let one = ok(&a);
    assert_eq!(one, ok(&a));
    assert!(!one.contains("estimates/s"), "{one}");
}

#[test]
fn hsdp_group_of_one_is_refused() {
    // A shard group of 1 shards nothing (it would be DDP); an earlier revision read it as
    // FSDP over every DP rank, the opposite of what the flag says.
    usage_error(
        &[
            "estimate",
            "--model",
            "llama3-8b",
            "--system",
            "dgx-h100",
            "--gpus",
            "16",
            "--hsdp",
            "1",
        ],
        "a shard group of 1 shards nothing",
    );
}
