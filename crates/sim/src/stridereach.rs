//! How far a strided entry may run before a reference the exact path must see
//! (docs/simulator.md, "The fast engine": "Strides over armed pages").
//!
//! A stride's references go to known positions, so which of them land on a page armed for a
//! hinting fault (or unplaced, or replicated) is known before they are charged. A block
//! follows a strided entry up to the first such reference, as it follows a walk up to its
//! first slow page, and the exact path takes that reference alone: the fault happens at the
//! reference where the exact path would take it. Before this, one armed page anywhere in the
//! segment sent every reference of the step through the exact path.
//!
//! What a scan found is kept per entry: the references up to where it stopped stay on fast
//! pages until some page of the memory turns slow (`Memory::slowed`), since disarming or
//! migrating a page never makes it slow. Each reference is then looked at about once per
//! time the scanner arms pages, not once per block.

use crate::memory::SLOW;
use numalab_workload::stream::Cursor;
use numalab_workload::Entry;

/// Where a scan of one entry stopped: the entry's `issued` count at its first reference not
/// known to be on a fast page, and the cursor there; valid while `Memory::slowed` is
/// `slowed`.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Clear {
    slowed: u64,
    to: u64,
    pos: u64,
    start: u64,
}

/// Per entry of the current step: what its last scan found.
#[derive(Clone, Debug, Default)]
pub(crate) struct StrideReach {
    clear: Vec<Option<Clear>>,
}

impl StrideReach {
    /// Forget the previous step's entries.
    pub fn begin_step(&mut self) {
        self.clear.clear();
    }

    /// How many of entry `i`'s next references, at most `want`, land on pages below `SLOW`
    /// in `home` (lines to pages by `shift`); `slowed` is `Memory::slowed` now. 0 for an
    /// entry that is not strided.
    pub fn reach(&mut self, i: usize, e: &Entry, want: u64, home: &[u8], shift: u32, slowed: u64) -> u64 {
        let Cursor::Strided { seg, pos, start, stride } = &e.cursor else { return 0 };
        if self.clear.len() <= i {
            self.clear.resize(i + 1, None);
        }
        let (mut at, mut p, mut s) = (e.issued, *pos, *start);
        if let Some(c) = self.clear[i] {
            if c.slowed == slowed && c.to >= e.issued {
                (at, p, s) = (c.to, c.pos, c.start);
            }
        }
        // The cursor's own rule (`Entry::take_run`): past the segment's end the next pass
        // starts one position after the previous start.
        let goal = e.issued + want;
        let (lines, stride) = (seg.lines(), *stride);
        let wrap = stride.min(lines).max(1);
        while at < goal {
            if home[(seg.line_at(p) >> shift) as usize] >= SLOW {
                break;
            }
            at += 1;
            p += stride;
            if p >= lines {
                s = (s + 1) % wrap;
                p = s;
            }
        }
        self.clear[i] = Some(Clear { slowed, to: at, pos: p, start: s });
        at.min(goal) - e.issued
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memory::ARMED;
    use numalab_workload::stream::{AccessKind, Seg};

    /// A strided entry over `lines` lines of 4-line pages (shift 2), from line 0.
    fn strided(lines: u64, stride: u64, refs: u64) -> Entry {
        let cursor = Cursor::Strided { seg: Seg::contiguous(0, lines), pos: 0, start: 0, stride };
        Entry::new(cursor, refs, 0.0, AccessKind::Stream, None)
    }

    /// The entry's next `k` pages, one per reference, as `next` gives them.
    fn pages_ahead(e: &Entry, k: u64) -> Vec<u64> {
        let mut e = e.clone();
        let mut rng = numalab_core::rng::stream(1, "stridereach-test", 0);
        (0..k).map(|_| e.next(&mut rng).0 >> 2).collect()
    }

    #[test]
    fn reach_stops_before_the_first_reference_on_a_slow_page() {
        // 32 lines, stride 5: positions 0 5 10 15 20 25 30, then 1 6 11 ...
        let e = strided(32, 5, 100);
        let mut home = vec![0u8; 8];
        home[2] |= ARMED; // lines 8..12: position 10 (3rd reference) and 11 (10th).
        let mut r = StrideReach::default();
        assert_eq!(pages_ahead(&e, 3)[2], 2);
        assert_eq!(r.reach(0, &e, 50, &home, 2, 0), 2);
        // A want below the stop is met in full.
        assert_eq!(r.reach(0, &e, 1, &home, 2, 0), 1);
        // The page disarmed (no page turned slow): the scan goes on past it, to the next slow
        // page, here none before `want`.
        home[2] &= !ARMED;
        assert_eq!(r.reach(0, &e, 50, &home, 2, 0), 50);
    }

    #[test]
    fn a_page_turned_slow_is_seen_only_after_slowed_moves() {
        let mut e = strided(32, 5, 100);
        let mut home = vec![0u8; 8];
        let mut r = StrideReach::default();
        assert_eq!(r.reach(0, &e, 20, &home, 2, 7), 20);
        // Page 6 (lines 24..28: position 25, the 6th reference) armed: `slowed` moves.
        home[6] |= ARMED;
        assert_eq!(r.reach(0, &e, 20, &home, 2, 8), 5);
        // Charged past the stop by the exact path: the scan starts from the entry.
        e.take_run(6);
        assert_eq!(pages_ahead(&e, 1)[0], 7, "position 30");
        let want = 30;
        let got = r.reach(0, &e, want, &home, 2, 8);
        let ahead = pages_ahead(&e, want);
        let first_slow = ahead.iter().position(|&p| home[p as usize] >= SLOW).map_or(want, |x| x as u64);
        assert_eq!(got, first_slow);
    }

    #[test]
    fn reach_matches_reference_by_reference_over_many_passes() {
        // Every 7th page armed, a chunked segment, several strides.
        for stride in [1u64, 3, 5, 9, 40] {
            let seg = Seg { start: 8, chunk: 12, step: 20, chunks: 9 };
            let cursor = Cursor::Strided { seg, pos: 0, start: 0, stride };
            let mut e = Entry::new(cursor, 10_000, 0.0, AccessKind::Stream, None);
            let mut home = vec![1u8; 64];
            for p in (3..64).step_by(7) {
                home[p] |= ARMED;
            }
            let mut r = StrideReach::default();
            for round in 0..40u64 {
                let want = 1 + round % 13;
                let got = r.reach(0, &e, want, &home, 2, 0);
                let ahead = pages_ahead(&e, want);
                let first_slow = ahead.iter().position(|&p| home[p as usize] >= SLOW).map_or(want, |x| x as u64);
                assert_eq!(got, first_slow, "stride {stride}, round {round}");
                // Past the slow reference, as the exact path would take it.
                e.take_run(got + 1);
                if round % 5 == 4 {
                    // Pages disarmed by faults elsewhere: never slower.
                    home[((round * 11) % 64) as usize] &= !ARMED;
                }
            }
        }
    }

    #[test]
    fn other_entries_reach_nothing() {
        let walk = Entry::new(Cursor::Fixed { line: 3 }, 10, 0.0, AccessKind::Stream, None);
        assert_eq!(StrideReach::default().reach(0, &walk, 10, &[0; 4], 2, 0), 0);
    }
}
