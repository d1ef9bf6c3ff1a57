//! Sweeps: many configurations evaluated in parallel, filtered, ranked.
//!
//! [`rank`] holds the streaming top-k and Pareto set; [`driver`] evaluates a grid of
//! indices with rayon and merges deterministically.

pub mod driver;
pub mod rank;
