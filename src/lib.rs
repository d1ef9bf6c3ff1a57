//! Astrolabe: a closed-form cost model for distributed deep-learning training.
//!
//! Data flows one way: inputs are parsed and validated into a scenario (model, system,
//! plan); [`compute`], [`collective`], [`parallel`] and [`memory`] cost its parts;
//! [`estimate`] composes them; [`sweep`] evaluates many in parallel; [`report`] renders.
//! The library never prints and never exits: it returns [`Result`] with an [`Error`] that
//! names the file, key or flag and what was expected.

#![forbid(unsafe_code)]

pub mod astra;
pub mod calibrate;
pub mod catalog;
pub mod cli;
pub mod collective;
pub mod compare;
pub mod compute;
pub mod error;
pub mod estimate;
pub mod limits;
pub mod memory;
pub mod model;
pub mod network;
pub mod parallel;
pub mod plot;
pub mod report;
pub mod sensitivity;
pub mod sweep;
pub mod system;
pub mod units;

pub use error::{Error, Result};
