//! Regression tests of the reliability campaign (issue 13) for the ASTRA-sim inputs and
//! Chakra traces, one per defect, named after what broke (the others are in
//! `regression.rs`).

use crate::common;
use astrolabe::astra::chakra::{self, AttributeProto, GlobalMetadata, Node, TraceFile, node_type};
use common::*;
use std::path::Path;

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
