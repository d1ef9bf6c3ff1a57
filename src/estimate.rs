//! estimate (being built).
