//! The demand a step's solve takes: each running thread's access mix from the pages its walks
//! will cover in the step (docs/simulator.md, "Contention", "The demand: the references ahead").

use super::window::{current_entries, pace_ns, per_ref_ns};
use super::{State, World};
use crate::hot::kind_index;
use crate::memory::single_copy_node;
use crate::walkruns::leading_equal_in;
use numalab_workload::Entry;

/// References of each entry a window's forecast samples (`World::forecast_mix`): a mix to
/// within 1/32 of each node's share, at a cost per window and thread far below that of
/// charging the window's references [ours].
pub(super) const FORECAST_SAMPLES: u64 = 32;

/// The middle of each of `parts` equal parts of `refs` references, `⌊(2i + 1) · refs / (2 ·
/// parts)⌋` for `i` in `0..parts`, by adding the step's quotient and remainder instead of a
/// division per offset (the forecast takes 32 per entry and window), and without the product
/// that would overflow 64 bits on walks of more than 2^57 references.
pub(super) fn middles(refs: u64, parts: u64) -> impl Iterator<Item = u64> {
    let d = parts.saturating_mul(2).max(1);
    // `2 · refs` in 64 bits where it fits: a 128-bit division is a library call, and the
    // forecast makes one per entry and step.
    let (step_q, step_r) = match refs.checked_mul(2) {
        Some(twice) => (twice / d, twice % d),
        None => ((2 * refs as u128 / d as u128) as u64, (2 * refs as u128 % d as u128) as u64),
    };
    let (mut q, mut r) = (refs / d, refs % d);
    (0..parts).map(move |_| {
        let at = q;
        // Past the last offset the sum may leave 64 bits; it is never read.
        q = q.wrapping_add(step_q);
        r += step_r;
        if r >= d {
            q += 1;
            r -= d;
        }
        at
    })
}

/// The nodes of the next `window_refs` of a thread's `left` references in `entries` (each
/// entry at its share of them, as the blocks interleave them), sampled at `FORECAST_SAMPLES`
/// evenly spaced references of each entry, into `counts`. `None` where an entry does not walk
/// or a sample reaches an unplaced or replicated page.
pub(super) fn sample_ahead(entries: &[Entry], window_refs: u64, left: u64, home: &[u8], shift: u32, counts: &mut [f64]) -> Option<()> {
    let n = counts.len();
    counts.iter_mut().for_each(|c| *c = 0.0);
    for e in entries.iter().filter(|e| e.remaining() > 0) {
        let refs = match window_refs.checked_mul(e.remaining()) {
            Some(product) => product.div_ceil(left),
            None => (window_refs as u128 * e.remaining() as u128).div_ceil(left as u128) as u64,
        };
        let samples = refs.min(FORECAST_SAMPLES);
        // A span of consecutive lines (most walks in most steps) needs no search of the
        // walk's segments for each sample's line; if its pages all carry the same byte,
        // every sample has that byte: count them without looking at each (together a third
        // of mg-like's run), adding as the samples would, so that the mix is the same to the
        // last bit.
        if let Some(line) = e.contiguous_ahead(refs) {
            // `times` samples' counts in one addition: each sample adds `refs / samples`, which
            // is `refs / 32` or 1 (`samples` is 32 or `refs`), so every sum of them is a whole
            // number of 32nds and exact in 64 bits below 2^48 references (`uniform_span` takes
            // spans below 2^40): adding them one by one or at once gives the same bits.
            let count = |byte: u8, times: u64, counts: &mut [f64]| {
                single_copy_node(byte, n).map(|node| counts[node] += times as f64 * (refs as f64 / samples as f64))
            };
            match uniform_span(line, refs, home, shift) {
                Some(byte) => count(byte, samples, counts)?,
                None => middles(refs, samples).try_for_each(|at| count(*home.get(((line + at) >> shift) as usize)?, 1, counts))?,
            }
            continue;
        }
        sample_one_by_one(e, refs, samples, home, shift, counts)?;
    }
    Some(())
}

/// The rule `sample_ahead` gives the same counts as: `samples` evenly spaced lines of entry
/// `e`'s next `refs` references found along its walk's segments one by one, each sample's page
/// looked up and counted `refs / samples` on its node. `None` where the entry does not walk or
/// a sample reaches an unplaced or replicated page.
pub(super) fn sample_one_by_one(e: &Entry, refs: u64, samples: u64, home: &[u8], shift: u32, counts: &mut [f64]) -> Option<()> {
    let n = counts.len();
    for line in e.lines_ahead(middles(refs, samples))? {
        let node = single_copy_node(*home.get((line >> shift) as usize)?, n)?;
        counts[node] += refs as f64 / samples as f64;
    }
    Some(())
}

/// Pages a span may cover for `uniform_span` to compare them all: about what sampling
/// `FORECAST_SAMPLES` of its lines one by one costs [ours].
const UNIFORM_SPAN_MAX_PAGES: u64 = 1024;

/// The byte of every page of the `refs` lines from `line`, if they lie on at most
/// `UNIFORM_SPAN_MAX_PAGES` pages that all carry it and are fewer than 2^40 (the caller
/// counts them in one addition, exact below that); `None` otherwise (the caller then samples
/// the span).
fn uniform_span(line: u64, refs: u64, home: &[u8], shift: u32) -> Option<u8> {
    if refs >= 1 << 40 {
        return None;
    }
    let (first, last) = (line >> shift, (line + refs.checked_sub(1)?) >> shift);
    if last - first >= UNIFORM_SPAN_MAX_PAGES {
        return None;
    }
    let pages = home.get(first as usize..=last as usize)?;
    (leading_equal_in(&pages[1..], pages[0], u8::MAX) == pages.len() - 1).then_some(pages[0])
}

impl World<'_> {
    /// Each running thread's access mix for the step `[start, end)`, one epoch or a window of
    /// several (docs/simulator.md, "Contention", "The demand: the references ahead"): the
    /// nodes of the pages its walks will cover in the step, each entry at its share of the
    /// step's references left (the blocks interleave them so), sampled at `FORECAST_SAMPLES`
    /// evenly spaced references of each entry; the step's references are predicted from the
    /// thread's cost table, as a window's length was. The mix of the last epoch is up to a
    /// step behind the walks: where many threads' walks move to other nodes together (a
    /// phase's halo, then its own planes; a transpose's slices) the latencies it charges
    /// would be those of the load before. A thread with an entry that does not walk or
    /// escapes, or whose samples reach an unplaced or replicated page, keeps the mix of its
    /// last epoch.
    pub(super) fn forecast_mix(&mut self, start: f64, end: f64, window: bool) {
        let n = self.n;
        let (home, shift) = (self.mem.home(), self.p.line_shift());
        let mut counts = std::mem::take(&mut self.forecast_counts);
        counts.clear();
        counts.resize(n, 0.0);
        for th in self.threads.iter_mut().filter(|th| th.state == State::Run) {
            let (current, _) = current_entries(th);
            let left: u64 = current.iter().map(|e| e.remaining()).sum();
            // A window's references from the walks' own pace (`pace_ns`); a single epoch's
            // from the thread's last mix, as both engines take it.
            let step_ns = if window {
                pace_ns(th, current, home, shift, n)
            } else {
                current.iter().map(|e| e.remaining() as f64 * per_ref_ns(th, kind_index(e.kind), n)).sum()
            };
            let window_refs = (end - th.clock.max(start)) / step_ns * left as f64;
            if left == 0 || window_refs.is_nan() || window_refs < 1.0 {
                continue; // nothing left, or no prediction (NaN): the last mix stays
            }
            let window_refs = (window_refs.ceil() as u64).min(left);
            let known = sample_ahead(current, window_refs, left, home, shift, &mut counts).is_some();
            let total: f64 = counts.iter().sum();
            if known && total > 0.0 {
                for (f, c) in th.frac.iter_mut().zip(&counts) {
                    *f = c / total;
                }
            }
        }
        self.forecast_counts = counts;
    }
}
