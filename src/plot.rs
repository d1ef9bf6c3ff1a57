//! plot (being built).
