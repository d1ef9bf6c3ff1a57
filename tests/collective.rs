//! Every collective × algorithm × building block against values worked out by hand from the
//! textbook closed forms (Thakur, Rabenseifner & Gropp 2005; Chan et al. 2007; NCCL; Li et
//! al. 2014; SHARP), written out below as arithmetic, never taken from the code's output.
//!
//! Dimensions used (n = 1e8 bytes throughout):
//! - R  = ring(8, 100GB/s, 500ns): B = 1e11, α = 5e-7; one neighbour link B/2 = 5e10
//! - F  = fully_connected(8, 140GB/s, 1us): B = 1.4e11, one link B/7 = 2e10; rings use 6
//!   of 7 links: 1.2e11
//! - S  = switch(8, 200GB/s, 2us): B = 2e11, α = 2e-6
//! - S6 = switch(6, 200GB/s, 2us) and R6 = ring(6, 100GB/s, 500ns): p not a power of two
//! - SI = switch(8, 200GB/s, 2us, in-network); SO = switch(8, 200GB/s, 2us, oversub=2)

use approx::assert_relative_eq;
use astrolabe::collective::{self, Algorithm, Collective, Options};
use astrolabe::network::Topology;
use astrolabe::units::Bytes;

const N: f64 = 1e8;
const R: &str = "ring(8, 100GB/s, 500ns)";
const F: &str = "fully_connected(8, 140GB/s, 1us)";
const S: &str = "switch(8, 200GB/s, 2us)";
const S6: &str = "switch(6, 200GB/s, 2us)";
const R6: &str = "ring(6, 100GB/s, 500ns)";
const SI: &str = "switch(8, 200GB/s, 2us, in-network)";
const SO: &str = "switch(8, 200GB/s, 2us, oversub=2)";

use Algorithm::*;
use Collective::*;

#[track_caller]
fn check(op: Collective, alg: Algorithm, topo: &str, expected: f64) {
    let t = Topology::parse(topo).unwrap();
    let opts = Options {
        algorithm: alg,
        ..Options::default()
    };
    let got = collective::time(op, Bytes::new(N), t.dims(), &opts)
        .unwrap_or_else(|e| panic!("{} {} on {topo}: {e}", op.name(), alg.name()));
    assert_relative_eq!(got.total.get(), expected, max_relative = 1e-12);
}

#[track_caller]
fn unsupported(op: Collective, alg: Algorithm, topo: &str, words: &[&str]) {
    let t = Topology::parse(topo).unwrap();
    let opts = Options {
        algorithm: alg,
        ..Options::default()
    };
    match collective::time(op, Bytes::new(N), t.dims(), &opts) {
        Err(astrolabe::Error::Unsupported(m)) => {
            for w in words {
                assert!(
                    m.contains(w),
                    "{} {} on {topo}: '{m}' lacks '{w}'",
                    op.name(),
                    alg.name()
                );
            }
        }
        other => panic!(
            "{} {} on {topo}: expected Unsupported, got {other:?}",
            op.name(),
            alg.name()
        ),
    }
}

#[test]
fn collective_acceptance_example() {
    // DESIGN.md / issue 2: 1e9 bytes on ring(8, 100GB/s, 500ns).
    let t = Topology::parse(R).unwrap();
    let got = collective::time(AllReduce, Bytes::new(1e9), t.dims(), &Options::default()).unwrap();
    let expect = 2.0 * 7.0 * 500e-9 + 2.0 * (7.0 / 8.0) * 1e9 / 1e11;
    assert_relative_eq!(got.total.get(), expect, max_relative = 1e-12);
    assert_relative_eq!(got.total.get(), 17.507e-3, max_relative = 1e-12);
    let (_, busbw) = collective::bandwidths(AllReduce, Bytes::new(1e9), 8, got.total);
    assert_relative_eq!(
        busbw.get(),
        1e9 / 17.507e-3 * 2.0 * 7.0 / 8.0,
        max_relative = 1e-12
    );
    assert_eq!(format!("{:.2}", busbw.get() / 1e9), "99.96");
}

#[test]
fn collective_ring_on_every_block() {
    let (a, b) = (5e-7, 1e11); // R
    check(ReduceScatter, Ring, R, 7.0 * a + 7.0 / 8.0 * N / b);
    check(AllGather, Ring, R, 7.0 * a + 7.0 / 8.0 * N / b);
    check(AllReduce, Ring, R, 14.0 * a + 14.0 / 8.0 * N / b);
    check(AllToAll, Ring, R, 7.0 * a + 16.0 / 8.0 * N / b);
    check(Broadcast, Ring, R, 7.0 * a + N / b);
    check(Reduce, Ring, R, 7.0 * a + N / b);
    check(Gather, Ring, R, 7.0 * a + 7.0 / 8.0 * N / b);
    check(Scatter, Ring, R, 7.0 * a + 7.0 / 8.0 * N / b);
    check(SendRecv, Ring, R, a + N / (b / 2.0));
    let (a, b) = (1e-6, 1.4e11 * 6.0 / 7.0); // F: 3 Hamiltonian rings on 6 of 7 links
    check(ReduceScatter, Ring, F, 7.0 * a + 7.0 / 8.0 * N / b);
    check(AllGather, Ring, F, 7.0 * a + 7.0 / 8.0 * N / b);
    check(AllReduce, Ring, F, 14.0 * a + 14.0 / 8.0 * N / b);
    check(AllToAll, Ring, F, 7.0 * a + 2.0 * N / b);
    check(Broadcast, Ring, F, 7.0 * a + N / b);
    check(Reduce, Ring, F, 7.0 * a + N / b);
    check(Gather, Ring, F, 7.0 * a + 7.0 / 8.0 * N / b);
    check(Scatter, Ring, F, 7.0 * a + 7.0 / 8.0 * N / b);
    check(SendRecv, Ring, F, a + N / 2e10);
    let (a, b) = (2e-6, 2e11); // S
    check(ReduceScatter, Ring, S, 7.0 * a + 7.0 / 8.0 * N / b);
    check(AllGather, Ring, S, 7.0 * a + 7.0 / 8.0 * N / b);
    check(AllReduce, Ring, S, 14.0 * a + 14.0 / 8.0 * N / b);
    check(AllToAll, Ring, S, 7.0 * a + 2.0 * N / b);
    check(Broadcast, Ring, S, 7.0 * a + N / b);
    check(Reduce, Ring, S, 7.0 * a + N / b);
    check(Gather, Ring, S, 7.0 * a + 7.0 / 8.0 * N / b);
    check(Scatter, Ring, S, 7.0 * a + 7.0 / 8.0 * N / b);
    check(SendRecv, Ring, S, a + N / b);
}

#[test]
fn collective_direct_on_every_block() {
    // Ring block: ⌊8/2⌋ = 4 hops; pieces travel 1+2+3+4+3+2+1 = 16 hops in all.
    let (a, b) = (5e-7, 1e11);
    check(ReduceScatter, Direct, R, 4.0 * a + 16.0 / 8.0 * N / b);
    check(AllGather, Direct, R, 4.0 * a + 16.0 / 8.0 * N / b);
    check(AllToAll, Direct, R, 4.0 * a + 16.0 / 8.0 * N / b);
    check(AllReduce, Direct, R, 8.0 * a + 32.0 / 8.0 * N / b);
    check(Broadcast, Direct, R, 4.0 * a + 7.0 * N / b);
    check(Reduce, Direct, R, 4.0 * a + 7.0 * N / b);
    check(Gather, Direct, R, 4.0 * a + 7.0 / 8.0 * N / b);
    check(Scatter, Direct, R, 4.0 * a + 7.0 / 8.0 * N / b);
    check(SendRecv, Direct, R, a + N / 5e10);
    // FullyConnected: 7 pieces of n/8, one per link of 2e10.
    let a = 1e-6;
    check(ReduceScatter, Direct, F, a + (N / 8.0) / 2e10);
    check(AllGather, Direct, F, a + (N / 8.0) / 2e10);
    check(AllToAll, Direct, F, a + (N / 8.0) / 2e10);
    check(AllReduce, Direct, F, 2.0 * a + 2.0 * (N / 8.0) / 2e10);
    check(Broadcast, Direct, F, a + N / 2e10);
    check(Reduce, Direct, F, a + N / 2e10);
    check(Gather, Direct, F, a + (N / 8.0) / 2e10);
    check(Scatter, Direct, F, a + (N / 8.0) / 2e10);
    check(SendRecv, Direct, F, a + N / 2e10);
    let (a, b) = (2e-6, 2e11);
    check(ReduceScatter, Direct, S, a + 7.0 / 8.0 * N / b);
    check(AllGather, Direct, S, a + 7.0 / 8.0 * N / b);
    check(AllToAll, Direct, S, a + 7.0 / 8.0 * N / b);
    check(AllReduce, Direct, S, 2.0 * a + 14.0 / 8.0 * N / b);
    check(Broadcast, Direct, S, a + 7.0 * N / b);
    check(Reduce, Direct, S, a + 7.0 * N / b);
    check(Gather, Direct, S, a + 7.0 / 8.0 * N / b);
    check(Scatter, Direct, S, a + 7.0 / 8.0 * N / b);
    check(SendRecv, Direct, S, a + N / b);
}

#[test]
fn collective_halving_doubling_power_of_two() {
    // Switch: one partner per step at B; log2 8 = 3 steps per pass (Thakur et al. 2005).
    let (a, b) = (2e-6, 2e11);
    check(
        ReduceScatter,
        HalvingDoubling,
        S,
        3.0 * a + 7.0 / 8.0 * N / b,
    );
    check(AllGather, HalvingDoubling, S, 3.0 * a + 7.0 / 8.0 * N / b);
    check(AllReduce, HalvingDoubling, S, 6.0 * a + 14.0 / 8.0 * N / b);
    check(Broadcast, HalvingDoubling, S, 6.0 * a + 14.0 / 8.0 * N / b);
    check(Reduce, HalvingDoubling, S, 6.0 * a + 14.0 / 8.0 * N / b);
    check(Gather, HalvingDoubling, S, 3.0 * a + 7.0 / 8.0 * N / b);
    check(Scatter, HalvingDoubling, S, 3.0 * a + 7.0 / 8.0 * N / b);
    // FullyConnected: each step uses one link of B/7 = 2e10.
    let (a, b) = (1e-6, 2e10);
    check(
        ReduceScatter,
        HalvingDoubling,
        F,
        3.0 * a + 7.0 / 8.0 * N / b,
    );
    check(AllReduce, HalvingDoubling, F, 6.0 * a + 14.0 / 8.0 * N / b);
    check(Broadcast, HalvingDoubling, F, 6.0 * a + 14.0 / 8.0 * N / b);
    check(Scatter, HalvingDoubling, F, 3.0 * a + 7.0 / 8.0 * N / b);
    // Ring block: stages at distance 1, 2, 4 with n/2, n/4, n/8; a link carries d messages
    // one way at B/2: (1·n/2 + 2·n/4 + 4·n/8)/(B/2) = 1.5n/5e10, latency (1+2+4)α.
    let (a, b) = (5e-7, 5e10);
    check(ReduceScatter, HalvingDoubling, R, 7.0 * a + 1.5 * N / b);
    check(AllGather, HalvingDoubling, R, 7.0 * a + 1.5 * N / b);
    check(AllReduce, HalvingDoubling, R, 14.0 * a + 3.0 * N / b);
    check(Broadcast, HalvingDoubling, R, 14.0 * a + 3.0 * N / b);
    check(Reduce, HalvingDoubling, R, 14.0 * a + 3.0 * N / b);
    check(Gather, HalvingDoubling, R, 7.0 * a + 1.5 * N / b);
    check(Scatter, HalvingDoubling, R, 7.0 * a + 1.5 * N / b);
    for topo in [R, F, S] {
        unsupported(
            AllToAll,
            HalvingDoubling,
            topo,
            &["halving-doubling", "all-to-all"],
        );
        unsupported(
            SendRecv,
            HalvingDoubling,
            topo,
            &["halving-doubling", "send-recv"],
        );
    }
}

#[test]
fn collective_halving_doubling_not_a_power_of_two() {
    // p = 6: p' = 4 run the power-of-two algorithm, the 2 extra NPUs hand over their data
    // before (one step) and get the result after (one step) — Thakur et al. 2005 §4.4.
    let (a, b) = (2e-6, 2e11);
    // all-reduce: n before, 2·log2(4) steps moving 2·3/4·n, n after.
    check(
        AllReduce,
        HalvingDoubling,
        S6,
        (1.0 + 4.0 + 1.0) * a + (1.0 + 1.5 + 1.0) * N / b,
    );
    // reduce-scatter: n before, halving (3/4 n), n/6 after.
    check(
        ReduceScatter,
        HalvingDoubling,
        S6,
        (1.0 + 2.0 + 1.0) * a + (1.0 + 0.75 + 1.0 / 6.0) * N / b,
    );
    // all-gather: n/6 before, doubling (3/4 n), n after.
    check(
        AllGather,
        HalvingDoubling,
        S6,
        (1.0 + 2.0 + 1.0) * a + (1.0 / 6.0 + 0.75 + 1.0) * N / b,
    );
    // broadcast: scatter + all-gather among 4, then n to the extras.
    check(
        Broadcast,
        HalvingDoubling,
        S6,
        (2.0 + 2.0 + 1.0) * a + (0.75 + 0.75 + 1.0) * N / b,
    );
    // reduce: extras hand over n, reduce-scatter + gather among 4.
    check(
        Reduce,
        HalvingDoubling,
        S6,
        (1.0 + 2.0 + 2.0) * a + (1.0 + 0.75 + 0.75) * N / b,
    );
    check(
        Gather,
        HalvingDoubling,
        S6,
        (1.0 + 2.0) * a + (1.0 / 6.0 + 0.75) * N / b,
    );
    check(
        Scatter,
        HalvingDoubling,
        S6,
        (2.0 + 1.0) * a + (0.75 + 1.0 / 6.0) * N / b,
    );
    // Ring of 6: core stages at distances 1, 2 (latency 3α, load n/2 + 2·n/4 over B/2),
    // extra steps one hop each.
    let (a, b) = (5e-7, 5e10);
    check(
        AllReduce,
        HalvingDoubling,
        R6,
        (1.0 + 3.0 + 3.0 + 1.0) * a + (1.0 + 1.0 + 1.0 + 1.0) * N / b,
    );
    check(
        ReduceScatter,
        HalvingDoubling,
        R6,
        (1.0 + 3.0 + 1.0) * a + (1.0 + 1.0 + 1.0 / 6.0) * N / b,
    );
}

#[test]
fn collective_double_binary_tree() {
    // Switch: depth ⌈log2 8⌉ = 3; inner nodes send 2n (all-reduce) or n (broadcast/reduce).
    let (a, b) = (2e-6, 2e11);
    check(AllReduce, DoubleBinaryTree, S, 6.0 * a + 2.0 * N / b);
    check(Broadcast, DoubleBinaryTree, S, 3.0 * a + N / b);
    check(Reduce, DoubleBinaryTree, S, 3.0 * a + N / b);
    // Two NPUs: each sends n/2 up one tree and n/2 down the other.
    check(
        AllReduce,
        DoubleBinaryTree,
        "switch(2, 200GB/s, 2us)",
        2.0 * a + N / b,
    );
    // FullyConnected: all-reduce spreads over 4 links of 2e10, broadcast over 2.
    let a = 1e-6;
    check(
        AllReduce,
        DoubleBinaryTree,
        F,
        6.0 * a + 2.0 * N / (4.0 * 2e10),
    );
    check(Broadcast, DoubleBinaryTree, F, 3.0 * a + N / (2.0 * 2e10));
    check(Reduce, DoubleBinaryTree, F, 3.0 * a + N / (2.0 * 2e10));
    for op in [AllReduce, Broadcast, Reduce] {
        unsupported(op, DoubleBinaryTree, R, &["double-binary-tree", "ring"]);
    }
    for op in [
        ReduceScatter,
        AllGather,
        AllToAll,
        Gather,
        Scatter,
        SendRecv,
    ] {
        unsupported(op, DoubleBinaryTree, S, &["double-binary-tree", op.name()]);
    }
}

#[test]
fn collective_parameter_server() {
    // Switch: the server port carries p·n in and p·n out for all-reduce (Li et al. 2014).
    let (a, b) = (2e-6, 2e11);
    check(
        AllReduce,
        ParameterServer,
        S,
        2.0 * a + (8.0 * N + 8.0 * N) / b,
    );
    check(
        ReduceScatter,
        ParameterServer,
        S,
        2.0 * a + (8.0 * N + N) / b,
    );
    check(AllGather, ParameterServer, S, 2.0 * a + (N + 8.0 * N) / b);
    check(Reduce, ParameterServer, S, 2.0 * a + (8.0 * N + N) / b);
    check(Broadcast, ParameterServer, S, 2.0 * a + (N + 7.0 * N) / b);
    check(Gather, ParameterServer, S, 2.0 * a + 2.0 * N / b);
    check(Scatter, ParameterServer, S, 2.0 * a + 2.0 * N / b);
    // FullyConnected: the server's p links add up to B.
    check(
        AllReduce,
        ParameterServer,
        F,
        2.0 * 1e-6 + 16.0 * N / 1.4e11,
    );
    // Ring: server in the ring, farthest worker ⌊9/2⌋ = 4 hops each way.
    check(AllReduce, ParameterServer, R, 8.0 * 5e-7 + 16.0 * N / 1e11);
    check(Gather, ParameterServer, R, 8.0 * 5e-7 + 2.0 * N / 1e11);
    // Oversubscription 2 ≤ p does not bind at the server.
    check(AllReduce, ParameterServer, SO, 2.0 * a + 16.0 * N / b);
    for topo in [R, F, S] {
        unsupported(
            AllToAll,
            ParameterServer,
            topo,
            &["parameter-server", "all-to-all"],
        );
        unsupported(
            SendRecv,
            ParameterServer,
            topo,
            &["parameter-server", "send-recv"],
        );
    }
}

#[test]
fn collective_in_network() {
    // SHARP / NVLS: one step up, one down. All-reduce: the switch reads every NPU's whole
    // buffer (n out) and multicasts the reduced shards back (n/p out): 2α + n(1 + 1/p)/B.
    // The others move n through the busiest direction: 2α + n/B.
    let (a, b) = (2e-6, 2e11);
    check(AllReduce, InNetwork, SI, 2.0 * a + 1.125 * N / b);
    for op in [ReduceScatter, AllGather, Reduce, Broadcast] {
        check(op, InNetwork, SI, 2.0 * a + N / b);
    }
    check(
        AllReduce,
        InNetwork,
        "switch(8, 200GB/s, 2us, in-network, oversub=2)",
        2.0 * a + 1.125 * N / (b / 2.0),
    );
    // With NCCL's NVLS efficiency η = 0.85 the switch sustains 0.85·B.
    check(
        AllReduce,
        InNetwork,
        "switch(8, 200GB/s, 2us, in-network=0.85)",
        2.0 * a + 1.125 * N / (0.85 * b),
    );
    for op in [AllToAll, Gather, Scatter, SendRecv] {
        unsupported(op, InNetwork, SI, &["in-network", op.name()]);
    }
    unsupported(AllReduce, InNetwork, R, &["in-network", "ring"]);
    unsupported(AllReduce, InNetwork, F, &["in-network", "fully_connected"]);
    unsupported(
        AllReduce,
        InNetwork,
        S,
        &["in-network", "without in-network"],
    );
}

#[test]
fn collective_oversubscription_divides_switch_traffic() {
    let (a, b) = (2e-6, 1e11); // B/k = 200/2
    check(AllReduce, Ring, SO, 14.0 * a + 14.0 / 8.0 * N / b);
    check(AllToAll, Direct, SO, a + 7.0 / 8.0 * N / b);
    check(AllReduce, HalvingDoubling, SO, 6.0 * a + 14.0 / 8.0 * N / b);
    check(AllReduce, DoubleBinaryTree, SO, 6.0 * a + 2.0 * N / b);
    // A single flow is not limited by oversubscription.
    check(SendRecv, Direct, SO, a + N / 2e11);
}

#[test]
fn collective_auto_picks_the_fastest() {
    // In-network beats ring on an in-network switch: 2α + 1.125n/B < 14α + 1.75n/B.
    check(AllReduce, Auto, SI, 2.0 * 2e-6 + 1.125 * N / 2e11);
    // Direct all-to-all on a switch.
    check(AllToAll, Auto, S, 2e-6 + 7.0 / 8.0 * N / 2e11);
    let t = Topology::parse(SI).unwrap();
    let r = collective::time(AllReduce, Bytes::new(N), t.dims(), &Options::default()).unwrap();
    assert_eq!(r.phases()[0].algorithm, InNetwork);
    // The baseline schedule (every algorithm that applies is a candidate) finds it too.
    let baseline = Options {
        schedule: astrolabe::collective::Schedule::Baseline,
        ..Options::default()
    };
    let r = collective::time(AllReduce, Bytes::new(N), t.dims(), &baseline).unwrap();
    assert_eq!(r.phases()[0].algorithm, InNetwork);
    assert_relative_eq!(
        r.total.get(),
        2.0 * 2e-6 + 1.125 * N / 2e11,
        max_relative = 1e-9
    );
    // Tiny messages on a ring: direct's 4 hops beat ring's 7 steps (baseline schedule,
    // every algorithm a candidate).
    let t = Topology::parse(R).unwrap();
    let all = Options {
        schedule: astrolabe::collective::Schedule::Baseline,
        ..Options::default()
    };
    let r = collective::time(ReduceScatter, Bytes::new(8.0), t.dims(), &all).unwrap();
    assert_eq!(r.phases()[0].algorithm, Direct);
    // The NCCL schedule (default) picks among NCCL's algorithms only: the ring's 7 steps.
    let nccl = collective::time(
        ReduceScatter,
        Bytes::new(8.0),
        t.dims(),
        &Options::default(),
    );
    assert_eq!(nccl.unwrap().phases()[0].algorithm, Ring);
    assert_relative_eq!(
        r.total.get(),
        4.0 * 5e-7 + 2.0 * 8.0 / 1e11,
        max_relative = 1e-12
    );
}
