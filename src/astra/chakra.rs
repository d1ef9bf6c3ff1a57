//! Chakra execution traces (`<prefix>.<rank>.et`): the protobuf messages of Chakra's
//! published schema `schema/protobuf/et_def.proto` (package `ChakraProtoMsg`), derived by
//! hand with prost (same field numbers and wire types, so no protoc at build time), and the
//! file framing: a varint length before every message, `GlobalMetadata` first, then one
//! `Node` per message until the end of the file.
//!
//! Only the fields Astrolabe uses are declared; protobuf skips unknown fields, so traces
//! with extra fields (inputs/outputs, storage info) still decode.

use crate::error::{Error, Result};
use prost::Message;
use std::path::Path;

/// `GlobalMetadata { string version = 1; repeated AttributeProto attr = 2; }`.
#[derive(Clone, PartialEq, Message)]
pub struct GlobalMetadata {
    /// Schema version string (e.g. "0.0.4").
    #[prost(string, tag = "1")]
    pub version: String,
    /// Free attributes.
    #[prost(message, repeated, tag = "2")]
    pub attr: Vec<AttributeProto>,
}

/// `Node`: one operation of the per-NPU graph (fields 1–7 and 10 of et_def.proto).
#[derive(Clone, PartialEq, Message)]
pub struct Node {
    /// Unique id within the file.
    #[prost(uint64, tag = "1")]
    pub id: u64,
    /// Name (free text).
    #[prost(string, tag = "2")]
    pub name: String,
    /// `NodeType` enum value.
    #[prost(int32, tag = "3")]
    pub r#type: i32,
    /// Control dependencies (ids of nodes that must finish first).
    #[prost(uint64, repeated, tag = "4")]
    pub ctrl_deps: Vec<u64>,
    /// Data dependencies (ids of nodes that must finish first).
    #[prost(uint64, repeated, tag = "5")]
    pub data_deps: Vec<u64>,
    /// Recorded start time, µs.
    #[prost(uint64, tag = "6")]
    pub start_time_micros: u64,
    /// Recorded duration, µs.
    #[prost(uint64, tag = "7")]
    pub duration_micros: u64,
    /// Attributes (`comm_type`, `comm_size`, `num_ops`, `tensor_size`, ...).
    #[prost(message, repeated, tag = "10")]
    pub attr: Vec<AttributeProto>,
}

/// `AttributeProto { string name = 1; string doc_string = 2; oneof value {...} }`.
#[derive(Clone, PartialEq, Message)]
pub struct AttributeProto {
    /// Attribute name.
    #[prost(string, tag = "1")]
    pub name: String,
    /// Documentation string.
    #[prost(string, tag = "2")]
    pub doc_string: String,
    /// The value (the scalar variants and the bool list of et_def.proto).
    #[prost(
        oneof = "AttrValue",
        tags = "3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 28, 29"
    )]
    pub value: Option<AttrValue>,
}

/// `BoolList { repeated bool values = 1; }`.
#[derive(Clone, PartialEq, Message)]
pub struct BoolList {
    /// The values.
    #[prost(bool, repeated, tag = "1")]
    pub values: Vec<bool>,
}

/// The `oneof value` of `AttributeProto` (scalar variants and `bool_list`).
#[derive(Clone, PartialEq, prost::Oneof)]
pub enum AttrValue {
    /// double_val = 3
    #[prost(double, tag = "3")]
    Double(f64),
    /// float_val = 5
    #[prost(float, tag = "5")]
    Float(f32),
    /// int32_val = 7
    #[prost(int32, tag = "7")]
    Int32(i32),
    /// int64_val = 9
    #[prost(int64, tag = "9")]
    Int64(i64),
    /// uint32_val = 11
    #[prost(uint32, tag = "11")]
    Uint32(u32),
    /// uint64_val = 13
    #[prost(uint64, tag = "13")]
    Uint64(u64),
    /// sint32_val = 15
    #[prost(sint32, tag = "15")]
    Sint32(i32),
    /// sint64_val = 17
    #[prost(sint64, tag = "17")]
    Sint64(i64),
    /// fixed32_val = 19
    #[prost(fixed32, tag = "19")]
    Fixed32(u32),
    /// fixed64_val = 21
    #[prost(fixed64, tag = "21")]
    Fixed64(u64),
    /// sfixed32_val = 23
    #[prost(sfixed32, tag = "23")]
    Sfixed32(i32),
    /// sfixed64_val = 25
    #[prost(sfixed64, tag = "25")]
    Sfixed64(i64),
    /// bool_val = 27
    #[prost(bool, tag = "27")]
    Bool(bool),
    /// bool_list = 28
    #[prost(message, tag = "28")]
    BoolList(BoolList),
    /// string_val = 29
    #[prost(string, tag = "29")]
    Str(String),
}

/// `NodeType` values of et_def.proto.
pub mod node_type {
    /// MEM_LOAD_NODE
    pub const MEM_LOAD: i32 = 2;
    /// MEM_STORE_NODE
    pub const MEM_STORE: i32 = 3;
    /// COMP_NODE
    pub const COMP: i32 = 4;
    /// COMM_SEND_NODE
    pub const COMM_SEND: i32 = 5;
    /// COMM_RECV_NODE
    pub const COMM_RECV: i32 = 6;
    /// COMM_COLL_NODE
    pub const COMM_COLL: i32 = 7;
}

/// `CollectiveCommType` values of et_def.proto.
pub mod comm_type {
    /// ALL_REDUCE
    pub const ALL_REDUCE: i64 = 0;
    /// ALL_GATHER
    pub const ALL_GATHER: i64 = 2;
    /// ALL_TO_ALL
    pub const ALL_TO_ALL: i64 = 6;
    /// REDUCE_SCATTER
    pub const REDUCE_SCATTER: i64 = 7;
}

impl AttributeProto {
    /// An `int64_val` attribute.
    pub fn int64(name: &str, v: i64) -> Self {
        Self::with(name, AttrValue::Int64(v))
    }
    /// A `uint64_val` attribute.
    pub fn uint64(name: &str, v: u64) -> Self {
        Self::with(name, AttrValue::Uint64(v))
    }
    /// A `bool_val` attribute.
    pub fn boolean(name: &str, v: bool) -> Self {
        Self::with(name, AttrValue::Bool(v))
    }
    /// A `bool_list` attribute.
    pub fn bools(name: &str, v: Vec<bool>) -> Self {
        Self::with(name, AttrValue::BoolList(BoolList { values: v }))
    }
    /// An `int32_val` attribute.
    pub fn int32(name: &str, v: i32) -> Self {
        Self::with(name, AttrValue::Int32(v))
    }
    /// A `string_val` attribute.
    pub fn string(name: &str, v: &str) -> Self {
        Self::with(name, AttrValue::Str(v.to_string()))
    }
    fn with(name: &str, v: AttrValue) -> Self {
        AttributeProto {
            name: name.to_string(),
            doc_string: String::new(),
            value: Some(v),
        }
    }
    /// The value as an integer, whichever integer (or bool) variant holds it.
    pub fn as_i128(&self) -> Option<i128> {
        Some(match self.value.as_ref()? {
            AttrValue::Int32(v) | AttrValue::Sint32(v) | AttrValue::Sfixed32(v) => *v as i128,
            AttrValue::Int64(v) | AttrValue::Sint64(v) | AttrValue::Sfixed64(v) => *v as i128,
            AttrValue::Uint32(v) | AttrValue::Fixed32(v) => *v as i128,
            AttrValue::Uint64(v) | AttrValue::Fixed64(v) => *v as i128,
            AttrValue::Bool(b) => *b as i128,
            AttrValue::Double(d) => *d as i128,
            AttrValue::Float(f) => *f as i128,
            AttrValue::BoolList(_) | AttrValue::Str(_) => return None,
        })
    }
}

impl Node {
    /// The attribute called `name`, if present.
    pub fn attr(&self, name: &str) -> Option<&AttributeProto> {
        self.attr.iter().find(|a| a.name == name)
    }
    /// An integer attribute as u64 (negative values are an error).
    pub fn attr_u64(&self, name: &str) -> Result<Option<u64>> {
        match self.attr(name) {
            None => Ok(None),
            Some(a) => match a.as_i128() {
                Some(v) if v >= 0 && v <= u64::MAX as i128 => Ok(Some(v as u64)),
                _ => Err(Error::input(
                    format!("node {} ('{}') attribute '{name}'", self.id, self.name),
                    "expected a non-negative integer",
                )),
            },
        }
    }
}

/// One decoded trace file.
#[derive(Clone, Debug, PartialEq)]
pub struct TraceFile {
    /// The leading metadata message.
    pub metadata: GlobalMetadata,
    /// The nodes in file order.
    pub nodes: Vec<Node>,
}

/// Decodes a trace from bytes: varint-length-delimited `GlobalMetadata`, then `Node`s.
pub fn decode(bytes: &[u8], what: &str) -> Result<TraceFile> {
    let mut buf = bytes;
    let bad = |e: prost::DecodeError, at: usize| {
        Error::input(what, format!("not a Chakra trace (at byte {at}): {e}"))
    };
    if bytes.is_empty() {
        return Err(Error::input(
            what,
            "is empty (0 bytes); a Chakra trace starts with its metadata",
        ));
    }
    let metadata = GlobalMetadata::decode_length_delimited(&mut buf).map_err(|e| bad(e, 0))?;
    let mut nodes = Vec::new();
    while !buf.is_empty() {
        let at = bytes.len() - buf.len();
        if buf[0] == 0 {
            return Err(super::lean::empty_node(what, at));
        }
        nodes.push(Node::decode_length_delimited(&mut buf).map_err(|e| bad(e, at))?);
    }
    Ok(TraceFile { metadata, nodes })
}

/// Encodes a trace with the same framing as Chakra's writer (`encodeMessage` in
/// `et_feeder/protoio`): varint length + message, metadata first.
pub fn encode(trace: &TraceFile) -> Vec<u8> {
    let mut out = Vec::new();
    // Writing into a Vec cannot run out of capacity, so these cannot fail.
    let _ = trace.metadata.encode_length_delimited(&mut out);
    for n in &trace.nodes {
        let _ = n.encode_length_delimited(&mut out);
    }
    out
}

/// Reads and decodes one `.et` file.
pub fn read_file(path: &Path) -> Result<TraceFile> {
    let bytes = crate::limits::read_bytes(path)?;
    decode(&bytes, &path.display().to_string())
}

/// Writes one `.et` file.
pub fn write_file(path: &Path, trace: &TraceFile) -> Result<()> {
    std::fs::write(path, encode(trace)).map_err(|source| Error::Io {
        path: path.to_path_buf(),
        source,
    })
}

/// The file of NPU `rank` for a workload prefix: `<prefix>.<rank>.et`.
pub fn rank_path(prefix: &Path, rank: usize) -> std::path::PathBuf {
    let mut s = prefix.as_os_str().to_os_string();
    s.push(format!(".{rank}.et"));
    s.into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn framing_round_trips() {
        let t = TraceFile {
            metadata: GlobalMetadata {
                version: "0.0.4".into(),
                attr: vec![],
            },
            nodes: vec![Node {
                id: 3,
                name: "ar".into(),
                r#type: node_type::COMM_COLL,
                data_deps: vec![1, 2],
                attr: vec![
                    AttributeProto::int64("comm_type", comm_type::ALL_REDUCE),
                    AttributeProto::uint64("comm_size", 1 << 20),
                ],
                ..Default::default()
            }],
        };
        let bytes = encode(&t);
        // First byte: varint length of the metadata (2-byte tag+len + 5 bytes "0.0.4" = 7).
        assert_eq!(&bytes[..3], &[7, 0x0a, 5]);
        assert_eq!(decode(&bytes, "t").unwrap(), t);
        assert!(decode(&bytes[..bytes.len() - 1], "t").is_err());
    }
}
