//! `astrolabe astra` and `astrolabe export astra` end to end: every congestion-unaware
//! reference row through the binary, errors for inputs that crash ASTRA-sim, and the
//! export round trip (files read back identically; byte layout of a microbenchmark ET).

use assert_cmd::Command;
use astrolabe::astra::chakra;
use astrolabe::astra::export;
use astrolabe::astra::model::Op;
use predicates::str::contains;
use std::path::{Path, PathBuf};

fn data(p: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/astra")
        .join(p)
}

fn bin() -> Command {
    Command::cargo_bin("astrolabe").unwrap()
}

fn tmp(name: &str) -> PathBuf {
    let d = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("astrolabe_{name}_{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

#[track_caller]
fn astra_ns(net: &Path, sys: &Path, op: &str, size: &str) -> u64 {
    astra_ns_backend(net, sys, op, size, "unaware")
}

#[track_caller]
fn astra_ns_backend(net: &Path, sys: &Path, op: &str, size: &str, backend: &str) -> u64 {
    let out = bin()
        .args([
            "astra",
            "--format",
            "json",
            "--backend",
            backend,
            "--network",
        ])
        .arg(net)
        .arg("--system")
        .arg(sys)
        .arg("--remote-memory")
        .arg(data("configs/remote_memory/no_memory_expansion.json"))
        .args(["--collective", op, "--size", size])
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let j: serde_json::Value = serde_json::from_slice(&out).unwrap();
    j["tables"]["astra"][0]["time_ns"].as_f64().unwrap() as u64
}

#[test]
fn astra_every_reference_row_through_the_binary() {
    let mut r = csv::Reader::from_path(data("collectives_public.csv")).unwrap();
    let h = r.headers().unwrap().clone();
    let col = |n: &str| h.iter().position(|c| c == n).unwrap();
    let mut n = 0;
    for rec in r.records() {
        let rec = rec.unwrap();
        let backend = match &rec[col("backend")] {
            "congestion_unaware" => "unaware",
            _ => "aware",
        };
        let got = astra_ns_backend(
            &data(&rec[col("network_config")]),
            &data(&rec[col("system_config")]),
            &rec[col("collective")],
            &format!("{}B", &rec[col("comm_size_bytes")]),
            backend,
        );
        let want: f64 = rec[col("finish_time_max")].parse().unwrap();
        let tol = if rec[col("npus_per_dim")].contains('x') {
            0.03
        } else {
            0.001
        };
        let err = (got as f64 - want).abs() / want;
        assert!(err <= tol, "{:?}: {got} vs {want}", rec);
        n += 1;
    }
    assert_eq!(n, 176);
}

#[test]
fn astra_help_says_what_size_means() {
    bin()
        .args(["astra", "--help"])
        .assert()
        .success()
        .stdout(contains("comm_size").and(contains("per-NPU input")));
}

use predicates::prelude::PredicateBooleanExt;

fn sys_with(dir: &Path, from: &str, to: &str) -> PathBuf {
    let base = std::fs::read_to_string(data(
        "configs/system/sys_ring_ch1_sp4_ed10_localBWAware_af9371f0.json",
    ))
    .unwrap();
    assert!(base.contains(from));
    let p = dir.join(format!("{}.json", to.replace([' ', ':', '"'], "")));
    std::fs::write(&p, base.replace(from, to)).unwrap();
    p
}

#[test]
fn astra_configs_that_crash_astra_sim_are_clear_errors() {
    let dir = tmp("crash");
    let net = data("configs/network/Ring__8__bw100__lat500.yml");
    for (from, to, says) in [
        (
            "\"endpoint-delay\": 10",
            "\"endpoint-delay\": 0",
            "endpoint-delay",
        ),
        (
            "\"preferred-dataset-splits\": 4",
            "\"preferred-dataset-splits\": 0",
            "preferred-dataset-splits",
        ),
        (
            "\"local-mem-bw\": 1600",
            "\"local-mem-bw\": 0",
            "local-mem-bw",
        ),
        ("\"boost-mode\": 0", "\"boost-mod\": 0", "boost-mod"),
    ] {
        let sys = sys_with(&dir, from, to);
        bin()
            .args(["astra", "--network"])
            .arg(&net)
            .arg("--system")
            .arg(&sys)
            .args(["--collective", "all-reduce", "--size", "1MiB"])
            .assert()
            .code(2)
            .stderr(contains(says));
    }
    let sys = data("configs/system/sys_ring_ch1_sp4_ed10_localBWAware_af9371f0.json");
    // Zero-byte chunks: an all-gather of 3 B in 4 splits; a 1 KiB all-reduce on 16×8×4.
    bin()
        .args(["astra", "--network"])
        .arg(&net)
        .arg("--system")
        .arg(&sys)
        .args(["--collective", "all-gather", "--size", "3B"])
        .assert()
        .code(2)
        .stderr(contains("0-byte chunks"));
    let big = dir.join("big.yml");
    std::fs::write(
        &big,
        "topology: [ Ring, Ring, Ring ]\nnpus_count: [ 16, 8, 4 ]\nbandwidth: [ 100, 100, 100 ]\nlatency: [ 500, 500, 500 ]\n",
    )
    .unwrap();
    let sys3 = dir.join("sys3.json");
    std::fs::write(
        &sys3,
        std::fs::read_to_string(&sys)
            .unwrap()
            .replace("\"ring\"", "\"ring\", \"ring\", \"ring\""),
    )
    .unwrap();
    bin()
        .args(["astra", "--network"])
        .arg(&big)
        .arg("--system")
        .arg(&sys3)
        .args(["--collective", "all-reduce", "--size", "1KiB"])
        .assert()
        .code(2)
        .stderr(contains("0 bytes"));
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn astra_unknown_network_key_names_file_and_line() {
    let dir = tmp("netkey");
    let p = dir.join("n.yml");
    std::fs::write(&p, "topology: [ Ring ]\nnpus_count: [ 8 ]\nbandwidth: [ 100 ]\nlatency: [ 500 ]\nlinks_per_npu: [ 2 ]\n").unwrap();
    bin()
        .args(["astra", "--network"])
        .arg(&p)
        .arg("--system")
        .arg(data(
            "configs/system/sys_ring_ch1_sp4_ed10_localBWAware_af9371f0.json",
        ))
        .args(["--collective", "all-reduce", "--size", "1MiB"])
        .assert()
        .code(2)
        .stderr(
            contains("n.yml")
                .and(contains("links_per_npu"))
                .and(contains("line 5")),
        );
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn astra_physical_model_side_by_side_with_reasons() {
    bin()
        .args(["astra", "--model", "physical", "--network"])
        .arg(data("configs/network/FullyConnected__8__bw100__lat500.yml"))
        .arg("--system")
        .arg(data(
            "configs/system/sys_direct_ch1_sp4_ed10_localBWAware_a60dbbb6.json",
        ))
        .args(["--collective", "all-reduce", "--size", "64MiB"])
        .assert()
        .success()
        .stdout(
            contains("physical")
                .and(contains("full link bandwidth"))
                .and(contains("176088")),
        );
}

/// The bytes ASTRA-sim's generator (all_reduce.py, protolib.encodeMessage) writes for a
/// 1 MiB all-reduce, worked out by hand from et_def.proto's field numbers.
fn hand_encoded_all_reduce_1mib(name: &str) -> Vec<u8> {
    let mut v = vec![7, 0x0a, 5];
    v.extend_from_slice(b"0.0.4");
    let mut node = vec![0x12, name.len() as u8];
    node.extend_from_slice(name.as_bytes());
    node.extend_from_slice(&[0x18, 7]); // type = COMM_COLL_NODE
    let attr = |body: Vec<u8>| {
        let mut a = vec![0x52, body.len() as u8];
        a.extend(body);
        a
    };
    let named = |n: &str, tail: &[u8]| {
        let mut b = vec![0x0a, n.len() as u8];
        b.extend_from_slice(n.as_bytes());
        b.extend_from_slice(tail);
        b
    };
    node.extend(attr(named("is_cpu_op", &[0xd8, 0x01, 0x00]))); // bool_val = 27
    node.extend(attr(named("comm_type", &[0x48, 0x00]))); // int64_val = 9: ALL_REDUCE
    node.extend(attr(named("comm_size", &[0x48, 0x80, 0x80, 0x40]))); // 1048576
    v.push(node.len() as u8);
    v.extend(node);
    v
}

#[test]
fn astra_export_round_trip_and_byte_layout() {
    let dir = tmp("export");
    bin()
        .args(["export", "astra", "--out"])
        .arg(&dir)
        .args(["--network"])
        .arg(data("configs/network/Ring__8__bw100__lat500.yml"))
        .arg("--system")
        .arg(data(
            "configs/system/sys_ring_ch1_sp4_ed10_localBWAware_af9371f0.json",
        ))
        .args(["--collective", "all-reduce", "--size", "1MiB"])
        .assert()
        .success()
        .stdout(contains("47360"));
    let name = "all_reduce_8npus_1048576B";
    let want = export::microbenchmark_trace(Op::AllReduce, 1 << 20, name);
    for r in 0..8 {
        let p = dir.join(format!("all_reduce.{r}.et"));
        assert_eq!(chakra::read_file(&p).unwrap(), want, "rank {r}");
        assert_eq!(
            std::fs::read(&p).unwrap(),
            hand_encoded_all_reduce_1mib(name),
            "rank {r}"
        );
    }
    // The written configs read back and give ASTRA-sim's reference time (47,360 ns).
    let ns = astra_ns(
        &dir.join("network.yml"),
        &dir.join("system.json"),
        "all-reduce",
        "1MiB",
    );
    assert_eq!(ns, 47360);
    // And the written workload runs through the trace path to the same number.
    let out = bin()
        .args(["astra", "--format", "json", "--network"])
        .arg(dir.join("network.yml"))
        .arg("--system")
        .arg(dir.join("system.json"))
        .arg("--remote-memory")
        .arg(dir.join("remote_memory.json"))
        .arg("--workload")
        .arg(dir.join("all_reduce"))
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let j: serde_json::Value = serde_json::from_slice(&out).unwrap();
    assert_eq!(
        j["tables"]["workload"][0]["finish_ns"].as_f64(),
        Some(47360.0)
    );
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn astra_export_from_our_topology_syntax() {
    let dir = tmp("export_topo");
    bin()
        .args(["export", "astra", "--out"])
        .arg(&dir)
        .args([
            "--topology",
            "ring(4, 400GiB/s, 500ns) x switch(8, 50GiB/s, 1us)",
        ])
        .args([
            "--algorithm",
            "halvingDoubling",
            "--collective",
            "reduce-scatter",
            "--size",
            "64MiB",
        ])
        .assert()
        .success();
    let yml = std::fs::read_to_string(dir.join("network.yml")).unwrap();
    // Ring: 400 GiB/s per NPU over 2 links = 200 per link; Switch: 1 us step = 2 hops of 500 ns.
    assert!(
        yml.contains("bandwidth: [ 200.0, 50.0 ]") && yml.contains("latency: [ 500.0, 500.0 ]"),
        "{yml}"
    );
    assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 3 + 32);
    bin()
        .args(["export", "astra", "--out"])
        .arg(&dir)
        .args([
            "--scenario",
            "x.toml",
            "--topology",
            "ring(4, 400GiB/s, 500ns)",
        ])
        .assert()
        .code(2)
        .stderr(contains("cannot be used with"));
    std::fs::remove_dir_all(&dir).ok();
}
