//! The fast engine (docs/simulator.md, "The fast engine"): a step's references are charged in
//! proportional blocks instead of one pick at a time, and a uniform-random entry over memory
//! that is settled (every page placed, none armed for a hinting fault, none replicated) is
//! charged by the expected share of each node instead of drawing lines. What a random
//! reference costs and where it goes depends only on the node of the page it lands on, so on
//! settled memory the expected per-node counts carry everything the exact engine computes from
//! it; the variance of the exact draws (binomial, relative size 1/√k over k references) is
//! what is given up. Anything a policy observes one access at a time (first touches, hinting
//! faults, replicated pages) still goes through the exact path.

use crate::block_end::{first_reaching, target};
use crate::hot::{kind_index, Hot, SlowRef, Tally};
use crate::memory::SLOW;
pub(crate) use crate::segshares::SegShares;
use crate::stridereach::StrideReach;
use crate::walkruns::{Pages, RunCost, WalkRuns};
use numalab_workload::stream::{Cursor, Seg, StridePasses};
use numalab_workload::sweep::{StrideSweep, SweepRuns};
use numalab_workload::Entry;
use rand::Rng;
use std::sync::Arc;

/// Most runs a strided segment is counted by whole passes per run set
/// (`Entry::take_strided_by_runs`); past this, or when `sweeps` says so, it is swept.
const BY_RUNS_MAX: usize = 4096;
/// Longest pass a sweep keeps the labels of (one byte per reference, per thread and entry).
const SWEEP_MAX_PASS: u64 = 1 << 16;

/// Whether a stride over a segment of `lines` positions cut into `runs` runs is counted by a
/// sweep (docs/simulator.md, "Strided passes over many runs"). Counting by runs recounts
/// every run whenever a run boundary falls between two starts: about `min(runs, stride)`
/// recounts of `runs` runs per sweep of `stride` starts, `runs · min(runs, stride) / stride`
/// per pass. A sweep's pass costs about one word per label for every 64 references (its
/// writes), `lines / stride / 64 · 8` on eight nodes. So a sweep once
/// `8 · runs · min(runs, stride) > lines`, if its pass is short enough to keep.
fn sweeps(runs: u64, lines: u64, stride: u64) -> bool {
    8u64.saturating_mul(runs).saturating_mul(runs.min(stride)) > lines && lines.div_ceil(stride.max(1)) <= SWEEP_MAX_PASS
}

/// References charged one by one (most-behind pick) when a block cannot be charged in bulk,
/// before the block is tried again.
const EXACT_STRETCH: u64 = 64;
/// Most pages a walk is followed over by one block (`WalkRuns::scan`): a bound on what one
/// block looks at ahead when the epoch's end is far (fast-forward windows).
const MAX_RUN_PAGES: u64 = 256;
/// Most references a block follows a stride over a segment with armed pages
/// (`StrideReach::reach`), the strided counterpart of `MAX_RUN_PAGES` (as many references as
/// a walk makes over that many pages of 64 lines).
const MAX_STRIDE_REACH: u64 = 1 << 14;

/// `num / den`, with one 64-bit division when both fit in 64 bits (almost always: the
/// products of reference counts only pass 2^64 on runs of about 2^32 references per entry),
/// where the `u128` division is a call into the runtime. The same quotient either way.
#[inline]
fn div_u128(num: u128, den: u128) -> u128 {
    if (num | den) >> 64 == 0 {
        u128::from(num as u64 / den as u64)
    } else {
        num / den
    }
}

/// The largest `P` at which an entry of `w` of the step's `total` references has issued at
/// most `issued + n` (`floor(P·w/total) ≤ issued + n`): where a walk or stride that may run
/// `n` more references caps a block.
#[inline]
fn last_p_within(issued: u64, n: u64, w: u128, total: u128) -> u128 {
    div_u128((issued as u128 + n as u128 + 1) * total - 1, w)
}

/// How the fast engine charges one entry of a step.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum FastKind {
    /// A walk: runs of one page at a time, as the exact engine charges them.
    Walk,
    /// The same line every time (a reduction slot).
    Fixed,
    /// A uniformly random line of a segment: index into [`SegShares`].
    Random(usize),
    /// A fixed stride through a segment. On a segment that lies on one node every reference
    /// goes there; otherwise each reference of a block is counted on its own page's node
    /// (a stride draws nothing, so the count is exact, only cheaper than one pick at a time).
    /// The segment's overall shares would be wrong over a block: a stride longer than the
    /// segment walks it line by line from the thread's starting point.
    Strided(usize),
}

/// One entry of a step as the fast engine charges it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct FastEntry {
    pub kind: FastKind,
    /// Owner escapes: the probability `q` that a reference goes to a uniformly chosen other
    /// block instead (docs/workloads.md, `owner_share`), and the [`SegShares`] index of the
    /// mixture of those blocks.
    pub escape: Option<(usize, f64)>,
}

impl FastEntry {
    /// The fast form of an entry, or `None` if it must go reference by reference (strided,
    /// alternating and explicit-run cursors).
    pub fn of(e: &Entry, shares: &mut SegShares, memo: &mut EscapeMemo, n: usize) -> Option<FastEntry> {
        let kind = match &e.cursor {
            Cursor::Walk { .. } => FastKind::Walk,
            Cursor::Fixed { .. } => FastKind::Fixed,
            Cursor::Random { seg } => FastKind::Random(shares.intern(*seg, n)),
            Cursor::Strided { seg, .. } => {
                let i = shares.intern(*seg, n);
                shares.want_runs(i);
                FastKind::Strided(i)
            }
            _ => return None,
        };
        let escape = e.escape.as_ref().map(|esc| (memo.mix(&esc.others, shares, n), esc.threshold as f64 / 18_446_744_073_709_551_616.0));
        Some(FastEntry { kind, escape })
    }

    /// Segments and mixtures whose shares this entry needs, each with whether it must also
    /// be free of armed pages. A uniformly random reference finds an armed page by chance,
    /// which the fast charge draws (`block`); a stride visits given pages, so an armed one
    /// among them must fault on the reference that reaches it: a block follows a stride up
    /// to that reference (`StrideReach`), but a stride with owner escapes is charged by
    /// shares and needs its segment unarmed.
    pub fn needs(&self) -> impl Iterator<Item = (usize, bool)> {
        let seg = match self.kind {
            FastKind::Random(s) => Some((s, false)),
            FastKind::Strided(s) => Some((s, self.escape.is_some())),
            _ => None,
        };
        seg.into_iter().chain(self.escape.map(|e| (e.0, false)))
    }
}

/// The mixtures a thread's last steps escaped to, by the blocks they mix. A thread's step
/// escapes to the same blocks as its step before it until the blocks are repartitioned, and
/// comparing the list of blocks costs far less than interning each of them again (one lookup
/// per other thread, at every step start). It gives exactly what interning gives: the same
/// blocks intern to the same mixture.
#[derive(Default)]
pub(crate) struct EscapeMemo {
    recent: Vec<(Arc<[Seg]>, usize)>,
}

/// Mixtures an [`EscapeMemo`] keeps: a step has a few escaping entries, usually over the
/// same blocks.
const ESCAPE_MEMO_ENTRIES: usize = 4;

impl EscapeMemo {
    /// The [`SegShares`] index of the even mixture of `others`.
    pub fn mix(&mut self, others: &Arc<[Seg]>, shares: &mut SegShares, n: usize) -> usize {
        // The workload shares one list between the steps that escape to the same blocks
        // (`numalab_workload::EscapeLists`), so the pointer usually decides; the contents
        // decide otherwise.
        if let Some((_, i)) = self.recent.iter().find(|(segs, _)| Arc::ptr_eq(segs, others) || segs[..] == others[..]) {
            return *i;
        }
        let parts: Vec<usize> = others.iter().map(|s| shares.intern(*s, n)).collect();
        let i = shares.intern_mix(parts, n);
        if self.recent.len() == ESCAPE_MEMO_ENTRIES {
            self.recent.remove(0);
        }
        self.recent.push((Arc::clone(others), i));
        i
    }
}

/// Split `total` into integer parts in proportion to `share`, each at most its `cap`,
/// carrying the rounding in `resid` so that over many calls every part tracks its share
/// within one unit. Deterministic: ties go to the lowest index.
pub(crate) fn apportion(total: u64, share: &[f64], cap: &[u64], resid: &mut [f64], out: &mut [u64]) {
    let mut sum = 0u64;
    for j in 0..share.len() {
        let x = resid[j] + total as f64 * share[j];
        // floor(max(x, 0)): a float-to-integer cast truncates, which is the floor for a
        // value not below 0 (and takes NaN to 0, as `floor` then `max` did).
        let c = (x.max(0.0) as u64).min(cap[j]);
        out[j] = c;
        resid[j] = x - c as f64;
        sum += c;
    }
    if sum < total {
        // The parts furthest behind their shares that have room get one more each, those
        // with a share first (a part with no share only if no other has room, which
        // rounding of the shares can cause); ties to the lowest index.
        apportion_in_rounds(total, &mut sum, share, cap, resid, out);
    }
    while sum > total {
        let pick = (0..share.len())
            .filter(|&j| out[j] > 0)
            .min_by(|&a, &b| resid[a].partial_cmp(&resid[b]).unwrap_or(std::cmp::Ordering::Equal).then(a.cmp(&b)))
            .expect("a part to take from");
        out[pick] -= 1;
        resid[pick] += 1.0;
        sum -= 1;
    }
    // A cap can hold a part back for long; its debt is not carried further than two units.
    resid.iter_mut().for_each(|r| *r = r.clamp(-2.0, 2.0));
}

/// The parts furthest behind their shares that have room get one more each, in rounds over
/// their order (by the key at entry: a share first, then the residue, ties to the lowest
/// index), until `sum` reaches `total`.
///
/// The first round usually ends it (the floors leave fewer units than parts): its parts are
/// picked best first by selection, which costs a few comparisons per unit handed out; only
/// when caps leave units over after a whole round are the parts sorted for the rounds that
/// follow, in the same order.
fn apportion_in_rounds(total: u64, sum: &mut u64, share: &[f64], cap: &[u64], resid: &mut [f64], out: &mut [u64]) {
    let n = share.len();
    if resid[..n].iter().any(|r| r.is_nan()) {
        apportion_in_rounds_by_pairs(total, sum, share, cap, resid, out)
    } else if n <= 8 {
        apportion_in_rounds_keyed::<8>(total, sum, share, cap, resid, out)
    } else if n <= 16 {
        apportion_in_rounds_keyed::<16>(total, sum, share, cap, resid, out)
    } else {
        apportion_in_rounds_keyed::<{ crate::memory::MAX_NODES }>(total, sum, share, cap, resid, out)
    }
}

/// [`apportion_in_rounds`] for at most `M` parts, none with a NaN residue (arrays sized to
/// the machine, so a call does not clear room for 63 nodes).
#[inline(always)]
fn apportion_in_rounds_keyed<const M: usize>(total: u64, sum: &mut u64, share: &[f64], cap: &[u64], resid: &mut [f64], out: &mut [u64]) {
    let n = share.len();
    // The order as one integer per part, greatest first: a share, then the residue (its bits
    // made monotone; -0 and +0 are one value, as they compare equal), then the lower index.
    // Unique per part, so no tie is left; 0 marks a part the selection has taken.
    let mut key = [0u128; M];
    for j in 0..n {
        key[j] = (u128::from(share[j] > 0.0) << 70) | (u128::from(monotone_bits(resid[j] + 0.0)) << 6) | (63 - j) as u128;
    }
    let mut taken = [0u128; M];
    for _ in 0..n {
        if *sum == total {
            return;
        }
        let best = (0..n).fold(0, |b, j| if key[j] > key[b] { j } else { b });
        (taken[best], key[best]) = (key[best], 0);
        if out[best] < cap[best] {
            out[best] += 1;
            resid[best] -= 1.0;
            *sum += 1;
        }
    }
    // Every part was taken once: the later rounds go in the order they were taken.
    let mut order = [0usize; M];
    let order = &mut order[..n];
    order.iter_mut().enumerate().for_each(|(i, o)| *o = i);
    order.sort_unstable_by(|&a, &b| taken[b].cmp(&taken[a]));
    give_in_rounds(total, sum, order, cap, resid, out);
}

/// The bits of a float (not NaN) as an integer that orders as the float does.
#[inline(always)]
fn monotone_bits(x: f64) -> u64 {
    let bits = x.to_bits();
    if bits >> 63 == 1 {
        !bits
    } else {
        bits | 1 << 63
    }
}

/// [`apportion_in_rounds`] comparing (share, residue) pairs, for residues with a NaN among
/// them (a NaN compares equal to everything, so the index decides, which no integer key
/// reproduces).
#[cold]
fn apportion_in_rounds_by_pairs(total: u64, sum: &mut u64, share: &[f64], cap: &[u64], resid: &mut [f64], out: &mut [u64]) {
    const N: usize = crate::memory::MAX_NODES;
    let n = share.len();
    let mut key: [(bool, f64); N] = [(false, 0.0); N];
    for j in 0..n {
        key[j] = (share[j] > 0.0, resid[j]);
    }
    // `a` comes before `b` in the round order.
    let before = |a: usize, b: usize| match key[a].partial_cmp(&key[b]) {
        Some(std::cmp::Ordering::Greater) => true,
        Some(std::cmp::Ordering::Less) => false,
        _ => a < b,
    };
    let mut visited = 0u64;
    for _ in 0..n {
        if *sum == total {
            return;
        }
        let mut best = usize::MAX;
        for j in 0..n {
            if visited & (1 << j) == 0 && (best == usize::MAX || before(j, best)) {
                best = j;
            }
        }
        visited |= 1 << best;
        if out[best] < cap[best] {
            out[best] += 1;
            resid[best] -= 1.0;
            *sum += 1;
        }
    }
    let mut order: [usize; N] = [0; N];
    let order = &mut order[..n];
    order.iter_mut().enumerate().for_each(|(i, o)| *o = i);
    order.sort_unstable_by(|&a, &b| if before(a, b) { std::cmp::Ordering::Less } else { std::cmp::Ordering::Greater });
    give_in_rounds(total, sum, order, cap, resid, out);
}

/// Rounds over `order` after the first: one more unit to each part with room, until `sum`
/// reaches `total`.
fn give_in_rounds(total: u64, sum: &mut u64, order: &[usize], cap: &[u64], resid: &mut [f64], out: &mut [u64]) {
    while *sum < total {
        let at_start = *sum;
        for &j in order.iter() {
            if *sum == total {
                break;
            }
            if out[j] < cap[j] {
                out[j] += 1;
                resid[j] -= 1.0;
                *sum += 1;
            }
        }
        assert!(*sum > at_start, "the caps hold the total");
    }
}

/// The entry furthest behind its proportional target `floor((I+1)·refs/T)` after the next
/// pick (`I` references issued so far of `T`); only entries with references left.
pub(crate) fn most_behind(entries: &[Entry], total_refs: u64) -> usize {
    let issued: u64 = entries.iter().map(|e| e.issued).sum();
    let mut best = (i128::MIN, 0);
    for (i, e) in entries.iter().enumerate() {
        if e.remaining() == 0 {
            continue;
        }
        let target = div_u128((issued as u128 + 1) * e.refs as u128, total_refs.max(1) as u128) as i128;
        let behind = target - e.issued as i128;
        if behind > best.0 {
            best = (behind, i);
        }
    }
    best.1
}

/// Scratch and rounding state of one thread's fast charging.
#[derive(Clone, Debug, Default)]
pub(crate) struct FastState {
    /// Per node: expected accesses and writes charged by share since the last flush.
    pending_acc: Vec<f64>,
    pending_wr: Vec<f64>,
    /// References and writes behind `pending_*` (integers: what the flush must hand out).
    pending_refs: u64,
    pending_writes: u64,
    /// Per node: rounding carried from one flush to the next, for accesses then writes.
    resid: Vec<f64>,
    /// Per node scratch of a flush.
    counts: Vec<u64>,
    writes: Vec<u64>,
    share: Vec<f64>,
    caps_max: Vec<u64>,
    /// Per entry of the block being charged: what the block found out about it.
    plans: Vec<Plan>,
    /// Per entry of the block (`n` each): its `shares_of`, where the block needed them.
    entry_share: Vec<f64>,
    /// Per entry: what a whole pass of its stride puts in each run of one node.
    stride_passes: Vec<StridePasses>,
    /// Per entry: its current pass's labels, for a segment of many runs.
    stride_sweeps: Vec<StrideSweep>,
    /// Per entry: its references in the block at `P = ks_at[s]`, for the last two `P` looked
    /// at (slot `ks_next` is written next).
    ks: [Vec<u64>; 2],
    ks_at: [u128; 2],
    ks_next: usize,
    /// The block's walks over their next pages, as runs of one node.
    walks: WalkRuns,
    /// Per entry of the step: how far its stride was found to stay on fast pages.
    stride_reach: StrideReach,
}

/// One entry of a block, as the block's set-up found it.
#[derive(Clone, Copy, Debug, Default)]
struct Plan {
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

impl FastState {
    /// `k` references with `writes` writes among them, spread by `share`.
    fn add_pending(&mut self, k: u64, writes: u64, share: &[f64]) {
        for ((pa, pw), &f) in self.pending_acc.iter_mut().zip(self.pending_wr.iter_mut()).zip(share) {
            *pa += k as f64 * f;
            *pw += writes as f64 * f;
        }
        self.pending_refs += k;
        self.pending_writes += writes;
    }

    /// A new step's entries, on `n` nodes.
    pub fn begin_step(&mut self, n: usize) {
        self.stride_reach.begin_step();
        self.reset(n);
    }

    /// Size the state for `n` nodes. Pending counts and rounding carry over from step to
    /// step: they are made integer once per epoch (`flush`, from `close_epoch`).
    fn reset(&mut self, n: usize) {
        if self.counts.len() == n {
            return;
        }
        self.pending_acc = vec![0.0; n];
        self.pending_wr = vec![0.0; n];
        (self.pending_refs, self.pending_writes) = (0, 0);
        self.resid = vec![0.0; 2 * n];
        self.counts = vec![0; n];
        self.writes = vec![0; n];
        self.share = vec![0.0; n];
        self.caps_max = vec![u64::MAX; n];
    }

    /// Turn the expected counts charged since the last flush into integer accesses and
    /// writes per node (every reference exactly once, writes within accesses), carrying the
    /// rounding to the next flush.
    /// With references pending (charged by expectation since the last flush): each node's
    /// share of the epoch's expected accesses (`acc` and `wr` hold what was charged as
    /// integers) into `frac`, and the expected write fraction returned. `None`, `frac`
    /// untouched, when nothing is pending.
    pub fn expected_shares(&self, acc: &[u64], wr: &[u64], frac: &mut [f64]) -> Option<f64> {
        if self.pending_refs == 0 {
            return None;
        }
        let total = acc.iter().sum::<u64>() as f64 + self.pending_refs as f64;
        let writes = wr.iter().sum::<u64>() as f64 + self.pending_writes as f64;
        for ((f, &a), &p) in frac.iter_mut().zip(acc).zip(&self.pending_acc) {
            *f = (a as f64 + p) / total;
        }
        Some(writes / total)
    }

    pub fn flush(&mut self, acc: &mut [u64], wr: &mut [u64]) {
        if self.pending_refs == 0 {
            return;
        }
        let n = self.counts.len();
        let (ra, rw) = self.resid.split_at_mut(n);
        let inv = 1.0 / self.pending_refs as f64;
        self.share.iter_mut().zip(&self.pending_acc).for_each(|(s, p)| *s = p * inv);
        apportion(self.pending_refs, &self.share, &self.caps_max, ra, &mut self.counts);
        if self.pending_writes > 0 {
            let inv = 1.0 / self.pending_writes as f64;
            self.share.iter_mut().zip(&self.pending_wr).for_each(|(s, p)| *s = p * inv);
            apportion(self.pending_writes, &self.share, &self.counts, rw, &mut self.writes);
        } else {
            self.writes.iter_mut().for_each(|w| *w = 0);
        }
        for j in 0..n {
            acc[j] += self.counts[j];
            wr[j] += self.writes[j];
        }
        self.pending_acc.iter_mut().for_each(|x| *x = 0.0);
        self.pending_wr.iter_mut().for_each(|x| *x = 0.0);
        (self.pending_refs, self.pending_writes) = (0, 0);
    }
}

/// Inputs of the fast charging loop that stay fixed for one call.
pub(crate) struct FastStep<'s> {
    pub kinds: &'s [FastEntry],
    /// Node shares, settled for every segment the entries need.
    pub shares: &'s SegShares,
    /// References of the step's main entries (the `T` of the proportional targets).
    pub total_refs: u64,
    pub lpp: u64,
    /// `Memory::slowed` now (what a stride's scan of fast pages is valid for).
    pub slowed: u64,
}

impl Hot<'_> {
    /// Charge up to `max` references of a step's main entries the fast way: proportional
    /// blocks while they can be charged in bulk, stretches of single references (most-behind
    /// pick) otherwise. Returns what `issue` returns.
    pub fn issue_fast(
        &self,
        entries: &mut [Entry],
        step: &FastStep,
        fs: &mut FastState,
        max: u64,
        t: &mut Tally,
        mut clock: f64,
    ) -> (u64, f64, Option<SlowRef>) {
        let mut issued = 0;
        while issued < max {
            if let Some((k, c, slow)) = self.block(entries, step, fs, max - issued, t, clock) {
                if slow.is_some() {
                    return (issued + k, c, slow);
                }
                if k > 0 {
                    issued += k;
                    clock = c;
                    if clock >= self.end {
                        break;
                    }
                    continue;
                }
            }
            let refs = (max - issued).min(EXACT_STRETCH);
            let total = step.total_refs;
            let (k, c, slow) = self.issue::<false>(entries, |es| most_behind(es, total), refs, t, clock);
            issued += k;
            clock = c;
            if slow.is_some() || clock >= self.end {
                return (issued, clock, slow);
            }
        }
        (issued, clock, None)
    }

    /// One proportional block: every entry advances to `floor(P·refs_i/T)` references for the
    /// largest `P` that keeps each walk on pages the fast path may charge (of any node), stays
    /// within `max` and ends at most one reference past the epoch end. `None` if a walk or
    /// fixed entry is on a slow page.
    fn block(
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
        let p = if c_top < self.end {
            p_top
        } else {
            first_reaching(issued_before as u128, clock, p_top, c_top, self.end, |p| fs.clock_at::<true>(p, entries, step, max, clock))
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
                        clock += counts[j] as f64 * cost[kind_index(e.kind) * n + j];
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
                    // The escapes by their shares, the walk's own references at weight
                    // `own` on each run's node; made integer at the flush.
                    clock += fs.walks.cost_ns(i, k);
                    let (walks, share) = (std::mem::take(&mut fs.walks), std::mem::take(&mut fs.entry_share));
                    walks.take(i, e, k, |node, m, writes| {
                        fs.add_pending(m, writes, &share[i * n..(i + 1) * n]);
                        fs.pending_acc[node] += m as f64 * own;
                        fs.pending_wr[node] += writes as f64 * own;
                    });
                    (fs.walks, fs.entry_share) = (walks, share);
                }
                _ => {
                    let writes = e.take_run(k);
                    clock += k as f64 * ns;
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
                            let share = std::mem::take(&mut fs.entry_share);
                            fs.add_pending(k, writes, &share[i * n..(i + 1) * n]);
                            fs.entry_share = share;
                            if let Some(j) = home_node {
                                fs.pending_acc[j] += k as f64 * own;
                                fs.pending_wr[j] += writes as f64 * own;
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
                c += if step.kinds[i].kind == FastKind::Walk { self.walks.cost_ns(i, k) } else { k as f64 * self.plans[i].ns };
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

    /// The hot loop over a two-node memory of 4-line pages, with no epoch end.
    fn two_node_hot(mem: &crate::memory::Memory) -> Hot<'_> {
        Hot { home: mem.home(), shift: 2, n: 2, end: f64::INFINITY, gap_exp_ns: 0.0, slow_from: SLOW, maps: &[], node: 0 }
    }

    #[test]
    fn div_u128_gives_the_quotient_on_both_sides_of_64_bits() {
        let big = u128::from(u64::MAX);
        for (num, den) in [(0, 1), (7, 2), (big, 3), (big + 1, 3), (big * 5, 7), (big, big + 1), (3 * big, big)] {
            assert_eq!(div_u128(num, den), num / den, "{num} / {den}");
        }
    }

    #[test]
    fn apportion_conserves_and_tracks_shares() {
        let share = [0.5, 0.25, 0.25, 0.0];
        let mut resid = [0.0; 4];
        let mut out = [0u64; 4];
        let mut sums = [0u64; 4];
        for k in [1u64, 3, 7, 1, 1, 100, 2, 5] {
            apportion(k, &share, &[u64::MAX; 4], &mut resid, &mut out);
            assert_eq!(out.iter().sum::<u64>(), k, "every reference goes somewhere");
            assert_eq!(out[3], 0, "a node with no share gets nothing");
            for j in 0..4 {
                sums[j] += out[j];
            }
        }
        let total: u64 = sums.iter().sum();
        for j in 0..4 {
            assert!((sums[j] as f64 - share[j] * total as f64).abs() <= 1.0, "node {j}: {sums:?} of {total}");
        }
    }

    /// The short parts picked one by one, each the furthest behind of those not yet picked
    /// that have room (what `apportion` did before it used the sorted rounds): the reference
    /// its rounds must reproduce when one round suffices.
    fn picks_one_by_one(total: u64, sum: &mut u64, share: &[f64], cap: &[u64], resid: &mut [f64], out: &mut [u64]) {
        let mut picked = 0u64;
        while *sum < total {
            let key = |j: usize| (share[j] > 0.0, resid[j]);
            let ahead = |a: usize, b: usize| key(a).partial_cmp(&key(b)).unwrap_or(std::cmp::Ordering::Equal).then(b.cmp(&a)).is_gt();
            let best = (0..share.len())
                .filter(|&j| out[j] < cap[j] && picked & (1 << j) == 0)
                .reduce(|a, b| if ahead(b, a) { b } else { a })
                .expect("a part with room");
            picked |= 1 << best;
            out[best] += 1;
            resid[best] -= 1.0;
            *sum += 1;
        }
    }

    /// The rounds as `apportion` first made them: every part sorted by its key once, then
    /// rounds over that order. The selection of the first round must reproduce it, caps and
    /// further rounds included.
    fn rounds_over_sorted_order(total: u64, sum: &mut u64, share: &[f64], cap: &[u64], resid: &mut [f64], out: &mut [u64]) {
        let key = |j: usize| (share[j] > 0.0, resid[j]);
        let mut order: Vec<usize> = (0..share.len()).collect();
        order.sort_by(|&a, &b| key(b).partial_cmp(&key(a)).unwrap_or(std::cmp::Ordering::Equal).then(a.cmp(&b)));
        while *sum < total {
            for &j in &order {
                if *sum == total {
                    break;
                }
                if out[j] < cap[j] {
                    out[j] += 1;
                    resid[j] -= 1.0;
                    *sum += 1;
                }
            }
        }
    }

    proptest::proptest! {
        /// The first round's selection and the later rounds give what sorting every part
        /// first gives, with caps that force several rounds.
        #[test]
        fn rounds_by_selection_match_the_sorted_rounds(
            parts in proptest::collection::vec((0.0f64..1.0, -2.0f64..2.0, 0u64..4), 1..24),
            short in 0u64..30,
        ) {
            let share: Vec<f64> = parts.iter().map(|p| if p.2 == 0 { 0.0 } else { p.0 }).collect();
            // Caps of 1 to 3 on some parts; ties of residues are likely with the rounding below.
            let cap: Vec<u64> = parts.iter().map(|p| if p.2 == 3 { 1 + (p.0 * 3.0) as u64 } else { u64::MAX }).collect();
            let resid0: Vec<f64> = parts.iter().map(|p| (p.1 * 4.0).round() / 4.0).collect();
            let total = short.min(cap.iter().map(|&c| c.min(short)).sum());
            let (mut r1, mut o1, mut s1) = (resid0.clone(), vec![0u64; parts.len()], 0u64);
            let (mut r2, mut o2, mut s2) = (resid0, vec![0u64; parts.len()], 0u64);
            apportion_in_rounds(total, &mut s1, &share, &cap, &mut r1, &mut o1);
            rounds_over_sorted_order(total, &mut s2, &share, &cap, &mut r2, &mut o2);
            proptest::prop_assert_eq!(s1, total);
            proptest::prop_assert_eq!(o1, o2);
            proptest::prop_assert_eq!(r1, r2);
        }

        /// A round over the sorted order gives what picking the short parts one by one gives.
        #[test]
        fn apportion_picks_as_the_rounds_do(
            parts in proptest::collection::vec((0.0f64..1.0, -2.0f64..2.0, 0u64..4), 1..9),
            total in 0u64..12,
        ) {
            let sum_share: f64 = parts.iter().map(|p| p.0).sum::<f64>().max(1e-9);
            let share: Vec<f64> = parts.iter().map(|p| if p.2 == 0 { 0.0 } else { p.0 / sum_share }).collect();
            let cap: Vec<u64> = parts.iter().map(|p| if p.2 == 3 { 1 } else { u64::MAX }).collect();
            let resid0: Vec<f64> = parts.iter().map(|p| p.1).collect();
            let n = parts.len();
            proptest::prop_assume!(cap.iter().map(|&c| c.min(total)).sum::<u64>() >= total);
            let (mut resid, mut out) = (resid0.clone(), vec![0u64; n]);
            apportion(total, &share, &cap, &mut resid, &mut out);
            // The reference: floor, then rounds over the sorted order.
            let (mut r2, mut o2, mut sum) = (resid0.clone(), vec![0u64; n], 0u64);
            for j in 0..n {
                let x = r2[j] + total as f64 * share[j];
                o2[j] = (x.floor().max(0.0) as u64).min(cap[j]);
                r2[j] = x - o2[j] as f64;
                sum += o2[j];
            }
            let with_room = (0..n).filter(|&j| o2[j] < cap[j]).count() as u64;
            if sum < total && total - sum <= with_room {
                picks_one_by_one(total, &mut sum, &share, &cap, &mut r2, &mut o2);
            } else if sum < total {
                apportion_in_rounds(total, &mut sum, &share, &cap, &mut r2, &mut o2);
            }
            if sum <= total {
                r2.iter_mut().for_each(|r| *r = r.clamp(-2.0, 2.0));
                proptest::prop_assert_eq!(out, o2);
                proptest::prop_assert_eq!(resid, r2);
            }
        }
    }

    /// A NaN residue compares equal to everything, so the index breaks its ties: the rounds
    /// take the pair comparison, and every unit is still handed out.
    #[test]
    fn a_nan_residue_leaves_the_order_to_the_index() {
        let share = [0.5, 0.5, 0.0];
        let mut resid = [f64::NAN, 0.75, 0.5];
        let mut out = [0u64; 3];
        let mut sum = 0;
        apportion_in_rounds(2, &mut sum, &share, &[u64::MAX; 3], &mut resid, &mut out);
        // Part 0 (NaN) ties with part 1 and wins on its index; part 1 comes next.
        assert_eq!((sum, out), (2, [1, 1, 0]));
    }

    #[test]
    fn apportion_respects_caps() {
        let mut resid = [0.9, 0.0];
        let mut out = [0u64; 2];
        apportion(2, &[0.5, 0.5], &[0, 5], &mut resid, &mut out);
        assert_eq!(out, [0, 2]);
    }

    #[test]
    fn most_behind_follows_the_proportions() {
        use numalab_workload::stream::AccessKind;
        let mk = |refs| Entry::new(Cursor::Fixed { line: 0 }, refs, 0.0, AccessKind::Stream, None);
        let mut es = vec![mk(6), mk(3), mk(1)];
        let mut picks = [0u64; 3];
        for _ in 0..10 {
            let i = most_behind(&es, 10);
            es[i].issued += 1;
            picks[i] += 1;
        }
        assert_eq!(picks, [6, 3, 1]);
    }

    /// A uniformly random entry over a segment with armed pages: the references before each
    /// hinting fault are geometric with the armed share (mean (1 - p) / p), the faulting one
    /// lands on an armed page in proportion to its lines, and the others spread over the
    /// unarmed pages' nodes.
    #[test]
    fn random_references_fault_on_armed_pages_at_their_share() {
        use crate::memory::Memory;
        use numalab_workload::stream::{AccessKind, Seg};
        // 8 pages of 4 lines alternating nodes 0 and 1; pages 2 (node 0) and 5 (node 1)
        // armed: a quarter of the lines.
        let mut mem = Memory::new(8, vec![8, 8]);
        for p in 0..8 {
            mem.place(p, (p % 2) as u16);
        }
        mem.arm(2);
        mem.arm(5);
        let mut shares = SegShares::default();
        let mut entries = vec![Entry::new(Cursor::Random { seg: Seg::contiguous(0, 32) }, u64::MAX / 2, 0.0, AccessKind::Random, None)];
        let kinds: Vec<FastEntry> = entries.iter().map(|e| FastEntry::of(e, &mut shares, &mut EscapeMemo::default(), 2).unwrap()).collect();
        assert!(shares.ready(0, &mem, 2, 0.0, 1.0));
        assert_eq!(shares.armed_frac(0), 0.25);
        let step = FastStep { kinds: &kinds, shares: &shares, total_refs: entries[0].refs, lpp: 4, slowed: 0 };
        let hot = two_node_hot(&mem);
        // ns per reference by kind and node (only the random kind's row is read).
        let cost = [10.0, 20.0].repeat(3);
        let (mut acc, mut wr) = ([0u64; 2], [0u64; 2]);
        let mut rng = numalab_core::rng::stream(5, "fast-armed-test", 0);
        let mut fs = FastState::default();
        fs.reset(2);
        let (mut before, mut on_page_2, faults) = (0u64, 0u64, 4000u64);
        for _ in 0..faults {
            let mut t = Tally { rng: &mut rng, acc: &mut acc, wr: &mut wr, cost: &cost };
            let (issued, _, slow) = hot.issue_fast(&mut entries, &step, &mut fs, 1 << 40, &mut t, 0.0);
            let (page, write, kind) = slow.expect("a reference lands on an armed page");
            assert!(page == 2 || page == 5, "page {page} is not armed");
            assert_eq!((write, kind), (false, AccessKind::Random));
            before += issued - 1;
            on_page_2 += u64::from(page == 2);
        }
        let mean = before as f64 / faults as f64;
        assert!((mean - 3.0).abs() < 0.3, "mean references before a fault {mean}, expected 3");
        assert!((1800..2200).contains(&on_page_2), "page 2 took {on_page_2} of {faults} faults");
        fs.flush(&mut acc, &mut wr);
        assert_eq!(acc.iter().sum::<u64>(), before, "every reference that did not fault is charged once");
        assert!((acc[0] as f64 / before as f64 - 0.5).abs() < 0.01, "unarmed lines are half on each node: {acc:?}");
    }

    /// Which way a stride over a segment of many runs is counted.
    #[test]
    fn sweeps_where_recounting_runs_would_cost_more() {
        // bt-like's z sweep on server-b-8n: 6.5 M lines, stride 16,402; about 80 runs under
        // first touch, up to one per page under AutoNUMA.
        assert!(!sweeps(80, 6_500_000, 16_402));
        assert!(sweeps(100_000, 6_500_000, 16_402));
        // A y sweep over one thread's block: 82 k lines, stride 101.
        assert!(!sweeps(100, 82_000, 101));
        assert!(sweeps(300, 82_000, 101));
        // A pass longer than a sweep keeps is not swept.
        assert!(!sweeps(1 << 20, 1 << 30, 2));
    }

    /// A stride over 256 pages alternating nodes (256 runs: swept) charges each reference on
    /// its page's node and its writes by the floor rule, through the whole fast path.
    #[test]
    fn a_stride_over_many_runs_is_charged_on_its_pages() {
        use crate::memory::Memory;
        use numalab_workload::stream::{AccessKind, Seg};
        let mut mem = Memory::new(256, vec![256, 256]);
        for p in 0..256 {
            mem.place(p, u16::from(p % 3 == 0));
        }
        let mut shares = SegShares::default();
        // 1024 lines (4 per page), stride 5 lines: passes cross pages unevenly.
        let cursor = Cursor::Strided { seg: Seg::contiguous(0, 1024), pos: 0, start: 0, stride: 5 };
        let mut entries = vec![Entry::new(cursor, 1 << 20, 0.375, AccessKind::Stream, None)];
        let mut reference = entries[0].clone();
        let kinds: Vec<FastEntry> = entries.iter().map(|e| FastEntry::of(e, &mut shares, &mut EscapeMemo::default(), 2).unwrap()).collect();
        assert!(shares.ready(0, &mem, 2, 0.0, 1.0));
        let runs = shares.runs(0).expect("runs of one node").0.len() as u64;
        assert!(sweeps(runs, 1024, 5), "{runs} runs");
        let step = FastStep { kinds: &kinds, shares: &shares, total_refs: entries[0].refs, lpp: 4, slowed: 0 };
        let hot = two_node_hot(&mem);
        let cost = [10.0, 20.0].repeat(3);
        let mut rng = numalab_core::rng::stream(5, "fast-sweep-test", 0);
        let mut fs = FastState::default();
        fs.reset(2);
        for k in [1u64, 7, 204, 205, 1000, 5000] {
            let (mut acc, mut wr) = ([0u64; 2], [0u64; 2]);
            let mut t = Tally { rng: &mut rng, acc: &mut acc, wr: &mut wr, cost: &cost };
            let (issued, _, slow) = hot.issue_fast(&mut entries, &step, &mut fs, k, &mut t, 0.0);
            assert_eq!((issued, slow.is_none()), (k, true));
            fs.flush(&mut acc, &mut wr);
            let (mut acc_ref, mut wr_ref) = ([0u64; 2], [0u64; 2]);
            reference.take_strided(k, |line, write| {
                let j = usize::from(mem.home()[(line >> 2) as usize]);
                acc_ref[j] += 1;
                wr_ref[j] += u64::from(write);
            });
            assert_eq!((acc, wr), (acc_ref, wr_ref), "{k} references");
        }
        assert_eq!(entries[0], reference);
    }

    /// A stride over a segment with armed pages stays on the fast path and takes each
    /// hinting fault at the reference that reaches an armed page, as the exact path takes it;
    /// every reference before it is charged on its page's node (docs/simulator.md, "Strides
    /// over armed pages").
    #[test]
    fn a_stride_faults_where_its_references_reach_armed_pages() {
        use crate::memory::Memory;
        use numalab_workload::stream::{AccessKind, Seg};
        let mut mem = Memory::new(256, vec![256, 256]);
        for p in 0..256 {
            mem.place(p, u16::from(p % 3 == 0));
        }
        // Page 0 holds the first reference: the step starts on an armed page.
        for p in (0..256).step_by(19) {
            mem.arm(p);
        }
        let mut shares = SegShares::default();
        let cursor = Cursor::Strided { seg: Seg::contiguous(0, 1024), pos: 0, start: 0, stride: 5 };
        let mut entries = vec![Entry::new(cursor, 1 << 20, 0.375, AccessKind::Stream, None)];
        let mut reference = entries[0].clone();
        let kinds: Vec<FastEntry> = entries.iter().map(|e| FastEntry::of(e, &mut shares, &mut EscapeMemo::default(), 2).unwrap()).collect();
        assert_eq!(kinds[0].needs().collect::<Vec<_>>(), [(0, false)], "armed pages do not keep a stride off the fast path");
        let cost = [10.0, 20.0].repeat(3);
        let mut rng = numalab_core::rng::stream(5, "fast-stride-armed-test", 0);
        let mut fs = FastState::default();
        fs.begin_step(2);
        let (mut acc, mut wr) = ([0u64; 2], [0u64; 2]);
        let (mut acc_ref, mut wr_ref) = ([0u64; 2], [0u64; 2]);
        let mut faults = 0;
        for _ in 0..60 {
            assert!(shares.ready(0, &mem, 2, 0.0, 1.0));
            assert!(shares.armed_frac(0) > 0.0 || faults == 14);
            let step = FastStep { kinds: &kinds, shares: &shares, total_refs: entries[0].refs, lpp: 4, slowed: mem.slowed() };
            let hot = two_node_hot(&mem);
            let mut t = Tally { rng: &mut rng, acc: &mut acc, wr: &mut wr, cost: &cost };
            let (issued, _, slow) = hot.issue_fast(&mut entries, &step, &mut fs, 3000, &mut t, 0.0);
            // What the exact path meets over the same references: the first on an armed
            // page, if any, must be the last of them and the one returned.
            let (mut first_slow, mut j) = (None, 0u64);
            reference.take_strided(issued, |line, write| {
                let h = mem.home()[(line >> 2) as usize];
                if first_slow.is_some() {
                    panic!("reference {j} follows a fault in one call");
                } else if h >= SLOW {
                    first_slow = Some((j, line >> 2, write));
                } else {
                    acc_ref[h as usize] += 1;
                    wr_ref[h as usize] += u64::from(write);
                }
                j += 1;
            });
            match slow {
                Some((page, write, _)) => {
                    assert_eq!(first_slow, Some((issued - 1, page, write)));
                    mem.disarm(page);
                    faults += 1;
                }
                None => assert_eq!(first_slow, None),
            }
        }
        assert_eq!(faults, 14, "every armed page faults once");
        fs.flush(&mut acc, &mut wr);
        assert_eq!((acc, wr), (acc_ref, wr_ref));
        assert_eq!(entries[0], reference);
    }

    #[test]
    fn expected_shares_count_what_is_pending_before_rounding() {
        let mut fs = FastState::default();
        fs.reset(2);
        let mut frac = [9.0, 9.0];
        assert_eq!(fs.expected_shares(&[3, 1], &[0, 0], &mut frac), None, "nothing pending");
        assert_eq!(frac, [9.0, 9.0]);
        // 4 integer accesses (3 on node 0, 1 write on node 1) and 6 pending split 1/3 : 2/3
        // with 3 writes: node 0 expects 3 + 2 of 10, node 1 expects 1 + 4.
        fs.add_pending(6, 3, &[1.0 / 3.0, 2.0 / 3.0]);
        let w = fs.expected_shares(&[3, 1], &[0, 1], &mut frac).unwrap();
        assert!((frac[0] - 0.5).abs() < 1e-12 && (frac[1] - 0.5).abs() < 1e-12, "{frac:?}");
        assert!((w - 0.4).abs() < 1e-12);
    }
}
