//! `collective::time` allocates nothing (the estimate and sweep hot loops rely on it):
//! a counting global allocator around the call, for every collective with `auto`, on a
//! 3-dimension topology where several algorithms do not apply, chunked, both schedules.

use astrolabe::collective::{self, Collective, Options, Schedule};
use astrolabe::network::Topology;
use astrolabe::units::Bytes;
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

struct Counting;

static ALLOCS: AtomicUsize = AtomicUsize::new(0);

// SAFETY: forwards every call unchanged to the system allocator; only counts.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        ALLOCS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: same contract as the caller's.
        unsafe { System.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        // SAFETY: same contract as the caller's.
        unsafe { System.dealloc(p, l) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

#[test]
fn collective_time_does_not_allocate() {
    let topo = Topology::parse(
        "ring(4, 200GB/s, 500ns) x fully_connected(6, 100GB/s, 1us) x switch(16, 50GB/s, 2us, in-network)",
    )
    .unwrap();
    let dims = topo.dims();
    for schedule in [Schedule::Baseline, Schedule::Themis] {
        for chunks in [1, 4] {
            let opts = Options {
                chunks,
                schedule,
                ..Options::default()
            };
            for op in Collective::ALL {
                let before = ALLOCS.load(Ordering::Relaxed);
                let r = collective::time(op, Bytes::new(1e9), dims, &opts);
                let after = ALLOCS.load(Ordering::Relaxed);
                assert!(r.is_ok());
                assert_eq!(
                    after,
                    before,
                    "{} allocated ({chunks} chunks, {schedule:?})",
                    op.name()
                );
            }
        }
    }
}
