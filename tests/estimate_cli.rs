//! `astrolabe estimate` end to end: output tables and formats, `--explain`, scenario
//! files, and bad input (misspelt keys with file, line, column and the valid keys;
//! unknown names with the closest built-in; invalid plans).

use crate::common;

use assert_cmd::Command;
use predicates::prelude::*;
use predicates::str::contains;
use std::path::PathBuf;

fn bin() -> Command {
    Command::cargo_bin("astrolabe").expect("binary built")
}

fn tmp(name: &str, text: &str) -> PathBuf {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("astrolabe-estimate-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

const GPT3: [&str; 17] = [
    "estimate",
    "--model",
    "gpt3-175b",
    "--system",
    "dgx-a100",
    "--gpus",
    "64",
    "--tp",
    "8",
    "--pp",
    "8",
    "--global-batch",
    "64",
    "--recompute",
    "selective",
    "--sequence-parallel",
    "--tokens=300B",
];

#[test]
fn table_output_has_every_part() {
    bin()
        .args(GPT3)
        .assert()
        .success()
        .stdout(contains("DP (derived)"))
        .stdout(contains("dim 0 (switch, 8 of 8)"))
        .stdout(contains("pipeline bubble"))
        .stdout(contains("SP communication (exposed)"))
        .stdout(contains("MFU"))
        .stdout(contains("GPU-hours"))
        .stdout(contains("optimizer states"));
}

/// The plan table shows the HSDP shard groups and the LoRA rank when a plan uses them:
/// 16 GPUs in shard groups of 8 are 16/8 = 2 replicas. A plan without them has neither row.
#[test]
fn plan_table_shows_hsdp_and_lora_when_used() {
    let base = "estimate --model llama3-8b --system dgx-h100 --gpus 16";
    let with = format!("{base} --hsdp 8 --lora-rank 16");
    let with: Vec<&str> = with.split_whitespace().collect();
    let text = common::text(&with);
    let row = |k: &str| {
        text.lines()
            .find(|l| l.starts_with(&format!("| {k} ")))
            .map(|l| l.split('|').nth(2).unwrap().trim().to_string())
    };
    assert_eq!(
        row("HSDP").as_deref(),
        Some("shard groups of 8, 2 replicas")
    );
    assert_eq!(
        row("LoRA rank").as_deref(),
        Some("16 (base weights frozen)")
    );
    bin()
        .args(base.split_whitespace())
        .assert()
        .success()
        .stdout(contains("| HSDP ").not())
        .stdout(contains("| LoRA rank ").not());
}

/// DP over 16 H100s in two DGX nodes spans both network dimensions: the node's 8-port
/// NVSwitch wholly and the 2 nodes on the InfiniBand dimension. TP and PP of one device
/// span none.
#[test]
fn json_placement_lists_every_dimension_a_group_spans() {
    let args: Vec<&str> = "estimate --model llama3-8b --system dgx-h100 --gpus 16 --format json"
        .split_whitespace()
        .collect();
    let v: serde_json::Value = serde_json::from_str(&common::text(&args)).unwrap();
    let p = &v["placement"];
    let spans: Vec<(u64, u64)> = p["dp"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| (d["dim"].as_u64().unwrap(), d["extent"].as_u64().unwrap()))
        .collect();
    assert_eq!(spans, [(0, 8), (1, 2)]);
    assert_eq!(p["tp"].as_array().map(Vec::len), Some(0));
    assert_eq!(p["pp"].as_array().map(Vec::len), Some(0));
}

#[test]
fn json_output_carries_si_numbers() {
    let out = bin()
        .args(GPT3)
        .args(["--format", "json"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let j: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let t = j["iteration_time_s"].as_f64().unwrap();
    assert!(t > 5.0 && t < 30.0, "{t}");
    assert!(j["memory_breakdown"]["weights_bytes"].as_f64().unwrap() > 1e9);
}

#[test]
fn explain_shows_formulas_with_numbers() {
    bin()
        .args(GPT3)
        .arg("--explain")
        .assert()
        .success()
        .stdout(contains("GEMM QKV: M=2048 N=4608 K=12288"))
        .stdout(contains("bubble = (Σ_i T_i − max_i T_i)/v"));
}

#[test]
fn does_not_fit_is_reported() {
    bin()
        .args([
            "estimate",
            "--model",
            "megatron-gpt-22b",
            "--system",
            "dgx-a100",
            "--gpus",
            "8",
        ])
        .args(["--tp", "8", "--micro-batch", "4", "--global-batch", "4"])
        .args(["--flash-attention", "false", "--zero", "0"])
        .assert()
        .code(3)
        .stdout(contains("does not fit"));
}

#[test]
fn scenario_file_and_flag_override() {
    let p = tmp(
        "run.toml",
        "model = \"gpt3-175b\"\nsystem = \"dgx-a100\"\ntokens = \"300B\"\n[plan]\ngpus = 64\ntp = 8\npp = 8\nglobal_batch = 64\nrecompute = \"full\"\n",
    );
    bin()
        .args(["estimate", "--scenario"])
        .arg(&p)
        .assert()
        .success()
        .stdout(contains("full"))
        .stdout(contains("GPU-hours"));
    bin()
        .args(["estimate", "--recompute", "selective", "--scenario"])
        .arg(&p)
        .assert()
        .success()
        .stdout(contains("selective"));
}

#[test]
fn misspelt_scenario_key_names_file_line_column_and_valid_keys() {
    let p = tmp(
        "bad.toml",
        "model = \"gpt3-175b\"\nsystem = \"dgx-a100\"\n[plan]\ntensor_parallel = 8\n",
    );
    bin()
        .args(["estimate", "--scenario"])
        .arg(&p)
        .assert()
        .code(2)
        .stderr(contains("bad.toml"))
        .stderr(contains("line 4, column 1"))
        .stderr(contains("unknown field `tensor_parallel`"))
        .stderr(contains("`tp`"));
}

#[test]
fn misspelt_model_key_names_file_line_column() {
    let p = tmp(
        "model.toml",
        "name = \"m\"\n[transformer]\nlayers = 2\nhiden = 64\nheads = 4\nvocab = 100\nseq_len = 16\n",
    );
    bin()
        .args(["estimate", "--system", "dgx-a100", "--gpus", "1", "--model"])
        .arg(&p)
        .assert()
        .code(2)
        .stderr(contains("model.toml"))
        .stderr(contains("line 4, column 1"))
        .stderr(contains("unknown field `hiden`"))
        .stderr(contains("`hidden`"));
}

#[test]
fn device_quantity_without_unit_is_an_error() {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/presets/devices/a100-80gb.toml"
    ))
    .unwrap()
    .replace("memory = \"80 GiB\"", "memory = 80");
    let dev = tmp("dev.toml", &text);
    let sys = tmp(
        "sys.toml",
        "name = \"s\"\ndevice = \"dev.toml\"\n[[network.dims]]\nkind = \"switch\"\nsize = 8\nbandwidth = \"240 GB/s\"\nlatency = \"3 us\"\n",
    );
    assert!(dev.exists());
    bin()
        .args([
            "estimate",
            "--model",
            "gpt3-175b",
            "--gpus",
            "8",
            "--tp",
            "8",
            "--system",
        ])
        .arg(&sys)
        .assert()
        .code(2)
        .stderr(contains("has no unit"));
}

#[test]
fn unknown_names_suggest_the_closest() {
    bin()
        .args(["estimate", "--model", "gpt3-157b", "--system", "dgx-a100"])
        .assert()
        .code(2)
        .stderr(contains("did you mean 'gpt3-175b'"));
    bin()
        .args(["estimate", "--model", "llama3-70b", "--system", "dgx-h10"])
        .assert()
        .code(2)
        .stderr(contains("did you mean 'dgx-h100'"));
    bin()
        .args(GPT3)
        .args(["--schedule", "1f1c"])
        .assert()
        .code(2)
        .stderr(contains("did you mean '1f1b'"));
}

#[test]
fn invalid_plan_is_a_clear_error() {
    bin()
        .args([
            "estimate",
            "--model",
            "gpt3-175b",
            "--system",
            "dgx-a100",
            "--gpus",
            "56",
            "--tp",
            "7",
        ])
        .assert()
        .code(2)
        .stderr(contains("does not divide the 96 attention heads"));
}

#[test]
fn blocking_backward_tp_from_flag_and_scenario() {
    // 2021 Megatron-LM (SC'21): no SP, no TP overlap, the backward's TP all-reduce blocking.
    // Per micro-batch and layer the exposed TP traffic doubles: 2 forward all-reduces
    // become 2 forward + 2 backward (all-reduces of b·s·h values, 4 in total; the ends add
    // the same ones to both runs, so the ratio stays just under 2).
    let run = |extra: &[&str]| -> serde_json::Value {
        let out = bin()
            .args(&GPT3[..GPT3.len() - 2])
            .args(["--sequence-parallel=false", "--tp-overlap", "false"])
            .args(extra)
            .args(["--format", "json"])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).unwrap()
    };
    let tp = |j: &serde_json::Value| {
        j["time_breakdown"]["communication"]["tp"]["exposed_s"]
            .as_f64()
            .unwrap()
    };
    let (on, off) = (run(&[]), run(&["--tp-bwd-overlap", "false"]));
    assert_eq!(on["plan"]["tp_bwd_overlap"], true);
    assert_eq!(off["plan"]["tp_bwd_overlap"], false);
    let ratio = tp(&off) / tp(&on);
    assert!(ratio > 1.9 && ratio <= 2.0, "{ratio}");
    let p = tmp(
        "sc21.toml",
        "model = \"gpt3-175b\"\nsystem = \"dgx-a100\"\n[plan]\ngpus = 64\ntp = 8\npp = 8\nglobal_batch = 64\nsequence_parallel = false\ntp_overlap = false\ntp_bwd_overlap = false\n",
    );
    bin()
        .args(["estimate", "--scenario"])
        .arg(&p)
        .assert()
        .success()
        .stdout(contains("backward TP blocking"));
}

/// Megatron-core's layout string resolves to the split its ranks hold: DeepSeek-V3's
/// `Et*4|(t*4|)*14tmL` on PP 4 is virtual stages r, r+4, r+8, r+12 on rank r, i.e.
/// 16, 16, 16 and 13 layers with v = 4, the same estimate as that explicit split. A
/// scenario file takes it as `pipeline_layout`; a layout the model cannot hold is an
/// input error naming the key.
#[test]
fn pipeline_layout_is_the_split_its_ranks_hold() {
    let base = [
        "estimate",
        "--model",
        "deepseek-v3",
        "--system",
        "gb200-nvl72",
        "--gpus",
        "256",
        "--pp",
        "4",
        "--ep",
        "64",
        "--global-batch",
        "4096",
        "--precision",
        "mxfp8",
        "--fp8-params",
        "--optimizer",
        "adam-bf16-moments",
        "--recompute-modules",
        "mla_up_proj",
    ];
    let time = |args: &[&str]| common::json(args)["iteration_time_s"].as_f64().unwrap();
    let with = |extra: &[&str]| time(&[&base[..], extra].concat());
    let layout = with(&["--pipeline-layout", "Et*4|(t*4|)*14tmL"]);
    let explicit = with(&["--layers-per-stage", "16,16,16,13", "--virtual-stages", "4"]);
    let even = with(&["--virtual-stages", "4"]);
    assert_eq!(layout, explicit);
    assert!(
        layout != even,
        "the layout moves two layers off the last stage"
    );
    let scenario = tmp(
        "layout.toml",
        "model = \"deepseek-v3\"\nsystem = \"gb200-nvl72\"\n[plan]\ngpus = 256\npp = 4\nep = 64\n\
         global_batch = 4096\nprecision = \"mxfp8\"\nfp8_params = true\n\
         optimizer = \"adam-bf16-moments\"\nrecompute_modules = \"mla_up_proj\"\n\
         pipeline_layout = \"Et*4|(t*4|)*14tmL\"\n",
    );
    let path = scenario.to_string_lossy();
    assert_eq!(time(&["estimate", "--scenario", &path]), layout);
    bin()
        .args(base)
        .args(["--pipeline-layout", "Et*4|(t*4|)*14tL"])
        .assert()
        .code(2)
        .stderr(contains(
            "pipeline_layout: 0 MTP modules `m` for a model of 1",
        ));
}

/// The plan table says how the job sits in NVLink domains and which switches are on. 128
/// GB200 GPUs are 32 trays of 4; NVIDIA's launcher allocates Slurm segments of at most 18
/// trays, so two segments of 16 trays, 64 GPUs each (docs/modern-training.md); 64 GPUs fit
/// one domain. The defaults turn flash attention and both overlaps on, and TP 4 turns SP on.
#[test]
fn the_plan_table_shows_domains_and_switches() {
    let row = |text: &str, name: &str| {
        text.lines()
            .find(|l| l.starts_with(&format!("| {name} ")))
            .unwrap_or_else(|| panic!("a '{name}' row"))
            .split('|')
            .map(str::trim)
            .filter(|c| !c.is_empty())
            .collect::<Vec<_>>()
            .join(" | ")
    };
    let big = common::computed(&[
        "estimate",
        "--model",
        "llama3-70b",
        "--system",
        "gb200-nvl72",
        "--gpus",
        "128",
        "--tp",
        "4",
        "--pp",
        "4",
        "--global-batch",
        "128",
    ]);
    assert_eq!(
        row(&big, "devices"),
        "devices | 128 | 2 NVLink domains of 64 GPUs (Slurm segments)"
    );
    assert_eq!(row(&big, "SP"), "SP | on");
    assert_eq!(row(&big, "flash attention"), "flash attention | on");
    assert_eq!(row(&big, "overlap DP / TP"), "overlap DP / TP | on / on");
    let one = common::computed(&[
        "estimate",
        "--model",
        "llama3-8b",
        "--system",
        "gb200-nvl72",
        "--gpus",
        "64",
        "--global-batch",
        "64",
        "--tp-overlap",
        "false",
    ]);
    assert_eq!(
        row(&one, "devices"),
        "devices | 64 | 1 NVLink domain of 64 GPUs"
    );
    assert_eq!(row(&one, "overlap DP / TP"), "overlap DP / TP | on / off");
}

/// The schedule row names the schedule, and the MoE groups row appears only where the
/// expert layers fold differently from the attention: EP above 1 (Qwen3-30B-A3B with EP 8
/// under DualPipe, PP 2: 8 ranks per stage, expert-DP 8/(1·8) = 1) or an
/// expert TP other than TP (TP 2, ETP 1: ETP 1 × EP 1 × expert-DP 16); never for a dense
/// model (Llama 3 8B, PP 2: 1F1B).
#[test]
fn the_plan_table_names_the_schedule_and_folds_only_moe_groups() {
    let table = |flags: &str| {
        let mut a = vec!["estimate"];
        a.extend(flags.split_whitespace());
        common::computed(&a)
    };
    let row = |text: &str, name: &str| {
        text.lines()
            .find(|l| l.starts_with(&format!("| {name}")))
            .map(|l| {
                l.split('|')
                    .map(str::trim)
                    .filter(|c| !c.is_empty())
                    .take(2)
                    .collect::<Vec<_>>()
                    .join(" | ")
            })
    };
    let dual = table(
        "--model qwen3-30b-a3b --system dgx-h100 --gpus 16 --pp 2 --ep 8 --global-batch 64 \
         --schedule dualpipe",
    );
    assert_eq!(row(&dual, "schedule").unwrap(), "schedule | DualPipe");
    assert_eq!(
        row(&dual, "MoE groups").unwrap(),
        "MoE groups (folded) | ETP 1 × EP 8 × expert-DP 1"
    );
    let etp =
        table("--model qwen3-30b-a3b --system dgx-h100 --gpus 16 --tp 2 --etp 1 --global-batch 64");
    assert_eq!(
        row(&etp, "MoE groups").unwrap(),
        "MoE groups (folded) | ETP 1 × EP 1 × expert-DP 16"
    );
    let dense = table("--model llama3-8b --system dgx-h100 --gpus 16 --pp 2 --global-batch 64");
    assert_eq!(row(&dense, "schedule").unwrap(), "schedule | 1F1B");
    assert_eq!(row(&dense, "MoE groups"), None);
}

/// The time table: each row's share is its time over the iteration time; the host-bound
/// row appears only when some layer waits for the host, and a communication class only
/// when it moves bytes. BERT-large on one H100 at 64 tokens without CUDA graphs waits for
/// the host and has no communication; Llama 2 7B with TP 2 on 2 GPUs has SP traffic and no
/// host wait.
#[test]
fn the_time_table_shares_and_rows() {
    let run = |flags: &str| {
        let mut a = vec!["estimate"];
        a.extend(flags.split_whitespace());
        (common::computed(&a), common::json(&a))
    };
    let cells = |text: &str, name: &str| -> Option<Vec<String>> {
        text.lines()
            .find(|l| l.starts_with(&format!("| {name}")))
            .map(|l| l.split('|').map(|c| c.trim().to_string()).collect())
    };
    let (text, j) = run(
        "--model bert-large --system dgx-h100 --gpus 1 --seq-len 64 --global-batch 1 \
         --cuda-graphs none",
    );
    let total = j["iteration_time_s"].as_f64().unwrap();
    let tb = &j["time_breakdown"];
    for (row, key) in [
        ("forward", "forward_s"),
        ("backward", "backward_s"),
        ("host-bound", "host_idle_s"),
    ] {
        let c = cells(&text, row).unwrap_or_else(|| panic!("a {row} row"));
        let share = format!("{:.1}%", 100.0 * tb[key].as_f64().unwrap() / total);
        assert_eq!(c[5], share, "{row}: {c:?}");
    }
    assert!(tb["host_idle_s"].as_f64().unwrap() > 0.0);
    assert!(!text.contains("communication (exposed)"), "{text}");
    let (text, j) =
        run("--model llama2-7b --system dgx-h100 --gpus 2 --tp 2 --seq-len 4096 --global-batch 1");
    assert_eq!(j["time_breakdown"]["host_idle_s"].as_f64().unwrap(), 0.0);
    assert!(cells(&text, "host-bound").is_none(), "{text}");
    assert!(
        cells(&text, "SP communication (exposed)").is_some(),
        "{text}"
    );
    assert!(cells(&text, "EP communication").is_none(), "{text}");
    // A class its window hides whole still has its row: Llama 3 8B on 8 B200, CP 2 at
    // sequence 32768, the ring's transfers all under the attention blocks.
    let (text, j) =
        run("--model llama3-8b --system dgx-b200 --gpus 8 --cp 2 --seq-len 32768 --global-batch 8");
    let cp = &j["time_breakdown"]["communication"]["cp"];
    assert_eq!(cp["exposed_s"].as_f64().unwrap(), 0.0);
    assert!(cp["hidden_s"].as_f64().unwrap() > 0.0);
    let row = cells(&text, "CP communication (exposed)").expect("a CP row");
    assert_eq!(row[2], "0 s", "{row:?}");
    // Components that take no time keep their rows (only the host-bound row hides at 0).
    let time = text.split("\ntime\n").nth(1).expect("a time table");
    for row in ["recompute", "pipeline bubble"] {
        let c = cells(time, row).unwrap_or_else(|| panic!("a {row} row: {text}"));
        assert_eq!((c[2].as_str(), c[5].as_str()), ("0 s", "0.0%"), "{c:?}");
    }
}

/// The offload row's bytes are what crosses the host link: parameters fetched, activations
/// out and back (twice), gradients streamed down, the optimizer step's gradients down and
/// updated parameters up. Two plans between them make each of the five terms non-zero.
#[test]
fn the_offload_row_counts_each_transfer_once_and_activations_twice() {
    for offload in ["optimizer,activations", "zero-infinity:host,activations"] {
        let mut a = vec![
            "estimate",
            "--model",
            "llama2-7b",
            "--system",
            "dgx-h100",
            "--gpus",
            "8",
            "--zero",
            "3",
            "--recompute",
            "none",
            "--global-batch",
            "8",
            "--seq-len",
            "4096",
            "--offload",
        ];
        a.push(offload);
        let text = common::computed(&a);
        let j = common::computed_json(&a);
        let o = &j["time_breakdown"]["offload"];
        let f = |k: &str| o[k].as_f64().unwrap();
        let moved = f("params_fetch_bytes")
            + 2.0 * f("activations_bytes")
            + f("grads_stream_bytes")
            + f("grads_step_bytes")
            + f("params_step_bytes");
        assert!(f("activations_bytes") > 0.0, "{o}");
        let row = text
            .lines()
            .find(|l| l.starts_with("| offload transfers"))
            .unwrap_or_else(|| panic!("an offload row: {text}"));
        let c: Vec<&str> = row.split('|').map(str::trim).collect();
        assert_eq!(
            c[4],
            astrolabe::units::Bytes::new(moved).to_string(),
            "{offload}: {o}"
        );
    }
}

/// The pipeline notes under the tables: the bubble fraction `(p−1)/(v·m)` when there is a
/// pipeline (none with PP 1), and a warning when there are fewer micro-batches than stages.
/// Llama 2 7B on 4 H100, PP 4, one sequence per micro-batch: 4 micro-batches give
/// 3/4 = 75.00 % and no warning; 2 give 3/2 = 150.00 % and the warning (each extra sequence
/// adds a micro-batch, DP 1 × micro-batch 1).
#[test]
fn the_pipeline_notes_by_hand() {
    let run = |flags: &str| {
        let mut a = vec!["estimate", "--model", "llama2-7b", "--system", "dgx-h100"];
        a.extend(flags.split_whitespace());
        common::computed(&a)
    };
    let none = run("--gpus 4 --global-batch 4");
    assert!(!none.contains("bubble fraction"), "{none}");
    let four = run("--gpus 4 --pp 4 --global-batch 4");
    assert!(
        four.contains("bubble fraction (p-1)/(v·m) = 75.00%"),
        "{four}"
    );
    assert!(!four.contains("micro-batch(es) per pipeline"), "{four}");
    let two = run("--gpus 4 --pp 4 --global-batch 2");
    assert!(
        two.contains("bubble fraction (p-1)/(v·m) = 150.00%"),
        "{two}"
    );
    assert!(
        two.contains("only 2 micro-batch(es) per pipeline for 4 stages")
            && two.contains("(each 1 more sequences, dp·micro-batch, add one micro-batch)"),
        "{two}"
    );
}

#[test]
fn virtual_stages_do_not_silently_replace_a_named_schedule() {
    // Virtual stages are the interleaved schedule's: asked for beside another schedule by
    // name, the flags contradict each other and the run stops (it used to run interleaved).
    let args = |schedule: &str| -> Vec<String> {
        format!(
            "estimate --model gpt3-175b --system dgx-a100 --gpus 1024 --tp 8 --pp 16 \
             --global-batch 1536 --virtual-stages 2 {schedule}"
        )
        .split_whitespace()
        .map(String::from)
        .collect()
    };
    for s in ["dualpipe", "gpipe", "1f1b"] {
        let a = args(&format!("--schedule {s}"));
        let a: Vec<&str> = a.iter().map(String::as_str).collect();
        common::usage_error(
            &a,
            &format!(
                "--virtual-stages: 2 virtual stages run the interleaved schedule, but --schedule {s} was given"
            ),
        );
    }
    // Named as interleaved, or not named, they run.
    for extra in ["--schedule interleaved", ""] {
        let a = args(extra);
        let a: Vec<&str> = a.iter().map(String::as_str).collect();
        assert_eq!(common::json(&a)["plan"]["schedule"], "interleaved");
    }
}
