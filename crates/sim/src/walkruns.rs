//! A block's walks ahead of their cursors, as runs of pages of one node (docs/simulator.md,
//! "The fast engine": "Walks over pages of several nodes").
//!
//! A walk's references go to consecutive lines, so the node and the cost of each is known
//! from the page bytes before it is charged. A block used to stop wherever any of its walks
//! reached a page of another node; under a policy that migrates pages a walk changes node
//! every few pages, and blocks became short. Here a walk is followed over the pages of any
//! node, up to the first page the exact path must see (unplaced, armed, replicated): each run
//! of pages with one byte is one [`WalkRun`], and what `k` references of the walk cost is a
//! sum over its runs, so the block can find where the epoch ends without stopping at every
//! change of node.

use crate::hot::count_f64;
use crate::memory::SLOW;
use numalab_workload::Entry;

/// A run of a walk's next references that go to one node.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct WalkRun {
    /// References of the walk from its cursor to this run's end.
    pub refs_end: u64,
    /// What those references cost, ns (the sum over this and the earlier runs).
    pub cost_end_ns: f64,
    /// What one reference of this run costs, ns.
    pub ns: f64,
    pub node: u8,
}

/// The runs of every walk of one block, kept between blocks only as allocations.
#[derive(Clone, Debug, Default)]
pub(crate) struct WalkRuns {
    runs: Vec<WalkRun>,
    /// Per entry of the block: its runs, `runs[start..end]` (empty for other entries).
    spans: Vec<(u32, u32)>,
}

/// What a walk's reference costs on a page of node `j`: `base_ns + own · row[j]` (its owner
/// escapes' expected cost, and its own page's at weight `own`; 0 and 1 without escapes).
pub(crate) struct RunCost<'c> {
    pub row: &'c [f64],
    pub base_ns: f64,
    pub own: f64,
}

impl RunCost<'_> {
    fn ns(&self, node: u8) -> f64 {
        self.base_ns + self.own * self.row[node as usize]
    }
}

/// What a walk's scan reads: the page bytes and the line-to-page shift.
pub(crate) struct Pages<'m> {
    pub home: &'m [u8],
    pub shift: u32,
}

impl WalkRuns {
    /// Forget the previous block's runs and size the spans for `entries` entries.
    pub fn begin(&mut self, entries: usize) {
        self.runs.clear();
        self.spans.clear();
        self.spans.resize(entries, (0, 0));
    }

    /// Follow entry `i`'s walk from `line` over up to `want` references (all inside one
    /// chunk): runs of pages with one byte, each reference of a run costing `cost.ns(node)`.
    /// Stops before the first page that needs the exact path. Returns how many of the `want`
    /// references the runs cover. The caller checked that `line`'s page is placed.
    pub fn scan(&mut self, i: usize, pages: &Pages<'_>, line: u64, want: u64, cost: RunCost<'_>) -> u64 {
        let (home, shift) = (pages.home, pages.shift);
        let lpp = 1u64 << shift;
        let start = self.runs.len() as u32;
        let mut page = line >> shift;
        let mut h = home[page as usize];
        debug_assert!(h < SLOW, "a walk's run starts on a placed page");
        // References from `line` to the end of `page`.
        let mut covered = lpp - (line & (lpp - 1));
        let (mut refs_end, mut cost_end_ns) = (0u64, 0.0f64);
        loop {
            // The following pages with the same byte, eight compared at a time.
            if covered < want {
                let pages_wanted = (want - covered).div_ceil(lpp);
                let from = (page + 1) as usize;
                let to = (from as u64 + pages_wanted).min(home.len() as u64) as usize;
                let same = leading_equal(&home[from.min(to)..to], h) as u64;
                page += same;
                covered += same * lpp;
            }
            let run_end = covered.min(want);
            let ns = cost.ns(h);
            cost_end_ns += count_f64(run_end - refs_end) * ns;
            refs_end = run_end;
            self.runs.push(WalkRun { refs_end, cost_end_ns, ns, node: h });
            if covered >= want {
                break;
            }
            let next = page as usize + 1;
            match home.get(next) {
                Some(&b) if b < SLOW => {
                    h = b;
                    page += 1;
                    covered += lpp;
                }
                _ => break,
            }
        }
        self.spans[i] = (start, self.runs.len() as u32);
        refs_end
    }

    /// Entry `i`'s runs.
    #[inline]
    pub fn of(&self, i: usize) -> &[WalkRun] {
        let (a, b) = self.spans[i];
        &self.runs[a as usize..b as usize]
    }

    /// What entry `i`'s next `k` references cost, ns (`k` within its runs): a run's cost
    /// up to its end, and the references past it at the next run's cost. One run gives
    /// `k · ns`, the same float the single-node charge formed.
    #[inline]
    pub fn cost_ns(&self, i: usize, k: u64) -> f64 {
        let runs = self.of(i);
        if let [run] = runs {
            return count_f64(k) * run.ns;
        }
        let r = runs.partition_point(|run| run.refs_end < k);
        let (before_refs, before_ns) = if r == 0 { (0, 0.0) } else { (runs[r - 1].refs_end, runs[r - 1].cost_end_ns) };
        let ns = runs.get(r).map_or(0.0, |run| run.ns);
        before_ns + count_f64(k - before_refs) * ns
    }

    /// Take entry `i`'s next `k` references run by run, handing `charge` each run's node,
    /// references and writes (the floor rule of `take_run`, run by run from the entry's
    /// `writes_before`; the cursor moves once, by `k`: the runs lie in one chunk).
    pub fn take(&self, i: usize, e: &mut Entry, k: u64, mut charge: impl FnMut(usize, u64, u64)) {
        let first = e.issued;
        let (mut taken, mut writes_before) = (0, e.writes_before(first));
        for run in self.of(i) {
            if taken == k {
                break;
            }
            let m = run.refs_end.min(k) - taken;
            taken += m;
            let writes_to = e.writes_before(first + taken);
            charge(run.node as usize, m, writes_to - writes_before);
            writes_before = writes_to;
        }
        debug_assert_eq!(taken, k, "a walk is charged within its runs");
        e.take_run(k);
    }
}

/// How many bytes at the start of `bytes` equal `b`: eight at a time, the first differing
/// byte found from the lowest set bit of the XOR (little-endian, so byte order is kept).
#[inline]
pub(crate) fn leading_equal(bytes: &[u8], b: u8) -> usize {
    leading_equal_in(bytes, b, u8::MAX)
}

/// [`leading_equal`] comparing only the bits of `mask`.
#[inline]
pub(crate) fn leading_equal_in(bytes: &[u8], b: u8, mask: u8) -> usize {
    let (pattern, mask_word) = (u64::from_le_bytes([b & mask; 8]), u64::from_le_bytes([mask; 8]));
    let word = |w: &[u8]| (u64::from_le_bytes(w.try_into().expect("eight bytes")) & mask_word) ^ pattern;
    let mut equal = 0;
    let mut chunks = bytes.chunks_exact(8);
    for chunk in &mut chunks {
        let diff = word(chunk);
        if diff != 0 {
            return equal + (diff.trailing_zeros() / 8) as usize;
        }
        equal += 8;
    }
    equal + chunks.remainder().iter().take_while(|&&x| x & mask == b & mask).count()
}

#[cfg(test)]
mod tests {
    use super::*;
    use numalab_workload::stream::{AccessKind, Cursor, Seg};

    #[test]
    fn leading_equal_counts_up_to_the_first_other_byte() {
        assert_eq!(leading_equal(&[], 3), 0);
        assert_eq!(leading_equal(&[3; 20], 3), 20);
        assert_eq!(leading_equal(&[4, 3, 3], 3), 0);
        let mut bytes = [1u8; 17];
        for at in 0..17 {
            bytes[at] = 2;
            assert_eq!(leading_equal(&bytes, 1), at, "first other byte at {at}");
            bytes[at] = 1;
        }
    }

    proptest::proptest! {
        /// Eight at a time gives the byte-by-byte count, wherever the first other byte sits
        /// and whatever follows it.
        #[test]
        fn leading_equal_matches_byte_by_byte(same in 0usize..100, tail in proptest::collection::vec(0u8..3, 0..40), b in 0u8..3) {
            let bytes: Vec<u8> = std::iter::repeat_n(b, same).chain(tail).collect();
            let expected = bytes.iter().take_while(|&&x| x == b).count();
            proptest::prop_assert_eq!(leading_equal(&bytes, b), expected);
        }

        /// In the bits of a mask, the same count over the masked bytes.
        #[test]
        fn leading_equal_in_compares_the_masked_bits(bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..100), b: u8, mask: u8) {
            let expected = bytes.iter().take_while(|&&x| x & mask == b & mask).count();
            proptest::prop_assert_eq!(leading_equal_in(&bytes, b, mask), expected);
        }
    }

    /// Four-line pages; `bytes` per page.
    fn scan(bytes: &[u8], line: u64, want: u64, base_ns: f64, own: f64) -> (WalkRuns, u64) {
        let mut w = WalkRuns::default();
        w.begin(1);
        let cost = RunCost { row: &[10.0, 30.0, 50.0], base_ns, own };
        let covered = w.scan(0, &Pages { home: bytes, shift: 2 }, line, want, cost);
        (w, covered)
    }

    #[test]
    fn runs_follow_page_bytes_across_nodes_up_to_a_slow_page() {
        // Pages: 0 0 1 1 2 SLOW; from line 2 (two lines left on page 0).
        let (w, covered) = scan(&[0, 0, 1, 1, 2, SLOW], 2, 100, 0.0, 1.0);
        assert_eq!(covered, 2 + 4 + 8 + 4);
        let runs: Vec<(u64, f64, u8)> = w.of(0).iter().map(|r| (r.refs_end, r.cost_end_ns, r.node)).collect();
        assert_eq!(runs, vec![(6, 60.0, 0), (14, 60.0 + 240.0, 1), (18, 300.0 + 200.0, 2)]);
        // Costs inside runs, at their ends and at zero.
        assert_eq!(w.cost_ns(0, 0), 0.0);
        assert_eq!(w.cost_ns(0, 6), 60.0);
        assert_eq!(w.cost_ns(0, 7), 90.0);
        assert_eq!(w.cost_ns(0, 18), 500.0);
    }

    #[test]
    fn a_scan_stops_at_what_is_wanted_and_at_the_end_of_memory() {
        let (w, covered) = scan(&[1, 1, 1, 1], 0, 9, 0.0, 1.0);
        assert_eq!((covered, w.of(0).len()), (9, 1));
        assert_eq!(w.cost_ns(0, 9), 9.0 * 30.0);
        let (_, covered) = scan(&[1, 0], 5, 100, 0.0, 1.0);
        assert_eq!(covered, 3, "the last page's three lines, then the memory ends");
    }

    #[test]
    fn an_escaping_walk_costs_its_escapes_plus_its_own_page_at_its_weight() {
        let (w, covered) = scan(&[0, 0, 1, SLOW], 0, 100, 4.0, 0.5);
        assert_eq!(covered, 12);
        assert_eq!(
            w.of(0),
            &[
                WalkRun { refs_end: 8, cost_end_ns: 72.0, ns: 9.0, node: 0 },
                WalkRun { refs_end: 12, cost_end_ns: 148.0, ns: 19.0, node: 1 }
            ]
        );
    }

    #[test]
    fn charging_splits_references_and_writes_by_run() {
        let (w, _) = scan(&[0, 1, 1, 0], 1, 100, 0.0, 1.0);
        // A walk over lines 0..16 from line 1, writing every other reference.
        let mut e = Entry::new(Cursor::Walk { segs: vec![Seg::contiguous(0, 16)], seg: 0, pos: 1 }, 100, 0.5, AccessKind::Stream, None);
        let (mut acc, mut wr) = ([0u64; 3], [0u64; 3]);
        w.take(0, &mut e, 10, |node, m, writes| {
            acc[node] += m;
            wr[node] += writes;
        });
        assert_eq!(acc, [3, 7, 0]);
        assert_eq!(wr.iter().sum::<u64>(), 5, "the floor rule over references 0..10");
        assert_eq!(e.issued, 10);
        assert_eq!(e.peek_run_any(4, 100).map(|(line, _)| line), Some(11));
    }
}
