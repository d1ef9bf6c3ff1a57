//! The memory reserve (issue 20, item 2): capacity set aside for the CUDA context, NCCL
//! buffers, library workspaces and allocator fragmentation, `1.5 GiB + 3 %` of HBM by
//! default, `--memory-reserve` to change it; fit checks and sweeps use it.

use crate::common;
use common::{bin, json};

const GIB: f64 = 1073741824.0;

/// Llama 3 70B on 64 H100 as NeMo published it (TP 4, PP 8, v = 5, batch 128, BF16).
const LLAMA70: [&str; 15] = [
    "estimate",
    "--model",
    "llama3-70b",
    "--system",
    "dgx-h100",
    "--gpus",
    "64",
    "--tp",
    "4",
    "--pp",
    "8",
    "--virtual-stages",
    "5",
    "--global-batch",
    "128",
];

fn llama70(reserve: Option<&str>) -> Vec<String> {
    let mut a: Vec<String> = LLAMA70.iter().map(|s| s.to_string()).collect();
    if let Some(r) = reserve {
        a.push(format!("--memory-reserve={r}"));
    }
    a
}

#[test]
fn default_reserve_is_1_5_gib_plus_3_percent() {
    let a = llama70(None);
    let v = json(&a.iter().map(String::as_str).collect::<Vec<_>>());
    // 80 GiB: 1.5 + 0.03·80 = 3.9 GiB.
    let reserve = v["memory_reserve_bytes"].as_f64().unwrap();
    approx::assert_relative_eq!(reserve / GIB, 3.9, max_relative = 1e-12);
    let (cap, used) = (
        v["memory_capacity_bytes"].as_f64().unwrap(),
        v["memory_per_device_bytes"].as_f64().unwrap(),
    );
    approx::assert_relative_eq!(
        v["memory_headroom_bytes"].as_f64().unwrap(),
        cap - reserve - used
    );
    assert_eq!(v["fits"], true);
}

#[test]
fn a_larger_reserve_turns_the_verdict_and_says_why() {
    // The plan uses about 71.8 GiB: a 9 GiB reserve leaves 71 GiB, so it does not fit.
    let a = llama70(Some("9GiB"));
    let out = bin().args(&a).output().unwrap();
    assert_eq!(out.status.code(), Some(3));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("71.00 GiB available (80.00 GiB capacity less a 9.00 GiB reserve; --memory-reserve sets it)"),
        "{text}"
    );
    // No reserve at all: it fits again.
    let a = llama70(Some("0GiB"));
    let v = json(&a.iter().map(String::as_str).collect::<Vec<_>>());
    assert_eq!(v["memory_reserve_bytes"].as_f64(), Some(0.0));
    assert_eq!(v["fits"], true);
}

#[test]
fn a_negative_reserve_is_a_usage_error() {
    let out = bin().args(llama70(Some("-1GiB"))).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("memory"));
}

/// No ranked plan of a default sweep uses more than capacity minus the reserve, and each
/// row reports its headroom.
#[test]
fn sweep_rows_leave_the_reserve_free() {
    for reserve in [None, Some("10GiB")] {
        let mut a = vec![
            "sweep",
            "--model",
            "llama3-8b",
            "--system",
            "dgx-h100",
            "--gpus",
            "64",
            "--global-batch",
            "512",
            "--top",
            "20",
        ];
        let flag;
        if let Some(r) = reserve {
            flag = format!("--memory-reserve={r}");
            a.push(&flag);
        }
        let v = json(&a);
        let limit = 80.0 - reserve.map_or(3.9, |_| 10.0);
        let rows = v["top"].as_array().unwrap();
        assert_eq!(rows.len(), 20);
        for r in rows {
            let used = r["memory_per_device_bytes"].as_f64().unwrap() / GIB;
            let head = r["memory_headroom_bytes"].as_f64().unwrap() / GIB;
            assert!(used <= limit + 1e-9, "{used} GiB > {limit} GiB");
            approx::assert_relative_eq!(head, limit - used, max_relative = 1e-9);
        }
    }
}
