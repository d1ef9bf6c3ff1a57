//! Streaming ranking: a bounded top-k and a two-objective Pareto set. Both keep a
//! deterministic total order (value, then configuration index), so parallel and sequential
//! runs give identical results whatever the split, and memory stays flat however large the
//! grid.

use std::cmp::Ordering;
use std::collections::BinaryHeap;

/// An entry ranked by `key` (smaller is better), ties broken by `index` (smaller first).
#[derive(Clone, Copy, Debug)]
pub struct Ranked<T> {
    /// The ranking key; smaller is better (negate to maximise).
    pub key: f64,
    /// The configuration's index in the grid (unique).
    pub index: u64,
    /// The payload.
    pub item: T,
}

impl<T> Ranked<T> {
    fn cmp_key(&self, o: &Self) -> Ordering {
        self.key.total_cmp(&o.key).then(self.index.cmp(&o.index))
    }
}

impl<T> PartialEq for Ranked<T> {
    fn eq(&self, o: &Self) -> bool {
        self.cmp_key(o) == Ordering::Equal
    }
}
impl<T> Eq for Ranked<T> {}
impl<T> PartialOrd for Ranked<T> {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl<T> Ord for Ranked<T> {
    fn cmp(&self, o: &Self) -> Ordering {
        self.cmp_key(o)
    }
}

/// The k best entries seen so far. A max-heap of the kept entries: a new entry enters only
/// if it beats the current worst, so each offer is O(log k) and memory is O(k).
#[derive(Clone, Debug)]
pub struct TopK<T> {
    k: usize,
    heap: BinaryHeap<Ranked<T>>,
}

impl<T> TopK<T> {
    /// An empty top-k keeping at most `k` entries.
    pub fn new(k: usize) -> Self {
        TopK {
            k,
            // Grown as entries arrive: k may be far larger than what the grid holds.
            heap: BinaryHeap::with_capacity(k.saturating_add(1).min(1024)),
        }
    }

    /// Offers an entry; keeps it if it is among the k best.
    pub fn offer(&mut self, e: Ranked<T>) {
        if self.k == 0 || !e.key.is_finite() {
            return;
        }
        if self.heap.len() < self.k {
            self.heap.push(e);
        } else if self.heap.peek().is_some_and(|worst| e < *worst) {
            self.heap.pop();
            self.heap.push(e);
        }
    }

    /// Whether an entry with this key and index would be kept (cheap pre-check, so the
    /// caller can skip building the payload).
    pub fn would_keep(&self, key: f64, index: u64) -> bool {
        if self.heap.len() < self.k {
            return key.is_finite();
        }
        match self.heap.peek() {
            Some(w) => key.total_cmp(&w.key).then(index.cmp(&w.index)) == Ordering::Less,
            None => false,
        }
    }

    /// The key of the k-th best entry once k are kept (no entry with a larger key can
    /// enter); `None` before.
    pub fn threshold(&self) -> Option<f64> {
        if self.heap.len() < self.k {
            return None;
        }
        self.heap.peek().map(|w| w.key)
    }

    /// Merges another top-k into this one.
    pub fn merge(&mut self, other: TopK<T>) {
        for e in other.heap {
            self.offer(e);
        }
    }

    /// The kept entries, best first.
    pub fn into_sorted(self) -> Vec<Ranked<T>> {
        let mut v = self.heap.into_vec();
        v.sort();
        v
    }

    /// Number of kept entries.
    pub fn len(&self) -> usize {
        self.heap.len()
    }

    /// Whether nothing is kept.
    pub fn is_empty(&self) -> bool {
        self.heap.is_empty()
    }
}

/// A point of two objectives, both minimised.
#[derive(Clone, Copy, Debug)]
pub struct Point<T> {
    /// First objective (minimised).
    pub x: f64,
    /// Second objective (minimised).
    pub y: f64,
    /// Configuration index, for the tie-break.
    pub index: u64,
    /// The payload.
    pub item: T,
}

/// `a` dominates `b` when it is no worse in both objectives and better in one; exact
/// duplicates are resolved by the smaller index, so the set is deterministic.
fn dominates<T>(a: &Point<T>, b: &Point<T>) -> bool {
    let no_worse = a.x <= b.x && a.y <= b.y;
    let better = a.x < b.x || a.y < b.y;
    no_worse && (better || a.index < b.index)
}

/// The non-dominated set of two minimised objectives, kept sorted by x (so y falls).
/// Capped at `cap` points: beyond it, the point whose removal loses least x-spread is
/// dropped (the ends are always kept), so memory stays bounded.
#[derive(Clone, Debug)]
pub struct Pareto<T> {
    cap: usize,
    pts: Vec<Point<T>>,
}

impl<T: Copy> Pareto<T> {
    /// An empty set holding at most `cap` (≥ 2) points.
    pub fn new(cap: usize) -> Self {
        Pareto {
            cap: cap.max(2),
            pts: Vec::new(),
        }
    }

    /// Whether a kept point dominates (x, y) at `index` (cheap pre-check, so the caller
    /// can skip building the payload).
    pub fn is_dominated(&self, x: f64, y: f64, index: u64) -> bool {
        let probe = Point {
            x,
            y,
            index,
            item: (),
        };
        self.pts.iter().any(|q| {
            let q = Point {
                x: q.x,
                y: q.y,
                index: q.index,
                item: (),
            };
            dominates(&q, &probe)
        })
    }

    /// Offers a point; keeps it if no kept point dominates it, and drops those it dominates.
    pub fn offer(&mut self, p: Point<T>) {
        if !(p.x.is_finite() && p.y.is_finite()) {
            return;
        }
        if self.pts.iter().any(|q| dominates(q, &p)) {
            return;
        }
        self.pts.retain(|q| !dominates(&p, q));
        let at = self
            .pts
            .partition_point(|q| (q.x, q.index) < (p.x, p.index));
        self.pts.insert(at, p);
        if self.pts.len() > self.cap {
            let worst = (1..self.pts.len() - 1)
                .min_by(|&i, &j| {
                    let gap = |k: usize| self.pts[k + 1].x - self.pts[k - 1].x;
                    gap(i).total_cmp(&gap(j))
                })
                .unwrap_or(1);
            self.pts.remove(worst);
        }
    }

    /// Merges another set into this one.
    pub fn merge(&mut self, other: Pareto<T>) {
        for p in other.pts {
            self.offer(p);
        }
    }

    /// The front, sorted by the first objective.
    pub fn points(&self) -> &[Point<T>] {
        &self.pts
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(key: f64, index: u64) -> Ranked<()> {
        Ranked {
            key,
            index,
            item: (),
        }
    }

    #[test]
    fn top_k_keeps_the_smallest_with_index_tie_break() {
        let mut t = TopK::new(3);
        for (i, k) in [5.0, 1.0, 3.0, 1.0, 9.0, 2.0, f64::NAN]
            .into_iter()
            .enumerate()
        {
            t.offer(r(k, i as u64));
        }
        let got: Vec<(f64, u64)> = t.into_sorted().iter().map(|e| (e.key, e.index)).collect();
        assert_eq!(got, vec![(1.0, 1), (1.0, 3), (2.0, 5)]);
    }

    #[test]
    fn merge_equals_sequential() {
        let keys: Vec<f64> = (0..1000).map(|i| ((i * 7919) % 1013) as f64).collect();
        let mut seq = TopK::new(10);
        keys.iter()
            .enumerate()
            .for_each(|(i, &k)| seq.offer(r(k, i as u64)));
        let (mut a, mut b) = (TopK::new(10), TopK::new(10));
        for (i, &k) in keys.iter().enumerate() {
            if i % 3 == 0 {
                a.offer(r(k, i as u64))
            } else {
                b.offer(r(k, i as u64))
            }
        }
        a.merge(b);
        let s: Vec<u64> = seq.into_sorted().iter().map(|e| e.index).collect();
        let m: Vec<u64> = a.into_sorted().iter().map(|e| e.index).collect();
        assert_eq!(s, m);
    }

    #[test]
    fn pareto_front_of_a_known_set() {
        // (1,5) (2,3) (4,1) are non-dominated; (3,4) is dominated by (2,3); (5,5) by all.
        let mut p = Pareto::new(100);
        for (i, (x, y)) in [(3.0, 4.0), (1.0, 5.0), (5.0, 5.0), (2.0, 3.0), (4.0, 1.0)]
            .into_iter()
            .enumerate()
        {
            p.offer(Point {
                x,
                y,
                index: i as u64,
                item: (),
            });
        }
        let xy: Vec<(f64, f64)> = p.points().iter().map(|q| (q.x, q.y)).collect();
        assert_eq!(xy, vec![(1.0, 5.0), (2.0, 3.0), (4.0, 1.0)]);
    }

    #[test]
    fn pareto_cap_keeps_the_ends() {
        let mut p = Pareto::new(4);
        for i in 0..50u64 {
            let x = i as f64;
            p.offer(Point {
                x,
                y: 100.0 - x,
                index: i,
                item: (),
            });
        }
        let pts = p.points();
        assert_eq!(pts.len(), 4);
        assert_eq!(pts[0].x, 0.0);
        assert_eq!(pts[3].x, 49.0);
    }
}
