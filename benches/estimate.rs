//! Throughput of one full training-iteration estimate (`estimate::evaluate`): GPT-3 175B
//! on 1024 A100s with TP 8, interleaved PP 8, DP 16, SP + selective recomputation, ZeRO-1,
//! and Mixtral 8x7B with expert parallelism; plus plan validation + evaluation together,
//! which is what a sweep pays per point.

use astrolabe::catalog;
use astrolabe::estimate;
use astrolabe::parallel::{PlanSpec, Recompute, Schedule};
use criterion::{Criterion, criterion_group, criterion_main};
use std::hint::black_box;

fn bench(c: &mut Criterion) {
    let m = catalog::model("gpt3-175b").expect("built-in model");
    let s = catalog::system("dgx-a100")
        .expect("built-in system")
        .with_gpus(1024)
        .expect("1024 GPUs");
    let spec = PlanSpec {
        tp: 8,
        pp: 8,
        global_batch: Some(1536),
        schedule: Schedule::Interleaved,
        virtual_stages: 3,
        recompute: Recompute::Selective,
        sequence_parallel: true,
        zero: 1,
        ..PlanSpec::default()
    };
    let plan = estimate::plan(&m, &s, &spec).expect("valid plan");
    c.bench_function("evaluate gpt3-175b 1024xA100", |b| {
        b.iter(|| estimate::evaluate(black_box(&m), black_box(&s), black_box(&plan)))
    });
    c.bench_function("plan + evaluate gpt3-175b 1024xA100", |b| {
        b.iter(|| {
            let p = estimate::plan(black_box(&m), &s, black_box(&spec))?;
            estimate::evaluate(&m, &s, &p)
        })
    });
    let mx = catalog::model("mixtral-8x7b").expect("built-in model");
    let h = catalog::system("dgx-h100")
        .expect("built-in system")
        .with_gpus(64)
        .expect("64 GPUs");
    let spec = PlanSpec {
        tp: 2,
        ep: 8,
        flash_attention: true,
        recompute: Recompute::Full,
        ..PlanSpec::default()
    };
    let plan = estimate::plan(&mx, &h, &spec).expect("valid plan");
    c.bench_function("evaluate mixtral-8x7b 64xH100 EP8", |b| {
        b.iter(|| estimate::evaluate(black_box(&mx), black_box(&h), black_box(&plan)))
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
