//! memory (being built).
