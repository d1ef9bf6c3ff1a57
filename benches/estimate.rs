//! Benchmark placeholder for `estimate`, replaced by the owner of that module.

use criterion::{Criterion, criterion_group, criterion_main};
use std::hint::black_box;

fn bench(c: &mut Criterion) {
    c.bench_function("parse_bytes", |b| {
        b.iter(|| astrolabe::units::parse_bytes("size", black_box("64MiB")))
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
