//! The stated maxima of every count Astrolabe works on (NPUs in a network, configurations
//! in a sweep grid, files written by an export, bytes read from one input file, nodes in a
//! Chakra workload), and the capped file readers. Each limit is checked before the work
//! starts, and its error names the limit and how to raise it: an environment variable
//! (`ASTROLABE_MAX_NPUS=…`), or for the sweep grid the `--max-configs` flag. The ranges of
//! physical quantities live beside their parsers in [`crate::units`].

use crate::error::{Error, Result};
use std::io::Read;
use std::path::Path;

/// A count with a stated maximum that an environment variable can raise.
#[derive(Clone, Copy, Debug)]
pub struct Limit {
    /// What is counted, plural ("NPUs in a network").
    pub what: &'static str,
    /// The environment variable that overrides the default.
    pub env: &'static str,
    /// The default maximum.
    pub default: u64,
}

/// NPUs in one network (topology string, TOML, ASTRA-sim YAML): 2^20 = 1,048,576.
pub const NPUS: Limit = Limit {
    what: "NPUs in a network",
    env: "ASTROLABE_MAX_NPUS",
    default: 1 << 20,
};

/// Files one `export` may write (one Chakra trace per NPU, plus the configs): 65,536.
pub const FILES_WRITTEN: Limit = Limit {
    what: "files written by one export",
    env: "ASTROLABE_MAX_FILES",
    default: 1 << 16,
};

/// Bytes one `export` may write (traces and configs together): 4 GiB. Checked before
/// anything is written against a lower bound of the export's size, then file by file as
/// the traces are encoded (a refused export leaves no file behind).
pub const BYTES_WRITTEN: Limit = Limit {
    what: "bytes written by one export",
    env: "ASTROLABE_MAX_WRITE_BYTES",
    default: 4 << 30,
};

/// Rows a terminal or Markdown table prints; longer tables print their first rows and a
/// note pointing to `--format csv` or `json`, which write every row: 1,000.
pub const TABLE_ROWS: Limit = Limit {
    what: "rows in a printed table",
    env: "ASTROLABE_MAX_TABLE_ROWS",
    default: 1000,
};

/// Plans one sweep may rank (`--top`): each is kept in memory with its whole estimate
/// until the end: 100,000.
pub const TOP_PLANS: Limit = Limit {
    what: "ranked plans in one sweep (--top)",
    env: "ASTROLABE_MAX_TOP",
    default: 100_000,
};

/// Rows one `sweep --all FILE` may write (one per evaluated configuration, counted before
/// the file is created): 10,000,000 (a few GB of CSV).
pub const ALL_ROWS: Limit = Limit {
    what: "rows written by sweep --all",
    env: "ASTROLABE_MAX_ALL_ROWS",
    default: 10_000_000,
};

/// Bytes read from one input file (TOML, YAML, JSON, Chakra trace): 256 MiB.
pub const INPUT_BYTES: Limit = Limit {
    what: "bytes in one input file",
    env: "ASTROLABE_MAX_INPUT_BYTES",
    default: 256 << 20,
};

/// Nodes in one Chakra workload, summed over its files: 2^26 = 67,108,864.
pub const TRACE_NODES: Limit = Limit {
    what: "nodes in a Chakra workload",
    env: "ASTROLABE_MAX_TRACE_NODES",
    default: 1 << 26,
};

/// Chunks one ASTRA-sim collective is split into (≈ preferred-dataset-splits); the chunk
/// schedule is simulated chunk by chunk: 4096.
pub const CHUNKS: Limit = Limit {
    what: "chunks in one collective",
    env: "ASTROLABE_MAX_CHUNKS",
    default: 1 << 12,
};

impl Limit {
    /// The maximum in force: the environment variable when set, else the default.
    pub fn max(&self) -> Result<u64> {
        match std::env::var(self.env) {
            Err(_) => Ok(self.default),
            Ok(v) => v
                .trim()
                .parse::<u64>()
                .ok()
                .filter(|&n| n >= 1)
                .ok_or_else(|| {
                    Error::input(
                        self.env,
                        format!(
                            "'{v}' is not a whole number ≥ 1 (the maximum of {})",
                            self.what
                        ),
                    )
                }),
        }
    }

    /// Errors when `n` exceeds the maximum; `subject` names what has `n` of them.
    pub fn check(&self, n: impl Into<u128>, subject: impl std::fmt::Display) -> Result<()> {
        let (n, max) = (n.into(), self.max()?);
        if n > u128::from(max) {
            return Err(Error::input(
                subject.to_string(),
                format!(
                    "{n} is more than the limit of {max} {}; raise it with {}={n} if you mean it",
                    self.what, self.env
                ),
            ));
        }
        Ok(())
    }
}

/// Reads a whole file as bytes, refusing files larger than [`INPUT_BYTES`] before reading
/// them (and stopping at the limit for devices and pipes, which report no size).
pub fn read_bytes(path: &Path) -> Result<Vec<u8>> {
    let io = |source| Error::Io {
        path: path.to_path_buf(),
        source,
    };
    let max = INPUT_BYTES.max()?;
    let file = std::fs::File::open(path).map_err(io)?;
    let len = file.metadata().map_err(io)?.len();
    INPUT_BYTES.check(len, path.display())?;
    let mut buf = Vec::with_capacity(len as usize);
    file.take(max + 1).read_to_end(&mut buf).map_err(io)?;
    INPUT_BYTES.check(buf.len() as u64, path.display())?;
    Ok(buf)
}

/// Reads a whole UTF-8 text file under the [`INPUT_BYTES`] cap.
pub fn read_text(path: &Path) -> Result<String> {
    String::from_utf8(read_bytes(path)?).map_err(|e| Error::File {
        path: path.to_path_buf(),
        message: format!(
            "not UTF-8 text (invalid byte at offset {})",
            e.utf8_error().valid_up_to()
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn check_names_the_limit_and_the_variable() {
        let e = NPUS.check(NPUS.default + 1, "topology").unwrap_err();
        let m = e.to_string();
        assert!(
            m.contains("1048577 is more than the limit of 1048576 NPUs"),
            "{m}"
        );
        assert!(m.contains("ASTROLABE_MAX_NPUS=1048577"), "{m}");
        assert!(NPUS.check(NPUS.default, "topology").is_ok());
    }

    #[test]
    fn reads_a_small_file_and_names_a_missing_one() {
        let dir = std::env::temp_dir().join(format!("astrolabe-limits-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("a.txt");
        std::fs::write(&p, "héllo").unwrap();
        assert_eq!(read_text(&p).unwrap(), "héllo");
        std::fs::write(&p, [0x66, 0xff]).unwrap();
        assert!(read_text(&p).unwrap_err().to_string().contains("offset 1"));
        assert!(read_text(&dir.join("missing")).is_err());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
