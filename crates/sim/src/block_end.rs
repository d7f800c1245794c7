//! Where a proportional block ends (docs/simulator.md, "The fast engine": "Walks over pages
//! of several nodes"): the entries' targets `floor(P·count_i/T)` for a `P`, and the first `P`
//! whose clock reaches the epoch's end.

/// A block's `P` when its clock at `p_top` (`c_top`) reaches the epoch's `end`: the first `P`
/// in `lo + 1 ..= p_top` whose clock does (`clock_at`; the caller keeps the references of the
/// last two `P` looked at, so the search ends with the found one's at hand where it can;
/// `clock` is the clock before the block).
///
/// Most such blocks end at `p_top` or just below it: `p_top` is where the mean cost puts the
/// end, rounded up. When `c_top` passes the end by less than two steps' mean cost, `p_top - 1`
/// is looked at first, so that such a block ends after two looks. Otherwise the search starts
/// from the clock at `lo + 1`, not from `clock`: entries a fault left behind add their backlog
/// at once, and a bracket whose lower clock is short by that much places its guesses far off
/// (13.7 looks per search on is-like under autonuma, against 3.5). When the backlog alone
/// reaches the end, `lo + 1` is the block's `P`. Needs `p_top > lo + 1`.
pub(crate) fn p_reaching_end(lo: u128, (p_top, c_top): (u128, f64), clock: f64, end: f64, mut clock_at: impl FnMut(u128) -> f64) -> u128 {
    let (mut hi, mut c_hi) = (p_top, c_top);
    if (c_top - end) * ((p_top - lo) as f64) <= 2.0 * (c_top - clock) {
        let c_below = clock_at(p_top - 1);
        if c_below < end {
            return p_top;
        }
        (hi, c_hi) = (p_top - 1, c_below);
        if hi <= lo + 1 {
            return hi;
        }
    }
    let c_lo = clock_at(lo + 1);
    if c_lo >= end {
        return lo + 1;
    }
    first_reaching(lo + 1, c_lo, hi, c_hi, end, clock_at)
}

/// The smallest `p` in `lo + 1 ..= hi` whose block reaches `end` (`clock_at(p) >= end`), given
/// `c_lo < end <= c_hi = clock_at(hi)`, where `c_lo` is `clock_at(lo)` or less (a lower bound
/// gives the same `p` in more looks); `clock_at` does not decrease. `hi` itself when nothing
/// lies between: also when `hi <= lo`.
///
/// The clock is piecewise linear in `p` with kinks (an entry ahead of its target adds nothing
/// until `P` catches up with it; a walk's cost changes from run to run), so the crossing is
/// placed by false position with the Illinois rule: an end kept twice in a row has its
/// distance from `end` halved, so that the next guess moves off it (plain false position
/// creeps towards a kink from one side a little per look). A guess whose clock is within two
/// steps' cost of `end` is confirmed by its neighbour, which usually ends the search; the
/// third of every three rounds halves the bracket if the first two did not, so the search
/// takes at most three rounds (six looks) per halving. Which `p` it finds does not depend on
/// the guesses, only how many looks it takes.
pub(crate) fn first_reaching(lo: u128, c_lo: f64, hi: u128, c_hi: f64, end: f64, mut clock_at: impl FnMut(u128) -> f64) -> u128 {
    let (mut lo, mut c_lo, mut hi, mut c_hi) = (lo, c_lo, hi, c_hi);
    // The ends' distances from `end` that weigh the next guess (halved by the Illinois rule).
    let (mut w_lo, mut w_hi) = (end - c_lo, c_hi - end);
    // Which end moved last (`Some(true)`: the upper one).
    let mut moved_hi: Option<bool> = None;
    // Rounds go in threes: the bracket's width when the three began, and the rounds since.
    let (mut width_before, mut rounds) = (hi.saturating_sub(lo), 0);
    while hi > lo + 1 {
        let width = hi - lo;
        rounds += 1;
        let bisect = rounds == 3 && width > width_before / 2;
        let mid = if bisect {
            lo + width / 2
        } else {
            let f = w_lo / (w_lo + w_hi);
            let step = crate::hot::ceil_at_least_one(f * width as f64).min(1e18) as u64 as u128;
            (lo + step).min(hi - 1)
        };
        let c = clock_at(mid);
        if c >= end {
            // Within two steps' cost of `end` (by the bracket's mean cost per step): the
            // crossing is most likely at `mid` or just below.
            let near = (c - end) * ((mid - lo) as f64) <= 2.0 * (c - c_lo);
            (hi, c_hi, w_hi) = (mid, c, c - end);
            if moved_hi == Some(true) {
                w_lo *= 0.5;
            }
            moved_hi = Some(true);
            if near && hi > lo + 1 {
                let c_below = clock_at(hi - 1);
                if c_below < end {
                    return hi;
                }
                (hi, c_hi, w_hi) = (hi - 1, c_below, c_below - end);
            }
        } else {
            let near = (end - c) * ((hi - mid) as f64) <= 2.0 * (c_hi - c);
            (lo, c_lo, w_lo) = (mid, c, end - c);
            if moved_hi == Some(false) {
                w_hi *= 0.5;
            }
            moved_hi = Some(false);
            if near && hi > lo + 1 {
                let c_above = clock_at(lo + 1);
                if c_above >= end {
                    return lo + 1;
                }
                (lo, c_lo, w_lo) = (lo + 1, c_above, end - c_above);
            }
        }
        if rounds == 3 {
            (width_before, rounds) = (hi.saturating_sub(lo), 0);
        }
    }
    hi
}

/// `floor(p · refs / total)` (`p ≤ total`, `0 < total < 2^64`) from `ratio = refs / total`
/// as a float, corrected by one with exact products: a block looks at several `P` for every
/// entry, and a division costs several times the two multiplications. The float product is
/// within one of the quotient while `p · refs < 2^52`; past that it divides.
#[inline]
pub(crate) fn target(p: u128, refs: u64, total: u128, ratio: f64) -> u64 {
    // 64-bit operands: the products are single multiplications, and the conversion to float
    // an instruction (from u128 it is a library call).
    let (p, total) = (p as u64, total as u64);
    let product = u128::from(p) * u128::from(refs);
    if product >> 52 != 0 {
        return (product / u128::from(total)) as u64;
    }
    // Below 2^52 both conversions go through i64: one instruction each way on the baseline
    // target, where u64 ones take a branch-free sequence each (no unsigned conversions
    // before AVX-512), and the same values (`p · ratio ≤ p · refs / total < 2^52`; with no
    // references the product is zero whatever `p` reads as).
    let mut t = (p as i64 as f64 * ratio) as i64 as u64;
    if u128::from(t) * u128::from(total) > product {
        t -= 1;
    } else if (u128::from(t) + 1) * u128::from(total) <= product {
        t += 1;
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    proptest::proptest! {
        /// `first_reaching` finds the first `p` whose clock reaches the end, on clocks that
        /// rise by a different cost per step in each of a few pieces (a block's walks crossing
        /// pages of several nodes), also with steps that add nothing.
        #[test]
        fn first_reaching_finds_the_first_p_at_the_end(
            pieces in proptest::collection::vec((1u64..400, 0u32..5), 1..6),
            end_at in 0.0f64..1.0,
            just_below in proptest::bool::ANY,
            understate in 0.0f64..1e4,
        ) {
            let clock_at = |p: u128| -> f64 {
                let (mut c, mut left) = (100.0, p as u64);
                for &(len, ns) in &pieces {
                    let k = left.min(len);
                    c += k as f64 * f64::from(ns);
                    left -= k;
                }
                c
            };
            let hi = pieces.iter().map(|p| p.0).sum::<u64>() as u128;
            let (c_lo, c_hi) = (clock_at(0), clock_at(hi));
            proptest::prop_assume!(c_hi > c_lo);
            // The end exactly at some `p`'s clock (ties are where an off-by-one shows), or
            // half a nanosecond before it.
            let at = 1 + ((hi - 1) as f64 * end_at) as u128;
            let end = clock_at(at) - if just_below { 0.5 } else { 0.0 };
            proptest::prop_assume!(end > c_lo);
            let looks = std::cell::Cell::new(0);
            let p = first_reaching(0, c_lo, hi, c_hi, end, |p| {
                looks.set(looks.get() + 1);
                clock_at(p)
            });
            let first = (1..=hi).find(|&p| clock_at(p) >= end).unwrap();
            proptest::prop_assert_eq!(p, first);
            // Nothing between the ends: the upper one, also below the lower.
            proptest::prop_assert_eq!(first_reaching(first, c_lo, first, c_hi, end, clock_at), first);
            proptest::prop_assert_eq!(first_reaching(first + 1, c_lo, first, c_hi, end, clock_at), first);
            // At worst two looks per round and the bracket halved every three rounds.
            proptest::prop_assert!(looks.get() <= 6 * (128 - hi.leading_zeros()) + 4, "{} looks", looks.get());
            // A lower clock below the true one (what the caller knew before the block) finds
            // the same `p`.
            proptest::prop_assert_eq!(first_reaching(0, c_lo - understate, hi, c_hi, end, clock_at), first);
        }
    }

    /// A block after a fault (is-like under autonuma, as traced at the study's length): two
    /// entries ahead of their targets add nothing until `P` catches up with them, two behind
    /// add their backlog at once, so the clock has a kink above the crossing. The search
    /// finds the first `P` at the end in six looks from the clock at `lo` itself (two of
    /// them confirm it); plain false position took 14 from the clock before the block, and
    /// 24 from the clock at `lo`.
    #[test]
    fn a_kinked_clock_is_searched_in_a_few_looks() {
        // (refs, issued, ns per reference) of the four entries; their refs sum to `total`.
        let entries = [
            (472_500u64, 212_595u64, 12.536_77),
            (405_000, 182_224, 22.886_05),
            (445_500, 172_248, 34.613_06),
            (27_000, 10_415, 20.416_15),
        ];
        let lo: u128 = entries.iter().map(|e| u128::from(e.1)).sum();
        let clock_at = |p: u128| clock_of(&entries, p);
        let (hi, end) = (lo + 43_226, 997_839.66);
        let first = (lo + 1..=hi).find(|&p| clock_at(p) >= end).unwrap();
        assert_eq!(first, lo + 28_785);
        let looks = std::cell::Cell::new(0);
        let p = first_reaching(lo, clock_at(lo), hi, clock_at(hi), end, |p| {
            looks.set(looks.get() + 1);
            clock_at(p)
        });
        assert_eq!(p, first);
        assert!(looks.get() <= 6, "{} looks", looks.get());
    }

    /// A block's clock at `p` (relative to the clock before it): entries as (refs, issued, ns
    /// per reference) with `floor(p·refs/total)` references due, those behind adding their
    /// backlog at once.
    fn clock_of(entries: &[(u64, u64, f64)], p: u128) -> f64 {
        let total: u64 = entries.iter().map(|e| e.0).sum();
        entries
            .iter()
            .map(|&(refs, issued, ns)| ((p * u128::from(refs) / u128::from(total)) as u64).saturating_sub(issued) as f64 * ns)
            .sum()
    }

    /// `p_reaching_end` with looks counted, the last look's `P` returned too.
    fn search(entries: &[(u64, u64, f64)], p_top: u128, end: f64) -> (u128, u32, u128) {
        let lo: u128 = entries.iter().map(|e| u128::from(e.1)).sum();
        let (mut looks, mut last) = (0, 0);
        let p = p_reaching_end(lo, (p_top, clock_of(entries, p_top)), 0.0, end, |p| {
            looks += 1;
            last = p;
            clock_of(entries, p)
        });
        (p, looks, last)
    }

    /// Where a block's clock passes the epoch's end: the first `P` at the end, in the looks
    /// each case needs, with that `P` among the last two looks (or `p_top`).
    #[test]
    fn a_block_ends_at_the_first_p_at_the_end_in_few_looks() {
        // Three entries on schedule (nothing behind): the clock rises 3.5 ns every 4 `P`.
        let even = [(100_000, 10_000, 1.0), (100_000, 10_000, 2.0), (200_000, 20_000, 0.25)];
        let lo = 40_000u128;
        // The end 0.1 ns below the clock at `p_top`, which the mean cost put there: the block
        // ends at `p_top` after one more look, at `p_top - 1`.
        let p_top = lo + 1_000;
        assert_eq!(search(&even, p_top, clock_of(&even, p_top) - 0.1), (p_top, 1, p_top - 1));
        // The end a step further down.
        let end = clock_of(&even, p_top - 1) - 0.1;
        let (p, looks, _) = search(&even, p_top, end);
        assert_eq!(p, (lo + 1..=p_top).find(|&p| clock_of(&even, p) >= end).unwrap());
        assert!(looks <= 4, "{looks} looks");
        // After a fault: the second entry 5 000 references behind (10 000 ns of backlog), the
        // first as far ahead. With the end 8 000 ns away the backlog alone passes it, so the
        // block's `P` is `lo + 1`, looked at last.
        let behind = [(100_000, 15_000, 1.0), (100_000, 5_000, 2.0), (200_000, 20_000, 0.25)];
        assert_eq!(search(&behind, lo + 3_000, 8_000.0), (lo + 1, 1, lo + 1));
        // The end further on: searched from the clock at `lo + 1`.
        let end = 11_000.0;
        let first = (lo + 1..=lo + 3_000).find(|&p| clock_of(&behind, p) >= end).unwrap();
        let (p, looks, _) = search(&behind, lo + 3_000, end);
        assert_eq!(p, first);
        assert!(looks <= 6, "{looks} looks");
    }

    proptest::proptest! {
        /// `target` is the floor of the exact quotient, for any `p ≤ total`.
        #[test]
        fn target_is_the_floor_of_the_quotient(total in 1u64..u64::MAX / 2, refs_frac in 0.0f64..=1.0, p_frac in 0.0f64..=1.0, small in proptest::bool::ANY) {
            let total = if small { total % 5000 + 1 } else { total };
            let refs = (total as f64 * refs_frac) as u64;
            let p = (total as f64 * p_frac) as u128;
            let ratio = refs as f64 / total as f64;
            proptest::prop_assert_eq!(target(p, refs, total as u128, ratio) as u128, p * refs as u128 / total as u128);
        }
    }
}
