//! Following the memory's journal: page buckets list the segments each change is offered to (docs/simulator.md, "The fast engine").

use super::segment::SegShare;
use super::watch::{generation_of, note_moved};
use super::{Quick, SegShares};
use crate::memory::{Change, Memory};

/// `SegShares::wide_from` is at least this many buckets.
const MIN_WIDE_BUCKETS: usize = if cfg!(test) { 2 } else { 64 };

/// Offer the change `c` (from generation `at` to `at + 1`) to the segments of `list`: a stale
/// entry leaves the list, a segment idle for `IDLE_CHANGES` stops following the journal (with
/// every change before this one applied), and the others apply it.
fn offer(list: &mut Vec<(u32, u32)>, segs: &mut [SegShare], quick: &mut [Quick], c: &Change, at: u64, shift: u32) {
    let idle_before = at.saturating_sub(IDLE_CHANGES);
    let mut k = 0;
    while k < list.len() {
        let (i, listing) = list[k];
        let i = i as usize;
        if segs[i].listing != listing {
            list.swap_remove(k);
            continue;
        }
        if generation_of(segs, &quick[i]) < idle_before {
            // Idle: out of every list (its other entries are now stale).
            segs[i].unlist(at);
            quick[i].clean = false;
            note_moved(segs, quick, i);
            list.swap_remove(k);
            continue;
        }
        let s = &mut segs[i];
        if s.apply(c.page, c.old, c.new, shift) {
            s.dirty = true;
            quick[i].clean = false;
            note_moved(segs, quick, i);
        }
        k += 1;
    }
}

/// A segment not needed for this many changes of the journal stops following it (a
/// repartitioned region's old blocks, a phase that no longer runs) and catches up from the
/// journal itself when it is needed again.
const IDLE_CHANGES: u64 = if cfg!(test) { 3 } else { 1 << 12 };

/// Pages per bucket of `SegShares::buckets` at least (`1 << MIN_BUCKET_SHIFT`): 256 KiB of
/// 4 KiB pages. A large memory takes larger buckets, so that there are at most
/// `1 << MAX_BUCKETS_SHIFT` of them.
const MIN_BUCKET_SHIFT: u32 = if cfg!(test) { 1 } else { 6 };
const MAX_BUCKETS_SHIFT: u32 = 16;

impl SegShares {
    /// Apply the journal's changes since `cursor` to the counted segments, each change only
    /// to the segments whose span reaches into its page's bucket, in the journal's order. A
    /// segment's counts then depend on the same changes in the same order as if it replayed
    /// the journal itself when next needed, but a change costs a few segments instead of
    /// every segment that is ever needed again. When the journal starts over before the
    /// cursor, every segment waits for its next full count.
    pub(super) fn sync(&mut self, mem: &Memory, shift: u32) {
        let generation = mem.generation();
        if self.cursor == generation {
            return;
        }
        match mem.changes_since(self.cursor) {
            Some(changes) => {
                for (c, at) in changes.iter().zip(self.cursor..) {
                    if let Some(list) = self.buckets.get_mut((c.page >> self.bucket_shift) as usize) {
                        offer(list, &mut self.segs, &mut self.quick, c, at, shift);
                    }
                    offer(&mut self.wide, &mut self.segs, &mut self.quick, c, at, shift);
                }
            }
            None => {
                // Every segment is behind the journal: counted in full when next needed.
                self.unstamp_all();
                self.segs.iter_mut().filter(|s| s.synced).for_each(|s| s.unlist(0));
                self.quick.iter_mut().for_each(|q| q.clean = false);
                self.buckets.iter_mut().for_each(Vec::clear);
                self.wide.clear();
            }
        }
        self.cursor = generation;
    }

    /// Segment `i`, up to date at the cursor, follows the journal from now on: listed in the
    /// buckets its span reaches into.
    pub(super) fn list(&mut self, i: usize, mem: &Memory, shift: u32) {
        if self.buckets.is_empty() {
            let pages = mem.home().len().max(1) as u64;
            let bits = u64::BITS - (pages - 1).leading_zeros();
            self.bucket_shift = bits.saturating_sub(MAX_BUCKETS_SHIFT).max(MIN_BUCKET_SHIFT);
            let buckets = pages.div_ceil(1 << self.bucket_shift) as usize;
            self.wide_from = (buckets / 8).max(MIN_WIDE_BUCKETS);
        }
        let s = &mut self.segs[i];
        s.synced = true;
        let listing = s.listing;
        let (first_line, end_line) = s.span;
        if end_line <= first_line {
            return;
        }
        let first = ((first_line >> shift) >> self.bucket_shift) as usize;
        let last = (((end_line - 1) >> shift) >> self.bucket_shift) as usize;
        if last - first >= self.wide_from {
            self.wide.push((i as u32, listing));
            return;
        }
        if self.buckets.len() <= last {
            self.buckets.resize_with(last + 1, Vec::new);
        }
        for list in &mut self.buckets[first..=last] {
            list.push((i as u32, listing));
        }
    }
}
