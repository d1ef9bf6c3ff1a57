//! Chakra memory nodes of offloaded plans and ASTRA-sim's remote memory: `export astra
//! --offload` writes MEM_LOAD/MEM_STORE nodes where the plan moves data and a
//! remote-memory JSON for its tier; Astrolabe's reader times them as ASTRA-sim's
//! analytical remote memory does (`AnalyticalRemoteMemory::get_remote_mem_runtime`,
//! astra-memory-analytical 641cce85: `remote-mem-latency + ⌊tensor_size / remote-mem-bw⌋`
//! ns, FIFO per node or pool), every number below worked out by hand.
//!
//! The model: 4 layers, h = 1024, 16 heads, V = 32000, s = 1024, learned positions.
//! Parameters: 12h²·L + 13h·L + V·h + s·h + 2h = 50331648 + 53248 + 32768000 +
//! 1048576 + 2048 = 84203520 (QKV, projection and the two MLP matrices 12h², their biases and two
//! LayerNorms 13h per layer; the embeddings; the final LayerNorm).

use assert_cmd::Command;
use astrolabe::astra::chakra::{self, node_type};
use astrolabe::astra::critical;
use astrolabe::astra::export;
use astrolabe::astra::iteration;
use astrolabe::astra::model::{Impl, Knobs};
use astrolabe::astra::network_yaml::AstraNetwork;
use astrolabe::astra::system_json::{AstraSystem, MemoryType, RemoteMemory};
use astrolabe::astra::trace::{self, Kind};
use astrolabe::estimate::scenario::Scenario;
use std::path::PathBuf;

const MODEL: &str = "name = \"tiny\"\n[transformer]\nlayers = 4\nhidden = 1024\nheads = 16\nvocab = 32000\nseq_len = 1024\n";

/// One 8-GPU switch and a host tier of 25 GB/s per GPU, 2 µs per transfer, and a CPU
/// that updates 8·10⁸ parameters/s for the 8 GPUs (10⁸ each).
const SYSTEM: &str = r#"name = "host8"
device = "a100-80gb"
[[network.dims]]
kind = "switch"
size = 8
bandwidth = "240 GB/s"
latency = "3.4 us"
[[memory_tiers]]
kind = "host"
capacity = "1TB"
shared_by = 8
bandwidth = "25 GB/s"
latency = "2 us"
adam_params_per_s = 8e8
[[memory_tiers]]
kind = "nvme"
capacity = "16TB"
shared_by = 8
bandwidth = "2 GB/s"
latency = "100 us"
"#;

fn dir(name: &str) -> PathBuf {
    let d = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("astrolabe_off_{name}_{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    for (file, text) in [("tiny.toml", MODEL), ("host8.toml", SYSTEM)] {
        std::fs::write(d.join(file), text).unwrap();
    }
    d
}

/// `tensor_size` of a memory node.
fn size(n: &chakra::Node) -> u64 {
    n.attr_u64("tensor_size").unwrap().unwrap()
}

/// Exported with `--offload optimizer` (8 GPUs, dp 8, ZeRO-1, 16 samples of 1: m = 2),
/// read back from the files, every memory node is where and what the hand count says,
/// and the reader times it as ASTRA-sim's remote memory would.
#[test]
fn optimizer_offload_round_trips_through_our_reader() {
    let d = dir("opt");
    let out = d.join("out");
    Command::cargo_bin("astrolabe")
        .unwrap()
        .current_dir(&d)
        .args([
            "export",
            "astra",
            "--model",
            "tiny.toml",
            "--system",
            "host8.toml",
        ])
        .args([
            "--gpus",
            "8",
            "--tp",
            "1",
            "--pp",
            "1",
            "--global-batch",
            "16",
        ])
        .args([
            "--micro-batch",
            "1",
            "--zero",
            "1",
            "--offload",
            "optimizer",
        ])
        .arg("--out")
        .arg(&out)
        .assert()
        .success();
    // The tier as ASTRA-sim's per-NPU remote memory: 25 GB/s, 2 µs = 2000 ns.
    let mem = RemoteMemory::read(&out.join("remote_memory.json")).unwrap();
    assert_eq!(mem.memory_type, MemoryType::PerNpu);
    assert_eq!((mem.bw_gbps, mem.latency_ns), (25, 2000));
    // ZeRO-1 over 8: the optimizer shard is 84203520 / 8 = 10525440 parameters; its bf16
    // gradients go down and its bf16 parameters come back up, 2 B each, one transfer
    // per layer: 10525440 · 2 / 4 = 5262720 B. CPU Adam: 10525440 / 10⁸ s = 105254.4 µs.
    let (grad, param, cpu_us) = (5262720u64, 5262720u64, 105254u64);
    for r in 0..8usize {
        let t = chakra::read_file(&chakra::rank_path(&out.join("workload"), r)).unwrap();
        let by_id = |id: u64| &t.nodes[id as usize];
        let stores: Vec<_> = t
            .nodes
            .iter()
            .filter(|n| n.r#type == node_type::MEM_STORE)
            .collect();
        let loads: Vec<_> = t
            .nodes
            .iter()
            .filter(|n| n.r#type == node_type::MEM_LOAD)
            .collect();
        let cpu: Vec<_> = t
            .nodes
            .iter()
            .filter(|n| n.attr("is_cpu_op").and_then(|a| a.as_i128()) == Some(1))
            .collect();
        // 4 layers × 1 gradient store, 1 CPU step, 4 layers × 1 parameter load.
        assert_eq!(
            (stores.len(), cpu.len(), loads.len()),
            (4, 1, 4),
            "rank {r}"
        );
        let c = cpu[0];
        assert_eq!(c.name, "optimizer.step@0_CPU");
        assert_eq!(c.r#type, node_type::COMP);
        assert_eq!(c.duration_micros, cpu_us);
        let names: Vec<&str> = stores.iter().map(|s| s.name.as_str()).collect();
        let want: Vec<String> = (0..4)
            .rev()
            .map(|l| format!("transformer.{l}.grad@0_STORE"))
            .collect();
        assert_eq!(names, want);
        for s in &stores {
            assert_eq!(size(s), grad, "{}", s.name);
            // After the layer's DP reduction (ZeRO-1: reduce-scatter, all-gather).
            let dep = by_id(s.data_deps[0]);
            assert!(
                dep.name.ends_with("_sharded_grad@0_AG_COMM"),
                "{}",
                dep.name
            );
            assert!(c.data_deps.contains(&s.id), "CPU step waits for {}", s.name);
        }
        // The CPU step also waits for the embedding's DP reduction.
        assert_eq!(c.data_deps.len(), 5);
        for l in &loads {
            assert_eq!(size(l), param, "{}", l.name);
            assert_eq!(l.data_deps, vec![c.id], "{} after the CPU step", l.name);
        }
    }
    // Read back with our reader: each memory node takes 2000 + ⌊5262720 / 25⌋ =
    // 2000 + 210508 = 212508 ns; the CPU step is replayed, 105254 µs.
    let net = AstraNetwork::read(&out.join("network.yml")).unwrap();
    let mut sys = AstraSystem::read(&out.join("system.json")).unwrap();
    sys.remote = mem;
    let groups = trace::read_comm_groups(
        &std::fs::read_to_string(out.join("comm_groups.json")).unwrap(),
        "g",
    )
    .unwrap();
    let knobs = Knobs::default();
    let ctx = trace::Ctx::new(&net, &sys, &knobs, Some(&groups));
    let w = trace::load(&out.join("workload"), &ctx).unwrap();
    let tasks = || w.npus.iter().flat_map(|n| &n.tasks);
    let mem_ns: Vec<u64> = tasks()
        .filter(|t| t.kind == Kind::Mem)
        .map(|t| t.ns)
        .collect();
    assert_eq!(mem_ns, vec![212508; 8 * 8]);
    let cpu_ns: Vec<u64> = tasks()
        .filter(|t| t.kind == Kind::Cpu)
        .map(|t| t.ns)
        .collect();
    assert_eq!(cpu_ns, vec![105254000; 8]);
    // The four loads after the CPU step run one after another in the communication slot:
    // the last NPU finishes at least 105254000 + 4 · 212508 ns after the CPU step starts.
    let est = critical::critical_path(&w).unwrap();
    assert!(est.finish_ns > 105254000 + 4 * 212508);
    std::fs::remove_dir_all(&d).ok();
}

fn scenario(d: &std::path::Path, name: &str, plan: &str) -> Scenario {
    let text = format!("model = \"tiny.toml\"\nsystem = \"host8.toml\"\n[plan]\n{plan}\n");
    let p = d.join(format!("{name}.toml"));
    std::fs::write(&p, text).unwrap();
    Scenario::load(&p).unwrap()
}

/// Distinct (node type, tensor_size) pairs in first-seen order.
type Sizes = Vec<(i32, u64)>;

/// Per rank: (MEM_LOAD nodes, MEM_STORE nodes, CPU nodes, sizes seen by type).
fn mem_nodes(t: &chakra::TraceFile) -> (usize, usize, usize, Sizes) {
    let (mut ld, mut st, mut cpu, mut sizes) = (0, 0, 0, Vec::new());
    for n in &t.nodes {
        match n.r#type {
            node_type::MEM_LOAD => ld += 1,
            node_type::MEM_STORE => st += 1,
            node_type::COMP if n.attr("is_cpu_op").is_some() => cpu += 1,
            _ => continue,
        }
        if n.r#type != node_type::COMP {
            let s = (n.r#type, size(n));
            if !sizes.contains(&s) {
                sizes.push(s);
            }
        }
        for dep in n.data_deps.iter().chain(&n.ctrl_deps) {
            assert!(*dep < n.id, "node {} depends on a later node", n.name);
        }
    }
    (ld, st, cpu, sizes)
}

/// Each offload kind's nodes, counted by hand on 8 GPUs (dp 8, pp 1, m = 2 micro-batches
/// of 1, 4 layers), and the closed-form node count (checked before writing) equals the
/// traces' nodes, rank by rank.
#[test]
fn every_offload_kind_has_its_hand_counted_memory_nodes() {
    let d = dir("kinds");
    let base = "gpus = 8\ntp = 1\npp = 1\nglobal_batch = 16\nmicro_batch = 1";
    let (ld, st) = (node_type::MEM_LOAD, node_type::MEM_STORE);
    // (plan, loads, stores, CPU nodes, sizes) per rank:
    let cases: [(&str, usize, usize, usize, Sizes); 5] = [
        // params (ZeRO-3, DeepSpeed 2021 without recomputation: one gather per pass): the
        // shard 84203520/8 = 10525440 params · 2 B / 4 layers = 5262720 B, loaded before
        // each forward and backward of each layer: 2 · 4 · 2 = 16 loads; the GPU step
        // writes the shard back, one store per layer.
        (
            "zero = 3\noffload = \"params\"",
            16,
            4,
            0,
            vec![(ld, 5262720), (st, 5262720)],
        ),
        // With full recomputation DeepSpeed 2021 gathers again for the recomputed
        // forward: 3 loads per layer and micro-batch, 2 · 4 · 3 = 24.
        (
            "zero = 3\nrecompute = \"full\"\noffload = \"params\"",
            24,
            4,
            0,
            vec![(ld, 5262720), (st, 5262720)],
        ),
        // activations with full recomputation: each layer keeps its bf16 input,
        // 2·s·b·h = 2 · 1024 · 1 · 1024 = 2097152 B, stored in forward and loaded in
        // backward: 2 · 4 of each.
        (
            "recompute = \"full\"\noffload = \"activations\"",
            8,
            8,
            0,
            vec![(st, 2097152), (ld, 2097152)],
        ),
        // ZeRO-Offload (ZeRO-1): the shard's gradients stream down after each layer's
        // backward, bf16 10525440 · 2 / 4 = 5262720 B on the first micro-batch and fp32
        // 10525440 · 4 / 4 = 10525440 B on the last; then the CPU step and the bf16
        // parameters up, 5262720 B per layer.
        (
            "zero = 1\noffload = \"zero-offload\"",
            4,
            8,
            1,
            vec![(st, 5262720), (st, 10525440), (ld, 5262720)],
        ),
        // ZeRO-Infinity on the host (ZeRO-3): parameter loads as for params (16), the
        // streamed gradients (8 stores), the CPU step; the updated parameters stay on the
        // host, so nothing moves after it.
        (
            "zero = 3\noffload = \"zero-infinity:host\"",
            16,
            8,
            1,
            vec![(ld, 5262720), (st, 5262720), (st, 10525440)],
        ),
    ];
    for (i, (plan, loads, stores, cpus, sizes)) in cases.into_iter().enumerate() {
        let sc = scenario(&d, &format!("k{i}"), &format!("{base}\n{plan}"));
        let est = astrolabe::estimate::evaluate(&sc.model, &sc.system, &sc.plan).unwrap();
        let g = iteration::Generator::offloaded(
            &sc.model,
            &sc.plan,
            &est.time.offload,
            &sc.system.tiers,
        )
        .unwrap();
        let mut total = 0u128;
        for r in 0..g.npus() {
            let t = g.trace(r);
            assert_eq!(t.nodes.len() as u64, g.stage_nodes(0), "{plan} rank {r}");
            total += t.nodes.len() as u128;
            let (l, s, c, seen) = mem_nodes(&t);
            assert_eq!((l, s, c), (loads, stores, cpus), "{plan} rank {r}");
            assert_eq!(seen, sizes, "{plan} rank {r}");
        }
        assert_eq!(total, g.total_nodes(), "{plan}");
        assert_eq!(g.remote_memory().memory_type, MemoryType::PerNpu);
    }
    // Without offload the count is the plain iteration's, so the memory nodes are all
    // counted above and none elsewhere: 4 layers · 2 blocks · 2 passes · 2 micro-batches
    // = 32 COMP nodes, the logits forward and backward per micro-batch (4), and ZeRO-1's
    // reduce-scatter and all-gather per layer and for the embedding (10).
    let sc = scenario(&d, "none", &format!("{base}\nzero = 1"));
    let g = iteration::Generator::new(&sc.model, &sc.plan).unwrap();
    assert_eq!(g.stage_nodes(0), 32 + 4 + 10);
    // Through the offload path, a plan without offload writes the same nodes and no
    // remote memory.
    assert!(
        iteration::offload_tier(&sc.plan, &sc.system.tiers)
            .unwrap()
            .is_none()
    );
    let est = astrolabe::estimate::evaluate(&sc.model, &sc.system, &sc.plan).unwrap();
    let cost = &est.time.offload;
    let g = iteration::Generator::offloaded(&sc.model, &sc.plan, cost, &sc.system.tiers).unwrap();
    assert_eq!(g.stage_nodes(0), 32 + 4 + 10);
    assert_eq!(g.trace(0).nodes.len(), 32 + 4 + 10);
    assert_eq!(*g.remote_memory(), RemoteMemory::NONE);
    std::fs::remove_dir_all(&d).ok();
}

/// A plan that moves data to two tiers cannot be one ASTRA-sim remote memory, and an
/// offloaded plan needs its estimate's transfers.
#[test]
fn two_tiers_and_missing_costs_are_clear_errors() {
    let d = dir("two");
    let sc = scenario(
        &d,
        "two",
        "gpus = 8\ntp = 1\npp = 1\nglobal_batch = 16\noffload = \"optimizer:nvme,activations\"",
    );
    let est = astrolabe::estimate::evaluate(&sc.model, &sc.system, &sc.plan).unwrap();
    let e =
        iteration::Generator::offloaded(&sc.model, &sc.plan, &est.time.offload, &sc.system.tiers)
            .err()
            .unwrap()
            .to_string();
    assert!(
        e.contains("host and nvme") && e.contains("one remote"),
        "{e}"
    );
    let e = iteration::Generator::new(&sc.model, &sc.plan)
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("offloaded"), "{e}");
    std::fs::remove_dir_all(&d).ok();
}

/// Every memory type ASTRA-sim's analytical remote memory knows parses with its fields,
/// maps onto a tier, and bad values name the file and the key.
#[test]
fn remote_memory_json_each_type_and_errors() {
    let per_npu = r#"{"memory-type": "PER_NPU_MEMORY_EXPANSION", "remote-mem-latency": 500, "remote-mem-bw": 50}"#;
    let m = RemoteMemory::parse(per_npu, "m.json").unwrap();
    assert_eq!(
        (m.memory_type, m.latency_ns, m.bw_gbps),
        (MemoryType::PerNpu, 500, 50)
    );
    // 50 GB/s = 5·10¹⁰ B/s per NPU; 500 ns.
    let t = m.tier(16).unwrap();
    assert_eq!(t.bandwidth.get(), 5e10);
    assert!(
        (t.latency.get() - 5e-7).abs() < 1e-20,
        "{}",
        t.latency.get()
    );
    // Per node of 4 NPUs, one access at a time: each NPU's share is 50/4 = 12.5 GB/s.
    let per_node = r#"{"memory-type": "PER_NODE_MEMORY_EXPANSION", "remote-mem-latency": 500,
        "remote-mem-bw": 50, "num-nodes": 4, "num-npus-per-node": 4}"#;
    let m = RemoteMemory::parse(per_node, "m.json").unwrap();
    assert_eq!((m.num_nodes, m.npus_per_node), (4, 4));
    assert_eq!(m.tier(16).unwrap().bandwidth.get(), 1.25e10);
    assert_eq!(
        (m.queue(0), m.queue(3), m.queue(4), m.queue(15)),
        (Some(0), Some(0), Some(1), Some(3))
    );
    assert!(m.check_npus(16, "m.json").is_ok());
    let e = m.check_npus(17, "m.json").unwrap_err().to_string();
    assert!(
        e.contains("m.json") && e.contains("num-nodes") && e.contains("16 NPUs"),
        "{e}"
    );
    // The pool: one access at a time for all 16: 50/16 = 3.125 GB/s each.
    let pool = r#"{"memory-type": "MEMORY_POOL", "remote-mem-latency": 0, "remote-mem-bw": 50}"#;
    let m = RemoteMemory::parse(pool, "m.json").unwrap();
    assert_eq!(m.tier(16).unwrap().bandwidth.get(), 3.125e9);
    assert_eq!((m.queue(0), m.queue(9)), (Some(0), Some(0)));
    let none = RemoteMemory::parse(r#"{"memory-type": "NO_MEMORY_EXPANSION"}"#, "m.json").unwrap();
    assert!(none.tier(16).is_none() && !none.is_remote());
    // Each type writes what it reads.
    for text in [per_npu, per_node, pool] {
        let m = RemoteMemory::parse(text, "m.json").unwrap();
        assert_eq!(RemoteMemory::parse(&m.to_json(), "back").unwrap(), m);
    }
    for (text, key) in [
        (r#"{"memory-type": "CXL_POOL"}"#, "memory-type"),
        (r#"{"remote-mem-bw": 50}"#, "memory-type"),
        (r#"{"memory-type": "MEMORY_POOL"}"#, "remote-mem-bw"),
        (
            r#"{"memory-type": "MEMORY_POOL", "remote-mem-bw": 12.5}"#,
            "remote-mem-bw",
        ),
        (
            r#"{"memory-type": "MEMORY_POOL", "remote-mem-bw": 5, "remote-mem-latency": -1}"#,
            "remote-mem-latency",
        ),
        (
            r#"{"memory-type": "PER_NODE_MEMORY_EXPANSION", "remote-mem-bw": 5, "num-nodes": 2}"#,
            "num-npus-per-node",
        ),
        (
            r#"{"memory-type": "MEMORY_POOL", "remote-mem-bw": 5, "remote-mem-bandwidth": 5}"#,
            "remote-mem-bandwidth",
        ),
    ] {
        let e = RemoteMemory::parse(text, "m.json").unwrap_err().to_string();
        assert!(e.contains("m.json") && e.contains(key), "{text}: {e}");
    }
    let e = RemoteMemory::parse(r#"{"memory-type": "CXL_POOL"}"#, "m.json")
        .unwrap_err()
        .to_string();
    assert!(e.contains("MEMORY_POOL"), "names the valid types: {e}");
}

/// A hand-built workload on 2 NPUs of one switch: each NPU loads 10⁶ B from remote memory
/// at 25 GB/s with 2000 ns latency: 2000 + ⌊10⁶/25⌋ = 42000 ns per access.
fn two_npu_finish(mem: &RemoteMemory, nodes: &[chakra::Node]) -> u64 {
    two_npu(mem, nodes).unwrap()
}

fn two_npu(mem: &RemoteMemory, nodes: &[chakra::Node]) -> astrolabe::error::Result<u64> {
    let net = export::network_from_topology(
        &astrolabe::network::Topology::parse("switch(2, 100GB/s, 1us)").unwrap(),
    );
    let mut sys = export::default_system(1, Impl::Ring);
    sys.remote = mem.clone();
    let knobs = Knobs::default();
    let ctx = trace::Ctx::new(&net, &sys, &knobs, None);
    let t = chakra::TraceFile {
        metadata: chakra::GlobalMetadata {
            version: "0.0.4".into(),
            attr: vec![],
        },
        nodes: nodes.to_vec(),
    };
    let w = trace::convert(&[t.clone(), t], &ctx)?;
    Ok(critical::critical_path(&w)?.finish_ns)
}

fn node(id: u64, ty: i32, attr: Vec<chakra::AttributeProto>, micros: u64) -> chakra::Node {
    chakra::Node {
        id,
        name: format!("n{id}"),
        r#type: ty,
        duration_micros: micros,
        attr,
        ..Default::default()
    }
}

#[test]
fn memory_accesses_queue_as_each_memory_type_says() {
    use chakra::AttributeProto as A;
    let load = |id| {
        node(
            id,
            node_type::MEM_LOAD,
            vec![A::uint64("tensor_size", 1_000_000)],
            0,
        )
    };
    let with = |ty: &str, extra: &str| {
        let text = format!(
            r#"{{"memory-type": "{ty}", "remote-mem-latency": 2000, "remote-mem-bw": 25{extra}}}"#
        );
        RemoteMemory::parse(&text, "m").unwrap()
    };
    let one = [load(0)];
    // Per NPU: the two NPUs' accesses run at once: 42000 ns.
    assert_eq!(
        two_npu_finish(&with("PER_NPU_MEMORY_EXPANSION", ""), &one),
        42000
    );
    // The pool serves one access at a time: the second ends at 2 · 42000.
    assert_eq!(two_npu_finish(&with("MEMORY_POOL", ""), &one), 84000);
    // One node per NPU: no sharing; both NPUs on one node: shared.
    let nodes = |n, per| format!(r#", "num-nodes": {n}, "num-npus-per-node": {per}"#);
    let per_node = "PER_NODE_MEMORY_EXPANSION";
    assert_eq!(two_npu_finish(&with(per_node, &nodes(2, 1)), &one), 42000);
    assert_eq!(two_npu_finish(&with(per_node, &nodes(1, 2)), &one), 84000);
    // One node of one NPU does not cover the second NPU: ASTRA-sim would index past its
    // queues, the reader refuses.
    let e = two_npu(&with(per_node, &nodes(1, 1)), &one)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("num-nodes") && e.contains("1 NPUs, but the network has 2"),
        "{e}"
    );
    // Two independent loads on one NPU share its communication slot (ASTRA-sim's
    // HardwareResource): 2 · 42000 even with per-NPU memory.
    let two = [load(0), load(1)];
    assert_eq!(
        two_npu_finish(&with("PER_NPU_MEMORY_EXPANSION", ""), &two),
        84000
    );
    // A CPU node (COMP, is_cpu_op) is replayed from its duration, 50 µs = 50000 ns, beside
    // the load; a second one waits for the CPU: 100000 ns.
    let cpu = |id| {
        node(
            id,
            node_type::COMP,
            vec![A::boolean("is_cpu_op", true), A::uint64("num_ops", 1 << 40)],
            50,
        )
    };
    let m = with("PER_NPU_MEMORY_EXPANSION", "");
    assert_eq!(two_npu_finish(&m, &[load(0), cpu(1)]), 50000);
    assert_eq!(two_npu_finish(&m, &[load(0), cpu(1), cpu(2)]), 100000);
    // Without a remote memory the load is timed at local-mem-bw, 1600 GB/s:
    // ⌊10⁶ / 1600⌋ = 625 ns.
    assert_eq!(two_npu_finish(&RemoteMemory::NONE, &one), 625);
}
