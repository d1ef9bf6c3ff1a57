//! parallel (being built).
