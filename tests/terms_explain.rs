//! The symbolic forms `--explain` writes beside the numbers of a term, checked against
//! the bandwidth each building block gives one message (docs/collectives.md): on a Ring of
//! more than two NPUs a neighbour is one of two links, B/2; on a Ring of two both links
//! reach it, B; on a FullyConnected block one of p − 1 links, B/(p−1); through a switch
//! port, B. (Found by cargo-mutants: nothing read these strings.)

use crate::common;
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

/// The MFU line names the peak it divides by: the dense BF16 one (989 TFLOP/s on H100),
/// also for an FP8 plan, whose NVIDIA-convention MFU against the FP8 peak (1.979 PFLOP/s)
/// follows; the printed numbers reproduce both percentages by hand.
#[test]
fn mfu_line_divides_by_the_peak_it_names() {
    let args: Vec<&str> =
        "estimate --model llama3-8b --system dgx-h100 --gpus 8 --tp 8 --global-batch 8 --precision fp8 --explain"
            .split_whitespace()
            .collect();
    let out = text(&args);
    let line = out
        .lines()
        .find(|l| l.contains("MFU ="))
        .unwrap()
        .to_string();
    assert!(line.contains("989 TFLOP/s · 8)"), "{line}");
    assert!(line.contains("of the fp8 peak (1.979 PFLOP/s"), "{line}");
    // "… N) = F / (T · 989 TFLOP/s · 8) = M%; of the fp8 peak (…): M8%"
    let nums = line.split("N) = ").nth(1).unwrap();
    let flops: f64 = nums.split(' ').next().unwrap().parse().unwrap();
    let time = nums.split("/ (").nth(1).unwrap();
    let mut w = time.split(' ');
    let (t, unit) = (w.next().unwrap().parse::<f64>().unwrap(), w.next().unwrap());
    let t = if unit == "ms" { t * 1e-3 } else { t };
    let pct = |x: &str| x.trim().split('%').next().unwrap().parse::<f64>().unwrap();
    let mfu = pct(nums.split(") = ").nth(1).unwrap());
    let fp8 = pct(line.split("convention): ").nth(1).unwrap());
    let by_hand = flops / (t * 989e12 * 8.0) * 100.0;
    assert!(
        (mfu - by_hand).abs() < 0.06 + 1e-3 * by_hand,
        "{mfu} vs {by_hand}"
    );
    assert!((fp8 - by_hand / 2.0).abs() < 0.06 + 1e-3 * by_hand, "{fp8}");
}

/// The optimizer line writes its bytes per parameter with the layout's numbers: `6 + 2·o +
/// 3·g` is 30 + 3·2 = 36 B for `adam`, 6 + 2·8 + 3·4 = 34 B for `adam-bf16-moments`, 6 +
/// 2·6 + 3·2 = 24 B for `adam-bf16-state`; the JSON plan names the layout.
#[test]
fn optimizer_line_shows_its_bytes_per_parameter() {
    for (opt, form) in [
        ("adam", "6 + 2·12 + 3·2 = 36 B"),
        ("adam-bf16-moments", "6 + 2·8 + 3·4 = 34 B"),
        ("adam-bf16-state", "6 + 2·6 + 3·2 = 24 B"),
    ] {
        let base = common::llama8b_args(
            "estimate",
            &["--gpus", "8", "--tp", "2", "--optimizer", opt],
        );
        let out = text(&[&base[..], &["--explain"]].concat());
        let line = out.lines().find(|l| l.contains("optimizer:")).unwrap();
        assert!(line.contains(form), "{opt}: {line}");
        assert_eq!(common::json(&base)["plan"]["optimizer"], opt);
    }
}

/// The direct algorithm writes its hop count as a Ring block routes it (⌊p/2⌋ hops to the
/// farthest peer) and as one hop elsewhere: on a Ring of 4, all-reduce's latency is
/// 2⌊p/2⌋·α = 4 µs and all-to-all's ⌊p/2⌋·α = 2 µs; through a Switch of 4 they are 2·α and
/// 1·α. (Found by cargo-mutants: the Ring test of `direct.rs` was read by nothing.)
#[test]
fn direct_algorithm_explains_its_hops_per_block() {
    for (op, topology, form) in [
        (
            "all-reduce",
            "ring(4, 100GB/s, 1us)",
            "latency  = 2⌊p/2⌋·α = 4 × 1 us = 4 us",
        ),
        (
            "all-to-all",
            "ring(4, 100GB/s, 1us)",
            "latency  = ⌊p/2⌋·α = 2 × 1 us = 2 us",
        ),
        (
            "all-reduce",
            "switch(4, 100GB/s, 1us)",
            "latency  = 2·α = 2 × 1 us = 2 us",
        ),
        (
            "all-to-all",
            "switch(4, 100GB/s, 1us)",
            "latency  = 1·α = 1 × 1 us = 1 us",
        ),
    ] {
        let out = text(&[
            "collective",
            op,
            "--size",
            "1MiB",
            "--topology",
            topology,
            "--algorithm",
            "direct",
            "--explain",
        ]);
        assert!(out.contains(form), "{op} on {topology}:\n{out}");
    }
}

/// With the EP overlap the explain line writes the three phases with their numbers
/// (`windows::ep_pair`): the pair's parts, T₁, D, E, T₃ and the exposed remainder; without
/// it the all-to-alls are exposed and it says why. The first phase by hand from the
/// line's own numbers: the attention forward stretched by κ over the slowed combine,
/// `A_f' = A_f·(1 + κ·min((1 + σ)·a, A_f)/A_f)`, and `T₁ = max(A_f', a + σ/(1 + σ)·
/// min(A_f', (1 + σ)·a))`.
#[test]
fn ep_overlap_line_shows_its_phases() {
    let run = |overlap: &str| {
        let args: Vec<&str> = "estimate --model qwen3-30b-a3b --system dgx-h100 --gpus 16 --ep 16 --etp 1 --global-batch 64 --cuda-graphs full --explain --ep-overlap"
            .split(' ')
            .chain([overlap])
            .collect();
        let out = text(&args);
        out.lines()
            .find(|l| l.contains("EP all-to-all"))
            .unwrap()
            .to_string()
    };
    let on = run("true");
    for part in [
        "f(a, g) = a + σ/(1 + σ)·min(g, (1 + σ)·a)",
        "T₁ = max(A_f', f(a, A_f')) = ",
        "d₁ = f(a, M_d' + M_w') = ",
        "E = max(M_d' + M_w', d₁) + M_f' = ",
        "D = s₂ + f(a, E − s₂), s₂ = max(d₁, M_d'): ",
        "T₃ = max(D, E) + max(A_b', f(a, A_b')) = ",
        "exposed min(4a, T₁ + T₃ − G − slowdown) = ",
    ] {
        assert!(on.contains(part), "{part}: {on}");
    }
    let num = |key: &str| {
        let v = on.split(key).nth(1).unwrap();
        v.split([',', ' ', ')'])
            .next()
            .unwrap()
            .parse::<f64>()
            .unwrap()
    };
    let (sigma, kappa) = (num("σ = "), num("κ = "));
    assert_eq!((sigma, kappa), (0.31, 0.189));
    let a = common::micros(&on.replace(" each alone", ","), "a = ");
    let af = common::micros(&on, "A_f = ");
    let af_s = af * (1.0 + kappa * ((1.0 + sigma) * a).min(af) / af);
    let t1 = af_s.max(a + sigma / (1.0 + sigma) * af_s.min((1.0 + sigma) * a));
    let t1_part = on.split("T₁ = max(A_f', f(a, A_f')) = ").nth(1).unwrap();
    let got = common::micros(
        &format!("T1 = {}", t1_part.split(';').next().unwrap()),
        "T1 = ",
    );
    assert!(
        (got / t1 - 1.0).abs() < 1e-3,
        "T₁ {got} µs against {t1} by hand: {on}"
    );
    assert!(run("false").contains("exposed (no schedule overlaps it"));
}

/// The forward TP window's line says why its collectives are exposed or how they hide:
/// chunked with the GEMM (TP comm overlap with SP inside the NVLink domain), not
/// overlapped at all, overlap refused without SP (all-reduces), or refused because the TP
/// group leaves the NVLink domain (userbuffers need it). One reason per case; each
/// reason's exposed time is the whole collective time but for the chunked one.
#[test]
fn tp_window_line_names_why_it_is_exposed() {
    for (flags, reason) in [
        (
            "--model llama3-8b --gpus 8 --tp 2",
            "chunked with its GEMM, n = t = 2",
        ),
        (
            "--model llama3-8b --gpus 8 --tp 2 --tp-overlap false",
            "exposed (no TP comm overlap)",
        ),
        (
            "--model llama3-8b --gpus 8 --tp 2 --sequence-parallel false",
            "exposed: TP comm overlap needs sequence parallelism",
        ),
        (
            "--model gpt3-175b --gpus 16 --tp 16",
            "exposed: the TP group leaves the NVLink domain",
        ),
    ] {
        let mut a = vec![
            "estimate",
            "--system",
            "dgx-h100",
            "--global-batch",
            "8",
            "--explain",
        ];
        a.extend(flags.split_whitespace());
        let out = common::computed(&a);
        let line = out
            .lines()
            .find(|l| l.contains("TP window, forward"))
            .unwrap_or_else(|| panic!("{flags}: no TP window line in\n{out}"));
        assert!(line.contains(reason), "{flags}: {line}");
    }
}

/// Every GEMM line of the explain names a GEMM the layer has, and no number prints as NaN
/// or infinity: a dense GQA model, an MoE, an MLA model and a hybrid Mamba model (the
/// unused projection slots of a GQA layer stay out). The memory-bound lines of the Mamba
/// kernels and of the MoE permutation appear once, for the kind of layer that has them
/// (DeepSeek-V3's first three dense layers print none).
#[test]
fn explain_lists_only_real_gemms_and_finite_numbers() {
    for (model, mamba, permute) in [
        ("llama3-8b", 0, 0),
        ("qwen3-30b-a3b", 0, 1),
        ("deepseek-v3", 0, 1),
        ("nemotron-h-8b", 1, 0),
    ] {
        let out = common::computed(&[
            "estimate",
            "--model",
            model,
            "--system",
            "dgx-h100",
            "--gpus",
            "64",
            "--global-batch",
            "64",
            "--precision",
            "fp8",
            "--explain",
        ]);
        for line in out.lines() {
            assert!(!line.contains("GEMM :"), "{model}: {line}");
            assert!(
                !line.contains("N=0 ") && !line.contains("K=0 "),
                "{model}: {line}"
            );
            assert!(
                !line.contains("NaN") && !line.contains("inf "),
                "{model}: {line}"
            );
        }
        let count = |needle: &str| out.lines().filter(|l| l.contains(needle)).count();
        assert_eq!(count("Mamba memory-bound"), mamba, "{model}");
        assert_eq!(count("MoE permute + unpermute"), permute, "{model}");
    }
}

/// The EP overlap's lone passes: the line gives `W` by its rule (no pipeline: 1; PP 2 ×
/// VP 2 with 16 micro-batches: min(32, 2·1 + 1·2 + 1) = 5) and the sum
/// `(W/v)·((H_f − S_f) + (H_b − S_b))` from its own printed numbers, and the iteration line
/// adds it.
#[test]
fn ep_lone_line_shows_its_passes_and_sum() {
    let line = |extra: &str| {
        let base = "estimate --model qwen3-30b-a3b --system dgx-b200 --seq-len 4096 --ep 8 --etp 1 --cuda-graphs full --ep-overlap --explain";
        let args: Vec<&str> = base.split(' ').chain(extra.split(' ')).collect();
        let out = text(&args);
        let lone = out
            .lines()
            .find(|l| l.contains("EP overlap's lone passes"))
            .unwrap_or_else(|| panic!("no lone-pass line in\n{out}"))
            .to_string();
        let iteration = out
            .lines()
            .find(|l| l.contains("iteration = m·T_stage"))
            .unwrap()
            .to_string();
        (lone, iteration)
    };
    let check = |lone: &str, w: f64, v: f64| {
        let terms = lone.split("·((").nth(1).unwrap();
        let terms = terms.split(")) = ").next().unwrap();
        let t: Vec<f64> = terms
            .split([' ', '(', ')'])
            .filter(|s| !s.is_empty() && *s != "−" && *s != "+")
            .collect::<Vec<_>>()
            .chunks(2)
            .map(|p| common::micros(&format!("x = {} {}", p[0], p[1]), "x = "))
            .collect();
        assert_eq!(t.len(), 4, "{lone}");
        let want = w / v * ((t[0] - t[1]) + (t[2] - t[3]));
        let got = common::micros(
            &format!("x = {}", lone.split(")) = ").nth(1).unwrap()),
            "x = ",
        );
        assert!(
            (got / want - 1.0).abs() < 2e-3,
            "{got} µs by hand {want}: {lone}"
        );
        got
    };
    let (lone, iteration) = line("--gpus 8 --global-batch 32");
    assert!(lone.contains("W = 1 forward and backward"), "{lone}");
    assert!(lone.contains("no pipeline: the first forward and the last backward"));
    let sum = check(&lone, 1.0, 1.0);
    assert!(
        iteration.contains("+ EP overlap's lone passes"),
        "{iteration}"
    );
    // "… = m·T + … + Δ = T": the last term before the total is the lone passes' sum.
    let terms = iteration.rsplit(" = ").nth(1).unwrap();
    let last = terms.rsplit(" + ").next().unwrap();
    let printed = common::micros(&format!("x = {last}"), "x = ");
    assert!(
        (printed / sum - 1.0).abs() < 1e-3,
        "{printed} vs {sum}: {iteration}"
    );
    assert!(sum > 0.0);
    let (lone, _) = line("--gpus 16 --pp 2 --virtual-stages 2 --global-batch 128");
    assert!(
        lone.contains("min(m·v, 2·(p − 1) + (v − 1)·p + 1) = min(32, 5)"),
        "{lone}"
    );
    assert!(lone.contains("W = 5 forward"), "{lone}");
    check(&lone, 5.0, 2.0);
}
