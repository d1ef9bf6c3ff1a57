//! One collective evaluation: a 3-dimension all-reduce with `auto` (every applicable
//! algorithm tried on every phase), as the estimate and sweep hot loops call it.

use astrolabe::collective::{self, Collective, Options, Schedule};
use astrolabe::network::Topology;
use astrolabe::units::Bytes;
use criterion::{Criterion, criterion_group, criterion_main};
use std::hint::black_box;

fn bench(c: &mut Criterion) {
    let topo = Topology::parse(
        "ring(4, 200GB/s, 500ns) x fully_connected(8, 100GB/s, 1us) x switch(16, 50GB/s, 2us, in-network)",
    )
    .expect("benchmark topology parses");
    let dims = topo.dims();
    let opts = Options::default();
    c.bench_function("all-reduce 3 dims auto", |b| {
        b.iter(|| {
            collective::time(
                Collective::AllReduce,
                black_box(Bytes::new(1e9)),
                black_box(dims),
                &opts,
            )
        })
    });
    let chunked = Options {
        chunks: 8,
        schedule: Schedule::Themis,
        ..Options::default()
    };
    c.bench_function("all-reduce 3 dims auto themis 8 chunks", |b| {
        b.iter(|| {
            collective::time(
                Collective::AllReduce,
                black_box(Bytes::new(1e9)),
                black_box(dims),
                &chunked,
            )
        })
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
