//! Mixtures that learn which of their parts changed (docs/simulator.md, "The fast engine",
//! "Escape mixtures").
//!
//! A plain mixture used to ask every one of its parts whether it changed, after every change
//! of the memory: ua-like's mixture of the 79 other threads' blocks (server-b-8n) did so
//! after each hinting fault, and that was most of its time in bringing segment counts up to
//! date. A watched mixture is told instead: a part that stops being clean (a change of its
//! pages applied, its count waiting, the journal started over) is noted in the mixture's
//! `moved` list, and the mixture's next poll looks only at those.
//!
//! What the poll of every part did besides looking is kept, so that the results are the same
//! bytes: it took the current generation as each clean part's `Quick::generation`, which says
//! whether the journal still reaches the part and when a part has been idle long enough to
//! leave the buckets. A watched part keeps that as the mixture's `stamp` instead
//! (`Quick::stamped`): its generation is the larger of its own and the stamp, made its own
//! when it is noted or unwatched.

use super::segment::SegShare;
use super::{Quick, SegShares};

/// `Quick::watch` of a segment no mixture watches.
pub(super) const NO_WATCH: u32 = u32::MAX;

/// The generation of segment `q` as a poll of every part would have left it.
#[inline]
pub(super) fn generation_of(segs: &[SegShare], q: &Quick) -> u64 {
    if q.stamped {
        q.generation.max(segs[q.watch as usize].stamp)
    } else {
        q.generation
    }
}

impl Quick {
    /// The stamp `stamp` no longer stands for a look at this segment: the generation it gave
    /// becomes the segment's own.
    #[inline]
    pub(super) fn unstamp(&mut self, stamp: u64) {
        if self.stamped {
            (self.generation, self.stamped) = (self.generation.max(stamp), false);
        }
    }
}

/// Segment `p` is no longer clean: its watching mixture, if any, looks at it at its next poll.
#[inline]
pub(super) fn note_moved(segs: &mut [SegShare], quick: &mut [Quick], p: usize) {
    let q = &mut quick[p];
    if q.watch != NO_WATCH && q.stamped {
        let m = q.watch as usize;
        q.unstamp(segs[m].stamp);
        segs[m].moved.push(p as u32);
    }
}

impl SegShares {
    /// Plain mixture `m` (its parts `sorted`) watches its parts, if none of them is a part
    /// twice or of another watched mixture (a part has one watcher); its first poll looks at
    /// every part.
    pub(super) fn watch_parts(&mut self, m: usize, sorted: &[usize]) {
        #[cfg(test)]
        if self.no_watch {
            return;
        }
        let parts = self.segs[m].parts.as_ref().expect("a mixture");
        if sorted.windows(2).any(|w| w[0] == w[1]) || parts.iter().any(|&p| self.quick[p].watch != NO_WATCH) {
            return;
        }
        for (pos, &p) in parts.iter().enumerate() {
            let q = &mut self.quick[p];
            (q.watch, q.watch_pos, q.stamped) = (m as u32, pos as u32, false);
        }
        let s = &mut self.segs[m];
        s.watched = true;
        s.polled_from = u64::MAX;
    }

    /// Mixture `m` no longer watches its parts (it is dropped): each takes the generation
    /// the stamp gave it as its own.
    pub(super) fn unwatch_parts(&mut self, m: usize) {
        if !self.segs[m].watched {
            return;
        }
        let stamp = self.segs[m].stamp;
        for &p in self.segs[m].parts.as_deref().unwrap_or(&[]) {
            let q = &mut self.quick[p];
            if q.watch == m as u32 {
                q.unstamp(stamp);
                q.watch = NO_WATCH;
            }
        }
        let s = &mut self.segs[m];
        s.watched = false;
        s.moved.clear();
    }

    /// The journal started over: every segment waits for its next count, and every watched
    /// mixture looks at every part at its next poll.
    pub(super) fn unstamp_all(&mut self) {
        for q in &mut self.quick {
            if q.stamped {
                q.unstamp(self.segs[q.watch as usize].stamp);
            }
        }
        for s in self.segs.iter_mut().filter(|s| s.watched) {
            s.polled_from = u64::MAX;
            s.moved.clear();
        }
    }
}
