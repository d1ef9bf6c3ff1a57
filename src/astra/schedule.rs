//! How ASTRA-sim's `Sys` runs the chunks (streams) of one collective through its
//! per-dimension queues (`Sys::generate_collective`, `insert_stream`,
//! `proceed_to_next_vnet_baseline`, `SchedulerUnit::notify_stream_added/removed`):
//!
//! - chunks are created in order 0, 1, …; each gets a priority (LIFO: increasing, so the
//!   newest chunk is preferred; FIFO: decreasing; EXPLICIT: equal) and enters the queue of
//!   its first phase at once;
//! - a queue runs at most `active` chunks; the others wait, ordered by priority (a newcomer
//!   goes after every waiting chunk of equal or higher priority);
//! - when a chunk finishes a phase it joins the queue of its next phase, then its old
//!   queue starts its next waiting chunk, then the new queue starts chunks if it has room.
//!
//! Phase durations do not depend on concurrency (congestion-unaware backend), so the
//! finish time follows from this list schedule alone: for one phase it is
//! ⌈chunks/active⌉·t; for phases on distinct dimensions it approaches
//! Σ_phases t + (chunks−1)·max t (pipelining); phases sharing a queue (RS and AG of the same
//! dimension under localBWAware) interleave by priority. This is a schedule of at most
//! chunks × phases steps, not a packet-level simulation.

use super::model::PhaseTime;

/// Finish time in ns of `chunks` identical chunks, each running `phases` in order.
pub fn finish_ns(phases: &[PhaseTime], chunks: u64, active: u32, lifo: bool) -> u64 {
    let active = active.max(1) as u64;
    match phases {
        [] => 0,
        [one] => chunks.div_ceil(active) * one.ns,
        _ if chunks <= active => phases.iter().map(|p| p.ns).sum(),
        _ => simulate(phases, chunks as usize, active as usize, lifo),
    }
}

struct State<'a> {
    phases: &'a [PhaseTime],
    active: usize,
    prio: Vec<i64>,
    step: Vec<usize>,
    waiting: Vec<Vec<usize>>,
    running: Vec<usize>,
    /// (finish time, start sequence, chunk) of running phases.
    events: Vec<(u64, u64, usize)>,
    seq: u64,
}

impl State<'_> {
    fn insert(&mut self, q: usize, ch: usize) {
        let w = &mut self.waiting[q];
        let pos = w
            .iter()
            .position(|&o| self.prio[o] < self.prio[ch])
            .unwrap_or(w.len());
        w.insert(pos, ch);
    }
    fn fill(&mut self, q: usize, now: u64) {
        while self.running[q] < self.active && !self.waiting[q].is_empty() {
            let ch = self.waiting[q].remove(0);
            self.running[q] += 1;
            self.events
                .push((now + self.phases[self.step[ch]].ns, self.seq, ch));
            self.seq += 1;
        }
    }
}

fn simulate(phases: &[PhaseTime], chunks: usize, active: usize, lifo: bool) -> u64 {
    let queues = phases.iter().map(|p| p.dim).max().unwrap_or(0) + 1;
    let mut s = State {
        phases,
        active,
        prio: (0..chunks as i64)
            .map(|i| if lifo { i } else { -i })
            .collect(),
        step: vec![0; chunks],
        waiting: vec![Vec::new(); queues],
        running: vec![0; queues],
        events: Vec::with_capacity(chunks),
        seq: 0,
    };
    for ch in 0..chunks {
        s.insert(phases[0].dim, ch);
        s.fill(phases[0].dim, 0);
    }
    let mut end = 0;
    while let Some(i) = (0..s.events.len()).min_by_key(|&i| (s.events[i].0, s.events[i].1)) {
        let (now, _, ch) = s.events.swap_remove(i);
        let q = phases[s.step[ch]].dim;
        s.running[q] -= 1;
        s.step[ch] += 1;
        if s.step[ch] < phases.len() {
            let nq = phases[s.step[ch]].dim;
            s.insert(nq, ch);
            s.fill(q, now);
            s.fill(nq, now);
        } else {
            s.fill(q, now);
            end = end.max(now);
        }
    }
    end
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ph(dim: usize, ns: u64) -> PhaseTime {
        PhaseTime {
            dim,
            ns,
            ..Default::default()
        }
    }

    #[test]
    fn one_phase_is_rounds_of_active_chunks() {
        assert_eq!(finish_ns(&[ph(0, 100)], 4, 1, true), 400);
        assert_eq!(finish_ns(&[ph(0, 100)], 4, 3, true), 200);
    }

    #[test]
    fn distinct_dimensions_pipeline() {
        // Σ t + (S−1)·max t = 10 + 30 + 3·30 = 130.
        assert_eq!(finish_ns(&[ph(0, 10), ph(1, 30)], 4, 1, true), 130);
        assert_eq!(finish_ns(&[ph(0, 30), ph(1, 10)], 4, 1, false), 130);
    }

    #[test]
    fn shared_queue_never_beats_its_load() {
        // RS(dim0) 10, AR(dim1) 5, AG(dim0) 10 over 4 chunks: dim 0 carries 4·20 = 80 ns
        // of work (lower bound); running the chunks one after another takes 4·25 = 100 ns.
        for lifo in [true, false] {
            let t = finish_ns(&[ph(0, 10), ph(1, 5), ph(0, 10)], 4, 1, lifo);
            assert!((80..=100).contains(&t), "{t}");
        }
    }
}
