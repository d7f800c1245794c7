//! Per-segment node counts for the fast engine (docs/simulator.md, "The fast engine"): for
//! every segment a random, gather or strided entry ranges over, how many of its lines lie on
//! each node, how many of those are on pages armed for a hinting fault (and which pages), and
//! how many are on pages the fast engine cannot charge in bulk (unplaced, freed, replicated).
//! The counts follow the memory's journal of page-byte changes, so a migration or the scanner
//! arming pages costs a few updates instead of a count of every page of the segment; a full
//! count happens when a segment is first needed or the journal no longer reaches back to it.

use crate::memory::{Change, Memory, ARMED, NODE_MASK, REPLICATED, UNPLACED};
use numalab_core::rng::StreamRng;
use numalab_workload::stream::Seg;
use numalab_workload::sweep::StrideCrossings;
use rand::Rng;
use std::cell::{Ref, RefCell};
use std::collections::{BTreeMap, HashMap};

/// Longest wait, in epochs, before a full count of a segment that had blocked pages is tried
/// again.
const MAX_BACKOFF_EPOCHS: u32 = 64;
/// Most armed pages a segment keeps by name. Past this (a scanner arming a large region at
/// once) the segment keeps only their count, and a reference that faults draws its page by
/// rejection: a uniform line of the segment until one on an armed page (at least 1/64 of the
/// lines are then armed in a segment of up to 4 M pages). The names are counted again once
/// fewer than half this many remain.
const MAX_ARMED_SET: usize = if cfg!(test) { 8 } else { 1 << 16 };
/// Most runs of one node kept for a strided segment. A segment cut into many runs is counted
/// by sweeps (numalab_workload::sweep), whose cost grows with the runs only once per runs
/// remade; the bound keeps a run index within a crossing's packing (2^24) and the runs' memory
/// (9 bytes each) within 9 MiB per segment.
const MAX_RUNS: usize = 1 << 20;

/// What a page byte means for the counts: `None` if the page blocks bulk charging (unplaced,
/// freed, replicated), else its node and whether it is armed.
#[inline]
fn class(byte: u8) -> Option<(usize, bool)> {
    let node = byte & NODE_MASK;
    (node != UNPLACED && byte & REPLICATED == 0).then_some((node as usize, byte & ARMED != 0))
}

/// Lines of `seg` inside the line range `[a, b)` (one page).
pub(crate) fn lines_in(seg: &Seg, a: u64, b: u64) -> u64 {
    if seg.chunks == 0 || seg.chunk == 0 || b <= seg.start {
        return 0;
    }
    let overlap = |c: u64| {
        let first = seg.start + c * seg.step;
        (first + seg.chunk).min(b).saturating_sub(first.max(a))
    };
    if seg.chunks == 1 {
        return overlap(0);
    }
    // Chunks that end after `a` and start before `b`.
    let lo = (a + 1).saturating_sub(seg.start + seg.chunk).div_ceil(seg.step);
    let hi = (b - seg.start).div_ceil(seg.step).min(seg.chunks);
    (lo..hi).map(overlap).sum()
}

/// The pages of `seg` in order, one item per page and chunk: the page and the segment's lines
/// on it in that chunk (lines to pages by `shift`).
fn pages_of(seg: Seg, shift: u32) -> SegPages {
    SegPages { seg, shift, next_chunk: 0, line: 0, end: 0 }
}

/// See [`pages_of`]: the chunk after the current one, and the current chunk's lines not yet
/// handed out (`line..end`).
struct SegPages {
    seg: Seg,
    shift: u32,
    next_chunk: u64,
    line: u64,
    end: u64,
}

impl Iterator for SegPages {
    type Item = (u64, u64);

    #[inline]
    fn next(&mut self) -> Option<(u64, u64)> {
        while self.line == self.end {
            if self.next_chunk == self.seg.chunks {
                return None;
            }
            self.line = self.seg.start + self.next_chunk * self.seg.step;
            self.end = self.line + self.seg.chunk;
            self.next_chunk += 1;
        }
        let page = self.line >> self.shift;
        let page_end = ((page + 1) << self.shift).min(self.end);
        let lines = page_end - self.line;
        self.line = page_end;
        Some((page, lines))
    }
}

/// The armed pages of a segment with the segment's lines on each, in an order one can draw
/// from. `slot` is only looked up, never iterated, so no result depends on its order. Past
/// `MAX_ARMED_SET` pages it `overflowed`: it names none until counted again.
#[derive(Default)]
struct ArmedPages {
    pages: Vec<(u64, u64)>,
    slot: HashMap<u64, usize>,
    overflowed: bool,
}

impl ArmedPages {
    fn insert(&mut self, page: u64, lines: u64) {
        if self.overflowed {
            return;
        }
        if let std::collections::hash_map::Entry::Vacant(v) = self.slot.entry(page) {
            if self.pages.len() == MAX_ARMED_SET {
                self.clear();
                self.overflowed = true;
                return;
            }
            v.insert(self.pages.len());
            self.pages.push((page, lines));
        }
    }

    /// More lines of a page already named (a page split over two chunks of the segment).
    fn insert_or_add(&mut self, page: u64, lines: u64) {
        match self.slot.get(&page) {
            Some(&i) => self.pages[i].1 += lines,
            None => self.insert(page, lines),
        }
    }

    fn remove(&mut self, page: u64) {
        if let Some(i) = self.slot.remove(&page) {
            self.pages.swap_remove(i);
            if let Some(&(moved, _)) = self.pages.get(i) {
                self.slot.insert(moved, i);
            }
        }
    }

    fn clear(&mut self) {
        self.pages.clear();
        self.slot.clear();
        self.overflowed = false;
    }

    /// A page drawn with probability proportional to its lines in the segment: a uniform slot,
    /// kept with probability `lines / lpp` (rejection; a whole page is always kept).
    fn draw(&self, rng: &mut StreamRng, lpp: u64) -> u64 {
        loop {
            let (page, lines) = self.pages[rng.random_range(0..self.pages.len())];
            if lines >= lpp || rng.random_range(0..lpp) < lines {
                return page;
            }
        }
    }
}

/// The counts of one segment, or of an even mixture of segments (a reference that escapes to
/// a uniformly chosen other block).
struct SegShare {
    seg: Seg,
    /// The segment's first line and the end of its last chunk: a quick test for changes.
    span: (u64, u64),
    /// A mixture: the segments it averages (then `seg` is unused).
    parts: Option<Vec<usize>>,
    /// The segment follows the journal: it is listed in the page buckets of its span
    /// (`SegShares::buckets`) under `listing`, and its counts are valid at
    /// `SegShares::cursor`. Otherwise they are valid at `valid_at`.
    synced: bool,
    valid_at: u64,
    /// Changes of the segment's pages were applied since its shares were last derived.
    dirty: bool,
    /// Bumped whenever the segment leaves the buckets: an entry of an older listing is stale
    /// and is dropped where it is met.
    listing: u32,
    /// Lines on each node (armed ones included), lines on armed pages per node, lines on
    /// blocking pages. Valid at `SegShares::cursor` while `synced`.
    lines_on: Vec<u64>,
    armed_on: Vec<u64>,
    blocked_lines: u64,
    armed: ArmedPages,
    /// No blocking page at the last count or catch-up.
    settled: bool,
    /// Derived when settled: each node's share of the lines, its share of the unarmed lines
    /// (over all lines: it sums to `1 - armed_frac`), and the armed share.
    share: Vec<f64>,
    unarmed: Vec<f64>,
    armed_frac: f64,
    /// Start of the epoch of the last full count: at most one per epoch.
    counted_at: f64,
    /// A strided entry ranges over the segment: keep its runs of one node.
    runs_wanted: bool,
    /// Runs of consecutive positions of the segment on one node (valid when `runs_ok`):
    /// `run_ends[r]` ends run `r` (exclusive), `run_nodes[r]` is its node.
    run_ends: Vec<u64>,
    run_nodes: Vec<u8>,
    runs_ok: bool,
    /// The runs' boundaries ordered for each stride an entry sweeps the segment with, made at
    /// the first sweep after the runs were made (every thread striding over the segment
    /// shares them).
    crossings: RefCell<Vec<StrideCrossings>>,
    /// Full counts so far: the runs are remade only by a full count, so this names them.
    counts: u64,
    /// Bumped whenever the shares change; a mixture keeps the sum of its parts' versions at
    /// its last averaging (`parts_version`) and averages again only when that sum moves.
    version: u64,
    parts_version: u64,
    /// A change moved a page of the segment to another node (or in or out of blocking) since
    /// the runs were made: the next epoch counts the segment again to remake them.
    runs_stale: bool,
    /// The armed pages overflowed their set and fewer than half of its size remain: the next
    /// epoch counts the segment again to name them.
    rename_armed: bool,
    /// A segment with blocking pages is counted again in full only from `retry_at` on,
    /// waiting twice as many epochs after each count that found some (at most
    /// `MAX_BACKOFF_EPOCHS`). Only when the journal cannot bring it up to date.
    backoff_epochs: u32,
    retry_at: f64,
}

/// What `SegShares::ready` reads of a segment when nothing about it changed, kept apart from
/// the segment (a dense array): a mixture asks each of its parts, and a thread each of its
/// segments, after every change of the memory.
#[derive(Clone, Copy)]
struct Quick {
    /// Memory generation of the segment's last count or catch-up (`u64::MAX`: never
    /// counted): whether the journal still reaches back to it decides between a catch-up and
    /// a full count, as if the segment replayed the journal itself.
    generation: u64,
    /// `SegShare::version` and `SegShare::settled`, as of the last `ready`.
    version: u64,
    settled: bool,
    /// Following the journal, with no change applied since the last `ready` and no count
    /// waiting: catching up is only taking the current generation.
    clean: bool,
}

const NEVER_COUNTED: Quick = Quick { generation: u64::MAX, version: 0, settled: false, clean: false };

/// The segments the fast engine charges by shares, shared by every thread (one count serves
/// all the threads of a shared region). Looked up by key, never iterated: order cannot leak.
#[derive(Default)]
pub(crate) struct SegShares {
    index: BTreeMap<(u64, u64, u64, u64), usize>,
    mixes: BTreeMap<Vec<usize>, usize>,
    segs: Vec<SegShare>,
    quick: Vec<Quick>,
    /// Memory generation up to which every `synced` segment has applied the journal.
    cursor: u64,
    /// The segments following the journal whose span reaches into each bucket of
    /// `1 << bucket_shift` pages, with their listing: a change of a page is applied only to
    /// the segments of its bucket, not offered to every segment (docs/simulator.md, "The fast
    /// engine").
    buckets: Vec<Vec<(u32, u32)>>,
    bucket_shift: u32,
    /// The segments following the journal whose span reaches into more than `wide_from`
    /// buckets, an eighth of the memory's (a stride over a whole region): offered every
    /// change, as a bucket would offer it. A segment's entries in the buckets then cost at
    /// most 8 bytes per 512 pages of memory, and the live segments of a run a few bytes per
    /// simulated page at worst.
    wide: Vec<(u32, u32)>,
    wide_from: usize,
}

/// `SegShares::wide_from` is at least this many buckets.
const MIN_WIDE_BUCKETS: usize = if cfg!(test) { 2 } else { 64 };

/// Offer the change `c` (from generation `at` to `at + 1`) to the segments of `list`: a stale
/// entry leaves the list, a segment idle for `IDLE_CHANGES` stops following the journal (with
/// every change before this one applied), and the others apply it.
fn offer(list: &mut Vec<(u32, u32)>, segs: &mut [SegShare], quick: &mut [Quick], c: &Change, at: u64, shift: u32) {
    let idle_before = at.saturating_sub(IDLE_CHANGES);
    let mut k = 0;
    while k < list.len() {
        let (i, listing) = list[k];
        let (s, q) = (&mut segs[i as usize], &mut quick[i as usize]);
        if s.listing != listing {
            list.swap_remove(k);
            continue;
        }
        if q.generation < idle_before {
            // Idle: out of every list (its other entries are now stale).
            s.unlist(at);
            q.clean = false;
            list.swap_remove(k);
            continue;
        }
        if s.apply(c.page, c.old, c.new, shift) {
            s.dirty = true;
            q.clean = false;
        }
        k += 1;
    }
}

/// A segment not needed for this many changes of the journal stops following it (a
/// repartitioned region's old blocks, a phase that no longer runs) and catches up from the
/// journal itself when it is needed again.
const IDLE_CHANGES: u64 = if cfg!(test) { 3 } else { 1 << 12 };

/// Pages per bucket of `SegShares::buckets` at least (`1 << MIN_BUCKET_SHIFT`): 256 KiB of
/// 4 KiB pages. A large memory takes larger buckets, so that there are at most
/// `1 << MAX_BUCKETS_SHIFT` of them.
const MIN_BUCKET_SHIFT: u32 = if cfg!(test) { 1 } else { 6 };
const MAX_BUCKETS_SHIFT: u32 = 16;

impl SegShare {
    fn new(seg: Seg, parts: Option<Vec<usize>>, n: usize) -> SegShare {
        let end = if seg.chunks == 0 { seg.start } else { seg.start + (seg.chunks - 1) * seg.step + seg.chunk };
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
            parts_version: u64::MAX,
            runs_stale: false,
            rename_armed: false,
            backoff_epochs: 0,
            retry_at: f64::NEG_INFINITY,
        }
    }

    /// Count every page of the segment (and its runs, if wanted and nothing blocks).
    fn count(&mut self, home: &[u8], shift: u32) {
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
        for (page, lines) in pages_of(self.seg, shift) {
            pos += lines;
            match class(home[page as usize]) {
                None => {
                    self.blocked_lines += lines;
                    runs_ok = false;
                }
                Some((node, armed)) => {
                    self.lines_on[node] += lines;
                    if armed {
                        self.armed_on[node] += lines;
                        // A page split over two chunks of the segment is one slot with
                        // the lines of both.
                        self.armed.insert_or_add(page, lines);
                    }
                    runs_ok = runs_ok && self.extend_runs(pos, node as u8);
                }
            }
        }
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
    fn remake_runs(&mut self, home: &[u8], shift: u32) {
        self.run_ends.clear();
        self.run_nodes.clear();
        self.crossings.get_mut().clear();
        let mut runs_ok = true;
        let mut pos = 0u64;
        for (page, lines) in pages_of(self.seg, shift) {
            pos += lines;
            if !class(home[page as usize]).is_some_and(|(node, _)| self.extend_runs(pos, node as u8)) {
                runs_ok = false;
                break;
            }
        }
        self.runs_ok = runs_ok;
        self.runs_stale = false;
        self.counts += 1;
    }

    /// Follow one change of a page byte; false if it is not a page of the segment.
    fn apply(&mut self, page: u64, old: u8, new: u8, shift: u32) -> bool {
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
                    self.armed.insert(page, lines);
                }
            }
        }
        if self.runs_wanted && was.map(|w| w.0) != is.map(|i| i.0) {
            self.runs_ok = false;
            self.runs_stale = true;
        }
        if self.armed.overflowed && self.armed_on.iter().sum::<u64>() < (MAX_ARMED_SET as u64 / 2) << shift {
            self.rename_armed = true;
        }
        true
    }

    /// An armed page, as a uniformly random reference that lands on one would reach it: from
    /// the named pages, or, when they overflowed, by drawing lines until one is armed.
    fn draw_armed(&self, rng: &mut StreamRng, home: &[u8], shift: u32) -> u64 {
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
    fn unlist(&mut self, valid_at: u64) {
        self.synced = false;
        self.valid_at = valid_at;
        self.listing = self.listing.wrapping_add(1);
    }

    /// Shares from the counts.
    fn derive(&mut self) {
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
    }
}

impl SegShares {
    pub fn intern(&mut self, seg: Seg, n: usize) -> usize {
        let key = (seg.start, seg.chunk, seg.step, seg.chunks);
        let (segs, quick) = (&mut self.segs, &mut self.quick);
        *self.index.entry(key).or_insert_with(|| {
            segs.push(SegShare::new(seg, None, n));
            quick.push(NEVER_COUNTED);
            segs.len() - 1
        })
    }

    /// An even mixture of interned segments.
    pub fn intern_mix(&mut self, parts: Vec<usize>, n: usize) -> usize {
        // Looked up first: steps intern their mixtures every time they start.
        if let Some(&i) = self.mixes.get(&parts) {
            return i;
        }
        self.segs.push(SegShare::new(Seg::contiguous(0, 0), Some(parts.clone()), n));
        self.quick.push(NEVER_COUNTED);
        self.mixes.insert(parts, self.segs.len() - 1);
        self.segs.len() - 1
    }

    /// A strided entry ranges over segment `i`: keep its runs of one node.
    pub fn want_runs(&mut self, i: usize) {
        self.segs[i].runs_wanted = true;
    }

    /// May segment `i` be charged by its shares now (no blocking page; armed pages allowed,
    /// see `armed_frac`)? Brings its counts up to date from the memory's journal, or counts
    /// it in full (at most once per epoch, with back-off while it has blocking pages).
    #[inline]
    pub fn ready(&mut self, i: usize, mem: &Memory, shift: u32, epoch_start: f64, epoch_ns: f64) -> bool {
        // A clean segment the journal still reaches: what the full path below would do.
        self.sync(mem, shift);
        let q = &mut self.quick[i];
        if q.clean && q.generation >= mem.journal_from() {
            q.generation = mem.generation();
            return q.settled;
        }
        let settled = self.ready_in_full(i, mem, shift, epoch_start, epoch_ns);
        let s = &self.segs[i];
        let q = &mut self.quick[i];
        q.version = s.version;
        q.settled = s.settled;
        q.clean = s.synced && !s.dirty && !s.runs_stale && !s.rename_armed && s.parts.is_none();
        settled
    }

    #[inline(never)]
    fn ready_in_full(&mut self, i: usize, mem: &Memory, shift: u32, epoch_start: f64, epoch_ns: f64) -> bool {
        let generation = mem.generation();
        let s = &self.segs[i];
        // Up to date, unless its runs or armed names wait for this epoch's count.
        if self.quick[i].generation == generation && !((s.runs_stale || s.rename_armed) && s.counted_at != epoch_start) {
            return s.settled;
        }
        if let Some(parts) = self.segs[i].parts.take() {
            let (mut settled, mut parts_version) = (true, 0u64);
            for &p in &parts {
                settled &= self.ready(p, mem, shift, epoch_start, epoch_ns);
                parts_version += self.quick[p].version;
            }
            if settled && parts_version == self.segs[i].parts_version {
                self.quick[i].generation = generation;
            } else if settled {
                let [mut share, mut unarmed] = [std::mem::take(&mut self.segs[i].share), std::mem::take(&mut self.segs[i].unarmed)];
                share.iter_mut().chain(unarmed.iter_mut()).for_each(|x| *x = 0.0);
                let mut armed_frac = 0.0;
                let w = 1.0 / parts.len() as f64;
                for &p in &parts {
                    let part = &self.segs[p];
                    // Over zipped slices: no bounds checks, so the nodes' sums vectorise.
                    for (x, y) in share.iter_mut().zip(&part.share) {
                        *x += y * w;
                    }
                    for (x, y) in unarmed.iter_mut().zip(&part.unarmed) {
                        *x += y * w;
                    }
                    armed_frac += part.armed_frac * w;
                }
                let s = &mut self.segs[i];
                (s.share, s.unarmed, s.armed_frac) = (share, unarmed, armed_frac);
                s.parts_version = parts_version;
                self.quick[i].generation = generation;
            }
            let s = &mut self.segs[i];
            s.settled = settled;
            s.parts = Some(parts);
            return settled;
        }
        // `ready` has brought the cursor up to date already.
        let last = self.quick[i].generation;
        let s = &mut self.segs[i];
        let behind = if last == u64::MAX { None } else { mem.changes_since(last) };
        // The journal no longer reaches back to the last count (a scanner arming more pages at
        // once than it keeps): counted again in full, with the same back-off as blocking pages
        // if it keeps happening, and on the exact path in between.
        let outrun = last != u64::MAX && behind.is_none();
        // Following the journal, `sync` has applied the changes since then already; otherwise
        // the segment applies those since its counts were valid (never before `last`, so the
        // journal reaches them whenever it reaches `last`) and follows the journal again.
        let replay = if s.synced { Some(&[][..]) } else { mem.changes_since(s.valid_at) };
        let caught_up = behind.is_some() && replay.is_some();
        if let (true, Some(changes)) = (caught_up && !s.synced, replay) {
            for c in changes {
                s.dirty |= s.apply(c.page, c.old, c.new, shift);
            }
            self.list(i, mem, shift);
        }
        let s = &mut self.segs[i];
        if caught_up {
            self.quick[i].generation = generation;
            if s.dirty {
                s.dirty = false;
                s.derive();
            }
            if !((s.runs_stale || s.rename_armed) && s.counted_at != epoch_start) {
                return s.settled;
            }
            if !s.rename_armed {
                // Up to date but for its runs: those alone are made again.
                s.remake_runs(mem.home(), shift);
                s.counted_at = epoch_start;
                return s.settled;
            }
        } else if s.counted_at == epoch_start || epoch_start < s.retry_at {
            return false;
        }
        s.count(mem.home(), shift);
        if !s.synced {
            self.list(i, mem, shift);
        }
        self.quick[i].generation = generation;
        let s = &mut self.segs[i];
        s.counted_at = epoch_start;
        if s.settled && !outrun {
            s.backoff_epochs = 0;
        } else {
            s.backoff_epochs = (s.backoff_epochs * 2).clamp(1, MAX_BACKOFF_EPOCHS);
            s.retry_at = epoch_start + s.backoff_epochs as f64 * epoch_ns;
        }
        s.settled
    }

    /// Apply the journal's changes since `cursor` to the counted segments, each change only
    /// to the segments whose span reaches into its page's bucket, in the journal's order. A
    /// segment's counts then depend on the same changes in the same order as if it replayed
    /// the journal itself when next needed, but a change costs a few segments instead of
    /// every segment that is ever needed again. When the journal starts over before the
    /// cursor, every segment waits for its next full count.
    fn sync(&mut self, mem: &Memory, shift: u32) {
        let generation = mem.generation();
        if self.cursor == generation {
            return;
        }
        match mem.changes_since(self.cursor) {
            Some(changes) => {
                for (c, at) in changes.iter().zip(self.cursor..) {
                    if let Some(list) = self.buckets.get_mut((c.page >> self.bucket_shift) as usize) {
                        offer(list, &mut self.segs, &mut self.quick, c, at, shift);
                    }
                    offer(&mut self.wide, &mut self.segs, &mut self.quick, c, at, shift);
                }
            }
            None => {
                // Every segment is behind the journal: counted in full when next needed.
                self.segs.iter_mut().filter(|s| s.synced).for_each(|s| s.unlist(0));
                self.quick.iter_mut().for_each(|q| q.clean = false);
                self.buckets.iter_mut().for_each(Vec::clear);
                self.wide.clear();
            }
        }
        self.cursor = generation;
    }

    /// Segment `i`, up to date at the cursor, follows the journal from now on: listed in the
    /// buckets its span reaches into.
    fn list(&mut self, i: usize, mem: &Memory, shift: u32) {
        if self.buckets.is_empty() {
            let pages = mem.home().len().max(1) as u64;
            let bits = u64::BITS - (pages - 1).leading_zeros();
            self.bucket_shift = bits.saturating_sub(MAX_BUCKETS_SHIFT).max(MIN_BUCKET_SHIFT);
            let buckets = pages.div_ceil(1 << self.bucket_shift) as usize;
            self.wide_from = (buckets / 8).max(MIN_WIDE_BUCKETS);
        }
        let s = &mut self.segs[i];
        s.synced = true;
        let listing = s.listing;
        let (first_line, end_line) = s.span;
        if end_line <= first_line {
            return;
        }
        let first = ((first_line >> shift) >> self.bucket_shift) as usize;
        let last = (((end_line - 1) >> shift) >> self.bucket_shift) as usize;
        if last - first >= self.wide_from {
            self.wide.push((i as u32, listing));
            return;
        }
        if self.buckets.len() <= last {
            self.buckets.resize_with(last + 1, Vec::new);
        }
        for list in &mut self.buckets[first..=last] {
            list.push((i as u32, listing));
        }
    }

    /// Each node's share of segment `i`'s lines (armed ones included).
    pub fn share(&self, i: usize) -> &[f64] {
        &self.segs[i].share
    }

    /// Each node's share of segment `i`'s lines on unarmed pages, over all its lines (it sums
    /// to `1 - armed_frac(i)`).
    pub fn unarmed(&self, i: usize) -> &[f64] {
        &self.segs[i].unarmed
    }

    /// The share of segment `i`'s lines on armed pages: the chance that a uniformly random
    /// reference to it takes a hinting fault.
    pub fn armed_frac(&self, i: usize) -> f64 {
        self.segs[i].armed_frac
    }

    /// An armed page of segment `i` (a mixture: of one of its parts), drawn as a uniformly
    /// random reference that lands on an armed page would draw it. Only when `armed_frac(i)`
    /// is above zero.
    pub fn draw_armed(&self, i: usize, rng: &mut StreamRng, home: &[u8], shift: u32) -> u64 {
        let s = &self.segs[i];
        match &s.parts {
            None => s.draw_armed(rng, home, shift),
            Some(parts) => {
                // A part in proportion to its armed share, then a page of it.
                let total: f64 = parts.iter().map(|&p| self.segs[p].armed_frac).sum();
                let mut x = rng.random::<f64>() * total;
                let mut pick = parts[0];
                for &p in parts {
                    let f = self.segs[p].armed_frac;
                    if f > 0.0 {
                        pick = p;
                        if x < f {
                            break;
                        }
                        x -= f;
                    }
                }
                self.segs[pick].draw_armed(rng, home, shift)
            }
        }
    }

    /// Names segment `i`'s current runs of one node: it changes whenever they are remade.
    pub fn runs_made(&self, i: usize) -> u64 {
        self.segs[i].counts
    }

    /// The runs of one node of segment `i` (ends, nodes), when they are up to date.
    pub fn runs(&self, i: usize) -> Option<(&[u64], &[u8])> {
        let s = &self.segs[i];
        s.runs_ok.then_some((&s.run_ends[..], &s.run_nodes[..]))
    }

    /// Segment `i`'s runs' boundaries ordered by their residue modulo `stride`, when it has
    /// runs (made once per runs and stride, then shared).
    pub fn crossings(&self, i: usize, stride: u64) -> Option<Ref<'_, StrideCrossings>> {
        let s = &self.segs[i];
        if !s.runs_ok {
            return None;
        }
        if !s.crossings.borrow().iter().any(|c| c.stride() == stride) {
            let made = StrideCrossings::new(&s.run_ends, stride)?;
            s.crossings.borrow_mut().push(made);
        }
        Ref::filter_map(s.crossings.borrow(), |made| made.iter().find(|c| c.stride() == stride)).ok()
    }

    /// Every line of segment `i` is on one node (its share is exactly 1).
    pub fn one_node(&self, i: usize) -> bool {
        self.segs[i].share.contains(&1.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use numalab_core::NodeId;

    fn memory(nodes_of_pages: &[Option<NodeId>]) -> Memory {
        let mut m = Memory::new(nodes_of_pages.len() as u64, vec![1 << 20; 4]);
        for (p, n) in nodes_of_pages.iter().enumerate() {
            if let Some(n) = n {
                m.place(p as u64, *n);
            }
        }
        m
    }

    /// A segment counted once, then followed through the journal, against a fresh full count
    /// after every change.
    fn assert_same_as_recount(shares: &SegShares, i: usize, mem: &Memory, shift: u32) {
        let mut fresh = SegShare::new(shares.segs[i].seg, None, shares.segs[i].lines_on.len());
        fresh.runs_wanted = shares.segs[i].runs_wanted;
        fresh.count(mem.home(), shift);
        let s = &shares.segs[i];
        assert_eq!(
            (&s.lines_on, &s.armed_on, s.blocked_lines, s.settled),
            (&fresh.lines_on, &fresh.armed_on, fresh.blocked_lines, fresh.settled)
        );
        assert_eq!((&s.share, &s.unarmed, s.armed_frac), (&fresh.share, &fresh.unarmed, fresh.armed_frac));
        // Named armed pages, unless either side overflowed its set (the journal-kept side
        // names them again only once fewer than half remain).
        if !s.armed.overflowed && !fresh.armed.overflowed {
            let mut a: Vec<_> = s.armed.pages.clone();
            let mut b: Vec<_> = fresh.armed.pages.clone();
            a.sort_unstable();
            b.sort_unstable();
            assert_eq!(a, b, "armed pages and their lines");
        }
        if s.armed_frac > 0.0 {
            let mut rng = numalab_core::rng::stream(9, "segshares-recount", 0);
            let page = shares.draw_armed(i, &mut rng, mem.home(), shift);
            assert!(matches!(class(mem.home()[page as usize]), Some((_, true))), "drew page {page}, not armed");
        }
        if s.runs_ok {
            assert_eq!((&s.run_ends, &s.run_nodes), (&fresh.run_ends, &fresh.run_nodes));
        }
        if !s.runs_stale {
            assert_eq!(s.runs_ok, fresh.runs_ok, "runs are kept exactly when a count keeps them");
        }
    }

    #[test]
    fn counts_lines_and_blocks_on_unplaced_pages() {
        // Pages of 4 lines; the segment covers lines 2..14: pages 0 (2 lines), 1, 2 (4 each),
        // 3 (2 lines).
        let mem = memory(&[Some(0), Some(1), Some(1), Some(0)]);
        let mut shares = SegShares::default();
        let i = shares.intern(Seg::contiguous(2, 12), 2);
        shares.want_runs(i);
        assert!(shares.ready(i, &mem, 2, 0.0, 1.0));
        assert_eq!(shares.share(i), [4.0 / 12.0, 8.0 / 12.0]);
        // Runs: positions 0..2 on node 0, 2..10 on node 1, 10..12 on node 0.
        assert_eq!(shares.runs(i), Some((&[2u64, 10, 12][..], &[0u8, 1, 0][..])));
        // A chunked segment: chunks of 3 lines every 8 lines from line 1 (lines 1-3, 9-11):
        // pages 0 and 2, then 2 again; runs merge across chunks on the same node.
        let mem = memory(&[Some(0), Some(1), Some(0), Some(1)]);
        let j = shares.intern(Seg { start: 1, chunk: 3, step: 8, chunks: 2 }, 2);
        shares.want_runs(j);
        assert!(shares.ready(j, &mem, 2, 0.0, 1.0));
        assert_eq!(shares.runs(j), Some((&[6u64][..], &[0u8][..])));
        let mem = memory(&[Some(0), Some(1), None, Some(0)]);
        let mut shares = SegShares::default();
        let i = shares.intern(Seg::contiguous(2, 12), 2);
        assert!(!shares.ready(i, &mem, 2, 0.0, 1.0), "an unplaced page blocks");
        assert!(!shares.ready(i, &mem, 2, 0.5, 1.0), "and the back-off waits an epoch before counting again");
    }

    #[test]
    fn armed_pages_are_counted_apart() {
        // Pages of 4 lines, lines 2..14 as above; page 1 (4 lines, node 1) armed.
        let mut mem = memory(&[Some(0), Some(1), Some(1), Some(0)]);
        mem.arm(1);
        let mut shares = SegShares::default();
        let i = shares.intern(Seg::contiguous(2, 12), 2);
        assert!(shares.ready(i, &mem, 2, 0.0, 1.0), "armed pages do not block");
        assert_eq!(shares.share(i), [4.0 / 12.0, 8.0 / 12.0]);
        assert_eq!(shares.unarmed(i), [4.0 / 12.0, 4.0 / 12.0]);
        assert_eq!(shares.armed_frac(i), 4.0 / 12.0);
        let mut rng = numalab_core::rng::stream(1, "segshares-test", 0);
        assert_eq!(shares.draw_armed(i, &mut rng, mem.home(), 2), 1);
        // The edge page 0 (2 of its 4 lines in the segment) armed too: drawn about a third
        // of the time.
        mem.arm(0);
        assert!(shares.ready(i, &mem, 2, 0.0, 1.0));
        assert_eq!(shares.armed_frac(i), 6.0 / 12.0);
        let zeros = (0..30_000).filter(|_| shares.draw_armed(i, &mut rng, mem.home(), 2) == 0).count();
        assert!((9_000..11_000).contains(&zeros), "page 0 drawn {zeros} times of 30000");
    }

    #[test]
    fn too_many_armed_pages_are_drawn_by_rejection_then_named_again() {
        // 20 pages of 4 lines; 12 armed: more than the test's set of 8 names.
        let mut mem = memory(&(0..20).map(|p| Some((p % 2) as NodeId)).collect::<Vec<_>>());
        let mut shares = SegShares::default();
        let i = shares.intern(Seg::contiguous(0, 80), 2);
        assert!(shares.ready(i, &mem, 2, 0.0, 1.0));
        for p in 0..12 {
            mem.arm(p);
        }
        assert!(shares.ready(i, &mem, 2, 0.0, 1.0));
        assert!(shares.segs[i].armed.overflowed);
        assert_eq!(shares.armed_frac(i), 0.6);
        let mut rng = numalab_core::rng::stream(1, "segshares-test", 2);
        let mut hits = [0u32; 20];
        for _ in 0..12_000 {
            hits[shares.draw_armed(i, &mut rng, mem.home(), 2) as usize] += 1;
        }
        assert!(hits[12..].iter().all(|&h| h == 0), "only armed pages: {hits:?}");
        assert!(hits[..12].iter().all(|&h| (800..1200).contains(&h)), "each armed page about equally: {hits:?}");
        // Down to 3 armed pages (fewer than half of 8): named again by the next epoch's count.
        for p in 3..12 {
            mem.disarm(p);
        }
        assert!(shares.ready(i, &mem, 2, 0.0, 1.0));
        assert!(shares.segs[i].armed.overflowed, "not in the epoch of the last count");
        assert!(shares.ready(i, &mem, 2, 1.0, 1.0));
        assert!(!shares.segs[i].armed.overflowed);
        assert_eq!(shares.segs[i].armed.pages.len(), 3);
    }

    #[test]
    fn mixtures_average_their_parts() {
        let mut mem = memory(&[Some(0), Some(0), Some(1), Some(1)]);
        mem.arm(3);
        let mut shares = SegShares::default();
        let a = shares.intern(Seg::contiguous(0, 8), 2);
        let b = shares.intern(Seg::contiguous(8, 8), 2);
        let m = shares.intern_mix(vec![a, b], 2);
        assert!(shares.ready(m, &mem, 2, 0.0, 1.0));
        assert_eq!(shares.share(m), [0.5, 0.5]);
        assert_eq!(shares.unarmed(m), [0.5, 0.25]);
        assert_eq!(shares.armed_frac(m), 0.25);
        let mut rng = numalab_core::rng::stream(1, "segshares-test", 1);
        assert_eq!(shares.draw_armed(m, &mut rng, mem.home(), 2), 3, "only part b has an armed page");
        // A change outside both parts leaves the mixture as it is; one inside moves it.
        let mut mem2 = Memory::new(6, vec![8, 8]);
        for p in 0..6 {
            mem2.place(p, if p < 2 { 0 } else { 1 });
        }
        mem2.arm(3);
        let mut shares = SegShares::default();
        let (a, b) = (shares.intern(Seg::contiguous(0, 8), 2), shares.intern(Seg::contiguous(8, 8), 2));
        let m = shares.intern_mix(vec![a, b], 2);
        assert!(shares.ready(m, &mem2, 2, 0.0, 1.0));
        mem2.arm(5);
        assert!(shares.ready(m, &mem2, 2, 0.0, 1.0));
        assert_eq!(shares.armed_frac(m), 0.25, "page 5 is in neither part");
        mem2.disarm(3);
        mem2.migrate(0, 1);
        assert!(shares.ready(m, &mem2, 2, 0.0, 1.0));
        assert_eq!((shares.armed_frac(m), shares.share(m)), (0.0, &[0.25, 0.75][..]));
    }

    #[test]
    fn lines_in_counts_a_page_of_a_chunked_segment() {
        let seg = Seg { start: 3, chunk: 2, step: 5, chunks: 4 }; // lines 3-4, 8-9, 13-14, 18-19
        let brute = |a: u64, b: u64| (0..seg.lines()).map(|k| seg.line_at(k)).filter(|l| (a..b).contains(l)).count() as u64;
        for a in 0..24 {
            for len in [1, 2, 4, 8, 16] {
                assert_eq!(lines_in(&seg, a, a + len), brute(a, a + len), "[{a}, {})", a + len);
            }
        }
    }

    #[derive(Clone, Debug)]
    enum Op {
        Place(u64, NodeId),
        Arm(u64),
        Disarm(u64),
        Migrate(u64, NodeId),
        Replicate(u64, NodeId),
        Collapse(u64, NodeId),
        Release(u64),
    }

    proptest::proptest! {
        /// Counts followed through the journal equal a full count after every change, on
        /// contiguous and chunked segments, and a journal that was outrun falls back to a
        /// full count.
        #[test]
        fn journal_updates_equal_a_recount(
            ops in proptest::collection::vec((0u8..7, 0u64..12, 0 as NodeId..3), 1..60),
            seg in (0u64..20, 1u64..9, 0u64..4, 1u64..5),
        ) {
            let shift = 2;
            let seg = Seg { start: seg.0, chunk: seg.1, step: seg.1 + seg.2, chunks: seg.3 };
            let mut mem = Memory::new(16, vec![64; 3]);
            let mut shares = SegShares::default();
            let i = shares.intern(seg, 3);
            shares.want_runs(i);
            shares.ready(i, &mem, shift, 0.0, 1.0);
            for (epoch, (op, page, node)) in ops.into_iter().enumerate() {
                let op = match op {
                    0 => Op::Place(page, node),
                    1 => Op::Arm(page),
                    2 => Op::Disarm(page),
                    3 => Op::Migrate(page, node),
                    4 => Op::Replicate(page, node),
                    5 => Op::Collapse(page, node),
                    _ => Op::Release(page),
                };
                let h = mem.home()[page as usize];
                match op {
                    Op::Place(p, n) if h == UNPLACED => mem.place(p, n),
                    Op::Arm(p) if h & NODE_MASK != UNPLACED => mem.arm(p),
                    Op::Disarm(p) => mem.disarm(p),
                    Op::Migrate(p, n) => { mem.migrate(p, n); }
                    Op::Replicate(p, n) => { mem.replicate(p, n); }
                    Op::Collapse(p, n) => { mem.collapse(p, n); }
                    Op::Release(p) => { mem.release(p); }
                    _ => {}
                }
                // A new epoch each time, so a stale runs list is remade.
                shares.ready(i, &mem, shift, epoch as f64 + 1.0, 1.0);
                assert_same_as_recount(&shares, i, &mem, shift);
            }
        }
    }

    proptest::proptest! {
        /// Several segments over the same pages, each needed only now and then: those the
        /// journal's buckets keep up to date, those that went idle and catch up by themselves
        /// (also when they went idle in the middle of a run of changes), and those listed again
        /// after that, all equal a full count whenever they are needed.
        #[test]
        fn segments_needed_now_and_then_equal_a_recount(
            ops in proptest::collection::vec((0u8..5, 0u64..12, 0 as NodeId..3), 1..80),
            segs in proptest::collection::vec((0u64..20, 1u64..9, 0u64..4, 1u64..5), 1..5),
            needed in proptest::collection::vec(0u8..16, 80),
        ) {
            let shift = 2;
            let mut mem = Memory::new(16, vec![64; 3]);
            let mut shares = SegShares::default();
            let ids: Vec<usize> = segs
                .iter()
                .map(|&(start, chunk, gap, chunks)| shares.intern(Seg { start, chunk, step: chunk + gap, chunks }, 3))
                .collect();
            for (k, &i) in ids.iter().enumerate() {
                if k % 2 == 0 {
                    shares.want_runs(i);
                }
                shares.ready(i, &mem, shift, 0.0, 1.0);
            }
            for (epoch, (op, page, node)) in ops.into_iter().enumerate() {
                let h = mem.home()[page as usize];
                match op {
                    0 if h == UNPLACED => mem.place(page, node),
                    1 if h & NODE_MASK != UNPLACED => mem.arm(page),
                    2 => mem.disarm(page),
                    3 => { mem.migrate(page, node); }
                    4 => { mem.release(page); }
                    _ => {}
                }
                for (k, &i) in ids.iter().enumerate() {
                    if needed[epoch] & (1 << k) != 0 {
                        shares.ready(i, &mem, shift, epoch as f64 + 1.0, 1.0);
                        assert_same_as_recount(&shares, i, &mem, shift);
                    }
                }
            }
        }
    }

    #[test]
    fn runs_are_dropped_past_the_limit() {
        // Pages of one line alternating nodes: one run per page.
        let pages = 2 * MAX_RUNS;
        let mem = memory(&(0..pages).map(|p| Some((p % 2) as NodeId)).collect::<Vec<_>>());
        let mut shares = SegShares::default();
        let i = shares.intern(Seg::contiguous(0, MAX_RUNS as u64), 2);
        shares.want_runs(i);
        assert!(shares.ready(i, &mem, 0, 0.0, 1.0));
        assert_eq!(shares.runs(i).unwrap().1.len(), MAX_RUNS);
        let j = shares.intern(Seg::contiguous(0, MAX_RUNS as u64 + 1), 2);
        shares.want_runs(j);
        assert!(shares.ready(j, &mem, 0, 0.0, 1.0));
        assert_eq!(shares.runs(j), None);
        assert_eq!(shares.share(j), [0.5 + 0.5 / (MAX_RUNS as f64 + 1.0), 0.5 - 0.5 / (MAX_RUNS as f64 + 1.0)]);
    }
}
