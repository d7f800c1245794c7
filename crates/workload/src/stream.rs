//! Access streams: the per-thread generators the simulator's hot loop pulls lines from.
//!
//! Lines are numbered in the address space (`line = address / access_bytes`); the page of a
//! line is `line >> log2(lines_per_page)`. Nothing here allocates or hashes per access.

use rand::Rng;

mod stride_passes;
mod swrr;

pub use stride_passes::StridePasses;
#[cfg(test)]
use stride_passes::{WRITE_TABLE_AFTER_PASSES, WRITE_TABLE_DENSE_ENTRIES};
pub use swrr::Swrr;

/// A set of lines: `chunks` chunks of `chunk` consecutive lines, chunk `i` starting at
/// `start + i * step`. A block partition is one chunk; a cyclic one is one chunk per page.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Seg {
    pub start: u64,
    pub chunk: u64,
    pub step: u64,
    pub chunks: u64,
}

impl Seg {
    pub fn contiguous(start: u64, lines: u64) -> Seg {
        Seg { start, chunk: lines, step: lines, chunks: 1 }
    }
    #[inline]
    pub fn lines(&self) -> u64 {
        self.chunk * self.chunks
    }
    #[inline]
    pub fn line_at(&self, i: u64) -> u64 {
        if self.chunks == 1 {
            self.start + i
        } else {
            self.start + (i / self.chunk) * self.step + i % self.chunk
        }
    }
}

/// How a stream's latency overlaps (memory-level parallelism class).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AccessKind {
    /// Sequential-like: hardware prefetch keeps many misses in flight.
    Stream = 0,
    /// Independent random misses: limited by the core's miss buffers.
    Random = 1,
    /// Each reference waits for the previous one (pointer chase, binary search).
    Dependent = 2,
}

/// Generator of line numbers.
#[derive(Clone, Debug, PartialEq)]
pub enum Cursor {
    /// Walk the segments in order, wrapping (seq, stencil with its halos, transpose).
    Walk { segs: Vec<Seg>, seg: usize, pos: u64 },
    /// Fixed stride inside a segment; past the end restart one line after the previous start.
    Strided { seg: Seg, pos: u64, start: u64, stride: u64 },
    /// A uniformly random line of the segment.
    Random { seg: Seg },
    /// Alternate between two cursors (the `neighbours` blocks).
    Alternate { a: Box<Cursor>, b: Box<Cursor>, next_b: bool },
    /// The same line every time (a reduction slot).
    Fixed { line: u64 },
    /// Explicit runs: `(line, length, writes)`, writes spread by the floor rule inside a run.
    Runs { runs: Vec<(u64, u32, u32)>, idx: usize, pos: u32 },
}

impl Seg {
    fn shift(&mut self, delta: u64) {
        self.start += delta;
    }
}

impl Cursor {
    /// Move every line this cursor can produce by `delta` (placing a process's address space
    /// inside a mix).
    pub fn shift_lines(&mut self, delta: u64) {
        match self {
            Cursor::Walk { segs, .. } => segs.iter_mut().for_each(|s| s.shift(delta)),
            Cursor::Strided { seg, .. } | Cursor::Random { seg } => seg.shift(delta),
            Cursor::Alternate { a, b, .. } => {
                a.shift_lines(delta);
                b.shift_lines(delta);
            }
            Cursor::Fixed { line } => *line += delta,
            Cursor::Runs { runs, .. } => runs.iter_mut().for_each(|r| r.0 += delta),
        }
    }

    /// `next_line` for cursors nested in `Alternate`: out of line, so that `next_line` itself
    /// is not recursive and can be inlined into the simulator's hot loop.
    #[inline(never)]
    fn next_line_nested<R: Rng + ?Sized>(&mut self, rng: &mut R) -> (u64, Option<bool>) {
        self.next_line(rng)
    }

    /// Next line; for `Runs` also whether this reference is a write.
    #[inline(always)]
    pub fn next_line<R: Rng + ?Sized>(&mut self, rng: &mut R) -> (u64, Option<bool>) {
        match self {
            Cursor::Walk { segs, seg, pos } => {
                let s = &segs[*seg];
                let line = s.line_at(*pos);
                *pos += 1;
                if *pos == s.lines() {
                    *pos = 0;
                    *seg += 1;
                    if *seg == segs.len() {
                        *seg = 0;
                    }
                }
                (line, None)
            }
            Cursor::Strided { seg, pos, start, stride } => {
                let line = seg.line_at(*pos);
                *pos += *stride;
                if *pos >= seg.lines() {
                    *start = (*start + 1) % (*stride).min(seg.lines()).max(1);
                    *pos = *start;
                }
                (line, None)
            }
            Cursor::Random { seg } => (seg.line_at(rng.random_range(0..seg.lines())), None),
            Cursor::Alternate { a, b, next_b } => {
                let r = if *next_b { b.next_line_nested(rng) } else { a.next_line_nested(rng) };
                *next_b = !*next_b;
                r
            }
            Cursor::Fixed { line } => (*line, None),
            Cursor::Runs { runs, idx, pos } => {
                let (line, len, writes) = runs[*idx];
                let i = *pos as u64;
                let (x, l) = (writes as u64, len as u64);
                let write = (i + 1) * x / l > i * x / l;
                *pos += 1;
                if *pos == len {
                    *pos = 0;
                    *idx = (*idx + 1) % runs.len();
                }
                (line, Some(write))
            }
        }
    }
}

/// What a thread does between two references.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Compute {
    None,
    /// Floating-point operations per reference (converted to time by the core model).
    Flops(f64),
    /// A constant wait, nanoseconds.
    GapConst(f64),
    /// An exponential wait with this mean, nanoseconds.
    GapExp(f64),
}

/// One access entry of one thread in one step.
#[derive(Clone, Debug, PartialEq)]
pub struct Entry {
    pub cursor: Cursor,
    /// References to issue in this step.
    pub refs: u64,
    /// `1 - read_frac`: reference `i` is a write when `floor((i+1)w) > floor(i w)`.
    pub write_frac: f64,
    pub kind: AccessKind,
    /// With probability `1 - owner_share`, go to a random line of another thread's block.
    pub escape: Option<Escape>,
    /// References issued so far.
    pub issued: u64,
    /// `write_frac` in 32-bit fixed point, for the per-reference write rule.
    write_fp: u64,
}

/// Owner-share escapes (docs/workloads.md: `who = "owner"` with `owner_share < 1`).
#[derive(Clone, Debug, PartialEq)]
pub struct Escape {
    /// Escape when a uniform u64 draw is below this.
    pub threshold: u64,
    /// The other threads' blocks, one or two segments each (shared between the steps and
    /// entries that escape to the same blocks: crate::escapes).
    pub others: std::sync::Arc<[Seg]>,
}

/// The floor rule with `w` in 32-bit fixed point: reference `i` writes when
/// `floor((i+1)·w) > floor(i·w)` (docs/workloads.md, "Generator semantics").
#[inline(always)]
pub(crate) fn is_write(i: u64, write_fp: u64) -> bool {
    // floor((i+1)w) > floor(iw) exactly when the fractional part of i·w plus w carries: only
    // i·w mod 2^32 matters, which wrapping arithmetic gives exactly.
    ((i.wrapping_mul(write_fp) & 0xFFFF_FFFF) + write_fp) >> 32 != 0
}

impl Entry {
    pub fn new(cursor: Cursor, refs: u64, write_frac: f64, kind: AccessKind, escape: Option<Escape>) -> Entry {
        let write_fp = (write_frac.clamp(0.0, 1.0) * 4_294_967_296.0).round() as u64;
        Entry { cursor, refs, write_frac, kind, escape, issued: 0, write_fp }
    }

    /// Writes among references `0..i`, `floor(i·w)`: those among `i..j` are
    /// `writes_before(j) - writes_before(i)`, what `take_run` counts.
    #[inline(always)]
    pub fn writes_before(&self, i: u64) -> u64 {
        ((i as u128 * self.write_fp as u128) >> 32) as u64
    }

    /// Is reference `i` a write? `floor((i+1)·w) > floor(i·w)` (docs/workloads.md, "Generator semantics"), with `w`
    /// in 32-bit fixed point: integer arithmetic, exact for w = 0, 1 and binary fractions.
    #[inline(always)]
    pub fn is_write(&self, i: u64) -> bool {
        is_write(i, self.write_fp)
    }

    /// Next reference: `(line, is_write)`.
    #[inline(always)]
    pub fn next<R: Rng + ?Sized>(&mut self, rng: &mut R) -> (u64, bool) {
        let i = self.issued;
        self.issued += 1;
        let (mut line, w) = self.cursor.next_line(rng);
        if let Some(e) = &self.escape {
            if rng.random::<u64>() < e.threshold {
                let s = &e.others[rng.random_range(0..e.others.len())];
                line = s.line_at(rng.random_range(0..s.lines()));
            }
        }
        let write = match w {
            Some(w) => w,
            None => self.is_write(i),
        };
        (line, write)
    }

    /// For a walk without owner escapes (seq, stencil, transpose, first touches): the next
    /// line and how many consecutive lines from it (at most `max`) stay inside one page of
    /// `lines_per_page` lines and one chunk. `None` for other cursors. Lets the simulator
    /// charge a run of references to one page at once; `take_run` consumes them.
    #[inline(always)]
    pub fn peek_run(&self, lines_per_page: u64, max: u64) -> Option<(u64, u64)> {
        if self.escape.is_some() {
            return None;
        }
        self.peek_run_any(lines_per_page, max)
    }

    /// `peek_run` for any walk, owner escapes or not: where the walk's own cursor is and how
    /// far it stays on one page (an escaping reference still advances the walk; the fast
    /// engine accounts for the escapes by their probability).
    #[inline(always)]
    pub fn peek_run_any(&self, lines_per_page: u64, max: u64) -> Option<(u64, u64)> {
        self.peek_run_and_chunk(lines_per_page, max).map(|(line, run, _)| (line, run))
    }

    /// `peek_run_any`, and how far the walk stays inside its chunk (at most `max`): what the
    /// page bound leaves out, for a caller that extends the run over pages.
    #[inline(always)]
    pub fn peek_run_and_chunk(&self, lines_per_page: u64, max: u64) -> Option<(u64, u64, u64)> {
        let Cursor::Walk { segs, seg, pos } = &self.cursor else { return None };
        let s = &segs[*seg];
        let (line, in_chunk) = if s.chunks == 1 {
            (s.start + *pos, s.chunk - *pos)
        } else {
            let (chunk, within) = (*pos / s.chunk, *pos % s.chunk);
            (s.start + chunk * s.step + within, s.chunk - within)
        };
        let in_page = lines_per_page - (line & (lines_per_page - 1));
        let in_chunk = in_chunk.min(max);
        Some((line, in_page.min(in_chunk), in_chunk))
    }

    /// For a walk without owner escapes: the line of its reference `offset` references after
    /// the next one, without moving the cursor; `None` for other cursors. The simulator
    /// samples the pages a walk will cover in a fast-forward window to forecast the window's
    /// access mix (docs/simulator.md, "Fast-forward").
    pub fn line_ahead(&self, offset: u64) -> Option<u64> {
        self.lines_ahead(std::iter::once(offset))?.next()
    }

    /// [`Entry::line_ahead`] at each of `offsets` in one pass over the walk's segments,
    /// which must not decrease; `None` for the cursors `line_ahead` does not know. The
    /// forecast of a fast-forward window samples 32 offsets of each entry (docs/simulator.md,
    /// "Fast-forward"): one call each summed the segments before the cursor again and walked
    /// from there, a twentieth of ua-like's run.
    pub fn lines_ahead<I: Iterator<Item = u64>>(&self, offsets: I) -> Option<LinesAhead<'_, I>> {
        if self.escape.is_some() {
            return None;
        }
        let Cursor::Walk { segs, seg, pos } = &self.cursor else { return None };
        let total: u64 = segs.iter().map(Seg::lines).sum();
        if total == 0 {
            return None;
        }
        let seg_start = segs[..*seg].iter().map(Seg::lines).sum::<u64>();
        // The search starts at the cursor's segment, which the first offset cannot lie
        // before: walking the segments before it again at every call cost 0.5 % of mg-like's
        // run once the forecast ran at every step.
        Some(LinesAhead { segs, total, base: seg_start + pos, seg: *seg, seg_start, offsets })
    }

    /// For a walk without owner escapes whose next `refs` references stay inside its current
    /// chunk: the line of the next one, so that [`Entry::lines_ahead`] at any offset below
    /// `refs` is that line plus the offset. `None` otherwise. The forecast of a step's access
    /// mix looks at the pages of such a span at once instead of sampling them
    /// (docs/simulator.md, "Contention", "The demand: the references ahead").
    pub fn contiguous_ahead(&self, refs: u64) -> Option<u64> {
        if self.escape.is_some() {
            return None;
        }
        let Cursor::Walk { segs, seg, pos } = &self.cursor else { return None };
        // A cursor on an empty segment has no next line there (`next` does not handle one).
        if *pos >= segs.get(*seg)?.lines() {
            return None;
        }
        let (line, _, in_chunk) = self.peek_run_and_chunk(1, u64::MAX)?;
        (refs <= in_chunk).then_some(line)
    }

    /// The line of the next reference when no draw decides it: a walk's, a stride's or a
    /// fixed entry's without owner escapes; `None` otherwise.
    pub fn next_line_known(&self) -> Option<u64> {
        if self.escape.is_some() {
            return None;
        }
        match &self.cursor {
            Cursor::Walk { segs, seg, pos } => Some(segs[*seg].line_at(*pos)),
            Cursor::Strided { seg, pos, .. } => Some(seg.line_at(*pos)),
            Cursor::Fixed { line } => Some(*line),
            _ => None,
        }
    }

    /// Consume `k` references of the run `peek_run` described (for a strided cursor: its next
    /// `k` references; random and fixed cursors have no position); returns how many are
    /// writes (the floor rule over indices `issued .. issued + k`).
    #[inline(always)]
    pub fn take_run(&mut self, k: u64) -> u64 {
        let i = self.issued;
        let writes = self.writes_before(i + k) - self.writes_before(i);
        self.issued += k;
        match &mut self.cursor {
            Cursor::Walk { segs, seg, pos } => {
                *pos += k;
                if *pos == segs[*seg].lines() {
                    *pos = 0;
                    *seg += 1;
                    if *seg == segs.len() {
                        *seg = 0;
                    }
                }
            }
            Cursor::Strided { seg, pos, start, stride } => {
                // k steps of `next_line`, a pass of the segment at a time.
                let (lines, stride) = (seg.lines(), *stride);
                let mut k = k;
                while k > 0 {
                    let in_pass = (lines - *pos).div_ceil(stride);
                    if k < in_pass {
                        *pos += k * stride;
                        break;
                    }
                    k -= in_pass;
                    *start = (*start + 1) % stride.min(lines).max(1);
                    *pos = *start;
                }
            }
            // Random and fixed cursors keep no position.
            _ => {}
        }
        writes
    }

    /// For a strided cursor without escapes: issue the next `k` references, passing each
    /// `(line, is_write)` to `visit`, exactly as `k` calls of `next` would produce them (a
    /// stride draws nothing). Returns false, consuming nothing, for any other entry.
    #[inline]
    pub fn take_strided(&mut self, k: u64, mut visit: impl FnMut(u64, bool)) -> bool {
        if self.escape.is_some() {
            return false;
        }
        let first = self.issued;
        let w = self.write_fp;
        let Cursor::Strided { seg, pos, start, stride } = &mut self.cursor else { return false };
        let lines = seg.lines();
        for i in first..first + k {
            visit(seg.line_at(*pos), is_write(i, w));
            *pos += *stride;
            if *pos >= lines {
                *start = (*start + 1) % (*stride).min(lines).max(1);
                *pos = *start;
            }
        }
        self.issued += k;
        true
    }

    /// `take_strided` counted by runs: `ends[r]` is the (exclusive) end, as a position in
    /// the segment, of run `r` of consecutive positions with label `labels[r]` (runs in
    /// order, the last ending at the segment's length). Adds to `counts[label]` and
    /// `writes[label]` what `k` calls of `next` would reference in each run. A pass from
    /// `start` references positions `start + q·stride`; how many of them lie before each
    /// run's end is a division per run, and stays the same for every start up to the next
    /// value congruent to a run's end modulo the stride, so `cache` keeps those numbers
    /// (valid for the runs `key` names: the caller changes the key when the runs change).
    /// A pass's references in one run have consecutive indices, so their writes are a
    /// difference of the floor rule. Returns false, consuming nothing, for any cursor but a
    /// strided one without escapes whose position lies on its pass.
    pub fn take_strided_by_runs(
        &mut self,
        k: u64,
        runs: (&[u64], &[u8]),
        key: u64,
        cache: &mut StridePasses,
        counts: &mut [u64],
        writes: &mut [u64],
    ) -> bool {
        if self.escape.is_some() {
            return false;
        }
        let (ends, labels) = runs;
        let w = self.write_fp as u128;
        let written_before = |i: u64| ((i as u128 * w) >> 32) as u64;
        let mut i = self.issued;
        let Cursor::Strided { seg, pos, start, stride } = &mut self.cursor else { return false };
        let (lines, stride) = (seg.lines(), *stride);
        if *pos < *start || (*pos - *start) % stride != 0 || ends.last() != Some(&lines) {
            return false;
        }
        // Starts run from 0 to `wrap - 1`: the start `passes` whole passes after `from`.
        let wrap = stride.min(lines).max(1);
        let start_after = |from: u64, passes: u64| if from + passes < wrap { from + passes } else { (from + passes) % wrap };
        let mut left = k;
        while left > 0 {
            // This pass's references are q = 0, 1, ... at start + q·stride; the cache holds,
            // for each run, how many of them lie before the run's end.
            let s = *start;
            if !(cache.key == key && cache.stride == stride && cache.lo <= s && s < cache.hi && cache.write_fp == self.write_fp) {
                cache.fill(runs, counts.len(), s, stride, key, self.write_fp);
            }
            let in_pass = *cache.upto.last().expect("at least one run");
            // A pass begun at its start (every pass after the first) needs no division.
            let q0 = if *pos == s { 0 } else { (*pos - s) / stride };
            let q1 = in_pass.min(q0 + left);
            // A whole pass at once when its writes need no run-by-run count (none, or the
            // write table is ready); otherwise run by run from the first run still to charge,
            // the same integers. (Searching for that run after a whole pass, where nothing is
            // left, was about 6 % of sp-like's instructions under autonuma on server-b-8n, 7
            // iterations: docs/benchmarks.md, stop 54.)
            if q0 == 0 && q1 == in_pass && (w == 0 || cache.write_table_ready(labels, counts.len())) {
                // The whole passes from this start and the next ones that the fill covers
                // (starts below `cache.hi`, and below the wrap to start 0), at once: each
                // puts the fill's per-label counts in, so `m` of them put `m` times those.
                let m = left.checked_div(in_pass).map_or(1, |passes| passes.min(cache.hi.min(wrap).saturating_sub(s)).max(1));
                counts.iter_mut().zip(&cache.per_label).for_each(|(c, &n)| *c += m * n);
                if w != 0 {
                    for p in 0..m {
                        cache.add_pass_writes(i + p * in_pass, writes);
                    }
                }
                i += m * in_pass;
                left -= m * in_pass;
                *start = start_after(s, m);
                *pos = *start;
                continue;
            } else {
                let upto = &cache.upto;
                let (mut q, mut r) = (q0, upto.partition_point(|&u| u <= q0));
                // Each run's end is the next run's start: one floor-rule product per run.
                let mut written = if w != 0 { written_before(i) } else { 0 };
                while q < q1 {
                    let here = upto[r].min(q1) - q;
                    let label = labels[r] as usize;
                    counts[label] += here;
                    if w != 0 {
                        let written_after = written_before(i + here);
                        writes[label] += written_after - written;
                        written = written_after;
                    }
                    i += here;
                    q += here;
                    r += 1;
                }
            }
            left -= q1 - q0;
            if q1 == in_pass {
                *start = start_after(s, 1);
                *pos = *start;
            } else {
                *pos = s + q1 * stride;
            }
        }
        self.issued += k;
        true
    }

    /// See [`Cursor::shift_lines`]; escapes move too.
    pub fn shift_lines(&mut self, delta: u64) {
        self.cursor.shift_lines(delta);
        if let Some(e) = &mut self.escape {
            if delta != 0 {
                e.others = e
                    .others
                    .iter()
                    .map(|s| {
                        let mut s = *s;
                        s.shift(delta);
                        s
                    })
                    .collect();
            }
        }
    }

    /// `write_frac` in 32-bit fixed point (the per-reference write rule's `w`).
    pub(crate) fn write_fp(&self) -> u64 {
        self.write_fp
    }

    pub fn remaining(&self) -> u64 {
        self.refs - self.issued
    }
}

/// Test support for the strided counters: a chunked segment, a position on it and its pass's
/// start, and run ends cut at `cuts` (each taken modulo the segment's lines, plus the end).
#[cfg(test)]
pub(crate) fn strided_case(chunk: u64, chunks: u64, gap: u64, stride: u64, pos_seed: u64, cuts: &[u64]) -> (Seg, u64, u64, Vec<u64>) {
    let seg = Seg { start: 1000, chunk, step: chunk + gap, chunks };
    let lines = seg.lines();
    let pos = pos_seed % lines;
    let start = pos % stride.min(lines);
    let mut ends: Vec<u64> = cuts.iter().map(|c| 1 + c % lines).collect();
    ends.push(lines);
    ends.sort_unstable();
    ends.dedup();
    (seg, pos, start, ends)
}

/// The lines of a walk at increasing offsets ahead ([`Entry::lines_ahead`]).
pub struct LinesAhead<'a, I> {
    segs: &'a [Seg],
    /// Lines of one whole pass over the segments.
    total: u64,
    /// The cursor's place from the start of the first segment.
    base: u64,
    /// The segment the last offset fell in, and its first line's place in the pass.
    seg: usize,
    seg_start: u64,
    offsets: I,
}

impl<I: Iterator<Item = u64>> Iterator for LinesAhead<'_, I> {
    type Item = u64;

    fn next(&mut self) -> Option<u64> {
        let offset = self.offsets.next()?;
        // Whole passes over every segment come back to the same place (the division only
        // when the offset reaches past the pass: most forecasts look less than a pass ahead).
        let at = match self.base + offset {
            at if at < self.total => at,
            at => at % self.total,
        };
        if at < self.seg_start {
            // The offsets passed the end of a pass: the search starts again from the first
            // segment.
            (self.seg, self.seg_start) = (0, 0);
        }
        // Empty segments hold no place: `at` lies past their start and end alike.
        while at >= self.seg_start + self.segs[self.seg].lines() {
            self.seg_start += self.segs[self.seg].lines();
            self.seg += 1;
        }
        Some(self.segs[self.seg].line_at(at - self.seg_start))
    }
}

#[cfg(test)]
mod tests;
