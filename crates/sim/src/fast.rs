//! The fast engine (docs/simulator.md, "The fast engine"): a step's references are charged in
//! proportional blocks instead of one pick at a time, and a uniform-random entry over memory
//! that is settled (every page placed, none armed for a hinting fault, none replicated) is
//! charged by the expected share of each node instead of drawing lines. What a random
//! reference costs and where it goes depends only on the node of the page it lands on, so on
//! settled memory the expected per-node counts carry everything the exact engine computes from
//! it; the variance of the exact draws (binomial, relative size 1/√k over k references) is
//! what is given up. Anything a policy observes one access at a time (first touches, hinting
//! faults, replicated pages) still goes through the exact path.

mod apportion;
mod block;
mod entry;
mod issue;
mod state;

pub(crate) use crate::segshares::SegShares;
pub(crate) use entry::{EscapeMemo, FastEntry, FastKind};
pub(crate) use issue::FastStep;
pub(crate) use state::FastState;

/// `num / den`, with one 64-bit division when both fit in 64 bits (almost always: the
/// products of reference counts only pass 2^64 on runs of about 2^32 references per entry),
/// where the `u128` division is a call into the runtime. The same quotient either way.
#[inline]
fn div_u128(num: u128, den: u128) -> u128 {
    if (num | den) >> 64 == 0 {
        u128::from(num as u64 / den as u64)
    } else {
        num / den
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn div_u128_gives_the_quotient_on_both_sides_of_64_bits() {
        let big = u128::from(u64::MAX);
        for (num, den) in [(0, 1), (7, 2), (big, 3), (big + 1, 3), (big * 5, 7), (big, big + 1), (3 * big, big)] {
            assert_eq!(div_u128(num, den), num / den, "{num} / {den}");
        }
    }
}
