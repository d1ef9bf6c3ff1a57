//! Calibration: fits the model's parameters to measurements of the user's cluster, by
//! weighted linear least squares with nalgebra ([`fit`]), and writes them back as the TOML
//! files the other commands read.
//!
//! - [`nccl`]: network latency α and bandwidth B per dimension from nccl-tests logs
//!   ([`nccl_log`] reads them);
//! - [`gemm`]: a device's shape-aware GEMM efficiency from measured GEMM times;
//! - [`step`]: a handful of global efficiency factors from measured iteration times.

pub mod fit;
pub mod gemm;
pub mod nccl;
pub mod nccl_log;
pub mod regimes;
pub mod step;
