//! The armed pages of a segment, named so that a hinting fault can draw one (docs/simulator.md, "The fast engine").

use numalab_core::rng::StreamRng;
use rand::Rng;
use std::collections::HashMap;

/// Most armed pages a segment keeps by name. Past this (a scanner arming a large region at
/// once) the segment keeps only their count, and a reference that faults draws its page by
/// rejection: a uniform line of the segment until one on an armed page (at least 1/64 of the
/// lines are then armed in a segment of up to 4 M pages). The names are counted again once
/// fewer than half this many remain.
pub(super) const MAX_ARMED_SET: usize = if cfg!(test) { 8 } else { 1 << 16 };

/// The armed pages of a segment with the segment's lines on each, in an order one can draw
/// from. `slot` is only looked up, never iterated, so no result depends on its order. Past
/// `MAX_ARMED_SET` pages it `overflowed`: it names none until counted again.
#[derive(Default)]
pub(super) struct ArmedPages {
    pub(super) pages: Vec<(u64, u64)>,
    slot: HashMap<u64, usize>,
    pub(super) overflowed: bool,
}

impl ArmedPages {
    pub(super) fn insert(&mut self, page: u64, lines: u64) {
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
    pub(super) fn insert_or_add(&mut self, page: u64, lines: u64) {
        match self.slot.get(&page) {
            Some(&i) => self.pages[i].1 += lines,
            None => self.insert(page, lines),
        }
    }

    pub(super) fn remove(&mut self, page: u64) {
        if let Some(i) = self.slot.remove(&page) {
            self.pages.swap_remove(i);
            if let Some(&(moved, _)) = self.pages.get(i) {
                self.slot.insert(moved, i);
            }
        }
    }

    pub(super) fn clear(&mut self) {
        self.pages.clear();
        self.slot.clear();
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
