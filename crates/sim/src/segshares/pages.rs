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
/// on it in that chunk (lines to pages by `shift`). What [`byte_runs`] must give, merged by
/// byte (its proptest's reference).
#[cfg(test)]
pub(super) fn pages_of(seg: Seg, shift: u32) -> SegPages {
    SegPages { seg, shift, next_chunk: 0, line: 0, end: 0 }
}

/// See [`pages_of`]: the chunk after the current one, and the current chunk's lines not yet
/// handed out (`line..end`).
#[cfg(test)]
pub(super) struct SegPages {
    seg: Seg,
    shift: u32,
    next_chunk: u64,
    line: u64,
    end: u64,
}

#[cfg(test)]
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

/// The pages of `seg` in order as runs of one page byte: `f(first_page, end_page, lines, byte)`
/// for pages `first_page..end_page`, all with page byte `byte`, holding `lines` of the
/// segment's lines; `f` returns false to stop. A contiguous segment (one chunk, or chunks that
/// abut) is read as runs of equal bytes, many pages per call: counting a block of a repartitioned
/// region page by page was a twentieth of ua-like's time. Any other segment is read chunk by
/// chunk: a page the chunk covers only in part (which another chunk may share) alone, the
/// pages it covers whole as runs of equal bytes (ft-like's transposes read 80 chunks of about
/// 110 pages each; counting them page by page was most of their counts). Either way the lines
/// per byte, and the order of the bytes along the segment, are those of [`pages_of`], and a
/// run of several pages holds only whole pages of one chunk or pages of a contiguous segment.
/// Bytes are compared in the bits of `mask` only (a run's byte is its first page's): the
/// runs of one node need not split at every armed page.
#[inline]
pub(super) fn byte_runs(seg: Seg, shift: u32, home: &[u8], mask: u8, mut f: impl FnMut(u64, u64, u64, u8) -> bool) {
    if seg.chunks == 1 || seg.step == seg.chunk {
        runs_between(seg.start, seg.start + seg.lines(), shift, home, mask, false, &mut f);
        return;
    }
    for c in 0..seg.chunks {
        let start = seg.start + c * seg.step;
        if !runs_between(start, start + seg.chunk, shift, home, mask, true, &mut f) {
            return;
        }
    }
}

/// [`byte_runs`] over the lines `start..end`; with `parts_alone`, a page holding lines outside
/// them is a run of its own. False when `f` stopped.
#[inline]
fn runs_between(
    start: u64,
    end: u64,
    shift: u32,
    home: &[u8],
    mask: u8,
    parts_alone: bool,
    f: &mut impl FnMut(u64, u64, u64, u8) -> bool,
) -> bool {
    if start >= end {
        return true;
    }
    let (mut page, last) = (start >> shift, (end - 1) >> shift);
    // The last page a run may reach: with `parts_alone`, the last whole one.
    let reach = if parts_alone && ((last + 1) << shift) > end { last.saturating_sub(1) } else { last };
    while page <= last {
        let byte = home[page as usize];
        let part = parts_alone && ((page << shift) < start || ((page + 1) << shift) > end);
        let same = if part || page >= reach {
            page + 1
        } else {
            page + 1 + crate::walkruns::leading_equal_in(&home[page as usize + 1..=reach as usize], byte, mask) as u64
        };
        let lines = end.min(same << shift) - start.max(page << shift);
        if !f(page, same, lines, byte) {
            return false;
        }
        page = same;
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    proptest::proptest! {
        /// Runs of equal bytes hold, byte after byte, the lines `pages_of` gives page by page;
        /// compared in the bits of a mask, of bytes equal in those bits (bytes 0-3, bit 0
        /// ignored or not).
        #[test]
        fn byte_runs_are_pages_of_merged_by_byte(
            bytes in proptest::collection::vec(0u8..4, 1..60),
            start in 0u64..40, chunk in 0u64..50, gap in 0u64..3, chunks in 0u64..4, shift in 0u32..3,
            mask in proptest::sample::select(vec![u8::MAX, !1u8]),
        ) {
            let lpp = 1u64 << shift;
            let pages = bytes.len() as u64;
            let seg = Seg { start: start.min(pages * lpp - 1), chunk, step: chunk + gap, chunks };
            let seg = Seg { chunks: seg.chunks.min((pages * lpp - seg.start) / seg.step.max(1)), ..seg };
            let merge = |v: &mut Vec<(u8, u64)>, byte: u8, lines: u64| match v.last_mut() {
                Some((b, l)) if *b == byte => *l += lines,
                _ => v.push((byte, lines)),
            };
            let mut want = Vec::new();
            for (page, lines) in pages_of(seg, shift) {
                merge(&mut want, bytes[page as usize] & mask, lines);
            }
            let (mut got, mut next) = (Vec::new(), None);
            byte_runs(seg, shift, &bytes, mask, |lo, hi, lines, byte| {
                assert!(lo < hi && byte == bytes[lo as usize] && bytes[lo as usize..hi as usize].iter().all(|&b| b & mask == byte & mask));
                if seg.chunks == 1 || seg.step == seg.chunk {
                    // Contiguous: the runs follow each other, page after page.
                    assert!(next.is_none_or(|n| n == lo));
                    next = Some(hi);
                    assert_eq!((lo..hi).map(|p| lines_in(&seg, p << shift, (p + 1) << shift)).sum::<u64>(), lines);
                } else if hi > lo + 1 {
                    // Chunked: a run of several pages holds whole pages of one chunk only, so
                    // each page's own lines are a page's (what a count gives its armed pages).
                    assert!((lo..hi).all(|p| lines_in(&seg, p << shift, (p + 1) << shift) == lpp));
                    assert_eq!(lines, (hi - lo) * lpp);
                }
                merge(&mut got, byte & mask, lines);
                true
            });
            proptest::prop_assert_eq!(got, want);
        }
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
}
