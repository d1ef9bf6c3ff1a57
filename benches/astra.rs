//! Throughput of the ASTRA-sim-faithful model: one collective microbenchmark (1-D and
//! the 2-D Ring×Switch all-reduce whose chunks go through the queue schedule), and the
//! whole-trace estimate of the GPT-6.7B iteration (16 NPUs, 83k nodes): converting the
//! decoded traces and the critical path. ASTRA-sim takes about 24 ms of wall time per
//! microbenchmark and 3.5 s for the trace.

use astrolabe::astra::model::{self, Knobs, Op};
use astrolabe::astra::network_yaml::AstraNetwork;
use astrolabe::astra::system_json::AstraSystem;
use astrolabe::astra::{critical, lean, trace};
use criterion::{Criterion, criterion_group, criterion_main};
use std::collections::HashMap;
use std::hint::black_box;
use std::path::{Path, PathBuf};

fn data(p: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/astra")
        .join(p)
}

fn untar_xz(path: &Path) -> HashMap<String, Vec<u8>> {
    let mut xz = std::io::BufReader::new(std::fs::File::open(path).unwrap());
    let mut tar = Vec::new();
    lzma_rs::xz_decompress(&mut xz, &mut tar).unwrap();
    let mut files = HashMap::new();
    let mut at = 0;
    while at + 512 <= tar.len() && tar[at] != 0 {
        let h = &tar[at..at + 512];
        let end = h[..100].iter().position(|&b| b == 0).unwrap_or(100);
        let name = String::from_utf8_lossy(&h[..end]).to_string();
        let size_txt = String::from_utf8_lossy(&h[124..136]);
        let size = usize::from_str_radix(size_txt.trim_matches(|c: char| c == '\0' || c == ' '), 8)
            .unwrap();
        files.insert(name, tar[at + 512..at + 512 + size].to_vec());
        at += 512 + size.div_ceil(512) * 512;
    }
    files
}

fn microbenchmarks(c: &mut Criterion) {
    let k = Knobs::default();
    let ring = AstraNetwork::read(&data("configs/network/Ring__8__bw100__lat500.yml")).unwrap();
    let ring_sys = AstraSystem::read(&data(
        "configs/system/sys_ring_ch1_sp4_ed10_localBWAware_af9371f0.json",
    ))
    .unwrap();
    c.bench_function("astra all-reduce 64MiB ring 8", |b| {
        b.iter(|| {
            model::collective(
                Op::AllReduce,
                black_box(1 << 26),
                &ring,
                &ring_sys,
                &k,
                None,
            )
        })
    });
    let rs = AstraNetwork::read(&data(
        "configs/network/Ring_Switch__4x8__bw200-50__lat500-500.yml",
    ))
    .unwrap();
    let rs_sys = AstraSystem::read(&data(
        "configs/system/sys_ring-halvingDoubling_ch1_sp4_ed10_localBWAware_821c4a16.json",
    ))
    .unwrap();
    c.bench_function("astra all-reduce 64MiB ring 4 x switch 8", |b| {
        b.iter(|| model::collective(Op::AllReduce, black_box(1 << 26), &rs, &rs_sys, &k, None))
    });
}

fn whole_trace(c: &mut Criterion) {
    let files = untar_xz(&data("gpt6.7b_dp2_tp4_pp2.tar.xz"));
    let get = |n: &str| {
        files
            .iter()
            .find(|(k, _)| k.ends_with(&format!("/{n}")))
            .map(|(_, v)| v.clone())
            .unwrap()
    };
    let groups =
        trace::read_comm_groups(std::str::from_utf8(&get("w.json")).unwrap(), "w").unwrap();
    let net = AstraNetwork::read(&data("net_sw8x2.yml")).unwrap();
    let sys = AstraSystem::read(&data("sys_ring_roofline.json")).unwrap();
    let knobs = Knobs::default();
    let ctx = trace::Ctx {
        net: &net,
        sys: &sys,
        knobs: &knobs,
        groups: Some(&groups),
    };
    let mut g = c.benchmark_group("astra trace gpt-6.7b 16 NPUs");
    g.sample_size(10);
    let bytes: Vec<Vec<u8>> = (0..16).map(|r| get(&format!("w.{r}.et"))).collect();
    g.bench_function("decode (lean reader)", |b| {
        b.iter(|| {
            bytes
                .iter()
                .map(|x| lean::decode(black_box(x), "w").unwrap().recs.len())
                .sum::<usize>()
        })
    });
    let recs: Vec<_> = bytes
        .iter()
        .map(|x| lean::decode(x, "w").unwrap())
        .collect();
    g.bench_function("convert", |b| {
        b.iter(|| trace::convert_recs(black_box(&recs), &ctx).unwrap())
    });
    let w = trace::convert_recs(&recs, &ctx).unwrap();
    g.bench_function("critical path", |b| {
        b.iter(|| critical::critical_path(black_box(&w)).unwrap().finish_ns)
    });
    g.finish();

    // 512 NPUs: 32 independent copies of the 16-NPU iteration (ranks, groups and send/recv
    // peers shifted), 2.66 M nodes, on Switch 8 × Switch 64.
    let mut big = Vec::new();
    let mut big_groups = HashMap::new();
    for k in 0..32u32 {
        for r in &recs {
            let mut r = r.clone();
            for n in &mut r.recs {
                if let Some(g) = &n.pg_name {
                    n.pg_name = Some(format!("{g}_{k}").into());
                }
                for i in [lean::COMM_SRC, lean::COMM_DST] {
                    if let Some(v) = n.ints[i] {
                        n.ints[i] = Some(v + 16 * k as i128);
                    }
                }
            }
            big.push(r);
        }
        for (g, m) in &groups {
            big_groups.insert(
                format!("{g}_{k}"),
                m.iter().map(|x| x + 16 * k).collect::<Vec<_>>(),
            );
        }
    }
    let big_net = AstraNetwork::parse(
        "topology: [ Switch, Switch ]\nnpus_count: [ 8, 64 ]\nbandwidth: [ 200.0, 50.0 ]\nlatency: [ 500.0, 1000.0 ]\n",
        "big",
    )
    .unwrap();
    let big_ctx = trace::Ctx {
        net: &big_net,
        sys: &sys,
        knobs: &knobs,
        groups: Some(&big_groups),
    };
    let mut g = c.benchmark_group("astra trace 512 NPUs (32 x gpt-6.7b)");
    g.sample_size(10);
    g.bench_function("convert", |b| {
        b.iter(|| trace::convert_recs(black_box(&big), &big_ctx).unwrap())
    });
    let bw = trace::convert_recs(&big, &big_ctx).unwrap();
    g.bench_function("critical path", |b| {
        b.iter(|| critical::critical_path(black_box(&bw)).unwrap().finish_ns)
    });
    g.finish();
}

criterion_group!(benches, microbenchmarks, whole_trace);
criterion_main!(benches);
