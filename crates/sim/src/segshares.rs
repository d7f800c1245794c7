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
mod pages;
mod segment;

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
    /// Indices of segments a sweep dropped (`sweep`), taken again by the next ones interned.
    free: Vec<usize>,
    /// Segments kept by the last sweep: the next one is due when the table holds twice as
    /// many (at least `MIN_SWEEP_SEGMENTS`), so sweeping costs a constant share of interning.
    kept: usize,
}

/// No sweep before the table holds this many segments and mixtures: a run whose steps keep
/// ranging over the same blocks never sweeps.
const MIN_SWEEP_SEGMENTS: usize = if cfg!(test) { 4 } else { 4096 };

impl SegShares {
    pub fn intern(&mut self, seg: Seg, n: usize) -> usize {
        let key = (seg.start, seg.chunk, seg.step, seg.chunks);
        if let Some(&i) = self.index.get(&key) {
            return i;
        }
        let i = self.place(SegShare::new(seg, None, n));
        self.index.insert(key, i);
        i
    }

    /// An even mixture of interned segments.
    pub fn intern_mix(&mut self, parts: Vec<usize>, n: usize) -> usize {
        // Looked up first: steps intern their mixtures every time they start.
        if let Some(&i) = self.mixes.get(&parts) {
            return i;
        }
        let i = self.place(SegShare::new(Seg::contiguous(0, 0), Some(parts.clone()), n));
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
            keep[i] = true;
            if let Some(parts) = &self.segs[i].parts {
                parts.iter().for_each(|&p| keep[p] = true);
            }
        }
        let dropped: Vec<bool> = {
            let mut d = vec![false; self.segs.len()];
            self.free.iter().for_each(|&i| d[i] = true);
            d
        };
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
                    self.index.remove(&(s.seg.start, s.seg.chunk, s.seg.step, s.seg.chunks));
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
    use super::pages::class;
    use super::segment::MAX_RUNS;
    use super::*;
    use crate::memory::{NODE_MASK, UNPLACED};
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
    fn a_sweep_drops_what_no_thread_holds_and_its_index_goes_to_the_next_segment() {
        // Pages of 4 lines on nodes 0, 1, 0, 1, ...; blocks a, b, c of two pages each, and two
        // mixtures, of which only `m` is still held.
        let mut mem = memory(&(0..8).map(|p| Some((p % 2) as NodeId)).collect::<Vec<_>>());
        let mut shares = SegShares::default();
        let (a, b, c) =
            (shares.intern(Seg::contiguous(0, 8), 2), shares.intern(Seg::contiguous(8, 8), 2), shares.intern(Seg::contiguous(16, 8), 2));
        let m = shares.intern_mix(vec![a, b], 2);
        let old = shares.intern_mix(vec![b, c], 2);
        for i in [a, b, c, m, old] {
            assert!(shares.ready(i, &mem, 2, 0.0, 1.0));
        }
        assert!(shares.sweep_due(), "5 segments, at least twice the minimum kept");
        shares.sweep([m]);
        assert!(!shares.sweep_due(), "3 kept: the next sweep waits for 6");
        // The mixture held and its parts keep their indices; c and the other mixture left
        // the table and the buckets.
        assert_eq!((shares.intern(Seg::contiguous(0, 8), 2), shares.intern(Seg::contiguous(8, 8), 2)), (a, b));
        assert_eq!(shares.intern_mix(vec![a, b], 2), m);
        let mut freed = shares.free.clone();
        freed.sort_unstable();
        assert_eq!(freed, vec![c.min(old), c.max(old)]);
        assert!(shares.buckets.iter().chain([&shares.wide]).flatten().all(|&(i, _)| ![c, old].contains(&(i as usize))));
        // A page of c moves while it is out of the table; a new block takes a dropped index,
        // and c interned again counts afresh, to the counts of a full count.
        assert!(mem.migrate(4, 1));
        let d = shares.intern(Seg::contiguous(24, 8), 2);
        assert!([c, old].contains(&d));
        let c2 = shares.intern(Seg::contiguous(16, 8), 2);
        assert!([c, old].contains(&c2) && c2 != d);
        for i in [a, m, c2, d] {
            assert!(shares.ready(i, &mem, 2, 0.0, 1.0));
        }
        assert_eq!(shares.share(c2), [0.0, 1.0]);
        for i in [a, b, c2, d] {
            assert_same_as_recount(&shares, i, &mem, 2);
        }
        // The mixture held through the sweep follows its parts as before.
        assert!(mem.migrate(0, 1));
        assert!(shares.ready(m, &mem, 2, 0.0, 1.0));
        assert_eq!(shares.share(m), [0.25, 0.75]);
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
