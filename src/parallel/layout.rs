//! Megatron-core's pipeline layout string (`--pipeline-model-parallel-layout`,
//! megatron/core/transformer/pipeline_parallel_layer_layout.py): one entry per virtual
//! stage, separated by `|`, each a run of `E` (the input embedding), `t` (a decoder
//! layer), `m` (a multi-token-prediction module) and `L` (the output head and loss).
//! `x*n` repeats one character, `(…)*n` a group (groups do not nest); commas are
//! cosmetic. DeepSeek-V3's recipes use `Et*4|(t*4|)*14tmL`: 16 virtual stages, the
//! embedding and 4 layers on the first, 4 on each of the next 14, one layer, the MTP
//! module and the loss on the last.
//!
//! Virtual stage `k` runs on pipeline rank `k mod p` (chunk `⌊k/p⌋` of that rank), so the
//! string's length is `p·v`; a rank's layers are the sum over its `v` chunks. On PP 4 the
//! DeepSeek-V3 string gives ranks 0–2 16 layers each and rank 3 the last 13, the MTP
//! module and the loss; on PP 2 (v = 8) 32 and 29.

use super::bad;
use crate::error::Result;

/// A layout resolved on `p` ranks: the virtual stages per rank, the decoder layers each
/// rank holds (the plan's explicit split) and the rank of the MTP modules.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Layout {
    /// Virtual stages per rank, `v` = entries / p.
    pub v: u32,
    /// Decoder layers on each pipeline rank (length p).
    pub per_rank: Vec<u32>,
    /// The pipeline rank whose last virtual stage holds the MTP modules (`None` without
    /// them): the last rank, with the loss, or another one (Megatron-core's
    /// `mtp_standalone`, e.g. `Ettt|(tt|)*29,m|L` on 8 ranks puts them on rank 6).
    pub mtp_rank: Option<u32>,
}

/// Expands `(…)*n` and `x*n`, drops commas; an error names what is malformed.
fn expand(text: &str) -> Result<String> {
    let err = |m: String| bad("pipeline_layout", m);
    let s: Vec<char> = text.chars().filter(|&c| c != ',').collect();
    let mut out = String::new();
    let mut i = 0;
    while i < s.len() {
        let (unit, next) = match s[i] {
            '(' => {
                let close = s[i + 1..]
                    .iter()
                    .position(|&c| c == ')')
                    .ok_or_else(|| err(format!("`(` at character {} is never closed", i + 1)))?;
                let inner: String = s[i + 1..i + 1 + close].iter().collect();
                if inner.contains('(') {
                    return Err(err("groups `(…)*n` do not nest".into()));
                }
                (expand(&inner)?, i + close + 2)
            }
            ')' => return Err(err(format!("`)` at character {} has no `(`", i + 1))),
            '*' => return Err(err(format!("`*` at character {} repeats nothing", i + 1))),
            c => (c.to_string(), i + 1),
        };
        let (count, after) = repeat(&s, next)?;
        if s.get(next - 1) == Some(&')') && count.is_none() {
            return Err(err("a group `(…)` needs a count: `(…)*n`".into()));
        }
        let n = count.unwrap_or(1) as usize;
        if out.len() + unit.len() * n > 1_000_000 {
            return Err(err("expands to more than 10⁶ characters".into()));
        }
        out.push_str(&unit.repeat(n));
        i = after;
    }
    Ok(out)
}

/// Reads `*n` at `at`: (Some(n), index after) or (None, at) when no `*` follows.
fn repeat(s: &[char], at: usize) -> Result<(Option<u32>, usize)> {
    if s.get(at) != Some(&'*') {
        return Ok((None, at));
    }
    let digits: String = s[at + 1..]
        .iter()
        .take_while(|c| c.is_ascii_digit())
        .collect();
    let n: u32 = digits.parse().map_err(|_| {
        bad(
            "pipeline_layout",
            format!("`*` at character {} needs a count", at + 1),
        )
    })?;
    Ok((Some(n), at + 1 + digits.len()))
}

/// Parses `text` and resolves it on `pp` ranks for a model of `layers` decoder layers and
/// `mtp` MTP modules, with Megatron-core's checks
/// (`PipelineParallelLayerLayout.validate_layer_layout`): `E` first and `L` last, each once;
/// as many `t` as layers and `m` as MTP modules, every `m` after the last `t`, all in one
/// virtual stage and that stage the last of its rank (`k ≥ (v−1)·p` for stage `k`, which
/// runs on rank `k mod p`); every rank holds at least one layer (the estimate's explicit
/// split).
pub fn resolve(text: &str, pp: u32, layers: u32, mtp: u32) -> Result<Layout> {
    let err = |m: String| bad("pipeline_layout", m);
    let flat = expand(text)?;
    let stages: Vec<&str> = flat.split('|').collect();
    if let Some(c) = flat.chars().find(|c| !"EtmL|".contains(*c)) {
        return Err(err(format!(
            "unknown layer `{c}` (E embedding, t decoder layer, m MTP module, L loss, | stage)"
        )));
    }
    let n = stages.len() as u32;
    if pp == 0 || !n.is_multiple_of(pp) {
        return Err(err(format!(
            "{n} virtual stages do not divide over pp = {pp} ranks"
        )));
    }
    let count = |c: char| flat.chars().filter(|&x| x == c).count() as u32;
    if !flat.starts_with('E') || !flat.ends_with('L') || count('E') != 1 || count('L') != 1 {
        return Err(err(
            "needs the embedding `E` once, first, and the loss `L` once, last".into(),
        ));
    }
    if count('t') != layers {
        return Err(err(format!(
            "{} decoder layers `t` for a model of {layers}",
            count('t')
        )));
    }
    if count('m') != mtp {
        return Err(err(format!(
            "{} MTP modules `m` for a model of {mtp}",
            count('m')
        )));
    }
    let mtp_stage = stages.iter().position(|st| st.contains('m'));
    if let (Some(k), Some(first_m)) = (mtp_stage, flat.find('m')) {
        if stages[k].matches('m').count() as u32 != mtp {
            return Err(err(
                "the MTP modules must sit together in one virtual stage (Megatron-core)".into(),
            ));
        }
        if flat[first_m..].contains('t') {
            return Err(err(
                "every decoder layer `t` comes before the MTP modules `m`".into(),
            ));
        }
        if (k as u32) < n - pp {
            return Err(err(format!(
                "the MTP modules must sit in the last virtual stage of a rank (stages {} to \
                 {} here), not stage {k} (Megatron-core)",
                n - pp,
                n - 1
            )));
        }
    }
    let mut per_rank = vec![0u32; pp as usize];
    for (k, st) in stages.iter().enumerate() {
        per_rank[k % pp as usize] += st.chars().filter(|&c| c == 't').count() as u32;
    }
    if let Some(r) = per_rank.iter().position(|&l| l == 0) {
        return Err(err(format!("pipeline rank {r} holds no decoder layer")));
    }
    Ok(Layout {
        v: n / pp,
        per_rank,
        mtp_rank: mtp_stage.map(|k| k as u32 % pp),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deepseek_v3_layout_on_four_and_two_ranks() {
        // 16 virtual stages: E+4t, 14 × 4t, t+m+L. Rank r takes stages r, r+p, …
        let s = "Et*4|(t*4|)*14tmL";
        let four = resolve(s, 4, 61, 1).unwrap();
        assert_eq!(four.v, 4);
        assert_eq!(four.per_rank, vec![16, 16, 16, 13]);
        assert_eq!(four.mtp_rank, Some(3));
        let two = resolve(s, 2, 61, 1).unwrap();
        assert_eq!(two.v, 8);
        assert_eq!(two.per_rank, vec![32, 29]);
        assert_eq!(two.mtp_rank, Some(1));
        assert_eq!(resolve("Et*30|t*31L", 2, 61, 0).unwrap().mtp_rank, None);
    }

    #[test]
    fn megatron_docstring_example_and_commas() {
        // "Ettt|(tt|)*29,m|L": 32 stages; E+3t, 29 × 2t, then m, then L. On 8 ranks (v = 4)
        // stage 30 is rank 6's last: the MTP module sits there, apart from the loss
        // (Megatron-core's `mtp_standalone`); ranks 0–5 hold 3 + 2·3 or 4·2 layers, rank 6
        // 3·2 and rank 7 3·2.
        let l = resolve("Ettt|(tt|)*29,m|L", 8, 61, 1).unwrap();
        assert_eq!(l.v, 4);
        assert_eq!(l.per_rank, vec![9, 8, 8, 8, 8, 8, 6, 6]);
        assert_eq!(l.mtp_rank, Some(6));
        // On one rank every stage is that rank's: the last (the loss's) is the only one
        // that is its last; stage 30 is not.
        assert!(
            resolve("Ettt|(tt|)*29,m|L", 1, 61, 1)
                .unwrap_err()
                .to_string()
                .contains("last virtual stage of a rank (stages 31 to 31 here), not stage 30")
        );
        let ok = resolve("Ettt|(tt|)*28,tmL", 2, 60, 1).unwrap();
        // 30 stages: rank 0 takes the even ones (3 + 14·2 = 31), rank 1 the odd (14·2 + 1).
        assert_eq!(ok.v, 15);
        assert_eq!(ok.per_rank, vec![31, 29]);
    }

    #[test]
    fn bad_layouts_are_named() {
        let e = |s: &str, pp, l, m| resolve(s, pp, l, m).unwrap_err().to_string();
        assert!(e("Et|tL", 3, 2, 0).contains("2 virtual stages do not divide over pp = 3"));
        assert!(e("tE|tL", 2, 2, 0).contains("embedding `E` once, first"));
        assert!(e("Et|tL|L", 3, 2, 0).contains("loss `L` once"));
        assert!(e("Et|ttL", 2, 2, 0).contains("3 decoder layers `t` for a model of 2"));
        assert!(e("Et|tL", 2, 2, 1).contains("0 MTP modules"));
        assert!(e("Etm|tL", 2, 2, 1).contains("comes before the MTP modules"));
        assert!(e("Et|tm|m|L", 2, 2, 2).contains("together in one virtual stage"));
        assert!(e("Et|m|t|L", 2, 2, 1).contains("comes before the MTP modules"));
        assert!(e("Etm|t|t|L", 2, 3, 1).contains("comes before"));
        assert!(e("Et|tm|t|L", 2, 3, 1).contains("comes before"));
        // m in rank 1's first chunk (stage 1 of 4 on 2 ranks): not a last chunk.
        assert!(e("Et|tm||L", 2, 2, 1).contains("(stages 2 to 3 here), not stage 1"));
        // v = 3 on 2 ranks: stage 3 is rank 1's second chunk of three, not its last.
        assert!(e("Et|t|t|m||L", 2, 3, 1).contains("(stages 4 to 5 here), not stage 3"));
        assert!(e("Et|m|t|tL", 2, 3, 1).contains("comes before"));
        assert!(e("E|ttL", 2, 2, 0).contains("rank 0 holds no decoder layer"));
        assert!(e("Ex|tL", 2, 2, 0).contains("unknown layer `x`"));
        assert!(e("E(t|t*2", 1, 3, 0).contains("never closed"));
        assert!(e("E((t)*2)*2|L", 1, 4, 0).contains("do not nest"));
        assert!(e("Et*|tL", 2, 2, 0).contains("needs a count"));
        assert!(e("E(t|t)L", 2, 2, 0).contains("needs a count"));
        assert!(e("E*2|tL", 2, 1, 0).contains("embedding"));
        assert!(e("Et)|tL", 2, 2, 0).contains("has no `(`"));
        assert!(e("(t*1000)*2000", 1, 1, 0).contains("10⁶"));
    }

    #[test]
    fn repeats_expand_as_megatron_reads_them() {
        assert_eq!(expand("(ab|)*2,c*3").unwrap(), "ab|ab|ccc");
        assert_eq!(expand("Et*4|(t*4|)*2tmL").unwrap(), "Etttt|tttt|tttt|tmL");
        assert_eq!(expand("t*12").unwrap(), "tttttttttttt");
        // The limit is on the expanded length: 10⁶ characters pass, one more does not.
        assert_eq!(expand("t*1000000").unwrap().len(), 1_000_000);
        assert!(expand("t*1000001").is_err());
    }
}
