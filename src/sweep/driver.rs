//! The parallel driver: evaluates grid indices `0..n` in blocks with rayon, streams every
//! result into per-thread bounded [`TopK`] and [`Pareto`] accumulators (merged per block),
//! counts drops per reason, and optionally hands every evaluated row, in index order, to a
//! sink (for `--all`). Nothing is allocated per evaluation; the only buffers are per block.

use super::rank::{Distinct, Pareto, Point, Ranked, TopK};
use rayon::prelude::*;
use std::time::Instant;

/// Number of distinct drop reasons a sweep can count.
pub const MAX_REASONS: usize = 16;

/// What one evaluation produced.
#[derive(Clone, Copy, Debug)]
pub enum Outcome<T> {
    /// A valid configuration: its payload, ranking key (smaller is better) and the two
    /// Pareto objectives (both minimised).
    Kept {
        /// Payload.
        item: T,
        /// Ranking key, smaller is better.
        key: f64,
        /// First Pareto objective, minimised.
        x: f64,
        /// Second Pareto objective, minimised.
        y: f64,
    },
    /// Dropped for the reason with this index (see the caller's reason names).
    Dropped(usize),
}

/// The merged result of a run.
#[derive(Clone, Debug)]
pub struct RunResult<T> {
    /// The best entries, best first.
    pub top: Vec<Ranked<T>>,
    /// The Pareto front, sorted by x.
    pub pareto: Vec<Point<T>>,
    /// Configurations evaluated (kept + dropped).
    pub evaluated: u64,
    /// Kept (valid) configurations.
    pub kept: u64,
    /// Dropped configurations, per reason index.
    pub dropped: [u64; MAX_REASONS],
    /// Wall time of the evaluation, seconds.
    pub elapsed_s: f64,
}

/// One thread's accumulator: its top-k, Pareto set and counts.
pub(super) struct Acc<T: Distinct> {
    pub(super) top: TopK<T>,
    pub(super) pareto: Pareto<T>,
    pub(super) kept: u64,
    pub(super) dropped: [u64; MAX_REASONS],
}

impl<T: Copy + Distinct> Acc<T> {
    pub(super) fn new(k: usize, cap: usize) -> Self {
        Acc {
            top: TopK::new(k),
            pareto: Pareto::new(cap),
            kept: 0,
            dropped: [0; MAX_REASONS],
        }
    }
    pub(super) fn add(&mut self, index: u64, o: Outcome<T>) {
        match o {
            Outcome::Kept { item, key, x, y } => {
                self.kept += 1;
                if self.top.would_keep(key, index) {
                    self.top.offer(Ranked { key, index, item });
                }
                if !self.pareto.is_dominated(x, y, index) {
                    self.pareto.offer(Point { x, y, index, item });
                }
            }
            Outcome::Dropped(r) => self.dropped[r.min(MAX_REASONS - 1)] += 1,
        }
    }
    pub(super) fn merge(mut self, o: Self) -> Self {
        self.top.merge(o.top);
        self.pareto.merge(o.pareto);
        self.kept += o.kept;
        for (a, b) in self.dropped.iter_mut().zip(o.dropped) {
            *a += b;
        }
        self
    }
}

/// Run settings.
#[derive(Clone, Copy, Debug)]
pub struct RunOptions {
    /// How many entries the top-k keeps.
    pub top_k: usize,
    /// Cap on the Pareto set size.
    pub pareto_cap: usize,
    /// Evaluate in parallel (rayon) or on one thread.
    pub parallel: bool,
    /// Show a progress bar on standard error.
    pub progress: bool,
}

/// Configurations per block (merge and progress step).
pub(super) const BLOCK: u64 = 1 << 16;

/// Receives every outcome in index order.
pub type Sink<'a, T> = &'a mut dyn FnMut(u64, &Outcome<T>);

/// Evaluates `eval(state, i)` for every `i` in `0..n`, where `state` is a per-worker value
/// made by `init` (the estimate's [`crate::estimate::Memo`]) that `eval` may reuse across
/// the indices one worker evaluates. `sink`, when given, receives every outcome in index
/// order (used to stream `--all` to a file).
pub fn run<T, S, I, F>(
    n: u64,
    opts: RunOptions,
    init: I,
    eval: F,
    mut sink: Option<Sink<'_, T>>,
) -> RunResult<T>
where
    T: Copy + Send + Sync + Distinct,
    T::Class: Send,
    S: Send,
    I: Fn() -> S + Sync,
    F: Fn(&mut S, u64) -> Outcome<T> + Sync,
{
    let start = Instant::now();
    let bar = opts.progress.then(|| progress_bar(n));
    let mut acc = Acc::new(opts.top_k, opts.pareto_cap);
    // The sequential path keeps one state for the whole run.
    let mut serial = init();
    let mut buf: Vec<Outcome<T>> = Vec::new();
    let mut lo = 0;
    while lo < n {
        let hi = (lo + BLOCK).min(n);
        if let Some(sink) = sink.as_deref_mut() {
            buf.clear();
            if opts.parallel {
                let eval = &eval;
                buf.par_extend(chunks(lo, hi).into_par_iter().flat_map_iter(|(a, b)| {
                    let mut state = init();
                    (a..b).map(move |i| eval(&mut state, i))
                }));
            } else {
                let mut state = init();
                buf.extend((lo..hi).map(|i| eval(&mut state, i)));
            }
            for (i, o) in (lo..hi).zip(buf.iter()) {
                sink(i, o);
                acc.add(i, *o);
            }
        } else if opts.parallel {
            let block = chunks(lo, hi)
                .into_par_iter()
                .map(|(a, b)| {
                    let mut acc = Acc::new(opts.top_k, opts.pareto_cap);
                    let mut state = init();
                    for i in a..b {
                        acc.add(i, eval(&mut state, i));
                    }
                    acc
                })
                .reduce(|| Acc::new(opts.top_k, opts.pareto_cap), Acc::merge);
            acc = acc.merge(block);
        } else {
            for i in lo..hi {
                acc.add(i, eval(&mut serial, i));
            }
        }
        if let Some(b) = &bar {
            b.set_position(hi);
        }
        lo = hi;
    }
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    finish(acc, n, start)
}

/// The run's result from its merged accumulator.
pub(super) fn finish<T: Copy + Distinct>(acc: Acc<T>, n: u64, start: Instant) -> RunResult<T> {
    RunResult {
        top: acc.top.into_sorted(),
        pareto: acc.pareto.points().to_vec(),
        evaluated: n,
        kept: acc.kept,
        dropped: acc.dropped,
        elapsed_s: start.elapsed().as_secs_f64(),
    }
}

/// Splits `lo..hi` into contiguous chunks, eight per worker thread (at least 256
/// indices each): each chunk is evaluated by one worker with one state, so a state (and
/// what it caches) serves a whole chunk while the work still balances across threads.
fn chunks(lo: u64, hi: u64) -> Vec<(u64, u64)> {
    let size = ((hi - lo) / (8 * rayon::current_num_threads() as u64)).max(256);
    (lo..hi)
        .step_by(size as usize)
        .map(|a| (a, (a + size).min(hi)))
        .collect()
}

pub(super) fn progress_bar(n: u64) -> indicatif::ProgressBar {
    let b = indicatif::ProgressBar::new(n);
    if let Ok(style) = indicatif::ProgressStyle::with_template(
        "{spinner} [{elapsed_precise}] {wide_bar} {human_pos}/{human_len} evaluated ({per_sec}, eta {eta})",
    ) {
        b.set_style(style);
    }
    b
}

#[cfg(test)]
mod tests {
    use super::*;

    fn synthetic(i: u64) -> Outcome<u64> {
        // A deterministic pseudo-random objective with many ties, and some drops.
        let h = i.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 40;
        if h.is_multiple_of(7) {
            return Outcome::Dropped((h % 3) as usize);
        }
        let key = (h % 1000) as f64;
        Outcome::Kept {
            item: i,
            key,
            x: key,
            y: ((h / 1000) % 1000) as f64,
        }
    }

    fn opts(parallel: bool) -> RunOptions {
        RunOptions {
            top_k: 25,
            pareto_cap: 64,
            parallel,
            progress: false,
        }
    }

    #[test]
    fn parallel_and_sequential_agree_exactly() {
        let n = 300_000;
        let a = run(n, opts(true), || (), |_: &mut (), i| synthetic(i), None);
        let b = run(n, opts(false), || (), |_: &mut (), i| synthetic(i), None);
        let ia: Vec<u64> = a.top.iter().map(|e| e.index).collect();
        let ib: Vec<u64> = b.top.iter().map(|e| e.index).collect();
        assert_eq!(ia, ib);
        let pa: Vec<u64> = a.pareto.iter().map(|p| p.index).collect();
        let pb: Vec<u64> = b.pareto.iter().map(|p| p.index).collect();
        assert_eq!(pa, pb);
        assert_eq!(a.dropped, b.dropped);
        assert_eq!(a.kept + a.dropped.iter().sum::<u64>(), n);
    }

    #[test]
    fn top_is_the_true_minimum() {
        let n = 100_000;
        let r = run(n, opts(true), || (), |_: &mut (), i| synthetic(i), None);
        let mut all: Vec<(f64, u64)> = (0..n)
            .filter_map(|i| match synthetic(i) {
                Outcome::Kept { key, .. } => Some((key, i)),
                Outcome::Dropped(_) => None,
            })
            .collect();
        all.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
        let want: Vec<u64> = all.iter().take(25).map(|e| e.1).collect();
        let got: Vec<u64> = r.top.iter().map(|e| e.index).collect();
        assert_eq!(got, want);
    }

    #[test]
    fn sink_sees_every_row_in_order() {
        let mut seen = Vec::new();
        let mut sink = |i: u64, _: &Outcome<u64>| seen.push(i);
        run(
            70_000,
            opts(true),
            || (),
            |_: &mut (), i| synthetic(i),
            Some(&mut sink),
        );
        assert_eq!(seen.len(), 70_000);
        assert!(seen.windows(2).all(|w| w[1] == w[0] + 1));
    }
}
