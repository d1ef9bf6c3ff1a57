//! `collective::total` (the hot path) returns exactly `collective::time(..).total` for every
//! collective, algorithm, chunk count and schedule on random multi-dimensional networks.

use astrolabe::collective::{self, Algorithm, Collective, Options, Schedule};
use astrolabe::network::{Dim, DimKind};
use astrolabe::units::{Bandwidth, Bytes, Seconds};
use proptest::prelude::*;

fn dim(kind: u8, size: u32, bw: f64, lat: f64) -> Dim {
    let kind = [DimKind::Ring, DimKind::FullyConnected, DimKind::Switch][kind as usize % 3];
    Dim::new(kind, size, Bandwidth::new(bw), Seconds::new(lat)).expect("valid dim")
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(3000))]
    #[test]
    fn collective_total_equals_time_total(
        spec in proptest::collection::vec((0u8..3, 1u32..17, 1e9f64..1e12, 0.0f64..1e-5), 1..4),
        op in 0usize..9, alg in 0usize..7, chunks in 1u32..9, themis: bool,
        size in 1.0f64..1e10,
    ) {
        let dims: Vec<Dim> = spec.iter().map(|&(k, p, b, l)| dim(k, p, b, l)).collect();
        let opts = Options {
            algorithm: Algorithm::ALL[alg],
            chunks,
            schedule: if themis { Schedule::Themis } else { Schedule::Baseline },
        };
        let op = Collective::ALL[op];
        let full = collective::time(op, Bytes::new(size), &dims, &opts);
        let fast = collective::total(op, Bytes::new(size), &dims, &opts);
        match (full, fast) {
            (Ok(a), Ok(b)) => prop_assert_eq!(a.total, b),
            (Err(_), Err(_)) => {}
            (a, b) => prop_assert!(false, "time {:?} vs total {:?}", a.map(|t| t.total), b),
        }
    }
}
