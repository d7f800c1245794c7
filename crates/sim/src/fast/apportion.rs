//! Integer parts in proportion to shares, rounding carried between calls (docs/simulator.md, "The fast engine").

/// Split `total` into integer parts in proportion to `share`, each at most its `cap`,
/// carrying the rounding in `resid` so that over many calls every part tracks its share
/// within one unit. Deterministic: ties go to the lowest index.
pub(crate) fn apportion(total: u64, share: &[f64], cap: &[u64], resid: &mut [f64], out: &mut [u64]) {
    let mut sum = 0u64;
    for j in 0..share.len() {
        let x = resid[j] + total as f64 * share[j];
        // floor(max(x, 0)): a float-to-integer cast truncates, which is the floor for a
        // value not below 0 (and takes NaN to 0, as `floor` then `max` did).
        let c = (x.max(0.0) as u64).min(cap[j]);
        out[j] = c;
        resid[j] = x - c as f64;
        sum += c;
    }
    if sum < total {
        // The parts furthest behind their shares that have room get one more each, those
        // with a share first (a part with no share only if no other has room, which
        // rounding of the shares can cause); ties to the lowest index.
        apportion_in_rounds(total, &mut sum, share, cap, resid, out);
    }
    while sum > total {
        let pick = (0..share.len())
            .filter(|&j| out[j] > 0)
            .min_by(|&a, &b| resid[a].partial_cmp(&resid[b]).unwrap_or(std::cmp::Ordering::Equal).then(a.cmp(&b)))
            .expect("a part to take from");
        out[pick] -= 1;
        resid[pick] += 1.0;
        sum -= 1;
    }
    // A cap can hold a part back for long; its debt is not carried further than two units.
    resid.iter_mut().for_each(|r| *r = r.clamp(-2.0, 2.0));
}

/// The parts furthest behind their shares that have room get one more each, in rounds over
/// their order (by the key at entry: a share first, then the residue, ties to the lowest
/// index), until `sum` reaches `total`.
///
/// The first round usually ends it (the floors leave fewer units than parts): its parts are
/// picked best first by selection, which costs a few comparisons per unit handed out; only
/// when caps leave units over after a whole round are the parts sorted for the rounds that
/// follow, in the same order.
fn apportion_in_rounds(total: u64, sum: &mut u64, share: &[f64], cap: &[u64], resid: &mut [f64], out: &mut [u64]) {
    let n = share.len();
    if resid[..n].iter().any(|r| r.is_nan()) {
        apportion_in_rounds_by_pairs(total, sum, share, cap, resid, out)
    } else if n <= 8 {
        apportion_in_rounds_keyed::<8>(total, sum, share, cap, resid, out)
    } else if n <= 16 {
        apportion_in_rounds_keyed::<16>(total, sum, share, cap, resid, out)
    } else {
        apportion_in_rounds_keyed::<{ crate::memory::MAX_NODES }>(total, sum, share, cap, resid, out)
    }
}

/// [`apportion_in_rounds`] for at most `M` parts, none with a NaN residue (arrays sized to
/// the machine, so a call does not clear room for 63 nodes).
#[inline(always)]
fn apportion_in_rounds_keyed<const M: usize>(total: u64, sum: &mut u64, share: &[f64], cap: &[u64], resid: &mut [f64], out: &mut [u64]) {
    let n = share.len();
    // The order as one integer per part, greatest first: a share, then the residue (its bits
    // made monotone; -0 and +0 are one value, as they compare equal), then the lower index.
    // Unique per part, so no tie is left; 0 marks a part the selection has taken.
    let mut key = [0u128; M];
    for j in 0..n {
        key[j] = (u128::from(share[j] > 0.0) << 70) | (u128::from(monotone_bits(resid[j] + 0.0)) << 6) | (63 - j) as u128;
    }
    let mut taken = [0u128; M];
    for _ in 0..n {
        if *sum == total {
            return;
        }
        let best = (0..n).fold(0, |b, j| if key[j] > key[b] { j } else { b });
        (taken[best], key[best]) = (key[best], 0);
        if out[best] < cap[best] {
            out[best] += 1;
            resid[best] -= 1.0;
            *sum += 1;
        }
    }
    // Every part was taken once: the later rounds go in the order they were taken.
    let mut order = [0usize; M];
    let order = &mut order[..n];
    order.iter_mut().enumerate().for_each(|(i, o)| *o = i);
    order.sort_unstable_by(|&a, &b| taken[b].cmp(&taken[a]));
    give_in_rounds(total, sum, order, cap, resid, out);
}

/// The bits of a float (not NaN) as an integer that orders as the float does.
#[inline(always)]
fn monotone_bits(x: f64) -> u64 {
    let bits = x.to_bits();
    if bits >> 63 == 1 {
        !bits
    } else {
        bits | 1 << 63
    }
}

/// [`apportion_in_rounds`] comparing (share, residue) pairs, for residues with a NaN among
/// them (a NaN compares equal to everything, so the index decides, which no integer key
/// reproduces).
#[cold]
fn apportion_in_rounds_by_pairs(total: u64, sum: &mut u64, share: &[f64], cap: &[u64], resid: &mut [f64], out: &mut [u64]) {
    const N: usize = crate::memory::MAX_NODES;
    let n = share.len();
    let mut key: [(bool, f64); N] = [(false, 0.0); N];
    for j in 0..n {
        key[j] = (share[j] > 0.0, resid[j]);
    }
    // `a` comes before `b` in the round order.
    let before = |a: usize, b: usize| match key[a].partial_cmp(&key[b]) {
        Some(std::cmp::Ordering::Greater) => true,
        Some(std::cmp::Ordering::Less) => false,
        _ => a < b,
    };
    let mut visited = 0u64;
    for _ in 0..n {
        if *sum == total {
            return;
        }
        let mut best = usize::MAX;
        for j in 0..n {
            if visited & (1 << j) == 0 && (best == usize::MAX || before(j, best)) {
                best = j;
            }
        }
        visited |= 1 << best;
        if out[best] < cap[best] {
            out[best] += 1;
            resid[best] -= 1.0;
            *sum += 1;
        }
    }
    let mut order: [usize; N] = [0; N];
    let order = &mut order[..n];
    order.iter_mut().enumerate().for_each(|(i, o)| *o = i);
    order.sort_unstable_by(|&a, &b| if before(a, b) { std::cmp::Ordering::Less } else { std::cmp::Ordering::Greater });
    give_in_rounds(total, sum, order, cap, resid, out);
}

/// Rounds over `order` after the first: one more unit to each part with room, until `sum`
/// reaches `total`.
fn give_in_rounds(total: u64, sum: &mut u64, order: &[usize], cap: &[u64], resid: &mut [f64], out: &mut [u64]) {
    while *sum < total {
        let at_start = *sum;
        for &j in order.iter() {
            if *sum == total {
                break;
            }
            if out[j] < cap[j] {
                out[j] += 1;
                resid[j] -= 1.0;
                *sum += 1;
            }
        }
        assert!(*sum > at_start, "the caps hold the total");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn apportion_conserves_and_tracks_shares() {
        let share = [0.5, 0.25, 0.25, 0.0];
        let mut resid = [0.0; 4];
        let mut out = [0u64; 4];
        let mut sums = [0u64; 4];
        for k in [1u64, 3, 7, 1, 1, 100, 2, 5] {
            apportion(k, &share, &[u64::MAX; 4], &mut resid, &mut out);
            assert_eq!(out.iter().sum::<u64>(), k, "every reference goes somewhere");
            assert_eq!(out[3], 0, "a node with no share gets nothing");
            for j in 0..4 {
                sums[j] += out[j];
            }
        }
        let total: u64 = sums.iter().sum();
        for j in 0..4 {
            assert!((sums[j] as f64 - share[j] * total as f64).abs() <= 1.0, "node {j}: {sums:?} of {total}");
        }
    }

    /// The short parts picked one by one, each the furthest behind of those not yet picked
    /// that have room (what `apportion` did before it used the sorted rounds): the reference
    /// its rounds must reproduce when one round suffices.
    fn picks_one_by_one(total: u64, sum: &mut u64, share: &[f64], cap: &[u64], resid: &mut [f64], out: &mut [u64]) {
        let mut picked = 0u64;
        while *sum < total {
            let key = |j: usize| (share[j] > 0.0, resid[j]);
            let ahead = |a: usize, b: usize| key(a).partial_cmp(&key(b)).unwrap_or(std::cmp::Ordering::Equal).then(b.cmp(&a)).is_gt();
            let best = (0..share.len())
                .filter(|&j| out[j] < cap[j] && picked & (1 << j) == 0)
                .reduce(|a, b| if ahead(b, a) { b } else { a })
                .expect("a part with room");
            picked |= 1 << best;
            out[best] += 1;
            resid[best] -= 1.0;
            *sum += 1;
        }
    }

    /// The rounds as `apportion` first made them: every part sorted by its key once, then
    /// rounds over that order. The selection of the first round must reproduce it, caps and
    /// further rounds included.
    fn rounds_over_sorted_order(total: u64, sum: &mut u64, share: &[f64], cap: &[u64], resid: &mut [f64], out: &mut [u64]) {
        let key = |j: usize| (share[j] > 0.0, resid[j]);
        let mut order: Vec<usize> = (0..share.len()).collect();
        order.sort_by(|&a, &b| key(b).partial_cmp(&key(a)).unwrap_or(std::cmp::Ordering::Equal).then(a.cmp(&b)));
        while *sum < total {
            for &j in &order {
                if *sum == total {
                    break;
                }
                if out[j] < cap[j] {
                    out[j] += 1;
                    resid[j] -= 1.0;
                    *sum += 1;
                }
            }
        }
    }

    proptest::proptest! {
        /// The first round's selection and the later rounds give what sorting every part
        /// first gives, with caps that force several rounds.
        #[test]
        fn rounds_by_selection_match_the_sorted_rounds(
            parts in proptest::collection::vec((0.0f64..1.0, -2.0f64..2.0, 0u64..4), 1..24),
            short in 0u64..30,
        ) {
            let share: Vec<f64> = parts.iter().map(|p| if p.2 == 0 { 0.0 } else { p.0 }).collect();
            // Caps of 1 to 3 on some parts; ties of residues are likely with the rounding below.
            let cap: Vec<u64> = parts.iter().map(|p| if p.2 == 3 { 1 + (p.0 * 3.0) as u64 } else { u64::MAX }).collect();
            let resid0: Vec<f64> = parts.iter().map(|p| (p.1 * 4.0).round() / 4.0).collect();
            let total = short.min(cap.iter().map(|&c| c.min(short)).sum());
            let (mut r1, mut o1, mut s1) = (resid0.clone(), vec![0u64; parts.len()], 0u64);
            let (mut r2, mut o2, mut s2) = (resid0, vec![0u64; parts.len()], 0u64);
            apportion_in_rounds(total, &mut s1, &share, &cap, &mut r1, &mut o1);
            rounds_over_sorted_order(total, &mut s2, &share, &cap, &mut r2, &mut o2);
            proptest::prop_assert_eq!(s1, total);
            proptest::prop_assert_eq!(o1, o2);
            proptest::prop_assert_eq!(r1, r2);
        }

        /// A round over the sorted order gives what picking the short parts one by one gives.
        #[test]
        fn apportion_picks_as_the_rounds_do(
            parts in proptest::collection::vec((0.0f64..1.0, -2.0f64..2.0, 0u64..4), 1..9),
            total in 0u64..12,
        ) {
            let sum_share: f64 = parts.iter().map(|p| p.0).sum::<f64>().max(1e-9);
            let share: Vec<f64> = parts.iter().map(|p| if p.2 == 0 { 0.0 } else { p.0 / sum_share }).collect();
            let cap: Vec<u64> = parts.iter().map(|p| if p.2 == 3 { 1 } else { u64::MAX }).collect();
            let resid0: Vec<f64> = parts.iter().map(|p| p.1).collect();
            let n = parts.len();
            proptest::prop_assume!(cap.iter().map(|&c| c.min(total)).sum::<u64>() >= total);
            let (mut resid, mut out) = (resid0.clone(), vec![0u64; n]);
            apportion(total, &share, &cap, &mut resid, &mut out);
            // The reference: floor, then rounds over the sorted order.
            let (mut r2, mut o2, mut sum) = (resid0.clone(), vec![0u64; n], 0u64);
            for j in 0..n {
                let x = r2[j] + total as f64 * share[j];
                o2[j] = (x.floor().max(0.0) as u64).min(cap[j]);
                r2[j] = x - o2[j] as f64;
                sum += o2[j];
            }
            let with_room = (0..n).filter(|&j| o2[j] < cap[j]).count() as u64;
            if sum < total && total - sum <= with_room {
                picks_one_by_one(total, &mut sum, &share, &cap, &mut r2, &mut o2);
            } else if sum < total {
                apportion_in_rounds(total, &mut sum, &share, &cap, &mut r2, &mut o2);
            }
            if sum <= total {
                r2.iter_mut().for_each(|r| *r = r.clamp(-2.0, 2.0));
                proptest::prop_assert_eq!(out, o2);
                proptest::prop_assert_eq!(resid, r2);
            }
        }
    }

    /// A NaN residue compares equal to everything, so the index breaks its ties: the rounds
    /// take the pair comparison, and every unit is still handed out.
    #[test]
    fn a_nan_residue_leaves_the_order_to_the_index() {
        let share = [0.5, 0.5, 0.0];
        let mut resid = [f64::NAN, 0.75, 0.5];
        let mut out = [0u64; 3];
        let mut sum = 0;
        apportion_in_rounds(2, &mut sum, &share, &[u64::MAX; 3], &mut resid, &mut out);
        // Part 0 (NaN) ties with part 1 and wins on its index; part 1 comes next.
        assert_eq!((sum, out), (2, [1, 1, 0]));
    }

    #[test]
    fn apportion_respects_caps() {
        let mut resid = [0.9, 0.0];
        let mut out = [0u64; 2];
        apportion(2, &[0.5, 0.5], &[0, 5], &mut resid, &mut out);
        assert_eq!(out, [0, 2]);
    }
}
