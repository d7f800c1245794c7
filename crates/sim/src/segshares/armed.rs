//! The armed pages of a segment, named so that a hinting fault can draw one (docs/simulator.md, "The fast engine").

use numalab_core::rng::StreamRng;
use rand::Rng;

/// Most armed pages a segment keeps by name. Past this (a scanner arming a large region at
/// once) the segment keeps only their count, and a reference that faults draws its page by
/// rejection: a uniform line of the segment until one on an armed page (at least 1/64 of the
/// lines are then armed in a segment of up to 4 M pages). The names are counted again once
/// fewer than half this many remain.
pub(super) const MAX_ARMED_SET: usize = if cfg!(test) { 8 } else { 1 << 16 };

/// The armed pages of a segment with the segment's lines on each, in an order one can draw
/// from. Past `MAX_ARMED_SET` pages it `overflowed`: it names none until counted again.
#[derive(Default)]
pub(super) struct ArmedPages {
    pub(super) pages: Vec<(u64, u64)>,
    /// Per page of the segment's span, from `first_page`: its index in `pages`, or `NONE`.
    /// Made at the first armed page (a segment under a static policy never has one), with the
    /// span's pages given by the caller. A dense table rather than a hash map: removing an
    /// armed page took a tenth of cg-like's time under stable-numa, in the map's probes (two
    /// per removal, the page's and the page moved into its place).
    slot: Vec<u32>,
    first_page: u64,
    pub(super) overflowed: bool,
}

/// A page of the span that is not armed.
const NONE: u32 = u32::MAX;

/// Longest span whose pages a segment names (a 16 MiB table, a 16 GiB span of 4 KiB pages;
/// the largest preset spans 1.75 M pages). A longer segment keeps only the count of its armed
/// pages, as one past `MAX_ARMED_SET` does, and never names them.
const MAX_TABLE_PAGES: u64 = 1 << 22;

impl ArmedPages {
    /// The table for the span `first_page..end_page` (the segment's), made on first use.
    #[inline]
    fn slots(&mut self, (first_page, end_page): (u64, u64)) -> &mut [u32] {
        if self.slot.is_empty() {
            self.first_page = first_page;
            self.slot = vec![NONE; (end_page - first_page) as usize];
        }
        debug_assert_eq!(self.first_page, first_page, "a segment's span does not change");
        &mut self.slot
    }

    /// Whether a segment of this span names its armed pages (`MAX_TABLE_PAGES`).
    pub(super) fn can_name((first_page, end_page): (u64, u64)) -> bool {
        end_page - first_page <= MAX_TABLE_PAGES
    }

    /// Name `page` (in `span`) with `lines` of the segment's lines, unless it is named.
    pub(super) fn insert(&mut self, page: u64, lines: u64, span: (u64, u64)) {
        if self.overflowed {
            return;
        }
        if !Self::can_name(span) {
            self.overflowed = true;
            return;
        }
        let at = (page - span.0) as usize;
        if self.slots(span)[at] != NONE {
            return;
        }
        if self.pages.len() == MAX_ARMED_SET {
            self.clear();
            self.overflowed = true;
            return;
        }
        self.slot[at] = self.pages.len() as u32;
        self.pages.push((page, lines));
    }

    /// More lines of a page already named (a page split over two chunks of the segment).
    pub(super) fn insert_or_add(&mut self, page: u64, lines: u64, span: (u64, u64)) {
        if !self.overflowed && Self::can_name(span) {
            match self.slots(span)[(page - span.0) as usize] {
                NONE => {}
                i => {
                    self.pages[i as usize].1 += lines;
                    return;
                }
            }
        }
        self.insert(page, lines, span);
    }

    pub(super) fn remove(&mut self, page: u64) {
        if self.slot.is_empty() {
            return;
        }
        let at = (page - self.first_page) as usize;
        let i = std::mem::replace(&mut self.slot[at], NONE);
        if i == NONE {
            return;
        }
        self.pages.swap_remove(i as usize);
        if let Some(&(moved, _)) = self.pages.get(i as usize) {
            self.slot[(moved - self.first_page) as usize] = i;
        }
    }

    /// No page named (the table is kept: its entries are emptied one named page at a time).
    pub(super) fn clear(&mut self) {
        for &(page, _) in &self.pages {
            self.slot[(page - self.first_page) as usize] = NONE;
        }
        self.pages.clear();
        self.overflowed = false;
    }

    /// A page drawn with probability proportional to its lines in the segment: a uniform slot,
    /// kept with probability `lines / lpp` (rejection; a whole page is always kept).
    pub(super) fn draw(&self, rng: &mut StreamRng, lpp: u64) -> u64 {
        loop {
            let (page, lines) = self.pages[rng.random_range(0..self.pages.len())];
            if lines >= lpp || rng.random_range(0..lpp) < lines {
                return page;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A segment longer than a table covers keeps a count only: no table, no names.
    #[test]
    fn a_span_past_the_table_names_no_page() {
        let span = (10, 10 + MAX_TABLE_PAGES + 1);
        assert!(!ArmedPages::can_name(span) && ArmedPages::can_name((10, 10 + MAX_TABLE_PAGES)));
        let mut armed = ArmedPages::default();
        armed.insert_or_add(12, 4, span);
        armed.insert(13, 4, span);
        armed.remove(12);
        assert!(armed.overflowed && armed.pages.is_empty() && armed.slot.is_empty());
    }

    proptest::proptest! {
        /// The named pages, in their drawing order, are those of a list kept by searching it:
        /// a new page at the end, a removed one replaced by the last (and past
        /// `MAX_ARMED_SET` none at all, until cleared).
        #[test]
        fn named_pages_follow_a_searched_list(ops in proptest::collection::vec((0u8..4, 0u64..24, 1u64..5), 0..80)) {
            let span = (100u64, 124u64);
            let mut armed = ArmedPages::default();
            let (mut list, mut overflowed): (Vec<(u64, u64)>, bool) = (Vec::new(), false);
            for (op, at, lines) in ops {
                let page = span.0 + at;
                let found = list.iter().position(|&(p, _)| p == page);
                match op {
                    0 => {
                        armed.insert(page, lines, span);
                        if !overflowed && found.is_none() {
                            if list.len() == MAX_ARMED_SET {
                                (list, overflowed) = (Vec::new(), true);
                            } else {
                                list.push((page, lines));
                            }
                        }
                    }
                    1 => {
                        armed.insert_or_add(page, lines, span);
                        match (overflowed, found) {
                            (false, Some(i)) => list[i].1 += lines,
                            (false, None) if list.len() == MAX_ARMED_SET => (list, overflowed) = (Vec::new(), true),
                            (false, None) => list.push((page, lines)),
                            (true, _) => {}
                        }
                    }
                    2 => {
                        armed.remove(page);
                        if let Some(i) = found {
                            list.swap_remove(i);
                        }
                    }
                    _ => {
                        armed.clear();
                        (list, overflowed) = (Vec::new(), false);
                    }
                }
                proptest::prop_assert_eq!(&armed.pages, &list);
                proptest::prop_assert_eq!(armed.overflowed, overflowed);
            }
        }
    }
}
