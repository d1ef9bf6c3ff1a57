//! The system's `[collective]` table in the estimate: the data-parallel gradient
//! all-reduce with a parameter server vs a ring (hand-computed from the textbook forms in
//! the README's collective section), Themis never slower than the baseline schedule on
//! ASTRA-sim 2.0's conventional networks, and errors for bad keys and values.

use approx::assert_relative_eq;
use astrolabe::catalog;
use astrolabe::estimate::{self, CommClass, Estimate};
use astrolabe::model::Model;
use astrolabe::parallel::PlanSpec;
use astrolabe::system::System;
use std::path::PathBuf;

/// Writes `text` to a fresh file in the temporary folder and returns its path. Every call
/// gets its own folder: tests run in parallel and write files of the same name.
fn file(name: &str, text: &str) -> String {
    static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("astrolabe-collopts-{}-{n}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("mkdir");
    let p: PathBuf = dir.join(name);
    std::fs::write(&p, text).expect("write");
    p.to_string_lossy().into_owned()
}

/// A system file: `[collective]` body (may be empty) and `[[network.dims]]` tables.
fn system(name: &str, collective: &str, dims: &[(&str, u32, &str, &str)]) -> String {
    let mut t = format!("name = \"{name}\"\ndevice = \"a100-80gb\"\n");
    if !collective.is_empty() {
        t += &format!("\n[collective]\n{collective}\n");
    }
    for (kind, size, bw, lat) in dims {
        t += &format!(
            "\n[[network.dims]]\nkind = \"{kind}\"\nsize = {size}\nbandwidth = \"{bw}\"\nlatency = \"{lat}\"\n"
        );
    }
    t
}

fn load(name: &str, text: &str) -> System {
    let p = file(&format!("{name}.toml"), text);
    catalog::system(&p).unwrap_or_else(|e| panic!("{name}: {e}"))
}

/// One layer of 10⁶ parameters: the gradient all-reduce moves n = 2·10⁶ B (16-bit).
fn tiny_model() -> Model {
    let p = file(
        "tiny-model.toml",
        "name = \"tiny\"\n[layered]\ncompute_efficiency = 0.5\n\n[[layered.layers]]\n\
         name = \"dense\"\nforward_flops = 1e9\nparams = 1e6\nactivation = \"1 MB\"\n",
    );
    catalog::model(&p).expect("tiny model")
}

#[track_caller]
fn run(model: &Model, sys: &System, spec: &PlanSpec) -> Estimate {
    let plan = estimate::plan(model, sys, spec).expect("plan");
    estimate::evaluate(model, sys, &plan).expect("estimate")
}

/// Exposed + hidden time of one class: the whole collective time of that class.
fn class_time(e: &Estimate, c: CommClass) -> f64 {
    let x = e.time.class(c);
    (x.exposed + x.hidden).get()
}

const SWITCH4: &[(&str, u32, &str, &str)] = &[("switch", 4, "10 GB/s", "1 us")];

#[test]
fn dp_all_reduce_parameter_server_vs_ring_by_hand() {
    let model = tiny_model();
    let spec = PlanSpec {
        gpus: Some(4),
        global_batch: Some(4),
        ..PlanSpec::default()
    };
    let ring = run(&model, &load("ring4", &system("ring4", "", SWITCH4)), &spec);
    let ps_sys = load(
        "ps4",
        &system("ps4", "dp_algorithm = \"parameter-server\"", SWITCH4),
    );
    let ps = run(&model, &ps_sys, &spec);
    // p = 4 on one switch, B = 10 GB/s, α = 1 µs, n = 2·10⁶ B.
    // Ring all-reduce: 2(p−1)α + 2(p−1)/p · n/B = 6 µs + 1.5 · 200 µs = 306 µs.
    let ring_hand = 2.0 * 3.0 * 1e-6 + 2.0 * 3.0 / 4.0 * 2e6 / 10e9;
    // Parameter server (one server port): 2α + 2p · n/B = 2 µs + 8 · 200 µs = 1602 µs.
    let ps_hand = 2.0 * 1e-6 + 2.0 * 4.0 * 2e6 / 10e9;
    assert_relative_eq!(
        class_time(&ring, CommClass::Dp),
        ring_hand,
        max_relative = 1e-9
    );
    assert_relative_eq!(class_time(&ps, CommClass::Dp), ps_hand, max_relative = 1e-9);
    assert_eq!(ring.time.forward, ps.time.forward, "compute is unchanged");
    // The same through `algorithm` (every collective) instead of `dp_algorithm`.
    let all = load("ps4-all", &system("ps4-all", "algorithm = \"ps\"", SWITCH4));
    assert_relative_eq!(
        class_time(&run(&model, &all, &spec), CommClass::Dp),
        ps_hand,
        max_relative = 1e-9
    );
}

#[test]
fn dp_algorithm_leaves_tensor_and_pipeline_traffic_alone() {
    // 2 nodes of 4: TP 4 inside, DP 2 across. The DP override must not touch TP or PP;
    // `algorithm = "parameter-server"` for everything must still evaluate (send/recv has
    // no parameter-server form and falls back to the default choice).
    let model = catalog::model("llama2-7b").expect("model");
    let dims = &[
        ("switch", 4, "200 GB/s", "1 us"),
        ("switch", 4, "25 GB/s", "5 us"),
    ];
    let spec = PlanSpec {
        gpus: Some(16),
        tp: 4,
        pp: 2,
        global_batch: Some(16),
        ..PlanSpec::default()
    };
    let base = run(&model, &load("n2", &system("n2", "", dims)), &spec);
    let dp = run(
        &model,
        &load(
            "n2-ps",
            &system("n2-ps", "dp_algorithm = \"parameter-server\"", dims),
        ),
        &spec,
    );
    assert_eq!(base.time.class(CommClass::Tp), dp.time.class(CommClass::Tp));
    assert_eq!(base.time.class(CommClass::Pp), dp.time.class(CommClass::Pp));
    // DP group of 2: PS all-reduce 2α + 4n/B vs ring 2α + n/B: slower.
    assert!(class_time(&dp, CommClass::Dp) > 2.0 * class_time(&base, CommClass::Dp));
    let all = load(
        "n2-ps-all",
        &system("n2-ps-all", "algorithm = \"parameter-server\"", dims),
    );
    // With sequence parallelism PP is send/recv only: unchanged by the fallback.
    let sp = PlanSpec {
        sequence_parallel: true,
        ..spec
    };
    let base_sp = run(&model, &load("n2", &system("n2", "", dims)), &sp);
    let e = run(&model, &all, &sp);
    assert_eq!(
        base_sp.time.class(CommClass::Pp),
        e.time.class(CommClass::Pp)
    );
    assert!(class_time(&e, CommClass::Sp) > class_time(&base_sp, CommClass::Sp));
}

const CONV_3D: &[(&str, u32, &str, &str)] = &[
    ("ring", 16, "200 GB/s", "500 ns"),
    ("fully_connected", 8, "100 GB/s", "500 ns"),
    ("switch", 4, "50 GB/s", "500 ns"),
];
const CONV_4D: &[(&str, u32, &str, &str)] = &[
    ("ring", 2, "250 GB/s", "500 ns"),
    ("fully_connected", 8, "200 GB/s", "500 ns"),
    ("ring", 8, "100 GB/s", "500 ns"),
    ("switch", 4, "50 GB/s", "500 ns"),
];

#[test]
fn themis_is_never_slower_than_the_baseline_schedule() {
    let mut faster = 0;
    for (net, dims) in [("conv-3d", CONV_3D), ("conv-4d", CONV_4D)] {
        for chunks in [2, 4, 16] {
            let c = |s: &str| format!("chunks = {chunks}\nschedule = \"{s}\"");
            let base = load(net, &system(net, &c("baseline"), dims));
            let themis = load(net, &system(net, &c("themis"), dims));
            for (model, tp, pp, zero) in [
                ("gpt3-175b", 16, 4, 1),
                ("gpt3-175b", 8, 8, 1),
                ("gpt3-175b", 16, 1, 3),
                ("llama2-7b", 1, 1, 1),
                ("llama2-7b", 4, 2, 0),
                ("resnet50", 1, 1, 0),
            ] {
                let m = catalog::model(model).expect("model");
                let spec = PlanSpec {
                    gpus: Some(512),
                    tp,
                    pp,
                    zero,
                    global_batch: Some(512),
                    ..PlanSpec::default()
                };
                let (b, t) = (run(&m, &base, &spec), run(&m, &themis, &spec));
                let what = format!("{net}, {chunks} chunks, {model} tp{tp} pp{pp} zero{zero}");
                assert!(
                    t.time.total.get() <= b.time.total.get() * (1.0 + 1e-12),
                    "{what}: Themis {} > baseline {}",
                    t.time.total,
                    b.time.total
                );
                for c in CommClass::ALL {
                    let (tb, tt) = (class_time(&b, c), class_time(&t, c));
                    assert!(
                        tt <= tb * (1.0 + 1e-12),
                        "{what}, {}: {tt} > {tb}",
                        c.name()
                    );
                    if tt < tb * (1.0 - 1e-6) {
                        faster += 1;
                    }
                }
            }
        }
    }
    assert!(
        faster > 0,
        "Themis should beat the baseline order somewhere"
    );
}

#[track_caller]
fn bad(name: &str, collective: &str, expect: &[&str]) {
    let p = file(&format!("{name}.toml"), &system(name, collective, SWITCH4));
    let e = catalog::system(&p).expect_err(name).to_string();
    assert!(e.contains(&p), "{name}: no file in: {e}");
    assert!(e.contains("line 5"), "{name}: no line in: {e}");
    for x in expect {
        assert!(e.contains(x), "{name}: '{x}' missing in: {e}");
    }
}

#[test]
fn bad_collective_keys_and_values_name_file_line_and_key() {
    // `[collective]` is line 4 of the file; its first key is line 5.
    bad("unknown-key", "chunk = 4", &["chunk", "unknown field"]);
    bad(
        "zero-chunks",
        "chunks = 0",
        &["collective.chunks", "between 1 and"],
    );
    bad("negative-chunks", "chunks = -3", &["collective.chunks"]);
    bad("string-chunks", "chunks = \"4\"", &["chunks"]);
    bad(
        "bad-schedule",
        "schedule = \"themiss\"",
        &["collective.schedule", "themiss"],
    );
    bad(
        "bad-algorithm",
        "algorithm = \"rign\"",
        &["collective.algorithm", "ring"],
    );
    bad(
        "bad-dp-algorithm",
        "dp_algorithm = \"paramter-server\"",
        &["collective.dp_algorithm", "parameter-server"],
    );
}

#[test]
fn a_scenario_variant_with_a_bad_value_names_its_line() {
    let text = "name = \"s\"\nbaseline = \"b\"\nmodel = \"resnet50\"\nsystem = \"dgx-a100\"\n\
                [plan]\ngpus = 16\nglobal_batch = 16\n\n[[variant]]\nname = \"v\"\n\
                system.collective.schedule = \"fast\"\n";
    let p = file("bad-scenario.toml", text);
    let e = astrolabe::compare::load(&p)
        .and_then(|s| s.evaluate())
        .expect_err("bad schedule")
        .to_string();
    for x in ["line 11", "'v'", "collective.schedule", "fast"] {
        assert!(e.contains(x), "'{x}' missing in: {e}");
    }
}

#[test]
fn explain_names_non_default_options_only() {
    let model = tiny_model();
    let spec = PlanSpec {
        gpus: Some(4),
        global_batch: Some(4),
        ..PlanSpec::default()
    };
    let lines = |s: &System| {
        let plan = estimate::plan(&model, s, &spec).expect("plan");
        estimate::explain(&model, s, &plan).expect("explain").1
    };
    let plain = load("plain4", &system("plain4", "", SWITCH4));
    assert!(!lines(&plain).iter().any(|l| l.contains("[collective]")));
    let ps = load(
        "ps4-explain",
        &system(
            "ps4-explain",
            "chunks = 4\nschedule = \"themis\"\ndp_algorithm = \"parameter-server\"",
            SWITCH4,
        ),
    );
    let l = lines(&ps);
    assert!(
        l.iter().any(|l| l.contains("[collective]")
            && l.contains("parameter-server")
            && l.contains("4 chunk")
            && l.contains("themis")),
        "{l:?}"
    );
}

#[test]
fn a_collective_table_survives_with_gpus_and_defaults_change_nothing() {
    let s = load(
        "keep",
        &system("keep", "chunks = 8\nschedule = \"themis\"", CONV_3D),
    );
    let cut = s.with_gpus(128).expect("cut");
    assert_eq!(cut.collective, s.collective);
    assert_eq!(cut.collective.chunks, 8);
    // Writing the defaults out explicitly is the same system as leaving them out.
    let explicit = load(
        "explicit",
        &system(
            "explicit",
            "chunks = 1\nschedule = \"nccl\"\nalgorithm = \"auto\"",
            SWITCH4,
        ),
    );
    let implicit = load("explicit", &system("explicit", "", SWITCH4));
    assert_eq!(explicit, implicit);
}
