//! The parameter-server pattern on one dimension (Li et al., "Scaling distributed machine
//! learning with the parameter server", OSDI 2014): the p workers push to a dedicated
//! server and pull back from it, and everything funnels through the server's port; the
//! incast at the server is what distinguishes it from ring all-reduce.
//!
//! The server is one more endpoint on the dimension with an NPU's injection bandwidth B
//! (its one switch port; its p links on a FullyConnected block; its two ring links,
//! sitting in the ring, on a Ring block). Push and pull are sequential (synchronous PS):
//! T = 2h·α + (in + out)/B_ps, h = hops from the farthest worker (1, or ⌊(p+1)/2⌋ on a
//! ring), B_ps = B·min(1, p/k) (an oversubscribed switch still offers p·B/k ≥ B to the
//! server for k ≤ p). Bytes in and out of the server, per byte of n:
//!
//! | collective | in | out | T |
//! |---|---|---|---|
//! | all-reduce | p (every gradient) | p (the sum to everyone) | 2hα + 2p·n/B |
//! | reduce-scatter | p | 1 (n/p to each) | 2hα + (p+1)·n/B |
//! | all-gather | 1 (n/p from each) | p | 2hα + (p+1)·n/B |
//! | broadcast | 1 (from the root) | p−1 | 2hα + p·n/B |
//! | reduce | p | 1 (to the root) | 2hα + (p+1)·n/B |
//! | gather, scatter | 1 | 1 | 2hα + 2·n/B |
//!
//! All-to-all and send/recv are not parameter-server patterns: [`Error::Unsupported`].

use super::Collective;
use super::cost::{self, Cost};
use crate::error::{Error, Result};
use crate::network::{Dim, DimKind};

/// Whether the parameter server implements `op` (everything but all-to-all and send/recv).
pub fn applies(op: Collective, _dim: &Dim) -> bool {
    !matches!(op, Collective::AllToAll | Collective::SendRecv)
}

/// The parameter-server cost of `op` on `dim` (see the module table).
pub fn cost(op: Collective, dim: &Dim) -> Result<Cost> {
    if !applies(op, dim) {
        return Err(Error::Unsupported(format!(
            "parameter-server does not implement {} (use ring or direct)",
            op.name()
        )));
    }
    if dim.size <= 1 {
        return Ok(Cost::ZERO);
    }
    let p = cost::p(dim);
    let (h, steps_expr) = match dim.kind {
        DimKind::Ring => (dim.size.div_ceil(2) as f64, "2⌊(p+1)/2⌋"),
        _ => (1.0, "2"),
    };
    let (factor, factor_expr) = match op {
        Collective::AllReduce => (2.0 * p, "2p"),
        Collective::ReduceScatter | Collective::AllGather | Collective::Reduce => (p + 1.0, "p+1"),
        Collective::Broadcast => (p, "p"),
        _ => (2.0, "2"),
    };
    let k = if dim.kind == DimKind::Switch {
        dim.oversubscription
    } else {
        1.0
    };
    Ok(Cost {
        steps: 2.0 * h,
        factor,
        bandwidth: dim.bandwidth * (p / k).min(1.0),
        steps_expr,
        factor_expr,
        bandwidth_expr: if k > p { "B·p/k" } else { "B" },
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::units::{Bandwidth, Bytes, Seconds};
    use approx::assert_relative_eq;

    #[test]
    fn incast_at_the_server() {
        // 4 workers push 1 GB each and pull 1 GB each through a 10 GB/s server port.
        let d = Dim::new(DimKind::Switch, 4, Bandwidth::new(10e9), Seconds::new(1e-6)).unwrap();
        let t = cost(Collective::AllReduce, &d)
            .unwrap()
            .time(&d, Bytes::new(1e9));
        assert_relative_eq!(t.get(), 2e-6 + 8e9 / 10e9, max_relative = 1e-12);
    }

    /// An oversubscribed switch (k = 8 > p = 4) gives the server port B·p/k: the same push
    /// and pull of 1 GB per worker takes 2α + 8·10⁹/(10⁹·10·4/8) = 2 µs + 1.6 s; a Ring
    /// block of the same figures ignores the factor (it has no oversubscription) and keeps
    /// the whole port but walks ⌈p/2⌉ = 2 hops each way.
    #[test]
    fn oversubscribed_switch_narrows_the_server_port() {
        let mut d = Dim::new(DimKind::Switch, 4, Bandwidth::new(10e9), Seconds::new(1e-6)).unwrap();
        d.oversubscription = 8.0;
        let c = cost(Collective::AllReduce, &d).unwrap();
        assert_eq!(c.bandwidth_expr, "B·p/k");
        assert_relative_eq!(
            c.time(&d, Bytes::new(1e9)).get(),
            2e-6 + 1.6,
            max_relative = 1e-12
        );
        let mut r = Dim::new(DimKind::Ring, 4, Bandwidth::new(10e9), Seconds::new(1e-6)).unwrap();
        r.oversubscription = 8.0;
        let c = cost(Collective::AllReduce, &r).unwrap();
        assert_eq!(c.bandwidth_expr, "B");
        assert_relative_eq!(
            c.time(&r, Bytes::new(1e9)).get(),
            4e-6 + 0.8,
            max_relative = 1e-12
        );
    }
}
