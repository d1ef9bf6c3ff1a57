//! sweep (being built).
