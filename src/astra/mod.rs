//! ASTRA-sim compatibility: readers for its network YAML ([`network_yaml`]), system and
//! remote-memory JSON ([`system_json`]) and Chakra execution traces ([`chakra`]); an
//! ASTRA-sim-faithful model of its congestion-unaware analytical backend ([`model`],
//! [`phases`], [`schedule`]); the critical path of whole traces ([`trace`]); our physical
//! model on the same inputs ([`physical`]); and writers for all of them ([`export`]).

pub mod chakra;
pub mod critical;
pub mod export;
pub mod iteration;
pub mod lean;
pub mod model;
pub mod network_yaml;
pub mod phases;
pub mod physical;
pub mod schedule;
pub mod system_json;
pub mod trace;
