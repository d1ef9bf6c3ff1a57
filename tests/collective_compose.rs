//! Multi-dimensional composition against hand computations: hierarchical phases and their
//! sizes, chunk pipelining, the Themis greedy schedule; and properties that must hold for
//! any topology (proptest): time never falls as the size grows or a bandwidth drops, a
//! group of one costs nothing, small sizes are latency bound, large sizes reach busbw → B.

use approx::assert_relative_eq;
use astrolabe::collective::{self, Algorithm, Collective, Options, Schedule};
use astrolabe::network::{Dim, DimKind, Topology};
use astrolabe::units::{Bandwidth, Bytes, Seconds};
use proptest::prelude::*;

use Collective::*;

const TWO: &str = "ring(4, 200GB/s, 500ns) x switch(8, 50GB/s, 1us)";

#[track_caller]
fn total(op: Collective, n: f64, topo: &str, opts: Options) -> f64 {
    let t = Topology::parse(topo).unwrap();
    collective::time(op, Bytes::new(n), t.dims(), &opts)
        .unwrap()
        .total
        .get()
}

fn ring_opts() -> Options {
    Options {
        algorithm: Algorithm::Ring,
        schedule: Schedule::Baseline,
        ..Options::default()
    }
}

/// Ring reduce-scatter / all-gather on p NPUs: (p−1)α + (p−1)/p·n/B.
fn ring_rs(p: f64, a: f64, b: f64, n: f64) -> f64 {
    (p - 1.0) * a + (p - 1.0) / p * n / b
}

#[test]
fn collective_two_dimensional_phases() {
    let n = 1e9;
    let o = ring_opts();
    // all-reduce: RS on the ring (n), AR on the switch (n/4), AG on the ring (n).
    let ar = 2.0 * ring_rs(4.0, 5e-7, 2e11, n) + 14.0 * 1e-6 + 14.0 / 8.0 * (n / 4.0) / 5e10;
    assert_relative_eq!(total(AllReduce, n, TWO, o), ar, max_relative = 1e-12);
    // reduce-scatter: ring with n, switch with n/4.
    let rs = ring_rs(4.0, 5e-7, 2e11, n) + ring_rs(8.0, 1e-6, 5e10, n / 4.0);
    assert_relative_eq!(total(ReduceScatter, n, TWO, o), rs, max_relative = 1e-12);
    assert_relative_eq!(total(AllGather, n, TWO, o), rs, max_relative = 1e-12);
    // all-to-all: the whole n on each dimension; ring relays ⌊p²/4⌋/p.
    let a2a = 3.0 * 5e-7 + 4.0 / 4.0 * n / 2e11 + 7.0 * 1e-6 + 16.0 / 8.0 * n / 5e10;
    assert_relative_eq!(total(AllToAll, n, TWO, o), a2a, max_relative = 1e-12);
    // gather: output n·4/32 on the ring, then n on the switch.
    let g = ring_rs(4.0, 5e-7, 2e11, n / 8.0) + ring_rs(8.0, 1e-6, 5e10, n);
    assert_relative_eq!(total(Gather, n, TWO, o), g, max_relative = 1e-12);
    assert_relative_eq!(total(Scatter, n, TWO, o), g, max_relative = 1e-12);
    // broadcast: n on each (pipelined chain (p−1)α + n/B).
    let bc = 3.0 * 5e-7 + n / 2e11 + 7.0 * 1e-6 + n / 5e10;
    assert_relative_eq!(total(Broadcast, n, TWO, o), bc, max_relative = 1e-12);
    // send/recv: one neighbour link on each (ring B/2, switch B).
    let p2p = 5e-7 + n / 1e11 + 1e-6 + n / 5e10;
    assert_relative_eq!(total(SendRecv, n, TWO, o), p2p, max_relative = 1e-12);
}

#[test]
fn collective_phase_sizes_and_order() {
    let t = Topology::parse(TWO).unwrap();
    let r = collective::time(AllReduce, Bytes::new(1e9), t.dims(), &ring_opts()).unwrap();
    let got: Vec<(usize, Collective, f64)> = r
        .phases()
        .iter()
        .map(|p| (p.dim, p.op, p.size.get()))
        .collect();
    assert_eq!(
        got,
        vec![
            (0, ReduceScatter, 1e9),
            (1, AllReduce, 2.5e8),
            (0, AllGather, 1e9)
        ]
    );
}

#[test]
fn collective_chunks_pipeline_behind_the_busiest_dimension() {
    // Zero latency, C = 4, RS over switch(4, 100GB/s) x switch(4, 100GB/s):
    // per chunk m = n/4: first dim a = 3/4·m/B, second b = a/4.
    let topo = "switch(4, 100GB/s, 0ns) x switch(4, 100GB/s, 0ns)";
    let n = 1e9;
    let m = n / 4.0;
    let a = 0.75 * m / 1e11;
    let b = 0.75 * (m / 4.0) / 1e11;
    let base = Options {
        algorithm: Algorithm::Ring,
        chunks: 4,
        schedule: Schedule::Baseline,
    };
    // Σ_s t_s(m) + (C−1)·max_d = (a + b) + 3a
    assert_relative_eq!(
        total(ReduceScatter, n, topo, base),
        a + b + 3.0 * a,
        max_relative = 1e-12
    );
    // Themis: chunk orders (0,1), (1,0), (0,1) [tie → index], (1,0); after chunk 1 the
    // loads of chunks 2..4 are d0: b + a + b, d1: a + b + a; T = (a + b) + (2a + b).
    let themis = Options {
        schedule: Schedule::Themis,
        ..base
    };
    assert_relative_eq!(
        total(ReduceScatter, n, topo, themis),
        3.0 * a + 2.0 * b,
        max_relative = 1e-12
    );
    // One chunk: both schedules are the sequential sum.
    let one = Options {
        chunks: 1,
        ..themis
    };
    assert_relative_eq!(
        total(ReduceScatter, n, topo, one),
        0.75 * n / 1e11 + 0.75 * n / 4.0 / 1e11,
        max_relative = 1e-12
    );
}

/// Themis on three unequal dimensions of 2 (100, 20 and 25 GB/s, no latency), reduce-scatter
/// of n in C = 2 chunks (m = n/2), ring: a dimension's share x costs t_d(x) = x/2 / B_d,
/// i.e. m·{5, 25, 20}·10⁻¹² s per byte at full share. Chunk 1 (no load): position 1 takes d0
/// (5 < 25, 20), position 2 (m/2) d2 (10 < 12.5, in units of 10⁻¹² m), position 3 d1 (m/4):
/// loads d0 5, d2 10, d1 6.25; first = 21.25. Chunk 2: position 1 d0 again (5 + 5 = 10
/// against 31.25 and 30); position 2 (m/2) d1 (6.25 + 12.5 = 18.75 < 10 + 10 = 20), position 3
/// d2 (m/4): chunk 2 costs d0 5, d1 12.5, d2 5. T = 21.25 + max = 33.75 (×10⁻¹² m). The
/// reported phases sum each dimension's shares: d0 2m, d1 m/4 + m/2, d2 m/2 + m/4.
#[test]
fn collective_themis_greedy_order_on_unequal_dimensions() {
    let topo = "switch(2, 100GB/s, 0ns) x switch(2, 20GB/s, 0ns) x switch(2, 25GB/s, 0ns)";
    let n = 1e9;
    let m = n / 2.0;
    let opts = Options {
        algorithm: Algorithm::Ring,
        chunks: 2,
        schedule: Schedule::Themis,
    };
    assert_relative_eq!(
        total(ReduceScatter, n, topo, opts),
        33.75e-12 * m,
        max_relative = 1e-12
    );
    let t = Topology::parse(topo).unwrap();
    let r = collective::time(ReduceScatter, Bytes::new(n), t.dims(), &opts).unwrap();
    let size_on = |d: usize| -> f64 {
        (r.phases[..r.n_phases].iter())
            .filter(|p| p.dim == d)
            .map(|p| p.size.get())
            .sum()
    };
    assert_relative_eq!(size_on(0), 2.0 * m, max_relative = 1e-12);
    assert_relative_eq!(size_on(1), 0.75 * m, max_relative = 1e-12);
    assert_relative_eq!(size_on(2), 0.75 * m, max_relative = 1e-12);
}

#[test]
fn collective_themis_all_reduce_weighs_both_halves() {
    // The dimensions of the test above. A share x costs a size-2 ring x/(2B) to
    // reduce-scatter and x/(2B) to all-gather, so the greedy order weighs x/B per
    // dimension; in units u = m/(1 GB/s), m = n/2 per chunk:
    // chunk 1: share m → d0 (0.01 against 0.05, 0.04); m/2 → d2 (0.02 against d1's 0.025);
    //   m/4 → d1 (0.0125): first = 0.0425; loads d0 0.01, d1 0.0125, d2 0.02.
    // chunk 2: share m → d0 (0.02 against 0.0625, 0.06); m/2 → d1 (0.0375 against 0.04);
    //   m/4 → d2: d0 0.01, d1 0.025, d2 0.01, max 0.025.
    // T = 0.0425 + 0.025 = 0.0675 u = 67.5·10⁻¹²·m: twice the reduce-scatter's, in the same
    // order. Weighing the halves' difference instead (0 on every dimension) would take
    // d0, d1, d2 in both chunks: 0.045 + 0.025 = 0.07 u.
    let topo = "switch(2, 100GB/s, 0ns) x switch(2, 20GB/s, 0ns) x switch(2, 25GB/s, 0ns)";
    let n = 1e9;
    let opts = Options {
        algorithm: Algorithm::Ring,
        chunks: 2,
        schedule: Schedule::Themis,
    };
    assert_relative_eq!(
        total(AllReduce, n, topo, opts),
        67.5e-12 * (n / 2.0),
        max_relative = 1e-12
    );
}

#[test]
fn collective_themis_breaks_ties_towards_the_first_dimension() {
    // Two chunks of m = n/2 on a size-2 ring at 50 GB/s and a size-4 ring at 75 GB/s: a
    // whole chunk costs both the same, 1/2·m/50 = 3/4·m/75 = 0.01 u (u = m/(1 GB/s)).
    // Chunk 1: the tie goes to the lower index, d0 (0.01), then d1 reduces m/2:
    // 3/4·(m/2)/75 = 0.005; first = 0.015. Chunk 2: d1 (0.005 + 0.01) before d0
    // (0.01 + 0.01), then d0 on m/4: 1/2·(m/4)/50 = 0.0025; the busier is d1 at 0.01.
    // T = 0.025 u = 12.5 ms at n = 1 GB. Had the tie gone to d1: first 0.01 + 0.0025, then
    // d0 (0.0125 against 0.02) takes chunk 2's whole share: T = 0.0225 u = 11.25 ms.
    let topo = "switch(2, 50GB/s, 0ns) x switch(4, 75GB/s, 0ns)";
    let opts = Options {
        algorithm: Algorithm::Ring,
        chunks: 2,
        schedule: Schedule::Themis,
    };
    assert_relative_eq!(
        total(ReduceScatter, 1e9, topo, opts),
        12.5e-3,
        max_relative = 1e-12
    );
}

#[test]
fn collective_themis_reaches_the_bandwidth_bound() {
    // Many chunks: T → max_d (bytes through d / B_d). Both dims carry, over all chunks,
    // half the chunks at full size and half at a quarter: (3/4·n/2 + 3/4·n/8)/B each.
    let topo = "switch(4, 100GB/s, 0ns) x switch(4, 100GB/s, 0ns)";
    let n = 1e9;
    let opts = Options {
        algorithm: Algorithm::Ring,
        chunks: 1024,
        schedule: Schedule::Themis,
    };
    let bound = (0.75 * n / 2.0 + 0.75 * n / 8.0) / 1e11;
    assert_relative_eq!(
        total(ReduceScatter, n, topo, opts),
        bound,
        max_relative = 2e-3
    );
    let base = Options {
        schedule: Schedule::Baseline,
        ..opts
    };
    assert!(total(ReduceScatter, n, topo, base) > 1.5 * bound);
}

#[test]
fn collective_group_of_one_costs_nothing() {
    for op in Collective::ALL {
        for alg in Algorithm::ALL {
            let topo = "switch(1, 100GB/s, 1us, in-network) x ring(1, 1GB/s, 1ms)";
            let t = Topology::parse(topo).unwrap();
            let r = collective::time(
                op,
                Bytes::new(1e9),
                t.dims(),
                &Options {
                    algorithm: alg,
                    ..Options::default()
                },
            );
            if let Ok(r) = r {
                assert_eq!(r.total, Seconds::ZERO, "{} {}", op.name(), alg.name());
                assert_eq!(r.n_phases, 0);
            }
        }
    }
}

#[test]
fn collective_large_sizes_reach_busbw_b_for_bandwidth_optimal_algorithms() {
    let cases = [
        (AllReduce, Algorithm::Ring, "ring(8, 100GB/s, 500ns)", 1e11),
        (
            ReduceScatter,
            Algorithm::Ring,
            "ring(8, 100GB/s, 500ns)",
            1e11,
        ),
        (
            AllGather,
            Algorithm::Direct,
            "fully_connected(8, 140GB/s, 1us)",
            1.4e11,
        ),
        (AllToAll, Algorithm::Direct, "switch(16, 50GB/s, 1us)", 5e10),
        (
            AllReduce,
            Algorithm::HalvingDoubling,
            "switch(16, 50GB/s, 1us)",
            5e10,
        ),
        (Broadcast, Algorithm::Ring, "ring(8, 100GB/s, 500ns)", 1e11),
        (
            Reduce,
            Algorithm::DoubleBinaryTree,
            "switch(16, 50GB/s, 1us)",
            5e10,
        ),
    ];
    for (op, alg, topo, b) in cases {
        let t = Topology::parse(topo).unwrap();
        let n = Bytes::new(1e14);
        let r = collective::time(
            op,
            n,
            t.dims(),
            &Options {
                algorithm: alg,
                ..Options::default()
            },
        )
        .unwrap();
        let (_, bus) = collective::bandwidths(op, n, t.npus(), r.total);
        assert_relative_eq!(bus.get(), b, max_relative = 1e-6);
    }
}

fn arb_dim() -> impl Strategy<Value = Dim> {
    (
        0..3u8,
        1..17u32,
        1e9..1e12f64,
        0.0..1e-5f64,
        any::<bool>(),
        1.0..4.0f64,
    )
        .prop_map(|(k, p, b, a, inn, over)| {
            let kind = [DimKind::Ring, DimKind::FullyConnected, DimKind::Switch][k as usize];
            let sw = kind == DimKind::Switch;
            Dim {
                kind,
                size: p,
                bandwidth: Bandwidth::new(b),
                latency: Seconds::new(a),
                in_network: sw && inn,
                oversubscription: if sw { over } else { 1.0 },
                in_network_efficiency: 1.0,
            }
        })
}

fn arb_case() -> impl Strategy<Value = (Collective, Vec<Dim>, u32, f64)> {
    (
        0..9usize,
        prop::collection::vec(arb_dim(), 1..4),
        1..9u32,
        1.0..1e10f64,
    )
        .prop_map(|(o, d, c, n)| (Collective::ALL[o], d, c, n))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    #[test]
    fn collective_time_never_falls_as_size_grows((op, dims, chunks, n) in arb_case(), grow in 1.0..100.0f64) {
        let o = Options { chunks, ..Options::default() };
        let t1 = collective::time(op, Bytes::new(n), &dims, &o).unwrap().total.get();
        let t2 = collective::time(op, Bytes::new(n * grow), &dims, &o).unwrap().total.get();
        prop_assert!(t2 >= t1 * (1.0 - 1e-12), "{t1} > {t2}");
    }

    #[test]
    fn collective_time_never_falls_as_bandwidth_drops((op, dims, chunks, n) in arb_case(), which in 0..3usize, cut in 1.0..10.0f64) {
        let o = Options { chunks, ..Options::default() };
        let t1 = collective::time(op, Bytes::new(n), &dims, &o).unwrap().total.get();
        let mut slower = dims.clone();
        let i = which % slower.len();
        slower[i].bandwidth = slower[i].bandwidth / cut;
        let t2 = collective::time(op, Bytes::new(n), &slower, &o).unwrap().total.get();
        prop_assert!(t2 >= t1 * (1.0 - 1e-12), "{t1} > {t2}");
    }

    #[test]
    fn collective_small_sizes_are_latency_bound((op, dims, _c, _n) in arb_case()) {
        // At 0 bytes the time is all latency; at 1 byte with α ≥ 1 µs the transfer of any
        // winning algorithm (≤ 15 pieces through B/k ≥ 250 MB/s: 60 ns) stays under 10 %.
        let zero = collective::time(op, Bytes::new(0.0), &dims, &Options::default()).unwrap();
        let lat0: f64 = zero.phases().iter().map(|p| p.latency.get()).sum();
        prop_assert_eq!(zero.total.get(), lat0);
        let r = collective::time(op, Bytes::new(1.0), &dims, &Options::default()).unwrap();
        let lat: f64 = r.phases().iter().map(|p| p.latency.get()).sum();
        let min_a = dims.iter().map(|d| d.latency.get()).fold(f64::INFINITY, f64::min);
        if r.n_phases > 0 && min_a >= 1e-6 {
            prop_assert!(lat / r.total.get() > 0.9, "latency {lat} of {}", r.total.get());
        }
    }

    #[test]
    fn collective_themis_with_one_chunk_is_the_baseline((op, dims, _c, n) in arb_case()) {
        let b = collective::time(op, Bytes::new(n), &dims, &Options { schedule: Schedule::Baseline, ..Options::default() }).unwrap().total;
        let t = collective::time(op, Bytes::new(n), &dims, &Options { schedule: Schedule::Themis, ..Options::default() }).unwrap().total;
        prop_assert_eq!(b, t);
    }
}
