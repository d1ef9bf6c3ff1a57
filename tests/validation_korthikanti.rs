//! Validation against Korthikanti et al. 2022 Table 5 (tests/data/korthikanti2022.csv):
//! the 8 end-to-end iteration times of 22B, 175B, 530B and 1T GPT models on DGX-A100
//! (Selene), with full recomputation and with sequence parallelism + selective
//! recomputation. One system preset (`dgx-a100`), the same efficiencies for every row.
//! Run with `--nocapture` to print the table that goes into the README.

use astrolabe::catalog;
use astrolabe::compute::Precision;
use astrolabe::estimate::{self, Estimate};
use astrolabe::parallel::{Optimizer, PlanSpec, Recompute, Schedule};

struct Row {
    model: String,
    gpus: u32,
    tp: u32,
    pp: u32,
    b: u32,
    gb: u32,
    v: u32,
    mode: String,
    measured: f64,
}

fn rows() -> Vec<Row> {
    let text = include_str!("data/korthikanti2022.csv");
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.starts_with("model,"))
        .map(|l| {
            let f: Vec<&str> = l.split(',').collect();
            let n = |i: usize| f[i].parse::<u32>().unwrap();
            Row {
                model: f[0].into(),
                gpus: n(1),
                tp: n(2),
                pp: n(3),
                b: n(4),
                gb: n(5),
                v: n(6),
                mode: f[7].into(),
                measured: f[8].parse().unwrap(),
            }
        })
        .collect()
}

fn estimate(r: &Row) -> Estimate {
    let model = catalog::model(&r.model).unwrap();
    let system = catalog::system("dgx-a100")
        .unwrap()
        .with_gpus(r.gpus)
        .unwrap();
    let selective = r.mode == "sp-selective";
    let spec = PlanSpec {
        tp: r.tp,
        pp: r.pp,
        micro_batch: r.b,
        global_batch: Some(r.gb),
        schedule: if r.v > 1 {
            Schedule::Interleaved
        } else {
            Schedule::OneFOneB
        },
        virtual_stages: r.v,
        recompute: if selective {
            Recompute::Selective
        } else {
            Recompute::Full
        },
        sequence_parallel: selective,
        precision: Precision::Fp16,
        optimizer: Optimizer::AdamFp32Grads,
        ..PlanSpec::default()
    };
    let plan = estimate::plan(&model, &system, &spec).unwrap();
    if std::env::var("EXPLAIN").is_ok() {
        for l in estimate::explain(&model, &system, &plan).unwrap().1 {
            eprintln!("{l}");
        }
    }
    estimate::evaluate(&model, &system, &plan).unwrap()
}

#[test]
fn korthikanti_table5_iteration_times() {
    let mut errs = Vec::new();
    println!("| model | mode | GPUs (TP×PP) | measured (s) | Astrolabe (s) | error | MFU |");
    println!("|---|---|---|---|---|---|---|");
    for r in rows() {
        let e = estimate(&r);
        let ours = e.time.total.get();
        let err = (ours - r.measured) / r.measured;
        errs.push(err.abs());
        let t = &e.time;
        eprintln!(
            "fwd {:.3} bwd {:.3} rec {:.3} opt {:.3} bubble {:.3} tp {:.3} sp {:.3} pp {:.3}",
            t.forward.get(),
            t.backward.get(),
            t.recompute.get(),
            t.optimizer.get(),
            t.bubble.get(),
            t.comm[0].exposed.get(),
            t.comm[1].exposed.get(),
            t.comm[3].exposed.get()
        );
        println!(
            "| {} | {} | {} ({}×{}) | {:.2} | {:.2} | {:+.1}% | {:.1}% |",
            r.model,
            r.mode,
            r.gpus,
            r.tp,
            r.pp,
            r.measured,
            ours,
            100.0 * err,
            100.0 * e.metrics.mfu
        );
    }
    let mean = errs.iter().sum::<f64>() / errs.len() as f64;
    let max = errs.iter().cloned().fold(0.0, f64::max);
    println!(
        "\nmean |error| {:.2}%, max |error| {:.2}%",
        100.0 * mean,
        100.0 * max
    );
    assert_eq!(errs.len(), 8);
    assert!(mean <= 0.03, "mean error {mean}");
    assert!(max <= 0.06, "max error {max}");
}
