//! The per-access hot loop of the simulator: everything it reads is held in locals, and it
//! does no allocation or hashing per access.

use crate::memory::SLOW;
use numalab_core::rng::StreamRng;
use numalab_workload::stream::{AccessKind, Swrr};
use rand::Rng;

/// `n` as a float, through i64: the same value as `n as f64` for every `n` below 2^63 (a
/// count of references or writes always is), in one instruction where the unsigned
/// conversion takes a sequence of five (x86-64 before AVX-512). Counts are converted in the
/// innermost loops of the fast engine.
#[inline(always)]
pub(crate) fn count_f64(n: u64) -> f64 {
    debug_assert!(n < 1 << 63, "a count below 2^63");
    n as i64 as f64
}

/// `x.ceil().max(1.0)`, the same float, without a call: the baseline x86-64 target has no
/// rounding instruction, so `ceil` is a library call, and the hot paths take one per run of
/// references. Floats from 2^52 on are integers already.
#[inline(always)]
pub(crate) fn ceil_at_least_one(x: f64) -> f64 {
    const INTEGRAL_FROM: f64 = 4_503_599_627_370_496.0; // 2^52
    if x.is_nan() || x <= 1.0 {
        // At most 1, or NaN (which `max` drops).
        return 1.0;
    }
    if x >= INTEGRAL_FROM {
        return x;
    }
    // Below 2^52: through i64, one instruction each way (see `block_end::target`).
    let t = x as i64 as f64;
    if t < x {
        t + 1.0
    } else {
        t
    }
}

pub(crate) fn kind_index(k: AccessKind) -> usize {
    k as usize
}

/// A reference that needs the slow path: its page, whether it writes, its kind.
pub(crate) type SlowRef = (u64, bool, AccessKind);

/// The per-access loop, with everything it reads held in locals.
pub(crate) struct Hot<'m> {
    pub home: &'m [u8],
    pub shift: u32,
    pub n: usize,
    pub end: f64,
    pub gap_exp_ns: f64,
    /// A page byte at or above this takes the slow path: `SLOW`, or 0 to hand the next
    /// reference, whatever its page, to the slow path (an access sample).
    pub slow_from: u8,
    /// Per-node mappings' fast bits (`mappings::Mappings::fast`), empty when the run keeps no
    /// mappings; `node` is the issuing thread's node. Only `issue` reads them: a run with
    /// mappings charges every reference through it.
    pub maps: &'m [u64],
    pub node: usize,
}

/// What charging a reference touches of its thread: its random stream, its per-node access
/// and write counters for the epoch, and its cost table (ns per kind and node).
pub(crate) struct Tally<'t> {
    pub rng: &'t mut StreamRng,
    pub acc: &'t mut [u64],
    pub wr: &'t mut [u64],
    pub cost: &'t [f64],
}

impl Hot<'_> {
    /// Issue up to `max` references, each from the entry `pick` names, until the clock passes
    /// the epoch end or a page needs the slow path (that reference is counted as issued and
    /// returned for `slow_access`). Returns (issued, clock, slow reference). `GAP_EXP` adds
    /// the exponential compute gaps; with a constant `pick` (one entry) the compiler hoists
    /// the entry and its cost row out of the loop.
    #[inline(always)]
    pub fn issue<const GAP_EXP: bool>(
        &self,
        entries: &mut [numalab_workload::Entry],
        mut pick: impl FnMut(&[numalab_workload::Entry]) -> usize,
        max: u64,
        t: &mut Tally,
        mut clock: f64,
    ) -> (u64, f64, Option<SlowRef>) {
        let (rng, cost) = (&mut *t.rng, t.cost);
        let (acc, wr) = (&mut t.acc[..self.n], &mut t.wr[..self.n]);
        let mut issued = 0;
        while issued < max {
            let i = pick(entries);
            let e = &mut entries[i];
            let (line, write) = e.next(rng);
            issued += 1;
            let page = line >> self.shift;
            let h = self.home[page as usize];
            if h >= self.slow_from || (!self.maps.is_empty() && self.maps[page as usize] & crate::mappings::need_bit(self.node, write) == 0)
            {
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
    pub fn issue_runs(
        &self,
        e: &mut numalab_workload::Entry,
        max: u64,
        t: &mut Tally,
        mut clock: f64,
        lpp: u64,
    ) -> (u64, f64, Option<SlowRef>) {
        debug_assert!(self.maps.is_empty(), "runs with mappings charge reference by reference");
        let (acc, wr, cost) = (&mut *t.acc, &mut *t.wr, t.cost);
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
            let room = ceil_at_least_one((self.end - clock) / c);
            let k = if room < avail as f64 { room as u64 } else { avail };
            let writes = e.take_run(k);
            acc[j] += k;
            wr[j] += writes;
            clock += count_f64(k) * c;
            issued += k;
            if clock >= self.end {
                break;
            }
        }
        (issued, clock, None)
    }

    /// `issue` for a step whose entries all walk (a stencil, a triad): the smooth weighted
    /// round-robin repeats every `swrr.period()` picks, so while every entry's next run stays
    /// on one placed page, whole cycles are charged at once — entry `i` gets `k · w_i`
    /// consecutive references on its page. Counts, writes, the order entries advance in, and
    /// the point where the epoch ends are those of `issue`; only the floating-point sum of the
    /// clock is formed per cycle. Between cycles (a run ends mid-cycle, a slow page, the epoch
    /// end) references go one by one through `issue`.
    #[inline(always)]
    pub fn issue_cycles(
        &self,
        entries: &mut [numalab_workload::Entry],
        swrr: &mut Swrr,
        max: u64,
        t: &mut Tally,
        mut clock: f64,
        lpp: u64,
    ) -> (u64, f64, Option<SlowRef>) {
        debug_assert!(self.maps.is_empty(), "runs with mappings charge reference by reference");
        let period = swrr.period();
        let mut issued = 0;
        while issued < max {
            let left_refs = max - issued;
            if swrr.picks_to_cycle_end() == period && left_refs >= period {
                let mut cycles = left_refs / period;
                let mut cycle_ns = 0.0;
                let mut placed = true;
                for (i, e) in entries.iter().enumerate() {
                    let picks = swrr.cycle_picks(i);
                    if picks == 0 {
                        continue;
                    }
                    let (line, run_refs) = e.peek_run(lpp, u64::MAX).expect("a walking entry");
                    let h = self.home[(line >> self.shift) as usize];
                    if h >= SLOW {
                        placed = false;
                        break;
                    }
                    cycles = cycles.min(run_refs / picks);
                    cycle_ns += count_f64(picks) * t.cost[kind_index(e.kind) * self.n + h as usize];
                }
                if placed && cycles > 0 {
                    // Whole cycles that end before the epoch does; the crossing reference is
                    // issued one by one below, as `issue` would.
                    let room = ((self.end - clock) / cycle_ns).floor();
                    let mut k = if room < cycles as f64 { room.max(0.0) as u64 } else { cycles };
                    while k > 0 && clock + count_f64(k) * cycle_ns >= self.end {
                        k -= 1;
                    }
                    if k > 0 {
                        for (i, e) in entries.iter_mut().enumerate() {
                            let refs = k * swrr.cycle_picks(i);
                            if refs == 0 {
                                continue;
                            }
                            let (line, _) = e.peek_run(lpp, refs).expect("a walking entry");
                            let j = self.home[(line >> self.shift) as usize] as usize;
                            let writes = e.take_run(refs);
                            t.acc[j] += refs;
                            t.wr[j] += writes;
                        }
                        clock += count_f64(k) * cycle_ns;
                        issued += k * period;
                        continue;
                    }
                }
            }
            // The rest of this cycle reference by reference.
            let refs = swrr.picks_to_cycle_end().min(left_refs);
            let (n, c, slow) = self.issue::<false>(entries, |_| swrr.pick(), refs, t, clock);
            issued += n;
            clock = c;
            if slow.is_some() || clock >= self.end {
                return (issued, clock, slow);
            }
        }
        (issued, clock, None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memory::{ARMED, UNPLACED};
    use numalab_workload::{Cursor, Entry, Seg};

    const LPP: u64 = 64;

    /// Three walking entries over their own arrays with counts in proportion `weights`.
    fn entries(weights: &[u64], cycles: u64) -> Vec<Entry> {
        weights
            .iter()
            .enumerate()
            .map(|(i, &w)| {
                let seg = Seg::contiguous(i as u64 * 64 * LPP + 7, 40 * LPP);
                Entry::new(Cursor::Walk { segs: vec![seg], seg: 0, pos: 0 }, w * cycles, 0.3 + 0.2 * i as f64, AccessKind::Stream, None)
            })
            .collect()
    }

    /// Charge `max` references both ways; everything but the clock's rounding must agree.
    fn both_ways(weights: &[u64], home: &[u8], end: f64, max: u64) {
        let n = 2;
        let cost = [3.0, 11.5, 5.0, 17.0, 8.0, 23.0];
        let hot = Hot { home, shift: LPP.trailing_zeros(), n, end, gap_exp_ns: 0.0, slow_from: crate::memory::SLOW, maps: &[], node: 0 };
        let mut rng = numalab_core::rng::stream(1, "hot-test", 0);
        let (mut e1, mut e2) = (entries(weights, 1000), entries(weights, 1000));
        let (mut s1, mut s2) = (Swrr::new(e1.iter().map(|e| e.refs)), Swrr::new(e2.iter().map(|e| e.refs)));
        let (mut a1, mut w1, mut a2, mut w2) = ([0u64; 2], [0u64; 2], [0u64; 2], [0u64; 2]);
        let (mut c1, mut c2, mut left) = (0.0, 0.0, max);
        loop {
            let mut t1 = Tally { rng: &mut rng, acc: &mut a1, wr: &mut w1, cost: &cost };
            let (n1, k1, slow1) = hot.issue::<false>(&mut e1, |_| s1.pick(), left, &mut t1, c1);
            let mut t2 = Tally { rng: &mut rng, acc: &mut a2, wr: &mut w2, cost: &cost };
            let (n2, k2, slow2) = hot.issue_cycles(&mut e2, &mut s2, left, &mut t2, c2, LPP);
            assert_eq!((n1, slow1), (n2, slow2), "issued and the slow reference");
            assert!((k1 - k2).abs() <= 1e-9 * k1.max(1.0), "clock {k1} vs {k2}");
            assert_eq!((a1, w1), (a2, w2), "accesses and writes per node");
            assert_eq!(e1, e2, "cursors and counts");
            assert_eq!(s1.picks_to_cycle_end(), s2.picks_to_cycle_end());
            (c1, c2, left) = (k1, k2, left - n1);
            if slow1.is_some() || left == 0 {
                return;
            }
        }
    }

    fn placed(pages: usize) -> Vec<u8> {
        (0..pages).map(|p| (p % 3 == 0) as u8).collect()
    }

    #[test]
    fn whole_cycles_match_reference_by_reference() {
        for w in [&[1, 1, 1][..], &[2, 1, 1], &[1, 3], &[5, 2, 1, 1]] {
            both_ways(w, &placed(300), f64::INFINITY, 1000 * w.iter().sum::<u64>());
        }
    }

    #[test]
    fn the_epoch_ends_on_the_same_reference() {
        for end in [1.0, 999.0, 12_345.6, 200_000.0] {
            both_ways(&[2, 1, 1], &placed(300), end, 4000);
        }
    }

    #[test]
    fn limits_off_the_cycle_and_slow_pages_stop_both_alike() {
        both_ways(&[1, 1, 1], &placed(300), f64::INFINITY, 1001);
        let mut home = placed(300);
        home[64 + 3] = UNPLACED;
        both_ways(&[1, 1, 1], &home, f64::INFINITY, 3000);
        let mut home = placed(300);
        home[5] |= ARMED;
        both_ways(&[2, 1, 1], &home, f64::INFINITY, 4000);
    }
}

#[cfg(test)]
mod rounding_tests {
    use super::{ceil_at_least_one, count_f64};

    proptest::proptest! {
        /// Through i64 gives the unsigned conversion's float, bit for bit, below 2^63 (and
        /// around the powers of two where the two roundings could differ).
        #[test]
        fn count_f64_is_the_unsigned_conversion(n in 0u64..(1 << 63), shift in 0u32..63, delta in 0u64..4) {
            proptest::prop_assert_eq!(count_f64(n).to_bits(), (n as f64).to_bits());
            let near = ((1u64 << shift) + delta).min((1 << 63) - 1);
            proptest::prop_assert_eq!(count_f64(near).to_bits(), (near as f64).to_bits());
            let below = ((1u64 << shift) - 1).saturating_sub(delta);
            proptest::prop_assert_eq!(count_f64(below).to_bits(), (below as f64).to_bits());
        }
    }

    #[test]
    fn ceil_at_least_one_is_ceil_then_max_one() {
        let mut xs = vec![f64::NAN, f64::INFINITY, f64::NEG_INFINITY, -0.0, 0.0, 0.3, 1.0, 1.0 + f64::EPSILON, 2.5, 3.0, 1e15 + 0.5];
        xs.extend([4_503_599_627_370_495.5, 4_503_599_627_370_496.0, 9.1e18, 1e300, -7.5, f64::MIN_POSITIVE]);
        let mut rng = numalab_core::rng::stream(3, "ceil-test", 0);
        use rand::Rng;
        for _ in 0..10_000 {
            let e: i32 = rng.random_range(-20..64);
            xs.push(rng.random::<f64>() * 2f64.powi(e));
        }
        for x in xs {
            assert_eq!(ceil_at_least_one(x).to_bits(), x.ceil().max(1.0).to_bits(), "x = {x:e}");
        }
    }
}
