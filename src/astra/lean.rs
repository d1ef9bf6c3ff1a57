//! A fast reader for whole workloads: decodes a Chakra `.et` file straight from its bytes
//! into the few fields the estimate needs ([`Rec`]), without building prost messages
//! (no string or attribute allocations per node). Same schema and framing as
//! [`super::chakra`] (et_def.proto field numbers; a varint length before each message);
//! unknown fields are skipped as protobuf requires.

use super::chakra::{self, AttrValue};
use crate::error::{Error, Result};

/// Integer attributes the estimate reads, by index into [`Rec::ints`].
pub const ATTRS: [&str; 8] = [
    "comm_type",
    "comm_size",
    "num_ops",
    "tensor_size",
    "comm_src",
    "comm_dst",
    "comm_tag",
    "is_cpu_op",
];
/// Index of `comm_type` in [`Rec::ints`].
pub const COMM_TYPE: usize = 0;
/// Index of `comm_size`.
pub const COMM_SIZE: usize = 1;
/// Index of `num_ops`.
pub const NUM_OPS: usize = 2;
/// Index of `tensor_size`.
pub const TENSOR_SIZE: usize = 3;
/// Index of `comm_src`.
pub const COMM_SRC: usize = 4;
/// Index of `comm_dst`.
pub const COMM_DST: usize = 5;
/// Index of `comm_tag`.
pub const COMM_TAG: usize = 6;
/// Index of `is_cpu_op` (a bool, read as 0 or 1).
pub const IS_CPU_OP: usize = 7;

/// One node, reduced to what the estimate uses.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Rec {
    /// Node id.
    pub id: u64,
    /// NodeType.
    pub ty: i32,
    /// Recorded duration, µs.
    pub duration_micros: u64,
    /// Dependencies (data and control) are `Recs::deps[deps.0..deps.1]`.
    pub deps: (u32, u32),
    /// The integer attributes of [`ATTRS`] (None when absent or not an integer).
    pub ints: [Option<i128>; 8],
    /// Bit k set: attribute `ATTRS[k]` is present but holds no integer (a string, a list).
    pub not_int: u8,
    /// `pg_name` (communicator group), when present.
    pub pg_name: Option<Box<str>>,
    /// `involved_dim`, when present.
    pub involved_dim: Option<Vec<bool>>,
}

/// The nodes of one trace file.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Recs {
    /// Nodes in file order.
    pub recs: Vec<Rec>,
    /// All dependency ids.
    pub deps: Vec<u64>,
}

impl Rec {
    /// An integer attribute as u64; negative or too large values are errors.
    pub fn uint(&self, k: usize) -> Result<Option<u64>> {
        match self.ints[k] {
            None if self.not_int & (1 << k) != 0 => Err(Error::input(
                format!("node {} attribute '{}'", self.id, ATTRS[k]),
                "expected an integer, got a string or a list",
            )),
            None => Ok(None),
            Some(v) if v >= 0 && v <= u64::MAX as i128 => Ok(Some(v as u64)),
            Some(v) => Err(Error::input(
                format!("node {} attribute '{}'", self.id, ATTRS[k]),
                format!("expected a non-negative integer, got {v}"),
            )),
        }
    }
}

/// Builds the records of a decoded [`chakra::TraceFile`] (for traces built in memory).
pub fn from_trace(t: &chakra::TraceFile) -> Recs {
    let mut out = Recs::default();
    for n in &t.nodes {
        let start = out.deps.len() as u32;
        out.deps.extend(n.ctrl_deps.iter().chain(&n.data_deps));
        let mut r = Rec {
            id: n.id,
            ty: n.r#type,
            duration_micros: n.duration_micros,
            deps: (start, out.deps.len() as u32),
            ..Default::default()
        };
        for a in &n.attr {
            if let Some(k) = ATTRS.iter().position(|&x| x == a.name) {
                r.ints[k] = a.as_i128();
                if r.ints[k].is_none() && a.value.is_some() {
                    r.not_int |= 1 << k;
                }
            }
            match (a.name.as_str(), &a.value) {
                ("pg_name", Some(AttrValue::Str(s))) => r.pg_name = Some(s.as_str().into()),
                ("involved_dim", Some(AttrValue::BoolList(l))) => {
                    r.involved_dim = Some(l.values.clone())
                }
                _ => {}
            }
        }
        out.recs.push(r);
    }
    out
}

struct Buf<'a> {
    b: &'a [u8],
    at: usize,
}

impl<'a> Buf<'a> {
    fn varint(&mut self) -> Option<u64> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let byte = *self.b.get(self.at)?;
            self.at += 1;
            v |= ((byte & 0x7f) as u64) << shift;
            if byte < 0x80 {
                return Some(v);
            }
        }
        None
    }
    fn bytes(&mut self) -> Option<&'a [u8]> {
        let n = self.varint()? as usize;
        let end = self.at.checked_add(n)?;
        let s = self.b.get(self.at..end)?;
        self.at = end;
        Some(s)
    }
    fn fixed(&mut self, n: usize) -> Option<u64> {
        let s = self.b.get(self.at..self.at + n)?;
        self.at += n;
        Some(s.iter().rev().fold(0u64, |v, &x| (v << 8) | x as u64))
    }
    /// Skips a field of `wire` type; None on a malformed buffer.
    fn skip(&mut self, wire: u64) -> Option<()> {
        match wire {
            0 => self.varint().map(|_| ()),
            1 => self.fixed(8).map(|_| ()),
            2 => self.bytes().map(|_| ()),
            5 => self.fixed(4).map(|_| ()),
            _ => None,
        }
    }
}

/// Decodes a whole `.et` file: skips `GlobalMetadata`, then reads every `Node`.
pub fn decode(bytes: &[u8], what: &str) -> Result<Recs> {
    let mut buf = Buf { b: bytes, at: 0 };
    // The fast path does not track why a message is malformed: on failure the full
    // decoder (prost) re-reads the file for its reason.
    let bad = |at: usize| match chakra::decode(bytes, what) {
        Err(e) => e,
        Ok(_) => Error::input(what, format!("not a Chakra trace (at byte {at})")),
    };
    if bytes.is_empty() {
        return Err(Error::input(
            what,
            "is empty (0 bytes); a Chakra trace starts with its metadata",
        ));
    }
    buf.bytes().ok_or_else(|| bad(0))?;
    let mut out = Recs::default();
    while buf.at < bytes.len() {
        let at = buf.at;
        let msg = buf.bytes().ok_or_else(|| bad(at))?;
        if msg.is_empty() {
            return Err(empty_node(what, at));
        }
        node(msg, &mut out).ok_or_else(|| bad(at))?;
    }
    Ok(out)
}

/// A node message of 0 bytes has no id and no type (INVALID_NODE): a file of zeros, or
/// padding, not a trace.
pub fn empty_node(what: &str, at: usize) -> Error {
    Error::input(
        what,
        format!(
            "not a Chakra trace: the node message at byte {at} is empty (0 bytes); every node \
             has at least an id and a type"
        ),
    )
}

fn node(msg: &[u8], out: &mut Recs) -> Option<()> {
    let mut b = Buf { b: msg, at: 0 };
    let start = out.deps.len() as u32;
    let mut r = Rec::default();
    while b.at < msg.len() {
        let key = b.varint()?;
        let (field, wire) = (key >> 3, key & 7);
        match (field, wire) {
            (1, 0) => r.id = b.varint()?,
            (3, 0) => r.ty = b.varint()? as i32,
            (4 | 5, 0) => out.deps.push(b.varint()?),
            (4 | 5, 2) => {
                let mut p = Buf {
                    b: b.bytes()?,
                    at: 0,
                };
                while p.at < p.b.len() {
                    out.deps.push(p.varint()?);
                }
            }
            (7, 0) => r.duration_micros = b.varint()?,
            (10, 2) => attr(b.bytes()?, &mut r)?,
            _ => b.skip(wire)?,
        }
    }
    r.deps = (start, out.deps.len() as u32);
    out.recs.push(r);
    Some(())
}

fn zigzag(v: u64) -> i128 {
    ((v >> 1) as i64 ^ -((v & 1) as i64)) as i128
}

fn attr(msg: &[u8], r: &mut Rec) -> Option<()> {
    let mut b = Buf { b: msg, at: 0 };
    let mut name: &[u8] = &[];
    let mut int: Option<i128> = None;
    let mut text: Option<&[u8]> = None;
    let mut bools: Option<Vec<bool>> = None;
    while b.at < msg.len() {
        let key = b.varint()?;
        let (field, wire) = (key >> 3, key & 7);
        match (field, wire) {
            (1, 2) => name = b.bytes()?,
            (7 | 9, 0) => int = Some(b.varint()? as i64 as i128),
            (11 | 13 | 27, 0) => int = Some(b.varint()? as i128),
            (15 | 17, 0) => int = Some(zigzag(b.varint()?)),
            (19, 5) => int = Some(b.fixed(4)? as i128),
            (23, 5) => int = Some(b.fixed(4)? as u32 as i32 as i128),
            (21, 1) => int = Some(b.fixed(8)? as i128),
            (25, 1) => int = Some(b.fixed(8)? as i64 as i128),
            (3, 1) => int = Some(f64::from_bits(b.fixed(8)?) as i128),
            (5, 5) => int = Some(f32::from_bits(b.fixed(4)? as u32) as i128),
            (28, 2) => bools = Some(bool_list(b.bytes()?)?),
            (29, 2) => text = Some(b.bytes()?),
            _ => b.skip(wire)?,
        }
    }
    let key = pack(name);
    if key == 0 {
        return Some(());
    }
    if let Some(k) = attr_index(key) {
        r.ints[k] = int;
        if int.is_none() && (text.is_some() || bools.is_some()) {
            r.not_int |= 1 << k;
        }
    } else if key == PG_NAME {
        r.pg_name = text
            .and_then(|t| std::str::from_utf8(t).ok())
            .map(Into::into);
    } else if key == INVOLVED_DIM {
        r.involved_dim = bools;
    }
    Some(())
}

/// A name of at most 16 bytes packed into one integer (0 for longer names), so that
/// recognising an attribute is one integer comparison instead of a `memcmp` call.
pub const fn pack(name: &[u8]) -> u128 {
    if name.len() > 16 {
        return 0;
    }
    let mut v = name.len() as u128;
    let mut i = 0;
    while i < name.len() {
        v |= (name[i] as u128) << (8 * i + 8);
        i += 1;
    }
    v
}

const PG_NAME: u128 = pack(b"pg_name");
const INVOLVED_DIM: u128 = pack(b"involved_dim");

/// Index of a packed attribute name in [`ATTRS`].
fn attr_index(name: u128) -> Option<usize> {
    const KEYS: [u128; 8] = [
        pack(b"comm_type"),
        pack(b"comm_size"),
        pack(b"num_ops"),
        pack(b"tensor_size"),
        pack(b"comm_src"),
        pack(b"comm_dst"),
        pack(b"comm_tag"),
        pack(b"is_cpu_op"),
    ];
    KEYS.iter().position(|&k| k == name)
}

fn bool_list(msg: &[u8]) -> Option<Vec<bool>> {
    let mut b = Buf { b: msg, at: 0 };
    let mut v = Vec::new();
    while b.at < msg.len() {
        let key = b.varint()?;
        match (key >> 3, key & 7) {
            (1, 0) => v.push(b.varint()? != 0),
            (1, 2) => {
                let mut p = Buf {
                    b: b.bytes()?,
                    at: 0,
                };
                while p.at < p.b.len() {
                    v.push(p.varint()? != 0);
                }
            }
            (_, w) => b.skip(w)?,
        }
    }
    Some(v)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::astra::chakra::{AttributeProto, GlobalMetadata, Node, TraceFile, encode};

    #[test]
    fn lean_decode_equals_prost_decode() {
        let t = TraceFile {
            metadata: GlobalMetadata {
                version: "0.0.4".into(),
                attr: vec![AttributeProto::string("schema", "x")],
            },
            nodes: vec![
                Node {
                    id: 5,
                    name: "ag".into(),
                    r#type: 7,
                    data_deps: vec![1, 300],
                    ctrl_deps: vec![2],
                    duration_micros: 9,
                    attr: vec![
                        AttributeProto::int64("comm_type", 2),
                        AttributeProto::uint64("comm_size", 1 << 40),
                        AttributeProto::string("pg_name", "9"),
                        AttributeProto::bools("involved_dim", vec![true, false]),
                        AttributeProto::boolean("is_cpu_op", false),
                    ],
                    ..Default::default()
                },
                Node {
                    id: 6,
                    r#type: 4,
                    attr: vec![AttributeProto::int64("num_ops", -3)],
                    ..Default::default()
                },
            ],
        };
        let lean = decode(&encode(&t), "t").unwrap();
        assert_eq!(lean, from_trace(&t));
        assert_eq!(lean.recs[0].ints[COMM_SIZE], Some(1 << 40));
        assert_eq!(lean.recs[1].ints[NUM_OPS], Some(-3));
        assert_eq!(lean.recs[0].ints[IS_CPU_OP], Some(0));
        assert!(decode(&encode(&t)[..20], "t").is_err());
        for (i, name) in ATTRS.iter().enumerate() {
            assert_eq!(attr_index(pack(name.as_bytes())), Some(i));
        }
        assert_eq!(attr_index(PG_NAME), None);
        assert_eq!(pack(b"a_name_longer_than_16"), 0);
    }
}
