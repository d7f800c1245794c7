//! The per-access hot loop of the simulator: everything it reads is held in locals, and it
//! does no allocation or hashing per access.

use crate::memory::SLOW;
use numalab_core::rng::StreamRng;
use numalab_workload::stream::AccessKind;
use rand::Rng;

pub(crate) fn kind_index(k: AccessKind) -> usize {
    k as usize
}

/// The per-access loop, with everything it reads held in locals.
pub(crate) struct Hot<'m> {
    pub home: &'m [u8],
    pub shift: u32,
    pub n: usize,
    pub end: f64,
    pub gap_exp_ns: f64,
}

impl Hot<'_> {
    /// Issue up to `max` references, each from the entry `pick` names, until the clock passes
    /// the epoch end or a page needs the slow path (that reference is counted as issued and
    /// returned for `slow_access`). Returns (issued, clock, slow reference). `GAP_EXP` adds
    /// the exponential compute gaps; with a constant `pick` (one entry) the compiler hoists
    /// the entry and its cost row out of the loop.
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    pub fn issue<const GAP_EXP: bool>(
        &self,
        entries: &mut [numalab_workload::Entry],
        mut pick: impl FnMut() -> usize,
        max: u64,
        rng: &mut StreamRng,
        acc: &mut [u64],
        wr: &mut [u64],
        cost: &[f64],
        mut clock: f64,
    ) -> (u64, f64, Option<(u64, bool, AccessKind)>) {
        let (acc, wr) = (&mut acc[..self.n], &mut wr[..self.n]);
        let mut issued = 0;
        while issued < max {
            let e = &mut entries[pick()];
            let (line, write) = e.next(rng);
            issued += 1;
            let page = line >> self.shift;
            let h = self.home[page as usize];
            if h >= SLOW {
                return (issued, clock, Some((page, write, e.kind)));
            }
            let j = h as usize;
            acc[j] += 1;
            wr[j] += u64::from(write);
            let mut c = cost[kind_index(e.kind) * self.n + j];
            if GAP_EXP {
                c += -(1.0 - rng.random::<f64>()).ln() * self.gap_exp_ns;
            }
            clock += c;
            if clock >= self.end {
                break;
            }
        }
        (issued, clock, None)
    }

    /// `issue` for a single walking entry: consecutive references to one page are charged
    /// together (same node, same cost), which is what makes streaming cheap to simulate.
    /// Counts, writes and the point where the epoch ends are those of `issue`; only the
    /// floating-point sum of the clock is formed as `k·c` instead of `c + c + ...`.
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    pub fn issue_runs(
        &self,
        e: &mut numalab_workload::Entry,
        max: u64,
        acc: &mut [u64],
        wr: &mut [u64],
        cost: &[f64],
        mut clock: f64,
        lpp: u64,
    ) -> (u64, f64, Option<(u64, bool, AccessKind)>) {
        let kb = kind_index(e.kind) * self.n;
        let mut issued = 0;
        while issued < max {
            let (line, avail) = e.peek_run(lpp, max - issued).expect("a walking entry");
            let page = line >> self.shift;
            let h = self.home[page as usize];
            if h >= SLOW {
                let write = e.take_run(1) > 0;
                return (issued + 1, clock, Some((page, write, e.kind)));
            }
            let j = h as usize;
            let c = cost[kb + j];
            // References until the clock reaches the epoch end (the crossing one included).
            let room = ((self.end - clock) / c).ceil().max(1.0);
            let k = if room < avail as f64 { room as u64 } else { avail };
            let writes = e.take_run(k);
            acc[j] += k;
            wr[j] += writes;
            clock += k as f64 * c;
            issued += k;
            if clock >= self.end {
                break;
            }
        }
        (issued, clock, None)
    }
}
