//! Access streams: the per-thread generators the simulator's hot loop pulls lines from.
//!
//! Lines are numbered in the address space (`line = address / access_bytes`); the page of a
//! line is `line >> log2(lines_per_page)`. Nothing here allocates or hashes per access.

use rand::Rng;

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

impl Cursor {
    /// Next line; for `Runs` also whether this reference is a write.
    #[inline]
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
                let r = if *next_b { b.next_line(rng) } else { a.next_line(rng) };
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
}

/// Owner-share escapes (workloads.md: `who = "owner"` with `owner_share < 1`).
#[derive(Clone, Debug, PartialEq)]
pub struct Escape {
    /// Escape when a uniform u64 draw is below this.
    pub threshold: u64,
    /// The other threads' blocks, one segment each.
    pub others: Vec<Seg>,
}

impl Entry {
    /// Next reference: `(line, is_write)`.
    #[inline]
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
            None if self.write_frac == 0.0 => false,
            None if self.write_frac == 1.0 => true,
            // Truncation is floor for non-negative values, and avoids a libm call per access.
            None => ((i + 1) as f64 * self.write_frac) as u64 > (i as f64 * self.write_frac) as u64,
        };
        (line, write)
    }

    pub fn remaining(&self) -> u64 {
        self.refs - self.issued
    }
}

/// Smooth weighted round-robin over a thread's entries, in proportion to their counts
/// (workloads.md §7.2: a triad alternates b, c, a rather than running entry after entry).
#[derive(Clone, Debug, Default)]
pub struct Swrr {
    current: Vec<i64>,
    weights: Vec<i64>,
    total: i64,
}

impl Swrr {
    pub fn new(counts: impl IntoIterator<Item = u64>) -> Swrr {
        // Counts above i64::MAX / 4 would overflow the accumulators; no step issues that many.
        let weights: Vec<i64> = counts.into_iter().map(|c| c.min(i64::MAX as u64 / 4) as i64).collect();
        let total = weights.iter().sum();
        Swrr { current: vec![0; weights.len()], weights, total }
    }

    /// Index of the next entry (lowest index on ties).
    #[inline]
    pub fn pick(&mut self) -> usize {
        let mut best = 0;
        for i in 0..self.current.len() {
            self.current[i] += self.weights[i];
            if self.current[i] > self.current[best] {
                best = i;
            }
        }
        self.current[best] -= self.total;
        best
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rng() -> numalab_core::rng::StreamRng {
        numalab_core::rng::stream(1, "test", 0)
    }

    #[test]
    fn swrr_interleaves_in_proportion() {
        let mut s = Swrr::new([1, 1, 1]);
        let seq: Vec<usize> = (0..6).map(|_| s.pick()).collect();
        assert_eq!(seq, vec![0, 1, 2, 0, 1, 2]);
        let mut s = Swrr::new([5, 1, 1]);
        let seq: Vec<usize> = (0..7).map(|_| s.pick()).collect();
        assert_eq!(seq, vec![0, 0, 1, 0, 2, 0, 0]);
        assert_eq!(seq.iter().filter(|&&i| i == 0).count(), 5);
    }

    #[test]
    fn write_rule_matches_the_spec() {
        // read_frac 0.5 -> every second reference is a write, starting with the second.
        let mut e = Entry { cursor: Cursor::Fixed { line: 0 }, refs: 4, write_frac: 0.5, kind: AccessKind::Stream, escape: None, issued: 0 };
        let w: Vec<bool> = (0..4).map(|_| e.next(&mut rng()).1).collect();
        assert_eq!(w, vec![false, true, false, true]);
        let mut e = Entry { write_frac: 0.0, issued: 0, ..e };
        assert!((0..10).all(|_| !e.next(&mut rng()).1));
    }

    #[test]
    fn walk_wraps_over_segments_and_strided_restarts() {
        let mut c = Cursor::Walk { segs: vec![Seg::contiguous(10, 2), Seg::contiguous(0, 1)], seg: 0, pos: 0 };
        let lines: Vec<u64> = (0..5).map(|_| c.next_line(&mut rng()).0).collect();
        assert_eq!(lines, vec![10, 11, 0, 10, 11]);
        let mut s = Cursor::Strided { seg: Seg::contiguous(100, 6), pos: 0, start: 0, stride: 4 };
        let lines: Vec<u64> = (0..6).map(|_| s.next_line(&mut rng()).0).collect();
        assert_eq!(lines, vec![100, 104, 101, 105, 102, 103]);
        let cyc = Seg { start: 64, chunk: 64, step: 256, chunks: 3 };
        assert_eq!(cyc.lines(), 192);
        assert_eq!(cyc.line_at(64), 320);
        assert_eq!(cyc.line_at(130), 64 + 512 + 2);
    }

    #[test]
    fn runs_spread_writes_by_the_floor_rule() {
        let mut c = Cursor::Runs { runs: vec![(7, 4, 2), (9, 2, 0)], idx: 0, pos: 0 };
        let got: Vec<(u64, Option<bool>)> = (0..6).map(|_| c.next_line(&mut rng())).collect();
        assert_eq!(got, vec![(7, Some(false)), (7, Some(true)), (7, Some(false)), (7, Some(true)), (9, Some(false)), (9, Some(false))]);
    }
}
