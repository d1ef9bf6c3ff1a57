//! Pipeline stages: how the layers are split over the `p` stages. Megatron-LM divides
//! them evenly; it also takes explicit first/last-stage counts
//! (`--decoder-first-pipeline-num-layers`, `--decoder-last-pipeline-num-layers`) and can
//! count the embedding and the loss as one layer each in the split
//! (`--account-for-embedding-in-pipeline-split`, `--account-for-loss-in-pipeline-split`).
//! Llama 3 405B (126 layers on 16 stages) takes one layer off the first and the last
//! stage (Dubey et al. 2024 §3.3.2). [`Stages`] summarises any split in a `Copy` value:
//! the estimate needs the first and last stage (they carry the embedding and the head)
//! and the largest, smallest and total of the middle ones.

use super::bad;
use crate::error::Result;

/// How the user asked for the split (from the plan spec).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SplitSpec<'a> {
    /// Explicit layers per stage (length p).
    pub explicit: Option<&'a [u32]>,
    /// Layers on the first stage.
    pub first: Option<u32>,
    /// Layers on the last stage.
    pub last: Option<u32>,
    /// Count the input embedding as one layer of the first stage.
    pub embedding_as_layer: bool,
    /// Count the output head and loss as one layer of the last stage.
    pub loss_as_layer: bool,
}

/// A split of `L` layers over `p` stages, summarised.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stages {
    /// Stages p.
    pub pp: u32,
    /// Layers on the first stage (all layers when p = 1).
    pub first: u32,
    /// Layers on the last stage (all layers when p = 1).
    pub last: u32,
    /// Most layers on a middle stage (0 when p ≤ 2).
    pub mid_max: u32,
    /// Layers on all middle stages together.
    pub mid_sum: u32,
    /// MTP modules on a rank other than the last (Megatron-core's `mtp_standalone`, set by a
    /// pipeline layout): that rank and its decoder layers. `None`: with the loss on the last
    /// stage.
    pub mtp_apart: Option<(u32, u32)>,
}

impl Stages {
    /// Splits `layers` over `pp` stages as `s` asks. Without a request the split is even;
    /// when `pp` does not divide the layers, the `L mod p` extra layers go to the middle
    /// stages first (the ends already carry the embedding and the loss), then to the last
    /// and the first stage: 126 layers on 16 stages gives 7, 8 × 14, 7 as Llama 3 405B.
    pub fn new(layers: u32, pp: u32, s: &SplitSpec) -> Result<Stages> {
        if pp == 1 {
            return Ok(Stages {
                pp,
                first: layers,
                last: layers,
                mid_max: 0,
                mid_sum: 0,
                mtp_apart: None,
            });
        }
        if let Some(list) = s.explicit {
            return Self::explicit(layers, pp, list);
        }
        let (e, l) = (u32::from(s.embedding_as_layer), u32::from(s.loss_as_layer));
        if s.first.is_some() || s.last.is_some() {
            return Self::ends(layers, pp, s.first, s.last);
        }
        if e + l > 0 {
            let units = layers + e + l;
            if !units.is_multiple_of(pp) {
                return Err(bad(
                    "account_for_embedding/loss",
                    format!(
                        "layers + {} = {units} is not divisible by pp = {pp} (Megatron-LM requires it)",
                        e + l
                    ),
                ));
            }
            let n = units / pp;
            return Self::ends(layers, pp, Some(n - e), Some(n - l));
        }
        let (base, extra) = (layers / pp, layers % pp);
        if base == 0 {
            return Err(bad(
                "pp",
                format!("{pp} stages for {layers} layers leave a stage empty"),
            ));
        }
        let mid = extra.min(pp - 2);
        let last = base + u32::from(extra > mid);
        let first = base + u32::from(extra > mid + 1);
        let mid_max = if pp > 2 { base + u32::from(mid > 0) } else { 0 };
        Ok(Stages {
            pp,
            first,
            last,
            mid_max,
            mid_sum: (pp - 2) * base + mid,
            mtp_apart: None,
        })
    }

    fn explicit(layers: u32, pp: u32, list: &[u32]) -> Result<Stages> {
        if list.len() != pp as usize {
            return Err(bad(
                "layers_per_stage",
                format!("{} entries for pp = {pp} stages", list.len()),
            ));
        }
        let sum: u32 = list.iter().sum();
        if sum != layers || list.contains(&0) {
            return Err(bad(
                "layers_per_stage",
                format!("needs pp = {pp} counts ≥ 1 summing to the {layers} layers, got sum {sum}"),
            ));
        }
        let mid = &list[1..list.len() - 1];
        Ok(Stages {
            pp,
            first: list[0],
            last: list[list.len() - 1],
            mid_max: mid.iter().copied().max().unwrap_or(0),
            mid_sum: mid.iter().sum(),
            mtp_apart: None,
        })
    }

    /// First and/or last stage given; the rest divides evenly over the other stages
    /// (Megatron-LM's rule for `--decoder-first/last-pipeline-num-layers`).
    fn ends(layers: u32, pp: u32, first: Option<u32>, last: Option<u32>) -> Result<Stages> {
        let given = first.unwrap_or(0) + last.unwrap_or(0);
        let others = pp - u32::from(first.is_some()) - u32::from(last.is_some());
        // With stages left the ends leave them at least one layer; with none (two stages,
        // both given) the ends hold every layer.
        let split = if others == 0 {
            given == layers
        } else {
            given < layers
        };
        if !split {
            return Err(bad(
                "first_stage_layers/last_stage_layers",
                format!("{given} layers on the end stages do not leave a valid split of {layers}"),
            ));
        }
        let rest = layers - given;
        if others > 0 && (!rest.is_multiple_of(others) || rest == 0) {
            return Err(bad(
                "first_stage_layers/last_stage_layers",
                format!("the remaining {rest} layers do not divide over the other {others} stages"),
            ));
        }
        let each = rest.checked_div(others).unwrap_or(0);
        let (f, l) = (first.unwrap_or(each), last.unwrap_or(each));
        Ok(Stages {
            pp,
            first: f,
            last: l,
            mid_max: if pp > 2 { each } else { 0 },
            mid_sum: (pp - 2) * each,
            mtp_apart: None,
        })
    }

    /// Most layers on any stage.
    pub fn max_layers(&self) -> u32 {
        self.first.max(self.last).max(self.mid_max)
    }

    /// DualPipe's busiest pair of middle stages, in layers: device `i` runs stage `i`
    /// and stage `p − 1 − i` (DeepSeek's DualPipe, `examples/example_dualpipe.py`), so
    /// the `p − 2` middle stages form `(p − 2)/2` pairs. Of them `h = Σ − (p − 2)·(max − 1)`
    /// hold the most layers; with `h` above the pair count two of them must share a pair
    /// (`2·max`), else each pairs with a lighter stage (`2·max − 1`). 0 when `p ≤ 2`. For
    /// an explicit list whose middle stages differ by more than one layer this assumes
    /// they hold `max` or `max − 1`.
    pub fn dualpipe_mid_pair(&self) -> u32 {
        // Only splits of p ≤ 2 stages have no middle stage (every stage holds a layer).
        if self.mid_max == 0 {
            return 0;
        }
        let mids = self.pp - 2;
        let heavy = self.mid_sum.saturating_sub(mids * (self.mid_max - 1));
        if heavy > mids / 2 {
            2 * self.mid_max
        } else {
            2 * self.mid_max - 1
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn split(l: u32, p: u32, s: SplitSpec) -> (u32, u32, u32, u32) {
        let x = Stages::new(l, p, &s).unwrap();
        (x.first, x.mid_max, x.mid_sum, x.last)
    }

    #[test]
    fn llama3_405b_and_bloom_default_splits() {
        // 126 = 7 + 14·8 + 7 (Dubey et al. 2024 §3.3.2: one layer fewer on each end).
        assert_eq!(split(126, 16, SplitSpec::default()), (7, 8, 112, 7));
        // BLOOM 70 layers on 12 stages: 70 = 12·5 + 10 → 5 + 10·6 + 5.
        assert_eq!(split(70, 12, SplitSpec::default()), (5, 6, 60, 5));
        // Even split unchanged: 96 on 8.
        assert_eq!(split(96, 8, SplitSpec::default()), (12, 12, 72, 12));
        // 17 on 4: 4 extra > 2 middle stages → middle 5, 5; last 4... 17 = 4·4 + 1.
        assert_eq!(split(17, 4, SplitSpec::default()), (4, 5, 9, 4));
    }

    #[test]
    fn megatron_first_last_and_account_for() {
        let s = SplitSpec {
            first: Some(7),
            last: Some(7),
            ..SplitSpec::default()
        };
        assert_eq!(split(126, 16, s), (7, 8, 112, 7));
        // Embedding and loss as a layer each: (126 + 2)/16 = 8 → 7, 8…, 7.
        let s = SplitSpec {
            embedding_as_layer: true,
            loss_as_layer: true,
            ..SplitSpec::default()
        };
        assert_eq!(split(126, 16, s), (7, 8, 112, 7));
        let s = SplitSpec {
            first: Some(5),
            ..SplitSpec::default()
        };
        assert!(Stages::new(126, 16, &s).is_err()); // 121 over 15 stages
        let list = [3, 5, 4, 4];
        let s = SplitSpec {
            explicit: Some(&list),
            ..SplitSpec::default()
        };
        assert_eq!(split(16, 4, s), (3, 5, 9, 4));
        let s = SplitSpec {
            explicit: Some(&list),
            ..SplitSpec::default()
        };
        assert!(Stages::new(17, 4, &s).is_err());
    }

    /// DualPipe pairs stage `i` with `p − 1 − i`; the busiest middle pair by hand.
    #[test]
    fn dualpipe_middle_pairs() {
        let pair = |l, p| {
            Stages::new(l, p, &SplitSpec::default())
                .unwrap()
                .dualpipe_mid_pair()
        };
        // DeepSeek-V3, 61 layers on 16 stages: 3, 4 × 13 and 3 × 1 in the middle, 3. Thirteen
        // 4-layer stages for seven pairs: two share one, 8 layers.
        assert_eq!(pair(61, 16), 8);
        // 19 on 8: 2, 3 3 3 2 2 2, 2 (three heavy for three pairs): 3 + 2 = 5.
        assert_eq!(pair(19, 8), 5);
        // 20 on 8: four heavy middles for three pairs: 3 + 3.
        assert_eq!(pair(20, 8), 6);
        assert_eq!(pair(32, 4), 16);
        assert_eq!(pair(32, 2), 0);
    }

    /// End-stage counts that leave no valid split are refused, however they fail.
    #[test]
    fn end_stage_counts_that_leave_no_split_are_refused() {
        let ends = |first, last| SplitSpec {
            first,
            last,
            ..SplitSpec::default()
        };
        // 10 + 10 = 20 layers on the ends of 16: more than the model has, although one
        // middle stage is left to take the rest.
        assert!(Stages::new(16, 3, &ends(Some(10), Some(10))).is_err());
        // Two stages, both given: 4 + 4 = 8 of the 16 layers, and no stage for the other 8.
        assert!(Stages::new(16, 2, &ends(Some(4), Some(4))).is_err());
    }

    /// `L mod p = p − 1` extra layers: the `p − 2` middle stages take one each and the last
    /// the one left; the first never does (15 on 4: 3, 4 + 4, 4; 15 on 2: 7, 8). Stages left
    /// empty are refused (3 layers on 4 stages), one layer each is a split.
    #[test]
    fn extra_layers_go_to_the_middle_then_the_last_stage() {
        let even = SplitSpec::default;
        assert_eq!(split(15, 4, even()), (3, 4, 8, 4));
        assert_eq!(split(15, 2, even()), (7, 0, 0, 8));
        assert!(Stages::new(3, 4, &even()).is_err());
        assert_eq!(split(4, 4, even()), (1, 1, 2, 1));
    }

    /// Counting the embedding as a layer (Megatron-LM `--account-for-embedding-in-pipeline-split`)
    /// takes it from the first stage, the loss from the last: 15 layers + the embedding = 16
    /// units on 4 stages, 4 each, so the first holds 3 layers; 15 + the loss, the last 3.
    #[test]
    fn the_embedding_and_the_loss_take_a_layer_from_their_end() {
        let emb = SplitSpec {
            embedding_as_layer: true,
            ..SplitSpec::default()
        };
        assert_eq!(split(15, 4, emb), (3, 4, 8, 4));
        let loss = SplitSpec {
            loss_as_layer: true,
            ..SplitSpec::default()
        };
        assert_eq!(split(15, 4, loss), (4, 4, 8, 3));
    }

    /// Two stages with both ends given are a split when the ends hold every layer: 6 + 10
    /// of 16 (Megatron-LM accepts `--decoder-first-pipeline-num-layers 6
    /// --decoder-last-pipeline-num-layers 10` on 2 stages).
    #[test]
    fn two_given_ends_that_hold_every_layer_are_a_split() {
        let s = SplitSpec {
            first: Some(6),
            last: Some(10),
            ..SplitSpec::default()
        };
        assert_eq!(split(16, 2, s), (6, 0, 0, 10));
    }

    /// Two stages have no middle stage: the first given, the last takes the rest.
    #[test]
    fn two_stages_with_the_first_given_have_no_middle() {
        let s = SplitSpec {
            first: Some(6),
            ..SplitSpec::default()
        };
        // 16 − 6 = 10 on the last stage; mid_max and mid_sum 0 (no stage between).
        assert_eq!(split(16, 2, s.clone()), (6, 0, 0, 10));
        // The busiest stage holds 10, the pair of middles is empty.
        let st = Stages::new(16, 2, &s).unwrap();
        assert_eq!((st.max_layers(), st.dualpipe_mid_pair()), (10, 0));
    }
}
