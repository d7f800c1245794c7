//! One proportional block: how far each entry advances, and its charge (docs/simulator.md, "The fast engine").

use super::div_u128;
use super::entry::{FastEntry, FastKind};
use super::issue::FastStep;
use super::state::FastState;
use crate::block_end::{p_reaching_end, target};
use crate::hot::{count_f64, kind_index, Hot, SlowRef, Tally};
use crate::memory::SLOW;
use crate::segshares::SegShares;
use crate::walkruns::{Pages, RunCost};
use numalab_workload::stream::Cursor;
use numalab_workload::sweep::SweepRuns;
use numalab_workload::Entry;
use rand::Rng;

/// Most runs a strided segment is counted by whole passes per run set
/// (`Entry::take_strided_by_runs`); past this, or when `sweeps` says so, it is swept.
const BY_RUNS_MAX: usize = 4096;
/// Longest pass a sweep keeps the labels of (one byte per reference, per thread and entry).
const SWEEP_MAX_PASS: u64 = 1 << 16;

/// How many times a sweep's pass must be cheaper than counting by runs before a stride is
/// swept (see `sweeps`). Measured, not derived (docs/benchmarks.md, "Strided passes: parts of
/// a pass by masks"): bt-like and sp-like under autonuma on server-b-8n took 9.1 and 8.6 CPU s
/// at 8, 6.1 and 7.8 s at 256, and the same within noise up to 4,096; `linux`'s few runs
/// never reach it.
const SWEEP_FACTOR: u64 = 256;

/// Whether a stride over a segment of `lines` positions cut into `runs` runs is counted by a
/// sweep (docs/simulator.md, "Strided passes over many runs"). Counting by runs recounts
/// every run whenever a run boundary falls between two starts: about `min(runs, stride)`
/// recounts per sweep of `stride` starts, `runs · min(runs, stride) / stride` run steps per
/// pass for the recounts alone; each recount is also followed by passes counted run by run
/// until the write table is built, and by the table's sort. A sweep's pass costs about one
/// word per label for every 64 references, `lines / stride / 64 · 8` on eight nodes. So a
/// sweep once `SWEEP_FACTOR · runs · min(runs, stride) > lines`, if its pass is short enough
/// to keep.
pub(super) fn sweeps(runs: u64, lines: u64, stride: u64) -> bool {
    SWEEP_FACTOR.saturating_mul(runs).saturating_mul(runs.min(stride)) > lines && lines.div_ceil(stride.max(1)) <= SWEEP_MAX_PASS
}

/// Most pages a walk is followed over by one block (`WalkRuns::scan`): a bound on what one
/// block looks at ahead when the epoch's end is far (fast-forward windows).
const MAX_RUN_PAGES: u64 = 256;
/// Most references a block follows a stride over a segment with armed pages
/// (`StrideReach::reach`), the strided counterpart of `MAX_RUN_PAGES` (as many references as
/// a walk makes over that many pages of 64 lines).
const MAX_STRIDE_REACH: u64 = 1 << 14;

/// The largest `P` at which an entry of `w` of the step's `total` references has issued at
/// most `issued + n` (`floor(P·w/total) ≤ issued + n`): where a walk or stride that may run
/// `n` more references caps a block.
#[inline]
fn last_p_within(issued: u64, n: u64, w: u128, total: u128) -> u128 {
    div_u128((issued as u128 + n as u128 + 1) * total - 1, w)
}

/// One entry of a block, as the block's set-up found it.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Plan {
    /// Its page's node (walks, fixed).
    home_node: Option<usize>,
    /// What a reference costs, ns (a walk's on its current page).
    ns: f64,
    /// The chance that a reference lands on an armed page.
    armed: f64,
    /// The weight of a walk's or fixed entry's own page in its shares (1 without escapes);
    /// `entry_share` leaves that page out.
    own: f64,
    /// A walk's next line, how far a walk or a stride over armed pages may run (0 for
    /// others), and what a walk's escapes add to each reference's cost.
    line: u64,
    reach: u64,
    base_ns: f64,
    /// `refs / T` as a float (for `target`).
    ratio: f64,
    /// A walk's or stride's references before the first one the exact path must see, where
    /// the block's scan found one (`u64::MAX`: none within what it looked at).
    stop: u64,
}

fn dot(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

impl Hot<'_> {
    /// Whether the next block would charge nothing, found without planning it (docs/simulator.md,
    /// "Blocks that charge nothing"): `p_lin`, where the entries' mean cost puts the epoch's
    /// end, formed as the block forms it, from the last block's plans (in one call a random or
    /// strided entry costs the same at every block, and a walk or fixed entry the same but for
    /// its page's node, read here), bounds the block's `P`; if no entry's target passes what it
    /// issued there, the block would charge nothing and the caller goes on to the exact
    /// stretch, as it would after that block. False whenever it cannot tell.
    pub(super) fn charges_nothing(&self, entries: &[Entry], step: &FastStep, fs: &FastState, cost: &[f64], max: u64, clock: f64) -> bool {
        if !fs.plans_of_call {
            return false;
        }
        let n = self.n;
        let total_refs = step.total_refs.max(1);
        let issued_before: u64 = entries.iter().map(|e| e.issued).sum();
        let mut mean_ns = 0.0;
        for (i, e) in entries.iter().enumerate() {
            // An inactive entry adds `ratio · 0`, which leaves the sum as it is.
            if e.remaining() == 0 || e.refs == 0 {
                continue;
            }
            let (fe, plan) = (&step.kinds[i], &fs.plans[i]);
            let ns = match (fe.kind, &e.cursor) {
                (FastKind::Walk, _) | (FastKind::Fixed, Cursor::Fixed { .. }) => {
                    let line = match &e.cursor {
                        Cursor::Fixed { line } => *line,
                        _ => match e.peek_run_and_chunk(step.lpp, e.remaining()) {
                            Some((line, _, _)) => line,
                            None => return false,
                        },
                    };
                    let h = self.home[(line >> self.shift) as usize];
                    if h >= SLOW {
                        return false;
                    }
                    let row = &cost[kind_index(e.kind) * n..(kind_index(e.kind) + 1) * n];
                    match fe.escape {
                        None => row[h as usize],
                        // `shares_of` gives the same escape shares and own weight on any node.
                        Some(_) => plan.base_ns + plan.own * row[h as usize],
                    }
                }
                (FastKind::Fixed, _) => return false,
                _ => plan.ns,
            };
            // `plan.ratio` is `refs / T`, which a step does not change.
            mean_ns += plan.ratio * ns;
        }
        let x = (self.end - clock) / mean_ns.max(1e-9);
        let p_lin = issued_before as u128 + if x.is_nan() { 0 } else { crate::hot::ceil_at_least_one(x).min(1e18) as u64 as u128 };
        let total = total_refs as u128;
        let p = total.min(issued_before as u128 + max as u128).min(p_lin);
        entries.iter().zip(&fs.plans).all(|(e, plan)| e.remaining() == 0 || target(p, e.refs, total, plan.ratio) <= e.issued)
    }

    /// One proportional block: every entry advances to `floor(P·refs_i/T)` references for the
    /// largest `P` that keeps each walk on pages the fast path may charge (of any node), stays
    /// within `max` and ends at most one reference past the epoch end. `None` if a walk or
    /// fixed entry is on a slow page.
    pub(super) fn block(
        &self,
        entries: &mut [Entry],
        step: &FastStep,
        fs: &mut FastState,
        max: u64,
        t: &mut Tally,
        mut clock: f64,
    ) -> Option<(u64, f64, Option<SlowRef>)> {
        let (acc, wr, cost) = (&mut *t.acc, &mut *t.wr, t.cost);
        let n = self.n;
        let total = step.total_refs.max(1) as u128;
        let issued_before: u64 = entries.iter().map(|e| e.issued).sum();
        // The block ends by `p_cap` at the latest: the step's end, `max`, each walk's chunk
        // and `MAX_RUN_PAGES`, and (below) where the mean cost puts the epoch's end.
        let mut p_cap = total.min(issued_before as u128 + max as u128);
        // The block's mean cost per reference with every walk on its current page's node:
        // exact while no walk leaves its first run.
        let mut mean_ns = 0.0;
        let lpp = step.lpp;
        fs.begin_block(entries.len(), n);
        for (i, e) in entries.iter().enumerate() {
            let w = e.refs as u128;
            let fe = &step.kinds[i];
            let active = e.remaining() > 0 && w > 0;
            let mut reach = 0;
            let line = match (fe.kind, &e.cursor) {
                _ if !active => None,
                (FastKind::Walk, _) => {
                    let (line, _, in_chunk) = e.peek_run_and_chunk(lpp, e.remaining())?;
                    reach = in_chunk.min(MAX_RUN_PAGES * lpp);
                    Some(line)
                }
                (FastKind::Fixed, Cursor::Fixed { line }) => Some(*line),
                (FastKind::Fixed, _) => return None,
                (FastKind::Strided(s), _) if fe.escape.is_none() && step.shares.armed_frac(s) > 0.0 => {
                    // Followed up to its first reference to an armed page (below).
                    reach = MAX_STRIDE_REACH;
                    None
                }
                (FastKind::Random(_) | FastKind::Strided(_), _) => None,
            };
            if reach > 0 {
                p_cap = p_cap.min(last_p_within(e.issued, reach, w, total));
            }
            let home_node = match line {
                Some(line) => {
                    let h = self.home[(line >> self.shift) as usize];
                    if h >= SLOW {
                        return None;
                    }
                    Some(h as usize)
                }
                None => None,
            };
            let row = &cost[kind_index(e.kind) * n..(kind_index(e.kind) + 1) * n];
            // `ns`: what a reference costs (a walk's at its current page); `base_ns` and
            // `own`: for a walk, what its references cost on a page of node `j` is
            // `base_ns + own · row[j]` (its escapes, and its own page at weight `own`).
            let (ns, armed, base_ns, own) = match (home_node, fe.kind, fe.escape) {
                _ if !active => (0.0, 0.0, 0.0, 0.0),
                (Some(j), _, None) => (row[j], 0.0, 0.0, 1.0),
                // A stride never draws: its armed pages end the block (`reach`).
                (None, FastKind::Strided(s), None) => (dot(step.shares.share(s), row), 0.0, 0.0, 0.0),
                (None, FastKind::Random(s), None) if step.shares.armed_frac(s) == 0.0 => (dot(step.shares.share(s), row), 0.0, 0.0, 0.0),
                _ => {
                    // Kept for the charge below: the shares cannot change inside a block.
                    let (armed, own) = fs.shares_of(i, fe, home_node, step.shares);
                    let base_ns = dot(&fs.entry_share[i * n..(i + 1) * n], row);
                    let own_ns = home_node.map_or(0.0, |j| own * row[j]);
                    (base_ns + own_ns, armed, base_ns, own)
                }
            };
            let ratio = e.refs as f64 / step.total_refs.max(1) as f64;
            fs.plans[i] = Plan { home_node, ns, armed, own, line: line.unwrap_or(0), reach, base_ns, ratio, stop: u64::MAX };
            mean_ns += ratio * ns;
        }
        fs.plans_of_call = true;
        // Where the epoch ends if every walk stays on its current node: `ceil` of the room
        // (the block may end a reference past the end), as `x.ceil().clamp(1.0, 1e18) as
        // u128` without the library calls for `ceil` and for a cast to u128 (NaN gives 0, as
        // that cast does). A walk that reaches cheaper pages ends the block before the epoch
        // does, and the next block goes on.
        let x = (self.end - clock) / mean_ns.max(1e-9);
        let p_lin = issued_before as u128 + if x.is_nan() { 0 } else { crate::hot::ceil_at_least_one(x).min(1e18) as u64 as u128 };
        p_cap = p_cap.min(p_lin);
        // Each walk's runs, and each stride's fast pages, up to where `p_cap` takes it; a
        // walk or stride stopped by a page the exact path must see ends the block before
        // that page.
        let mut p_top = p_cap;
        let pages = Pages { home: self.home, shift: self.shift };
        for (i, e) in entries.iter().enumerate() {
            let Plan { line, reach, base_ns, own, .. } = fs.plans[i];
            if reach == 0 {
                continue;
            }
            let w = e.refs as u128;
            let want = (div_u128(p_cap * w, total) as u64).saturating_sub(e.issued).min(reach);
            if want == 0 {
                continue;
            }
            let covered = if step.kinds[i].kind == FastKind::Walk {
                let row = &cost[kind_index(e.kind) * n..(kind_index(e.kind) + 1) * n];
                fs.walks.scan(i, &pages, line, want, RunCost { row, base_ns, own })
            } else {
                fs.stride_reach.reach(i, e, want, self.home, self.shift, step.slowed)
            };
            if covered < want {
                fs.plans[i].stop = covered;
                p_top = p_top.min(last_p_within(e.issued, covered, w, total));
            }
        }
        // The block's `P`: `p_top`, unless the epoch ends before it; then the first `P` whose
        // clock reaches the end. `p_lin` alone is not enough even when every walk stays on
        // one node: after a fault cut a block short, the entries charged after the faulting
        // one are behind their targets, and a block to `P` gives them their backlog on top
        // of `P`'s share (the clock passed the epoch's end by that backlog). Each look at a
        // `P` leaves the entries' references in a slot of `ks`; the last two are kept, which
        // is where the search ends.
        let c_top = fs.clock_at::<true>(p_top, entries, step, max, clock);
        let lo = issued_before as u128;
        let p = if c_top < self.end || p_top <= lo + 1 {
            p_top
        } else {
            p_reaching_end(lo, (p_top, c_top), clock, self.end, |p| fs.clock_at::<true>(p, entries, step, max, clock))
        };
        let slot = match fs.ks_at.iter().position(|&at| at == p) {
            Some(slot) => slot,
            None => {
                fs.clock_at::<false>(p, entries, step, max, clock);
                1 - fs.ks_next
            }
        };
        let ks = std::mem::take(&mut fs.ks[slot]);
        let mut charged = 0;
        let entries_len = entries.len();
        for (i, e) in entries.iter_mut().enumerate() {
            let mut k = ks[i];
            if k == 0 {
                continue;
            }
            let fe = step.kinds[i];
            let Plan { home_node, armed, own, ns, .. } = fs.plans[i];
            // References that land on armed pages: each of the `k` does with probability
            // `armed`, so the references before the first such one are geometrically
            // distributed; they are charged by the shares of the unarmed pages and the one
            // that faults goes through the exact path (docs/simulator.md, "The fast engine").
            // Drawing again at the next block is exact: the count is memoryless.
            let mut faults = false;
            if armed > 0.0 {
                let u = 1.0 - t.rng.random::<f64>();
                let before = (u.ln() / (-armed).ln_1p()).floor();
                if before < k as f64 {
                    (k, faults) = (before as u64, true);
                }
            }
            charged += k;
            match (fe.kind, fe.escape) {
                (FastKind::Strided(s), None) if !step.shares.one_node(s) => {
                    // A stride over pages of several nodes: each reference counted on its
                    // own page's node (no draw is involved, so this is the exact count).
                    let (home, shift) = (self.home, self.shift);
                    let (counts, writes) = (&mut fs.counts, &mut fs.writes);
                    counts.iter_mut().for_each(|c| *c = 0);
                    writes.iter_mut().for_each(|w| *w = 0);
                    // By the segment's runs of one node when it has few (the same counts,
                    // a division per run crossed instead of a lookup per reference).
                    // Many runs: followed start by start (a sweep) instead.
                    let key = step.shares.runs_made(s) ^ ((s as u64) << 48);
                    let by_runs = match (step.shares.runs(s), &e.cursor) {
                        (Some(runs), Cursor::Strided { seg, stride, .. }) if sweeps(runs.0.len() as u64, seg.lines(), *stride) => {
                            match step.shares.crossings(s, *stride) {
                                Some(crossings) => {
                                    fs.stride_sweeps.resize_with(entries_len, Default::default);
                                    e.take_strided_by_sweep(
                                        k,
                                        SweepRuns { ends: runs.0, labels: runs.1, crossings: &crossings, key },
                                        &mut fs.stride_sweeps[i],
                                        counts,
                                        writes,
                                    )
                                }
                                None => false,
                            }
                        }
                        (Some(runs), _) if runs.0.len() <= BY_RUNS_MAX => {
                            fs.stride_passes.resize_with(entries_len, Default::default);
                            e.take_strided_by_runs(k, runs, key, &mut fs.stride_passes[i], counts, writes)
                        }
                        _ => false,
                    };
                    if !by_runs {
                        e.take_strided(k, |line, write| {
                            let j = home[(line >> shift) as usize] as usize;
                            counts[j] += 1;
                            writes[j] += u64::from(write);
                        });
                    }
                    for j in 0..n {
                        acc[j] += counts[j];
                        wr[j] += writes[j];
                        clock += count_f64(counts[j]) * cost[kind_index(e.kind) * n + j];
                    }
                }
                (FastKind::Walk, None) => {
                    // Run by run on its pages' nodes, as the exact engine counts them.
                    clock += fs.walks.cost_ns(i, k);
                    fs.walks.take(i, e, k, |node, m, writes| {
                        acc[node] += m;
                        wr[node] += writes;
                    });
                }
                (FastKind::Walk, Some(_)) => {
                    // The walk's own references at weight `own` on each run's node, the
                    // escapes by their shares, which do not depend on the run: spread once
                    // for all `k` (a walk crosses about eight runs per block under a policy
                    // that migrates). Made integer at the flush.
                    clock += fs.walks.cost_ns(i, k);
                    let walks = std::mem::take(&mut fs.walks);
                    let mut writes_all = 0;
                    walks.take(i, e, k, |node, m, writes| {
                        writes_all += writes;
                        fs.pending_acc[node] += count_f64(m) * own;
                        fs.pending_wr[node] += count_f64(writes) * own;
                    });
                    fs.walks = walks;
                    fs.add_pending_by_entry(i, k, writes_all);
                }
                _ => {
                    let writes = e.take_run(k);
                    clock += count_f64(k) * ns;
                    match (home_node, fe.kind, fe.escape) {
                        (Some(j), _, None) => {
                            acc[j] += k;
                            wr[j] += writes;
                        }
                        // Spread over nodes by expected shares; made integer at the flush.
                        (None, FastKind::Random(s) | FastKind::Strided(s), None) if armed == 0.0 => {
                            fs.add_pending(k, writes, step.shares.share(s));
                        }
                        _ => {
                            // `shares_of` as computed for this entry before the charge, and
                            // a fixed entry's own line at weight `own`.
                            fs.add_pending_by_entry(i, k, writes);
                            if let Some(j) = home_node {
                                fs.pending_acc[j] += count_f64(k) * own;
                                fs.pending_wr[j] += count_f64(writes) * own;
                            }
                        }
                    }
                }
            }
            if faults {
                // The faulting reference: on the entry's own segment or, for an owner
                // escape, on the mixture's, in proportion to their armed shares.
                let own = match fe.kind {
                    FastKind::Random(s) => Some(s).filter(|&s| step.shares.armed_frac(s) > 0.0),
                    _ => None,
                };
                let from = match (own, fe.escape) {
                    (Some(s), Some((mix, q))) => {
                        let own_armed = (1.0 - q) * step.shares.armed_frac(s);
                        if t.rng.random::<f64>() * armed < own_armed {
                            s
                        } else {
                            mix
                        }
                    }
                    (Some(s), None) => s,
                    (None, Some((mix, _))) => mix,
                    (None, None) => unreachable!("a faulting entry draws from an armed segment"),
                };
                let page = step.shares.draw_armed(from, t.rng, self.home, self.shift);
                let write = e.take_run(1) > 0;
                fs.ks[slot] = ks;
                return Some((charged + 1, clock, Some((page, write, e.kind))));
            }
            // (A stride is followed only without owner escapes: its stop is its own reference.)
            if fs.plans[i].stop == k && matches!(fe.kind, FastKind::Strided(_)) && clock < self.end {
                // The block took this stride up to a page the exact path must see: its next
                // reference goes there now, as the one a random entry draws onto an armed
                // page does (a block that stopped here and left it to the next would find
                // nothing to charge and hand the exact path up to `EXACT_STRETCH` references
                // of the other entries first). A walk stopped by such a page still leaves it
                // to the exact stretch: taking it here changed little (callgrind on mg-like,
                // cg-like and ua-like within 1.5 %) and would have changed their results.
                if let Some(line) = e.next_line_known() {
                    let write = e.take_run(1) > 0;
                    fs.ks[slot] = ks;
                    return Some((charged + 1, clock, Some((line >> self.shift, write, e.kind))));
                }
            }
        }
        fs.ks[slot] = ks;
        Some((charged, clock, None))
    }
}

impl FastState {
    /// Empty the per-entry scratch of a block of `entries` entries on `n` nodes.
    fn begin_block(&mut self, entries: usize, n: usize) {
        self.blocks += 1;
        self.plans_of_call = false;
        self.plans.resize(entries, Plan::default());
        self.entry_share.resize(entries * n, 0.0);
        self.walks.begin(entries);
        for ks in &mut self.ks {
            ks.resize(entries, 0);
        }
        self.ks_at = [u128::MAX; 2];
    }

    /// The clock after a block to `p` from `clock`, formed as the charge forms it (a stride
    /// over pages of several nodes at its expected cost: its exact count is known only when
    /// taken), leaving each entry's references in `ks`; without `COST`, only the references.
    fn clock_at<const COST: bool>(&mut self, p: u128, entries: &[Entry], step: &FastStep, max: u64, clock: f64) -> f64 {
        let total = step.total_refs.max(1) as u128;
        let (mut c, mut left) = (clock, max);
        let slot = self.ks_next;
        let ks = &mut self.ks[slot];
        for (i, e) in entries.iter().enumerate() {
            let k = target(p, e.refs, total, self.plans[i].ratio).saturating_sub(e.issued).min(e.remaining()).min(left);
            ks[i] = k;
            if k == 0 {
                continue;
            }
            left -= k;
            if COST {
                c += if step.kinds[i].kind == FastKind::Walk { self.walks.cost_ns(i, k) } else { count_f64(k) * self.plans[i].ns };
            }
        }
        self.ks_at[slot] = p;
        self.ks_next = 1 - slot;
        c
    }

    /// Where entry `i`'s next references go that land on unarmed pages, as node shares (in
    /// its row of `self.entry_share`): its segment's unarmed lines (random, strided) or,
    /// for a walk or fixed entry, nothing for its own page, whose weight is returned instead
    /// (a walk's node changes along its runs); mixed with the escape shares at the escape
    /// probability, over the share of references that land on unarmed pages. Returns the
    /// chance that a reference lands on an armed page and the own page's weight.
    fn shares_of(&mut self, i: usize, fe: &FastEntry, home_node: Option<usize>, shares: &SegShares) -> (f64, f64) {
        let n = self.share.len();
        let out = &mut self.entry_share[i * n..(i + 1) * n];
        let (mut armed, mut own) = (0.0, 0.0);
        match (home_node, fe.kind) {
            (Some(_), _) => {
                out.iter_mut().for_each(|x| *x = 0.0);
                own = 1.0;
            }
            (None, FastKind::Random(s) | FastKind::Strided(s)) => {
                out.copy_from_slice(shares.unarmed(s));
                armed = shares.armed_frac(s);
            }
            (None, _) => unreachable!("walk and fixed entries have a home node"),
        }
        if let Some((mix, q)) = fe.escape {
            for (x, y) in out.iter_mut().zip(shares.unarmed(mix)) {
                *x = (1.0 - q) * *x + q * y;
            }
            armed = (1.0 - q) * armed + q * shares.armed_frac(mix);
            own *= 1.0 - q;
        }
        if armed > 0.0 && armed < 1.0 {
            let inv = 1.0 / (1.0 - armed);
            out.iter_mut().for_each(|x| *x *= inv);
            own *= inv;
        }
        (armed, own)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Which way a stride over a segment of many runs is counted.
    #[test]
    fn sweeps_where_recounting_runs_would_cost_more() {
        // bt-like's z sweep on server-b-8n: 6.5 M lines, stride 16,402; about 80 runs under
        // first touch, up to one per page under AutoNUMA.
        assert!(!sweeps(80, 6_500_000, 16_402));
        assert!(sweeps(100_000, 6_500_000, 16_402));
        // ... and from 160 runs (256 · 160² = 6.55 M).
        assert!(!sweeps(159, 6_500_000, 16_402));
        assert!(sweeps(160, 6_500_000, 16_402));
        // A y sweep over one thread's block: 82 k lines, stride 101.
        assert!(!sweeps(17, 82_000, 101));
        assert!(sweeps(18, 82_000, 101));
        // A pass longer than a sweep keeps is not swept.
        assert!(!sweeps(1 << 20, 1 << 30, 2));
    }
}
