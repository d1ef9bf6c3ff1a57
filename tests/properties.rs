//! Property tests (proptest) for every parser and for the model's invariants:
//!
//! - parsers (quantities, topology strings, ASTRA-sim YAML and JSON, Chakra bytes) never
//!   panic, and what they accept is finite, non-negative, never −0 and inside the stated
//!   range;
//! - whole commands, run in-process on generated flags, either fail with an input error
//!   (exit 2) or print no NaN, no infinity and no −0, in every output format;
//! - the model: more bandwidth is never slower, a larger message never takes less time, and
//!   a sweep ranks the same in parallel and sequentially.
//!
//! CI runs a bounded number of cases per property (see [`cases`]); a long campaign raises
//! it with one environment variable, `PROPTEST_CASES=100000` (see docs/fuzzing.md).

use astrolabe::astra::model::{self as astra, Knobs, Op};
use astrolabe::astra::network_yaml::AstraNetwork;
use astrolabe::astra::system_json::AstraSystem;
use astrolabe::astra::{chakra, lean};
use astrolabe::catalog;
use astrolabe::cli::{self, Cli};
use astrolabe::collective::{self, Algorithm, Collective, Options, Schedule};
use astrolabe::network::{Dim, DimKind, Topology};
use astrolabe::report::Format;
use astrolabe::sweep::driver::RunOptions;
use astrolabe::sweep::grid::{Axes, Grid};
use astrolabe::sweep::objective::Objective;
use astrolabe::sweep::search::{self, SearchOptions};
use astrolabe::units::{self, Bandwidth, Bytes, Seconds};
use clap::Parser;
use proptest::prelude::*;

/// Cases per property: `ci` by default, `PROPTEST_CASES` when set (the long campaign).
fn cases(ci: u32) -> ProptestConfig {
    let n = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(ci);
    ProptestConfig {
        cases: n,
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

/// A number as a user might type it: ordinary, tiny, huge, zero, negative zero, odd forms.
fn number() -> impl Strategy<Value = String> {
    prop_oneof![
        (0.0f64..1e4).prop_map(|v| format!("{v}")),
        (1u32..100_000).prop_map(|v| v.to_string()),
        (-320i32..320).prop_map(|e| format!("1e{e}")),
        prop::sample::select(vec![
            "0", "-0", "0.0", "-1", "1e308", "1e-308", "4e-324", "1_000", ".5", "5.", "1e", "nan",
            "inf", "",
        ])
        .prop_map(String::from),
    ]
}

fn quantity(units: &'static [&'static str]) -> impl Strategy<Value = String> {
    (number(), prop::sample::select(units), any::<bool>()).prop_map(|(n, u, space)| {
        if space {
            format!("{n} {u}")
        } else {
            format!("{n}{u}")
        }
    })
}

const SIZES: &[&str] = &[
    "B", "KiB", "MiB", "GiB", "kB", "MB", "GB", "TB", "EB", "b", "Gb",
];
const RATES: &[&str] = &["B/s", "GB/s", "GiB/s", "Gb/s", "Gbps", "EB/s", "TB/s"];
const TIMES: &[&str] = &["ps", "ns", "us", "µs", "ms", "s", "min", "h", "days"];
const FLOPS: &[&str] = &["FLOP/s", "TFLOP/s", "PFLOPS", "kflop/s"];
const COUNTS: &[&str] = &["", "k", "M", "B", "T"];

/// A topology string: 1–4 dimensions of generated sizes and quantities.
fn topology_str() -> impl Strategy<Value = String> {
    let dim = (
        prop::sample::select(vec!["ring", "switch", "fully_connected"]),
        prop_oneof![1u64..64, Just(0u64), Just(65536), Just(4_294_967_296)],
        quantity(RATES),
        quantity(TIMES),
    )
        .prop_map(|(k, p, b, l)| format!("{k}({p}, {b}, {l})"));
    prop::collection::vec(dim, 1..5).prop_map(|v| v.join(" x "))
}

/// Output text must not show a NaN, an infinity or a negative zero.
#[track_caller]
fn assert_clean(text: &str) {
    for tok in text.split(|c: char| !(c.is_alphanumeric() || c == '-' || c == '.')) {
        let t = tok.trim_end_matches('.');
        let lower = t.to_ascii_lowercase();
        assert!(
            !matches!(
                lower.as_str(),
                "nan" | "inf" | "-inf" | "infinity" | "-infinity"
            ),
            "'{t}' printed in:\n{text}"
        );
        let neg_zero = t
            .strip_prefix("-0")
            .is_some_and(|r| r.chars().all(|c| c == '.' || c == '0'));
        assert!(!neg_zero, "'{t}' printed in:\n{text}");
    }
}

/// Runs a command line in-process: `Ok` is every format's output; `Err` must be a usage or
/// input error (exit 2), never an internal error.
fn run(args: &[String]) -> Result<Vec<String>, String> {
    let Ok(cli) =
        Cli::try_parse_from(std::iter::once("astrolabe".to_string()).chain(args.iter().cloned()))
    else {
        return Err("clap".into());
    };
    let report = match cli::run(&cli) {
        Ok(r) => r,
        Err(e) => {
            assert_eq!(e.exit_code(), 2, "{args:?}: {e}");
            return Err(e.to_string());
        }
    };
    let mut out = Vec::new();
    for f in [Format::Table, Format::Json, Format::Csv] {
        let opts = astrolabe::report::Render {
            format: f,
            table: None,
            columns: Vec::new(),
            ascii: true,
            width: None,
        };
        match report.render(&opts) {
            Ok(t) => out.push(t),
            Err(e) => {
                assert_eq!(e.exit_code(), 2, "{args:?}: {e}");
                return Err(e.to_string());
            }
        }
    }
    Ok(out)
}

#[track_caller]
fn check_in_range(v: f64, r: units::Range) {
    assert!(v.is_finite() && !v.is_sign_negative(), "{v}");
    assert!(
        v == 0.0 || (v >= r.min && v <= r.max),
        "{v} outside {}",
        r.text
    );
}

proptest! {
    #![proptest_config(cases(256))]

    #[test]
    fn quantity_parsers_accept_only_finite_values_in_range(
        b in quantity(SIZES), r in quantity(RATES), t in quantity(TIMES),
        f in quantity(FLOPS), c in quantity(COUNTS), junk in ".{0,24}",
    ) {
        for s in [&b, &r, &t, &f, &c, &junk] {
            if let Ok(v) = units::parse_bytes("x", s) { check_in_range(v.get(), units::BYTES_RANGE) }
            if let Ok(v) = units::parse_bandwidth("x", s) {
                check_in_range(v.get(), units::BANDWIDTH_RANGE);
                prop_assert!(v.get() > 0.0);
            }
            if let Ok(v) = units::parse_seconds("x", s) { check_in_range(v.get(), units::SECONDS_RANGE) }
            if let Ok(v) = units::parse_flop_rate("x", s) { check_in_range(v.get(), units::FLOP_RATE_RANGE) }
            if let Ok(v) = units::parse_count("x", s) { check_in_range(v, units::COUNT_RANGE) }
        }
    }

    #[test]
    fn topology_parser_accepts_only_computable_networks(s in topology_str(), junk in ".{0,40}") {
        for s in [&s, &junk] {
            if let Ok(t) = Topology::parse(s) {
                prop_assert!(t.npus() >= 1 && t.npus() <= 1 << 20);
                // What it prints reads back as the same network (to 12 digits).
                let again = Topology::parse(&t.to_string()).unwrap();
                prop_assert_eq!(again.npus(), t.npus());
                for (a, b) in again.dims().iter().zip(t.dims()) {
                    prop_assert!((a.bandwidth.get() / b.bandwidth.get() - 1.0).abs() < 1e-11);
                    prop_assert!((a.latency.get() - b.latency.get()).abs() <= 1e-11 * b.latency.get());
                }
            }
        }
    }

    #[test]
    fn astra_readers_never_panic(
        yaml in prop::collection::vec(prop_oneof![
            Just("topology: [ Ring, Switch ]\n".to_string()),
            Just("npus_count: [ 4, 8 ]\n".to_string()),
            number().prop_map(|n| format!("bandwidth: [ {n}, 50 ]\n")),
            number().prop_map(|n| format!("latency: [ 500, {n} ]\n")),
            ".{0,12}".prop_map(|s| s + "\n"),
        ], 0..6),
        json_delay in number(), json_peak in number(), bytes in prop::collection::vec(any::<u8>(), 0..256),
    ) {
        let _ = AstraNetwork::parse(&yaml.concat(), "net.yml");
        let json = format!(
            "{{\"endpoint-delay\": {json_delay}, \"local-mem-bw\": 1600, \"peak-perf\": {json_peak}, \
             \"preferred-dataset-splits\": 4, \"all-reduce-implementation\": [\"ring\"]}}"
        );
        let _ = AstraSystem::parse(&json, "sys.json");
        let _ = lean::decode(&bytes, "t.et");
        let _ = chakra::decode(&bytes, "t.et");
    }

    #[test]
    fn astra_model_results_fit_its_clock_and_more_bandwidth_is_never_slower(
        p in 2u32..64, q in 1u32..8, bw in 1e-6f64..1e4, lat in 0.0f64..1e7,
        size in 1u64..(1 << 40), k in 1.0f64..100.0,
        op in prop::sample::select(vec![Op::AllReduce, Op::AllGather, Op::ReduceScatter, Op::AllToAll]),
    ) {
        let net = |b: f64| AstraNetwork::parse(
            &format!("topology: [ Ring, Switch ]\nnpus_count: [ {p}, {q} ]\nbandwidth: [ {b}, {b} ]\nlatency: [ {lat}, {lat} ]\n"),
            "net.yml",
        );
        let sys = AstraSystem::parse(
            "{\"endpoint-delay\": 10, \"local-mem-bw\": 1600, \"preferred-dataset-splits\": 4, \
             \"all-reduce-implementation\": [\"ring\", \"ring\"], \"all-gather-implementation\": [\"ring\", \"ring\"], \
             \"reduce-scatter-implementation\": [\"ring\", \"ring\"], \"all-to-all-implementation\": [\"ring\", \"ring\"]}",
            "sys.json",
        ).unwrap();
        let (Ok(slow), Ok(fast)) = (net(bw), net((bw * k).min(1e8))) else { return Ok(()) };
        let knobs = Knobs::default();
        let a = astra::collective(op, size, &slow, &sys, &knobs, None);
        let b = astra::collective(op, size, &fast, &sys, &knobs, None);
        if let (Ok(a), Ok(b)) = (&a, &b) {
            prop_assert!(a.total_ns <= astrolabe::astra::phases::MAX_NS);
            prop_assert!(b.total_ns <= a.total_ns, "{} > {}", b.total_ns, a.total_ns);
        }
        if let Err(e) = &a { prop_assert_eq!(e.exit_code(), 2, "{}", e) }
    }
}

/// A dimension of any kind with in-range size, bandwidth and latency.
fn dim() -> impl Strategy<Value = Dim> {
    (
        prop::sample::select(vec![
            DimKind::Ring,
            DimKind::Switch,
            DimKind::FullyConnected,
        ]),
        1u32..33,
        1.0f64..1e15,
        0.0f64..1e-2,
    )
        .prop_map(|(k, p, b, l)| Dim::new(k, p, Bandwidth::new(b), Seconds::new(l)).unwrap())
}

proptest! {
    #![proptest_config(cases(256))]

    #[test]
    fn collective_time_is_finite_and_monotone(
        dims in prop::collection::vec(dim(), 1..4), size in 1.0f64..1e12, k in 1.0f64..10.0,
        op in prop::sample::select(vec![Collective::AllReduce, Collective::AllGather,
            Collective::ReduceScatter, Collective::AllToAll, Collective::Broadcast]),
        chunks in 1u32..9, themis: bool,
    ) {
        let opts = Options {
            algorithm: Algorithm::Auto,
            chunks,
            schedule: if themis { Schedule::Themis } else { Schedule::Baseline },
        };
        let t = |d: &[Dim], s: f64| collective::total(op, Bytes::new(s), d, &opts).unwrap().get();
        let base = t(&dims, size);
        prop_assert!(base.is_finite() && base >= 0.0 && !base.is_sign_negative(), "{base}");
        if themis {
            // Themis's greedy dimension order is not monotone (found by this property:
            // 22% slower with 3.6× the bandwidth; a property of the greedy policy,
            // docs/fuzzing.md), so its times are checked for finiteness only.
            return Ok(());
        }
        let mut faster = dims.clone();
        for d in &mut faster { d.bandwidth = d.bandwidth * k; }
        let quicker = t(&faster, size);
        prop_assert!(quicker <= base * (1.0 + 1e-9), "more bandwidth is slower: {} > {}", quicker, base);
        let larger = t(&dims, size * k);
        prop_assert!(larger >= base * (1.0 - 1e-9), "a larger message is faster: {} < {}", larger, base);
    }

    #[test]
    fn collective_command_prints_no_nan_inf_or_negative_zero(
        topo in topology_str(), size in quantity(SIZES), range: bool,
        op in prop::sample::select(vec!["all-reduce", "all-gather", "all-to-all", "broadcast"]),
        chunks in 1u32..5, themis: bool,
    ) {
        let size = if range { format!("{size}..{}", size.replace(' ', "")) } else { size };
        let mut args: Vec<String> = ["collective", op, "--topology", &topo, "--size", &size]
            .iter().map(|s| s.to_string()).collect();
        args.extend(["--chunks".into(), chunks.to_string()]);
        if themis { args.extend(["--schedule".into(), "themis".into()]) }
        if let Ok(outs) = run(&args) {
            for o in &outs { assert_clean(o) }
        }
    }
}

proptest! {
    #![proptest_config(cases(48))]

    #[test]
    fn estimate_command_prints_no_nan_inf_or_negative_zero(
        tp in prop::sample::select(vec![0u32, 1, 2, 8, 3]), pp in prop::sample::select(vec![0u32, 1, 2, 4]),
        mb in prop::sample::select(vec![0u32, 1, 2]), gb in prop::sample::select(vec![0u32, 16, 64, 100]),
        bucket in quantity(SIZES), tokens in quantity(COUNTS), zero in 0u8..5,
        system in prop::sample::select(vec!["dgx-a100", "dgx-h100", "tpu-v4"]),
    ) {
        let args: Vec<String> = [
            "estimate", "--model", "megatron-2021-1.7b", "--system", system, "--gpus", "16",
            "--tp", &tp.to_string(), "--pp", &pp.to_string(), "--micro-batch", &mb.to_string(),
            "--global-batch", &gb.to_string(), "--dp-bucket", &bucket, "--tokens", &tokens,
            "--zero", &zero.to_string(), "--explain",
        ].iter().map(|s| s.to_string()).collect();
        if let Ok(outs) = run(&args) {
            for o in &outs { assert_clean(o) }
        }
    }
}

proptest! {
    #![proptest_config(cases(8))]

    #[test]
    fn sweep_ranks_the_same_in_parallel_and_sequentially(
        gpus in prop::sample::select(vec![8u32, 16, 32]), gb in prop::sample::select(vec![16u32, 32, 64]),
        sort in prop::sample::select(vec!["time", "memory", "mfu", "tokens"]), top in 1usize..40,
    ) {
        let model = catalog::model("megatron-2021-1.7b").unwrap();
        let system = catalog::system("dgx-a100").unwrap();
        let grid = Grid::build(&model, &system, gb, Axes::default_for(gpus)).unwrap();
        let opts = |parallel| SearchOptions {
            sort: Objective::parse(sort).unwrap(),
            pareto: Objective::parse_pair("time,memory").unwrap(),
            run: RunOptions { top_k: top, pareto_cap: 256, parallel, progress: false },
        };
        let a = search::search(&model, &grid, &opts(true), None);
        let b = search::search(&model, &grid, &opts(false), None);
        let ids = |r: &search::SearchResult| r.run.top.iter().map(|e| e.index).collect::<Vec<_>>();
        prop_assert_eq!(ids(&a), ids(&b));
        let front = |r: &search::SearchResult| r.run.pareto.iter().map(|e| e.index).collect::<Vec<_>>();
        prop_assert_eq!(front(&a), front(&b));
        for e in &a.run.top {
            prop_assert!(e.key.is_finite());
        }
    }
}
