//! `estimate::evaluate` allocates nothing (sweeps call it millions of times), nor does
//! `estimate::evaluate_memo` (the sweep's hot loop): a counting global allocator around
//! evaluations of every model kind and plan feature.

use astrolabe::catalog;
use astrolabe::estimate;
use astrolabe::parallel::{PlanSpec, Recompute, Schedule};
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
fn evaluate_does_not_allocate() {
    let cases = [
        (
            "gpt3-175b",
            "dgx-a100",
            PlanSpec {
                gpus: Some(128),
                tp: 8,
                pp: 8,
                global_batch: Some(128),
                schedule: Schedule::Interleaved,
                virtual_stages: 3,
                recompute: Recompute::Selective,
                sequence_parallel: true,
                ..PlanSpec::default()
            },
        ),
        (
            "mixtral-8x7b",
            "dgx-h100",
            PlanSpec {
                gpus: Some(64),
                tp: 2,
                ep: 8,
                zero: 3,
                recompute: Recompute::Full,
                flash_attention: true,
                ..PlanSpec::default()
            },
        ),
        (
            "llama3-8b",
            "tpu-v4",
            PlanSpec {
                gpus: Some(256),
                tp: 4,
                zero: 1,
                ..PlanSpec::default()
            },
        ),
        (
            "dlrm",
            "dgx-a100",
            PlanSpec {
                gpus: Some(16),
                micro_batch: 1024,
                ..PlanSpec::default()
            },
        ),
        (
            "resnet50",
            "dgx-a100",
            PlanSpec {
                gpus: Some(8),
                micro_batch: 256,
                ..PlanSpec::default()
            },
        ),
    ];
    for (model, system, spec) in cases {
        let m = catalog::model(model).unwrap();
        let s = catalog::system(system)
            .unwrap()
            .with_gpus(spec.gpus.unwrap())
            .unwrap();
        let plan = estimate::plan(&m, &s, &spec).unwrap();
        let mut memo = estimate::Memo::new();
        let before = ALLOCS.load(Ordering::Relaxed);
        for _ in 0..10 {
            std::hint::black_box(estimate::evaluate(&m, &s, &plan).unwrap());
            // The sweep's path: the memo's first call fills it, the others reuse it.
            std::hint::black_box(estimate::evaluate_memo(&m, &s, 0, &plan, &mut memo).unwrap());
        }
        assert_eq!(ALLOCS.load(Ordering::Relaxed), before, "{model} allocated");
    }
}
