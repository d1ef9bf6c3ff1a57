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

/// What makes two ranked entries the same plan for the reader. Entries of one class *tie*:
/// the ranked list keeps only the best of them (smallest key, then smallest index), so it
/// lists distinct plans. The class must depend on the entry alone (an equivalence, not a
/// tolerance between two entries), which keeps the list independent of the order entries
/// arrive in.
pub trait Distinct {
    /// The class key.
    type Class: Copy + Eq + std::hash::Hash;
    /// The class of this entry at grid index `index`.
    fn class(&self, index: u64) -> Self::Class;
}

/// Payloads without ties: every index is its own class.
impl Distinct for () {
    type Class = u64;
    fn class(&self, index: u64) -> u64 {
        index
    }
}

/// Payloads without ties: every index is its own class.
impl Distinct for u64 {
    type Class = u64;
    fn class(&self, index: u64) -> u64 {
        index
    }
}

/// The k best classes seen so far, each by its best entry (its representative). A
/// max-heap of representatives and a map from class to its representative's (key, index):
/// an entry whose class is kept replaces the representative only when better; a new class
/// enters only when it beats the worst kept one. Representatives replaced stay in the heap
/// as stale entries (not in the map) and are skipped; the worst live entry is always on
/// top. Each offer is O(log k) and memory O(k).
///
/// Exactness: the kept classes are the k classes with the best representatives whatever
/// the arrival order — a class among those k is never evicted once its best entry has
/// arrived (k other classes would have to beat that entry), and an entry of a kept class
/// that beats the class's representative also beats the worst kept entry, so the cheap
/// pre-check [`TopK::would_keep`] never loses it.
#[derive(Clone, Debug)]
pub struct TopK<T: Distinct> {
    k: usize,
    heap: BinaryHeap<Ranked<T>>,
    reps: std::collections::HashMap<T::Class, (u64, u64)>,
}

impl<T: Distinct> TopK<T> {
    /// An empty top-k keeping at most `k` classes.
    pub fn new(k: usize) -> Self {
        TopK {
            k,
            // Grown as entries arrive: k may be far larger than what the grid holds.
            heap: BinaryHeap::with_capacity(k.saturating_add(1).min(1024)),
            reps: std::collections::HashMap::new(),
        }
    }

    fn live(&self, e: &Ranked<T>) -> bool {
        self.reps.get(&e.item.class(e.index)) == Some(&(e.key.to_bits(), e.index))
    }

    /// Drops stale entries from the top of the heap (so the top is the worst live entry),
    /// and rebuilds the heap when stale entries outnumber live ones.
    fn clean(&mut self) {
        while let Some(top) = self.heap.peek() {
            if self.live(top) {
                break;
            }
            self.heap.pop();
        }
        if self.heap.len() > 2 * self.reps.len() + 64 {
            let reps = &self.reps;
            self.heap
                .retain(|e| reps.get(&e.item.class(e.index)) == Some(&(e.key.to_bits(), e.index)));
        }
    }

    /// Offers an entry; keeps it if its class is among the k best and it is the class's
    /// best entry so far.
    pub fn offer(&mut self, e: Ranked<T>) {
        if self.k == 0 || !e.key.is_finite() {
            return;
        }
        let c = e.item.class(e.index);
        let id = (e.key.to_bits(), e.index);
        if let Some(cur) = self.reps.get_mut(&c) {
            let better = e
                .key
                .total_cmp(&f64::from_bits(cur.0))
                .then(e.index.cmp(&cur.1))
                == Ordering::Less;
            if better {
                *cur = id;
                self.heap.push(e);
                self.clean();
            }
            return;
        }
        if self.reps.len() < self.k {
            self.reps.insert(c, id);
            self.heap.push(e);
        } else if self.heap.peek().is_some_and(|worst| e < *worst) {
            if let Some(w) = self.heap.pop() {
                self.reps.remove(&w.item.class(w.index));
            }
            self.reps.insert(c, id);
            self.heap.push(e);
            self.clean();
        }
    }

    /// Whether an entry with this key and index could be kept (cheap pre-check, so the
    /// caller can skip building the payload).
    pub fn would_keep(&self, key: f64, index: u64) -> bool {
        if self.reps.len() < self.k {
            return key.is_finite();
        }
        match self.heap.peek() {
            Some(w) => key.total_cmp(&w.key).then(index.cmp(&w.index)) == Ordering::Less,
            None => false,
        }
    }

    /// The key of the k-th best class once k are kept (no entry with a larger key can
    /// enter); `None` before.
    pub fn threshold(&self) -> Option<f64> {
        if self.reps.len() < self.k {
            return None;
        }
        self.heap.peek().map(|w| w.key)
    }

    /// Merges another top-k into this one.
    pub fn merge(&mut self, other: TopK<T>) {
        let TopK { heap, reps, .. } = other;
        for e in heap {
            if reps.get(&e.item.class(e.index)) == Some(&(e.key.to_bits(), e.index)) {
                self.offer(e);
            }
        }
    }

    /// The kept representatives, best first.
    pub fn into_sorted(self) -> Vec<Ranked<T>> {
        let reps = self.reps;
        let mut v: Vec<Ranked<T>> = self
            .heap
            .into_iter()
            .filter(|e| reps.get(&e.item.class(e.index)) == Some(&(e.key.to_bits(), e.index)))
            .collect();
        v.sort();
        v
    }

    /// Number of kept classes.
    pub fn len(&self) -> usize {
        self.reps.len()
    }

    /// Whether nothing is kept.
    pub fn is_empty(&self) -> bool {
        self.reps.is_empty()
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

    /// A payload whose class is its value: entries with equal values tie.
    #[derive(Clone, Copy, Debug)]
    struct Tag(u32);
    impl Distinct for Tag {
        type Class = u32;
        fn class(&self, _: u64) -> u32 {
            self.0
        }
    }

    #[test]
    fn ties_keep_the_best_of_each_class_in_any_order() {
        // (key, class): classes 7 (best 1.0 at index 1), 8 (best 2.0), 9 (3.0), 10 (4.0).
        let items = [
            (5.0, 7),
            (1.0, 7),
            (2.0, 8),
            (1.5, 7),
            (3.0, 9),
            (2.5, 8),
            (4.0, 10),
            (6.0, 9),
        ];
        let want = vec![(1.0, 1), (2.0, 2), (3.0, 4)];
        let orders: [Vec<usize>; 3] = [
            (0..items.len()).collect(),
            (0..items.len()).rev().collect(),
            vec![6, 3, 0, 7, 2, 5, 1, 4],
        ];
        for order in orders {
            let mut t = TopK::new(3);
            for i in order {
                let (key, c) = items[i];
                t.offer(Ranked {
                    key,
                    index: i as u64,
                    item: Tag(c),
                });
            }
            assert_eq!(t.len(), 3);
            assert_eq!(t.threshold(), Some(3.0));
            let got: Vec<(f64, u64)> = t.into_sorted().iter().map(|e| (e.key, e.index)).collect();
            assert_eq!(got, want);
        }
        // Split in two and merged: the same.
        let (mut a, mut b) = (TopK::new(3), TopK::new(3));
        for (i, &(key, c)) in items.iter().enumerate() {
            let e = Ranked {
                key,
                index: i as u64,
                item: Tag(c),
            };
            if i % 2 == 0 { a.offer(e) } else { b.offer(e) }
        }
        a.merge(b);
        let got: Vec<(f64, u64)> = a.into_sorted().iter().map(|e| (e.key, e.index)).collect();
        assert_eq!(got, want);
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
