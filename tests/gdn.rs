//! Gated DeltaNet layers (`[transformer] hybrid_pattern` `G`, `[transformer.gdn]`;
//! `model::gdn`): each cost term checked against arithmetic done by hand from its formula
//! (docs/modern-training.md, "Gated DeltaNet layers"), on Qwen3-Next-80B-A3B: 96 blocks (36
//! Gated DeltaNet, 12 attention, 48 MoE), h 2048, 16 key and 32 value heads of 128. Every
//! tolerance is far below 5 %: a term that moves by 5 % fails its test.

use crate::common;
use approx::assert_relative_eq;
use astrolabe::catalog;
use astrolabe::model::Transformer;
use common::{bin, micros};
use serde_json::Value;

fn transformer(name: &str) -> Transformer {
    let m = catalog::model(name).unwrap_or_else(|e| panic!("{name}: {e}"));
    *m.transformer().expect("a transformer")
}

fn words(line: &str) -> Vec<&str> {
    line.split_whitespace().collect()
}

/// Qwen3-Next on 16 H100 with TP 2 and CP 2 (one 4096-token sequence per micro-batch:
/// 2048 tokens per rank), EP 8, BF16; the plan does not fit (exit 3), its time is still
/// computed.
const CP2: &str = "estimate --model qwen3-next-80b-a3b --system dgx-h100 --gpus 16 --tp 2 --cp 2 \
    --ep 8 --etp 1 --sequence-parallel --seq-len 4096 --micro-batch 1 --global-batch 4 \
    --precision bf16 --flash-attention --explain";

fn cp2() -> (Value, String) {
    let v = common::computed_json(&words(CP2));
    let text = v["explain"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|l| l.as_str())
                .collect::<Vec<_>>()
                .join("\n")
        })
        .unwrap_or_default();
    (v, text)
}

/// `model` on 4 GPUs of `system` (TP 1, EP 4, one 4096-token micro-batch per rank), with
/// `extra` flags; the plan need not fit (its time and memory are still computed).
fn small(model: &str, system: &str, extra: &[&str]) -> Value {
    let mut a = small_args(model, system);
    a.extend_from_slice(extra);
    common::computed_json(&a)
}

/// The command of [`small`] without its extra flags.
fn small_args<'a>(model: &'a str, system: &'a str) -> Vec<&'a str> {
    vec![
        "estimate",
        "--model",
        model,
        "--system",
        system,
        "--gpus",
        "4",
        "--ep",
        "4",
        "--etp",
        "1",
        "--seq-len",
        "4096",
        "--micro-batch",
        "1",
        "--global-batch",
        "4",
    ]
}

/// Qwen3-Next's model file with `from` replaced by `to`, written to a directory of its own
/// (returned, to be removed) as `name`.
fn variant(name: &str, from: &str, to: &str) -> (std::path::PathBuf, std::path::PathBuf) {
    let root = env!("CARGO_MANIFEST_DIR");
    let text = std::fs::read_to_string(format!("{root}/models/qwen3-next-80b-a3b.toml")).unwrap();
    assert!(text.contains(from), "{from}");
    let dir = std::env::temp_dir().join(format!("astrolabe-gdn-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join(format!("{name}.toml"));
    std::fs::write(&file, text.replace(from, to)).unwrap();
    (dir, file)
}

fn line<'a>(text: &'a str, needle: &str) -> &'a str {
    text.lines()
        .find(|l| l.contains(needle))
        .unwrap_or_else(|| panic!("explain shows '{needle}'"))
}

#[derive(serde::Deserialize)]
struct KernelRow {
    gpu: String,
    pass: String,
    tokens: f64,
    value_heads: f64,
    fla_ms: f64,
}

/// `[α, β]` minimising `Σ ((n·α + n·H·β)/T − 1)²` over the rows (relative least squares,
/// by nalgebra's SVD), and the rows' relative errors.
fn fit(rows: &[&KernelRow]) -> ([f64; 2], Vec<f64>) {
    let n = rows.len();
    let mut a = nalgebra::DMatrix::<f64>::zeros(n, 2);
    for (i, r) in rows.iter().enumerate() {
        let t = r.fla_ms * 1e-3;
        a[(i, 0)] = r.tokens / t;
        a[(i, 1)] = r.tokens * r.value_heads / t;
    }
    let b = nalgebra::DVector::<f64>::from_element(n, 1.0);
    let x = a.svd(true, true).solve(&b, 1e-18).expect("a solution");
    let errs = rows
        .iter()
        .map(|r| r.tokens * (x[0] + x[1] * r.value_heads) / (r.fla_ms * 1e-3) - 1.0)
        .collect();
    ([x[0], x[1]], errs)
}

/// The devices' `gdn_fwd` and `gdn_bwd` are the relative least-squares fits of `T = n·(α +
/// β·H)` to QwenLM FlashQLA's benchmark of flash-linear-attention's `chunk_gated_delta_rule`
/// (`benchmark/benchmark_results_{H200,GB200}.txt` at c18a486, copied with their line
/// numbers into `tests/data/gdn-kernels.csv`: 18 forward timings per GPU at 8192 and 32 768
/// tokens of one sequence with 8–64 value heads, 8 backward with 4–32), rounded to three
/// figures: H200 forward [17.8 ns, 1.29 ns], backward [57.1, 3.65]; GB200 [24.4, 1.03],
/// [69.6, 3.75]. The fit holds every row within 10.1 % and the median within 2.5 %.
#[test]
fn kernel_fit_matches_the_presets() {
    let rows: Vec<KernelRow> = common::csv_rows("tests/data/gdn-kernels.csv");
    assert_eq!(rows.len(), 52);
    for (gpu, device) in [("H200", "h200"), ("GB200", "gb200")] {
        let dev = catalog::device(device).unwrap();
        let e = &dev.spec.efficiency;
        for (pass, preset) in [("forward", e.gdn_fwd), ("backward", e.gdn_bwd)] {
            let sel: Vec<&KernelRow> = rows
                .iter()
                .filter(|r| r.gpu == gpu && r.pass == pass)
                .collect();
            let (x, errs) = fit(&sel);
            let p = preset.expect("measured");
            for k in 0..2 {
                assert_relative_eq!(p[k].get(), x[k], max_relative = 0.005);
            }
            let mut abs: Vec<f64> = errs.iter().map(|e| e.abs()).collect();
            abs.sort_by(f64::total_cmp);
            assert!(
                common::median(&abs) <= 0.026 && abs[abs.len() - 1] <= 0.102,
                "{gpu} {pass}: {abs:?}"
            );
        }
    }
    // The other GPUs of each generation take their measured sibling's figures.
    let h200 = catalog::device("h200").unwrap().spec.efficiency;
    let gb200 = catalog::device("gb200").unwrap().spec.efficiency;
    for (d, like) in [
        ("h100-sxm", &h200),
        ("h800", &h200),
        ("b200", &gb200),
        ("b300", &gb200),
        ("gb300", &gb200),
    ] {
        let e = catalog::device(d).unwrap().spec.efficiency;
        assert_eq!((e.gdn_fwd, e.gdn_bwd), (like.gdn_fwd, like.gdn_bwd), "{d}");
    }
}

#[test]
fn parameters_by_hand() {
    // Qwen3-Next (models/qwen3-next-80b-a3b.toml): 36 Gated DeltaNet layers of 33 720 512,
    // 12 attention layers of 2048·(4096 + 2·512) + 4096·2048 + 2048 = 18 876 416 (the
    // model leaves out the QK-norms' 2·256 weights, as for Qwen3),
    // 48 MoE layers of 512·3·2048·512 + 3·2048·512 + 2048·512 + 2048 = 1 614 809 088,
    // embeddings 2·151 936·2048, the final norm: 79 573 623 552; the MTP module one
    // attention and one MoE layer, 2·2048² and 2·2048. The card: 80B, 3B active (without
    // the embeddings: 3 151 831 808); "3B" is one figure, so [2.5, 3.5).
    let t = transformer("qwen3-next-80b-a3b");
    let hy = t.hybrid.expect("a hybrid model");
    assert_eq!(
        (hy.counts.gdn, hy.counts.attention, hy.counts.moe),
        (36, 12, 48)
    );
    let body = 36.0 * 33_720_512.0
        + 12.0 * 18_876_416.0
        + 48.0 * 1_614_809_088.0
        + 2.0 * 151_936.0 * 2048.0
        + 2048.0;
    let mtp = 18_876_416.0 + 1_614_809_088.0 + 2.0 * 2048.0 * 2048.0 + 2.0 * 2048.0;
    assert!((t.params() - body - mtp).abs() < 1.0, "{}", t.params());
    assert!((body / 80e9 - 1.0).abs() <= 0.01, "{body}");
    let idle = 48.0 * 502.0 * 3.0 * 2048.0 * 512.0;
    let active = body - idle - 151_936.0 * 2048.0 * 2.0;
    assert_relative_eq!(active, 3_151_831_808.0);
    assert!((2.5e9..3.5e9).contains(&active));
    // Qwen3.5-397B-A17B: 45 Gated DeltaNet layers of 4096·20608 + 12288·4 + 128 + 128 +
    // 8192·4096 + 4096 = 118 018 304, 15 attention layers of 4096·(8192 + 1024) +
    // 8192·4096 + 4096 = 71 307 264, 60 MoE layers of 512·3·4096·1024 + 3·4096·1024 +
    // 4096·512 + 4096 = 6 457 135 104, embeddings 2·248 320·4096: 395.84e9 against the
    // published 397B (the vision tower and the output gates make up most of the rest),
    // 16.85e9 active with the embeddings against 17B.
    let t = transformer("qwen3.5-397b-a17b");
    let body = 45.0 * 118_018_304.0
        + 15.0 * 71_307_264.0
        + 60.0 * 6_457_135_104.0
        + 2.0 * 248_320.0 * 4096.0
        + 4096.0;
    let mtp = 71_307_264.0 + 6_457_135_104.0 + 2.0 * 4096.0 * 4096.0 + 2.0 * 4096.0;
    assert!((t.params() - body - mtp).abs() < 1.0, "{}", t.params());
    assert!((body / 397e9 - 1.0).abs() <= 0.01, "{body}");
    let active = body - 60.0 * 502.0 * 3.0 * 4096.0 * 1024.0;
    assert!((active / 17e9 - 1.0).abs() <= 0.02, "{active}");
}

/// The delta rule on one rank: `T = b·s·(α + β·H_v/(t·c))`. With CP 2 the rank holds the
/// whole 4096-token sequence for 32/(2·2) = 8 value heads (H100: α, β = 17.8, 1.29 ns
/// forward; 57.1, 3.65 backward): forward 4096·(17.8 + 8·1.29) ns = 115.18 µs, backward
/// 4096·(57.1 + 8·3.65) ns = 353.48 µs. Without CP on 4 GPUs (TP 1, 4096 tokens, 32 heads):
/// 4096·(17.8 + 32·1.29) = 241.99 µs and 4096·(57.1 + 32·3.65) = 712.29 µs.
#[test]
fn delta_rule_by_hand() {
    let (_, text) = cp2();
    let l = line(&text, "gated delta rule");
    assert!(l.contains("b·s = 4096 tokens"), "{l}");
    let f = 4096.0 * (17.8 + 8.0 * 1.29) * 1e-3;
    let b = 4096.0 * (57.1 + 8.0 * 3.65) * 1e-3;
    assert_relative_eq!(f, 115.18, max_relative = 1e-4);
    assert_relative_eq!(micros(l, ") →"), f, max_relative = 1e-3);
    let bwd = l.rsplit(") → ").next().unwrap();
    assert_relative_eq!(micros(&format!("x {bwd}"), "x"), b, max_relative = 1e-3);
    let out = bin()
        .args(words(
            "estimate --model qwen3-next-80b-a3b --system dgx-h100 --gpus 4 --ep 4 --etp 1 \
             --seq-len 4096 --micro-batch 1 --global-batch 4 --precision bf16 \
             --flash-attention --explain",
        ))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3), "computed, does not fit");
    let v = String::from_utf8_lossy(&out.stdout).to_string();
    let l = line(&v, "gated delta rule");
    assert_relative_eq!(
        micros(l, ") →"),
        4096.0 * (17.8 + 32.0 * 1.29) * 1e-3,
        max_relative = 1e-3
    );
}

/// The delta rule's time is part of the iteration: on 4 GB200 (one micro-batch, PP 1, the
/// whole iteration captured as one CUDA graph, so no host time) doubling the device's
/// forward `α` (24.4 → 48.8 ns) adds 36 layers · 4096 tokens · 24.4 ns = 3.598 ms.
#[test]
fn delta_rule_time_adds_to_the_iteration() {
    let root = env!("CARGO_MANIFEST_DIR");
    let dir = std::env::temp_dir().join(format!("astrolabe-gdn-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let dev = std::fs::read_to_string(format!("{root}/presets/devices/gb200.toml"))
        .unwrap()
        .replace(
            "gdn_fwd = [\"24.4 ns\", \"1.03 ns\"]",
            "gdn_fwd = [\"48.8 ns\", \"1.03 ns\"]",
        );
    assert!(dev.contains("48.8 ns"));
    let dev_path = dir.join("gb200-slow.toml");
    std::fs::write(&dev_path, dev).unwrap();
    let sys = std::fs::read_to_string(format!("{root}/presets/systems/gb200-nvl72.toml"))
        .unwrap()
        .replace(
            "device = \"gb200\"",
            &format!("device = \"{}\"", dev_path.display()),
        );
    let sys_path = dir.join("slow.toml");
    std::fs::write(&sys_path, sys).unwrap();
    let time = |system: &str| {
        small("qwen3-next-80b-a3b", system, &["--cuda-graphs", "full"])["iteration_time_s"]
            .as_f64()
            .unwrap()
    };
    let base = time("gb200-nvl72");
    let slow = time(sys_path.to_str().unwrap());
    assert_relative_eq!(slow - base, 36.0 * 4096.0 * 24.4e-9, max_relative = 1e-3);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Megatron-LM's CP for Gated DeltaNet: per layer and pass an all-to-all of the input
/// projection's output (2048 tokens · 12 352/2 columns · 2 B = 25 296 896) and one of the
/// gated norm's output (2048 · 4096/2 · 2 = 8 388 608): 36 layers · 2 passes · 33 685 504 =
/// 2 425 356 288 B. The 13 attention layers (12 and the MTP module's) pass their KV block
/// around the ring (1 KV head per rank, 2048 · 512 · 2 = 2 097 152) once forward and twice
/// backward: 13 · 3 · 2 097 152 = 81 788 928. CP 2 sits inside a node (TP 2 × CP 2 of its 8
/// GPUs), so each all-to-all is one exchange on the NVSwitch (370 GB/s, 3.4 µs): α + n/2/B,
/// 2·3.4 + 33 685 504/2/370e9 s = 52.32 µs per layer and pass, exposed.
#[test]
fn context_parallel_all_to_alls_by_hand() {
    let (v, _) = cp2();
    let cp = &v["time_breakdown"]["communication"]["cp"];
    let gdn = 36.0 * 2.0 * (2048.0 * 6176.0 * 2.0 + 2048.0 * 2048.0 * 2.0);
    assert_relative_eq!(gdn, 2_425_356_288.0);
    let attn = 13.0 * 3.0 * 2048.0 * 512.0 * 2.0;
    assert_relative_eq!(
        cp["bytes_per_device"].as_f64().unwrap(),
        gdn + attn,
        max_relative = 1e-9
    );
    let per = 2.0 * 3.4e-6 + (2048.0 * 6176.0 * 2.0 + 2048.0 * 2048.0 * 2.0) / 2.0 / 370e9;
    assert_relative_eq!(per, 52.32e-6, max_relative = 1e-3);
    assert!(cp["exposed_s"].as_f64().unwrap() >= 36.0 * 2.0 * per * 0.999);
}

/// The memory-bound kernels around the delta rule: at TP 2, 98 688/2 = 49 344 B per token
/// forward (`model::gdn::Gdn::bytes`), 98 688 backward, on the rank's 2048 tokens:
/// 101 056 512 B at 3350 GB/s · 0.7 and 6 kernels · 4 µs = 43.09 + 24 = 67.09 µs; backward
/// 202 113 024 B in 12 kernels: 86.19 + 48 = 134.19 µs.
#[test]
fn memory_bound_passes_by_hand() {
    let (_, text) = cp2();
    let l = line(&text, "Gated DeltaNet memory-bound");
    assert!(l.contains("fwd 1.0106e8 B in 6 kernels"), "{l}");
    assert!(l.contains("bwd 2.0211e8 B in 12 kernels"), "{l}");
    let bw = 3350e9 * 0.7;
    let f = 101_056_512.0 / bw * 1e6 + 24.0;
    let b = 202_113_024.0 / bw * 1e6 + 48.0;
    assert_relative_eq!(f, 67.09, max_relative = 1e-3);
    assert_relative_eq!(micros(l, "kernels →"), f, max_relative = 1e-3);
    let bwd = l.rsplit("kernels → ").next().unwrap();
    assert_relative_eq!(micros(&format!("x {bwd}"), "x"), b, max_relative = 1e-3);
}

/// The projections are the layer's one column/row-parallel pair: `h → (2·qk + 2·v +
/// 2·H_v)/t` and `v/t → h` (at TP 2: 6176 and 2048 columns of the rank's 2048 tokens).
#[test]
fn projections_are_the_attention_slots() {
    let (_, text) = cp2();
    let i = line(&text, "GDN in_proj");
    assert!(i.contains("M=2048 N=6176 K=2048"), "{i}");
    let o = line(&text, "GDN out_proj");
    assert!(o.contains("M=2048 N=2048 K=2048"), "{o}");
}

/// Plans and devices the layer cannot run on are refused by name: TP × CP must divide the
/// key and value heads (16 and 32), and a device without measured delta-rule times (A100)
/// has no rate for it.
#[test]
fn refusals_name_the_flag_or_the_key() {
    let out = bin()
        .args(words(
            "estimate --model qwen3-next-80b-a3b --system dgx-h100 --gpus 32 --cp 32 --ep 32 \
             --etp 1 --seq-len 4096 --global-batch 32",
        ))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let e = String::from_utf8_lossy(&out.stderr);
    assert!(e.contains("--cp") && e.contains("key heads (16)"), "{e}");
    let out = bin()
        .args(words(
            "estimate --model qwen3-next-80b-a3b --system dgx-a100 --gpus 8 --ep 8 --etp 1 \
             --global-batch 8",
        ))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let e = String::from_utf8_lossy(&out.stderr);
    assert!(
        e.contains("a100-80gb") && e.contains("efficiency.gdn_fwd"),
        "{e}"
    );
}

/// A model file's `G` layers need the table, and the table needs `G` layers.
#[test]
fn model_file_errors_name_the_key() {
    let root = env!("CARGO_MANIFEST_DIR");
    let text = std::fs::read_to_string(format!("{root}/models/qwen3-next-80b-a3b.toml")).unwrap();
    let dir = std::env::temp_dir().join(format!("astrolabe-gdn-model-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let run = |name: &str, body: String| {
        let p = dir.join(name);
        std::fs::write(&p, body).unwrap();
        let out = bin()
            .args([
                "estimate",
                "--model",
                p.to_str().unwrap(),
                "--system",
                "dgx-h100",
                "--gpus",
                "8",
            ])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2));
        String::from_utf8_lossy(&out.stderr).to_string()
    };
    let cut = text.find("[transformer.gdn]").unwrap();
    let e = run("no-table.toml", text[..cut].to_string());
    assert!(
        e.contains("hybrid_pattern") && e.contains("[transformer.gdn]"),
        "{e}"
    );
    let e = run("no-g.toml", text.replace("GEGEGE*E", "*E*E*E*E"));
    assert!(
        e.contains("transformer.gdn") && e.contains("no G layer"),
        "{e}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// The layers' stored activations: a model with 64 value heads instead of 32 (key heads 16
/// either way) keeps, per token of each Gated DeltaNet layer at TP 1, 2·(2·4096 + 2·32) for
/// the wider input projection, 4·32·128 for the repeated keys and queries, 6·4096 for `v`,
/// the norm's and the output projection's inputs, 2·64·32 for `A` and 8·32 for the gates:
/// 16 512 + 16 384 + 24 576 + 4096 + 256 = 61 824 B more; 36 layers × 4096 tokens (PP 1,
/// one micro-batch in flight) = 9 116 319 744 B.
#[test]
fn activations_by_hand() {
    let (dir, wide) = variant("wide", "value_heads = 32", "value_heads = 64");
    let act = |model: &str| {
        small(model, "gb200-nvl72", &[])["memory_breakdown"]["activations_bytes"]
            .as_f64()
            .unwrap()
    };
    let d = act(wide.to_str().unwrap()) - act("qwen3-next-80b-a3b");
    assert_relative_eq!(d, 36.0 * 4096.0 * 61_824.0, max_relative = 1e-9);
    assert_relative_eq!(d, 9_116_319_744.0, max_relative = 1e-9);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Model FLOPs per token, forward: a Gated DeltaNet layer 2·33 685 504 (projections) +
/// 2·4·8192 (convolution) + 32·2·(3·64·128 + 2·64·128 + 3·128² + 64²/3) (delta rule) =
/// 73 291 093.33; an attention layer 2·18 874 368 + 2·4096·16·512 = 104 857 600; an MoE
/// layer 2·(10·3·2048·512 + 3·2048·512) = 69 206 016; 36, 12 and 48 of them, the head
/// 2·151 936·2048 and one MTP depth (an attention and an MoE layer, 4·2048² and the head):
/// 8 654 159 872. An iteration of 4 × 4096 tokens is three passes' worth:
/// 3 · 16 384 · 8 654 159 872 = 425 369 266 028 544.
#[test]
fn model_flops_by_hand() {
    let g = 2.0 * 33_685_504.0 + 2.0 * 4.0 * 8192.0 + 64.0 * (90_112.0 + 4096.0 / 3.0);
    let attn = 2.0 * 18_874_368.0 + 2.0 * 4096.0 * 16.0 * 512.0;
    let moe = 2.0 * (10.0 * 3.0 * 2048.0 * 512.0 + 3.0 * 2048.0 * 512.0);
    let head = 2.0 * 151_936.0 * 2048.0;
    let per_token =
        36.0 * g + 12.0 * attn + 48.0 * moe + head + (attn + moe + 4.0 * 2048.0 * 2048.0 + head);
    assert_relative_eq!(per_token, 8_654_159_872.0, max_relative = 1e-12);
    let v = small("qwen3-next-80b-a3b", "gb200-nvl72", &[]);
    assert_relative_eq!(
        v["model_flops_per_iteration"].as_f64().unwrap(),
        3.0 * 16_384.0 * per_token,
        max_relative = 1e-12
    );
}

/// Host operations of a Gated DeltaNet layer per pass: its two projections (Transformer
/// Engine calls of 2.7 operations, one forward, two backward), 6 (12) memory-bound kernels
/// and the delta rule's 4 (7): forward 2·2.7 + 10 = 15.4, backward 4·2.7 + 19 = 29.8. The
/// `attn` graph scope captures the mixer (one graph launch per pass).
#[test]
fn host_operations_by_hand() {
    let host = |graphs: &str| {
        let out = bin()
            .args(words(&format!(
                "estimate --model qwen3-next-80b-a3b --system gb200-nvl72 --gpus 4 --ep 4 \
                 --etp 1 --seq-len 4096 --micro-batch 1 --global-batch 4 --cuda-graphs {graphs} \
                 --explain"
            )))
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout).to_string();
        common::line_after(&text, "Gated DeltaNet (G) layers", "host (CUDA graphs")
    };
    let eager = host("none");
    assert!(
        eager.contains("forward 15.4 ops") && eager.contains("backward 29.8 ops"),
        "{eager}"
    );
    let graphed = host("attn");
    assert!(
        graphed.contains("forward 1.0 ops") && graphed.contains("backward 1.0 ops"),
        "{graphed}"
    );
}

/// Head sizes other than the measured 128 scale the delta rule's time by its work per head:
/// keys of 256 (values 128, chunks of 64) give r = (3·64·256 + 2·64·128 + 3·256·128 +
/// 64²/3)/(3·64·128 + 2·64·128 + 3·128² + 64²/3) = 165 205.33/91 477.33 = 1.80598, so on 4
/// H100 (4096 tokens, 32 value heads) the forward is 4096·(17.8 + 32·1.29) ns · r =
/// 437.03 µs.
#[test]
fn delta_rule_scales_with_head_size() {
    let (dir, wide) = variant("dk256", "key_head_dim = 128", "key_head_dim = 256");
    let mut args = small_args(wide.to_str().unwrap(), "dgx-h100");
    args.push("--explain");
    let out = bin().args(&args).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    let l = line(&text, "gated delta rule");
    let r = (3.0 * 64.0 * 256.0 + 2.0 * 64.0 * 128.0 + 3.0 * 256.0 * 128.0 + 4096.0 / 3.0)
        / (3.0 * 64.0 * 128.0 + 2.0 * 64.0 * 128.0 + 3.0 * 128.0 * 128.0 + 4096.0 / 3.0);
    assert_relative_eq!(r, 1.80598, max_relative = 1e-5);
    assert!(l.contains("r = 1.8060"), "{l}");
    let f = 4096.0 * (17.8 + 32.0 * 1.29) * r * 1e-3;
    assert_relative_eq!(f, 437.03, max_relative = 1e-4);
    assert_relative_eq!(micros(l, ") →"), f, max_relative = 1e-3);
    let bwd = l.rsplit(") → ").next().unwrap();
    assert_relative_eq!(
        micros(&format!("x {bwd}"), "x"),
        4096.0 * (57.1 + 32.0 * 3.65) * r * 1e-3,
        max_relative = 1e-3
    );
    let _ = std::fs::remove_dir_all(&dir);
}
