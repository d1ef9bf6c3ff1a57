//! `astrolabe compare`: every shipped scenario evaluates and matches its golden output;
//! overrides merge as documented; bad scenario files name the file, the line and the
//! variant; the flag form and `--plot` work end to end.
//!
//! Goldens live in `tests/golden/compare/`; regenerate them with
//! `UPDATE_GOLDEN=1 cargo test --release --test suite compare::` and review the diff.

use assert_cmd::Command;
use astrolabe::compare::{self, builtin};
use std::path::{Path, PathBuf};

fn bin() -> Command {
    Command::cargo_bin("astrolabe").expect("binary built")
}

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Parses and evaluates scenario `text`, returning the error message.
#[track_caller]
fn error_of(text: &str) -> String {
    let origin = Path::new("bad.toml");
    match compare::parse(text, origin).and_then(|s| s.evaluate()) {
        Ok(_) => panic!("expected an error for:\n{text}"),
        Err(e) => e.to_string(),
    }
}

#[track_caller]
fn assert_mentions(msg: &str, parts: &[&str]) {
    for p in parts {
        assert!(msg.contains(p), "error should mention {p:?}:\n{msg}");
    }
}

const BASE: &str = r#"model = "gpt3-175b"
system = "dgx-a100"

[plan]
gpus = 64
tp = 8
pp = 8
global_batch = 64
"#;

#[test]
fn every_shipped_scenario_file_is_built_in_and_evaluates() {
    let dir = root().join(builtin::FOLDER);
    let mut on_disk: Vec<String> = std::fs::read_dir(&dir)
        .expect("presets/scenarios exists")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .map(|p| p.file_stem().unwrap().to_string_lossy().into_owned())
        .collect();
    on_disk.sort();
    let mut embedded: Vec<String> = builtin::names().iter().map(|s| s.to_string()).collect();
    embedded.sort();
    assert_eq!(
        on_disk, embedded,
        "every scenario file must be listed in SCENARIOS"
    );
    for name in &on_disk {
        let path = dir.join(format!("{name}.toml"));
        let by_path = compare::load(&path.to_string_lossy())
            .and_then(|s| s.evaluate())
            .unwrap_or_else(|e| panic!("scenario {name}: {e}"));
        assert!(by_path.columns.len() >= 2, "{name} compares something");
        for c in &by_path.columns {
            let t = c.estimate.time.total.get();
            assert!(t.is_finite() && t > 0.0, "{name}/{}: time {t}", c.name);
        }
    }
}

#[test]
fn golden_outputs_of_shipped_scenarios() {
    let update = std::env::var_os("UPDATE_GOLDEN").is_some();
    let dir = root().join("tests/golden/compare");
    let mut stale = Vec::new();
    for name in builtin::names() {
        for (fmt, ext) in [("table", "txt"), ("csv", "csv")] {
            let out = bin()
                .args(["compare", name, "--format", fmt])
                .output()
                .expect("runs");
            assert!(
                out.status.success(),
                "{name}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            let got = String::from_utf8(out.stdout).expect("utf-8");
            let path = dir.join(format!("{name}.{ext}"));
            if update {
                std::fs::create_dir_all(&dir).expect("mkdir golden");
                std::fs::write(&path, &got).expect("write golden");
            } else if std::fs::read_to_string(&path).ok().as_deref() != Some(got.as_str()) {
                stale.push(format!("{}\n{got}", path.display()));
            }
        }
    }
    assert!(
        stale.is_empty(),
        "output differs from golden (rerun with UPDATE_GOLDEN=1 and review):\n{}",
        stale.join("\n")
    );
}

#[test]
fn variant_overrides_are_deep_merged() {
    let text = format!(
        "{BASE}\n[[variant]]\nname = \"half NVLink\"\nsystem.network.dims.0.bandwidth = \"120 GB/s\"\n\
         [[variant]]\nname = \"pp 4\"\nplan.pp = 4\nplan.tp = 8\n"
    );
    let cmp = compare::parse(&text, Path::new("ok.toml"))
        .and_then(|s| s.evaluate())
        .expect("valid scenario");
    let [base, half, pp4] = &cmp.columns[..] else {
        panic!("three columns")
    };
    // Only the overridden field changes; everything else is the baseline's.
    let d0 = |c: &compare::Column| c.system.topology.dims()[0];
    assert_eq!(d0(half).bandwidth.get(), 120e9);
    assert_eq!(d0(base).bandwidth.get(), 240e9);
    assert_eq!(d0(half).latency, d0(base).latency);
    assert_eq!(
        half.system.topology.dims()[1],
        base.system.topology.dims()[1]
    );
    assert_eq!((pp4.plan.tp, pp4.plan.pp, pp4.plan.dp), (8, 4, 2));
    assert_eq!(pp4.plan.global_batch, 64);
    // Halving the TP bandwidth cannot make the iteration faster.
    assert!(half.estimate.time.total >= base.estimate.time.total);
}

#[test]
fn device_fields_can_be_overridden_through_the_system() {
    let text =
        format!("{BASE}\n[[variant]]\nname = \"40 GiB\"\nsystem.device.memory = \"40 GiB\"\n");
    let cmp = compare::parse(&text, Path::new("ok.toml"))
        .and_then(|s| s.evaluate())
        .expect("valid scenario");
    assert_eq!(
        cmp.columns[1].estimate.memory.capacity.get(),
        40.0 * (1u64 << 30) as f64
    );
    assert_eq!(
        cmp.columns[0].estimate.memory.capacity.get(),
        80.0 * (1u64 << 30) as f64
    );
}

#[test]
fn unknown_top_level_field_names_file_and_line() {
    let msg = error_of("modle = \"gpt3-175b\"\nsystem = \"dgx-a100\"\n");
    assert_mentions(&msg, &["bad.toml", "line 1", "modle"]);
}

#[test]
fn unknown_variant_field_names_file_and_line() {
    let msg = error_of(&format!(
        "{BASE}\n[[variant]]\nname = \"x\"\nplann.tp = 2\n"
    ));
    assert_mentions(&msg, &["bad.toml", "line 12", "plann"]);
}

#[test]
fn override_of_a_non_existent_key_names_file_line_and_variant() {
    let text = format!(
        "{BASE}\n[[variant]]\nname = \"ok\"\nplan.tp = 4\n\n[[variant]]\nname = \"typo\"\nplan.pp = 4\nplan.tpp = 2\n"
    );
    let msg = error_of(&text);
    assert_mentions(
        &msg,
        &[
            "bad.toml",
            "line 17",
            "variant 'typo'",
            "plan.tpp",
            "unknown field `tpp`",
        ],
    );
    let deep = format!(
        "{BASE}\n[[variant]]\nname = \"bw\"\nsystem.network.dims.1.bandwith = \"1 GB/s\"\n"
    );
    assert_mentions(
        &error_of(&deep),
        &["bad.toml", "line 12", "variant 'bw'", "bandwith"],
    );
    let past_end =
        format!("{BASE}\n[[variant]]\nname = \"dim 3\"\nsystem.network.dims.3.size = 2\n");
    assert_mentions(
        &error_of(&past_end),
        &["bad.toml", "line 12", "variant 'dim 3'", "no such element"],
    );
}

#[test]
fn variant_making_the_plan_invalid_names_file_line_and_variant() {
    let text = format!("{BASE}\n[[variant]]\nname = \"tp 7\"\nplan.tp = 7\n");
    assert_mentions(
        &error_of(&text),
        &[
            "bad.toml",
            "line 12",
            "variant 'tp 7'",
            "plan.tp",
            "invalid plan",
        ],
    );
    // Two overrides valid alone but not together: the variant's own line is named.
    let clash =
        format!("{BASE}\n[[variant]]\nname = \"clash\"\nplan.pp = 4\nplan.global_batch = 63\n");
    assert_mentions(
        &error_of(&clash),
        &["bad.toml", "variant 'clash'", "global_batch"],
    );
}

#[test]
fn bad_baseline_names_file_and_line() {
    let text = "model = \"gpt3-175b\"\nsystem = \"dgx-a100\"\n[plan]\ntp = 5\n";
    assert_mentions(&error_of(text), &["bad.toml", "baseline", "tp"]);
}

#[test]
fn flag_form_compares_models_and_systems() {
    let out = bin()
        .args([
            "compare",
            "--model",
            "gpt3-175b",
            "--system",
            "dgx-a100",
            "--system",
            "dgx-a100",
            "--gpus",
            "64",
            "--tp",
            "8",
            "--pp",
            "8",
            "--format",
            "json",
        ])
        .output()
        .expect("runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    let cols = v["variants"].as_array().expect("variants");
    assert_eq!(cols.len(), 2);
    assert!(
        cols[1]["iteration_time_s"]
            .as_f64()
            .is_some_and(|t| t > 0.0),
        "{v}"
    );
    assert_eq!(cols[1]["system"], "dgx-a100");
}

#[test]
fn plot_is_a_well_formed_svg_with_one_bar_per_variant() {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("astrolabe-compare-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("tmp dir");
    let svg = dir.join("breakdown.svg");
    bin()
        .args(["compare", "dp-vs-tp-vs-pp", "--plot"])
        .arg(&svg)
        .assert()
        .success();
    let text = std::fs::read_to_string(&svg).expect("svg written");
    let doc = roxmltree::Document::parse(&text).expect("well-formed XML");
    assert_eq!(doc.root_element().tag_name().name(), "svg");
    let labels: Vec<&str> = doc
        .descendants()
        .filter(|n| n.has_tag_name("text"))
        .filter_map(|n| n.text())
        .map(str::trim)
        .collect();
    for name in ["DP 16", "TP 8 × DP 2", "PP 8 × DP 2", "forward", "backward"] {
        assert!(labels.contains(&name), "label {name:?} missing: {labels:?}");
    }
    let png = dir.join("x.png");
    bin()
        .args(["compare", "dp-vs-tp-vs-pp", "--plot"])
        .arg(&png)
        .assert()
        .code(2);
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn scenario_and_flags_together_is_an_error() {
    bin()
        .args(["compare", "dp-vs-tp-vs-pp", "--tp", "2"])
        .assert()
        .code(2)
        .stderr(predicates::str::contains("[[variant]]"));
}

#[test]
fn presets_resolve_relative_to_the_scenario_and_variants_can_swap_them() {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("astrolabe-rel-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("tmp dir");
    let model = astrolabe::catalog::source(astrolabe::catalog::Kind::Model, "gpt3-175b")
        .expect("built-in")
        .replace("name = \"gpt3-175b\"", "name = \"my-gpt\"");
    std::fs::write(dir.join("my-gpt.toml"), model).expect("write model");
    let text = "model = \"./my-gpt.toml\"\nsystem = \"dgx-a100\"\n[plan]\ngpus = 64\ntp = 8\npp = 8\n\
                [[variant]]\nname = \"22B\"\nmodel = \"megatron-gpt-22b\"\n";
    let path = dir.join("s.toml");
    std::fs::write(&path, text).expect("write scenario");
    let cmp = compare::load(&path.to_string_lossy())
        .and_then(|s| s.evaluate())
        .expect("valid scenario");
    assert_eq!(cmp.columns[0].model.name(), "my-gpt");
    assert_eq!(cmp.columns[1].model.name(), "megatron-gpt-22b");
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn cost_is_gpu_hours_times_the_price() {
    let out = bin()
        .args([
            "compare",
            "dp-vs-tp-vs-pp",
            "--gpu-hour-price",
            "2.5",
            "--tokens",
            "300B",
        ])
        .args(["--format", "json"])
        .output()
        .expect("runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    let col = v["variants"]
        .as_array()
        .expect("variants")
        .iter()
        .find(|c| c["name"] == "DP 16")
        .expect("the DP 16 column");
    let get = |path: &[&str]| {
        path.iter()
            .fold(col, |v, k| &v[*k])
            .as_f64()
            .unwrap_or_else(|| panic!("{path:?}"))
    };
    // GPU-hours = tokens / (tokens/s) · GPUs / 3600; cost = GPU-hours · price.
    let tps = get(&["tokens_per_s"]);
    let hours = 300e9 / tps * get(&["plan", "gpus"]) / 3600.0;
    approx::assert_relative_eq!(get(&["training", "gpu_hours"]), hours, max_relative = 1e-12);
    approx::assert_relative_eq!(
        get(&["cost_per_billion_tokens"]),
        2.5 * hours / 300.0,
        max_relative = 1e-12
    );
    approx::assert_relative_eq!(
        get(&["training", "time_s"]),
        300e9 / tps,
        max_relative = 1e-12
    );
}

#[test]
fn a_preset_key_starts_a_variant_from_another_preset() {
    let text = format!(
        "{BASE}\n[[variant]]\nname = \"h200\"\nsystem.preset = \"dgx-h100\"\nsystem.device = \"h200\"\n\
         [[variant]]\nname = \"typo\"\nsystem.preset = \"dgx-h10\"\n"
    );
    let err = error_of(&text);
    assert_mentions(
        &err,
        &[
            "bad.toml",
            "line 16",
            "variant 'typo'",
            "did you mean 'dgx-h100'",
        ],
    );
    let ok = text
        .split("[[variant]]\nname = \"typo\"")
        .next()
        .expect("prefix")
        .to_string();
    let cmp = compare::parse(&ok, Path::new("ok.toml"))
        .and_then(|s| s.evaluate())
        .expect("valid scenario");
    let h200 = &cmp.columns[1].system;
    let h100 = astrolabe::catalog::system("dgx-h100").expect("built-in");
    assert_eq!(h200.device.spec.name, "h200");
    assert_eq!(
        h200.topology.dims()[0],
        h100.topology.dims()[0],
        "network is the H100 pod's"
    );
}

#[test]
fn docs_example_scenario_evaluates() {
    let doc = std::fs::read_to_string(root().join("docs/presets.md")).expect("docs/presets.md");
    let toml = doc
        .split("```toml\n")
        .nth(1)
        .and_then(|s| s.split("```").next())
        .expect("a TOML example");
    let cmp = compare::parse(toml, Path::new("docs/presets.md"))
        .and_then(|s| s.evaluate())
        .expect("the docs example is valid");
    assert_eq!(cmp.columns.len(), 3);
    assert!(cmp.columns.iter().all(|c| c.gpu_hour_price == Some(2.0)));
}
