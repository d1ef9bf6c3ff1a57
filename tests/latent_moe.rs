//! LatentMoE and a hybrid model's MTP modules (Nemotron 3 Super, `models/nemotron3-super.toml`):
//! each term checked against arithmetic done by hand from Megatron-core's layer
//! (`MoELayer`: `fc1_latent_proj` h → ℓ before the dispatch, `fc2_latent_proj` ℓ → h after
//! the combine, the routed experts and the token exchange ℓ wide) and from the model's
//! config (h 4096, ℓ 1024, 512 experts of 2688 with top-22, one shared expert of 5376, 40
//! Mamba + 8 attention + 40 MoE layers, MTP "*E" at 2 depths with shared weights). Every
//! tolerance is far below 5 %: a term that moves by 5 % fails its test.

use crate::common;
use approx::assert_relative_eq;
use common::{bin, json, line_after, micros};

/// Nemotron 3 Super on 64 GB300 as Megatron-Bridge's recipe runs it (TP 1, EP 64, one
/// sequence of 8192 per micro-batch, global batch 512: 8 micro-batches), in BF16 so that a
/// parameter is 2 bytes, with the recipe's CUDA graphs, plus `extra` (which may set `--tp`,
/// `--ep` and `--cuda-graphs` instead).
fn args(model: &str, extra: &[&str]) -> Vec<String> {
    let mut a: Vec<String> = [
        "estimate",
        "--model",
        model,
        "--system",
        "gb300-nvl72",
        "--gpus",
        "64",
        "--etp",
        "1",
        "--micro-batch",
        "1",
        "--global-batch",
        "512",
        "--precision",
        "bf16",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    for (flag, default) in [
        ("--tp", "1"),
        ("--ep", "64"),
        ("--cuda-graphs", "attn,mamba,moe_router,moe_preprocess"),
    ] {
        if !extra.contains(&flag) {
            a.extend([flag.to_string(), default.to_string()]);
        }
    }
    a.extend(extra.iter().map(|s| s.to_string()));
    a
}

fn run_json(model: &str, extra: &[&str]) -> serde_json::Value {
    let a = args(model, extra);
    let refs: Vec<&str> = a.iter().map(String::as_str).collect();
    json(&refs)
}

fn explain(model: &str, extra: &[&str]) -> String {
    let mut a = args(model, extra);
    a.push("--explain".into());
    let refs: Vec<&str> = a.iter().map(String::as_str).collect();
    // Computed whether or not it fits (experts on h need more memory than a GB300 has).
    common::computed(&refs)
}

/// The built-in model's TOML with `edit` applied (each pair replaced once, and present).
fn edited(name: &str, edits: &[(&str, &str)]) -> String {
    let mut text = common::text(&["show", "model", "nemotron3-super"]);
    for (from, to) in edits {
        assert!(text.contains(from), "{from}");
        text = text.replacen(from, to, 1);
    }
    let path = common::tmp("latent_moe").join(format!("{name}.toml"));
    std::fs::write(&path, text).unwrap();
    path.to_str().unwrap().to_string()
}

fn weights(v: &serde_json::Value) -> f64 {
    v["memory_breakdown"]["weights_bytes"].as_f64().unwrap()
}

#[test]
fn parameters_by_hand() {
    // One device holds every dense weight and 512/64 = 8 experts of each MoE layer:
    // Mamba 40·109 640 064 (in_proj 4096·18 560, conv 10 240·5, 3·128, norm 8192, out_proj
    // 8192·4096, pre-norm 4096); attention 8·35 655 680 (4096·4608 + 4096² + 4096); MoE
    // layer 8·2·1024·2688 (experts on ℓ) + 2·4096·5376 (shared, on h) + 2·4096·1024
    // (latent projections) + 4096·512 (router) + 4096 = 98 570 240, 40 of them; embeddings
    // 2·131072·4096 + 4096; the MTP module once (shared weights): attention + MoE layer +
    // 2·4096² + 2·4096 = 167 788 544. Sum 9 855 192 064, 2 bytes each.
    let mamba = 40.0 * 109_640_064.0;
    let attention = 8.0 * 35_655_680.0;
    let moe_layer = 8.0 * 2.0 * 1024.0 * 2688.0
        + 2.0 * 4096.0 * 5376.0
        + 2.0 * 4096.0 * 1024.0
        + 4096.0 * 512.0
        + 4096.0;
    assert_relative_eq!(moe_layer, 98_570_240.0);
    let mtp = 35_655_680.0 + moe_layer + 2.0 * 4096.0 * 4096.0 + 2.0 * 4096.0;
    assert_relative_eq!(mtp, 167_788_544.0);
    let total = mamba + attention + 40.0 * moe_layer + 2.0 * 131072.0 * 4096.0 + 4096.0 + mtp;
    assert_relative_eq!(total, 9_855_192_064.0);
    let v = run_json("nemotron3-super", &[]);
    assert_relative_eq!(weights(&v), 2.0 * total, max_relative = 1e-12);
    // The whole model: 120 668 687 360 in its 88 layers and embeddings (the card's 120B),
    // 123 611 008 000 with the MTP module (docs/presets.md).
    let whole_mtp = 35_655_680.0 + 2_873_102_336.0 + 2.0 * 4096.0 * 4096.0 + 2.0 * 4096.0;
    assert_relative_eq!(whole_mtp, 2_942_320_640.0);
    assert_relative_eq!(
        total_params("nemotron3-super"),
        120_668_687_360.0 + whole_mtp,
        max_relative = 1e-12
    );
    // At TP 2 (ETP 1) a device keeps its 8 local experts whole and the latent projections
    // whole (replicated over TP), and half of the rest: Mamba 40·109 640 064/2, attention
    // 8·35 655 680/2, MoE layer 8·2·1024·2688 + (2·4096·5376 + 4096·512 + 4096)/2 +
    // 2·4096·1024 = 75 499 520, embeddings (2·131072·4096 + 4096)/2, the MTP module
    // (35 655 680 + 16·2·1024·2688 + 2·4096·5376 + 2·4096·1024 + 4096·512 + 4096 + 2·4096² +
    // 2·4096)/2 + 2·4096·1024/2 = 110 108 672: 6 002 386 432.
    let moe_tp2 = 8.0 * 2.0 * 1024.0 * 2688.0
        + (2.0 * 4096.0 * 5376.0 + 4096.0 * 512.0 + 4096.0) / 2.0
        + 2.0 * 4096.0 * 1024.0;
    assert_relative_eq!(moe_tp2, 75_499_520.0);
    let tp2 = mamba / 2.0
        + attention / 2.0
        + 40.0 * moe_tp2
        + (2.0 * 131072.0 * 4096.0 + 4096.0) / 2.0
        + 110_108_672.0;
    assert_relative_eq!(tp2, 6_002_386_432.0);
    let v = run_json("nemotron3-super", &["--tp", "2"]);
    assert_relative_eq!(weights(&v), 2.0 * tp2, max_relative = 1e-12);
    // Without `mtp_repeated` the two depths have a module each: one more.
    let separate = edited("separate-mtp", &[("mtp_repeated = true\n", "")]);
    let v = run_json(&separate, &[]);
    assert_relative_eq!(weights(&v), 2.0 * (total + mtp), max_relative = 1e-12);
}

#[test]
fn model_flops_by_hand() {
    // Forward per token: Mamba 40·(2·109 576 192 + 6 553 600) (projections; the SSD scan
    // 2·8·128·128 + 128·(4·64·128 + 2·128·64)); attention 8·(2·35 651 584 + 2·8192·32·256);
    // MoE 40·2·(22·2·1024·2688 + 2·4096·5376 + 2·4096·1024): the 22 experts on ℓ, the
    // shared expert on h and the two latent projections; head 2·131072·4096; MTP 2·(one
    // attention and one MoE layer + 4·4096² + the head) = 29 016 195 072. Times 3 × the
    // 512·8192 tokens of an iteration.
    let attention = 2.0 * 35_651_584.0 + 2.0 * 8192.0 * 32.0 * 256.0;
    let moe = 2.0 * (22.0 * 2.0 * 1024.0 * 2688.0 + 2.0 * 4096.0 * 5376.0 + 2.0 * 4096.0 * 1024.0);
    let head = 2.0 * 131072.0 * 4096.0;
    let fwd = 40.0 * (2.0 * 109_576_192.0 + 6_553_600.0)
        + 8.0 * attention
        + 40.0 * moe
        + head
        + 2.0 * (attention + moe + 4.0 * 4096.0 * 4096.0 + head);
    assert_relative_eq!(fwd, 29_016_195_072.0);
    let v = run_json("nemotron3-super", &[]);
    let got = v["model_flops_per_iteration"].as_f64().unwrap();
    assert_relative_eq!(got, 3.0 * fwd * 512.0 * 8192.0, max_relative = 1e-12);
}

#[test]
fn experts_and_projections_have_latent_shapes() {
    // 8 local experts each take 8192 tokens × 22 copies × 64 ranks / 512 experts = 22 528
    // tokens of width ℓ = 1024; the projections run once per token on h (replicated over TP: at TP 2
    // each rank projects its 4096 sequence-parallel tokens).
    let text = explain("nemotron3-super", &[]);
    let block = "MoE (E) layers: 40 of 88";
    assert!(line_after(&text, block, "GEMM MLP in:").contains("M=22528 N=2688 K=1024 ×8 experts"));
    assert!(line_after(&text, block, "GEMM MLP out:").contains("M=22528 N=1024 K=2688 ×8 experts"));
    assert!(line_after(&text, block, "latent down (h → ℓ)").contains("M=8192 N=1024 K=4096 ×1"));
    assert!(line_after(&text, block, "latent up (ℓ → h)").contains("M=8192 N=4096 K=1024 ×1"));
    assert!(line_after(&text, block, "shared MLP in").contains("M=8192 N=5376 K=4096 ×1"));
    let tp2 = explain("nemotron3-super", &["--tp", "2"]);
    assert!(line_after(&tp2, block, "latent down (h → ℓ)").contains("M=4096 N=1024 K=4096 ×1"));
    assert!(line_after(&tp2, block, "latent up (ℓ → h)").contains("M=4096 N=4096 K=1024 ×1"));
    // A model without a latent has neither.
    let plain = edited("no-latent", &[("latent = 1024\n", "")]);
    let text = explain(&plain, &[]);
    assert!(!text.contains("latent down"));
    assert!(line_after(&text, block, "GEMM MLP in:").contains("N=2688 K=4096 ×8 experts"));
}

#[test]
fn dispatch_and_permute_move_latent_tokens() {
    // Each all-to-all moves the rank's 8192 tokens × 22 copies × ℓ = 1024 × 2 bytes =
    // 369 098 752 B; dispatch and combine, forward and backward: 4 per MoE layer and
    // micro-batch, over 40 layers and the 2 MTP depths' MoE layer, 8 micro-batches:
    // 42·4·8·369 098 752 = 496 068 722 688 B.
    let v = run_json("nemotron3-super", &[]);
    let ep = v["time_breakdown"]["communication"]["ep"]["bytes_per_device"]
        .as_f64()
        .unwrap();
    assert_relative_eq!(ep, 42.0 * 4.0 * 8.0 * 369_098_752.0, max_relative = 1e-12);
    // Permute and unpermute: 6·k·T·ℓ + 2·T·ℓ = 6·22·8192·1024 + 2·8192·1024 bytes.
    let text = explain("nemotron3-super", &[]);
    let line = line_after(&text, "MoE (E) layers", "MoE permute + unpermute");
    let want = 6.0 * 22.0 * 8192.0 * 1024.0 + 2.0 * 8192.0 * 1024.0;
    assert_relative_eq!(want, 1.1241e9, max_relative = 1e-4);
    assert!(line.contains("1.1241e9 B in 2 kernels"), "{line}");
}

#[test]
fn latent_activations_by_hand() {
    // Per s·b·h (at sequence 4096, so that experts on h fit: 4096·4096 = 16 777 216), an MoE layer keeps its experts' input at 2 bytes
    // per element of each of the k copies, ℓ/h wide, and the ℓ → h projection's input:
    // 2·22·¼ + 2·¼ = 11.5, against 2·22 = 44 for experts on h. Over the 40 MoE layers and
    // the MoE layer of each of the 2 MTP depths (all in flight on one stage, micro-batch 1):
    // 42·32.5·16 777 216 bytes fewer.
    let plain = edited("no-latent-memory", &[("latent = 1024\n", "")]);
    let act = |m: &str| {
        run_json(m, &["--seq-len", "4096"])["memory_breakdown"]["activations_bytes"]
            .as_f64()
            .unwrap()
    };
    let saved = act(&plain) - act("nemotron3-super");
    assert_relative_eq!(saved, 42.0 * 32.5 * 16_777_216.0, max_relative = 1e-9);
}

#[test]
fn latent_projections_are_launched_by_the_host() {
    // Uncaptured (`--cuda-graphs none`), an MoE layer's host operations gain the two
    // projections as Transformer Engine linear layers: 2·2.7 forward, 2·2·2.7 backward in
    // BF16 (docs/modern-training.md, host launch).
    let ops = |m: &str| {
        let text = explain(m, &["--cuda-graphs", "none"]);
        let line = line_after(&text, "MoE (E) layers", "  host (");
        let num = |key: &str| -> f64 {
            let part = line.split(key).nth(1).unwrap().trim_start();
            part.split(' ').next().unwrap().parse().unwrap()
        };
        (num("forward"), num("backward"))
    };
    let plain = edited("no-latent-host", &[("latent = 1024\n", "")]);
    let (lf, lb) = ops("nemotron3-super");
    let (pf, pb) = ops(&plain);
    assert_relative_eq!(lf - pf, 2.0 * 2.7, max_relative = 1e-3);
    assert_relative_eq!(lb - pb, 2.0 * 2.0 * 2.7, max_relative = 1e-3);
}

#[test]
fn mtp_modules_add_their_layers_and_a_head_to_the_last_stage() {
    // The one stage's time per micro-batch grows by 2·(T_* + T_E + T_head) forward and
    // backward, each from the explain's own layer and head lines.
    let text = explain("nemotron3-super", &[]);
    let total = |block: &str| {
        let l = line_after(&text, block, "layer total");
        micros(&l, "forward") + micros(&l, "backward")
    };
    let attention = total("attention (*) layers");
    let moe = total("MoE (E) layers");
    let logits = line_after(&text, "mean layer", "logits GEMM");
    let gemm = logits.split(';').next().unwrap();
    let head = micros(gemm, "fwd") + micros(gemm, "bwd");
    let ce = line_after(&text, "mean layer", "cross-entropy");
    let loss = {
        let tail = ce.split("): ").nth(1).unwrap();
        micros(tail, "fwd") + micros(tail, "bwd")
    };
    let stage = |t: &str| {
        micros(
            &line_after(t, "stages:", "stages:"),
            "slowest stage per micro-batch",
        )
    };
    let none = edited(
        "no-mtp",
        &[
            ("mtp_layers = 2\n", ""),
            ("mtp_pattern = \"*E\"\n", ""),
            ("mtp_repeated = true\n", ""),
        ],
    );
    let without = explain(&none, &[]);
    let grown = stage(&text) - stage(&without);
    assert_relative_eq!(
        grown,
        2.0 * (attention + moe + head + loss),
        max_relative = 2e-3
    );
}

#[test]
fn mtp_settings_are_checked() {
    let bad = |name: &str, edits: &[(&str, &str)], needle: &str| {
        let path = edited(name, edits);
        let out = bin().args(args(&path, &[])).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{name}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(needle), "{name}: {err}");
    };
    bad(
        "mtp-no-pattern",
        &[("mtp_pattern = \"*E\"\n", "")],
        "transformer.mtp_layers",
    );
    bad(
        "mtp-unused",
        &[("mtp_layers = 2\n", "")],
        "transformer.mtp_pattern",
    );
    bad(
        "mtp-kind",
        &[("mtp_pattern = \"*E\"", "mtp_pattern = \"*-\"")],
        "transformer.mtp_pattern",
    );
    bad(
        "mtp-symbol",
        &[("mtp_pattern = \"*E\"", "mtp_pattern = \"*X\"")],
        "character 2 ('X')",
    );
}

#[test]
fn mtp_activations_by_hand() {
    // Without a pipeline the one stage holds the two MTP depths' layers for its micro-batch.
    // Per s·b·h (8192·4096 = 33 554 432) in BF16 at TP 1, fused attention: every layer keeps
    // its pre-norm's input and output (2 + 2); the attention layer its block, 4 + 4·kv/a =
    // 4 + 4·2/32 = 4.25; the MoE layer its 22 experts' FC1 output and activation (2 + 2)·2688/4096
    // each, the shared expert's (2 + 2)·5376/4096, and the latent inputs 2·22·¼ + 2·¼:
    // per depth (4 + 4.25) + (4 + 57.75 + 5.25 + 11.5) = 86.75, two depths 173.5.
    let per_depth = (4.0 + 4.0 + 4.0 * 2.0 / 32.0)
        + (4.0 + 4.0 * 2688.0 / 4096.0 * 22.0 + 4.0 * 5376.0 / 4096.0 + 11.5);
    assert_relative_eq!(per_depth, 86.75);
    let act = |m: &str, extra: &[&str]| {
        run_json(m, extra)["memory_breakdown"]["activations_bytes"]
            .as_f64()
            .unwrap()
    };
    let none = edited(
        "no-mtp-memory",
        &[
            ("mtp_layers = 2\n", ""),
            ("mtp_pattern = \"*E\"\n", ""),
            ("mtp_repeated = true\n", ""),
        ],
    );
    let grown = act("nemotron3-super", &[]) - act(&none, &[]);
    assert_relative_eq!(grown, 2.0 * per_depth * 33_554_432.0, max_relative = 1e-9);
    // CP 2 splits the sequence: each rank keeps half of the depths' activations.
    let cp2 = ["--cp", "2"];
    assert_relative_eq!(
        act("nemotron3-super", &cp2) - act(&none, &cp2),
        per_depth * 33_554_432.0,
        max_relative = 1e-9
    );
    // With a pipeline the first stage, whose memory is reported, holds none of them.
    let pp2 = ["--pp", "2", "--ep", "32"];
    assert_relative_eq!(
        act("nemotron3-super", &pp2),
        act(&none, &pp2),
        max_relative = 1e-12
    );
    let text = explain("nemotron3-super", &[]);
    assert!(
        text.contains("+ the 2 MTP depths'"),
        "explain names the MTP term"
    );
    // The module's own line: its pattern `*E` as kinds, run once per depth; a model without
    // MTP depths prints none.
    assert!(
        text.contains(
            " MTP module = 0·T_M + 0·T_G + 1·T_* + 0·T_- + 1·T_E (mtp_pattern), run 2 times"
        ),
        "explain shows the MTP module"
    );
    // Nor does it add MTP activations, nor does a pipeline's first stage, which holds none.
    let quiet = explain(&none, &[]);
    assert!(!quiet.contains("MTP module =") && !quiet.contains("MTP depths'"));
    assert!(!explain("nemotron3-super", &pp2).contains("MTP depths'"));
}

/// Qwen3-30B-A3B (h 2048, 128 experts of 768, top-8, dense MLP 6144) made a LatentMoE with ℓ =
/// 1024, edited as `edits` say, on 8 B200 with EP 8 (16 local experts), sequence 2048,
/// global batch 8, BF16: (the model's parameters, model FLOPs per iteration).
fn qwen_latent(name: &str, edits: &[(&str, &str)]) -> (f64, f64) {
    let (params, flops, _) = qwen_latent_device(name, edits, &[]);
    (params, flops)
}

/// [`qwen_latent`] and the parameters one device holds (its weights at 2 bytes), with the
/// plan flags `extra` added.
fn qwen_latent_device(name: &str, edits: &[(&str, &str)], extra: &[&str]) -> (f64, f64, f64) {
    let mut text = common::text(&["show", "model", "qwen3-30b-a3b"]);
    text = text.replacen(
        "expert_ffn_hidden = 768",
        "expert_ffn_hidden = 768\nlatent = 1024",
        1,
    );
    for (from, to) in edits {
        assert!(text.contains(from), "{from}");
        text = text.replacen(from, to, 1);
    }
    let path = common::tmp("latent_moe").join(format!("{name}.toml"));
    std::fs::write(&path, text).unwrap();
    let mut args = vec![
        "estimate",
        "--model",
        path.to_str().unwrap(),
        "--system",
        "dgx-b200",
        "--gpus",
        "8",
        "--ep",
        "8",
        "--seq-len",
        "2048",
        "--global-batch",
        "8",
        "--precision",
        "bf16",
    ];
    args.extend_from_slice(extra);
    let v = json(&args);
    (
        total_params(path.to_str().unwrap()),
        v["model_flops_per_iteration"].as_f64().unwrap(),
        weights(&v) / 2.0,
    )
}

/// The model's parameters, all of them (the library's count).
fn total_params(model: &str) -> f64 {
    let m = astrolabe::catalog::model(model).unwrap();
    m.transformer().expect("a transformer").params()
}

#[test]
fn dense_first_layers_of_a_latent_model_have_no_latent() {
    // A dense first layer replaces an MoE layer: parameters 3·2048·6144 for its MLP against
    // 128·3·1024·768 experts on ℓ, 2·2048·1024 projections and the 2048·128 router:
    // 37 748 736 − 301 989 888 − 4 194 304 − 262 144 = −268 697 600. Forward FLOPs
    // per token 2·(3·2048·6144 − 8·3·1024·768 − 2·2048·1024) = 29 360 128, × 3 × 8·2048.
    let (p0, f0) = qwen_latent("qwen-latent", &[]);
    let (p1, f1) = qwen_latent(
        "qwen-latent-dense1",
        &[(
            "[transformer.moe]\n",
            "[transformer.moe]\ndense_layers = 1\n",
        )],
    );
    assert_relative_eq!(p1 - p0, -268_697_600.0, max_relative = 1e-9);
    assert_relative_eq!(
        f1 - f0,
        29_360_128.0 * 3.0 * 8.0 * 2048.0,
        max_relative = 1e-9
    );
}

#[test]
fn an_mtp_layer_of_a_latent_model_has_the_latent_experts() {
    // The MTP module's MoE layer is the model's: its local experts on ℓ and its two
    // projections. Against experts on h, the module differs by 128·3·768·(1024 − 2048) +
    // 2·2048·1024 = −297 795 584 parameters, as the model's other layers do.
    let mtp = ("bias = false\n", "bias = false\nmtp_layers = 1\n");
    let no_latent = ("latent = 1024\n", "");
    let (with_mtp, _) = qwen_latent("qwen-latent-mtp", &[mtp]);
    let (without, _) = qwen_latent("qwen-latent-nomtp", &[]);
    let (h_mtp, _) = qwen_latent("qwen-h-mtp", &[mtp, no_latent]);
    let (h_without, _) = qwen_latent("qwen-h-nomtp", &[no_latent]);
    let module_latent = with_mtp - without;
    let module_h = h_mtp - h_without;
    assert_relative_eq!(
        module_latent - module_h,
        -297_795_584.0,
        max_relative = 1e-9
    );
}

/// DeepSeek-V3's catalog entry (61 layers, one MTP module) with `layers` layers and `mtp`
/// MTP modules, written as a model file.
fn dsv3_variant(name: &str, layers: &str, mtp: &str) -> std::path::PathBuf {
    let shown = common::text(&["show", "model", "deepseek-v3"]);
    assert!(shown.contains("layers = 61\n") && shown.contains("mtp_layers = 1\n"));
    let text = shown
        .replacen("layers = 61\n", &format!("layers = {layers}\n"), 1)
        .replacen("mtp_layers = 1\n", &format!("mtp_layers = {mtp}\n"), 1);
    let path = common::tmp("latent_moe").join(format!("{name}.toml"));
    std::fs::write(&path, text).unwrap();
    path
}

#[test]
fn a_transformers_mtp_module_is_one_layer_a_projection_and_two_norms() {
    // DeepSeek-V3 (h 7168, 61 layers, one MTP module): what the MTP module adds to the whole
    // model, less what one more MoE layer adds, is the module's 2h × h projection and its two
    // norms: 2·7168² + 2·7168 = 102 774 784.
    let variant = |name: &str, layers: &str, mtp: &str| {
        total_params(dsv3_variant(name, layers, mtp).to_str().unwrap())
    };
    let module = variant("dsv3-mtp1", "61", "1") - variant("dsv3-mtp0", "61", "0");
    let layer = variant("dsv3-62", "62", "0") - variant("dsv3-mtp0b", "61", "0");
    assert_relative_eq!(module - layer, 102_774_784.0, max_relative = 1e-9);
}

/// The weights one device holds of the DeepSeek-V3 variant with `layers` and `mtp` depths
/// at TP 2, ETP 2, EP 8 and PP `pp` on `gpus` H100s.
fn dsv3_weights(name: &str, layers: &str, mtp: &str, pp: &str, gpus: &str) -> f64 {
    let path = dsv3_variant(name, layers, mtp);
    let args = format!(
        "--model {} --system dgx-h100 --gpus {gpus} --tp 2 --etp 2 --ep 8 --pp {pp} \
         --global-batch 32",
        path.display()
    );
    let args: Vec<String> = args.split_whitespace().map(String::from).collect();
    common::estimate_cli(&args).0.memory.weights.get()
}

#[test]
fn a_devices_mtp_module_splits_its_experts_etp_ways() {
    // DeepSeek-V3 at TP 2, ETP 2, EP 8, PP 1 on 16 GPUs: a device holds each MoE layer's
    // 256/8 local experts split 2 ways, and the MTP module's layer the same way. What the
    // module adds to a device's weights, less what one more MoE layer adds, is its
    // projection and two norms split over TP: (2·7168² + 2·7168)/2 parameters of 2 B.
    let weights = |name: &str, layers: &str, mtp: &str| dsv3_weights(name, layers, mtp, "1", "16");
    let base = weights("dsv3-d-61-0", "61", "0");
    let module = weights("dsv3-d-61-1", "61", "1") - base;
    let layer = weights("dsv3-d-62-0", "62", "0") - base;
    assert_relative_eq!(
        module - layer,
        (2.0 * 7168.0 * 7168.0 + 2.0 * 7168.0) / 2.0 * 2.0,
        max_relative = 1e-9
    );
}

#[test]
fn the_mtp_module_sits_on_the_last_pipeline_stage() {
    // The same DeepSeek-V3 at PP 2 on 32 GPUs: 61 layers, the last stage's device (31
    // layers, the output head) the busiest with or without the module, and the module on
    // it (Megatron-core builds it in the post-process stage). What the module adds to that
    // device is one more MoE layer of the device's (the PP 1 difference of 62 and 61
    // layers), its projection and two norms split over TP, as at PP 1, and the stage's own
    // copy of the word embedding for the module (`GPTModel` builds `self.embedding` where
    // `mtp_process`; the weights are untied): 129 280 · 7168 / 2 parameters, 2 B each.
    let weights = dsv3_weights;
    let layer =
        weights("dsv3-p-62-0", "62", "0", "1", "16") - weights("dsv3-p-61-0", "61", "0", "1", "16");
    let module = weights("dsv3-p2-61-1", "61", "1", "2", "32")
        - weights("dsv3-p2-61-0", "61", "0", "2", "32");
    assert_relative_eq!(
        module - layer,
        (2.0 * 7168.0 * 7168.0 + 2.0 * 7168.0) / 2.0 * 2.0 + 129_280.0 * 7168.0 / 2.0 * 2.0,
        max_relative = 1e-9
    );
}

#[test]
fn a_device_holds_its_latent_experts_and_the_projections() {
    // Qwen3-30B-A3B at EP 8, TP 1: per layer the 16 local experts on ℓ instead of h and the
    // two projections, 16·3·768·(1024 − 2048) + 2·2048·1024 = −33 554 432, over 48 layers.
    let (_, _, latent) = qwen_latent_device("qwen-latent-device", &[], &[]);
    let (_, _, plain) = qwen_latent_device("qwen-h-device", &[("latent = 1024\n", "")], &[]);
    assert_relative_eq!(latent - plain, -33_554_432.0 * 48.0, max_relative = 1e-9);
}

#[test]
fn a_tp_rank_holds_the_latent_projections_whole() {
    // The same at TP 2 with ETP 1: the 16 local experts whole, 16·3·768·(1024 − 2048) =
    // −37 748 736, and the projections replicated on both TP ranks (not halved: that would
    // be 2 097 152), 2·2048·1024 = 4 194 304: −33 554 432 per layer, over 48 layers.
    let tp2 = ["--tp", "2", "--etp", "1"];
    let (_, _, latent) = qwen_latent_device("qwen-latent-tp2", &[], &tp2);
    let (_, _, plain) = qwen_latent_device("qwen-h-tp2", &[("latent = 1024\n", "")], &tp2);
    assert_relative_eq!(latent - plain, -33_554_432.0 * 48.0, max_relative = 1e-9);
}
