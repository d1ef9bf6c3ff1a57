//! Reading nccl-tests output (`all_reduce_perf`, `all_gather_perf`, `reduce_scatter_perf`,
//! `alltoall_perf`, `sendrecv_perf`; NVIDIA/nccl-tests `src/common.cu` prints it).
//!
//! What is taken from a log:
//! - the collective: from `# Collective test starting: NAME` (nccl-tests ≥ 2.14), else from
//!   the file name (`all_reduce_perf.log`), else from `--op`;
//! - ranks and nodes: from the `#  Rank  r Group g Pid p on HOST device …` lines (ranks =
//!   their count, nodes = distinct hosts), else from `--ranks` / `--nodes`;
//! - one measurement per data row: the size in bytes (first column) and the out-of-place
//!   time in µs. The out-of-place group is the 8th-from-last column: every nccl-tests
//!   version ends a row with out-of-place `time algbw busbw #wrong` then in-place `time
//!   algbw busbw #wrong` (older versions print `error` instead of `#wrong`).
//!
//! MPI prefixes such as `[1,0]<stdout>:` are stripped. Rows of size 0 are skipped (they
//! carry no bandwidth information and nothing to fit a latency per byte against).

use crate::collective::Collective;
use crate::error::{Error, Result};
use std::collections::BTreeSet;
use std::path::Path;

/// One parsed nccl-tests log.
#[derive(Clone, Debug, PartialEq)]
pub struct NcclLog {
    /// Where it came from (for messages).
    pub source: String,
    /// The collective measured.
    pub op: Collective,
    /// Number of ranks (GPUs).
    pub ranks: u32,
    /// Number of nodes (distinct hosts).
    pub nodes: u32,
    /// (size in bytes, out-of-place time in seconds), in file order.
    pub rows: Vec<(f64, f64)>,
}

/// Overrides for what a log's header does not say.
#[derive(Clone, Copy, Debug, Default)]
pub struct Hints {
    /// The collective, when neither the log nor its file name names it.
    pub op: Option<Collective>,
    /// Ranks, when the log has no `# Rank` lines (also overrides them).
    pub ranks: Option<u32>,
    /// Nodes, when the log has no `# Rank` lines (also overrides them).
    pub nodes: Option<u32>,
}

/// The collective an nccl-tests binary name measures (`all_reduce_perf` → all-reduce).
pub fn op_of_binary(name: &str) -> Option<Collective> {
    let n = name.to_ascii_lowercase();
    [
        ("all_reduce", Collective::AllReduce),
        ("all_gather", Collective::AllGather),
        ("reduce_scatter", Collective::ReduceScatter),
        ("alltoall", Collective::AllToAll),
        ("sendrecv", Collective::SendRecv),
        ("broadcast", Collective::Broadcast),
    ]
    .into_iter()
    .find(|(k, _)| n.contains(k))
    .map(|(_, c)| c)
}

/// Reads and parses the log at `path`.
pub fn read(path: &Path, hints: Hints) -> Result<NcclLog> {
    let text = std::fs::read_to_string(path).map_err(|source| Error::Io {
        path: path.to_path_buf(),
        source,
    })?;
    let file_op = path
        .file_name()
        .and_then(|f| op_of_binary(&f.to_string_lossy()));
    parse(&text, &path.display().to_string(), file_op, hints)
}

fn strip_mpi_prefix(line: &str) -> &str {
    if line.starts_with('[')
        && let Some(i) = line.find(">:")
    {
        return &line[i + 2..];
    }
    line
}

/// Parses log text; `source` names it in errors, `file_op` is what its file name says.
pub fn parse(
    text: &str,
    source: &str,
    file_op: Option<Collective>,
    hints: Hints,
) -> Result<NcclLog> {
    let err = |line: usize, msg: String| Error::File {
        path: source.into(),
        message: format!("line {line}: {msg}"),
    };
    let mut op = None;
    let mut hosts = BTreeSet::new();
    let mut ranks = 0u32;
    let mut rows = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let line = strip_mpi_prefix(raw).trim();
        if let Some(rest) = line.strip_prefix('#') {
            let rest = rest.trim();
            if let Some(name) = rest.strip_prefix("Collective test starting:") {
                op = op_of_binary(name.trim());
            }
            let t: Vec<&str> = rest.split_whitespace().collect();
            if t.first() == Some(&"Rank")
                && let Some(p) = t.iter().position(|&w| w == "on")
                && let Some(h) = t.get(p + 1)
            {
                ranks += 1;
                hosts.insert(h.to_string());
            }
            continue;
        }
        let t: Vec<&str> = line.split_whitespace().collect();
        let Some(size) = t.first().and_then(|s| s.parse::<u64>().ok()) else {
            continue;
        };
        if t.len() < 10 {
            return Err(err(
                i + 1,
                format!(
                    "data row has {} columns; expected size, count, type, …, then out-of-place and in-place 'time algbw busbw #wrong'",
                    t.len()
                ),
            ));
        }
        let us: f64 = t[t.len() - 8].parse().map_err(|_| {
            err(
                i + 1,
                format!("time '{}' is not a number (µs)", t[t.len() - 8]),
            )
        })?;
        if !(us > 0.0 && us.is_finite()) {
            return Err(err(i + 1, format!("time {us} µs must be > 0")));
        }
        if size > 0 {
            rows.push((size as f64, us * 1e-6));
        }
    }
    let op = hints.op.or(op).or(file_op).ok_or_else(|| Error::File {
        path: source.into(),
        message: "which collective? the log has no '# Collective test starting' line and its file name names none; pass --op".into(),
    })?;
    let ranks = hints
        .ranks
        .or((ranks > 0).then_some(ranks))
        .ok_or_else(|| Error::File {
            path: source.into(),
            message: "how many ranks? the log has no '#  Rank … on HOST' lines; pass --ranks"
                .into(),
        })?;
    let nodes = hints.nodes.unwrap_or_else(|| (hosts.len() as u32).max(1));
    if ranks < 2 || nodes == 0 || ranks % nodes != 0 {
        return Err(Error::File {
            path: source.into(),
            message: format!(
                "{ranks} ranks on {nodes} nodes: need ≥ 2 ranks, the same number per node"
            ),
        });
    }
    if rows.len() < 2 {
        return Err(Error::File {
            path: source.into(),
            message: format!(
                "{} data rows with size > 0; a fit needs at least 2",
                rows.len()
            ),
        });
    }
    Ok(NcclLog {
        source: source.into(),
        op,
        ranks,
        nodes,
        rows,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const LOG: &str = "\
# Collective test starting: all_gather_perf
#  Rank  0 Group  0 Pid   1 on nodeA device  0 [0x0f] NVIDIA A100-SXM4-80GB
#  Rank  1 Group  0 Pid   2 on nodeA device  1 [0x10] NVIDIA A100-SXM4-80GB
#  Rank  2 Group  0 Pid   3 on nodeB device  0 [0x0f] NVIDIA A100-SXM4-80GB
#  Rank  3 Group  0 Pid   4 on nodeB device  1 [0x10] NVIDIA A100-SXM4-80GB
           0             0     float    none      -1     5.70    0.00    0.00      0     5.54    0.00    0.00      0
        1024            64     float    none      -1    20.50    0.05    0.04      0    20.10    0.05    0.04      0
[1,0]<stdout>:     1048576   65536  float  none  -1  100.0  10.49  7.86  0  99.0  10.59  7.94  N/A
";

    #[test]
    fn reads_op_ranks_nodes_and_out_of_place_times() {
        let l = parse(LOG, "x", None, Hints::default()).unwrap();
        assert_eq!(l.op, Collective::AllGather);
        assert_eq!((l.ranks, l.nodes), (4, 2));
        let want = [(1024.0, 20.5e-6), (1048576.0, 100e-6)];
        assert_eq!(l.rows.len(), 2);
        for (got, want) in l.rows.iter().zip(want) {
            assert_eq!(got.0, want.0);
            assert!((got.1 / want.1 - 1.0).abs() < 1e-12, "{got:?}");
        }
    }

    #[test]
    fn says_what_is_missing() {
        let body: String = LOG
            .lines()
            .filter(|l| !l.contains('#'))
            .collect::<Vec<_>>()
            .join("\n");
        let e = parse(&body, "x", None, Hints::default())
            .unwrap_err()
            .to_string();
        assert!(e.contains("--op"), "{e}");
        let e = parse(&body, "x", Some(Collective::AllReduce), Hints::default())
            .unwrap_err()
            .to_string();
        assert!(e.contains("--ranks"), "{e}");
        let bad = LOG.replace("100.0", "fast");
        let e = parse(&bad, "x", None, Hints::default())
            .unwrap_err()
            .to_string();
        assert!(e.contains("line 8") && e.contains("fast"), "{e}");
    }
}
