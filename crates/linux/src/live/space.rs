//! A live process's address space as a policy sees it: pages numbered densely from 0
//! (docs/live.md, "Page numbers"). Policies keep per-page state in vectors sized by the
//! space's page count, so the virtual page number (up to 2^35 on x86-64) cannot serve; the
//! engine instead numbers the pages of the private anonymous mappings in the order it first
//! sees them. A mapping that grows gets its new pages appended; numbers are never reused or
//! renumbered, so a policy's per-page state stays valid while the program maps and unmaps.

use numalab_core::PageIdx;
use std::collections::BTreeMap;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Segment {
    addr: u64,
    pages: u64,
    first: PageIdx,
}

#[derive(Clone, Debug)]
pub struct SpaceIndex {
    page_bytes: u64,
    /// Segments by start address.
    by_addr: BTreeMap<u64, Segment>,
    /// Segments in numbering order (`first` ascending).
    in_order: Vec<Segment>,
    pages: u64,
    max_pages: u64,
    /// Pages of mappings not numbered because the space reached `max_pages`.
    pub unindexed_pages: u64,
}

impl SpaceIndex {
    pub fn new(page_bytes: u64, max_pages: u64) -> SpaceIndex {
        SpaceIndex { page_bytes, by_addr: BTreeMap::new(), in_order: Vec::new(), pages: 0, max_pages, unindexed_pages: 0 }
    }

    /// Pages numbered so far.
    pub fn pages(&self) -> u64 {
        self.pages
    }

    fn segment_of(&self, addr: u64) -> Option<&Segment> {
        self.by_addr.range(..=addr).next_back().map(|(_, s)| s).filter(|s| addr < s.addr + s.pages * self.page_bytes)
    }

    /// Number the pages of `ranges` (`[start, end)`, page-aligned) not numbered yet.
    pub fn update(&mut self, ranges: &[(u64, u64)]) {
        self.unindexed_pages = 0;
        for &(start, end) in ranges {
            let mut a = start;
            while a < end {
                if let Some(s) = self.segment_of(a) {
                    a = s.addr + s.pages * self.page_bytes;
                    continue;
                }
                // Up to the next numbered segment or the end of the range.
                let next = self.by_addr.range(a..).next().map_or(end, |(&s, _)| s.min(end));
                let want = (next - a) / self.page_bytes;
                let room = self.max_pages - self.pages;
                let take = want.min(room);
                if take > 0 {
                    let seg = Segment { addr: a, pages: take, first: self.pages };
                    self.by_addr.insert(a, seg);
                    self.in_order.push(seg);
                    self.pages += take;
                }
                self.unindexed_pages += want - take;
                a = next;
            }
        }
    }

    /// The page number of an address, if numbered.
    pub fn page_of(&self, addr: u64) -> Option<PageIdx> {
        self.segment_of(addr).map(|s| s.first + (addr - s.addr) / self.page_bytes)
    }

    /// The numbered pages of `[start, end)` (a page counts if any of its bytes is in the
    /// range): runs of consecutive page numbers, in address order.
    pub fn runs(&self, start: u64, end: u64) -> Vec<(PageIdx, u64)> {
        let mut out: Vec<(PageIdx, u64)> = Vec::new();
        if start >= end {
            return out;
        }
        let from = self.segment_of(start).map_or(start, |s| s.addr);
        for s in self.by_addr.range(from..end).map(|(_, s)| s) {
            let (lo, hi) = (start.max(s.addr), end.min(s.addr + s.pages * self.page_bytes));
            if lo >= hi {
                continue;
            }
            let first = s.first + (lo - s.addr) / self.page_bytes;
            let pages = s.first + (hi - 1 - s.addr) / self.page_bytes + 1 - first;
            match out.last_mut() {
                Some(prev) if prev.0 + prev.1 == first => prev.1 += pages,
                _ => out.push((first, pages)),
            }
        }
        out
    }

    /// The address of a page number.
    pub fn addr_of(&self, page: PageIdx) -> Option<u64> {
        let i = self.in_order.partition_point(|s| s.first + s.pages <= page);
        self.in_order.get(i).filter(|s| s.first <= page).map(|s| s.addr + (page - s.first) * self.page_bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_of_a_range_follow_the_numbering() {
        let mut s = SpaceIndex::new(4096, 1 << 20);
        // Pages 0-3 at 0x10000, 4-5 at 0x7f0000000000, then 6-7 right after pages 0-3.
        s.update(&[(0x10000, 0x14000), (0x7f0000000000, 0x7f0000002000)]);
        s.update(&[(0x10000, 0x16000), (0x7f0000000000, 0x7f0000002000)]);
        assert_eq!(s.runs(0x0, 0x10000), vec![], "below every mapping");
        // One range over both segments of the first mapping: numbers 0-3 and 6-7 (not
        // consecutive: two runs); a gap and the second mapping: 4-5.
        assert_eq!(s.runs(0x8000, 0x7f0000002000), vec![(0, 4), (6, 2), (4, 2)]);
        // Partial pages count; a range inside one page is that page.
        assert_eq!(s.runs(0x11800, 0x12001), vec![(1, 2)]);
        assert_eq!(s.runs(0x7f0000001010, 0x7f0000001020), vec![(5, 1)]);
        assert_eq!(s.runs(0x13000, 0x15000), vec![(3, 1), (6, 1)]);
        assert_eq!(s.runs(5, 5), vec![]);
        // Two adjacent mappings numbered one after the other (8, then 9-10): one run.
        s.update(&[(0x20000, 0x21000), (0x21000, 0x23000)]);
        assert_eq!(s.runs(0x20000, 0x23000), vec![(8, 3)]);
    }

    #[test]
    fn pages_are_numbered_densely_and_growth_is_appended() {
        let mut s = SpaceIndex::new(4096, 1 << 20);
        s.update(&[(0x10000, 0x14000), (0x7f0000000000, 0x7f0000002000)]);
        assert_eq!(s.pages(), 6);
        assert_eq!(s.page_of(0x10000), Some(0));
        assert_eq!(s.page_of(0x13fff), Some(3));
        assert_eq!(s.page_of(0x7f0000001000), Some(5));
        assert_eq!(s.page_of(0x14000), None);
        // The heap grows by two pages and a mapping appears below it: both appended, the old
        // numbers kept.
        s.update(&[(0x8000, 0x9000), (0x10000, 0x16000), (0x7f0000000000, 0x7f0000002000)]);
        assert_eq!(s.pages(), 9);
        assert_eq!(s.page_of(0x8000), Some(6));
        assert_eq!(s.page_of(0x14000), Some(7));
        assert_eq!(s.page_of(0x10000), Some(0));
        for p in 0..9 {
            assert_eq!(s.page_of(s.addr_of(p).unwrap()), Some(p));
        }
        assert_eq!(s.addr_of(9), None);
    }

    #[test]
    fn the_index_stops_at_its_bound_and_counts_the_rest() {
        let mut s = SpaceIndex::new(4096, 3);
        s.update(&[(0x10000, 0x15000)]);
        assert_eq!((s.pages(), s.unindexed_pages), (3, 2));
        assert_eq!(s.page_of(0x13000), None);
    }
}
