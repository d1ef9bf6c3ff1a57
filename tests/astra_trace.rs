//! The GPT 6.7B training iteration (Chakra traces of 16 NPUs, dp 2 × tp 4 × pp 2, from
//! validation/astra/workloads, copied to tests/data/astra) against ASTRA-sim's finish times
//! on its two networks (both exact to the nanosecond, as are the per-stage finish times), and
//! the last NPU's compute time to the nanosecond.

use astrolabe::astra::chakra::{self, TraceFile};
use astrolabe::astra::model::Knobs;
use astrolabe::astra::network_yaml::AstraNetwork;
use astrolabe::astra::system_json::AstraSystem;
use astrolabe::astra::{critical, trace};
use std::collections::HashMap;
use std::path::{Path, PathBuf};

fn data(p: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/astra")
        .join(p)
}

/// The files of the tarball (ustar: 512-byte headers, name at 0..100, octal size at 124..136).
fn untar_xz(path: &Path) -> HashMap<String, Vec<u8>> {
    let mut xz = std::io::BufReader::new(std::fs::File::open(path).unwrap());
    let mut tar = Vec::new();
    lzma_rs::xz_decompress(&mut xz, &mut tar).unwrap();
    let mut files = HashMap::new();
    let mut at = 0;
    while at + 512 <= tar.len() && tar[at] != 0 {
        let h = &tar[at..at + 512];
        let name_end = h[..100].iter().position(|&b| b == 0).unwrap_or(100);
        let name = String::from_utf8_lossy(&h[..name_end]).to_string();
        let size_txt = String::from_utf8_lossy(&h[124..136]);
        let size = usize::from_str_radix(size_txt.trim_matches(|c: char| c == '\0' || c == ' '), 8)
            .unwrap();
        let body = at + 512;
        if h[156] == b'0' || h[156] == 0 {
            files.insert(name, tar[body..body + size].to_vec());
        }
        at = body + size.div_ceil(512) * 512;
    }
    files
}

struct Gpt {
    traces: Vec<TraceFile>,
    groups: HashMap<String, Vec<u32>>,
}

fn gpt() -> Gpt {
    let files = untar_xz(&data("gpt6.7b_dp2_tp4_pp2.tar.xz"));
    let get = |n: &str| {
        files
            .iter()
            .find(|(k, _)| k.ends_with(&format!("/{n}")))
            .map(|(_, v)| v.clone())
            .unwrap_or_else(|| panic!("{n} not in tarball"))
    };
    let traces = (0..16)
        .map(|r| chakra::decode(&get(&format!("w.{r}.et")), "w").unwrap())
        .collect();
    let groups =
        trace::read_comm_groups(std::str::from_utf8(&get("w.json")).unwrap(), "w.json").unwrap();
    Gpt { traces, groups }
}

#[track_caller]
fn check(g: &Gpt, net: &str, sys: &str, reference_ns: f64, stage1_ns: u64) {
    let net = AstraNetwork::read(&data(net)).unwrap();
    let sys = AstraSystem::read(&data(sys)).unwrap();
    let knobs = Knobs::default();
    let ctx = trace::Ctx {
        net: &net,
        sys: &sys,
        knobs: &knobs,
        groups: Some(&g.groups),
    };
    let w = trace::convert(&g.traces, &ctx).unwrap();
    let est = critical::critical_path(&w).unwrap();
    let err = (est.finish_ns as f64 - reference_ns) / reference_ns;
    eprintln!(
        "finish {} ns vs ASTRA-sim {reference_ns} ns: {:+.2} %",
        est.finish_ns,
        err * 100.0
    );
    // Exact: the same comm-slot and id-order rules as ASTRA-sim's Workload/HardwareResource.
    assert_eq!(est.finish_ns, reference_ns as u64, "{err}");
    // Per stage (max over its NPUs), from ASTRA-sim's per-NPU output.
    let stage1 = (8..16).map(|r| est.npu_finish_ns[r]).max().unwrap();
    assert_eq!(stage1, stage1_ns);
    // ASTRA-sim's GPU time of the NPU that finishes last: 145,153,528 ns (roofline sum).
    let last = (0..16).max_by_key(|&r| est.npu_finish_ns[r]).unwrap();
    assert_eq!(est.npu_compute_ns[last], 145_153_528);
    // The first pipeline stage finishes last (it waits for the later stages' backward).
    assert!(est.npu_finish_ns[0] > est.npu_finish_ns[8]);
}

#[test]
fn astra_gpt_6_7b_on_switch_8x2() {
    check(
        &gpt(),
        "net_sw8x2.yml",
        "sys_ring_roofline.json",
        203_537_965.0,
        179_872_080,
    );
}

#[test]
fn astra_gpt_6_7b_on_flat_switch_16() {
    check(
        &gpt(),
        "net_sw16_1d.yml",
        "sys_ring_roofline_1d.json",
        535_871_556.0,
        440_714_212,
    );
}

#[test]
fn astra_missing_comm_groups_is_a_clear_error() {
    let g = gpt();
    let net = AstraNetwork::read(&data("net_sw16_1d.yml")).unwrap();
    let sys = AstraSystem::read(&data("sys_ring_roofline_1d.json")).unwrap();
    let knobs = Knobs::default();
    let ctx = trace::Ctx {
        net: &net,
        sys: &sys,
        knobs: &knobs,
        groups: None,
    };
    let e = trace::convert(&g.traces, &ctx).unwrap_err().to_string();
    assert!(e.contains("--comm-group-configuration"), "{e}");
}

#[test]
fn astra_read_from_files_and_cli() {
    let g = gpt();
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("astrolabe_gpt_{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for (r, t) in g.traces.iter().enumerate() {
        chakra::write_file(&chakra::rank_path(&dir.join("w"), r), t).unwrap();
    }
    std::fs::write(
        dir.join("w.json"),
        serde_json::to_string(&g.groups).unwrap(),
    )
    .unwrap();
    let out = assert_cmd::Command::cargo_bin("astrolabe")
        .unwrap()
        .args([
            "astra",
            "--model",
            "physical",
            "--format",
            "json",
            "--network",
        ])
        .arg(data("net_sw8x2.yml"))
        .arg("--system")
        .arg(data("sys_ring_roofline.json"))
        .arg("--workload")
        .arg(dir.join("w"))
        .arg("--comm-group-configuration")
        .arg(dir.join("w.json"))
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let j: serde_json::Value = serde_json::from_slice(&out).unwrap();
    let rows = &j["tables"]["workload"];
    assert_eq!(rows[0]["model"], "astra");
    let finish = rows[0]["finish_ns"].as_f64().unwrap();
    assert!((finish / 203_537_965.0 - 1.0).abs() < 0.10, "{finish}");
    // Our physical model on the same DAGs: at least the compute time of the last NPU.
    assert_eq!(rows[1]["model"], "physical");
    assert!(rows[1]["finish_ns"].as_f64().unwrap() > 145_153_528.0);
    std::fs::remove_dir_all(&dir).ok();
}
