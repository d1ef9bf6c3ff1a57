//! Every command in the README and in docs/ runs, so no example fails or goes stale.
//!
//! In README.md and docs/*.md, each line of a ```` ```sh ```` block that starts with
//! `astrolabe` is run (through `sh`, in a fresh folder, with the built binary first on the
//! PATH) and must exit 0, or the status a trailing `# exit N` comment names. A ```` ```toml ````
//! block right after an HTML comment `<!-- file: NAME -->` is written to NAME in that folder
//! before any command of the page runs, so examples can read the files the page shows. When a `sh` block holding one
//! command is followed by a ```` ```text ```` block, that block must be the command's output
//! (lines with timings, which vary from run to run, are not compared); run with
//! `ASTROLABE_BLESS=1` to rewrite those blocks after a deliberate change.

use std::path::{Path, PathBuf};
use std::process::Command;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The pages whose examples run.
fn pages() -> Vec<PathBuf> {
    let mut v = vec![root().join("README.md")];
    let mut docs: Vec<PathBuf> = std::fs::read_dir(root().join("docs"))
        .expect("docs/")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "md"))
        .collect();
    docs.sort();
    v.extend(docs);
    v
}

/// A fenced block: its language, its first and last content line (0-based) and its lines.
struct Block {
    lang: String,
    start: usize,
    end: usize,
    lines: Vec<String>,
    file: Option<String>,
}

fn blocks(text: &str) -> Vec<Block> {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        if let Some(lang) = lines[i].strip_prefix("```") {
            let file = (i > 0)
                .then(|| lines[i - 1].trim())
                .and_then(|l| l.strip_prefix("<!-- file: "))
                .and_then(|l| l.strip_suffix(" -->"))
                .map(str::to_string);
            let start = i + 1;
            let mut j = start;
            while j < lines.len() && !lines[j].starts_with("```") {
                j += 1;
            }
            out.push(Block {
                lang: lang.trim().to_string(),
                start,
                end: j,
                lines: lines[start..j].iter().map(|s| s.to_string()).collect(),
                file,
            });
            i = j + 1;
        } else {
            i += 1;
        }
    }
    out
}

/// The commands of a `sh` block: continuation lines joined, `# exit N` read off.
fn commands(b: &Block) -> Vec<(String, i32)> {
    let mut out = Vec::new();
    let mut cur = String::new();
    for l in &b.lines {
        let l = l.trim();
        if let Some(c) = l.strip_suffix('\\') {
            cur.push_str(c);
            continue;
        }
        cur.push_str(l);
        if cur.starts_with("astrolabe ") || cur == "astrolabe" {
            let (cmd, code) = match cur.split_once("# exit ") {
                Some((c, n)) => (c.trim().to_string(), n.trim().parse().unwrap_or(-1)),
                None => (cur.split(" # ").next().unwrap_or("").trim().to_string(), 0),
            };
            out.push((cmd, code));
        }
        cur.clear();
    }
    out
}

fn volatile(line: &str) -> bool {
    ["wall time", "estimates per second", "estimates/s"]
        .iter()
        .any(|k| line.contains(k))
}

fn run(cmd: &str, dir: &Path) -> std::process::Output {
    let bin = PathBuf::from(env!("CARGO_BIN_EXE_astrolabe"));
    let path = format!(
        "{}:{}",
        bin.parent().unwrap().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    Command::new("sh")
        .args(["-c", cmd])
        .current_dir(dir)
        .env("PATH", path)
        .env_remove("NO_COLOR")
        .output()
        .expect("sh runs")
}

#[test]
fn every_documented_command_runs_and_shows_its_real_output() {
    let bless = std::env::var_os("ASTROLABE_BLESS").is_some();
    let mut failures = Vec::new();
    let mut ran = 0;
    for page in pages() {
        let text = std::fs::read_to_string(&page).unwrap();
        let name = page.strip_prefix(root()).unwrap().display().to_string();
        let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!(
            "astrolabe-docs-{}-{}",
            std::process::id(),
            name.replace('/', "_")
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let bs = blocks(&text);
        let mut blessed: Vec<(usize, usize, Vec<String>)> = Vec::new();
        for b in &bs {
            if let Some(f) = &b.file {
                std::fs::write(dir.join(f), b.lines.join("\n") + "\n").unwrap();
            }
        }
        for (k, b) in bs.iter().enumerate() {
            if b.lang != "sh" {
                continue;
            }
            let cmds = commands(b);
            for (cmd, want) in &cmds {
                ran += 1;
                let out = run(cmd, &dir);
                let code = out.status.code().unwrap_or(-1);
                if code != *want {
                    failures.push(format!(
                        "{name}:{}: `{cmd}` exited {code}, expected {want}\n{}",
                        b.start,
                        String::from_utf8_lossy(&out.stderr)
                    ));
                    continue;
                }
                let next = bs.get(k + 1).filter(|n| {
                    n.lang == "text"
                        && n.start == b.end + 3
                        && text
                            .lines()
                            .nth(b.end + 1)
                            .is_some_and(|l| l.trim().is_empty())
                });
                let (Some(shown), [_]) = (next, cmds.as_slice()) else {
                    continue;
                };
                let got = String::from_utf8_lossy(&out.stdout).to_string();
                let keep = |s: &str| -> Vec<String> {
                    s.lines()
                        .filter(|l| !volatile(l))
                        .map(|l| l.trim_end().to_string())
                        .collect()
                };
                if keep(&got) != keep(&shown.lines.join("\n")) {
                    if bless {
                        let body: Vec<String> = got.lines().map(str::to_string).collect();
                        blessed.push((shown.start, shown.end, body));
                    } else {
                        failures.push(format!(
                            "{name}:{}: the output shown for `{cmd}` is stale (ASTROLABE_BLESS=1 rewrites it)\n{got}",
                            shown.start
                        ));
                    }
                }
            }
        }
        if bless && !blessed.is_empty() {
            let mut new_lines: Vec<String> = text.lines().map(str::to_string).collect();
            for (a, b, body) in blessed.into_iter().rev() {
                new_lines.splice(a..b, body);
            }
            let mut s = new_lines.join("\n");
            s.push('\n');
            if s != text {
                std::fs::write(&page, s).unwrap();
            }
        }
    }
    assert!(ran >= 20, "only {ran} documented commands found");
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

/// The examples every `--help` ends with run too (except those that need ASTRA-sim files
/// or redirect into the home folder).
#[test]
fn every_help_example_runs() {
    use astrolabe::cli::examples as ex;
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("astrolabe-help-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut ran = 0;
    for text in [
        ex::TOP,
        ex::ESTIMATE,
        ex::SWEEP,
        ex::COLLECTIVE,
        ex::COMPARE,
        ex::LIST,
        ex::SHOW,
        ex::EXPORT,
        ex::SCHEMA,
        ex::MAN,
    ] {
        for line in text.lines().map(str::trim) {
            if !line.starts_with("astrolabe ") || line.contains('~') || line.contains("&&") {
                continue;
            }
            let out = run(line, &dir);
            assert!(
                out.status.success(),
                "`{line}` exited {:?}\n{}",
                out.status.code(),
                String::from_utf8_lossy(&out.stderr)
            );
            ran += 1;
        }
    }
    assert!(ran >= 15, "{ran} help examples ran");
}
