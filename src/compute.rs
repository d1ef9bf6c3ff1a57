//! compute (being built).
