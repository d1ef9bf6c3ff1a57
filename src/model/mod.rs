//! Workload models (being built).
