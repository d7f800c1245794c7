//! Which entry an access sample comes from after the fast engine's blocks (docs/simulator.md,
//! "Access sampling").
//!
//! The exact engine counts the sampling period down in CPU time and samples the reference
//! after the one in flight when the countdown ran out: the next pick of the step's smooth
//! weighted round-robin. A slow reference (a gather) is more often the one in flight, and the
//! round-robin rarely follows a minor entry with another minor one, so the main entry is
//! sampled more than its share of the references (cg-like: 75.9 % of the samples for 70 % of
//! the references). The fast engine's blocks do not follow the round-robin; after them it
//! draws the reference in flight at the entries' shares of the time (references left times
//! their cost), then the sample from the round-robin's successors of that entry, counted
//! over one period of the step's shares scaled to about `SCALE` picks.

use numalab_core::rng::StreamRng;
use numalab_workload::stream::{AccessKind, Entry, Swrr};
use rand::Rng;

/// Picks in the scaled round-robin's period: enough to resolve shares of a fraction of a
/// per cent, few enough to count once per step.
const SCALE: u64 = 256;

/// The round-robin's successor counts for one step: `next[i * k + j]` is how often entry
/// `j` follows entry `i` over one period. Empty until the step's first sample needs it.
#[derive(Clone, Debug, Default)]
pub(crate) struct Successors {
    next: Vec<u32>,
    k: usize,
    /// Scratch for each entry's references and time left (no allocation per sample).
    refs_left: Vec<u64>,
    time_left: Vec<f64>,
}

impl Successors {
    /// Forget the counts (a new step, with other entries).
    pub(crate) fn clear(&mut self) {
        self.next.clear();
        self.k = 0;
    }

    /// Count the successors of the round-robin over `refs_left`, each entry's references left,
    /// scaled to about `SCALE` picks in all (an entry with any left keeps at least one pick).
    fn count(&mut self, refs_left: &[u64]) {
        let k = refs_left.len();
        let total: u128 = refs_left.iter().map(|&r| r as u128).sum();
        let weights = refs_left.iter().map(|&r| if r == 0 { 0 } else { ((r as u128 * SCALE as u128 / total) as u64).max(1) });
        let mut swrr = Swrr::new(weights);
        let period = swrr.period() as usize;
        self.k = k;
        self.next.clear();
        self.next.resize(k * k, 0);
        if period == 0 {
            return;
        }
        let first = swrr.pick();
        let mut prev = first;
        for _ in 1..period {
            let cur = swrr.pick();
            self.next[prev * k + cur] += 1;
            prev = cur;
        }
        // The period repeats: its last pick is followed by its first.
        self.next[prev * k + first] += 1;
    }

    /// The entry of the sample among `entries`, a reference of kind `k` costing
    /// `ns_per_ref(k)`; `None` when no entry has time left.
    pub(crate) fn draw_among(&mut self, entries: &[Entry], ns_per_ref: impl Fn(AccessKind) -> f64, rng: &mut StreamRng) -> Option<usize> {
        let (mut refs_left, mut time_left) = (std::mem::take(&mut self.refs_left), std::mem::take(&mut self.time_left));
        refs_left.clear();
        refs_left.extend(entries.iter().map(|e| e.remaining()));
        time_left.clear();
        time_left.extend(entries.iter().zip(&refs_left).map(|(e, &r)| r as f64 * ns_per_ref(e.kind)));
        let entry = self.draw(&refs_left, &time_left, rng);
        (self.refs_left, self.time_left) = (refs_left, time_left);
        entry
    }

    /// The entry of the sample: the reference in flight drawn at `time_left[i]` (each entry's
    /// references left times their cost, ns), then its round-robin successor. `None` when no
    /// entry has time left.
    fn draw(&mut self, refs_left: &[u64], time_left: &[f64], rng: &mut StreamRng) -> Option<usize> {
        let total_ns: f64 = time_left.iter().sum();
        if !(total_ns > 0.0 && total_ns.is_finite()) {
            return None;
        }
        if self.k != refs_left.len() {
            self.count(refs_left);
        }
        let mut at = rng.random::<f64>() * total_ns;
        let last = time_left.iter().rposition(|&t| t > 0.0)?;
        let in_flight = time_left.iter().position(|&t| {
            at -= t;
            t > 0.0 && at < 0.0
        });
        let row = &self.next[in_flight.unwrap_or(last) * self.k..][..self.k];
        let picks: u32 = row.iter().sum();
        if picks == 0 {
            return None;
        }
        let mut r = rng.random_range(0..picks);
        row.iter().position(|&c| {
            if r < c {
                true
            } else {
                r -= c;
                false
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::Successors;

    fn rng() -> numalab_core::rng::StreamRng {
        numalab_core::rng::stream(5, "sample-entry-test", 0)
    }

    /// Two entries, 3:1: the round-robin never puts the minor entry after itself, so its
    /// successors are all the major one; the major one is followed by the minor one a third
    /// of the time. Sampled at equal costs, the minor entry gets 1/4 of the samples, its
    /// share; at three times the cost (half the time in flight) only 1/6.
    #[test]
    fn the_sample_follows_the_reference_in_flight_in_the_round_robin() {
        let mut s = Successors::default();
        let refs = [3_000, 1_000];
        s.count(&refs);
        // Scaled to 192 and 64, the period is their ratio's: A A B A, read cyclically.
        assert_eq!(s.next, vec![2, 1, 1, 0]);
        let share = |s: &mut Successors, time: [f64; 2]| {
            let mut r = rng();
            let minor = (0..40_000).filter(|_| s.draw(&refs, &time, &mut r) == Some(1)).count();
            minor as f64 / 40_000.0
        };
        let even = share(&mut s, [3_000.0, 1_000.0]);
        assert!((even - 0.25).abs() < 0.01, "{even}");
        let slow_minor = share(&mut s, [3_000.0, 3_000.0]);
        assert!((slow_minor - 1.0 / 6.0).abs() < 0.01, "{slow_minor}");
    }

    /// An entry with no references left is never drawn, nor is anything once none has time.
    #[test]
    fn entries_with_nothing_left_are_never_sampled() {
        let mut s = Successors::default();
        let refs = [500, 0, 300, 200];
        let mut r = rng();
        for _ in 0..5_000 {
            let e = s.draw(&refs, &[500.0, 0.0, 900.0, 200.0], &mut r).expect("time is left");
            assert_ne!(e, 1);
        }
        let mut fresh = Successors::default();
        assert_eq!(fresh.draw(&[0, 0], &[0.0, 0.0], &mut r), None);
    }

    /// Counts stay until cleared: a new step with as many entries counts again only after
    /// `clear`.
    #[test]
    fn counts_are_made_once_per_step() {
        let mut s = Successors::default();
        let mut r = rng();
        s.draw(&[1, 1], &[1.0, 1.0], &mut r);
        assert_eq!(s.next, vec![0, 1, 1, 0]);
        s.draw(&[5, 1], &[1.0, 1.0], &mut r);
        assert_eq!(s.next, vec![0, 1, 1, 0], "the same step: the counts stay");
        s.clear();
        s.draw(&[3, 1], &[1.0, 1.0], &mut r);
        assert_eq!(s.next, vec![2, 1, 1, 0]);
        s.clear();
        s.draw(&[1_000, 7, 3], &[1.0, 1.0, 1.0], &mut r);
        assert_eq!(s.next.iter().sum::<u32>(), 255, "weights 253, 1, 1 (the minor ones kept at one pick)");
    }
}
