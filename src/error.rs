//! The library's one error type. Every variant says where the problem is (a file, a flag,
//! a key) and what was expected, so `main` can print it on one line and exit with code 2
//! for bad input or 1 for an internal failure.

use std::path::PathBuf;

/// Result alias used across the crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong in Astrolabe.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A value given on the command line or in a file does not parse or is out of range.
    /// `what` names the flag or key (`--size`, `network.dims[1].bandwidth`).
    #[error("{what}: {message}")]
    Input { what: String, message: String },

    /// A file could not be parsed. `message` carries line/column when the parser gives them.
    #[error("{}: {message}", path.display())]
    File { path: PathBuf, message: String },

    /// A file could not be read or written.
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },

    /// A name that is not among the known ones, with the closest known name.
    #[error("unknown {kind} '{name}'{}; expected one of: {}", did_you_mean(suggestion), valid.join(", "))]
    UnknownName {
        kind: &'static str,
        name: String,
        suggestion: Option<String>,
        valid: Vec<String>,
    },

    /// A well-formed request the model does not support (an algorithm that does not apply
    /// to a collective, a plan that does not divide the model).
    #[error("{0}")]
    Unsupported(String),

    /// A bug: an invariant of the library was broken.
    #[error("internal error: {0}")]
    Internal(String),
}

fn did_you_mean(s: &Option<String>) -> String {
    match s {
        Some(s) => format!(" (did you mean '{s}'?)"),
        None => String::new(),
    }
}

impl Error {
    /// Shorthand for [`Error::Input`].
    pub fn input(what: impl Into<String>, message: impl Into<String>) -> Self {
        Error::Input {
            what: what.into(),
            message: message.into(),
        }
    }

    /// Builds [`Error::UnknownName`], picking the closest valid name (Jaro-Winkler ≥ 0.7 or
    /// a prefix match) as the suggestion.
    pub fn unknown<S: AsRef<str>>(kind: &'static str, name: &str, valid: &[S]) -> Self {
        Error::UnknownName {
            kind,
            name: name.to_string(),
            suggestion: suggest(name, valid),
            valid: valid.iter().map(|s| s.as_ref().to_string()).collect(),
        }
    }

    /// Prefixes the `what` of an input error (or the message of others) with a context such
    /// as a file path or a variant name.
    pub fn context(self, ctx: impl std::fmt::Display) -> Self {
        match self {
            Error::Input { what, message } => Error::Input {
                what: format!("{ctx}: {what}"),
                message,
            },
            Error::Io { .. } | Error::Internal(_) => self,
            other => Error::input(ctx.to_string(), other.to_string()),
        }
    }

    /// Whether this is a write to a closed pipe (`| head`): success by the binary's rule.
    pub fn is_broken_pipe(&self) -> bool {
        matches!(self, Error::Io { source, .. } if source.kind() == std::io::ErrorKind::BrokenPipe)
    }

    /// The process exit code for this error: 1 for internal errors, 2 for everything the
    /// user can fix.
    pub fn exit_code(&self) -> i32 {
        match self {
            Error::Internal(_) => 1,
            _ => 2,
        }
    }
}

/// The valid name closest to `name`, if any is close enough to be a plausible typo.
pub fn suggest<S: AsRef<str>>(name: &str, valid: &[S]) -> Option<String> {
    let lower = name.to_ascii_lowercase();
    valid
        .iter()
        .map(|v| {
            let v = v.as_ref();
            let mut score = strsim::jaro_winkler(&lower, &v.to_ascii_lowercase());
            if !lower.is_empty() && v.to_ascii_lowercase().starts_with(&lower) {
                score = score.max(0.9);
            }
            (score, v)
        })
        .filter(|(score, _)| *score >= 0.7)
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, v)| v.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suggests_close_name() {
        let valid = ["all-reduce", "all-gather", "all-to-all", "broadcast"];
        assert_eq!(suggest("allreduce", &valid).as_deref(), Some("all-reduce"));
        assert_eq!(suggest("brodcast", &valid).as_deref(), Some("broadcast"));
        assert_eq!(suggest("zzzzzz", &valid), None);
    }

    #[test]
    fn exit_codes() {
        assert_eq!(Error::input("--size", "bad").exit_code(), 2);
        assert_eq!(Error::Internal("x".into()).exit_code(), 1);
    }
}
