//! `astrolabe list` and `astrolabe show`, and the acceptance walk over the shipped presets:
//! every file in `models/` and `presets/` is built in, evaluates without error, and
//! `show` prints TOML that loads back to the same validated value.

use assert_cmd::Command;
use astrolabe::catalog::{self, Kind};
use astrolabe::compare::{self, builtin};
use std::path::{Path, PathBuf};

fn bin() -> Command {
    Command::cargo_bin("astrolabe").expect("binary built")
}

fn stems(folder: &str) -> Vec<String> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join(folder);
    let mut v: Vec<String> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .map(|p| p.file_stem().unwrap().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

fn show(kind: &str, name: &str) -> String {
    let out = bin().args(["show", kind, name]).output().expect("runs");
    assert!(
        out.status.success(),
        "show {kind} {name}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("utf-8")
}

fn tmp(name: &str) -> PathBuf {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("astrolabe-catalog-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("tmp dir");
    dir.join(name)
}

#[test]
fn every_preset_file_is_built_in() {
    for kind in [Kind::Model, Kind::Device, Kind::System] {
        let mut names: Vec<String> = catalog::names(kind).iter().map(|s| s.to_string()).collect();
        names.sort();
        assert_eq!(
            stems(kind.folder()),
            names,
            "{} files vs built-ins",
            kind.name()
        );
    }
}

/// A scenario whose baseline is `model` on `system` over its innermost dimension (a
/// plain data-parallel plan, valid for every model kind), with one variant per device
/// (for a model with Gated DeltaNet layers, per device with measured delta-rule times:
/// the others refuse it, `gated_deltanet_needs_measured_kernel_times`).
fn walk_scenario(model: &str, system: &str, gpus: u32, precision: &str) -> String {
    let mut s = format!(
        "model = \"{model}\"\nsystem = \"{system}\"\n[plan]\ngpus = {gpus}\nprecision = \"{precision}\"\n"
    );
    for d in catalog::names(Kind::Device) {
        let dev = catalog::device(d).unwrap_or_else(|e| panic!("device {d}: {e}"));
        if has_gdn(model) && dev.spec.efficiency.gdn_fwd.is_none() {
            continue;
        }
        // Each device in a precision it has (V100 has no bf16, TPU v4 no fp16).
        let precision = if dev.spec.matrix.bf16.is_some() {
            "bf16"
        } else {
            "fp16"
        };
        s.push_str(&format!(
            "[[variant]]\nname = \"{d}\"\nsystem.device = \"{d}\"\nplan.precision = \"{precision}\"\n"
        ));
    }
    s
}

/// Whether a catalog model has Gated DeltaNet layers.
fn has_gdn(model: &str) -> bool {
    catalog::model(model)
        .ok()
        .and_then(|m| m.transformer().and_then(|t| t.hybrid).and_then(|h| h.gdn))
        .is_some()
}

#[test]
fn every_model_system_and_device_evaluates() {
    for system in catalog::names(Kind::System) {
        let sys = catalog::system(system).unwrap_or_else(|e| panic!("system {system}: {e}"));
        let gpus = sys.topology.dims()[0].size;
        let precision = if sys.device.spec.matrix.bf16.is_some() {
            "bf16"
        } else {
            "fp16"
        };
        for model in catalog::names(Kind::Model) {
            let text = walk_scenario(model, system, gpus, precision);
            if has_gdn(model) && sys.device.spec.efficiency.gdn_fwd.is_none() {
                // No measured delta-rule times on this system's device: refused by name.
                let e = compare::parse(&text, Path::new("walk.toml"))
                    .and_then(|s| s.evaluate())
                    .map(|_| ())
                    .expect_err("a Gated DeltaNet model without measured kernel times");
                assert!(e.to_string().contains("efficiency.gdn_fwd"), "{e}");
                continue;
            }
            let cmp = compare::parse(&text, Path::new("walk.toml"))
                .and_then(|s| s.evaluate())
                .unwrap_or_else(|e| panic!("{model} on {system}: {e}"));
            for c in &cmp.columns {
                let t = c.estimate.time.total.get();
                assert!(
                    t.is_finite() && t > 0.0,
                    "{model} on {system} with {}: {t}",
                    c.name
                );
            }
        }
    }
}

#[test]
fn show_loads_back_to_the_same_value_for_every_preset() {
    for name in catalog::names(Kind::Model) {
        let p = tmp(&format!("{name}.model.toml"));
        std::fs::write(&p, show("model", name)).expect("write");
        let back = catalog::model(&p.to_string_lossy()).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(
            back,
            catalog::model(name).expect("built-in"),
            "model {name}"
        );
    }
    for name in catalog::names(Kind::Device) {
        let p = tmp(&format!("{name}.device.toml"));
        std::fs::write(&p, show("device", name)).expect("write");
        let back = catalog::device(&p.to_string_lossy()).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(
            back,
            catalog::device(name).expect("built-in"),
            "device {name}"
        );
    }
    for name in catalog::names(Kind::System) {
        let p = tmp(&format!("{name}.system.toml"));
        std::fs::write(&p, show("system", name)).expect("write");
        let back = catalog::system(&p.to_string_lossy()).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(
            back,
            catalog::system(name).expect("built-in"),
            "system {name}"
        );
    }
    for name in builtin::names() {
        let p = tmp(&format!("{name}.toml"));
        std::fs::write(&p, show("scenario", name)).expect("write");
        let back = compare::load(&p.to_string_lossy())
            .and_then(|s| s.evaluate())
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        let orig = compare::load(name)
            .and_then(|s| s.evaluate())
            .expect("built-in");
        assert_eq!(back.columns.len(), orig.columns.len(), "scenario {name}");
        for (a, b) in back.columns.iter().zip(&orig.columns) {
            assert_eq!(
                (&a.name, &a.plan, &a.estimate),
                (&b.name, &b.plan, &b.estimate)
            );
            assert_eq!(
                (&a.model, &a.system),
                (&b.model, &b.system),
                "scenario {name}"
            );
        }
    }
}

#[test]
fn list_names_every_preset_with_a_description() {
    let out = bin()
        .args(["list", "--format", "json"])
        .output()
        .expect("runs");
    assert!(out.status.success());
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    let rows = v["tables"]["catalog"].as_array().expect("catalog table");
    let has = |kind: &str, name: &str| {
        rows.iter()
            .any(|r| r["kind"] == kind && r["name"] == name && r["description"] != "")
    };
    for (kind, k) in [
        ("model", Kind::Model),
        ("device", Kind::Device),
        ("system", Kind::System),
    ] {
        for n in catalog::names(k) {
            assert!(has(kind, n), "{kind} {n} missing or undescribed");
        }
    }
    for n in builtin::names() {
        assert!(has("scenario", n), "scenario {n} missing or undescribed");
    }
    let csv = bin()
        .args(["list", "system", "--format", "csv"])
        .output()
        .expect("runs");
    let text = String::from_utf8(csv.stdout).expect("utf-8");
    assert!(
        text.starts_with("kind,name,description\nsystem,dgx-a100,"),
        "{text}"
    );
}

#[test]
fn show_as_json_flattens_keys() {
    let out = bin()
        .args(["show", "system", "dgx-a100", "--format", "json"])
        .output()
        .expect("runs");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    let rows = v["tables"]["dgx-a100"].as_array().expect("table");
    assert!(
        rows.iter()
            .any(|r| r["key"] == "network.dims.0.bandwidth" && r["value"] == "240 GB/s")
    );
}

#[test]
fn show_unknown_name_suggests_the_closest() {
    bin()
        .args(["show", "system", "dgx-a10"])
        .assert()
        .code(2)
        .stderr(predicates::str::contains("did you mean 'dgx-a100'"));
    bin()
        .args(["show", "scenario", "a100-vs-a80"])
        .assert()
        .code(2)
        .stderr(predicates::str::contains("did you mean 'a100-vs-a800'"));
}
