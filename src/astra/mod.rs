//! ASTRA-sim compatibility (being built).
