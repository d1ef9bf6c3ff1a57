//! One test per defect of the reliability campaign (issue 13), named after what broke. Each
//! failed before the fix: a panic (exit 101), an internal error (exit 1), a hang, a NaN or
//! infinity printed, a silently wrong answer, or exit 0 on an input that cannot be computed.

use assert_cmd::Command;
use astrolabe::astra::chakra::{self, AttributeProto, GlobalMetadata, Node, TraceFile, node_type};
use predicates::prelude::*;
use predicates::str::contains;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

fn bin() -> Command {
    Command::cargo_bin("astrolabe").unwrap()
}

fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("astrolabe_reg_{name}_{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

const SWEEP: [&str; 9] = [
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
fn usage_error(args: &[&str], what: &str) {
    bin()
        .args(args)
        .assert()
        .code(2)
        .stderr(contains(what))
        .stdout(contains("NaN").not());
}

/// `collective all-reduce --size SIZE --topology TOPOLOGY`.
fn all_reduce_on<'a>(size: &'a str, topology: &'a str) -> [&'a str; 6] {
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
fn assert_quick(start: Instant) {
    assert!(
        start.elapsed() < Duration::from_secs(5),
        "{:?}",
        start.elapsed()
    );
}

/// Runs the binary and returns stdout, asserting success and no NaN/inf/-0 printed.
#[track_caller]
fn ok(args: &[&str]) -> String {
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
    assert!(out.contains("2 MiB") && out.contains("4 MiB"), "{out}");
}

#[test]
fn export_refuses_more_files_than_the_limit_before_writing() {
    let dir = tmp("export_limit").join("out");
    let d = dir.to_str().unwrap();
    let a = ["export", "astra", "--out", d, "--topology"];
    let mut big = a.to_vec();
    big.push("switch(100000, 100GB/s, 1us)");
    usage_error(&big, "ASTROLABE_MAX_FILES");
    assert!(
        !dir.exists(),
        "nothing is written when the export is refused"
    );
    let mut huge = a.to_vec();
    huge.push("switch(4294967295, 100GB/s, 1us)");
    usage_error(&huge, "ASTROLABE_MAX_NPUS");
}

#[test]
fn grid_size_guard_counts_before_building() {
    let gpus: Vec<String> = (1..=1000).map(|i| (8 * i).to_string()).collect();
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
    let out = ok(&[
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
    ]);
    assert!(out.contains("no plan is valid"), "{out}");
    // The nearest-count hint used to try 32,768 device counts (10.7 s).
    assert_quick(start);
}

#[test]
fn gpus_beyond_the_presets_stated_maximum_is_an_error() {
    let mut a = SWEEP.to_vec();
    a[4] = "dgx-h100";
    a[6] = "65536";
    usage_error(&a, "more than system 'dgx-h100' has: 1024 devices");
    usage_error(
        &[
            "estimate",
            "--model",
            "gpt3-175b",
            "--system",
            "dgx-h100",
            "--gpus",
            "2048",
        ],
        "--gpus",
    );
}

/// A two-NPU ASTRA-sim setup in `dir`: a Switch network, a roofline system JSON with
/// `peak` TFLOP/s, and one trace per rank built by `node`.
fn astra_setup(dir: &Path, peak: &str, nodes: &dyn Fn(u32) -> Vec<Node>) -> [String; 6] {
    let net = dir.join("net.yml");
    std::fs::write(
        &net,
        "topology: [ Switch ]\nnpus_count: [ 2 ]\nbandwidth: [ 50.0 ]\nlatency: [ 500.0 ]\n",
    )
    .unwrap();
    let sys = dir.join("sys.json");
    let json = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/data/astra/sys_ring_roofline_1d.json"
    ))
    .unwrap()
    .replace("\"peak-perf\": 300", &format!("\"peak-perf\": {peak}"));
    std::fs::write(&sys, json).unwrap();
    for r in 0..2 {
        let t = TraceFile {
            metadata: GlobalMetadata {
                version: "0.0.4".into(),
                attr: vec![],
            },
            nodes: nodes(r),
        };
        chakra::write_file(&chakra::rank_path(&dir.join("w"), r as usize), &t).unwrap();
    }
    let p = |f: &Path| f.to_str().unwrap().to_string();
    [
        "--network".into(),
        p(&net),
        "--system".into(),
        p(&sys),
        "--workload".into(),
        p(&dir.join("w")),
    ]
}

fn comp(id: u64, ops: u64, bytes: u64) -> Node {
    Node {
        id,
        name: "gemm".into(),
        r#type: node_type::COMP,
        attr: vec![
            AttributeProto::uint64("num_ops", ops),
            AttributeProto::uint64("tensor_size", bytes),
        ],
        ..Default::default()
    }
}

fn all_reduce(id: u64, size: AttributeProto, deps: Vec<u64>) -> Node {
    Node {
        id,
        name: "ar".into(),
        r#type: node_type::COMM_COLL,
        data_deps: deps,
        attr: vec![AttributeProto::int64("comm_type", 0), size],
        ..Default::default()
    }
}

#[test]
fn chakra_files_of_zeros_are_not_traces() {
    let dir = tmp("zeros");
    let args = astra_setup(&dir, "300", &|_| vec![comp(0, 1000, 1000)]);
    for r in 0..2 {
        std::fs::write(chakra::rank_path(&dir.join("w"), r), vec![0u8; 1 << 20]).unwrap();
    }
    let mut a = vec!["astra"];
    a.extend(args.iter().map(String::as_str));
    usage_error(&a, "is empty (0 bytes)");
    for r in 0..2 {
        std::fs::write(chakra::rank_path(&dir.join("w"), r), b"").unwrap();
    }
    usage_error(&a, "is empty (0 bytes)");
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
fn astra_huge_delays_are_errors_not_shorter_times() {
    let d = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/astra/");
    let net = format!("{d}net_sw8x2.yml");
    let sys = format!("{d}sys_ring_roofline.json");
    let base = [
        "astra",
        "--network",
        &net,
        "--system",
        &sys,
        "--collective",
        "all-reduce",
    ];
    let mut a = base.to_vec();
    a.extend(["--size", "64MiB", "--injection-scale", "1e30"]);
    usage_error(&a, "2^62 ns");
    for scale in ["1e15", "1e300"] {
        let mut a = base.to_vec();
        a.extend(["--size", "64MiB", "--comm-scale", scale]);
        usage_error(&a, "more than the maximum of 1 PiB");
    }
    let dir = tmp("astra_yaml");
    let slow = dir.join("slow.yml");
    let yaml =
        "topology: [ Switch ]\nnpus_count: [ 8 ]\nbandwidth: [ 1e-300 ]\nlatency: [ 1e300 ]\n";
    std::fs::write(&slow, yaml).unwrap();
    let s = slow.to_str().unwrap();
    usage_error(
        &[
            "astra",
            "--network",
            s,
            "--system",
            &sys,
            "--collective",
            "all-reduce",
            "--size",
            "1MiB",
        ],
        "out of range",
    );
}

#[test]
fn tiny_peak_perf_is_reported_as_too_long_not_as_a_collective_mismatch() {
    let dir = tmp("peak");
    let size = || AttributeProto::uint64("comm_size", 1 << 20);
    let args = astra_setup(&dir, "1e-9", &|_| {
        vec![comp(0, 1 << 60, 1 << 20), all_reduce(1, size(), vec![0])]
    });
    let mut a = vec!["astra"];
    a.extend(args.iter().map(String::as_str));
    usage_error(&a, "compute (roofline): takes more than 2^62 ns");
}

#[test]
fn npu_count_does_not_wrap_to_zero() {
    let d = "switch(65536, 100GB/s, 1us)";
    let t = [d, d, d, d].join(" x ");
    usage_error(&all_reduce_on("1MiB", &t), "NPUs in a network");
}

#[test]
fn export_of_tiny_bandwidth_or_huge_latency_is_refused() {
    let dir = tmp("export_range");
    let d = dir.join("o");
    let d = d.to_str().unwrap();
    let e = ["export", "astra", "--out", d, "--topology"];
    let mut a = e.to_vec();
    a.push("switch(8, 1e-300GB/s, 1us)");
    usage_error(&a, "out of range");
    let mut a = e.to_vec();
    a.push("switch(8, 100GB/s, 1e300days)");
    usage_error(&a, "out of range");
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
fn chakra_duplicate_node_ids_and_saturating_durations_are_refused() {
    let dir = tmp("dup");
    let size = || AttributeProto::uint64("comm_size", 1 << 20);
    let args = astra_setup(&dir, "300", &|_| {
        vec![all_reduce(0, size(), vec![]), all_reduce(0, size(), vec![])]
    });
    let mut a = vec!["astra"];
    a.extend(args.iter().map(String::as_str));
    usage_error(&a, "node 0: the node id appears twice");
    // A trace file concatenated with itself repeats every id.
    astra_setup(&dir, "300", &|_| vec![all_reduce(0, size(), vec![])]);
    for r in 0..2 {
        let p = chakra::rank_path(&dir.join("w"), r);
        let b = std::fs::read(&p).unwrap();
        std::fs::write(&p, [b.clone(), b].concat()).unwrap();
    }
    usage_error(&a, "appears twice");
    // Recorded durations (roofline off) of 2^64−1 µs do not fit ASTRA-sim's ns clock.
    let args = astra_setup(&dir, "300", &|_| {
        vec![Node {
            id: 0,
            r#type: node_type::COMP,
            duration_micros: u64::MAX,
            ..Default::default()
        }]
    });
    let sys = &args[3];
    let json = std::fs::read_to_string(sys).unwrap();
    std::fs::write(
        sys,
        json.replace("\"roofline-enabled\": 1", "\"roofline-enabled\": 0"),
    )
    .unwrap();
    usage_error(&a, "duration_micros: takes more than 2^62 ns");
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
fn chakra_errors_give_a_reason_and_a_place() {
    let dir = tmp("chakra_msg");
    let size = || AttributeProto::string("comm_size", "1MiB");
    let args = astra_setup(&dir, "300", &|_| vec![all_reduce(7, size(), vec![])]);
    let mut a = vec!["astra"];
    a.extend(args.iter().map(String::as_str));
    usage_error(
        &a,
        "rank 0 node 7: node 7 attribute 'comm_size': expected an integer",
    );
    // A truncated file: the message carries the decoder's reason, not only a byte offset.
    let p = chakra::rank_path(&dir.join("w"), 0);
    let b = std::fs::read(&p).unwrap();
    std::fs::write(&p, &b[..b.len() - 3]).unwrap();
    usage_error(&a, "failed to decode Protobuf message");
}

#[test]
fn yaml_errors_have_a_line_and_no_internal_type_names() {
    let dir = tmp("yaml_msg");
    let sys = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/data/astra/sys_ring_roofline.json"
    );
    let run = |name: &str, text: &str, want: &str| {
        let f = dir.join(name);
        std::fs::write(&f, text).unwrap();
        let f = f.to_str().unwrap();
        let a = ["astra", "--network", f, "--system", sys];
        let mut a = a.to_vec();
        a.extend(["--collective", "all-reduce", "--size", "1MiB"]);
        usage_error(&a, want);
        let out = bin().args(&a).output().unwrap();
        assert!(!String::from_utf8_lossy(&out.stderr).contains("Raw"));
    };
    let body = "npus_count: [ 4 ]\nbandwidth: [ 1 ]\nlatency: [ 1 ]\n";
    run(
        "dup.yml",
        &format!("topology: [ Ring ]\ntopology: [ Ring ]\n{body}"),
        "at line 2",
    );
    run(
        "seq.yml",
        "[1, 2]\n",
        "expected a mapping with the keys topology",
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
