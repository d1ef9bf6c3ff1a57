//! The built-in catalog: model files (`models/*.toml`), device presets
//! (`presets/devices/*.toml`) and system presets (`presets/systems/*.toml`), embedded in
//! the binary with `include_str!` so it runs with no files. Anything that looks like a path
//! (contains `/` or ends in `.toml`) is read from disk instead, so a user file overrides.
//! Unknown names get a did-you-mean; TOML errors carry toml's line, column and snippet,
//! prefixed with the file (or `<built-in>/…`) they come from.

use crate::compute::{Device, DeviceSpec};
use crate::error::{Error, Result};
use crate::model::{Model, ModelSpec};
use crate::network::Topology;
use crate::system::{System, SystemSpec};
use serde::de::DeserializeOwned;
use std::path::{Path, PathBuf};

/// Which part of the catalog.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// `models/`.
    Model,
    /// `presets/devices/`.
    Device,
    /// `presets/systems/`.
    System,
}

impl Kind {
    /// Singular name for messages ("model").
    pub fn name(self) -> &'static str {
        match self {
            Kind::Model => "model",
            Kind::Device => "device",
            Kind::System => "system",
        }
    }

    /// Folder of the built-in files, relative to the crate root.
    pub fn folder(self) -> &'static str {
        match self {
            Kind::Model => "models",
            Kind::Device => "presets/devices",
            Kind::System => "presets/systems",
        }
    }

    fn entries(self) -> &'static [Entry] {
        match self {
            Kind::Model => MODELS,
            Kind::Device => DEVICES,
            Kind::System => SYSTEMS,
        }
    }
}

/// One embedded file: its name (the file stem) and its text.
#[derive(Clone, Copy, Debug)]
pub struct Entry {
    /// Name used on the command line.
    pub name: &'static str,
    /// The TOML text.
    pub text: &'static str,
}

macro_rules! embed {
    ($dir:literal: $($name:literal),* $(,)?) => {
        &[$(Entry {
            name: $name,
            text: include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/", $dir, "/", $name, ".toml")),
        }),*]
    };
}

/// Built-in models.
pub const MODELS: &[Entry] = embed!("models":
    "gpt3-175b",
    "megatron-gpt-22b",
    "megatron-gpt-530b",
    "megatron-gpt-1t",
    "megatron-2021-1.7b",
    "megatron-2021-3.6b",
    "megatron-2021-7.5b",
    "megatron-2021-18b",
    "megatron-2021-39b",
    "megatron-2021-76b",
    "megatron-2021-145b",
    "megatron-2021-162b",
    "megatron-2021-310b",
    "megatron-2021-530b",
    "megatron-2021-1t",
    "llama2-7b",
    "llama2-13b",
    "llama2-70b",
    "llama3-8b",
    "llama3-70b",
    "llama3-405b",
    "llama3.2-1b",
    "llama3.2-3b",
    "mistral-7b",
    "mixtral-8x7b",
    "mixtral-8x22b",
    "dbrx",
    "gpt3-5b",
    "gpt3-20b",
    "nemotron3-8b",
    "nemotron3-22b",
    "nemotron4-15b",
    "nemotron4-340b",
    "nemotron-h-8b",
    "nemotron-h-47b",
    "nemotron-h-56b",
    "nemotron-3-nano-30b-a3b",
    "nemotron-3.5-lightning-30b-a3b",
    "nemotron3-super",
    "nemotron3-ultra",
    "deepseek-v3",
    "deepseek-v2",
    "deepseek-v2-lite",
    "deepseek-llm-67b",
    "qwen3-30b-a3b",
    "qwen3-235b-a22b",
    "qwen3-next-80b-a3b",
    "qwen3.5-397b-a17b",
    "qwen3-0.6b",
    "qwen3-1.7b",
    "qwen3-4b",
    "qwen3-8b",
    "qwen3-14b",
    "qwen3-32b",
    "qwen2.5-7b",
    "qwen2.5-14b",
    "qwen2.5-32b",
    "qwen2.5-72b",
    "olmo2-7b",
    "olmo2-13b",
    "olmo2-32b",
    "gemma2-9b",
    "gemma2-27b",
    "gpt-oss-120b",
    "gpt-oss-20b",
    "kimi-k2",
    "llama4-scout",
    "llama4-maverick",
    "grok-1",
    "bloom-176b",
    "bert-large",
    "dlrm",
    "resnet50",
    "zero-offload-10b",
    "zero-offload-13b",
    "zero-infinity-1t",
);

/// Built-in devices.
pub const DEVICES: &[Entry] = embed!("presets/devices":
    "v100",
    "a100-40gb",
    "a100-80gb",
    "h100-sxm",
    "h800",
    "h200",
    "b200",
    "b300",
    "gb200",
    "gb300",
    "mi300x",
    "mi325x",
    "mi355x",
    "tpu-v4",
);

/// Built-in systems.
pub const SYSTEMS: &[Entry] = embed!("presets/systems":
    "dgx-a100",
    "dgx-h100",
    "dgx-h800",
    "dgx-h200",
    "dgx-b200",
    "dgx-b300",
    "gb200-nvl72",
    "gb300-nvl72",
    "mi300x-cluster",
    "mi325x-cluster",
    "mi355x-cluster",
    "tpu-v4",
    "dgx-2",
    "v100-single",
);

/// Names of the built-in entries of `kind`, in catalog order.
pub fn names(kind: Kind) -> Vec<&'static str> {
    kind.entries().iter().map(|e| e.name).collect()
}

/// Other names people use for built-in models: (alias, catalog name). Megatron-Turing
/// NLG 530B (Smith et al. 2022) is the 105-layer, h = 20480 model of Korthikanti et al.
/// 2022 Table 3.
pub const MODEL_ALIASES: &[(&str, &str)] = &[
    ("turing-530b", "megatron-gpt-530b"),
    ("mt-nlg-530b", "megatron-gpt-530b"),
    ("gpt3", "gpt3-175b"),
    // Llama 3.1 keeps the Llama 3 architecture (Llama Team 2024, Table 3); its 128K
    // context is a later training stage: use --seq-len 131072.
    ("llama3.1-8b", "llama3-8b"),
    ("llama3.1-70b", "llama3-70b"),
    ("llama3.1-405b", "llama3-405b"),
    ("nemotron-8b", "nemotron3-8b"),
    ("nemotron-22b", "nemotron3-22b"),
    ("nemotron-340b", "nemotron4-340b"),
];

#[cfg(test)]
mod alias_tests {
    use super::*;

    #[test]
    fn turing_530b_is_the_mt_nlg_model() {
        let m = model("turing-530b").unwrap();
        let t = m.transformer().unwrap();
        assert_eq!((t.layers, t.h, t.heads), (105, 20480.0, 128));
    }
}

/// The catalog name behind an alias (or the name itself).
pub fn resolve(kind: Kind, name: &str) -> &str {
    match kind {
        Kind::Model => MODEL_ALIASES
            .iter()
            .find(|(a, _)| a.eq_ignore_ascii_case(name))
            .map_or(name, |(_, n)| n),
        _ => name,
    }
}

/// The TOML text of a built-in entry (for `show`), or an unknown-name error.
pub fn source(kind: Kind, name: &str) -> Result<&'static str> {
    let name = resolve(kind, name);
    kind.entries()
        .iter()
        .find(|e| e.name.eq_ignore_ascii_case(name))
        .map(|e| e.text)
        .ok_or_else(|| Error::unknown(kind.name(), name, &names(kind)))
}

/// True when `s` names a file rather than a built-in entry.
pub fn is_path(s: &str) -> bool {
    s.contains('/') || s.contains('\\') || s.ends_with(".toml")
}

/// Reads a built-in entry or a file: returns (text, origin for error messages).
pub fn read(kind: Kind, name_or_path: &str) -> Result<(String, PathBuf)> {
    if is_path(name_or_path) {
        let p = PathBuf::from(name_or_path);
        let text = crate::limits::read_text(&p)?;
        return Ok((text, p));
    }
    let text = source(kind, name_or_path)?;
    let origin = Path::new("<built-in>")
        .join(kind.folder())
        .join(format!("{}.toml", resolve(kind, name_or_path)));
    Ok((text.to_string(), origin))
}

/// Parses TOML text into `T`, wrapping toml's error (line, column, snippet, expected
/// keys) with the file's path.
pub fn parse_toml<T: DeserializeOwned>(text: &str, origin: &Path) -> Result<T> {
    toml::from_str(text).map_err(|e| Error::File {
        path: origin.to_path_buf(),
        message: e.to_string(),
    })
}

/// A model by built-in name or path, validated.
pub fn model(name_or_path: &str) -> Result<Model> {
    let (text, origin) = read(Kind::Model, name_or_path)?;
    let spec: ModelSpec = parse_toml(&text, &origin)?;
    Model::from_spec(spec).map_err(|e| e.context(origin.display()))
}

/// A device by built-in name or path, validated.
pub fn device(name_or_path: &str) -> Result<Device> {
    let (text, origin) = read(Kind::Device, name_or_path)?;
    let spec: DeviceSpec = parse_toml(&text, &origin)?;
    Device::from_spec(spec).map_err(|e| e.context(origin.display()))
}

/// A system by built-in name or path, validated; its device is resolved by name, or as a
/// path relative to the system file.
pub fn system(name_or_path: &str) -> Result<System> {
    let (text, origin) = read(Kind::System, name_or_path)?;
    let spec: SystemSpec = parse_toml(&text, &origin)?;
    let dev = if is_path(&spec.device) && is_path(name_or_path) {
        let base = origin.parent().unwrap_or(Path::new("."));
        device(&base.join(&spec.device).to_string_lossy())
    } else {
        device(&spec.device)
    }
    .map_err(|e| e.context(origin.display()))?;
    System::new(spec, dev).map_err(|e| e.context(origin.display()))
}

/// The network topology of a system preset (for the collective command).
pub fn system_topology(name_or_path: &str) -> Result<Topology> {
    Ok(system(name_or_path)?.topology)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_builtin_parses_and_validates() {
        for n in names(Kind::Model) {
            model(n).unwrap_or_else(|e| panic!("model {n}: {e}"));
        }
        for n in names(Kind::Device) {
            device(n).unwrap_or_else(|e| panic!("device {n}: {e}"));
        }
        for n in names(Kind::System) {
            system(n).unwrap_or_else(|e| panic!("system {n}: {e}"));
        }
    }

    #[test]
    fn unknown_name_suggests_closest() {
        let e = model("gpt3-157b").unwrap_err().to_string();
        assert!(e.contains("did you mean 'gpt3-175b'"), "{e}");
        let e = system("dgx-a10").unwrap_err().to_string();
        assert!(e.contains("did you mean 'dgx-a100'"), "{e}");
    }
}
