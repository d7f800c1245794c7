//! Which entry an access sample comes from after the fast engine's blocks (docs/simulator.md,
//! "Access sampling").
//!
//! The exact engine counts the sampling period down in CPU time and samples the reference
//! after the one in flight when the countdown ran out: the next pick of the step's smooth
//! weighted round-robin. A slow reference (a gather) is more often the one in flight, and the
//! round-robin seldom puts a minor entry after another, so the main entry is sampled more than
//! its share of the references (cg-like: 75.9 % of the samples for 70 % of the references).
//! The fast engine's blocks do not follow the round-robin; after them it draws the reference
//! in flight at the entries' shares of the time (references left times their cost), then the
//! sample from the successors of that entry in the step's own round-robin, counted over one
//! period of it (or its first `MAX_PICKS` picks).

use numalab_core::rng::StreamRng;
use numalab_workload::stream::{Entry, Swrr};
use rand::Rng;

/// The most picks of a step's round-robin counted. The round-robin runs over the step's own
/// counts, not over rounded shares: its order depends on them to the unit (3:5:2 exactly and
/// 76:128:51 order the entries differently, and a step of ua-like with counts 47 168, 78 613,
/// 31 445 follows the 3:5:2 order), so scaling the counts down would count another order. A
/// period longer than this is counted over its first picks.
const MAX_PICKS: u64 = 65_536;

/// Successor tables of recent steps kept per thread: a thread's steps repeat the same counts
/// every iteration.
const MEMO: usize = 8;

/// The round-robin's successor counts for one step: `next[i * k + j]` is how often entry
/// `j` follows entry `i` over one period. Empty until the step's first sample needs it.
#[derive(Clone, Debug, Default)]
pub(crate) struct Successors {
    next: Vec<u32>,
    k: usize,
    /// Recent steps' counts and their successor tables, newest last.
    memo: Vec<(Vec<u64>, Vec<u32>)>,
    /// Scratch for each entry's references and time left (no allocation per sample).
    refs_left: Vec<u64>,
    time_left: Vec<f64>,
}

/// The successor counts of the round-robin over `step_refs` (each entry's references in the
/// step), over one period or its first `MAX_PICKS` picks.
fn successors(step_refs: &[u64]) -> Vec<u32> {
    let k = step_refs.len();
    let mut next = vec![0u32; k * k];
    let mut swrr = Swrr::new(step_refs.iter().copied());
    let picks = swrr.period().min(MAX_PICKS) as usize;
    if picks == 0 {
        return next;
    }
    let first = swrr.pick();
    let mut prev = first;
    for _ in 1..picks {
        let cur = swrr.pick();
        next[prev * k + cur] += 1;
        prev = cur;
    }
    // A whole period repeats: its last pick is followed by its first.
    next[prev * k + first] += 1;
    next
}

impl Successors {
    /// Forget the step's table (a new step, with other entries); the memo stays.
    pub(crate) fn clear(&mut self) {
        self.next.clear();
        self.k = 0;
    }

    /// Take the successor table of the step whose entries issue `step_refs` references.
    fn load(&mut self, step_refs: &[u64]) {
        self.k = step_refs.len();
        if let Some(i) = self.memo.iter().position(|(refs, _)| refs == step_refs) {
            self.next.clone_from(&self.memo[i].1);
            return;
        }
        self.next = successors(step_refs);
        if self.memo.len() == MEMO {
            self.memo.remove(0);
        }
        self.memo.push((step_refs.to_vec(), self.next.clone()));
    }

    /// The entry of the sample among `entries`, a reference of entry `i` costing
    /// `ns_per_ref(i, entry)` on average; `None` when no entry has time left.
    pub(crate) fn draw_among(
        &mut self,
        entries: &[Entry],
        ns_per_ref: impl Fn(usize, &Entry) -> f64,
        rng: &mut StreamRng,
    ) -> Option<usize> {
        if self.k != entries.len() {
            let step_refs: Vec<u64> = entries.iter().map(|e| e.refs).collect();
            self.load(&step_refs);
        }
        let (mut refs_left, mut time_left) = (std::mem::take(&mut self.refs_left), std::mem::take(&mut self.time_left));
        refs_left.clear();
        refs_left.extend(entries.iter().map(|e| e.remaining()));
        time_left.clear();
        time_left.extend(entries.iter().zip(&refs_left).enumerate().map(|(i, (e, &r))| r as f64 * ns_per_ref(i, e)));
        let entry = self.draw(&refs_left, &time_left, rng);
        (self.refs_left, self.time_left) = (refs_left, time_left);
        entry
    }

    /// The entry of the sample: the reference in flight drawn at `time_left[i]` (each entry's
    /// references left times their cost, ns), then its round-robin successor among the
    /// entries with references left. `None` when no entry has time left, or the one in
    /// flight has no successor with references left.
    fn draw(&self, refs_left: &[u64], time_left: &[f64], rng: &mut StreamRng) -> Option<usize> {
        let total_ns: f64 = time_left.iter().sum();
        if !(total_ns > 0.0 && total_ns.is_finite()) || self.next.len() != refs_left.len() * refs_left.len() {
            return None;
        }
        let k = refs_left.len();
        let mut at = rng.random::<f64>() * total_ns;
        let last = time_left.iter().rposition(|&t| t > 0.0)?;
        let in_flight = time_left.iter().position(|&t| {
            at -= t;
            t > 0.0 && at < 0.0
        });
        let row = &self.next[in_flight.unwrap_or(last) * k..][..k];
        let open = |j: usize| if refs_left[j] > 0 { row[j] } else { 0 };
        let picks: u32 = (0..k).map(open).sum();
        if picks == 0 {
            return None;
        }
        let mut r = rng.random_range(0..picks);
        (0..k).find(|&j| {
            let c = open(j);
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
    use super::{successors, Successors};
    use numalab_workload::stream::{AccessKind, Cursor, Entry, Seg};

    fn rng() -> numalab_core::rng::StreamRng {
        numalab_core::rng::stream(5, "sample-entry-test", 0)
    }

    fn entry(refs: u64, kind: AccessKind) -> Entry {
        Entry::new(Cursor::Walk { segs: vec![Seg::contiguous(0, 1 << 20)], seg: 0, pos: 0 }, refs, 0.0, kind, None)
    }

    /// The share of `draws` samples that land on each entry.
    fn shares(entries: &[Entry], ns: [f64; 3], draws: u32) -> Vec<f64> {
        let (mut s, mut r) = (Successors::default(), rng());
        let mut hits = vec![0u32; entries.len()];
        for _ in 0..draws {
            hits[s.draw_among(entries, |_, e| ns[e.kind as usize], &mut r).expect("time is left")] += 1;
        }
        hits.iter().map(|&h| h as f64 / draws as f64).collect()
    }

    /// The round-robin of 3:5:2 (reduced from the step's counts) is 1 0 2 1 0 1 1 2 0 1, read
    /// cyclically: worked out by hand from its rule (docs/simulator.md, "Access sampling").
    #[test]
    fn successors_of_a_round_robin_period() {
        let next = successors(&[300_000, 500_000, 200_000]);
        #[rustfmt::skip]
        assert_eq!(next, vec![
            0, 2, 1, // after 0: 0 2, 0 1, 0 1
            2, 2, 1, // after 1: 1 0 twice, 1 1 twice, 1 2
            1, 1, 0, // after 2: 2 1, 2 0
        ]);
        assert_eq!(successors(&[3, 1]), vec![2, 1, 1, 0], "A A B A");
        assert_eq!(successors(&[0, 0]), vec![0; 4]);
        // Counts a few units off the shares keep the order of the shares when kept to the unit,
        // and take another when rounded: ua-like's step (its first 65 536 picks) against the
        // same shares scaled to 255 picks.
        let rows = |next: Vec<u32>| -> Vec<f64> {
            next.chunks(3).flat_map(|r| r.iter().map(|&c| c as f64 / r.iter().sum::<u32>() as f64).collect::<Vec<_>>()).collect()
        };
        let exact_shares = rows(successors(&[3, 5, 2]));
        for (a, b) in rows(successors(&[47_168, 78_613, 31_445])).iter().zip(&exact_shares) {
            assert!((a - b).abs() < 0.001, "ua-like's step follows the order of 3:5:2");
        }
        let rounded = rows(successors(&[76, 128, 51]));
        assert!((rounded[2] - 10.0 / 76.0).abs() < 1e-9, "after 0, 2 in 10 of 76 picks, not a third: {rounded:?}");
        let long = successors(&[1_000_003, 7, 3]);
        assert_eq!(long.iter().sum::<u32>(), 65_536, "a period of 1 000 013 picks: its first 65 536");
    }

    /// At equal costs the samples land on the entries at their shares of the references; when
    /// the random entry costs twice a streaming one it is more often in flight, and its
    /// successors (the streaming entries) are sampled more: 0.3375, 0.4625, 0.2 by the table
    /// above.
    #[test]
    fn the_sample_follows_the_reference_in_flight_in_the_round_robin() {
        let entries = [entry(300_000, AccessKind::Stream), entry(500_000, AccessKind::Random), entry(200_000, AccessKind::Stream)];
        let even = shares(&entries, [1.0, 1.0, 1.0], 100_000);
        for (got, want) in even.iter().zip([0.3, 0.5, 0.2]) {
            assert!((got - want).abs() < 0.006, "equal costs: {even:?}");
        }
        let slow_random = shares(&entries, [1.0, 2.0, 1.0], 100_000);
        for (got, want) in slow_random.iter().zip([0.3375, 0.4625, 0.2]) {
            assert!((got - want).abs() < 0.006, "random twice as slow: {slow_random:?}");
        }
    }

    /// An entry with no references left is never drawn, nor is anything once none has time.
    #[test]
    fn entries_with_nothing_left_are_never_sampled() {
        let mut entries = [entry(500, AccessKind::Stream), entry(300, AccessKind::Random), entry(200, AccessKind::Stream)];
        entries[1].issued = 300;
        let (mut s, mut r) = (Successors::default(), rng());
        for _ in 0..5_000 {
            let e = s.draw_among(&entries, |_, _| 1.0, &mut r).expect("time is left");
            assert_ne!(e, 1);
        }
        let done = [entry(0, AccessKind::Stream), entry(0, AccessKind::Stream)];
        assert_eq!(Successors::default().draw_among(&done, |_, _| 1.0, &mut r), None);
    }

    /// A step's table is made once, and a step with counts seen recently takes it from the
    /// memo.
    #[test]
    fn tables_are_made_once_per_step_and_kept_for_the_next_iterations() {
        let (mut s, mut r) = (Successors::default(), rng());
        let a = [entry(3, AccessKind::Stream), entry(1, AccessKind::Stream)];
        let b = [entry(1, AccessKind::Stream), entry(1, AccessKind::Stream)];
        s.draw_among(&a, |_, _| 1.0, &mut r);
        assert_eq!(s.next, vec![2, 1, 1, 0]);
        s.draw_among(&b, |_, _| 1.0, &mut r);
        assert_eq!(s.next, vec![2, 1, 1, 0], "the same step: the table stays");
        s.clear();
        s.draw_among(&b, |_, _| 1.0, &mut r);
        assert_eq!(s.next, vec![0, 1, 1, 0]);
        s.clear();
        s.draw_among(&a, |_, _| 1.0, &mut r);
        assert_eq!(s.next, vec![2, 1, 1, 0]);
        assert_eq!(s.memo.len(), 2, "the first step's table came from the memo");
    }
}
