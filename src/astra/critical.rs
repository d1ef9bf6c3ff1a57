//! The critical path of a whole workload: the finish time of per-NPU DAGs when
//!
//! - a task starts once all its data and control dependencies have finished;
//! - each NPU runs one compute task at a time and one memory task at a time (ASTRA-sim's
//!   `HardwareResource`); among ready tasks waiting for a unit, the lowest Chakra node id
//!   goes first (ASTRA-sim issues its dependency-free nodes in id order);
//! - a collective synchronises its group: it is launched when its last member issues it
//!   (every member's k-th collective on a group is the same collective, as ASTRA-sim's
//!   per-group stream ids pair them);
//! - all collectives of an NPU share one queue (`Sys` queues, one per dimension; group
//!   collectives all use the first): it runs `active` chunks at a time, serving
//!   collectives in the order the NPU issued them, and a chunk holds its slot until every
//!   member has started it and it has run. A member's node finishes when its last chunk
//!   does. (ASTRA-sim orders waiting chunks by a per-collective priority, which for LIFO
//!   lets a newer collective overtake the remaining chunks of older ones,
//!   `Sys::insert_stream`; on the GPT-6.7B reference traces that reading gives
//!   +9.1 % / −19.6 % against ASTRA-sim's finish times and issue order gives +4.4 % /
//!   +11.8 %, so issue order is used; `serve_newest_first` switches.)
//! - a receive ends at max(its own ready time, matching send's start + message time).
//!
//! This is list scheduling of the DAG nodes (each node is handled once, O(N log N)), not a
//! packet-level simulation: every collective's duration comes from the closed forms.

use super::trace::{Kind, Workload};
use crate::error::{Error, Result};
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};

/// Per-NPU and overall results.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Estimate {
    /// Finish time of the slowest NPU, ns.
    pub finish_ns: u64,
    /// Finish time of each NPU, ns.
    pub npu_finish_ns: Vec<u64>,
    /// Compute time (sum of compute tasks) of each NPU, ns.
    pub npu_compute_ns: Vec<u64>,
    /// Time each NPU spends inside collectives (from its start to the collective's end), ns.
    pub npu_comm_ns: Vec<u64>,
    /// Tasks processed.
    pub tasks: usize,
}

const FINISH: u8 = 0;
const CHUNK: u8 = 1;
const READY: u8 = 2;
/// The event queue: (time, kind, npu, task) packed into one u128 so that ordering is a
/// single integer comparison (time, then kind, then npu, then task).
#[derive(Default)]
struct Events(BinaryHeap<Reverse<u128>>);

impl Events {
    fn push(&mut self, (t, ev, npu, task): (u64, u8, u32, u32)) {
        let key = ((t as u128) << 64)
            | ((ev as u128) << 62)
            | ((npu as u128 & 0x3fff_ffff) << 32)
            | task as u128;
        self.0.push(Reverse(key));
    }
    fn pop(&mut self) -> Option<(u64, u8, u32, u32)> {
        let Reverse(k) = self.0.pop()?;
        Some((
            (k >> 64) as u64,
            ((k >> 62) & 3) as u8,
            ((k >> 32) & 0x3fff_ffff) as u32,
            k as u32,
        ))
    }
}

#[derive(Default)]
struct Unit {
    busy: bool,
    waiting: BinaryHeap<Reverse<(u64, u32)>>,
}

/// One collective instance: the same collective on every member of its group.
struct Instance {
    coll: u32,
    issued: usize,
    last_issue: u64,
    /// Queue entries of the members that issued it so far (npu, task when it has no chunks).
    members: Vec<(u32, u32)>,
    /// Per chunk: members that started it and the latest start.
    starts: Vec<(usize, u64)>,
}

/// A collective in one member's queue.
struct Queued {
    npu: u32,
    task: u32,
    inst: u32,
    next: u64,
    left: u64,
    issued: u64,
}

struct Sched<'a> {
    w: &'a Workload,
    heap: Events,
    remaining: Vec<Vec<u32>>,
    units: Vec<[Unit; 3]>,
    group_of: Vec<u32>,
    seq: HashMap<(u32, u32), u32>,
    open: HashMap<(u32, u32), u32>,
    instances: Vec<Instance>,
    sent: HashMap<(u32, u32, u64), u64>,
    recv_wait: HashMap<(u32, u32, u64), (u32, u64)>,
    queued: Vec<Queued>,
    queue_of: Vec<Vec<u32>>,
    queue_running: Vec<u64>,
    lifo: bool,
    est: Estimate,
}

/// The critical path of `w`; `serve_newest_first` orders each NPU's collective queue
/// newest-issued first instead of in issue order.
pub fn critical_path(w: &Workload, serve_newest_first: bool) -> Result<Estimate> {
    let lifo = serve_newest_first;
    let n = w.npus.len();
    if n >= 1 << 30 {
        return Err(Error::Unsupported(format!(
            "{n} NPUs: at most 2^30 are supported"
        )));
    }
    let mut groups: HashMap<&str, u32> = HashMap::new();
    let group_of = w
        .collectives
        .iter()
        .map(|c| {
            let k = groups.len() as u32;
            *groups.entry(c.group.as_str()).or_insert(k)
        })
        .collect();
    let mut s = Sched {
        w,
        heap: Events::default(),
        remaining: w
            .npus
            .iter()
            .map(|p| p.tasks.iter().map(|t| t.deps).collect())
            .collect(),
        units: (0..n).map(|_| Default::default()).collect(),
        group_of,
        seq: HashMap::new(),
        open: HashMap::new(),
        instances: Vec::new(),
        sent: HashMap::new(),
        recv_wait: HashMap::new(),
        queued: Vec::new(),
        queue_of: vec![Vec::new(); n],
        queue_running: vec![0; n],
        lifo,
        est: Estimate {
            npu_finish_ns: vec![0; n],
            npu_compute_ns: vec![0; n],
            npu_comm_ns: vec![0; n],
            ..Default::default()
        },
    };
    for (r, p) in w.npus.iter().enumerate() {
        for (i, t) in p.tasks.iter().enumerate() {
            if t.deps == 0 {
                s.heap.push((0, READY, r as u32, i as u32));
            }
        }
    }
    while let Some((t, ev, npu, task)) = s.heap.pop() {
        match ev {
            READY => s.ready(npu, task, t)?,
            CHUNK => s.chunk_done(task, t)?,
            _ => s.finish(npu, task, t)?,
        }
    }
    let total: usize = w.npus.iter().map(|p| p.tasks.len()).sum();
    if s.est.tasks != total {
        return Err(s.stuck());
    }
    s.est.finish_ns = s.est.npu_finish_ns.iter().copied().max().unwrap_or(0);
    Ok(s.est)
}

fn unit_of(k: Kind) -> Option<usize> {
    match k {
        Kind::Comp => Some(0),
        Kind::Mem => Some(1),
        _ => None,
    }
}

impl Sched<'_> {
    fn ready(&mut self, npu: u32, task: u32, t: u64) -> Result<()> {
        let tk = self.w.npus[npu as usize].tasks[task as usize];
        match tk.kind {
            Kind::Nop => self.heap.push((t, FINISH, npu, task)),
            Kind::Send(dst, tag) => {
                self.heap.push((t + tk.ns, FINISH, npu, task));
                let key = (npu, dst, tag);
                match self.recv_wait.remove(&key) {
                    Some((rt, rready)) => {
                        let end = rready.max(t + tk.ns);
                        self.heap.push((end, FINISH, dst, rt));
                    }
                    None => {
                        self.sent.insert(key, t + tk.ns);
                    }
                }
            }
            Kind::Recv(src, tag) => match self.sent.remove(&(src, npu, tag)) {
                Some(arrival) => self.heap.push((arrival.max(t), FINISH, npu, task)),
                None => {
                    self.recv_wait.insert((src, npu, tag), (task, t));
                }
            },
            Kind::Coll(c) => self.issue(npu, task, c, t)?,
            k => {
                let u = unit_of(k).unwrap_or(0);
                let unit = &mut self.units[npu as usize][u];
                if unit.busy {
                    unit.waiting.push(Reverse((tk.id, task)));
                } else {
                    self.start(npu, task, t)?;
                }
            }
        }
        Ok(())
    }

    fn start(&mut self, npu: u32, task: u32, t: u64) -> Result<()> {
        let tk = self.w.npus[npu as usize].tasks[task as usize];
        let u = unit_of(tk.kind).unwrap_or(0);
        self.units[npu as usize][u].busy = true;
        if tk.kind == Kind::Comp {
            self.est.npu_compute_ns[npu as usize] += tk.ns;
        }
        self.heap.push((t + tk.ns, FINISH, npu, task));
        Ok(())
    }

    /// A member issues collective `c`: pair it with the other members' k-th collective
    /// on the same group; launch it into every member's queue once all have issued it.
    fn issue(&mut self, npu: u32, task: u32, c: u32, t: u64) -> Result<()> {
        let tk = self.w.npus[npu as usize].tasks[task as usize];
        let info = &self.w.collectives[c as usize];
        if !info.members.contains(&npu) {
            return Err(Error::input(
                format!("rank {npu} node {}", tk.id),
                format!(
                    "runs a collective on group '{}', which does not contain it",
                    info.group
                ),
            ));
        }
        let g = self.group_of[c as usize];
        let seq = self.seq.entry((npu, g)).or_insert(0);
        let key = (g, *seq);
        *seq += 1;
        let pieces = info.pieces as usize;
        let idx = *self.open.entry(key).or_insert_with(|| {
            self.instances.push(Instance {
                coll: c,
                issued: 0,
                last_issue: 0,
                members: Vec::new(),
                starts: vec![(0, 0); pieces],
            });
            self.instances.len() as u32 - 1
        });
        let inst = &mut self.instances[idx as usize];
        if inst.coll != c {
            let other = &self.w.collectives[inst.coll as usize];
            return Err(Error::input(
                format!("rank {npu} node {}", tk.id),
                format!(
                    "collective #{} on group '{}' is a {} of {} B here but a {} of {} B on another member",
                    key.1,
                    info.group,
                    info.op.name(),
                    info.size,
                    other.op.name(),
                    other.size
                ),
            ));
        }
        inst.issued += 1;
        inst.last_issue = inst.last_issue.max(t);
        let all = inst.issued == info.members.len();
        if all {
            self.open.remove(&key);
        }
        if pieces == 0 {
            inst.members.push((npu, task));
            if all {
                let end = inst.last_issue;
                for &(m, mt) in &inst.members {
                    self.heap.push((end, FINISH, m, mt));
                }
            }
            return Ok(());
        }
        let q = self.queued.len() as u32;
        inst.members.push((npu, q));
        self.queued.push(Queued {
            npu,
            task,
            inst: idx,
            next: 0,
            left: info.pieces,
            issued: t,
        });
        self.queue_of[npu as usize].push(q);
        self.run_queue(npu, t);
        Ok(())
    }

    /// Starts chunks on `npu`'s collective queue while it has room, highest priority
    /// first. A chunk holds its slot until every member has started it and it has run.
    fn run_queue(&mut self, npu: u32, t: u64) {
        let active = self.w.active.max(1) as u64;
        while self.queue_running[npu as usize] < active {
            // Entries are in issue order, so priorities are monotone along the list.
            let eligible = |q: &u32| {
                let e = &self.queued[*q as usize];
                e.next < self.w.collectives[self.instances[e.inst as usize].coll as usize].pieces
            };
            let list = &self.queue_of[npu as usize];
            let best = if self.lifo {
                list.iter().rev().copied().find(eligible)
            } else {
                list.iter().copied().find(eligible)
            };
            let Some(q) = best else { return };
            let e = &mut self.queued[q as usize];
            let k = e.next as usize;
            e.next += 1;
            self.queue_running[npu as usize] += 1;
            let inst = &mut self.instances[e.inst as usize];
            let info = &self.w.collectives[inst.coll as usize];
            inst.starts[k].0 += 1;
            inst.starts[k].1 = inst.starts[k].1.max(t);
            if inst.starts[k].0 == info.members.len() {
                let end = inst.starts[k].1 + info.piece_ns;
                for &(m, mq) in &inst.members {
                    self.heap.push((end, CHUNK, m, mq));
                }
            }
        }
    }

    fn chunk_done(&mut self, q: u32, t: u64) -> Result<()> {
        let e = &mut self.queued[q as usize];
        e.left -= 1;
        let npu = e.npu;
        self.queue_running[npu as usize] -= 1;
        if e.left == 0 {
            let (task, issued) = (e.task, e.issued);
            self.queue_of[npu as usize].retain(|&x| x != q);
            self.est.npu_comm_ns[npu as usize] += t - issued;
            self.heap.push((t, FINISH, npu, task));
        }
        self.run_queue(npu, t);
        Ok(())
    }

    fn finish(&mut self, npu: u32, task: u32, t: u64) -> Result<()> {
        let p = &self.w.npus[npu as usize];
        let tk = p.tasks[task as usize];
        self.est.tasks += 1;
        let f = &mut self.est.npu_finish_ns[npu as usize];
        *f = (*f).max(t);
        if let Some(u) = unit_of(tk.kind) {
            let unit = &mut self.units[npu as usize][u];
            unit.busy = false;
            if let Some(Reverse((_, next))) = unit.waiting.pop() {
                self.start(npu, next, t)?;
            }
        }
        let (a, b) = (p.succ_start[task as usize], p.succ_start[task as usize + 1]);
        for &s in &p.succ[a as usize..b as usize] {
            let r = &mut self.remaining[npu as usize][s as usize];
            *r -= 1;
            if *r == 0 {
                self.heap.push((t, READY, npu, s));
            }
        }
        Ok(())
    }

    fn stuck(&self) -> Error {
        if let Some((&(g, seq), &i)) = self.open.iter().next() {
            let inst = &self.instances[i as usize];
            let info = &self.w.collectives[inst.coll as usize];
            return Error::input(
                "workload",
                format!(
                    "deadlock: collective #{seq} on group '{}' (group {g}) was issued by {} of its {} members",
                    info.group,
                    inst.issued,
                    info.members.len()
                ),
            );
        }
        if let Some(((src, dst, tag), _)) = self.recv_wait.iter().next() {
            return Error::input(
                "workload",
                format!(
                    "deadlock: rank {dst} waits for a message from rank {src} with tag {tag} that is never sent"
                ),
            );
        }
        Error::input(
            "workload",
            "deadlock: some tasks never become ready (a dependency cycle)",
        )
    }
}
