//! Built-in comparison scenarios (`presets/scenarios/*.toml`), embedded in the binary with
//! `include_str!` so `astrolabe compare NAME` runs with no files.

use crate::error::{Error, Result};

/// Folder of the built-in scenarios, relative to the crate root.
pub const FOLDER: &str = "presets/scenarios";

/// One embedded scenario: its name (the file stem) and its text.
#[derive(Clone, Copy, Debug)]
pub struct Entry {
    /// Name used on the command line.
    pub name: &'static str,
    /// The TOML text.
    pub text: &'static str,
}

macro_rules! embed {
    ($($name:literal),* $(,)?) => {
        &[$(Entry {
            name: $name,
            text: include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/presets/scenarios/", $name, ".toml")),
        }),*]
    };
}

/// Built-in scenarios, in `list` order.
#[rustfmt::skip]
pub const SCENARIOS: &[Entry] = embed!(
    "wafer-vs-conventional",
    "dp-vs-tp-vs-pp",
    "a100-vs-a800",
    "gpu-generations",
    "themis-vs-baseline",
    "ps-vs-ring-resnet50",
);

/// Names of the built-in scenarios.
pub fn names() -> Vec<&'static str> {
    SCENARIOS.iter().map(|e| e.name).collect()
}

/// The text of a built-in scenario, or an unknown-name error with a suggestion.
pub fn source(name: &str) -> Result<&'static str> {
    SCENARIOS
        .iter()
        .find(|e| e.name.eq_ignore_ascii_case(name))
        .map(|e| e.text)
        .ok_or_else(|| Error::unknown("scenario", name, &names()))
}
