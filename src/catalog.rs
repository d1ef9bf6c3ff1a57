//! catalog (being built).
