//! `--plot` on `collective` and `sweep` writes a well-formed SVG with the expected series.

use assert_cmd::Command;

fn tmp(name: &str) -> std::path::PathBuf {
    let d = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("astrolabe-plots-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d.join(name)
}

#[track_caller]
fn well_formed_svg(path: &std::path::Path) -> String {
    let text = std::fs::read_to_string(path).unwrap();
    let doc = roxmltree::Document::parse(&text).expect("SVG parses as XML");
    assert_eq!(doc.root_element().tag_name().name(), "svg");
    text
}

#[test]
fn collective_plot_draws_one_line_per_algorithm() {
    let p = tmp("busbw.svg");
    Command::cargo_bin("astrolabe")
        .unwrap()
        .args(["collective", "all-reduce", "--size", "1KiB..1GiB"])
        .args([
            "--topology",
            "ring(8, 100GB/s, 500ns) x switch(4, 50GB/s, 1us)",
            "--plot",
        ])
        .arg(&p)
        .assert()
        .success();
    let svg = well_formed_svg(&p);
    for alg in ["ring", "direct", "halving-doubling"] {
        assert!(svg.contains(&format!("\n{alg}\n")), "legend has {alg}");
    }
}

#[test]
fn sweep_plot_draws_the_pareto_front() {
    let p = tmp("pareto.svg");
    Command::cargo_bin("astrolabe")
        .unwrap()
        .args([
            "sweep",
            "--model",
            "gpt3-175b",
            "--system",
            "dgx-a100",
            "--gpus",
            "64",
        ])
        .args(["--global-batch", "64", "--plot"])
        .arg(&p)
        .assert()
        .success();
    let svg = well_formed_svg(&p);
    assert!(svg.contains("Pareto front"));
}

#[test]
fn plot_needs_an_svg_name() {
    Command::cargo_bin("astrolabe")
        .unwrap()
        .args(["collective", "all-reduce", "--size", "1GB"])
        .args(["--topology", "ring(8, 100GB/s, 500ns)", "--plot", "x.png"])
        .assert()
        .code(2)
        .stderr(predicates::str::contains(".svg"));
}
