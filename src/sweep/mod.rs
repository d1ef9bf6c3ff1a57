//! Sweeps: many configurations evaluated in parallel, filtered, ranked.
//!
//! [`rank`] holds the streaming top-k and Pareto set; [`driver`] evaluates a grid of
//! indices with rayon and merges deterministically; [`grid`] lays out the search space;
//! [`search`] runs it through the estimate ([`prune`]: a hardware × plan grid with shared
//! estimates and bound pruning); [`objective`] ranks; [`bandwidth`] splits a
//! per-NPU bandwidth budget across dimensions.

pub mod all;
pub mod bandwidth;
pub mod driver;
pub mod file;
pub mod grid;
pub mod hardware;
pub mod networks;
pub mod objective;
pub mod prune;
pub mod rank;
pub mod report;
pub mod search;
pub mod ties;
