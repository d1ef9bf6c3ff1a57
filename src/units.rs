//! Physical quantities with their unit in the type: [`Bytes`], [`Seconds`], [`Bandwidth`]
//! (bytes per second), [`Flop`] and [`FlopRate`]. Inside, everything is SI base units in an
//! `f64`; conversion happens only at the edges: [`parse_bytes`] and friends read human units
//! ("64MiB", "450 GB/s", "1.5us", "989 TFLOP/s"), and the `Display` impls print one readable
//! unit. Decimal and binary prefixes are both accepted and never confused: GB = 1e9 B,
//! GiB = 2^30 B; a lower-case `b` means bits (100 Gb/s = 12.5 GB/s).

use crate::error::{Error, Result};
use std::fmt;
use std::ops::{Add, AddAssign, Div, Mul, Sub};

macro_rules! quantity {
    ($(#[$m:meta])* $name:ident, $unit:literal) => {
        $(#[$m])*
        #[derive(Clone, Copy, Debug, Default, PartialEq, PartialOrd)]
        pub struct $name(f64);

        impl $name {
            /// Zero of this quantity.
            pub const ZERO: $name = $name(0.0);
            #[doc = concat!("A value in ", $unit, ".")]
            pub const fn new(v: f64) -> Self {
                $name(v)
            }
            #[doc = concat!("The value in ", $unit, ".")]
            pub const fn get(self) -> f64 {
                self.0
            }
            /// The larger of two values.
            pub fn max(self, o: Self) -> Self {
                $name(self.0.max(o.0))
            }
            /// The smaller of two values.
            pub fn min(self, o: Self) -> Self {
                $name(self.0.min(o.0))
            }
        }
        impl Add for $name {
            type Output = $name;
            fn add(self, o: $name) -> $name {
                $name(self.0 + o.0)
            }
        }
        impl AddAssign for $name {
            fn add_assign(&mut self, o: $name) {
                self.0 += o.0;
            }
        }
        impl Sub for $name {
            type Output = $name;
            fn sub(self, o: $name) -> $name {
                $name(self.0 - o.0)
            }
        }
        impl Mul<f64> for $name {
            type Output = $name;
            fn mul(self, k: f64) -> $name {
                $name(self.0 * k)
            }
        }
        impl Div<f64> for $name {
            type Output = $name;
            fn div(self, k: f64) -> $name {
                $name(self.0 / k)
            }
        }
        /// The ratio of two quantities of the same kind is a plain number.
        impl Div for $name {
            type Output = f64;
            fn div(self, o: $name) -> f64 {
                self.0 / o.0
            }
        }
        impl std::iter::Sum for $name {
            fn sum<I: Iterator<Item = $name>>(it: I) -> $name {
                $name(it.map(|x| x.0).sum())
            }
        }
    };
}

quantity!(
    /// An amount of data, in bytes.
    Bytes, "bytes"
);
quantity!(
    /// A duration, in seconds.
    Seconds, "seconds"
);
quantity!(
    /// A data rate, in bytes per second (one direction unless stated otherwise).
    Bandwidth, "bytes per second"
);
quantity!(
    /// An amount of floating-point work, in FLOP.
    Flop, "FLOP"
);
quantity!(
    /// A compute rate, in FLOP per second.
    FlopRate, "FLOP per second"
);

/// bytes ÷ (bytes/s) = seconds.
impl Div<Bandwidth> for Bytes {
    type Output = Seconds;
    fn div(self, b: Bandwidth) -> Seconds {
        Seconds(self.0 / b.0)
    }
}
/// bytes ÷ seconds = bytes/s.
impl Div<Seconds> for Bytes {
    type Output = Bandwidth;
    fn div(self, t: Seconds) -> Bandwidth {
        Bandwidth(self.0 / t.0)
    }
}
/// (bytes/s) × seconds = bytes.
impl Mul<Seconds> for Bandwidth {
    type Output = Bytes;
    fn mul(self, t: Seconds) -> Bytes {
        Bytes(self.0 * t.0)
    }
}
/// FLOP ÷ (FLOP/s) = seconds.
impl Div<FlopRate> for Flop {
    type Output = Seconds;
    fn div(self, r: FlopRate) -> Seconds {
        Seconds(self.0 / r.0)
    }
}
/// FLOP ÷ seconds = FLOP/s.
impl Div<Seconds> for Flop {
    type Output = FlopRate;
    fn div(self, t: Seconds) -> FlopRate {
        FlopRate(self.0 / t.0)
    }
}

/// Splits "64 MiB" / "64MiB" into (64.0, "MiB"). Rejects empty, non-finite and negative
/// numbers with a message that shows an example.
fn split_number<'a>(what: &str, s: &'a str, example: &str) -> Result<(f64, &'a str)> {
    let t = s.trim();
    let end = t
        .char_indices()
        .find(|&(i, c)| {
            !(c.is_ascii_digit()
                || c == '.'
                || c == '_'
                || ((c == 'e' || c == 'E')
                    && t[i + 1..]
                        .starts_with(|d: char| d.is_ascii_digit() || d == '-' || d == '+'))
                || ((c == '-' || c == '+') && (i == 0 || t[..i].ends_with(['e', 'E']))))
        })
        .map(|(i, _)| i)
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(end);
    let num = num.replace('_', "");
    if num.is_empty() {
        return Err(Error::input(
            what,
            format!("'{s}' is not a quantity; expected a number and a unit, e.g. '{example}'"),
        ));
    }
    let v: f64 = num.parse().map_err(|_| {
        Error::input(
            what,
            format!("'{s}' has no valid number; expected e.g. '{example}'"),
        )
    })?;
    if !v.is_finite() {
        return Err(Error::input(what, format!("'{s}' is not finite")));
    }
    if v.is_sign_negative() {
        return Err(Error::input(
            what,
            format!("'{s}' is negative; expected a value ≥ 0, e.g. '{example}'"),
        ));
    }
    Ok((v, unit.trim()))
}

/// The stated range of a quantity after unit scaling: 0, or a value in `[min, max]`.
/// Outside it the model would overflow to infinity or divide by (almost) nothing, so the
/// value is refused at the edge with the range in the message.
#[derive(Clone, Copy, Debug)]
pub struct Range {
    /// Smallest non-zero value (SI units).
    pub min: f64,
    /// Largest value (SI units).
    pub max: f64,
    /// The range in words, for the error message.
    pub text: &'static str,
    /// Whether 0 is accepted.
    pub zero: bool,
}

/// Data sizes: 1 bit (0.125 B) to 1 PiB (2^50 B), or 0.
pub const BYTES_RANGE: Range = Range {
    min: 0.125,
    max: (1u64 << 50) as f64,
    text: "between 1 bit and 1 PiB",
    zero: true,
};
/// Bandwidths: 1 B/s to 1 EB/s (1e18 B/s); never 0.
pub const BANDWIDTH_RANGE: Range = Range {
    min: 1.0,
    max: 1e18,
    text: "between 1 B/s and 1 EB/s",
    zero: false,
};
/// Durations: 1 ps to 1e9 s (about 32 years), or 0.
pub const SECONDS_RANGE: Range = Range {
    min: 1e-12,
    max: 1e9,
    text: "between 1 ps and 1e9 s (about 32 years)",
    zero: true,
};
/// Compute rates: 1 FLOP/s to 1 ZFLOP/s (1e21 FLOP/s), or 0 (an unsupported precision).
pub const FLOP_RATE_RANGE: Range = Range {
    min: 1.0,
    max: 1e21,
    text: "between 1 FLOP/s and 1e21 FLOP/s",
    zero: true,
};
/// Counts (tokens): 1 to 1e18, or 0.
pub const COUNT_RANGE: Range = Range {
    min: 1.0,
    max: 1e18,
    text: "between 1 and 1e18",
    zero: true,
};

impl Range {
    /// `v` (already in SI units) when it is in range; else an error that quotes `s`.
    pub fn check(&self, what: &str, s: &str, v: f64) -> Result<f64> {
        if v == 0.0 && self.zero {
            return Ok(0.0);
        }
        if v == 0.0 {
            return Err(Error::input(what, format!("'{s}' is zero; it must be > 0")));
        }
        if !(v >= self.min && v <= self.max) {
            return Err(Error::input(
                what,
                format!("'{s}' is out of range; it must be {}", self.text),
            ));
        }
        Ok(v)
    }
}

/// Multiplier of an SI (k, M, G, T, P, E) or IEC (Ki, Mi, Gi, Ti, Pi, Ei) prefix.
fn prefix_factor(p: &str) -> Option<f64> {
    Some(match p {
        "" => 1.0,
        "k" | "K" => 1e3,
        "M" => 1e6,
        "G" => 1e9,
        "T" => 1e12,
        "P" => 1e15,
        "E" => 1e18,
        "Ki" => 1024.0,
        "Mi" => 1024f64.powi(2),
        "Gi" => 1024f64.powi(3),
        "Ti" => 1024f64.powi(4),
        "Pi" => 1024f64.powi(5),
        "Ei" => 1024f64.powi(6),
        _ => return None,
    })
}

/// Bytes per unit of a data unit such as "MiB", "GB", "Gb" (bits), "B".
fn data_unit(u: &str) -> Option<f64> {
    let (p, per) = if let Some(p) = u.strip_suffix('B') {
        (p, 1.0)
    } else if let Some(p) = u.strip_suffix("bit") {
        (p, 0.125)
    } else if let Some(p) = u.strip_suffix('b') {
        (p, 0.125)
    } else if let Some(p) = u.strip_suffix("bytes") {
        (p, 1.0)
    } else if let Some(p) = u.strip_suffix("byte") {
        (p, 1.0)
    } else {
        return None;
    };
    prefix_factor(p).map(|f| f * per)
}

/// Parses a data size: "1GB" (1e9), "64MiB" (2^26), "1 KiB", "4096B", "800Gb" (bits).
/// A bare number is rejected: the unit must be explicit.
pub fn parse_bytes(what: &str, s: &str) -> Result<Bytes> {
    const EX: &str = "64MiB or 1GB";
    let (v, unit) = split_number(what, s, EX)?;
    if unit.is_empty() {
        return Err(Error::input(
            what,
            format!("'{s}' has no unit; write e.g. '{v}B' or '{EX}'"),
        ));
    }
    let f = data_unit(unit).ok_or_else(|| {
        Error::input(
            what,
            format!("unknown data unit '{unit}' in '{s}'; expected B, kB, MB, GB, KiB, MiB, GiB, … (e.g. '{EX}')"),
        )
    })?;
    BYTES_RANGE.check(what, s, v * f).map(Bytes)
}

/// Parses a bandwidth: "450GB/s", "100 Gb/s" (bits), "25GiB/s", "200Gbps".
pub fn parse_bandwidth(what: &str, s: &str) -> Result<Bandwidth> {
    const EX: &str = "450GB/s or 400Gb/s";
    let (v, unit) = split_number(what, s, EX)?;
    let data = unit
        .strip_suffix("/s")
        .or_else(|| unit.strip_suffix("ps"))
        .ok_or_else(|| {
            Error::input(
                what,
                format!("'{s}' is not a bandwidth; expected a rate such as '{EX}'"),
            )
        })?;
    let f = data_unit(data).ok_or_else(|| {
        Error::input(
            what,
            format!("unknown bandwidth unit '{unit}' in '{s}'; expected e.g. '{EX}'"),
        )
    })?;
    BANDWIDTH_RANGE.check(what, s, v * f).map(Bandwidth)
}

/// Parses a duration: "500ns", "1.5us" (or "µs"), "2ms", "3s", "1min", "2h".
pub fn parse_seconds(what: &str, s: &str) -> Result<Seconds> {
    const EX: &str = "500ns or 1.5us";
    let (v, unit) = split_number(what, s, EX)?;
    let si = match unit {
        "ps" => v / 1e12,
        "ns" => v / 1e9,
        "us" | "µs" | "μs" => v / 1e6,
        "ms" => v / 1e3,
        "s" | "sec" => v,
        "min" => v * 60.0,
        "h" => v * 3600.0,
        "d" | "days" => v * 86400.0,
        "" => {
            return Err(Error::input(
                what,
                format!("'{s}' has no unit; expected e.g. '{EX}'"),
            ));
        }
        _ => {
            return Err(Error::input(
                what,
                format!(
                    "unknown time unit '{unit}' in '{s}'; expected ns, us, ms, s (e.g. '{EX}')"
                ),
            ));
        }
    };
    SECONDS_RANGE.check(what, s, si).map(Seconds)
}

/// Parses a compute rate: "989TFLOP/s", "989 TFLOPS", "1.2 PFLOP/s".
pub fn parse_flop_rate(what: &str, s: &str) -> Result<FlopRate> {
    const EX: &str = "989TFLOP/s";
    let (v, unit) = split_number(what, s, EX)?;
    let p = unit
        .strip_suffix("FLOP/s")
        .or_else(|| unit.strip_suffix("FLOPS"))
        .or_else(|| unit.strip_suffix("flop/s"))
        .or_else(|| unit.strip_suffix("flops"))
        .ok_or_else(|| {
            Error::input(
                what,
                format!("'{s}' is not a compute rate; expected e.g. '{EX}'"),
            )
        })?;
    let f = prefix_factor(p)
        .filter(|_| !p.ends_with('i'))
        .ok_or_else(|| {
            Error::input(
                what,
                format!("unknown prefix '{p}' in '{s}'; expected k, M, G, T, P (e.g. '{EX}')"),
            )
        })?;
    FLOP_RATE_RANGE.check(what, s, v * f).map(FlopRate)
}

/// Parses a count with an optional decimal suffix: "300B" tokens = 3e11, "1.5T", "2M", "512".
pub fn parse_count(what: &str, s: &str) -> Result<f64> {
    let (v, unit) = split_number(what, s, "300B")?;
    let f = match unit {
        "" => 1.0,
        "k" | "K" => 1e3,
        "M" => 1e6,
        "B" | "G" => 1e9,
        "T" => 1e12,
        _ => {
            return Err(Error::input(
                what,
                format!("unknown suffix '{unit}' in '{s}'; expected k, M, B (billions) or T"),
            ));
        }
    };
    COUNT_RANGE.check(what, s, v * f)
}

/// Formats `v` with a decimal prefix: 1.23 k, 45.6 M, … with 3–4 significant digits.
fn si(v: f64, unit: &str) -> String {
    const P: [(f64, &str); 6] = [
        (1e18, "E"),
        (1e15, "P"),
        (1e12, "T"),
        (1e9, "G"),
        (1e6, "M"),
        (1e3, "k"),
    ];
    for (f, p) in P {
        if v.abs() >= f {
            return format!("{} {p}{unit}", sig(v / f));
        }
    }
    format!("{} {unit}", sig(v))
}

/// A number with about four significant digits and no trailing zeros.
pub fn sig(v: f64) -> String {
    if v == 0.0 {
        return "0".into();
    }
    let digits = (3 - v.abs().log10().floor() as i32).clamp(0, 9) as usize;
    let s = format!("{v:.digits$}");
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    }
}

impl fmt::Display for Bytes {
    /// Binary units (KiB, MiB, GiB, …) with about four significant digits.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let v = self.0;
        const IEC: [(f64, &str); 5] = [
            (1024.0 * 1024.0 * 1024.0 * 1024.0 * 1024.0, "PiB"),
            (1024.0 * 1024.0 * 1024.0 * 1024.0, "TiB"),
            (1024.0 * 1024.0 * 1024.0, "GiB"),
            (1024.0 * 1024.0, "MiB"),
            (1024.0, "KiB"),
        ];
        for (k, u) in IEC {
            if v >= k {
                return write!(f, "{} {u}", sig(v / k));
            }
        }
        write!(f, "{} B", sig(v))
    }
}

impl fmt::Display for Seconds {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let v = self.0;
        let a = v.abs();
        let (x, u) = if a == 0.0 {
            (0.0, "s")
        } else if a < 1e-6 {
            (v * 1e9, "ns")
        } else if a < 1e-3 {
            (v * 1e6, "us")
        } else if a < 1.0 {
            (v * 1e3, "ms")
        } else if a < 3600.0 * 48.0 {
            (v, "s")
        } else {
            (v / 86400.0, "days")
        };
        write!(f, "{} {u}", sig(x))
    }
}

impl fmt::Display for Bandwidth {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&si(self.0, "B/s"))
    }
}

impl fmt::Display for Flop {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&si(self.0, "FLOP"))
    }
}

impl fmt::Display for FlopRate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&si(self.0, "FLOP/s"))
    }
}

/// Serde adaptors so TOML files can hold quantities as strings with units
/// (`bandwidth = "450 GB/s"`). A bare number is an error that shows an example.
pub mod serde_units {
    use super::*;
    use serde::{Deserialize, Deserializer, Serializer, de::Error as _};

    macro_rules! adaptor {
        ($modname:ident, $ty:ident, $parse:ident, $fmt:expr) => {
            /// Serde (de)serialisation of the quantity as a string with its unit.
            pub mod $modname {
                use super::*;
                /// Reads a string with a unit.
                pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<$ty, D::Error> {
                    let s = StrOrNum::deserialize(d)?;
                    match s {
                        StrOrNum::S(s) => {
                            $parse("value", &s).map_err(|e| D::Error::custom(e.to_string()))
                        }
                        StrOrNum::N(n) => Err(D::Error::custom(format!(
                            "{n} has no unit; write it as a string with a unit, e.g. \"{}\"",
                            $fmt
                        ))),
                    }
                }
                /// Writes the value as a string with its SI unit.
                pub fn serialize<S: Serializer>(v: &$ty, s: S) -> Result<S::Ok, S::Error> {
                    s.serialize_str(&super::plain(v.get(), $fmt))
                }
            }
        };
    }

    #[derive(Deserialize)]
    #[serde(untagged)]
    enum StrOrNum {
        S(String),
        N(f64),
    }

    adaptor!(bytes, Bytes, parse_bytes, "B");
    adaptor!(bandwidth, Bandwidth, parse_bandwidth, "B/s");
    adaptor!(seconds, Seconds, parse_seconds, "s");
    adaptor!(flop_rate, FlopRate, parse_flop_rate, "FLOP/s");
}

/// A value written back with a decimal prefix so it parses to the same number:
/// 4.5e11 with "B/s" → "450 GB/s".
pub fn plain(v: f64, unit: &str) -> String {
    if unit == "s" {
        return if v != 0.0 && v.abs() < 1e-3 {
            format!("{} ns", round_trip(v * 1e9))
        } else {
            format!("{} s", round_trip(v))
        };
    }
    for (f, p) in [(1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")] {
        if v.abs() >= f && ((v / f) * 1e6).fract().abs() < 1e-6 {
            return format!("{} {p}{unit}", round_trip(v / f));
        }
    }
    format!("{} {unit}", round_trip(v))
}

/// Shortest decimal that reads back as the same f64, rounded to 12 significant digits to
/// avoid artefacts like 449.99999999999994.
fn round_trip(v: f64) -> String {
    let r: f64 = format!("{v:.12e}").parse().unwrap_or(v);
    format!("{r}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use approx::assert_relative_eq;

    #[test]
    fn parses_sizes_decimal_and_binary() {
        assert_eq!(parse_bytes("s", "1GB").unwrap().get(), 1e9);
        assert_eq!(parse_bytes("s", "64MiB").unwrap().get(), 67108864.0);
        assert_eq!(parse_bytes("s", "1 KiB").unwrap().get(), 1024.0);
        assert_eq!(parse_bytes("s", "100Gb").unwrap().get(), 12.5e9);
        assert_eq!(parse_bytes("s", "1e3B").unwrap().get(), 1000.0);
        assert!(parse_bytes("s", "64").is_err());
        assert!(parse_bytes("s", "-1GB").is_err());
        assert!(parse_bytes("s", "1 parsec").is_err());
    }

    #[test]
    fn parses_rates_and_times() {
        assert_eq!(parse_bandwidth("b", "450GB/s").unwrap().get(), 450e9);
        assert_eq!(parse_bandwidth("b", "400 Gb/s").unwrap().get(), 50e9);
        assert_eq!(parse_bandwidth("b", "200Gbps").unwrap().get(), 25e9);
        assert!(parse_bandwidth("b", "450GB").is_err());
        assert_relative_eq!(parse_seconds("t", "1.5us").unwrap().get(), 1.5e-6);
        assert_relative_eq!(parse_seconds("t", "500ns").unwrap().get(), 5e-7);
        assert!(parse_seconds("t", "5").is_err());
        assert_eq!(parse_flop_rate("f", "989TFLOP/s").unwrap().get(), 989e12);
        assert_eq!(parse_flop_rate("f", "312 TFLOPS").unwrap().get(), 312e12);
        assert_eq!(parse_count("tokens", "300B").unwrap(), 3e11);
    }

    #[test]
    fn prints_human_units() {
        assert_eq!(Bytes::new(67108864.0).to_string(), "64 MiB");
        assert_eq!(Seconds::new(0.017507).to_string(), "17.51 ms");
        assert_eq!(Bandwidth::new(99.96e9).to_string(), "99.96 GB/s");
        assert_eq!(plain(450e9, "B/s"), "450 GB/s");
        assert_eq!(plain(5e-7, "s"), "500 ns");
    }

    #[test]
    fn dimensional_arithmetic() {
        let t = Bytes::new(1e9) / Bandwidth::new(1e11);
        assert_relative_eq!(t.get(), 0.01);
        let r = Flop::new(1e12) / FlopRate::new(1e12);
        assert_relative_eq!(r.get(), 1.0);
    }
}
