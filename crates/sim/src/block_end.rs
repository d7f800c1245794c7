//! Where a proportional block ends (docs/simulator.md, "The fast engine": "Walks over pages
//! of several nodes"): the entries' targets `floor(P·count_i/T)` for a `P`, and the first `P`
//! whose clock reaches the epoch's end.

/// The smallest `p` in `lo + 1 ..= hi` whose block reaches `end` (`clock_at(p) >= end`), given
/// `clock_at(lo) = c_lo < end <= c_hi = clock_at(hi)`; `clock_at` does not decrease. The clock
/// is nearly linear in `p` (piecewise, by the walks' runs), so the crossing is first placed by
/// interpolation, then confirmed by its neighbour; a third step that is not done halves the
/// bracket instead. `hi` itself when nothing lies between: also when `hi <= lo`, which a block
/// can ask for when a walk stops it at once and entries left behind by a fault already take
/// the clock past the end.
pub(crate) fn first_reaching(lo: u128, c_lo: f64, hi: u128, c_hi: f64, end: f64, mut clock_at: impl FnMut(u128) -> f64) -> u128 {
    let (mut lo, mut c_lo, mut hi, mut c_hi) = (lo, c_lo, hi, c_hi);
    let mut round = 0;
    while hi > lo + 1 {
        round += 1;
        let mid = if round % 3 == 0 {
            lo + (hi - lo) / 2
        } else {
            let f = (end - c_lo) / (c_hi - c_lo);
            let step = crate::hot::ceil_at_least_one(f * (hi - lo) as f64).min(1e18) as u64 as u128;
            (lo + step).min(hi - 1)
        };
        let c = clock_at(mid);
        if c >= end {
            (hi, c_hi) = (mid, c);
            if hi > lo + 1 {
                let c_below = clock_at(hi - 1);
                if c_below < end {
                    return hi;
                }
                (hi, c_hi) = (hi - 1, c_below);
            }
        } else {
            (lo, c_lo) = (mid, c);
            if hi > lo + 1 {
                let c_above = clock_at(lo + 1);
                if c_above >= end {
                    return lo + 1;
                }
                (lo, c_lo) = (lo + 1, c_above);
            }
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
            // Interpolation, bisection every third round: at worst two looks per round and
            // the bracket halved every three rounds.
            proptest::prop_assert!(looks.get() <= 6 * (128 - hi.leading_zeros()) + 4, "{} looks", looks.get());
        }
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
