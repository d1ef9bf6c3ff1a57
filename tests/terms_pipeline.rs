//! The pipeline's cost terms, each against the textbook formula worked out by hand: the
//! bubble of 1F1B, GPipe, interleaved 1F1B and uneven splits (Narayanan et al. SC'21 §2.2;
//! the sum-of-stages form for unequal stages), the point-to-point transfers of the stage
//! boundaries with their latency and the all-gather that restores a TP-split activation,
//! and the tied-embedding gradient all-reduce between the first and the last stage. Each
//! assertion is tight enough that a 5% change of its term fails (tolerance 1% where the
//! embedding and the head make the stages unequal, beside an exact form to 1e-6, else 1e-9).
//! (DualPipe's bubble, `(p/2 − 1)·F`, is checked by hand in `tests/moe_frontier.rs`.)

use crate::terms_support;

use astrolabe::estimate::{CommClass, Estimate};
use astrolabe::parallel::{PlanSpec, Schedule};
use terms_support::{
    H, L, S, V, all_reduce, close, gemm, mem, model, ring_half, run, send, system,
};

/// Four pipeline stages, one GPU each, m = 8 micro-batches of one sequence, no TP, no DP:
/// the only communication is the pipeline's, and nothing slows the compute.
fn pp4(schedule: Schedule, v: u32) -> PlanSpec {
    PlanSpec {
        gpus: Some(4),
        pp: 4,
        micro_batch: 1,
        global_batch: Some(8),
        schedule,
        virtual_stages: v,
        flash_attention: true,
        ..PlanSpec::default()
    }
}

/// The compute of the slowest stage over the iteration, `m · T_stage` (TP 1: no exposed
/// TP, EP or CP communication in it; the interleaved schedule's PP interference is
/// outside the stage).
fn work(e: &Estimate) -> f64 {
    e.time.forward.get() + e.time.backward.get() + e.time.recompute.get()
}

const NET: &str = "switch(4, 100GB/s, 1us)";

/// Per micro-batch, forward + backward: one layer ℓ, the embedding E and the head H, from
/// stage differences (see [`embedding_and_head_are_their_own_terms`]).
fn parts() -> (f64, f64, f64) {
    let (a, b, c) = (stage([9, 7]), stage([10, 6]), stage([7, 9]));
    let l = (b.0 - a.0) + (b.1 - a.1);
    (l, a.0 + a.1 - 9.0 * l, c.0 + c.1 - 9.0 * l)
}

#[test]
fn one_f_one_b_and_gpipe_bubble_is_p_minus_1_stage_times() {
    // Equal stages of 4 layers: textbook bubble (p − 1)·T_stage = (p − 1)/m of the slowest
    // stage's compute, 3/8. Exactly, the first stage also runs the embedding E and the
    // last the head H, and the fill and drain pass through every stage but the slowest
    // once: Σ_i T_i − max_i T_i = 16ℓ + E + H − (4ℓ + max(E, H)).
    let (m, sys) = (model(), system(NET));
    let (l, e, h) = parts();
    for schedule in [Schedule::OneFOneB, Schedule::Gpipe] {
        let est = run(&m, &sys, pp4(schedule, 1));
        let what = format!("{schedule:?} bubble");
        close(est.time.bubble.get(), 12.0 * l + e.min(h), 1e-6, &what);
        close(est.time.bubble.get(), 3.0 / 8.0 * work(&est), 1e-2, &what);
    }
}

#[test]
fn interleaved_bubble_is_divided_by_the_virtual_stages() {
    // v = 2 chunks of 2 layers per stage: textbook (p − 1)/(v·m) of the slowest stage's
    // compute, 3/16; exactly (Σ_i T_i − max_i T_i)/v.
    let (m, sys) = (model(), system(NET));
    let (l, e, h) = parts();
    let est = run(&m, &sys, pp4(Schedule::Interleaved, 2));
    let what = "interleaved bubble";
    close(
        est.time.bubble.get(),
        (12.0 * l + e.min(h)) / 2.0,
        1e-6,
        what,
    );
    close(est.time.bubble.get(), 3.0 / 16.0 * work(&est), 1e-2, what);
}

#[test]
fn uneven_stages_bubble_is_the_other_stages_time() {
    // 2 layers on the first and the last stage, 6 on each middle one: the slowest stage
    // takes 6ℓ and the fill and drain pass through the others once: Σ_i T_i − max_i T_i =
    // (16 − 6)·ℓ + E + H, about 10/6 of a stage time, 10/(6·8) of the slowest stage's
    // compute (the even split's (p − 1) = 3 stage times would be 3/8).
    let (m, sys) = (model(), system(NET));
    let (l, e, h) = parts();
    let est = run(
        &m,
        &sys,
        PlanSpec {
            first_stage_layers: Some(2),
            last_stage_layers: Some(2),
            ..pp4(Schedule::OneFOneB, 1)
        },
    );
    assert_eq!((est.plan.stages.first, est.plan.stages.mid_max), (2, 6));
    let what = "uneven bubble";
    close(est.time.bubble.get(), (L - 6.0) * l + e + h, 1e-6, what);
    close(
        est.time.bubble.get(),
        (L - 6.0) / 6.0 / 8.0 * work(&est),
        1e-2,
        what,
    );
}

#[test]
fn pipeline_sends_pay_latency_and_the_tp_gather_without_sp() {
    // TP 2 on a 2-port switch (200 GB/s, 1 µs), PP 4 on a 4-port switch (50 GB/s, 2 µs),
    // no sequence parallelism. One transfer sends the b·s·h/t bf16 activation to the next
    // stage (α + n/B) and the receiver all-gathers it back over TP (scatter/gather
    // optimisation, Narayanan et al. SC'21 §4.1): (t−1)·α + (t−1)/t · b·s·h·2/B.
    // 1F1B: the 2(p − 1) fill/drain transfers and the 2 per micro-batch are exposed.
    // Tied embeddings: the first and the last stage all-reduce the embedding gradient
    // V·h/t (bf16) over a pair: 2·(2−1)·α + 2·(2−1)/2 · n/B.
    let sys = system("switch(2, 200GB/s, 1us) x switch(4, 50GB/s, 2us)");
    let e = run(
        &model(),
        &sys,
        PlanSpec {
            gpus: Some(8),
            tp: 2,
            ..pp4(Schedule::OneFOneB, 1)
        },
    );
    let act = S * H * 2.0;
    let hop = send(act / 2.0, 2e-6, 50e9) + ring_half(act, 2.0, 1e-6, 200e9);
    let transfers = 2.0 * 3.0 + 8.0 * 2.0;
    let sync = all_reduce(V * H / 2.0 * 2.0, 2.0, 2e-6, 50e9);
    let pp = e.time.class(CommClass::Pp);
    close(pp.exposed.get(), transfers * hop + sync, 1e-9, "PP exposed");
    assert_eq!(pp.hidden.get(), 0.0);
    close(
        pp.bytes.get(),
        8.0 * 2.0 * act / 2.0 + V * H / 2.0 * 2.0,
        1e-12,
        "PP bytes",
    );
}

#[test]
fn interleaved_sends_hide_in_the_steady_state_only() {
    // Interleaved (v = 2): the 2(p − 1) fill/drain transfers are exposed, the 2v = 4 per
    // micro-batch run beside the next chunk's compute (overlap_p2p_comm): with 1 µs and
    // 100 GB/s each is far shorter than a chunk, so all of them hide.
    // One transfer: α + b·s·h·2/B; no TP gather (TP 1), the embedding sync over the
    // 4-port switch pair: 2α + V·h·2/B.
    let (m, sys) = (model(), system(NET));
    let e = run(&m, &sys, pp4(Schedule::Interleaved, 2));
    let hop = send(S * H * 2.0, 1e-6, 100e9);
    let sync = all_reduce(V * H * 2.0, 2.0, 1e-6, 100e9);
    let pp = e.time.class(CommClass::Pp);
    close(pp.exposed.get(), 6.0 * hop + sync, 1e-9, "PP exposed");
    close(pp.hidden.get(), 8.0 * 4.0 * hop, 1e-9, "PP hidden");
}

#[test]
fn an_mtp_stage_all_reduces_its_embedding_copy() {
    // Untied weights, so no tied-embedding sync; with one MTP module the last stage keeps
    // its own copy of the word embedding for it (Megatron-core `GPTModel` builds
    // `self.embedding` where `mtp_process`) and all-reduces its gradient with the first
    // stage's once per iteration (`finalize_model_grads.py`, `_allreduce_word_embedding_grads`):
    // V·h (bf16 gradient, TP 1) over the 4-port switch pair, 2α + V·h·2/B, beside the
    // 2(p − 1) + 2m = 22 exposed 1F1B transfers of α + b·s·h·2/B each.
    let sys = system(NET);
    let hop = send(S * H * 2.0, 1e-6, 100e9);
    let transfers = 2.0 * 3.0 + 8.0 * 2.0;
    let sync = all_reduce(V * H * 2.0, 2.0, 1e-6, 100e9);
    let pp = |mtp: u32| {
        run(&with_mtp(mtp, false), &sys, pp4(Schedule::OneFOneB, 1))
            .time
            .class(CommClass::Pp)
            .exposed
            .get()
    };
    close(pp(0), transfers * hop, 1e-9, "PP exposed, untied, no MTP");
    close(
        pp(1),
        transfers * hop + sync,
        1e-9,
        "PP exposed with the MTP stage's sync",
    );
    // The copy's weights: the last stage (its 4 layers, the head and the MTP module) is the
    // busiest device; untied it also holds the V·h copy (bf16), tied the output layer is
    // that copy, so the two differ by exactly V·h·2 B.
    let weights = |m: &astrolabe::model::Model| {
        run(m, &sys, pp4(Schedule::OneFOneB, 1))
            .memory
            .weights
            .get()
    };
    close(
        weights(&with_mtp(1, false)) - weights(&with_mtp(1, true)),
        V * H * 2.0,
        1e-9,
        "the MTP stage's embedding copy",
    );
}

/// The terms model with `mtp` MTP modules, tied (`tied = true`) or untied.
fn with_mtp(mtp: u32, tied: bool) -> astrolabe::model::Model {
    let untied = if tied {
        ""
    } else {
        "tied_embeddings = false\n"
    };
    let text = terms_support::MODEL.replace(
        "seq_len = 2048\n",
        &format!("seq_len = 2048\n{untied}mtp_layers = {mtp}\n"),
    );
    let spec: astrolabe::model::ModelSpec =
        astrolabe::catalog::parse_toml(&text, std::path::Path::new("terms-mtp.toml")).unwrap();
    astrolabe::model::Model::from_spec(spec).unwrap()
}

#[test]
fn mtp_modules_apart_from_the_loss_by_hand() {
    // Megatron-core's `mtp_standalone`: a layout may put the MTP modules in the last virtual
    // stage of a rank other than the last. PP 4 × v 2 (stage k on rank k mod 4), the terms
    // model with one tied MTP module, m = 8:
    //   A  "Ett|ttt|tttt|tt|tt|tt|tm|L": ranks hold 4 (+ embedding E), 5, 5 + the module M
    //      (stage 6 is rank 2's last), 2 + the loss (the head H twice: the model's and the
    //      module's, `process_mtp_loss` runs in the post-process stage);
    //   B  "Ett|ttt|tttt|tt|tt|tt|t|mL": the same split with the module beside the loss.
    // Σ_i T_i = 16ℓ + E + M + 2H in both. The slowest stage is rank 2 in A, 5ℓ + M, and 5ℓ in
    // B (rank 3 there is 2ℓ + M + 2H, about 3ℓ): A's compute is m·M longer, its bubble
    // (Σ_i T_i − max_i T_i)/v is M/2 shorter. M comes from the same model on one GPU with
    // and without the module, (Δ work)/m = M + H, less the head H of `parts`.
    let sys = system(NET);
    let m1 = with_mtp(1, true);
    let one_gpu = |m: &astrolabe::model::Model| {
        work(&run(
            m,
            &sys,
            PlanSpec {
                gpus: Some(1),
                micro_batch: 1,
                global_batch: Some(8),
                flash_attention: true,
                ..PlanSpec::default()
            },
        ))
    };
    let (_, _, h) = parts();
    let module = (one_gpu(&m1) - one_gpu(&with_mtp(0, true))) / 8.0 - h;
    let layout = |text: &str| {
        run(
            &m1,
            &sys,
            PlanSpec {
                pipeline_layout: Some(text.into()),
                ..pp4(Schedule::OneFOneB, 1)
            },
        )
    };
    let a = layout("Ett|ttt|tttt|tt|tt|tt|tm|L");
    let b = layout("Ett|ttt|tttt|tt|tt|tt|t|mL");
    assert_eq!(a.plan.stages.mtp_apart, Some((2, 5)));
    assert_eq!(b.plan.stages.mtp_apart, None);
    close(
        work(&a) - work(&b),
        8.0 * module,
        1e-6,
        "the module on the slowest rank",
    );
    close(
        b.time.bubble.get() - a.time.bubble.get(),
        module / 2.0,
        1e-6,
        "the module leaves the bubble",
    );
    // Weights of the busiest device: A's rank 2 holds 5 layers, the module (a layer, its
    // 2h × h projection and two norms) and a copy of the word embedding (a middle rank has
    // no output layer to share it with); B's busiest holds 5 layers (its last stage, 2
    // layers, the head and the module, is lighter). 2 B each.
    let weights = |e: &astrolabe::estimate::Estimate| e.memory.weights.get();
    close(
        weights(&a) - weights(&b),
        (terms_support::layer_params() + 2.0 * H * H + 2.0 * H + V * H) * 2.0,
        1e-9,
        "the module and its embedding copy on rank 2",
    );
    // At TP 2 every one of those parameters is split two ways.
    let tp2 = |text: &str| {
        run(
            &m1,
            &system("switch(2, 200GB/s, 1us) x switch(4, 100GB/s, 1us)"),
            PlanSpec {
                gpus: Some(8),
                tp: 2,
                pipeline_layout: Some(text.into()),
                ..pp4(Schedule::OneFOneB, 1)
            },
        )
    };
    close(
        weights(&tp2("Ett|ttt|tttt|tt|tt|tt|tm|L")) - weights(&tp2("Ett|ttt|tttt|tt|tt|tt|t|mL")),
        (terms_support::layer_params() + 2.0 * H * H + 2.0 * H + V * H) / 2.0 * 2.0,
        1e-9,
        "the module and its embedding copy on rank 2, TP 2",
    );
    // On rank 0 (PP 2 × v 2, "Et*8|t*8|m|L": stage 2 is rank 0's last) the module joins the
    // embedding's rank, which needs no copy: that rank takes 8ℓ + E + M per micro-batch and
    // is the slowest (rank 1: 8ℓ + 2H), and its weights are those of the model without the
    // module on the same split plus the module's.
    let pp2 = |m: &astrolabe::model::Model, text: &str| {
        run(
            m,
            &sys,
            PlanSpec {
                gpus: Some(2),
                pp: 2,
                pipeline_layout: Some(text.into()),
                ..pp4(Schedule::OneFOneB, 1)
            },
        )
    };
    let (l, e, _) = parts();
    let first = pp2(&m1, "Et*8|t*8|m|L");
    assert_eq!(first.plan.stages.mtp_apart, Some((0, 8)));
    close(
        work(&first) / 8.0,
        8.0 * l + e + module,
        1e-6,
        "the module on rank 0",
    );
    close(
        weights(&first) - weights(&pp2(&with_mtp(0, true), "Et*8|t*8||L")),
        (terms_support::layer_params() + 2.0 * H * H + 2.0 * H) * 2.0,
        1e-9,
        "the module on rank 0, no copy",
    );
}

/// Forward and backward compute of the slowest stage per micro-batch, two GPUs, PP 2 with
/// `layers` per stage, m = 8.
fn stage(layers: [u32; 2]) -> (f64, f64) {
    let e = run(
        &model(),
        &system("switch(2, 100GB/s, 1us)"),
        PlanSpec {
            gpus: Some(2),
            pp: 2,
            layers_per_stage: Some(layers.to_vec()),
            micro_batch: 1,
            global_batch: Some(8),
            flash_attention: true,
            ..PlanSpec::default()
        },
    );
    (e.time.forward.get() / 8.0, e.time.backward.get() / 8.0)
}

#[test]
fn embedding_and_head_are_their_own_terms() {
    // The first stage runs the embedding, the last the final LayerNorm, the logits GEMM
    // and the cross-entropy. With 9 + 7 layers the first stage is the slowest, with 10 + 6
    // too: one layer's time ℓ is their difference and the embedding is what is left,
    // E = T(9 + 7) − 9ℓ; with 7 + 9 the last is the slowest: head = T(7 + 9) − 9ℓ.
    let (a, b, c) = (stage([9, 7]), stage([10, 6]), stage([7, 9]));
    let layer = (b.0 - a.0, b.1 - a.1);
    let r = S * H; // b·s·h elements
    // Embedding, memory-bound: forward gathers the word and position rows and adds them,
    // with dropout, 15 B per element in 3 kernels; backward 8 B in 2 (layer.rs `ends`).
    close(
        a.0 - 9.0 * layer.0,
        mem(15.0 * r, 3.0),
        1e-6,
        "embedding forward",
    );
    close(
        a.1 - 9.0 * layer.1,
        mem(8.0 * r, 2.0),
        1e-6,
        "embedding backward",
    );
    // Head: logits GEMM 2048 × 128 × 4096 (8 tiles of 256×128 in one wave of 108:
    // q = 2048·128/(108·256·128) = 2048/27648), final LayerNorm 4 B per element and the
    // cross-entropy 38 B per logit in 7 kernels. Backward: data gradient 2048 × 4096 × 128
    // (256 tiles, 3 waves: q = 2048·4096/(3·108·256·128)) and weight gradient
    // 4096 × 128 × 2048 (16 tiles, q = 4096/27648), LayerNorm 6 B and cross-entropy 14 B
    // per logit in 3 kernels.
    let logits = S * V;
    let fwd = gemm(S, V, H, 2048.0 / 27648.0) + mem(4.0 * r + 38.0 * logits, 7.0);
    let bwd = gemm(S, H, V, S * H / (3.0 * 108.0 * 256.0 * 128.0))
        + gemm(H, V, S, 4096.0 / 27648.0)
        + mem(6.0 * r + 14.0 * logits, 3.0);
    close(c.0 - 9.0 * layer.0, fwd, 1e-6, "head forward");
    close(c.1 - 9.0 * layer.1, bwd, 1e-6, "head backward");
}

/// The bubble counts a stage's whole per-micro-batch time, its exposed TP and CP
/// communication and the interference included, not only its compute. PP 4 split 2, 6, 6,
/// 2 (the slowest stage runs 6 layers), with TP 2 or CP 2 across a slow 20 GB/s link (21 %
/// and 20 % of the stage exposed, 2 % interference): as in
/// [`uneven_stages_bubble_is_the_other_stages_time`], `Σ_i T_i − max_i T_i` = 10 layers
/// and E + H, that is 10/6 of the slowest stage's time `T` and E + H; `m·T` is the iteration less
/// the bubble, the optimizer and the exposed PP and DP time. E + H is 0.8 % of the bubble
/// under CP (tolerance 1 %) and 2.3 % under TP 2, whose vocabulary-parallel embedding
/// all-reduces its output over the slow link (tolerance 3 %).
#[test]
fn bubble_counts_exposed_communication_and_interference() {
    let sys = system("switch(2, 20GB/s, 1us) x switch(4, 100GB/s, 1us)");
    for (tp, cp, tol) in [(2, 1, 3e-2), (1, 2, 1e-2)] {
        let est = run(
            &model(),
            &sys,
            PlanSpec {
                gpus: Some(8),
                tp,
                cp,
                first_stage_layers: Some(2),
                last_stage_layers: Some(2),
                ..pp4(Schedule::OneFOneB, 1)
            },
        );
        let t = &est.time;
        let exposed = |c: CommClass| t.class(c).exposed.get();
        let stage_total = t.total.get()
            - t.bubble.get()
            - t.optimizer.get()
            - exposed(CommClass::Pp)
            - exposed(CommClass::Dp);
        let what = format!("bubble at TP {tp}, CP {cp}");
        // The communication is a large part of the stage: leaving it out would show.
        let comm = exposed(CommClass::Tp) + exposed(CommClass::Cp);
        assert!(comm > 0.15 * stage_total, "{what}");
        assert!(t.interference.get() > 0.015 * stage_total, "{what}");
        close(t.bubble.get(), 10.0 / 6.0 * stage_total / 8.0, tol, &what);
    }
}
