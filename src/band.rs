//! Prediction bands: how far published runs like this one fell from their estimates.
//!
//! Every estimate carries an 80 % band built from the residuals of comparable published
//! runs, `r = ln(measured / estimated)`, kept in `presets/bands/*.csv` (one file per public
//! set: NVIDIA's NeMo and Megatron-LM tables in `runs.csv`, Megatron-Bridge's 2025–2026
//! tables in `runs-2025.csv`, AMD Instinct and NVIDIA MLPerf Training results in
//! `amd-mlperf.csv` and `nvidia-mlperf.csv`, Megatron-Bridge's DeepSeek-V3 and gpt-oss-120b
//! rows, other model families than the 2025 set's Llama 3 and Qwen3, in `frontier.csv`, and
//! the configurations of Megatron-Bridge's MoE hardware playbook, with all-to-alls across
//! nodes on H100 and B200, in `tracker.csv`; the validation harnesses write them and check them, so they always belong to this model). A run's group is its device generation × dense/MoE ×
//! precision class × scale; when that group has fewer than [`MIN_RUNS`] runs the band backs
//! off to coarser groups (dropping scale, then precision, then generation, then the kind)
//! and names the group it used.
//!
//! The bounds are order statistics, as split-conformal prediction takes them (Vovk et al.,
//! "Algorithmic Learning in a Random World", 2005; Lei et al., JASA 2018, §2.2): with `n`
//! residuals sorted, `low = r₍⌊(n+1)·0.1⌋₎` and `high = r₍⌈(n+1)·0.9⌉₎` (1-based, clamped to
//! `[1, n]`), so a new run exchangeable with the group falls inside with probability at
//! least 80 % (`n ≥ 9`). The band is `[T·e^low, T·e^high]` for an estimate `T`.

use crate::compute::Precision;
use std::sync::OnceLock;

/// Coverage of the band.
pub const LEVEL: f64 = 0.8;

/// Fewest runs a group needs before its band is used (9 make the order statistics an 80 %
/// conformal band).
pub const MIN_RUNS: usize = 9;

/// An estimate's prediction band.
#[derive(Clone, Debug, PartialEq, serde::Serialize, schemars::JsonSchema)]
pub struct Band {
    /// Coverage, 0.8.
    pub level: f64,
    /// Lower bound of the iteration time, seconds.
    pub low_s: f64,
    /// Upper bound, seconds.
    pub high_s: f64,
    /// Published runs the band is made of.
    pub runs: u32,
    /// The group they form ("Hopper dense 8-bit ≤ 64 GPUs", or a coarser one).
    pub group: String,
}

/// What places a run in a group.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Key {
    /// Device generation: "Volta", "Ampere", "Hopper", "Blackwell", "AMD Instinct" (CDNA 3
    /// and 4: MI300X, MI325X, MI350X, MI355X) or "other".
    pub generation: &'static str,
    /// Mixture-of-experts model.
    pub moe: bool,
    /// "16-bit", "8-bit" or "4-bit".
    pub precision: &'static str,
    /// "≤ 64 GPUs", "65–512 GPUs" or "> 512 GPUs".
    pub scale: &'static str,
}

impl Key {
    /// The key of a run on `device` (a preset name such as "h100-sxm" or "gb200") with
    /// `gpus` devices.
    pub fn new(device: &str, moe: bool, precision: Precision, gpus: u32) -> Key {
        Key {
            generation: generation(device),
            moe,
            precision: precision_class(precision),
            scale: scale(gpus),
        }
    }
}

/// The generation of a device preset name.
pub fn generation(device: &str) -> &'static str {
    let d = device.to_ascii_lowercase();
    let has = |s: &[&str]| s.iter().any(|x| d.contains(x));
    if has(&["b200", "b300", "gb200", "gb300"]) {
        "Blackwell"
    } else if has(&["h100", "h800", "h200", "h20"]) {
        "Hopper"
    } else if has(&["a100", "a800"]) {
        "Ampere"
    } else if has(&["v100"]) {
        "Volta"
    } else if has(&["mi300", "mi325", "mi350", "mi355"]) {
        "AMD Instinct"
    } else {
        "other"
    }
}

fn precision_class(p: Precision) -> &'static str {
    match p {
        Precision::Fp8 | Precision::Mxfp8 => "8-bit",
        Precision::Nvfp4 => "4-bit",
        _ => "16-bit",
    }
}

fn scale(gpus: u32) -> &'static str {
    match gpus {
        0..=64 => "≤ 64 GPUs",
        65..=512 => "65–512 GPUs",
        _ => "> 512 GPUs",
    }
}

/// One published run's residual.
#[derive(Clone, Debug, PartialEq, serde::Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct Residual {
    /// Its line in the source CSV.
    pub row: u32,
    /// The CSV's `gpu` column ("H100", "GB200", …).
    pub gpu: String,
    /// Mixture-of-experts model.
    pub moe: bool,
    /// Precision as the estimate took it ("bf16", "fp8", …).
    pub precision: String,
    /// Devices.
    pub gpus: u32,
    /// `ln(measured / estimated)`.
    pub log_ratio: f64,
}

impl Residual {
    /// The run's group key.
    pub fn key(&self) -> Key {
        let p = Precision::parse(&self.precision).unwrap_or(Precision::Bf16);
        Key::new(&self.gpu, self.moe, p, self.gpus)
    }
}

/// The residual sets shipped with the binary.
pub const SETS: [(&str, &str); 6] = [
    (
        "runs",
        include_str!(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/presets/bands/runs.csv"
        )),
    ),
    (
        "runs-2025",
        include_str!(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/presets/bands/runs-2025.csv"
        )),
    ),
    (
        "amd-mlperf",
        include_str!(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/presets/bands/amd-mlperf.csv"
        )),
    ),
    (
        "nvidia-mlperf",
        include_str!(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/presets/bands/nvidia-mlperf.csv"
        )),
    ),
    (
        "frontier",
        include_str!(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/presets/bands/frontier.csv"
        )),
    ),
    (
        "tracker",
        include_str!(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/presets/bands/tracker.csv"
        )),
    ),
];

/// Parses one residual CSV.
pub fn parse(text: &str) -> Result<Vec<Residual>, csv::Error> {
    csv::Reader::from_reader(text.as_bytes())
        .deserialize()
        .collect()
}

/// Every shipped residual with its key, parsed once.
fn shipped() -> &'static [(Key, f64)] {
    static RUNS: OnceLock<Vec<(Key, f64)>> = OnceLock::new();
    RUNS.get_or_init(|| {
        SETS.iter()
            .flat_map(|(_, text)| parse(text).unwrap_or_default())
            .map(|r| (r.key(), r.log_ratio))
            .collect()
    })
}

/// The band of estimate `e` of `model` on `system` (its device generation, dense or MoE,
/// precision and device count place it in a group).
pub fn of(
    model: &crate::model::Model,
    system: &crate::system::System,
    e: &crate::estimate::Estimate,
) -> Band {
    let moe = model.transformer().is_some_and(|t| t.experts > 1);
    let key = Key::new(&system.device.spec.name, moe, e.plan.precision, e.plan.gpus);
    band(e.time.total.get(), &key)
}

/// The band of an estimate `t_s` seconds long for a run with `key`, from the shipped
/// residuals.
pub fn band(t_s: f64, key: &Key) -> Band {
    band_from(t_s, key, shipped(), None)
}

/// Group levels, finest first: generation × kind × precision × scale; without scale;
/// generation × kind; kind; every run.
const LEVELS: usize = 5;

/// Whether `k` is in `key`'s group at `level`.
fn same_group(level: usize, k: &Key, key: &Key) -> bool {
    let kind = k.moe == key.moe;
    let generation = kind && k.generation == key.generation;
    let precision = generation && k.precision == key.precision;
    match level {
        0 => precision && k.scale == key.scale,
        1 => precision,
        2 => generation,
        3 => kind,
        _ => true,
    }
}

/// The name of `key`'s group at `level`.
fn group_name(level: usize, key: &Key) -> String {
    let (g, m, p, s) = (key.generation, kind(key.moe), key.precision, key.scale);
    match level {
        0 => format!("{g} {m} {p} {s}"),
        1 => format!("{g} {m} {p}"),
        2 => format!("{g} {m}"),
        3 => format!("all {m}"),
        _ => "all published runs".to_string(),
    }
}

/// The band from `runs`, leaving out run `skip` (an index into `runs`; leave-one-out): the
/// finest group of `key` with at least [`MIN_RUNS`] runs.
pub fn band_from(t_s: f64, key: &Key, runs: &[(Key, f64)], skip: Option<usize>) -> Band {
    let mut r: Vec<f64> = Vec::new();
    let mut level = 0;
    loop {
        r.clear();
        r.extend(
            (runs.iter().enumerate())
                .filter(|&(i, (k, _))| Some(i) != skip && same_group(level, k, key))
                .map(|(_, &(_, x))| x),
        );
        if r.len() >= MIN_RUNS || level == LEVELS - 1 {
            break;
        }
        level += 1;
    }
    let (lo, hi) = conformal(&mut r);
    Band {
        level: LEVEL,
        low_s: t_s * lo.exp(),
        high_s: t_s * hi.exp(),
        runs: r.len() as u32,
        group: group_name(level, key),
    }
}

fn kind(moe: bool) -> &'static str {
    if moe { "MoE" } else { "dense" }
}

/// Split-conformal 80 % bounds of `r` (sorted in place): the `⌊(n+1)·0.1⌋`-th and
/// `⌈(n+1)·0.9⌉`-th smallest (1-based, clamped to `[1, n]`); (0, 0) with no runs.
pub fn conformal(r: &mut [f64]) -> (f64, f64) {
    if r.is_empty() {
        return (0.0, 0.0);
    }
    r.sort_by(f64::total_cmp);
    let n = r.len();
    // ⌊(n+1)/10⌋ and ⌈9(n+1)/10⌉ in integers (LEVEL = 0.8), exact at every n.
    let lo = ((n + 1) / 10).clamp(1, n);
    let hi = (9 * (n + 1)).div_ceil(10).clamp(1, n);
    (r[lo - 1], r[hi - 1])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conformal_ranks_by_hand() {
        // n = 9: ranks ⌊10·0.1⌋ = 1 and ⌈10·0.9⌉ = 9, the smallest and the largest.
        let mut r: Vec<f64> = (1..=9).rev().map(f64::from).collect();
        assert_eq!(conformal(&mut r), (1.0, 9.0));
        // n = 19: ranks 2 and 18.
        let mut r: Vec<f64> = (1..=19).map(f64::from).collect();
        assert_eq!(conformal(&mut r), (2.0, 18.0));
        // n = 4 (a back-off of last resort): clamped to 1 and 4.
        let mut r = vec![0.3, -0.1, 0.2, 0.0];
        assert_eq!(conformal(&mut r), (-0.1, 0.3));
        assert_eq!(conformal(&mut []), (0.0, 0.0));
    }

    #[test]
    fn groups_back_off_until_nine_runs() {
        let hopper = Key::new("h100-sxm", false, Precision::Fp8, 64);
        let ampere = Key::new("a100-80gb", false, Precision::Bf16, 1024);
        // 9 Hopper runs, residuals ln 0.9 … : the exact group is used.
        let mut runs: Vec<(Key, f64)> = (0..9).map(|i| (hopper, 0.01 * i as f64)).collect();
        let b = band_from(10.0, &hopper, &runs, None);
        assert_eq!(
            (b.runs, b.group.as_str()),
            (9, "Hopper dense 8-bit ≤ 64 GPUs")
        );
        approx::assert_relative_eq!(b.low_s, 10.0);
        approx::assert_relative_eq!(b.high_s, 10.0 * 0.08f64.exp());
        // Leaving one out leaves 8: the band backs off past the generation to all dense
        // runs (the 8 plus 2 Ampere ones).
        runs.extend([(ampere, -0.2), (ampere, 0.5)]);
        let b = band_from(10.0, &hopper, &runs, Some(0));
        assert_eq!((b.runs, b.group.as_str()), (10, "all dense"));
        // Ranks ⌊11·0.1⌋ = 1 and ⌈11·0.9⌉ = 10 of the sorted ten: −0.2 and 0.5.
        approx::assert_relative_eq!(b.low_s, 10.0 * (-0.2f64).exp());
        approx::assert_relative_eq!(b.high_s, 10.0 * 0.5f64.exp());
        // An MoE run with no MoE residuals falls back to every run.
        let moe = Key::new("gb200", true, Precision::Nvfp4, 8);
        assert_eq!(
            band_from(1.0, &moe, &runs, None).group,
            "all published runs"
        );
    }

    #[test]
    fn keys_by_hand() {
        let k = Key::new("gb300", true, Precision::Mxfp8, 256);
        assert_eq!(
            (k.generation, k.moe, k.precision, k.scale),
            ("Blackwell", true, "8-bit", "65–512 GPUs")
        );
        assert_eq!(generation("H800"), "Hopper");
        assert_eq!(generation("mi300x"), "AMD Instinct");
        assert_eq!(generation("MI355X"), "AMD Instinct");
        assert_eq!(generation("tpu-v4"), "other");
        assert_eq!(
            Key::new("a100", false, Precision::Fp16, 1025).scale,
            "> 512 GPUs"
        );
    }

    #[test]
    fn shipped_sets_parse() {
        let expected = [
            ("runs", 45),
            ("runs-2025", 144),
            ("amd-mlperf", 19),
            ("nvidia-mlperf", 21),
            ("frontier", 29),
        ];
        for ((name, text), (want, n)) in SETS.iter().zip(expected) {
            assert_eq!(*name, want);
            let r = parse(text).unwrap_or_else(|e| panic!("{name}: {e}"));
            assert_eq!(r.len(), n, "{name}");
        }
    }
}
