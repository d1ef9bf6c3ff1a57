//! Ranking objectives. Each maps an [`Estimate`] to a key where smaller is better, so
//! maximised quantities (tokens/s, MFU, memory headroom) are negated.

use crate::error::{Error, Result};
use crate::estimate::Estimate;

/// What to rank by.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Objective {
    /// Iteration time (minimise).
    Time,
    /// Tokens per second (maximise).
    Tokens,
    /// Model FLOPs utilisation (maximise).
    Mfu,
    /// Memory per device (minimise).
    Memory,
    /// Memory headroom, capacity − use (maximise).
    Headroom,
    /// Device-hours per million tokens: gpus / (tokens/s) · 1e6 / 3600 (minimise).
    Cost,
}

impl Objective {
    /// Every objective.
    pub const ALL: [Objective; 6] = [
        Objective::Time,
        Objective::Tokens,
        Objective::Mfu,
        Objective::Memory,
        Objective::Headroom,
        Objective::Cost,
    ];

    /// The command-line name.
    pub fn name(self) -> &'static str {
        match self {
            Objective::Time => "time",
            Objective::Tokens => "tokens",
            Objective::Mfu => "mfu",
            Objective::Memory => "memory",
            Objective::Headroom => "headroom",
            Objective::Cost => "cost",
        }
    }

    /// Parses a name (with did-you-mean).
    pub fn parse(s: &str) -> Result<Objective> {
        let n = s.trim().to_ascii_lowercase();
        let n = match n.as_str() {
            "tokens/s" | "throughput" | "tokens-per-s" => "tokens",
            "iteration-time" | "iteration" => "time",
            other => other,
        };
        Objective::ALL
            .into_iter()
            .find(|o| o.name() == n)
            .ok_or_else(|| {
                let names: Vec<&str> = Objective::ALL.iter().map(|o| o.name()).collect();
                Error::unknown("objective", s, &names)
            })
    }

    /// Parses "a,b" into two objectives for the Pareto front.
    pub fn parse_pair(s: &str) -> Result<(Objective, Objective)> {
        let (a, b) = s.split_once(',').ok_or_else(|| {
            Error::input(
                "--pareto",
                format!("'{s}': expected two objectives, e.g. 'time,memory'"),
            )
        })?;
        let (a, b) = (Objective::parse(a)?, Objective::parse(b)?);
        if a == b {
            return Err(Error::input("--pareto", "the two objectives must differ"));
        }
        Ok((a, b))
    }

    /// The key, smaller is better.
    #[inline]
    pub fn key(self, e: &Estimate) -> f64 {
        match self {
            Objective::Time => e.time.total.get(),
            Objective::Tokens => -e.metrics.tokens_per_s,
            Objective::Mfu => -e.metrics.mfu,
            Objective::Memory => e.memory.total.get(),
            Objective::Headroom => -e.memory.headroom(),
            Objective::Cost => cost(e),
        }
    }

    /// The value as a user reads it (undoes the negation).
    pub fn value(self, e: &Estimate) -> f64 {
        match self {
            Objective::Tokens | Objective::Mfu | Objective::Headroom => -self.key(e),
            _ => self.key(e),
        }
    }

    /// Axis label with unit.
    pub fn label(self) -> &'static str {
        match self {
            Objective::Time => "iteration time (s)",
            Objective::Tokens => "tokens/s",
            Objective::Mfu => "MFU",
            Objective::Memory => "memory per device (GB)",
            Objective::Headroom => "memory headroom (GB)",
            Objective::Cost => "device-hours per 1M tokens",
        }
    }

    /// Scale from SI to the label's unit.
    pub fn scale(self) -> f64 {
        match self {
            Objective::Memory | Objective::Headroom => 1e-9,
            _ => 1.0,
        }
    }
}

/// Device-hours per million tokens: `gpus · 1e6 / (tokens/s) / 3600`.
pub fn cost(e: &Estimate) -> f64 {
    e.plan.gpus as f64 * 1e6 / e.metrics.tokens_per_s / 3600.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_with_suggestion() {
        assert_eq!(Objective::parse("MFU").unwrap(), Objective::Mfu);
        let e = Objective::parse("tokns").unwrap_err().to_string();
        assert!(e.contains("did you mean 'tokens'"), "{e}");
        assert_eq!(
            Objective::parse_pair("time,memory").unwrap(),
            (Objective::Time, Objective::Memory)
        );
        assert!(Objective::parse_pair("time").is_err());
        assert!(Objective::parse_pair("time,time").is_err());
    }
}
