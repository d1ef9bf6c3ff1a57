//! A system file's own `gpu_hour_price`: compare prices that system's columns with it,
//! a flag overrides it, and a bad price is refused naming the file and the key.

use crate::common;

use common::{bin, ok, tmp};
use serde_json::Value;
use std::path::{Path, PathBuf};

/// The `name` preset with `gpu_hour_price = price` written after its `device` line.
fn priced(dir: &Path, name: &str, price: &str) -> PathBuf {
    let text = std::fs::read_to_string(format!("presets/systems/{name}.toml")).unwrap();
    let mut out = String::new();
    for line in text.lines() {
        out.push_str(line);
        out.push('\n');
        if line.starts_with("device = ") {
            out.push_str(&format!("gpu_hour_price = {price}\n"));
        }
    }
    let path = dir.join(format!("{name}.toml"));
    std::fs::write(&path, out).unwrap();
    path
}

fn compare(systems: &[&Path], extra: &[&str]) -> Vec<Value> {
    let mut a = vec!["compare", "--model", "gpt3-5b", "--gpus", "8", "--tp", "2"];
    for s in systems {
        a.extend(["--system", s.to_str().unwrap()]);
    }
    a.extend(["--tokens", "1B", "--format", "json"]);
    a.extend(extra);
    let v: Value = serde_json::from_str(&ok(&a)).unwrap();
    v["variants"].as_array().unwrap().clone()
}

/// cost per 10⁹ tokens = price · GPU-hours per 10⁹ tokens = price · 10⁹/(tokens/s)·GPUs/3600.
#[track_caller]
fn check_cost(col: &Value, price: f64) {
    let tps = col["tokens_per_s"].as_f64().unwrap();
    let hours = 1e9 / tps * 8.0 / 3600.0;
    approx::assert_relative_eq!(col["gpu_hour_price"].as_f64().unwrap(), price);
    approx::assert_relative_eq!(
        col["cost_per_billion_tokens"].as_f64().unwrap(),
        price * hours,
        max_relative = 1e-9
    );
}

#[test]
fn each_system_file_prices_its_own_columns() {
    let dir = tmp("compare_price");
    let h100 = priced(&dir, "dgx-h100", "2.5");
    let b200 = priced(&dir, "dgx-b200", "4");
    let cols = compare(&[&h100, &b200], &[]);
    check_cost(&cols[0], 2.5);
    check_cost(&cols[1], 4.0);
    // A flag for one system (named as it was given: its path) overrides its file; the
    // other keeps its own.
    let one = format!("{}=3", b200.display());
    let cols = compare(&[&h100, &b200], &["--gpu-hour-price", &one]);
    check_cost(&cols[0], 2.5);
    check_cost(&cols[1], 3.0);
    // A flag for every column overrides both files.
    let cols = compare(&[&h100, &b200], &["--gpu-hour-price", "1.5"]);
    check_cost(&cols[0], 1.5);
    check_cost(&cols[1], 1.5);
    // A system without a price has no cost.
    let cols = compare(&[&h100, Path::new("dgx-b200")], &[]);
    check_cost(&cols[0], 2.5);
    assert!(cols[1]["cost_per_billion_tokens"].is_null(), "{}", cols[1]);
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn a_bad_price_in_a_system_file_is_refused() {
    let dir = tmp("compare_price_bad");
    for bad in ["-1", "nan", "\"cheap\""] {
        let path = priced(&dir, "dgx-h100", bad);
        let out = bin()
            .args(["estimate", "--model", "gpt3-5b", "--gpus", "8", "--system"])
            .arg(&path)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{bad}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains("dgx-h100.toml") && err.contains("gpu_hour_price"),
            "{bad}: {err}"
        );
    }
    // −0 is read as 0 (never printed as −0).
    let path = priced(&dir, "dgx-h100", "-0.0");
    let cols = compare(&[&path], &[]);
    assert_eq!(cols[0]["gpu_hour_price"].as_f64(), Some(0.0));
    assert!(!cols[0]["gpu_hour_price"].to_string().contains('-'));
    std::fs::remove_dir_all(&dir).ok();
}
