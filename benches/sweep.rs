//! Sweep throughput: one hot-loop evaluation (decode + full estimate + ranking key; the
//! average includes redundant indices, which return early), and a whole grid (GPT-3 175B
//! on 1024 A100s, global batch 1536, every default axis) searched in parallel, counted in
//! full estimates.

use astrolabe::catalog;
use astrolabe::sweep::driver::RunOptions;
use astrolabe::sweep::grid::{Axes, Grid};
use astrolabe::sweep::objective::Objective;
use astrolabe::sweep::search::{SearchOptions, evaluate_index, search};
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use std::hint::black_box;

fn bench(c: &mut Criterion) {
    let model = catalog::model("gpt3-175b").expect("built-in model");
    let system = catalog::system("dgx-a100").expect("built-in system");
    let grid = Grid::build(&model, &system, 1536, Axes::default_for(1024)).expect("grid");
    let opts = SearchOptions {
        sort: Objective::Time,
        pareto: (Objective::Time, Objective::Memory),
        run: RunOptions {
            top_k: 10,
            pareto_cap: 256,
            parallel: true,
            progress: false,
        },
    };
    let n = grid.hot_len();
    let mut i = 0u64;
    c.bench_function("sweep/evaluate_index", |b| {
        b.iter(|| {
            i = (i + 7919) % n;
            black_box(evaluate_index(&model, &grid, &opts, black_box(i)))
        })
    });
    // Throughput counts full estimates (redundant knob settings are not estimated).
    let estimates = search(&model, &grid, &opts, None).estimates;
    let mut g = c.benchmark_group("sweep/grid");
    g.sample_size(10);
    g.throughput(Throughput::Elements(estimates));
    g.bench_function("gpt3-175b x1024 default grid, parallel", |b| {
        b.iter(|| black_box(search(&model, &grid, &opts, None).estimates))
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
