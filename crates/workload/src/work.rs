//! A thread's work in one step of a compiled program: its entries' cursors over the blocks
//! of the regions' geometry, and the blocks its owner entries escape to (docs/workloads.md,
//! "Generator semantics").

use crate::compile::split_even;
use crate::escapes::{EscapeKey, EscapeLists};
use crate::program::{Program, ThreadWork};
use crate::schema::*;
use crate::stream::{AccessKind, Cursor, Entry, Escape, Seg};
use rand::Rng;

/// Geometry of a laid-out region, in lines.
#[derive(Clone, Debug)]
pub(crate) struct Geo {
    pub(crate) first_line: u64,
    pub(crate) pages: u64,
    pub(crate) lpp: u64,
    pub(crate) partition: Partition,
    pub(crate) plane_lines: u64,
}

impl Geo {
    pub(crate) fn lines(&self) -> u64 {
        self.pages * self.lpp
    }
    pub(crate) fn whole(&self) -> Seg {
        Seg::contiguous(self.first_line, self.lines())
    }
    /// Page range [lo, hi) of thread b's block (block partition, before repartition):
    /// the pages p with floor(p*T/P) = b.
    pub(crate) fn block_pages(&self, b: u32, threads: u32) -> (u64, u64) {
        // In 64 bits when the products fit (any real region): a 128-bit division is a
        // library call, and escape lists make two per block.
        let edge = |b: u64| match b.checked_mul(self.pages) {
            Some(product) => product.div_ceil(u64::from(threads)),
            None => (u128::from(b) * u128::from(self.pages)).div_ceil(u128::from(threads)) as u64,
        };
        (edge(u64::from(b)), edge(u64::from(b) + 1))
    }
    /// Segments of thread b's block; `off` is the repartition offset (block partitions only).
    pub(crate) fn block_segs(&self, b: u32, threads: u32, off: u64) -> Vec<Seg> {
        let mut segs = Vec::new();
        self.push_block_segs(b, threads, off, &mut segs);
        segs
    }

    /// `block_segs` appended to `out`: an escape list of every other thread's block is one
    /// allocation rather than one per block (79 per list on 80 threads, made again at every
    /// repartition).
    pub(crate) fn push_block_segs(&self, b: u32, threads: u32, off: u64, out: &mut Vec<Seg>) {
        match self.partition {
            Partition::Cyclic => {
                let count = (self.pages + threads as u64 - 1 - b as u64) / threads as u64;
                if count > 0 {
                    out.push(Seg {
                        start: self.first_line + b as u64 * self.lpp,
                        chunk: self.lpp,
                        step: threads as u64 * self.lpp,
                        chunks: count,
                    });
                }
            }
            _ => {
                let (lo, hi) = self.block_pages(b, threads);
                if hi == lo {
                    return;
                }
                // Pages q with (q + off) mod P in [lo, hi): the range shifted back by off.
                let p = self.pages;
                let start = (lo + p - off % p) % p;
                let len = hi - lo;
                if start + len <= p {
                    out.push(Seg::contiguous(self.first_line + start * self.lpp, len * self.lpp));
                } else {
                    let first = p - start;
                    out.push(Seg::contiguous(self.first_line + start * self.lpp, first * self.lpp));
                    out.push(Seg::contiguous(self.first_line, (len - first) * self.lpp));
                }
            }
        }
    }
}

impl Program {
    /// The work of thread `t` (numbered inside this single program) in step `s`.
    /// Escape lists come from `lists` when it holds them (`member` names this program in
    /// its mix, for the memo's key).
    pub(crate) fn work_single<R: Rng + ?Sized>(&self, s: usize, t: u32, rng: &mut R, member: usize, lists: &mut EscapeLists) -> ThreadWork {
        let step = &self.steps[s];
        let Some(pi) = step.phase else {
            let segs = &self.init[t as usize];
            if segs.is_empty() {
                return ThreadWork::default();
            }
            let refs = segs.iter().map(|g| g.lines()).sum();
            let e = Entry::new(Cursor::Walk { segs: segs.clone(), seg: 0, pos: 0 }, refs, 1.0, AccessKind::Stream, None);
            return ThreadWork { entries: vec![e], epilogue: vec![], compute: None };
        };
        let ph = &self.phases[pi];
        if let Some(sy) = &ph.synth {
            return sy.work(self.internals.synth_k[s].unwrap_or(0), t, ph.compute);
        }
        let tt = self.threads;
        let mut work = ThreadWork { entries: Vec::new(), epilogue: Vec::new(), compute: ph.compute };
        for ce in &ph.entries {
            let solo = !ph.parallel || ce.who == Who::Master;
            if solo && t != 0 {
                continue;
            }
            let refs = if solo { ce.refs } else { split_even(ce.refs, tt as u64, t as u64) };
            let g = &self.internals.geos[ce.region];
            let off = self.internals.offsets.get(s).map_or(0, |o| o[ce.region]);
            // A thread whose block is empty (fewer pages than threads) works on the page at t/T
            // of the region, so no reference is lost.
            let own = || {
                let v = g.block_segs(t, tt, off);
                if v.is_empty() {
                    let page = (t as u128 * g.pages as u128 / tt as u128) as u64;
                    vec![Seg::contiguous(g.first_line + page * g.lpp, g.lpp)]
                } else {
                    v
                }
            };
            let from_block_start = |rng: &mut R| -> Vec<Seg> {
                // `all` streams start at the start of block t (t/T of an unpartitioned region),
                // `any` at a random line; both wrap over the whole region.
                let lines = g.lines();
                let start = match ce.who {
                    Who::Any => rng.random_range(0..lines),
                    Who::Master => 0,
                    _ if g.partition == Partition::None => (t as u128 * lines as u128 / tt as u128) as u64,
                    _ => g.block_segs(t, tt, off).first().map_or(0, |s| s.start - g.first_line),
                };
                let mut v = vec![Seg::contiguous(g.first_line + start, lines - start)];
                if start > 0 {
                    v.push(Seg::contiguous(g.first_line, start));
                }
                v
            };
            let target: Vec<Seg> = match ce.who {
                Who::Owner => own(),
                Who::Neighbours => Vec::new(),
                _ => from_block_start(rng),
            };
            if refs == 0 {
                continue;
            }
            let walk = |segs: Vec<Seg>| Cursor::Walk { segs, seg: 0, pos: 0 };
            let random = |segs: &[Seg]| -> Cursor {
                // A block that wraps (repartition) is two segments: draw over the region.
                if segs.len() == 1 {
                    Cursor::Random { seg: segs[0] }
                } else {
                    Cursor::Random { seg: g.whole() }
                }
            };
            let (cursor, kind) = match ce.pattern {
                Pattern::Seq => {
                    if ce.who == Who::Neighbours {
                        (neighbours(g, t, tt, off, walk), AccessKind::Stream)
                    } else {
                        (walk(target.clone()), AccessKind::Stream)
                    }
                }
                Pattern::Strided { stride_bytes } => {
                    let stride = (stride_bytes / self.access_bytes).max(1);
                    let seg = if ce.who == Who::Owner && target.len() == 1 { target[0] } else { g.whole() };
                    let pos = if ce.who == Who::Owner { 0 } else { target[0].start - g.first_line };
                    (Cursor::Strided { seg, pos: pos % seg.lines(), start: pos % stride.min(seg.lines()), stride }, AccessKind::Stream)
                }
                Pattern::Random | Pattern::Gather | Pattern::Chase => {
                    let kind = if ce.pattern == Pattern::Chase { AccessKind::Dependent } else { AccessKind::Random };
                    let c = if ce.who == Who::Neighbours { neighbours(g, t, tt, off, |s: Vec<Seg>| random(&s)) } else { random(&target) };
                    (c, kind)
                }
                Pattern::Stencil { halo_planes } => {
                    let halo = (halo_planes * g.plane_lines).max(1);
                    let mut segs = Vec::new();
                    if t > 0 {
                        if let Some(prev) = g.block_segs(t - 1, tt, off).last() {
                            let h = halo.min(prev.lines());
                            segs.push(Seg::contiguous(prev.start + prev.lines() - h, h));
                        }
                    }
                    if t + 1 < tt {
                        if let Some(next) = g.block_segs(t + 1, tt, off).first() {
                            segs.push(Seg::contiguous(next.start, halo.min(next.lines())));
                        }
                    }
                    segs.extend(own());
                    (walk(segs), AccessKind::Stream)
                }
                Pattern::Transpose => {
                    let mut segs = Vec::new();
                    for k in 1..=tt {
                        let b = (t + k) % tt;
                        for blk in g.block_segs(b, tt, off) {
                            let n = blk.lines();
                            let lo = (t as u128 * n as u128 / tt as u128) as u64;
                            let hi = ((t as u128 + 1) * n as u128 / tt as u128) as u64;
                            if hi > lo {
                                segs.push(Seg::contiguous(blk.start + lo, hi - lo));
                            }
                        }
                    }
                    if segs.is_empty() {
                        segs = own();
                    }
                    (walk(segs), AccessKind::Stream)
                }
                Pattern::Reduction => {
                    let line = g.first_line + t as u64 % g.lines();
                    if t == 0 && self.steps[s].barrier_after {
                        // At the closing barrier thread 0 reads every line once (extra volume).
                        work.epilogue.push(Entry::new(walk(vec![g.whole()]), g.lines(), 0.0, AccessKind::Stream, None));
                    }
                    (Cursor::Fixed { line }, AccessKind::Stream)
                }
                Pattern::Runs => unreachable!("rejected at compile time"),
            };
            if matches!(&cursor, Cursor::Walk { segs, .. } if segs.is_empty()) {
                continue;
            }
            let escape = (ce.who == Who::Owner && ce.owner_share < 1.0 && tt > 1).then(|| {
                let key = EscapeKey { member, region: ce.region, offset_pages: off, thread: t, threads: tt };
                Escape {
                    threshold: ((1.0 - ce.owner_share) * 18_446_744_073_709_551_616.0).min(u64::MAX as f64) as u64,
                    others: lists.get(key, || {
                        let mut others = Vec::with_capacity(2 * tt as usize);
                        (0..tt).filter(|&b| b != t).for_each(|b| g.push_block_segs(b, tt, off, &mut others));
                        others
                    }),
                }
            });
            let escape = escape.filter(|e| !e.others.is_empty());
            work.entries.push(Entry::new(cursor, refs, ce.write_frac, kind, escape));
        }
        work
    }
}

fn neighbours(g: &Geo, t: u32, tt: u32, off: u64, make: impl Fn(Vec<Seg>) -> Cursor) -> Cursor {
    let prev = if t > 0 { g.block_segs(t - 1, tt, off) } else { vec![] };
    let next = if t + 1 < tt { g.block_segs(t + 1, tt, off) } else { vec![] };
    match (prev.is_empty(), next.is_empty()) {
        (false, false) => Cursor::Alternate { a: Box::new(make(prev)), b: Box::new(make(next)), next_b: false },
        (false, true) => make(prev),
        (true, false) => make(next),
        // A single thread has no neighbours: it works on its own block.
        (true, true) => make(g.block_segs(t, tt, off)),
    }
}
