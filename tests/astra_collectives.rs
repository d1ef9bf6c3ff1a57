//! Every congestion-unaware row of ASTRA-sim's reference runs (tests/data/astra/
//! collectives_public.csv, copied from validation/astra) through the ASTRA-sim-faithful
//! model with the row's own config files: single-dimension rows within 0.1 % of
//! `finish_time_max`, multi-dimension rows within 3 %.

use astrolabe::astra::model::{self, Knobs, Op};
use astrolabe::astra::network_yaml::AstraNetwork;
use astrolabe::astra::system_json::AstraSystem;
use std::path::Path;

fn data(p: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/astra")
        .join(p)
}

struct Row {
    name: String,
    op: Op,
    size: u64,
    dims: usize,
    reference: u64,
    network: String,
    system: String,
}

fn rows(backend: &str) -> Vec<Row> {
    let mut r = csv::Reader::from_path(data("collectives_public.csv")).unwrap();
    let h = r.headers().unwrap().clone();
    let col = |name: &str| h.iter().position(|c| c == name).unwrap();
    let mut out = Vec::new();
    for rec in r.records() {
        let rec = rec.unwrap();
        if &rec[col("backend")] != backend || &rec[col("status")] != "ok" {
            continue;
        }
        let op = match &rec[col("collective")] {
            "all_reduce" => Op::AllReduce,
            "reduce_scatter" => Op::ReduceScatter,
            "all_gather" => Op::AllGather,
            "all_to_all" => Op::AllToAll,
            other => panic!("collective {other}"),
        };
        out.push(Row {
            name: format!(
                "{} {} {} {}",
                &rec[col("topology")],
                &rec[col("npus_per_dim")],
                &rec[col("collective")],
                &rec[col("size_label")]
            ),
            op,
            size: rec[col("comm_size_bytes")].parse().unwrap(),
            dims: rec[col("npus_per_dim")].split('x').count(),
            reference: rec[col("finish_time_max")].parse().unwrap(),
            network: rec[col("network_config")].to_string(),
            system: rec[col("system_config")].to_string(),
        });
    }
    out
}

#[test]
fn astra_every_congestion_unaware_row_matches() {
    let rows = rows("congestion_unaware");
    assert_eq!(rows.len(), 96);
    let (mut max1, mut sum1, mut n1, mut maxm, mut summ, mut nm) = (0f64, 0f64, 0, 0f64, 0f64, 0);
    for r in &rows {
        let net = AstraNetwork::read(&data(&r.network)).unwrap();
        let sys = AstraSystem::read(&data(&r.system)).unwrap();
        let b = model::collective(r.op, r.size, &net, &sys, &Knobs::default(), None)
            .unwrap_or_else(|e| panic!("{}: {e}", r.name));
        let err = (b.total_ns as f64 - r.reference as f64).abs() / r.reference as f64;
        let tol = if r.dims == 1 { 1e-3 } else { 3e-2 };
        assert!(
            err <= tol,
            "{}: model {} ns, ASTRA-sim {} ns ({:.4} %)",
            r.name,
            b.total_ns,
            r.reference,
            err * 100.0
        );
        if r.dims == 1 {
            (max1, sum1, n1) = (max1.max(err), sum1 + err, n1 + 1);
        } else {
            (maxm, summ, nm) = (maxm.max(err), summ + err, nm + 1);
        }
    }
    eprintln!(
        "1-D rows: {n1}, max error {:.5} %, mean {:.5} %; multi-D rows: {nm}, max {:.5} %, mean {:.5} %",
        max1 * 100.0,
        sum1 / n1 as f64 * 100.0,
        maxm * 100.0,
        summ / nm as f64 * 100.0
    );
}

#[test]
fn astra_every_congestion_aware_row_matches() {
    let rows = rows("congestion_aware");
    assert_eq!(rows.len(), 80);
    let knobs = Knobs {
        congestion_aware: true,
        ..Knobs::default()
    };
    let (mut max, mut sum) = (0f64, 0f64);
    for r in &rows {
        let net = AstraNetwork::read(&data(&r.network)).unwrap();
        let sys = AstraSystem::read(&data(&r.system)).unwrap();
        let b = model::collective(r.op, r.size, &net, &sys, &knobs, None)
            .unwrap_or_else(|e| panic!("{}: {e}", r.name));
        let err = (b.total_ns as f64 - r.reference as f64).abs() / r.reference as f64;
        assert!(
            err <= 1e-3,
            "{}: model {} ns, ASTRA-sim {} ns ({:.4} %)",
            r.name,
            b.total_ns,
            r.reference,
            err * 100.0
        );
        (max, sum) = (max.max(err), sum + err);
    }
    eprintln!(
        "congestion-aware 1-D rows: {}, max error {:.5} %, mean {:.5} %",
        rows.len(),
        max * 100.0,
        sum / rows.len() as f64 * 100.0
    );
}
