//! The output contract (issue 14): typed JSON with top-level SI scalars and a
//! `schema_version`, checked against the JSON Schema generated from the types; one flat
//! CSV table per file; exit status 3 for a plan that does not fit; the defaults of
//! today's practice. CLI conventions are in tests/cli_conventions.rs.

use crate::common;

use common::{GPT3, bin, json, text};
use predicates::str::contains;
use serde_json::Value;

/// Resolves `{"$ref": "#/$defs/X"}` against the root schema.
fn resolve<'a>(root: &'a Value, s: &'a Value) -> &'a Value {
    match s.get("$ref").and_then(Value::as_str) {
        Some(r) => {
            let name = r.trim_start_matches("#/$defs/");
            &root["$defs"][name]
        }
        None => s,
    }
}

/// A small structural check of `v` against `schema`: every required key is there, no key
/// is unknown, and types match, recursively (objects, arrays, `anyOf` for options).
#[track_caller]
fn check(root: &Value, schema: &Value, v: &Value, path: &str) {
    let s = resolve(root, schema);
    if let Some(any) = s.get("anyOf").and_then(Value::as_array) {
        let ok = any.iter().any(|alt| {
            let alt = resolve(root, alt);
            alt["type"] == "null" && v.is_null() || !v.is_null() && alt["type"] != "null"
        });
        assert!(ok, "{path}: {v} matches no alternative");
        if let Some(alt) = any.iter().find(|a| resolve(root, a)["type"] != "null")
            && !v.is_null()
        {
            check(root, alt, v, path);
        }
        return;
    }
    let types: Vec<&str> = match &s["type"] {
        Value::String(t) => vec![t.as_str()],
        Value::Array(a) => a.iter().filter_map(Value::as_str).collect(),
        _ => vec![],
    };
    let ok = types.is_empty()
        || types.iter().any(|t| match *t {
            "object" => v.is_object(),
            "array" => v.is_array(),
            "string" => v.is_string(),
            "boolean" => v.is_boolean(),
            "integer" => v.is_u64() || v.is_i64(),
            "number" => v.is_number(),
            "null" => v.is_null(),
            _ => false,
        });
    assert!(ok, "{path}: {v} is not of type {types:?}");
    if let Some(obj) = v.as_object() {
        let props = s["properties"].as_object().cloned().unwrap_or_default();
        for r in s["required"].as_array().into_iter().flatten() {
            let r = r.as_str().unwrap();
            assert!(obj.contains_key(r), "{path}: missing required '{r}'");
        }
        for (k, x) in obj {
            let sub = props
                .get(k)
                .unwrap_or_else(|| panic!("{path}: '{k}' is not in the schema"));
            check(root, sub, x, &format!("{path}.{k}"));
        }
    }
    if let (Some(items), Some(arr)) = (s.get("items"), v.as_array()) {
        for (i, x) in arr.iter().enumerate() {
            check(root, items, x, &format!("{path}[{i}]"));
        }
    }
}

#[track_caller]
fn conforms(schema_name: &str, v: &Value) {
    let s: Value = serde_json::from_str(&text(&["schema", schema_name])).unwrap();
    check(&s, &s, v, schema_name);
}

#[test]
fn estimate_json_has_top_level_si_scalars_and_matches_its_schema() {
    let j = json(&GPT3);
    conforms("estimate", &j);
    assert_eq!(j["schema_version"], 1);
    let t = j["iteration_time_s"].as_f64().unwrap();
    // tokens/s = global batch · sequence length / iteration time (GPT-3: s = 2048).
    let tps = j["tokens_per_s"].as_f64().unwrap();
    assert!(
        (tps - 1536.0 * 2048.0 / t).abs() / tps < 1e-9,
        "{tps} vs {t}"
    );
    // MFU is a fraction, and integers print as integers.
    let mfu = j["mfu"].as_f64().unwrap();
    assert!(mfu > 0.05 && mfu < 1.0, "{mfu}");
    assert!(j["plan"]["gpus"].is_u64() && j["plan"]["dp"] == 8);
    // The iteration is the sum of its parts (docs/schema.md).
    let b = &j["time_breakdown"];
    let mut sum = 0.0;
    for k in [
        "forward_s",
        "backward_s",
        "recompute_s",
        "optimizer_s",
        "pipeline_bubble_s",
        "interference_s",
    ] {
        sum += b[k].as_f64().unwrap();
    }
    for (_, c) in b["communication"].as_object().unwrap() {
        sum += c["exposed_s"].as_f64().unwrap();
    }
    assert!((sum - t).abs() < 1e-9 * t, "{sum} vs {t}");
}

#[test]
fn every_typed_output_matches_its_schema() {
    let s = json(&[
        "sweep",
        "--model",
        "llama3-8b",
        "--system",
        "dgx-h100",
        "--gpus",
        "16",
        "--global-batch",
        "64",
        "--top",
        "3",
    ]);
    conforms("sweep", &s);
    let mfu = s["top"][0]["mfu"].as_f64().unwrap();
    assert!(mfu > 0.0 && mfu < 1.0, "sweep MFU is a fraction: {mfu}");
    conforms("compare", &json(&["compare", "gpu-generations"]));
    conforms(
        "collective",
        &json(&[
            "collective",
            "all-reduce",
            "--system",
            "dgx-h100",
            "--size",
            "8..1M",
        ]),
    );
}

#[test]
fn docs_schema_names_every_field() {
    let doc =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/schema.md")).unwrap();
    fn names(v: &Value, out: &mut Vec<String>) {
        if let Some(p) = v.get("properties").and_then(Value::as_object) {
            out.extend(p.keys().cloned());
        }
        match v {
            Value::Object(m) => m.values().for_each(|x| names(x, out)),
            Value::Array(a) => a.iter().for_each(|x| names(x, out)),
            _ => {}
        }
    }
    for schema in [
        "estimate",
        "sweep",
        "sweep-all-row",
        "compare",
        "collective",
    ] {
        let s: Value = serde_json::from_str(&text(&["schema", schema])).unwrap();
        let mut v = Vec::new();
        names(&s, &mut v);
        for n in v {
            assert!(
                doc.contains(&format!("`{n}`")),
                "{schema}: '{n}' undocumented"
            );
        }
    }
}

#[test]
fn csv_is_one_table_per_file_and_table_picks_one() {
    let c = text(&[&GPT3[..], &["--format", "csv"]].concat());
    let lines: Vec<&str> = c.lines().collect();
    assert_eq!(lines.len(), 2, "one header, one row: {c}");
    assert!(lines[0].contains("iteration_time_s") && lines[0].contains("plan.tp"));
    let t = text(&[&GPT3[..], &["--format", "csv", "--table", "time"]].concat());
    assert!(
        t.starts_with("component,time_s,hidden_s,bytes_per_device\n"),
        "{t}"
    );
    // Header, 7 components (forward, backward, recompute, optimizer, bubble,
    // interference, host idle) and 6 communication classes (TP, SP, EP, PP, DP, CP).
    assert_eq!(t.lines().count(), 14);
    bin()
        .args(GPT3)
        .args(["--format", "csv", "--table", "tme"])
        .assert()
        .code(2)
        .stderr(contains("did you mean 'time'"));
    // compare: one row per variant, not transposed.
    let c = text(&["compare", "gpu-generations", "--format", "csv"]);
    let variants = json(&["compare", "gpu-generations"])["variants"]
        .as_array()
        .unwrap()
        .len();
    assert!(c.starts_with("name,speedup,"), "{c}");
    assert_eq!(c.lines().count(), 1 + variants, "{c}");
}

#[test]
fn a_plan_that_does_not_fit_exits_3_after_printing() {
    bin()
        .args([
            "estimate",
            "--model",
            "megatron-gpt-22b",
            "--system",
            "dgx-a100",
            "--gpus",
            "8",
            "--tp",
            "8",
            "--micro-batch",
            "4",
            "--global-batch",
            "4",
            "--flash-attention",
            "false",
            "--zero",
            "0",
        ])
        .assert()
        .code(3)
        .stdout(contains("does not fit"))
        .stdout(contains("total per iteration"))
        .stderr(contains("does not fit"));
}

#[test]
fn sweep_with_nothing_valid_names_the_main_constraint() {
    // GPT-3 175B on 8 A100s: no plan fits in 80 GB.
    bin()
        .args([
            "sweep",
            "--model",
            "gpt3-175b",
            "--system",
            "dgx-a100",
            "--gpus",
            "8",
            "--global-batch",
            "8",
        ])
        .assert()
        .code(3)
        .stderr(contains("do not fit in device memory"))
        .stderr(contains("the constraint that dropped the most"));
}

#[test]
fn pipeline_plans_need_a_global_batch() {
    bin()
        .args(&GPT3[..GPT3.len() - 2])
        .assert()
        .code(2)
        .stderr(contains("--global-batch"));
}

/// Llama 3 70B on 64 H100s, TP 4, PP 8, VP 5, global batch 128 (as published): the
/// defaults are flash attention, sequence parallelism and TP overlap.
#[test]
fn published_llama3_70b_typed_as_published_uses_todays_defaults() {
    let base = [
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
        "--micro-batch",
        "1",
        "--global-batch",
        "128",
        "--precision",
        "bf16",
    ];
    let typed = json(&base);
    let flags = [
        "--flash-attention",
        "true",
        "--sequence-parallel",
        "true",
        "--tp-overlap",
        "true",
    ];
    let explicit = json(&[&base[..], &flags[..]].concat());
    assert_eq!(typed["iteration_time_s"], explicit["iteration_time_s"]);
    assert_eq!(
        typed["memory_per_device_bytes"],
        explicit["memory_per_device_bytes"]
    );
    let used: Vec<&str> = typed["defaults_used"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(
        used.iter().any(|d| d.starts_with("flash_attention")),
        "{used:?}"
    );
    assert!(explicit["defaults_used"].as_array().unwrap().len() == 1);
    // Switching one off changes the estimate (the valued flag is honoured): without flash
    // attention the s×s activations of an 8192-token sequence no longer fit (exit 3).
    let off = bin()
        .args(base)
        .args(["--flash-attention", "false", "--format", "json"])
        .output()
        .unwrap();
    assert_eq!(off.status.code(), Some(3));
    let off: Value = serde_json::from_slice(&off.stdout).unwrap();
    assert_eq!(off["fits"], false);
    assert!(off["memory_per_device_bytes"].as_f64() > typed["memory_per_device_bytes"].as_f64());
}
