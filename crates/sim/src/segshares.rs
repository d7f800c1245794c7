//! Per-segment node counts for the fast engine (docs/simulator.md, "The fast engine"): for
//! every segment a random, gather or strided entry ranges over, how many of its lines lie on
//! each node, how many of those are on pages armed for a hinting fault (and which pages), and
//! how many are on pages the fast engine cannot charge in bulk (unplaced, freed, replicated).
//! The counts follow the memory's journal of page-byte changes, so a migration or the scanner
//! arming pages costs a few updates instead of a count of every page of the segment; a full
//! count happens when a segment is first needed or the journal no longer reaches back to it.

use crate::memory::Memory;
use numalab_core::rng::StreamRng;
use numalab_workload::stream::Seg;
use numalab_workload::sweep::StrideCrossings;
use rand::Rng;
use segment::SegShare;
use std::cell::Ref;
use std::collections::BTreeMap;

mod armed;
mod journal;
mod mixture;
mod pages;
mod segment;
mod watch;

/// Longest wait, in epochs, before a full count of a segment that had blocked pages is tried
/// again.
const MAX_BACKOFF_EPOCHS: u32 = 64;

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
    /// The mixture that watches the segment (`watch::NO_WATCH`: none), the segment's position
    /// among its parts, and whether that mixture's last poll stands for a look at the segment
    /// (then its generation is at least the mixture's `stamp`; `watch::generation_of`).
    watch: u32,
    watch_pos: u32,
    stamped: bool,
}

/// A segment's fields as a key: start, chunk, step, chunks.
type SegKey = (u64, u64, u64, u64);

fn seg_key(seg: &Seg) -> SegKey {
    (seg.start, seg.chunk, seg.step, seg.chunks)
}

/// Slots of `SegShares::recent` (a power of two).
const RECENT_SLOTS: usize = 1024;

/// The slot of `SegShares::recent` a segment's key takes: a multiplicative hash of its
/// fields, top bits.
fn recent_slot((start, chunk, step, chunks): SegKey) -> usize {
    let h = start.wrapping_mul(0x9E37_79B9_7F4A_7C15)
        ^ chunk.wrapping_mul(0xC2B2_AE3D_27D4_EB4F)
        ^ step.rotate_left(17)
        ^ chunks.rotate_left(43);
    (h.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (64 - RECENT_SLOTS.trailing_zeros())) as usize
}

const NEVER_COUNTED: Quick =
    Quick { generation: u64::MAX, version: 0, settled: false, clean: false, watch: watch::NO_WATCH, watch_pos: 0, stamped: false };

/// The segments the fast engine charges by shares, shared by every thread (one count serves
/// all the threads of a shared region). Looked up by key, never iterated: order cannot leak.
#[derive(Default)]
pub(crate) struct SegShares {
    index: BTreeMap<SegKey, usize>,
    /// The latest segment interned at each slot of a small table (a hash of its key picks
    /// the slot): after a repartition every thread interns the same new blocks, about 80
    /// each on server-b-8n, and the ordered map's lookups were 3 % of ua-like's
    /// instructions. A slot answers only for the key it holds; a sweep empties the table.
    recent: Vec<Option<(SegKey, usize)>>,
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
    /// Indices of segments a sweep dropped (`sweep`), taken again by the next ones interned.
    free: Vec<usize>,
    /// Segments kept by the last sweep: the next one is due when the table holds twice as
    /// many (at least `MIN_SWEEP_SEGMENTS`), so sweeping costs a constant share of interning.
    kept: usize,
    /// The last plain mixtures interned (with their parts sorted): the bases a new mixture
    /// that differs from one of them by a few parts is kept as (`mixture::MixBase`).
    bases: Vec<(usize, Vec<usize>)>,
    /// Scratch of a mixture kept on a base: its new sums (`mixture`).
    mix_scratch: Vec<u64>,
    /// Tests compare watched mixtures with mixtures that poll every part (`watch`).
    #[cfg(test)]
    no_watch: bool,
}

/// No sweep before the table holds this many segments and mixtures: a run whose steps keep
/// ranging over the same blocks never sweeps.
const MIN_SWEEP_SEGMENTS: usize = if cfg!(test) { 4 } else { 4096 };

impl SegShares {
    pub fn intern(&mut self, seg: Seg, n: usize) -> usize {
        let key = seg_key(&seg);
        if self.recent.is_empty() {
            self.recent.resize(RECENT_SLOTS, None);
        }
        let slot = recent_slot(key);
        if let Some((held, i)) = self.recent[slot] {
            if held == key {
                return i;
            }
        }
        let i = match self.index.get(&key) {
            Some(&i) => i,
            None => {
                let i = self.place(SegShare::new(seg, None, n));
                self.index.insert(key, i);
                i
            }
        };
        self.recent[slot] = Some((key, i));
        i
    }

    /// An even mixture of interned segments.
    pub fn intern_mix(&mut self, parts: Vec<usize>, n: usize) -> usize {
        // Looked up first: steps intern their mixtures every time they start.
        if let Some(&i) = self.mixes.get(&parts) {
            return i;
        }
        let i = self.new_mix(parts.clone(), n);
        self.mixes.insert(parts, i);
        i
    }

    /// A new segment, never counted, at a dropped segment's index if there is one. Its
    /// listing continues the dropped one's, so no entry of the buckets can name it by mistake.
    fn place(&mut self, mut seg: SegShare) -> usize {
        match self.free.pop() {
            Some(i) => {
                seg.listing = self.segs[i].listing.wrapping_add(1);
                self.segs[i] = seg;
                self.quick[i] = NEVER_COUNTED;
                i
            }
            None => {
                self.segs.push(seg);
                self.quick.push(NEVER_COUNTED);
                self.segs.len() - 1
            }
        }
    }

    /// Slots of the table: every segment and mixture it holds or a sweep freed for reuse.
    pub fn slots(&self) -> usize {
        self.segs.len()
    }

    /// Whether the table has grown enough since the last sweep for the next one.
    pub fn sweep_due(&self) -> bool {
        self.segs.len() - self.free.len() >= 2 * self.kept.max(MIN_SWEEP_SEGMENTS / 2)
    }

    /// Drop every segment and mixture but those of `live` (and the parts of live mixtures):
    /// a workload that repartitions its regions ranges over new blocks at every step, and
    /// the table would otherwise grow with the run (ua-like: about 16 new blocks and 16 new
    /// mixtures of about 80 parts per iteration; docs/simulator.md, "The fast engine"). The
    /// caller must hold no other index: a dropped index is given to the next segment
    /// interned. A segment interned again later is counted afresh, to the same counts.
    pub fn sweep(&mut self, live: impl IntoIterator<Item = usize>) {
        let mut keep = vec![false; self.segs.len()];
        for i in live {
            self.keep_with_parts(i, &mut keep);
            // A mixture kept as its base plus and minus a few parts keeps the base too.
            if let Some(base) = &self.segs[i].base {
                self.keep_with_parts(base.of, &mut keep);
            }
        }
        self.bases.retain(|(b, _)| keep[*b]);
        let dropped: Vec<bool> = {
            let mut d = vec![false; self.segs.len()];
            self.free.iter().for_each(|&i| d[i] = true);
            d
        };
        // Dropped mixtures stop watching their parts first (kept parts keep what the stamp
        // gave them).
        for i in 0..self.segs.len() {
            if !keep[i] && !dropped[i] {
                self.unwatch_parts(i);
            }
        }
        for i in 0..self.segs.len() {
            if keep[i] || dropped[i] {
                continue;
            }
            let s = &self.segs[i];
            match &s.parts {
                Some(parts) => {
                    self.mixes.remove(parts);
                }
                None => {
                    self.index.remove(&seg_key(&s.seg));
                }
            }
            let mut gone = SegShare::new(Seg::contiguous(0, 0), None, 0);
            gone.listing = s.listing.wrapping_add(1);
            self.segs[i] = gone;
            self.quick[i] = NEVER_COUNTED;
            self.free.push(i);
        }
        // Entries of dropped (and of earlier unlisted) segments leave the buckets now.
        let segs = &self.segs;
        for list in self.buckets.iter_mut().chain(std::iter::once(&mut self.wide)) {
            list.retain(|&(i, listing)| segs[i as usize].listing == listing);
        }
        self.kept = keep.iter().filter(|&&k| k).count();
        // A dropped segment's index goes to the next one interned: no slot may name it.
        self.recent.iter_mut().for_each(|r| *r = None);
    }

    fn keep_with_parts(&self, i: usize, keep: &mut [bool]) {
        keep[i] = true;
        if let Some(parts) = &self.segs[i].parts {
            parts.iter().for_each(|&p| keep[p] = true);
        }
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
        let q = &self.quick[i];
        if q.clean && watch::generation_of(&self.segs, q) >= mem.journal_from() {
            let q = &mut self.quick[i];
            q.generation = mem.generation();
            return q.settled;
        }
        let settled = self.ready_in_full(i, mem, shift, epoch_start, epoch_ns);
        let s = &self.segs[i];
        let q = &mut self.quick[i];
        q.version = s.version;
        q.settled = s.settled;
        q.clean = s.synced && !s.dirty && !s.runs_stale && !s.rename_armed && s.parts.is_none();
        if !q.clean {
            watch::note_moved(&mut self.segs, &mut self.quick, i);
        }
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
        if self.segs[i].parts.is_some() {
            return self.ready_mix(i, mem, shift, epoch_start, epoch_ns);
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
mod tests;
