//! The symbolic forms `--explain` writes beside the numbers of a term, checked against
//! the bandwidth each building block gives one message (docs/collectives.md): on a Ring of
//! more than two NPUs a neighbour is one of two links, B/2; on a Ring of two both links
//! reach it, B; on a FullyConnected block one of p − 1 links, B/(p−1); through a switch
//! port, B. (Found by cargo-mutants: nothing read these strings.)

mod common;
use common::text;

#[test]
fn send_recv_explains_the_neighbour_bandwidth_of_each_block() {
    for (topology, form, rate) in [
        ("ring(4, 100GB/s, 1us)", "n / B/2 =", "/ 50 GB/s"),
        ("ring(2, 100GB/s, 1us)", "n / B =", "/ 100 GB/s"),
        ("fc(4, 90GB/s, 1us)", "n / B/(p−1) =", "/ 30 GB/s"),
        ("switch(4, 100GB/s, 1us)", "n / B =", "/ 100 GB/s"),
    ] {
        let out = text(&[
            "collective",
            "send-recv",
            "--size",
            "1MiB",
            "--topology",
            topology,
            "--algorithm",
            "ring",
            "--explain",
        ]);
        let line = out
            .lines()
            .find(|l| l.contains("transfer ="))
            .unwrap_or_else(|| panic!("{topology}: no transfer line in\n{out}"));
        assert!(
            line.contains(form) && line.contains(rate),
            "{topology}: {line}"
        );
    }
}
