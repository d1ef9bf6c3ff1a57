//! The critical path of a whole workload: the finish time of per-NPU DAGs when
//!
//! - a task starts once all its data and control dependencies have finished;
//! - each NPU runs one compute task, one host-CPU task and **one communication task
//!   (collective, send or memory access) at a time**, as ASTRA-sim's `HardwareResource`
//!   allows (`is_available`/`occupy`, astra-sim 518bd513: a node that is neither a
//!   COMP_NODE nor a receive, MEM_LOAD/STORE_NODEs included, takes the one in-flight GPU
//!   comm op; a node with `is_cpu_op` the one CPU op; a receive never occupies it). Among
//!   ready tasks waiting for a unit, the lowest Chakra node id goes first (ASTRA-sim's
//!   feeder hands out dependency-free nodes in id order and pushes back those whose
//!   resource is busy);
//! - a collective synchronises its group: it starts when its last member issues it
//!   (every member's k-th collective on a group is the same collective, as ASTRA-sim's
//!   per-group stream ids pair them) and then runs its chunks `active` at a time:
//!   duration ⌈pieces / active⌉ · piece time (`Sys::generate_collective`, the scheduler
//!   unit's `queue_threshold`). Because an NPU has one collective in flight, its chunks
//!   never interleave with another collective's;
//! - a send holds the NPU's communication slot for its message time; a receive ends at
//!   max(its own ready time, matching send's start + message time);
//! - a memory access holds the slot for its access time, after waiting for the accesses
//!   ahead of it in its remote-memory queue when it has one ([`Workload::mem_queue`]):
//!   end = max(start, queue free) + access time, FIFO in start order
//!   (`AnalyticalRemoteMemory::issue` and `call` keep one access in flight per queue).
//!
//! Serialising sends and collectives through one slot, and choosing the next one by node
//! id among everything ready at that instant, is what ASTRA-sim does (`Workload::
//! issue_dep_free_nodes`, `HardwareResource::is_available`); with it the GPT-6.7B
//! reference traces reproduce ASTRA-sim's finish times to the nanosecond on both
//! reference networks, where a per-NPU chunk queue in issue order gave +11.8 % (Switch 16)
//! and +4.4 % (Switch 8 × 2).
//!
//! This is list scheduling of the DAG nodes: one heap event per task with a duration
//! (its finish), ready tasks handled at once in a work list, flat per-task arrays and no
//! hashing except for point-to-point messages. O(N log E) for N tasks and E events in
//! flight; every collective's duration comes from the closed forms.

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
    /// Time each NPU spends inside collectives (from its issue to the collective's end), ns.
    pub npu_comm_ns: Vec<u64>,
    /// Tasks processed.
    pub tasks: usize,
}

/// Finish events: (time, npu, task) packed into one u128, so ordering is one integer
/// comparison.
#[derive(Default)]
struct Events(BinaryHeap<Reverse<u128>>);

impl Events {
    fn push(&mut self, t: u64, npu: u32, task: u32) {
        self.0.push(Reverse(
            ((t as u128) << 64) | ((npu as u128) << 32) | task as u128,
        ));
    }
    fn pop(&mut self) -> Option<(u64, u32, u32)> {
        let Reverse(k) = self.0.pop()?;
        Some(((k >> 64) as u64, (k >> 32) as u32, k as u32))
    }
}

/// One resource of one NPU: busy or not, and the ready tasks waiting for it by node id.
#[derive(Default)]
struct Unit {
    busy: bool,
    waiting: BinaryHeap<Reverse<(u64, u32)>>,
}

const COMP: usize = 0;
const CPU: usize = 1;
const COMM: usize = 2;

fn unit_of(k: Kind) -> Option<usize> {
    match k {
        Kind::Comp => Some(COMP),
        Kind::Cpu => Some(CPU),
        Kind::Coll(_) | Kind::Send(..) | Kind::Mem => Some(COMM),
        _ => None,
    }
}

/// One collective instance: the same collective on every member of its group.
struct Instance {
    coll: u32,
    issued: u32,
    last_issue: u64,
    /// Start of its members' (npu, task, issue time) in `Sched::members`.
    first: u32,
}

struct Sched<'a> {
    w: &'a Workload,
    heap: Events,
    /// Flat index of each NPU's first task.
    base: Vec<usize>,
    /// Per task (flat): [first successor in its NPU's `succ`, dependencies left]; the
    /// two live in one array so that finishing a task touches one cache line.
    meta: Vec<[u32; 2]>,
    units: Vec<[Unit; 3]>,
    group_of: Vec<u32>,
    /// Per NPU: (group, collectives issued on it so far).
    seq: Vec<Vec<(u32, u32)>>,
    /// Per group: instance of its k-th collective.
    by_seq: Vec<Vec<u32>>,
    instances: Vec<Instance>,
    members: Vec<(u32, u32, u64)>,
    sent: HashMap<(u32, u32, u64), u64>,
    recv_wait: HashMap<(u32, u32, u64), (u32, u64)>,
    /// Tasks that became ready at the current time.
    ready: Vec<(u32, u32)>,
    /// NPUs whose units may have a task to start once the current time's ready tasks
    /// are queued (so that the lowest id among all of them goes first).
    touched: Vec<u32>,
    is_touched: Vec<bool>,
    /// When each remote-memory queue is free again.
    queue_free: Vec<u64>,
    est: Estimate,
}

/// The critical path of `w` (module doc).
pub fn critical_path(w: &Workload) -> Result<Estimate> {
    let n = w.npus.len();
    let mut groups: HashMap<&str, u32> = HashMap::new();
    let group_of: Vec<u32> = w
        .collectives
        .iter()
        .map(|c| {
            let k = groups.len() as u32;
            *groups.entry(c.group.as_str()).or_insert(k)
        })
        .collect();
    let mut base = Vec::with_capacity(n + 1);
    let total: usize = w.npus.iter().map(|p| p.tasks.len() + 1).sum();
    let mut meta = Vec::with_capacity(total);
    for p in &w.npus {
        base.push(meta.len());
        meta.extend(p.tasks.iter().zip(&p.succ_start).map(|(t, &s)| [s, t.deps]));
        meta.push([p.succ_start.last().copied().unwrap_or(0), 0]);
    }
    base.push(meta.len());
    let mut s = Sched {
        w,
        heap: Events::default(),
        base,
        meta,
        units: (0..n).map(|_| Default::default()).collect(),
        group_of,
        seq: vec![Vec::new(); n],
        by_seq: vec![Vec::new(); groups.len()],
        instances: Vec::new(),
        members: Vec::new(),
        sent: HashMap::new(),
        recv_wait: HashMap::new(),
        ready: Vec::new(),
        touched: Vec::new(),
        is_touched: vec![false; n],
        queue_free: {
            let queues = w
                .mem_queue
                .iter()
                .flatten()
                .max()
                .map_or(0, |&q| q as usize + 1);
            vec![0; queues]
        },
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
                s.ready.push((r as u32, i as u32));
            }
        }
    }
    s.ready.reverse();
    s.drain(0)?;
    while let Some((t, npu, task)) = s.heap.pop() {
        s.finish(npu, task, t)?;
        s.drain(t)?;
    }
    if s.est.tasks != total - n {
        return Err(s.stuck());
    }
    s.est.finish_ns = s.est.npu_finish_ns.iter().copied().max().unwrap_or(0);
    Ok(s.est)
}

impl Sched<'_> {
    /// Handles every task that became ready at `t`.
    fn drain(&mut self, t: u64) -> Result<()> {
        while let Some((npu, task)) = self.ready.pop() {
            self.on_ready(npu, task, t)?;
        }
        while let Some(npu) = self.touched.pop() {
            self.is_touched[npu as usize] = false;
            for u in [COMP, CPU, COMM] {
                let unit = &mut self.units[npu as usize][u];
                if !unit.busy
                    && let Some(Reverse((_, task))) = unit.waiting.pop()
                {
                    unit.busy = true;
                    self.start(npu, task, t)?;
                }
            }
        }
        Ok(())
    }

    fn touch(&mut self, npu: u32) {
        if !self.is_touched[npu as usize] {
            self.is_touched[npu as usize] = true;
            self.touched.push(npu);
        }
    }

    fn on_ready(&mut self, npu: u32, task: u32, t: u64) -> Result<()> {
        let tk = self.w.npus[npu as usize].tasks[task as usize];
        match unit_of(tk.kind) {
            Some(u) => {
                self.units[npu as usize][u]
                    .waiting
                    .push(Reverse((tk.id, task)));
                self.touch(npu);
                Ok(())
            }
            None => match tk.kind {
                Kind::Recv(src, tag) => {
                    match self.sent.remove(&(src, npu, tag)) {
                        Some(arrival) => self.heap.push(arrival.max(t), npu, task),
                        None => {
                            self.recv_wait.insert((src, npu, tag), (task, t));
                        }
                    }
                    Ok(())
                }
                _ => self.finish(npu, task, t),
            },
        }
    }

    /// Starts a task that holds its unit.
    fn start(&mut self, npu: u32, task: u32, t: u64) -> Result<()> {
        let tk = self.w.npus[npu as usize].tasks[task as usize];
        match tk.kind {
            Kind::Coll(c) => self.issue(npu, task, c, t),
            Kind::Send(dst, tag) => {
                let end = t + tk.ns;
                self.heap.push(end, npu, task);
                match self.recv_wait.remove(&(npu, dst, tag)) {
                    Some((rt, rready)) => self.heap.push(rready.max(end), dst, rt),
                    None => {
                        self.sent.insert((npu, dst, tag), end);
                    }
                }
                Ok(())
            }
            Kind::Mem => {
                let begin = match self.w.mem_queue.get(npu as usize).copied().flatten() {
                    Some(q) => {
                        let free = &mut self.queue_free[q as usize];
                        let begin = t.max(*free);
                        *free = begin + tk.ns;
                        begin
                    }
                    None => t,
                };
                self.heap.push(begin + tk.ns, npu, task);
                Ok(())
            }
            k => {
                if k == Kind::Comp {
                    self.est.npu_compute_ns[npu as usize] += tk.ns;
                }
                self.heap.push(t + tk.ns, npu, task);
                Ok(())
            }
        }
    }

    /// A member issues collective `c`: pair it with the other members' k-th collective
    /// on the same group; once all have issued it, it ends ⌈pieces/active⌉ piece times
    /// after the last issue on every member.
    fn issue(&mut self, npu: u32, task: u32, c: u32, t: u64) -> Result<()> {
        let info = &self.w.collectives[c as usize];
        if !info.members.contains(&npu) {
            let id = self.w.npus[npu as usize].tasks[task as usize].id;
            return Err(Error::input(
                format!("rank {npu} node {id}"),
                format!(
                    "runs a collective on group '{}', which does not contain it",
                    info.group
                ),
            ));
        }
        let g = self.group_of[c as usize];
        let seqs = &mut self.seq[npu as usize];
        let k = match seqs.iter_mut().find(|x| x.0 == g) {
            Some(x) => {
                x.1 += 1;
                x.1 - 1
            }
            None => {
                seqs.push((g, 1));
                0
            }
        };
        let list = &mut self.by_seq[g as usize];
        if list.len() as u32 == k {
            list.push(self.instances.len() as u32);
            self.instances.push(Instance {
                coll: c,
                issued: 0,
                last_issue: 0,
                first: self.members.len() as u32,
            });
            let len = self.members.len() + info.members.len();
            self.members.resize(len, (0, 0, 0));
        }
        let idx = list[k as usize] as usize;
        let inst = &mut self.instances[idx];
        if inst.coll != c {
            return Err(self.mismatch(npu, task, c, idx, k));
        }
        self.members[(inst.first + inst.issued) as usize] = (npu, task, t);
        inst.issued += 1;
        inst.last_issue = inst.last_issue.max(t);
        if inst.issued as usize == info.members.len() {
            let active = self.w.active.max(1) as u64;
            let end = inst.last_issue + info.pieces.div_ceil(active) * info.piece_ns;
            let first = inst.first as usize;
            for i in first..first + info.members.len() {
                let (m, mt, issued) = self.members[i];
                self.est.npu_comm_ns[m as usize] += end - issued;
                self.heap.push(end, m, mt);
            }
        }
        Ok(())
    }

    fn mismatch(&self, npu: u32, task: u32, c: u32, idx: usize, k: u32) -> Error {
        let info = &self.w.collectives[c as usize];
        let other = &self.w.collectives[self.instances[idx].coll as usize];
        let id = self.w.npus[npu as usize].tasks[task as usize].id;
        Error::input(
            format!("rank {npu} node {id}"),
            format!(
                "collective #{k} on group '{}' is a {} of {} B here but a {} of {} B on another member",
                info.group,
                info.op.name(),
                info.size,
                other.op.name(),
                other.size
            ),
        )
    }

    fn finish(&mut self, npu: u32, task: u32, t: u64) -> Result<()> {
        let p = &self.w.npus[npu as usize];
        let tk = p.tasks[task as usize];
        self.est.tasks += 1;
        let f = &mut self.est.npu_finish_ns[npu as usize];
        *f = (*f).max(t);
        if let Some(u) = unit_of(tk.kind) {
            self.units[npu as usize][u].busy = false;
            self.touch(npu);
        }
        let base = self.base[npu as usize];
        let at = base + task as usize;
        let (a, b) = (self.meta[at][0], self.meta[at + 1][0]);
        for &s in &p.succ[a as usize..b as usize] {
            let r = &mut self.meta[base + s as usize][1];
            *r -= 1;
            if *r == 0 {
                self.ready.push((npu, s));
            }
        }
        Ok(())
    }

    fn stuck(&self) -> Error {
        for inst in &self.instances {
            let info = &self.w.collectives[inst.coll as usize];
            if (inst.issued as usize) < info.members.len() {
                return Error::input(
                    "workload",
                    format!(
                        "deadlock: a collective on group '{}' was issued by {} of its {} members",
                        info.group,
                        inst.issued,
                        info.members.len()
                    ),
                );
            }
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
