//! How a segment's lines lie on pages, and what a page byte means for its counts (docs/simulator.md, "The fast engine").

use crate::memory::{ARMED, NODE_MASK, REPLICATED, UNPLACED};
use numalab_workload::stream::Seg;

/// What a page byte means for the counts: `None` if the page blocks bulk charging (unplaced,
/// freed, replicated), else its node and whether it is armed.
#[inline]
pub(super) fn class(byte: u8) -> Option<(usize, bool)> {
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
pub(super) fn pages_of(seg: Seg, shift: u32) -> SegPages {
    SegPages { seg, shift, next_chunk: 0, line: 0, end: 0 }
}

/// See [`pages_of`]: the chunk after the current one, and the current chunk's lines not yet
/// handed out (`line..end`).
pub(super) struct SegPages {
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

#[cfg(test)]
mod tests {
    use super::*;

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
}
