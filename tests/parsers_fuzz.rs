//! No panics on any input: a few thousand random strings (random bytes, random characters
//! from the parsers' alphabet, and mutations of valid inputs) thrown at the quantity
//! parsers, the topology parser, the name parsers and the `--size` range parser. Each call
//! must return `Ok` or `Err`; a panic fails the test. Deterministic (fixed-seed xorshift).

use astrolabe::cli::collective::parse_sizes;
use astrolabe::collective::{Algorithm, Collective};
use astrolabe::network::Topology;
use astrolabe::units::{parse_bandwidth, parse_bytes, parse_flop_rate, parse_seconds};

/// xorshift64*: small, deterministic, good enough to shake parsers.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

const VALID: [&str; 14] = [
    "64MiB",
    "1 GB",
    "450GB/s",
    "400 Gb/s",
    "500ns",
    "1.5us",
    "989TFLOP/s",
    "1e3B",
    "ring(8, 100GB/s, 500ns)",
    "ring(4, 200GB/s, 0.5us) x switch(8, 50GB/s, 1us)",
    "switch(8, 450GB/s, 1us, in-network, oversub=2)",
    "fully_connected(4, 1TB/s, 1ns) × ring(2, 1GB/s, 1ms)",
    "1KiB..1GiB",
    "all-reduce",
];

const ALPHABET: &[char] = &[
    '0', '1', '9', '.', 'e', 'E', '-', '+', '_', ' ', 'k', 'K', 'M', 'G', 'T', 'P', 'E', 'i', 'B',
    'b', '/', 's', 'n', 'u', 'µ', 'm', 'h', '(', ')', ',', 'x', '×', '=', 'r', 'g', 'w', 'F', 'L',
    'O', 'p', 'é', '∞', '\u{0}', '\t',
];

fn random_bytes(r: &mut Rng) -> String {
    let len = r.below(40);
    let bytes: Vec<u8> = (0..len).map(|_| r.next() as u8).collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

fn random_chars(r: &mut Rng) -> String {
    let len = r.below(60);
    (0..len)
        .map(|_| ALPHABET[r.below(ALPHABET.len())])
        .collect()
}

fn mutate(r: &mut Rng) -> String {
    let mut s: Vec<char> = VALID[r.below(VALID.len())].chars().collect();
    for _ in 0..1 + r.below(4) {
        let at = r.below(s.len() + 1);
        match r.below(4) {
            0 if at < s.len() => {
                s.remove(at);
            }
            1 => s.insert(at, ALPHABET[r.below(ALPHABET.len())]),
            2 if at < s.len() => s[at] = ALPHABET[r.below(ALPHABET.len())],
            _ => {
                let cut = r.below(s.len() + 1);
                s.truncate(cut);
            }
        }
    }
    s.into_iter().collect()
}

fn throw(s: &str) {
    let _ = parse_bytes("size", s);
    let _ = parse_bandwidth("bandwidth", s);
    let _ = parse_seconds("latency", s);
    let _ = parse_flop_rate("rate", s);
    let _ = Topology::parse(s);
    let _ = Collective::parse(s);
    let _ = Algorithm::parse(s);
    let _ = parse_sizes(s, 2);
}

#[test]
fn random_bytes_do_not_panic() {
    let mut r = Rng(0x9E37_79B9_7F4A_7C15);
    for _ in 0..2000 {
        throw(&random_bytes(&mut r));
    }
}

#[test]
fn random_parser_alphabet_does_not_panic() {
    let mut r = Rng(0xD1B5_4A32_D192_ED03);
    for _ in 0..2000 {
        throw(&random_chars(&mut r));
    }
}

#[test]
fn mutated_valid_inputs_do_not_panic() {
    let mut r = Rng(0x0123_4567_89AB_CDEF);
    for _ in 0..3000 {
        throw(&mutate(&mut r));
    }
    for v in VALID {
        throw(v);
    }
}

#[test]
fn edge_cases_do_not_panic() {
    for s in [
        "",
        " ",
        "x",
        "××",
        "(",
        ")",
        "ring(",
        "ring()",
        "ring(,,)",
        "ring(8,,)",
        "1e999GB",
        "-0B",
        "NaN B",
        "inf GB/s",
        "1..",
        "..1B",
        "1B..0B",
        "0B..1GB",
        "1B..1EB",
        "ring(4294967296, 1GB/s, 1ns)",
        "ring(0, 1GB/s, 1ns)",
        "switch(8, 1GB/s, 1ns, oversub=)",
        "switch(8, 1GB/s, 1ns, oversub=nan)",
        "ring(8, 100GB/s, 500ns) x",
        "é(1, 1B/s, 1s)",
        "ring(8,1GB/s,1ns)×",
    ] {
        throw(s);
    }
}
