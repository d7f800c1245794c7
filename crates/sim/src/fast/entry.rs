//! How the fast engine charges each entry of a step, and its escape mixtures (docs/simulator.md, "The fast engine").

use crate::segshares::SegShares;
use numalab_workload::stream::{Cursor, Seg};
use numalab_workload::Entry;
use std::sync::Arc;

/// How the fast engine charges one entry of a step.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum FastKind {
    /// A walk: runs of one page at a time, as the exact engine charges them.
    Walk,
    /// The same line every time (a reduction slot).
    Fixed,
    /// A uniformly random line of a segment: index into [`SegShares`].
    Random(usize),
    /// A fixed stride through a segment. On a segment that lies on one node every reference
    /// goes there; otherwise each reference of a block is counted on its own page's node
    /// (a stride draws nothing, so the count is exact, only cheaper than one pick at a time).
    /// The segment's overall shares would be wrong over a block: a stride longer than the
    /// segment walks it line by line from the thread's starting point.
    Strided(usize),
}

/// One entry of a step as the fast engine charges it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct FastEntry {
    pub kind: FastKind,
    /// Owner escapes: the probability `q` that a reference goes to a uniformly chosen other
    /// block instead (docs/workloads.md, `owner_share`), and the [`SegShares`] index of the
    /// mixture of those blocks.
    pub escape: Option<(usize, f64)>,
}

impl FastEntry {
    /// The fast form of an entry, or `None` if it must go reference by reference (strided,
    /// alternating and explicit-run cursors).
    pub fn of(e: &Entry, shares: &mut SegShares, memo: &mut EscapeMemo, n: usize) -> Option<FastEntry> {
        let kind = match &e.cursor {
            Cursor::Walk { .. } => FastKind::Walk,
            Cursor::Fixed { .. } => FastKind::Fixed,
            Cursor::Random { seg } => FastKind::Random(shares.intern(*seg, n)),
            Cursor::Strided { seg, .. } => {
                let i = shares.intern(*seg, n);
                shares.want_runs(i);
                FastKind::Strided(i)
            }
            _ => return None,
        };
        let escape = e.escape.as_ref().map(|esc| (memo.mix(&esc.others, shares, n), esc.threshold as f64 / 18_446_744_073_709_551_616.0));
        Some(FastEntry { kind, escape })
    }

    /// Segments and mixtures whose shares this entry needs, each with whether it must also
    /// be free of armed pages. A uniformly random reference finds an armed page by chance,
    /// which the fast charge draws (`block`); a stride visits given pages, so an armed one
    /// among them must fault on the reference that reaches it: a block follows a stride up
    /// to that reference (`StrideReach`), but a stride with owner escapes is charged by
    /// shares and needs its segment unarmed.
    pub fn needs(&self) -> impl Iterator<Item = (usize, bool)> {
        let seg = match self.kind {
            FastKind::Random(s) => Some((s, false)),
            FastKind::Strided(s) => Some((s, self.escape.is_some())),
            _ => None,
        };
        seg.into_iter().chain(self.escape.map(|e| (e.0, false)))
    }
}

/// The mixtures a thread's last steps escaped to, by the blocks they mix. A thread's step
/// escapes to the same blocks as its step before it until the blocks are repartitioned, and
/// comparing the list of blocks costs far less than interning each of them again (one lookup
/// per other thread, at every step start). It gives exactly what interning gives: the same
/// blocks intern to the same mixture.
#[derive(Default)]
pub(crate) struct EscapeMemo {
    recent: Vec<(Arc<[Seg]>, usize)>,
}

/// Mixtures an [`EscapeMemo`] keeps: a step has a few escaping entries, usually over the
/// same blocks.
const ESCAPE_MEMO_ENTRIES: usize = 4;

impl EscapeMemo {
    /// Forget every mixture (their indices may be dropped by `SegShares::sweep`).
    pub fn clear(&mut self) {
        self.recent.clear();
    }

    /// The [`SegShares`] index of the even mixture of `others`.
    pub fn mix(&mut self, others: &Arc<[Seg]>, shares: &mut SegShares, n: usize) -> usize {
        // The workload shares one list between the steps that escape to the same blocks
        // (`numalab_workload::EscapeLists`), so the pointer usually decides; the contents
        // decide otherwise.
        if let Some((_, i)) = self.recent.iter().find(|(segs, _)| Arc::ptr_eq(segs, others) || segs[..] == others[..]) {
            return *i;
        }
        let parts: Vec<usize> = others.iter().map(|s| shares.intern(*s, n)).collect();
        let i = shares.intern_mix(parts, n);
        if self.recent.len() == ESCAPE_MEMO_ENTRIES {
            self.recent.remove(0);
        }
        self.recent.push((Arc::clone(others), i));
        i
    }
}
