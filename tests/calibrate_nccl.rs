//! `calibrate nccl`: synthetic logs made from known α and B with ±3% noise are fitted back
//! within 2%; the real published logs in tests/data/nccl-tests parse and fit, and the
//! written system is accepted by `collective --system`.

use assert_cmd::Command;
use astrolabe::calibrate::{nccl, nccl_log};
use astrolabe::collective::Collective;

/// Uniform noise in [−1, 1] from a fixed linear congruential sequence (Knuth's MMIX
/// constants), so the test is deterministic.
struct Noise(u64);
impl Noise {
    fn next(&mut self) -> f64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0
    }
}

/// An nccl-tests all_reduce_perf log of `ranks` ranks on `nodes` hosts with the given
/// times (µs) per size.
fn log(ranks: u32, nodes: u32, rows: &[(u64, f64)]) -> String {
    let mut s = String::from("# Collective test starting: all_reduce_perf\n");
    for r in 0..ranks {
        s += &format!(
            "#  Rank {r:2} Group  0 Pid  1 on host{} device  0 [0x0f] GPU\n",
            r / (ranks / nodes)
        );
    }
    for &(n, us) in rows {
        s += &format!(
            "{n:>12} {:>12}  float  sum  -1  {us:.2}  0.00  0.00  0  {us:.2}  0.00  0.00  0\n",
            n / 4
        );
    }
    s
}

#[test]
fn synthetic_logs_with_three_percent_noise_are_recovered_within_two_percent() {
    // Truth: NVSwitch α₀ = 3 µs, B₀ = 300 GB/s; network α₁ = 12 µs, B₁ = 40 GB/s.
    let (a0, b0, a1, b1) = (3e-6, 300e9, 12e-6, 40e9);
    let sizes: Vec<u64> = (3..34).map(|e| 1u64 << e).collect(); // 8 B .. 8 GiB
    let mut noise = Noise(12);
    let amp = 0.03;
    // One node of 8, ring all-reduce: T = 2(p−1)α₀ + 2(p−1)/p·n/B₀ = 14α₀ + 1.75n/B₀.
    let one: Vec<(u64, f64)> = sizes
        .iter()
        .map(|&n| {
            (
                n,
                (14.0 * a0 + 1.75 * n as f64 / b0) * (1.0 + amp * noise.next()) * 1e6,
            )
        })
        .collect();
    // 4 nodes × 8, one ring over P = 32 ranks (NCCL): 2·28 = 56 steps inside nodes,
    // 2·(4 − 1) = 6 across; the NICs carry (4/32)·2·31/32·n each: T = 56α₀ + 6α₁ +
    // (1/8)(62/32)n/B₁ (the NVLink ports carry (28/32)(62/32)n/B₀, less).
    let four: Vec<(u64, f64)> = sizes
        .iter()
        .map(|&n| {
            let t = 56.0 * a0 + 6.0 * a1 + 0.125 * (62.0 / 32.0) * n as f64 / b1;
            (n, t * (1.0 + amp * noise.next()) * 1e6)
        })
        .collect();
    let h = nccl_log::Hints::default();
    let logs = vec![
        nccl_log::parse(&log(8, 1, &one), "one", None, h).unwrap(),
        nccl_log::parse(&log(32, 4, &four), "four", None, h).unwrap(),
    ];
    assert_eq!(logs[1].op, Collective::AllReduce);
    let f = nccl::fit(&logs, &nccl::default_start(8, 4).unwrap()).unwrap();
    let close = |got: f64, want: f64, what: &str| {
        assert!(
            (got / want - 1.0).abs() < 0.02,
            "{what}: fitted {got:e}, truth {want:e}"
        );
    };
    close(f.dims[0].latency.get(), a0, "α₀");
    close(f.dims[0].bandwidth.get(), b0, "B₀");
    close(f.dims[1].latency.get(), a1, "α₁");
    close(f.dims[1].bandwidth.get(), b1, "B₁");
    assert!(f.logs.iter().all(|l| l.r2 > 0.99));
}

fn cli() -> Command {
    Command::cargo_bin("astrolabe").unwrap()
}

#[test]
fn real_published_logs_parse_fit_and_write_a_usable_system() {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("astrolabe-cal-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let out = dir.join("fitted.toml");
    let a = cli()
        .args([
            "calibrate",
            "nccl",
            "tests/data/nccl-tests/h100-2nodes-all_reduce_perf.log",
        ])
        .args(["--system", "dgx-h100", "--write"])
        .arg(&out)
        .assert()
        .success();
    let text = String::from_utf8(a.get_output().stdout.clone()).unwrap();
    for want in ["fitted network", "R²", "worst sizes", "residuals", "8 GiB"] {
        assert!(text.contains(want), "missing {want}:\n{text}");
    }
    cli()
        .args(["collective", "all-reduce", "--size", "1GiB", "--system"])
        .arg(&out)
        .assert()
        .success();
    let b = cli()
        .args([
            "calibrate",
            "nccl",
            "tests/data/nccl-tests/a100-1node-sendrecv_perf.log",
            "--ranks",
            "8",
            "--format",
            "json",
        ])
        .assert()
        .success();
    let j: serde_json::Value = serde_json::from_slice(&b.get_output().stdout).unwrap();
    assert!(j.to_string().contains("r2"), "{j}");
    // No rank lines and no --ranks: a clear error naming the flag, exit 2.
    cli()
        .args([
            "calibrate",
            "nccl",
            "tests/data/nccl-tests/a100-1node-sendrecv_perf.log",
        ])
        .assert()
        .code(2)
        .stderr(predicates::str::contains("--ranks"));
}
