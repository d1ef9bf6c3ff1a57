//! Per-NPU building blocks of the conversion: interning each NPU's distinct collectives
//! and the successor lists (CSR) of its DAG.

use super::{CollKey, Npu, Task};
use crate::astra::chakra::comm_type;
use crate::astra::lean;
use crate::astra::model::Op;
use crate::error::{Error, Result};
use std::collections::HashMap;

/// This NPU's distinct collectives.
#[derive(Default)]
pub(super) struct Interner {
    pub(super) keys: Vec<CollKey>,
    /// (op, size, packed group name) of each key, compared as integers first.
    fast: Vec<(Op, u64, u128)>,
    /// Built once there are many distinct keys.
    map: HashMap<CollKey, u32>,
}

/// Index of `r`'s collective among this NPU's distinct ones. A trace usually has a
/// handful, so a linear search that compares before allocating beats hashing every node;
/// past 64 distinct keys a hash map takes over.
pub(super) fn intern(keys: &mut Interner, r: &lean::Rec) -> Result<u32> {
    let op = coll_op(r)?;
    let size = r.uint(lean::COMM_SIZE)?.unwrap_or(0);
    if size == 0 {
        return Err(Error::input(
            "comm_size",
            "is missing or 0 bytes; ASTRA-sim cannot complete a zero-byte collective",
        ));
    }
    let group = r.pg_name.as_deref().unwrap_or("");
    let inv = r.involved_dim.as_deref().unwrap_or(&[]);
    if keys.keys.len() < 64 {
        let packed = lean::pack(group.as_bytes());
        let found = keys.fast.iter().zip(&keys.keys).position(|(f, k)| {
            *f == (op, size, packed) && (packed != 0 || &*k.2 == group) && k.3 == inv
        });
        if let Some(i) = found {
            return Ok(i as u32);
        }
        keys.keys.push((op, size, group.into(), inv.to_vec()));
        keys.fast.push((op, size, packed));
        if keys.keys.len() == 64 {
            keys.map = keys.keys.iter().cloned().zip(0..).collect();
        }
        return Ok(keys.keys.len() as u32 - 1);
    }
    let key: CollKey = (op, size, group.into(), inv.to_vec());
    let next = keys.keys.len() as u32;
    let i = *keys.map.entry(key.clone()).or_insert(next);
    if i == next {
        keys.keys.push(key);
    }
    Ok(i)
}

fn coll_op(r: &lean::Rec) -> Result<Op> {
    let ct = r.ints[lean::COMM_TYPE].ok_or_else(|| Error::input("comm_type", "missing"))?;
    let op = match ct as i64 {
        comm_type::ALL_REDUCE => Op::AllReduce,
        comm_type::ALL_GATHER => Op::AllGather,
        comm_type::REDUCE_SCATTER => Op::ReduceScatter,
        comm_type::ALL_TO_ALL => Op::AllToAll,
        other => {
            return Err(Error::Unsupported(format!(
                "collective comm_type {other} has no native ASTRA-sim implementation"
            )));
        }
    };
    Ok(op)
}

/// Node id → position: a dense table when ids are small (generators number nodes
/// 0..k), a hash map otherwise.
enum Positions {
    Dense(Vec<u32>),
    Sparse(HashMap<u64, u32>),
}

impl Positions {
    /// The table, or an error when two nodes share an id (a file concatenated with
    /// itself, a broken generator): dependencies on that id would be ambiguous.
    fn new(f: &lean::Recs, rank: usize) -> Result<Positions> {
        let dup = |id: u64| {
            Error::input(
                format!("rank {rank} node {id}"),
                "the node id appears twice in the trace; Chakra node ids are unique per file",
            )
        };
        let max = f.recs.iter().map(|r| r.id).max().unwrap_or(0);
        if max < 4 * f.recs.len() as u64 + 1024 {
            let mut v = vec![u32::MAX; max as usize + 1];
            for (i, r) in f.recs.iter().enumerate() {
                if v[r.id as usize] != u32::MAX {
                    return Err(dup(r.id));
                }
                v[r.id as usize] = i as u32;
            }
            Ok(Positions::Dense(v))
        } else {
            let mut m = HashMap::with_capacity(f.recs.len());
            for (i, r) in f.recs.iter().enumerate() {
                if m.insert(r.id, i as u32).is_some() {
                    return Err(dup(r.id));
                }
            }
            Ok(Positions::Sparse(m))
        }
    }
    fn get(&self, id: u64) -> Option<u32> {
        match self {
            Positions::Dense(v) => v.get(id as usize).copied().filter(|&p| p != u32::MAX),
            Positions::Sparse(m) => m.get(&id).copied(),
        }
    }
}

/// Successor lists (CSR) built by counting: out-degrees, prefix sums, then a fill pass.
pub(super) fn link(f: &lean::Recs, mut tasks: Vec<Task>, rank: usize) -> Result<Npu> {
    let pos = Positions::new(f, rank)?;
    let mut succ_start = vec![0u32; tasks.len() + 1];
    let mut parents = Vec::with_capacity(f.deps.len());
    for (i, r) in f.recs.iter().enumerate() {
        for dep in &f.deps[r.deps.0 as usize..r.deps.1 as usize] {
            let p = pos.get(*dep).ok_or_else(|| {
                Error::input(
                    format!("rank {rank} node {}", r.id),
                    format!("depends on node {dep}, which is not in the trace"),
                )
            })?;
            parents.push(p);
            succ_start[p as usize + 1] += 1;
            tasks[i].deps += 1;
        }
    }
    for i in 0..tasks.len() {
        succ_start[i + 1] += succ_start[i];
    }
    let mut fill = succ_start.clone();
    let mut succ = vec![0u32; parents.len()];
    let mut k = 0;
    for (i, r) in f.recs.iter().enumerate() {
        for _ in r.deps.0..r.deps.1 {
            let p = parents[k] as usize;
            k += 1;
            succ[fill[p] as usize] = i as u32;
            fill[p] += 1;
        }
    }
    Ok(Npu {
        tasks,
        succ_start,
        succ,
    })
}
