//! ASTRA-sim's double binary tree (`DoubleBinaryTreeAllReduce.cc`, `BinaryTree.cc`,
//! `DoubleBinaryTreeTopology.cc`, read at HEAD 518bd51), node by node.
//!
//! **Trees.** On a dimension of p = 2^k NPUs, `BinaryTree` numbers a complete binary tree
//! of p − 1 nodes in order (left subtree, node, right subtree) and adds a root with one
//! child: `RootMax` gives the subtree ids 0..p−2 and the root id p−1 (its left child the
//! subtree's root), `RootMin` the root id 0 and the subtree ids 1..p−1. Consecutive chunks
//! alternate between the two (`DoubleBinaryTreeTopology::get_topology`, counter % 2). Other
//! sizes leave NPUs without a tree node, which crashes ASTRA-sim: refused.
//!
//! **One chunk** of c bytes (every collective runs as an all-reduce of the whole chunk).
//! With E the endpoint delay, R = R(c) the reduction of a processed bundle and
//! T(a, b) = ⌊h·L + c/β⌋ the message between tree nodes a and b (h by their distance in the
//! dimension: min(d, p−d) on a Ring, 2 on a Switch, 1 when fully connected); s_n the time
//! node n starts the chunk:
//! - leaf: its bundle (E), then sends up: `u_n = s_n + E`; when its parent's data lands,
//!   one more bundle: ends at `arrival + E`;
//! - intermediate: posts both receives at s_n (a message that came earlier is delivered
//!   then); each child's data is reduced (E + R, the first bundle's event is absorbed):
//!   `u_n = max_c max(s_n, u_c + T(c, n)) + E + R`; the parent's data is reduced too
//!   (`processed`): `d_n = arrival + E + R`, then it sends to both children and ends;
//! - root: `d_root = max(s_root, u_child + T) + E + R`, sends down and ends.
//!
//! **Chunks.** Each NPU runs its chunks in order on its own, `A` at a time
//! (active-chunks-per-dimension): chunk k starts when the NPU's chunk k − A ends. The
//! collective ends at the latest end. A node that is a leaf in one tree is inside the
//! other, so chunks overlap: with one chunk at a time the whole is less than chunks × the
//! single-chunk time. Reversing the ids maps one tree onto the other and keeps every
//! distance, so which tree goes first (LIFO or FIFO) does not change the result.

use super::phases::LogicalDim;
use crate::error::{Error, Result};

/// One binary tree over `p` NPUs: children (left, right) per id, and the root.
struct Tree {
    children: Vec<[Option<u32>; 2]>,
    root: u32,
}

impl Tree {
    /// `RootMax` (`max = true`) or `RootMin`.
    fn new(p: u64, max: bool) -> Result<Tree> {
        if p < 2 || !p.is_power_of_two() {
            return Err(Error::Unsupported(format!(
                "doubleBinaryTree on {p} NPUs: ASTRA-sim's BinaryTree numbers 2^⌊log2 p⌋ nodes and crashes on the others; use a power of two"
            )));
        }
        let mut children = vec![[None, None]; p as usize];
        let (root, sub) = if max { (p - 1, 0) } else { (0, 1) };
        let top = complete(&mut children, sub, p - 1);
        children[root as usize] = if max {
            [Some(top), None]
        } else {
            [None, Some(top)]
        };
        Ok(Tree {
            children,
            root: root as u32,
        })
    }
}

/// Numbers a complete binary tree of `n` = 2^d − 1 nodes in order from `first`; returns
/// its root and records every node's children.
fn complete(children: &mut [[Option<u32>; 2]], first: u64, n: u64) -> u32 {
    let root = first + n / 2;
    if n > 1 {
        let l = complete(children, first, n / 2);
        let r = complete(children, root + 1, n / 2);
        children[root as usize] = [Some(l), Some(r)];
    }
    root as u32
}

/// Message time between two nodes of dimension `d` carrying `c` bytes.
fn msg(d: &LogicalDim, a: u32, b: u32, c: u64) -> u64 {
    d.msg_ns(d.hops(u64::from(a.abs_diff(b))), c)
}

/// Timing constants of one chunk: dimension, bytes, endpoint delay, reduction.
struct Chunk<'a> {
    d: &'a LogicalDim,
    c: u64,
    e: u64,
    r: u64,
}

impl Chunk<'_> {
    /// The time node `n` sends its reduced data up (the root: down).
    fn up(&self, t: &Tree, n: u32, start: &[u64]) -> u64 {
        let s = start[n as usize];
        let kids = t.children[n as usize];
        if kids.iter().all(Option::is_none) {
            return s + self.e;
        }
        let arrive = kids
            .iter()
            .flatten()
            .map(|&k| s.max(self.up(t, k, start) + msg(self.d, k, n, self.c)))
            .max()
            .unwrap_or(s);
        arrive + self.e + self.r
    }

    /// Ends of the subtree below `n`, which sends down at `at`.
    fn down(&self, t: &Tree, n: u32, at: u64, end: &mut [u64]) {
        end[n as usize] = at;
        for &k in t.children[n as usize].iter().flatten() {
            let arrive = at + msg(self.d, n, k, self.c);
            if t.children[k as usize].iter().all(Option::is_none) {
                end[k as usize] = arrive + self.e;
            } else {
                self.down(t, k, arrive + self.e + self.r, end);
            }
        }
    }

    /// Ends of every node for one chunk on `t`, each node starting at `start`.
    fn run(&self, t: &Tree, start: &[u64], end: &mut [u64]) {
        let at = self.up(t, t.root, start);
        self.down(t, t.root, at, end);
    }
}

/// Time of one chunk of `c` bytes on its own (every NPU starting at 0), ns.
pub fn chunk_ns(d: &LogicalDim, c: u64, e: u64, r: u64) -> Result<u64> {
    let t = Tree::new(d.npus, true)?;
    let mut end = vec![0; d.npus as usize];
    Chunk { d, c, e, r }.run(&t, &vec![0; d.npus as usize], &mut end);
    Ok(end.into_iter().max().unwrap_or(0))
}

/// Time of `chunks` chunks of `c` bytes, `active` at a time per NPU, alternating trees
/// (module doc), ns.
pub fn total_ns(d: &LogicalDim, c: u64, chunks: u64, active: u64, e: u64, r: u64) -> Result<u64> {
    let p = d.npus as usize;
    let trees = [Tree::new(d.npus, true)?, Tree::new(d.npus, false)?];
    let ch = Chunk { d, c, e, r };
    let a = active.max(1) as usize;
    // Ends of the last `a` chunks per NPU, as a ring of `a` slots.
    let mut ends = vec![vec![0u64; p]; a];
    let mut end = vec![0; p];
    let mut last = 0;
    for k in 0..chunks as usize {
        let slot = k % a;
        ch.run(&trees[k % 2], &ends[slot], &mut end);
        last = last.max(end.iter().copied().max().unwrap_or(0));
        ends[slot].copy_from_slice(&end);
    }
    Ok(last)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trees_of_eight_as_astra_sim_numbers_them() {
        // RootMax: 7 → 3 → {1 → {0, 2}, 5 → {4, 6}}; RootMin: 0 → 4 → {2 → {1, 3}, 6 → {5, 7}}.
        let t = Tree::new(8, true).unwrap();
        assert_eq!(t.root, 7);
        assert_eq!(t.children[7], [Some(3), None]);
        assert_eq!(t.children[3], [Some(1), Some(5)]);
        assert_eq!(t.children[1], [Some(0), Some(2)]);
        assert_eq!(t.children[5], [Some(4), Some(6)]);
        assert_eq!(t.children[0], [None, None]);
        let t = Tree::new(8, false).unwrap();
        assert_eq!(t.root, 0);
        assert_eq!(t.children[0], [None, Some(4)]);
        assert_eq!(t.children[4], [Some(2), Some(6)]);
        assert_eq!(t.children[6], [Some(5), Some(7)]);
        assert!(Tree::new(6, true).is_err());
    }

    #[test]
    fn one_chunk_with_equal_hops_climbs_and_descends_three_levels() {
        // Switch of 8 (2 hops everywhere), 1 MB chunk: T = ⌊2·500 + 2^20/(100·2^30/1e9)⌋
        // = ⌊1000 + 9765.6⌋ = 10,765; E = 10; R = 3·⌊2^20/1600⌋ = 1,965. Leaves send at
        // E; three levels up (T + E + R each, the root's reduction included), three down
        // (T + E + R, the last E only): 6T + 7E + 5R.
        let d = LogicalDim {
            npus: 8,
            latency_ns: 500.0,
            beta: 100.0 * 1073741824.0 / 1e9,
            fixed_hops: 2,
            ..LogicalDim::default()
        };
        let want = 6 * 10_765 + 7 * 10 + 5 * 1_965;
        assert_eq!(chunk_ns(&d, 1 << 20, 10, 1_965).unwrap(), want);
        // Two chunks, one at a time: the second starts at each NPU when it ends the first.
        assert!(total_ns(&d, 1 << 20, 2, 1, 10, 1_965).unwrap() < 2 * want);
        assert_eq!(total_ns(&d, 1 << 20, 2, 2, 10, 1_965).unwrap(), want);
    }
}
