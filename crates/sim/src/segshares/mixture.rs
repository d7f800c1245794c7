//! Even mixtures of segments: the blocks a reference escapes to (docs/simulator.md, "The fast
//! engine", "Escape mixtures").
//!
//! A mixture's shares are the sums of its parts' fixed-point shares over the number of parts.
//! The sums are exact integers, so they do not depend on the order in which parts changed: a
//! mixture adds the change of each part since it last looked instead of averaging every
//! part again, and a mixture that differs from another by a few parts (the blocks of every
//! other thread, for each thread) is that one's sums plus and minus those parts, to the same
//! integers.

use super::segment::{SegShare, FIXED_ONE};
use super::{watch, SegShares};
use crate::memory::Memory;
use numalab_workload::stream::Seg;

/// A mixture kept as another mixture (`of`, a plain one) plus the parts it adds and minus
/// those it leaves out (as multisets).
pub(super) struct MixBase {
    pub(super) of: usize,
    pub(super) plus: Vec<usize>,
    pub(super) minus: Vec<usize>,
}

/// Most parts a mixture may differ from its base by: a thread's escapes leave out its own
/// block and take the base's left-out one, a block being one or two segments.
const MAX_BASE_DIFF: usize = 4;

/// Plain mixtures kept as candidate bases (`SegShares::bases`): the mixtures of a region
/// partitioned one way are interned one after the other, and a few regions escape at once.
const MAX_BASES: usize = 4;

impl SegShares {
    /// A new mixture of `parts`, kept as a recent plain mixture plus and minus a few parts if
    /// one is close enough (then it costs a few additions per poll of the base, shared by
    /// every mixture of that base), plain otherwise.
    pub(super) fn new_mix(&mut self, parts: Vec<usize>, n: usize) -> usize {
        let mut sorted = parts.clone();
        sorted.sort_unstable();
        let base = self.bases.iter().rev().find_map(|(b, base_sorted)| {
            let (plus, minus) = multiset_difference(&sorted, base_sorted, MAX_BASE_DIFF)?;
            // Only when it saves most of the poll: never for a mixture of a few parts.
            (4 * (plus.len() + minus.len()) <= parts.len()).then_some(MixBase { of: *b, plus, minus })
        });
        let plain = base.is_none();
        let mut mix = SegShare::new(Seg::contiguous(0, 0), Some(parts), n);
        mix.base = base;
        let i = self.place(mix);
        if plain {
            if self.bases.len() == MAX_BASES {
                self.bases.remove(0);
            }
            self.watch_parts(i, &sorted);
            self.bases.push((i, sorted));
        }
        i
    }

    /// `ready` for mixture `i` (see there), its parts brought up to date first.
    pub(super) fn ready_mix(&mut self, i: usize, mem: &Memory, shift: u32, epoch_start: f64, epoch_ns: f64) -> bool {
        if let Some(base) = self.segs[i].base.take() {
            let settled = self.ready_on_base(i, &base, mem, shift, epoch_start, epoch_ns);
            self.segs[i].base = Some(base);
            return settled;
        }
        let parts = self.segs[i].parts.take().expect("a mixture");
        let (mut seen, mut sums) = (std::mem::take(&mut self.segs[i].seen), std::mem::take(&mut self.segs[i].fixed));
        let (mut moved, mut sum_again) = (false, false);
        let (generation, journal_from) = (mem.generation(), mem.journal_from());
        // A watched mixture looks only at the parts noted since its last poll, unless the
        // journal started over since (`watch`); any other, at every part.
        let watched = self.segs[i].watched;
        let every = !watched || self.segs[i].polled_from != journal_from;
        let noted = if every { Vec::new() } else { std::mem::take(&mut self.segs[i].moved) };
        if watched && every {
            // Each part takes what the last stamp gave it, and is looked at below.
            let stamp = self.segs[i].stamp;
            for &p in &parts {
                self.quick[p].unstamp(stamp);
            }
            self.segs[i].moved.clear();
            let s = &mut self.segs[i];
            (s.part_settled, s.unsettled) = (vec![true; parts.len()], 0);
        }
        let looks = if every { parts.len() } else { noted.len() };
        let mut settled = true;
        let mut noted = noted.iter();
        for k in 0..looks {
            let pos = match noted.next() {
                Some(&p) => self.quick[p as usize].watch_pos as usize,
                None => k,
            };
            let p = parts[pos];
            // `ready`'s quick path for a part nothing changed (the journal is synced
            // already), inline: a mixture of 80 parts asks every part after each change of
            // the memory, and most are clean.
            let q = &self.quick[p];
            let part_settled = if q.clean && watch::generation_of(&self.segs, q) >= journal_from {
                let q = &mut self.quick[p];
                q.generation = generation;
                q.settled
            } else {
                self.ready(p, mem, shift, epoch_start, epoch_ns)
            };
            if watched {
                // A part left as this poll took it, clean at this generation, is stamped
                // (the next polls stand for looks at it); any other is looked at again.
                let q = &mut self.quick[p];
                if q.clean && q.generation == generation {
                    q.stamped = true;
                } else {
                    self.segs[i].moved.push(p as u32);
                }
                let s = &mut self.segs[i];
                if s.part_settled[pos] != part_settled {
                    s.part_settled[pos] = part_settled;
                    s.unsettled = if part_settled { s.unsettled - 1 } else { s.unsettled + 1 };
                }
            }
            settled &= part_settled;
            // `Quick::version` is the part's version as of this `ready` (a dense array).
            if self.quick[p].version == seen[pos] {
                continue;
            }
            let part = &self.segs[p];
            // The part's change since the sums last took it.
            match part.fixed_at(seen[pos]) {
                Some(old) => {
                    for ((sum, &now), &old) in sums.iter_mut().zip(&part.fixed).zip(old) {
                        *sum = sum.wrapping_add(now).wrapping_sub(old);
                    }
                }
                None => sum_again = true,
            }
            (seen[pos], moved) = (part.version, true);
        }
        if watched {
            // The parts not looked at are as settled as at their last look.
            settled = self.segs[i].unsettled == 0;
            let s = &mut self.segs[i];
            (s.stamp, s.polled_from) = (generation, journal_from);
        }
        if sum_again {
            sums.iter_mut().for_each(|x| *x = 0);
            for &p in &parts {
                for (sum, &x) in sums.iter_mut().zip(&self.segs[p].fixed) {
                    *sum += x;
                }
            }
        }
        let s = &mut self.segs[i];
        s.mix_stale |= moved;
        if settled && s.mix_stale {
            shares_from_sums(s, &sums, parts.len());
        }
        if settled {
            self.quick[i].generation = mem.generation();
        }
        let s = &mut self.segs[i];
        (s.settled, s.parts, s.seen, s.fixed) = (settled, Some(parts), seen, sums);
        settled
    }

    /// `ready` for mixture `i` kept on `base`: the base's sums (polling its parts once for
    /// every mixture kept on it) plus and minus its own few parts.
    fn ready_on_base(&mut self, i: usize, base: &MixBase, mem: &Memory, shift: u32, epoch_start: f64, epoch_ns: f64) -> bool {
        let base_settled = self.ready(base.of, mem, shift, epoch_start, epoch_ns);
        let mut settled = true;
        for &p in &base.plus {
            settled &= self.ready(p, mem, shift, epoch_start, epoch_ns);
        }
        if !base_settled {
            // Some part of the base is not settled: whether it is one this mixture leaves
            // out is asked of this mixture's own parts (as a plain mixture would).
            let parts = self.segs[i].parts.take().expect("a mixture");
            for &p in &parts {
                settled &= self.ready(p, mem, shift, epoch_start, epoch_ns);
            }
            self.segs[i].parts = Some(parts);
        }
        // The new sums are made in a scratch buffer and compared with the kept ones.
        let mut sums = std::mem::take(&mut self.mix_scratch);
        sums.clear();
        sums.extend_from_slice(&self.segs[base.of].fixed);
        for &p in &base.plus {
            for (sum, &x) in sums.iter_mut().zip(&self.segs[p].fixed) {
                *sum = sum.wrapping_add(x);
            }
        }
        for &p in &base.minus {
            for (sum, &x) in sums.iter_mut().zip(&self.segs[p].fixed) {
                *sum = sum.wrapping_sub(x);
            }
        }
        let count = self.segs[i].parts.as_ref().map_or(1, Vec::len);
        let s = &mut self.segs[i];
        s.mix_stale |= sums != s.fixed;
        if settled && s.mix_stale {
            shares_from_sums(s, &sums, count);
        }
        if settled {
            self.quick[i].generation = mem.generation();
        }
        let s = &mut self.segs[i];
        s.settled = settled;
        std::mem::swap(&mut s.fixed, &mut sums);
        self.mix_scratch = sums;
        settled
    }
}

/// A mixture's shares from the sums of its `count` parts' fixed-point shares.
fn shares_from_sums(s: &mut SegShare, sums: &[u64], count: usize) {
    let scale = 1.0 / (FIXED_ONE * count as f64);
    let n = s.share.len();
    let (share_sums, rest) = sums.split_at(n);
    for (x, &sum) in s.share.iter_mut().zip(share_sums) {
        *x = sum as f64 * scale;
    }
    for (x, &sum) in s.unarmed.iter_mut().zip(rest) {
        *x = sum as f64 * scale;
    }
    s.armed_frac = rest[n] as f64 * scale;
    s.mix_stale = false;
    s.version += 1;
}

/// What `a` has that `b` has not and what `b` has that `a` has not, both sorted (as
/// multisets), or `None` if that is more than `at_most` elements in all.
fn multiset_difference(a: &[usize], b: &[usize], at_most: usize) -> Option<(Vec<usize>, Vec<usize>)> {
    if a.len().abs_diff(b.len()) > at_most {
        return None;
    }
    let (mut plus, mut minus) = (Vec::new(), Vec::new());
    let (mut x, mut y) = (0, 0);
    while x < a.len() || y < b.len() {
        match (a.get(x), b.get(y)) {
            (Some(p), Some(q)) if p == q => {
                x += 1;
                y += 1;
            }
            (Some(p), q) if q.is_none_or(|q| p < q) => {
                plus.push(*p);
                x += 1;
            }
            (_, Some(q)) => {
                minus.push(*q);
                y += 1;
            }
            (_, None) => unreachable!("the loop's condition"),
        }
        if plus.len() + minus.len() > at_most {
            return None;
        }
    }
    Some((plus, minus))
}

#[cfg(test)]
mod tests {
    use super::multiset_difference;

    #[test]
    fn multiset_differences_count_repeats_and_stop_past_the_limit() {
        assert_eq!(multiset_difference(&[1, 2, 3], &[1, 2, 3], 0), Some((vec![], vec![])));
        assert_eq!(multiset_difference(&[0, 2, 3], &[1, 2, 3], 4), Some((vec![0], vec![1])));
        assert_eq!(multiset_difference(&[2, 2, 5], &[2, 5, 7], 4), Some((vec![2], vec![7])));
        assert_eq!(multiset_difference(&[0, 1, 2], &[3, 4, 5], 4), None);
        assert_eq!(multiset_difference(&[0], &[0, 1, 2, 3, 4, 5], 4), None, "lengths too far apart");
    }
}
