//! A thread's fast charging state: block scratch, expected counts until the flush (docs/simulator.md, "The fast engine").

use super::apportion::apportion;
use super::block::Plan;
use crate::hot::count_f64;
use crate::stridereach::StrideReach;
use crate::walkruns::WalkRuns;
use numalab_workload::stream::StridePasses;
use numalab_workload::sweep::StrideSweep;

/// Scratch and rounding state of one thread's fast charging.
#[derive(Clone, Debug, Default)]
pub(crate) struct FastState {
    /// Per node: expected accesses and writes charged by share since the last flush.
    pub(super) pending_acc: Vec<f64>,
    pub(super) pending_wr: Vec<f64>,
    /// References and writes behind `pending_*` (integers: what the flush must hand out).
    pending_refs: u64,
    pending_writes: u64,
    /// Per node: the expected accesses and writes of past epochs not yet made integer, and
    /// the references and writes behind them (`carry`, `settle`).
    carry_acc: Vec<f64>,
    carry_wr: Vec<f64>,
    carry_refs: u64,
    carry_writes: u64,
    /// The node the carried counts are charged from (the thread's CPU's node when they were
    /// carried): a thread that moves has them made integer first.
    carry_node: usize,
    /// Per node: rounding carried from one flush to the next, for accesses then writes.
    resid: Vec<f64>,
    /// Per node scratch of a flush.
    pub(super) counts: Vec<u64>,
    pub(super) writes: Vec<u64>,
    pub(super) share: Vec<f64>,
    caps_max: Vec<u64>,
    /// Per entry of the block being charged: what the block found out about it.
    pub(super) plans: Vec<Plan>,
    /// `plans` hold every entry's plan from a block of the current `issue_fast` call (whose
    /// shares and costs they were made with): `Hot::charges_nothing` may use them.
    pub(super) plans_of_call: bool,
    /// Per entry of the block (`n` each): its `shares_of`, where the block needed them.
    pub(super) entry_share: Vec<f64>,
    /// Per entry: what a whole pass of its stride puts in each run of one node.
    pub(super) stride_passes: Vec<StridePasses>,
    /// Per entry: its current pass's labels, for a segment of many runs.
    pub(super) stride_sweeps: Vec<StrideSweep>,
    /// Per entry: its references in the block at `P = ks_at[s]`, for the last two `P` looked
    /// at (slot `ks_next` is written next).
    pub(super) ks: [Vec<u64>; 2],
    pub(super) ks_at: [u128; 2],
    pub(super) ks_next: usize,
    /// The block's walks over their next pages, as runs of one node.
    pub(super) walks: WalkRuns,
    /// Per entry of the step: how far its stride was found to stay on fast pages.
    pub(super) stride_reach: StrideReach,
    /// Blocks this thread's charging planned, over the run (`EngineCounts::fast_blocks`).
    pub(crate) blocks: u64,
}

impl FastState {
    /// `k` references with `writes` writes among them, spread by `share`.
    pub(super) fn add_pending(&mut self, k: u64, writes: u64, share: &[f64]) {
        Self::spread(&mut self.pending_acc, &mut self.pending_wr, k, writes, share);
        self.pending_refs += k;
        self.pending_writes += writes;
    }

    /// `add_pending` by entry `i`'s row of `entry_share` (its shares as `shares_of` made them).
    pub(super) fn add_pending_by_entry(&mut self, i: usize, k: u64, writes: u64) {
        let n = self.pending_acc.len();
        Self::spread(&mut self.pending_acc, &mut self.pending_wr, k, writes, &self.entry_share[i * n..(i + 1) * n]);
        self.pending_refs += k;
        self.pending_writes += writes;
    }

    fn spread(pending_acc: &mut [f64], pending_wr: &mut [f64], k: u64, writes: u64, share: &[f64]) {
        for ((pa, pw), &f) in pending_acc.iter_mut().zip(pending_wr.iter_mut()).zip(share) {
            *pa += count_f64(k) * f;
            *pw += count_f64(writes) * f;
        }
    }

    /// A new step's entries, on `n` nodes.
    pub fn begin_step(&mut self, n: usize) {
        self.stride_reach.begin_step();
        self.reset(n);
    }

    /// Size the state for `n` nodes. Pending counts and rounding carry over from step to
    /// step: they are carried at every epoch's close and made integer when the counts are
    /// read (`carry`, `settle`).
    pub(super) fn reset(&mut self, n: usize) {
        if self.counts.len() == n {
            return;
        }
        self.pending_acc = vec![0.0; n];
        self.pending_wr = vec![0.0; n];
        (self.pending_refs, self.pending_writes) = (0, 0);
        self.carry_acc = vec![0.0; n];
        self.carry_wr = vec![0.0; n];
        (self.carry_refs, self.carry_writes) = (0, 0);
        self.resid = vec![0.0; 2 * n];
        self.counts = vec![0; n];
        self.writes = vec![0; n];
        self.share = vec![0.0; n];
        self.caps_max = vec![u64::MAX; n];
    }

    /// With references pending (charged by expectation since the last flush): each node's
    /// share of the epoch's expected accesses (`acc` and `wr` hold what was charged as
    /// integers) into `frac`, and the expected write fraction returned. `None`, `frac`
    /// untouched, when nothing is pending.
    pub fn expected_shares(&self, acc: &[u64], wr: &[u64], frac: &mut [f64]) -> Option<f64> {
        if self.pending_refs == 0 {
            return None;
        }
        let total = acc.iter().sum::<u64>() as f64 + self.pending_refs as f64;
        let writes = wr.iter().sum::<u64>() as f64 + self.pending_writes as f64;
        for ((f, &a), &p) in frac.iter_mut().zip(acc).zip(&self.pending_acc) {
            *f = (a as f64 + p) / total;
        }
        Some(writes / total)
    }

    /// The references pending since the last `carry` and the writes among them.
    pub fn pending(&self) -> (u64, u64) {
        (self.pending_refs, self.pending_writes)
    }

    /// Whether expected counts wait to be made integer (`settle`).
    pub fn has_carry(&self) -> bool {
        self.carry_refs > 0
    }

    /// The node the carried counts are charged from.
    pub fn carry_node(&self) -> usize {
        self.carry_node
    }

    /// Move the expected counts pending since the last `carry` (an epoch's, on CPU node
    /// `node`) to those that wait to be made integer: the next epoch's demand starts afresh,
    /// and the rounding waits until the counts are read (docs/simulator.md, "The fast
    /// engine"). Counts carried from another node must be settled first.
    pub fn carry(&mut self, node: usize) {
        if self.pending_refs == 0 {
            return;
        }
        assert!(
            self.carry_refs == 0 || self.carry_node == node,
            "counts carried from node {} settled before carrying from node {node}",
            self.carry_node
        );
        self.carry_node = node;
        for (c, p) in self.carry_acc.iter_mut().zip(self.pending_acc.iter_mut()) {
            *c += std::mem::take(p);
        }
        for (c, p) in self.carry_wr.iter_mut().zip(self.pending_wr.iter_mut()) {
            *c += std::mem::take(p);
        }
        self.carry_refs += self.pending_refs;
        self.carry_writes += self.pending_writes;
        (self.pending_refs, self.pending_writes) = (0, 0);
    }

    /// Turn the carried expected counts into integer accesses and writes per node, added to
    /// `acc` and `wr` (every reference exactly once, writes within accesses), carrying the
    /// rounding to the next settlement.
    pub fn settle(&mut self, acc: &mut [u64], wr: &mut [u64]) {
        if self.carry_refs == 0 {
            return;
        }
        let n = self.counts.len();
        let (ra, rw) = self.resid.split_at_mut(n);
        let inv = 1.0 / self.carry_refs as f64;
        self.share.iter_mut().zip(&self.carry_acc).for_each(|(s, p)| *s = p * inv);
        apportion(self.carry_refs, &self.share, &self.caps_max, ra, &mut self.counts);
        if self.carry_writes > 0 {
            let inv = 1.0 / self.carry_writes as f64;
            self.share.iter_mut().zip(&self.carry_wr).for_each(|(s, p)| *s = p * inv);
            apportion(self.carry_writes, &self.share, &self.counts, rw, &mut self.writes);
        } else {
            self.writes.iter_mut().for_each(|w| *w = 0);
        }
        for j in 0..n {
            acc[j] += self.counts[j];
            wr[j] += self.writes[j];
        }
        self.carry_acc.iter_mut().for_each(|x| *x = 0.0);
        self.carry_wr.iter_mut().for_each(|x| *x = 0.0);
        (self.carry_refs, self.carry_writes) = (0, 0);
    }

    /// `carry` then `settle`: the pending expected counts made integer now.
    #[cfg(test)]
    pub fn flush(&mut self, acc: &mut [u64], wr: &mut [u64]) {
        self.carry(self.carry_node);
        self.settle(acc, wr);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn carried_epochs_are_made_integer_once_with_every_reference() {
        let mut fs = FastState::default();
        fs.reset(2);
        // Two epochs on node 1: 5 references (2 writes) split 0.3 : 0.7, then 7 split evenly.
        fs.add_pending(5, 2, &[0.3, 0.7]);
        fs.carry(1);
        fs.add_pending(7, 0, &[0.5, 0.5]);
        assert_eq!(fs.pending(), (7, 0));
        fs.carry(1);
        assert_eq!((fs.pending(), fs.has_carry(), fs.carry_node()), ((0, 0), true, 1));
        // 1.5 + 3.5 and 3.5 + 3.5 accesses; 0.6 and 1.4 writes, the unit left over to the
        // larger remainder.
        let (mut acc, mut wr) = ([0u64; 2], [0u64; 2]);
        fs.settle(&mut acc, &mut wr);
        assert_eq!((acc, wr), ([5, 7], [1, 1]));
        assert!(!fs.has_carry());
        fs.settle(&mut acc, &mut wr);
        assert_eq!(acc, [5, 7], "nothing is made integer twice");
    }

    #[test]
    #[should_panic(expected = "settled before carrying from node 0")]
    fn counts_carried_from_one_node_are_not_mixed_with_another_s() {
        let mut fs = FastState::default();
        fs.reset(2);
        fs.add_pending(4, 0, &[0.5, 0.5]);
        fs.carry(1);
        fs.add_pending(4, 0, &[0.5, 0.5]);
        fs.carry(0);
    }

    #[test]
    fn expected_shares_count_what_is_pending_before_rounding() {
        let mut fs = FastState::default();
        fs.reset(2);
        let mut frac = [9.0, 9.0];
        assert_eq!(fs.expected_shares(&[3, 1], &[0, 0], &mut frac), None, "nothing pending");
        assert_eq!(frac, [9.0, 9.0]);
        // 4 integer accesses (3 on node 0, 1 write on node 1) and 6 pending split 1/3 : 2/3
        // with 3 writes: node 0 expects 3 + 2 of 10, node 1 expects 1 + 4.
        fs.add_pending(6, 3, &[1.0 / 3.0, 2.0 / 3.0]);
        let w = fs.expected_shares(&[3, 1], &[0, 1], &mut frac).unwrap();
        assert!((frac[0] - 0.5).abs() < 1e-12 && (frac[1] - 0.5).abs() < 1e-12, "{frac:?}");
        assert!((w - 0.4).abs() < 1e-12);
    }
}
