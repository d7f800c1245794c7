//! One segment's counts: lines per node, armed and blocked lines, runs of one node, shares (docs/simulator.md, "The fast engine").

use super::armed::{ArmedPages, MAX_ARMED_SET};
use super::mixture::MixBase;
use super::pages::{byte_runs, class, lines_in};
use crate::memory::ARMED;
use numalab_core::rng::StreamRng;
use numalab_workload::stream::Seg;
use numalab_workload::sweep::StrideCrossings;
use rand::Rng;
use std::cell::RefCell;

/// Most runs of one node kept for a strided segment. A segment cut into many runs is counted
/// by sweeps (numalab_workload::sweep), whose cost grows with the runs only once per runs
/// remade; the bound keeps a run index within a crossing's packing (2^24) and the runs' memory
/// (9 bytes each) within 9 MiB per segment.
pub(super) const MAX_RUNS: usize = 1 << 20;

/// Fixed-point unit of the shares a mixture sums (`SegShare::fixed`): 2^48, so that the sums
/// of up to 2^15 parts fit a u64 and a share is kept to about 4e-15.
pub(super) const FIXED_ONE: f64 = (1u64 << 48) as f64;

/// Versions of its fixed-point shares a segment keeps (`SegShare::fixed_at`).
const HISTORY: usize = 4;

/// A share in `[0, 1]` in fixed point, rounded to the nearest unit: the same value for the
/// same share on every machine (a correctly rounded product by a power of two, then a
/// rounding).
fn to_fixed(share: f64) -> u64 {
    (share * FIXED_ONE).round() as u64
}

/// The counts of one segment, or of an even mixture of segments (a reference that escapes to
/// a uniformly chosen other block).
pub(super) struct SegShare {
    pub(super) seg: Seg,
    /// The segment's first line and the end of its last chunk: a quick test for changes.
    pub(super) span: (u64, u64),
    /// A mixture: the segments it averages (then `seg` is unused).
    pub(super) parts: Option<Vec<usize>>,
    /// The segment follows the journal: it is listed in the page buckets of its span
    /// (`SegShares::buckets`) under `listing`, and its counts are valid at
    /// `SegShares::cursor`. Otherwise they are valid at `valid_at`.
    pub(super) synced: bool,
    pub(super) valid_at: u64,
    /// Changes of the segment's pages were applied since its shares were last derived.
    pub(super) dirty: bool,
    /// Bumped whenever the segment leaves the buckets: an entry of an older listing is stale
    /// and is dropped where it is met.
    pub(super) listing: u32,
    /// Lines on each node (armed ones included), lines on armed pages per node, lines on
    /// blocking pages. Valid at `SegShares::cursor` while `synced`.
    pub(super) lines_on: Vec<u64>,
    pub(super) armed_on: Vec<u64>,
    pub(super) blocked_lines: u64,
    pub(super) armed: ArmedPages,
    /// No blocking page at the last count or catch-up.
    pub(super) settled: bool,
    /// Derived when settled: each node's share of the lines, its share of the unarmed lines
    /// (over all lines: it sums to `1 - armed_frac`), and the armed share.
    pub(super) share: Vec<f64>,
    pub(super) unarmed: Vec<f64>,
    pub(super) armed_frac: f64,
    /// Start of the epoch of the last full count: at most one per epoch.
    pub(super) counted_at: f64,
    /// A strided entry ranges over the segment: keep its runs of one node.
    pub(super) runs_wanted: bool,
    /// Runs of consecutive positions of the segment on one node (valid when `runs_ok`):
    /// `run_ends[r]` ends run `r` (exclusive), `run_nodes[r]` is its node.
    pub(super) run_ends: Vec<u64>,
    pub(super) run_nodes: Vec<u8>,
    pub(super) runs_ok: bool,
    /// The runs' boundaries ordered for each stride an entry sweeps the segment with, made at
    /// the first sweep after the runs were made (every thread striding over the segment
    /// shares them).
    pub(super) crossings: RefCell<Vec<StrideCrossings>>,
    /// Full counts so far: the runs are remade only by a full count, so this names them.
    pub(super) counts: u64,
    /// Bumped whenever the shares change (a mixture's: whenever they are derived again).
    pub(super) version: u64,
    /// The shares in fixed point (`FIXED_ONE` is 1): each node's share, each node's unarmed
    /// share, then the armed share (`2n + 1` values). A segment's are its shares rounded; a
    /// mixture's are the exact sums of its parts' (docs/simulator.md, "The fast engine").
    pub(super) fixed: Vec<u64>,
    /// A segment's `fixed` at its last `HISTORY` versions, version `v` in slot `v % HISTORY`
    /// (`history_versions`): a mixture that last saw a part at one of them adds the change
    /// since then to its sums instead of summing every part again.
    history: Vec<u64>,
    history_versions: [u64; HISTORY],
    /// A mixture: the version of each part (by position) its sums hold, and whether the sums
    /// moved since its shares were last derived from them.
    pub(super) seen: Vec<u64>,
    pub(super) mix_stale: bool,
    /// A mixture kept as another one plus and minus a few parts.
    pub(super) base: Option<MixBase>,
    /// A plain mixture that watches its parts (`watch`): the parts noted since its last poll
    /// (or left unclean by it), the generation of its last poll and the journal's start then
    /// (`u64::MAX`: the next poll looks at every part), and each part's `settled` as of its
    /// last look with how many are not.
    pub(super) watched: bool,
    pub(super) moved: Vec<u32>,
    pub(super) stamp: u64,
    pub(super) polled_from: u64,
    pub(super) part_settled: Vec<bool>,
    pub(super) unsettled: usize,
    /// A change moved a page of the segment to another node (or in or out of blocking) since
    /// the runs were made: the next epoch counts the segment again to remake them.
    pub(super) runs_stale: bool,
    /// The armed pages overflowed their set and fewer than half of its size remain: the next
    /// epoch counts the segment again to name them.
    pub(super) rename_armed: bool,
    /// A segment with blocking pages is counted again in full only from `retry_at` on,
    /// waiting twice as many epochs after each count that found some (at most
    /// `MAX_BACKOFF_EPOCHS`). Only when the journal cannot bring it up to date.
    pub(super) backoff_epochs: u32,
    pub(super) retry_at: f64,
}

impl SegShare {
    pub(super) fn new(seg: Seg, parts: Option<Vec<usize>>, n: usize) -> SegShare {
        let end = if seg.chunks == 0 { seg.start } else { seg.start + (seg.chunks - 1) * seg.step + seg.chunk };
        let seen = vec![0; parts.as_ref().map_or(0, Vec::len)];
        // Only a segment's history is asked for: a mixture is never a part.
        let history = if parts.is_none() { vec![0; HISTORY * (2 * n + 1)] } else { Vec::new() };
        SegShare {
            seg,
            span: (seg.start, end),
            parts,
            synced: false,
            valid_at: 0,
            dirty: false,
            listing: 0,
            lines_on: vec![0; n],
            armed_on: vec![0; n],
            blocked_lines: 0,
            armed: ArmedPages::default(),
            settled: false,
            share: vec![0.0; n],
            unarmed: vec![0.0; n],
            armed_frac: 0.0,
            counted_at: f64::NEG_INFINITY,
            runs_wanted: false,
            run_ends: Vec::new(),
            run_nodes: Vec::new(),
            runs_ok: false,
            crossings: RefCell::new(Vec::new()),
            counts: 0,
            version: 0,
            fixed: vec![0; 2 * n + 1],
            history,
            history_versions: [u64::MAX; HISTORY],
            seen,
            mix_stale: true,
            base: None,
            watched: false,
            moved: Vec::new(),
            stamp: 0,
            polled_from: u64::MAX,
            part_settled: Vec::new(),
            unsettled: 0,
            runs_stale: false,
            rename_armed: false,
            backoff_epochs: 0,
            retry_at: f64::NEG_INFINITY,
        }
    }

    /// Count every page of the segment (and its runs, if wanted and nothing blocks).
    pub(super) fn count(&mut self, home: &[u8], shift: u32) {
        self.dirty = false;
        self.lines_on.iter_mut().for_each(|x| *x = 0);
        self.armed_on.iter_mut().for_each(|x| *x = 0);
        self.blocked_lines = 0;
        self.armed.clear();
        self.run_ends.clear();
        self.run_nodes.clear();
        self.crossings.get_mut().clear();
        let mut runs_ok = self.runs_wanted;
        let mut pos = 0u64;
        let seg = self.seg;
        let span_pages = self.span_pages(shift);
        // By runs of pages with one byte: the same counts, runs and armed pages as page by
        // page (`byte_runs`).
        byte_runs(seg, shift, home, u8::MAX, |first, past, lines, byte| {
            pos += lines;
            match class(byte) {
                None => {
                    self.blocked_lines += lines;
                    runs_ok = false;
                }
                Some((node, armed)) => {
                    self.lines_on[node] += lines;
                    if armed {
                        self.armed_on[node] += lines;
                        if past == first + 1 {
                            // A page split over two chunks of the segment is one slot with
                            // the lines of both.
                            self.armed.insert_or_add(first, lines, span_pages);
                        } else {
                            // Several whole pages of one chunk, or pages of a contiguous
                            // segment (`byte_runs`), each with its own lines.
                            for page in first..past {
                                self.armed.insert_or_add(page, lines_in(&seg, page << shift, (page + 1) << shift), span_pages);
                            }
                        }
                    }
                    runs_ok = runs_ok && self.extend_runs(pos, node as u8);
                }
            }
            true
        });
        self.runs_ok = runs_ok;
        self.runs_stale = false;
        self.rename_armed = false;
        self.counts += 1;
        self.derive();
    }

    /// The runs of one node extended by the positions up to `pos`, on node `node`: the last
    /// run grows or a new one starts; false when a new one would pass `MAX_RUNS`.
    fn extend_runs(&mut self, pos: u64, node: u8) -> bool {
        if self.run_nodes.last() == Some(&node) {
            *self.run_ends.last_mut().expect("a run per node") = pos;
        } else if self.run_nodes.len() < MAX_RUNS {
            self.run_ends.push(pos);
            self.run_nodes.push(node);
        } else {
            return false;
        }
        true
    }

    /// Remake only the runs of one node, from the page bytes: the counts and the armed pages'
    /// names follow the journal already, and a count of everything cost a name lookup per
    /// armed page (under autonuma sp-like's strided segments have their runs remade in most
    /// epochs, since pages keep moving; docs/benchmarks.md). The same runs `count` makes.
    pub(super) fn remake_runs(&mut self, home: &[u8], shift: u32) {
        self.run_ends.clear();
        self.run_nodes.clear();
        self.crossings.get_mut().clear();
        let mut runs_ok = true;
        let mut pos = 0u64;
        // Runs of one node: armed pages need not split them (`class` reads the node and
        // whether the page blocks, not whether it is armed).
        byte_runs(self.seg, shift, home, !ARMED, |_, _, lines, byte| {
            pos += lines;
            runs_ok = class(byte).is_some_and(|(node, _)| self.extend_runs(pos, node as u8));
            runs_ok
        });
        self.runs_ok = runs_ok;
        self.runs_stale = false;
        self.counts += 1;
    }

    /// The pages of the segment's span, `first..end`.
    fn span_pages(&self, shift: u32) -> (u64, u64) {
        (self.span.0 >> shift, (self.span.1.saturating_sub(1) >> shift) + 1)
    }

    /// Follow one change of a page byte; false if it is not a page of the segment.
    pub(super) fn apply(&mut self, page: u64, old: u8, new: u8, shift: u32) -> bool {
        let (a, b) = (page << shift, (page + 1) << shift);
        if b <= self.span.0 || a >= self.span.1 {
            return false;
        }
        let lines = lines_in(&self.seg, a, b);
        if lines == 0 {
            return false;
        }
        let (was, is) = (class(old), class(new));
        match was {
            None => self.blocked_lines -= lines,
            Some((node, armed)) => {
                self.lines_on[node] -= lines;
                if armed {
                    self.armed_on[node] -= lines;
                    self.armed.remove(page);
                }
            }
        }
        match is {
            None => self.blocked_lines += lines,
            Some((node, armed)) => {
                self.lines_on[node] += lines;
                if armed {
                    self.armed_on[node] += lines;
                    self.armed.insert(page, lines, self.span_pages(shift));
                }
            }
        }
        if self.runs_wanted && was.map(|w| w.0) != is.map(|i| i.0) {
            self.runs_ok = false;
            self.runs_stale = true;
        }
        if self.armed.overflowed
            && ArmedPages::can_name(self.span_pages(shift))
            && self.armed_on.iter().sum::<u64>() < (MAX_ARMED_SET as u64 / 2) << shift
        {
            self.rename_armed = true;
        }
        true
    }

    /// An armed page, as a uniformly random reference that lands on one would reach it: from
    /// the named pages, or, when they overflowed, by drawing lines until one is armed.
    pub(super) fn draw_armed(&self, rng: &mut StreamRng, home: &[u8], shift: u32) -> u64 {
        if !self.armed.overflowed {
            return self.armed.draw(rng, 1 << shift);
        }
        loop {
            let page = self.seg.line_at(rng.random_range(0..self.seg.lines())) >> shift;
            if matches!(class(home[page as usize]), Some((_, true))) {
                return page;
            }
        }
    }

    /// Stop following the journal, with the counts valid at generation `valid_at`: out of
    /// the buckets (its entries there become stale).
    pub(super) fn unlist(&mut self, valid_at: u64) {
        self.synced = false;
        self.valid_at = valid_at;
        self.listing = self.listing.wrapping_add(1);
    }

    /// Shares from the counts.
    pub(super) fn derive(&mut self) {
        self.version += 1;
        self.settled = self.blocked_lines == 0;
        let total = self.seg.lines().max(1) as f64;
        let mut armed_lines = 0;
        for j in 0..self.share.len() {
            self.share[j] = self.lines_on[j] as f64 / total;
            self.unarmed[j] = (self.lines_on[j] - self.armed_on[j]) as f64 / total;
            armed_lines += self.armed_on[j];
        }
        self.armed_frac = armed_lines as f64 / total;
        let values = self.share.iter().chain(&self.unarmed).chain(std::iter::once(&self.armed_frac));
        for (f, &x) in self.fixed.iter_mut().zip(values) {
            *f = to_fixed(x);
        }
        let slot = (self.version % HISTORY as u64) as usize;
        let width = self.fixed.len();
        self.history[slot * width..(slot + 1) * width].copy_from_slice(&self.fixed);
        self.history_versions[slot] = self.version;
    }

    /// `fixed` as it was at `version`, if that is one of the last `HISTORY` versions (version
    /// 0, never derived, is all zeros).
    pub(super) fn fixed_at(&self, version: u64) -> Option<&[u64]> {
        const NEVER: &[u64] = &[0; 64];
        let width = self.fixed.len();
        if version == 0 && width <= NEVER.len() {
            return Some(&NEVER[..width]);
        }
        let slot = (version % HISTORY as u64) as usize;
        (self.history_versions[slot] == version).then(|| &self.history[slot * width..(slot + 1) * width])
    }
}
