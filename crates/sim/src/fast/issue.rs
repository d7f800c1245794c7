//! The fast charging loop: proportional blocks, else stretches of single picks (docs/simulator.md, "The fast engine").

use super::div_u128;
use super::entry::FastEntry;
use super::state::FastState;
use crate::hot::{Hot, SlowRef, Tally};
use crate::segshares::SegShares;
use numalab_workload::Entry;

/// References charged one by one (most-behind pick) when a block cannot be charged in bulk,
/// before the block is tried again.
const EXACT_STRETCH: u64 = 64;

/// The entry furthest behind its proportional target `floor((I+1)·refs/T)` after the next
/// pick (`I` references issued so far of `T`); only entries with references left.
pub(crate) fn most_behind(entries: &[Entry], total_refs: u64) -> usize {
    let issued: u64 = entries.iter().map(|e| e.issued).sum();
    let mut best = (i128::MIN, 0);
    for (i, e) in entries.iter().enumerate() {
        if e.remaining() == 0 {
            continue;
        }
        let target = div_u128((issued as u128 + 1) * e.refs as u128, total_refs.max(1) as u128) as i128;
        let behind = target - e.issued as i128;
        if behind > best.0 {
            best = (behind, i);
        }
    }
    best.1
}

/// Inputs of the fast charging loop that stay fixed for one call.
pub(crate) struct FastStep<'s> {
    pub kinds: &'s [FastEntry],
    /// Node shares, settled for every segment the entries need.
    pub shares: &'s SegShares,
    /// References of the step's main entries (the `T` of the proportional targets).
    pub total_refs: u64,
    pub lpp: u64,
    /// `Memory::slowed` now (what a stride's scan of fast pages is valid for).
    pub slowed: u64,
}

impl Hot<'_> {
    /// Charge up to `max` references of a step's main entries the fast way: proportional
    /// blocks while they can be charged in bulk, stretches of single references (most-behind
    /// pick) otherwise. Returns what `issue` returns.
    pub fn issue_fast(
        &self,
        entries: &mut [Entry],
        step: &FastStep,
        fs: &mut FastState,
        max: u64,
        t: &mut Tally,
        mut clock: f64,
    ) -> (u64, f64, Option<SlowRef>) {
        let mut issued = 0;
        // Plans of an earlier call were made with other shares and costs.
        fs.plans_of_call = false;
        while issued < max {
            let nothing = self.charges_nothing(entries, step, fs, t.cost, max - issued, clock);
            if cfg!(debug_assertions) && nothing {
                // The block it skips would have charged nothing (and so changed nothing).
                let planned = self.block(entries, step, fs, max - issued, t, clock);
                assert!(matches!(planned, None | Some((0, _, None))), "a skipped block charges {planned:?}");
            }
            let block = if nothing { None } else { self.block(entries, step, fs, max - issued, t, clock) };
            if let Some((k, c, slow)) = block {
                if slow.is_some() {
                    return (issued + k, c, slow);
                }
                if k > 0 {
                    issued += k;
                    clock = c;
                    if clock >= self.end {
                        break;
                    }
                    continue;
                }
            }
            let refs = (max - issued).min(EXACT_STRETCH);
            let total = step.total_refs;
            let (k, c, slow) = self.issue::<false>(entries, |es| most_behind(es, total), refs, t, clock);
            issued += k;
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
    use crate::fast::block::sweeps;
    use crate::fast::EscapeMemo;
    use crate::memory::SLOW;
    use numalab_workload::stream::Cursor;

    /// The hot loop over a two-node memory of 4-line pages, with no epoch end.
    fn two_node_hot(mem: &crate::memory::Memory) -> Hot<'_> {
        Hot { home: mem.home(), shift: 2, n: 2, end: f64::INFINITY, gap_exp_ns: 0.0, slow_from: SLOW, maps: &[], node: 0 }
    }

    #[test]
    fn most_behind_follows_the_proportions() {
        use numalab_workload::stream::AccessKind;
        let mk = |refs| Entry::new(Cursor::Fixed { line: 0 }, refs, 0.0, AccessKind::Stream, None);
        let mut es = vec![mk(6), mk(3), mk(1)];
        let mut picks = [0u64; 3];
        for _ in 0..10 {
            let i = most_behind(&es, 10);
            es[i].issued += 1;
            picks[i] += 1;
        }
        assert_eq!(picks, [6, 3, 1]);
    }

    /// A uniformly random entry over a segment with armed pages: the references before each
    /// hinting fault are geometric with the armed share (mean (1 - p) / p), the faulting one
    /// lands on an armed page in proportion to its lines, and the others spread over the
    /// unarmed pages' nodes.
    #[test]
    fn random_references_fault_on_armed_pages_at_their_share() {
        use crate::memory::Memory;
        use numalab_workload::stream::{AccessKind, Seg};
        // 8 pages of 4 lines alternating nodes 0 and 1; pages 2 (node 0) and 5 (node 1)
        // armed: a quarter of the lines.
        let mut mem = Memory::new(8, vec![8, 8]);
        for p in 0..8 {
            mem.place(p, (p % 2) as u16);
        }
        mem.arm(2);
        mem.arm(5);
        let mut shares = SegShares::default();
        let mut entries = vec![Entry::new(Cursor::Random { seg: Seg::contiguous(0, 32) }, u64::MAX / 2, 0.0, AccessKind::Random, None)];
        let kinds: Vec<FastEntry> = entries.iter().map(|e| FastEntry::of(e, &mut shares, &mut EscapeMemo::default(), 2).unwrap()).collect();
        assert!(shares.ready(0, &mem, 2, 0.0, 1.0));
        assert_eq!(shares.armed_frac(0), 0.25);
        let step = FastStep { kinds: &kinds, shares: &shares, total_refs: entries[0].refs, lpp: 4, slowed: 0 };
        let hot = two_node_hot(&mem);
        // ns per reference by kind and node (only the random kind's row is read).
        let cost = [10.0, 20.0].repeat(3);
        let (mut acc, mut wr) = ([0u64; 2], [0u64; 2]);
        let mut rng = numalab_core::rng::stream(5, "fast-armed-test", 0);
        let mut fs = FastState::default();
        fs.reset(2);
        let (mut before, mut on_page_2, faults) = (0u64, 0u64, 4000u64);
        for _ in 0..faults {
            let mut t = Tally { rng: &mut rng, acc: &mut acc, wr: &mut wr, cost: &cost };
            let (issued, _, slow) = hot.issue_fast(&mut entries, &step, &mut fs, 1 << 40, &mut t, 0.0);
            let (page, write, kind) = slow.expect("a reference lands on an armed page");
            assert!(page == 2 || page == 5, "page {page} is not armed");
            assert_eq!((write, kind), (false, AccessKind::Random));
            before += issued - 1;
            on_page_2 += u64::from(page == 2);
        }
        let mean = before as f64 / faults as f64;
        assert!((mean - 3.0).abs() < 0.3, "mean references before a fault {mean}, expected 3");
        assert!((1800..2200).contains(&on_page_2), "page 2 took {on_page_2} of {faults} faults");
        fs.flush(&mut acc, &mut wr);
        assert_eq!(acc.iter().sum::<u64>(), before, "every reference that did not fault is charged once");
        assert!((acc[0] as f64 / before as f64 - 0.5).abs() < 0.01, "unarmed lines are half on each node: {acc:?}");
    }

    /// A stride over 256 pages alternating nodes (256 runs: swept) charges each reference on
    /// its page's node and its writes by the floor rule, through the whole fast path.
    #[test]
    fn a_stride_over_many_runs_is_charged_on_its_pages() {
        use crate::memory::Memory;
        use numalab_workload::stream::{AccessKind, Seg};
        let mut mem = Memory::new(256, vec![256, 256]);
        for p in 0..256 {
            mem.place(p, u16::from(p % 3 == 0));
        }
        let mut shares = SegShares::default();
        // 1024 lines (4 per page), stride 5 lines: passes cross pages unevenly.
        let cursor = Cursor::Strided { seg: Seg::contiguous(0, 1024), pos: 0, start: 0, stride: 5 };
        let mut entries = vec![Entry::new(cursor, 1 << 20, 0.375, AccessKind::Stream, None)];
        let mut reference = entries[0].clone();
        let kinds: Vec<FastEntry> = entries.iter().map(|e| FastEntry::of(e, &mut shares, &mut EscapeMemo::default(), 2).unwrap()).collect();
        assert!(shares.ready(0, &mem, 2, 0.0, 1.0));
        let runs = shares.runs(0).expect("runs of one node").0.len() as u64;
        assert!(sweeps(runs, 1024, 5), "{runs} runs");
        let step = FastStep { kinds: &kinds, shares: &shares, total_refs: entries[0].refs, lpp: 4, slowed: 0 };
        let hot = two_node_hot(&mem);
        let cost = [10.0, 20.0].repeat(3);
        let mut rng = numalab_core::rng::stream(5, "fast-sweep-test", 0);
        let mut fs = FastState::default();
        fs.reset(2);
        for k in [1u64, 7, 204, 205, 1000, 5000] {
            let (mut acc, mut wr) = ([0u64; 2], [0u64; 2]);
            let mut t = Tally { rng: &mut rng, acc: &mut acc, wr: &mut wr, cost: &cost };
            let (issued, _, slow) = hot.issue_fast(&mut entries, &step, &mut fs, k, &mut t, 0.0);
            assert_eq!((issued, slow.is_none()), (k, true));
            fs.flush(&mut acc, &mut wr);
            let (mut acc_ref, mut wr_ref) = ([0u64; 2], [0u64; 2]);
            reference.take_strided(k, |line, write| {
                let j = usize::from(mem.home()[(line >> 2) as usize]);
                acc_ref[j] += 1;
                wr_ref[j] += u64::from(write);
            });
            assert_eq!((acc, wr), (acc_ref, wr_ref), "{k} references");
        }
        assert_eq!(entries[0], reference);
    }

    /// A stride over a segment with armed pages stays on the fast path and takes each
    /// hinting fault at the reference that reaches an armed page, as the exact path takes it;
    /// every reference before it is charged on its page's node (docs/simulator.md, "Strides
    /// over armed pages").
    #[test]
    fn a_stride_faults_where_its_references_reach_armed_pages() {
        use crate::memory::Memory;
        use numalab_workload::stream::{AccessKind, Seg};
        let mut mem = Memory::new(256, vec![256, 256]);
        for p in 0..256 {
            mem.place(p, u16::from(p % 3 == 0));
        }
        // Page 0 holds the first reference: the step starts on an armed page.
        for p in (0..256).step_by(19) {
            mem.arm(p);
        }
        let mut shares = SegShares::default();
        let cursor = Cursor::Strided { seg: Seg::contiguous(0, 1024), pos: 0, start: 0, stride: 5 };
        let mut entries = vec![Entry::new(cursor, 1 << 20, 0.375, AccessKind::Stream, None)];
        let mut reference = entries[0].clone();
        let kinds: Vec<FastEntry> = entries.iter().map(|e| FastEntry::of(e, &mut shares, &mut EscapeMemo::default(), 2).unwrap()).collect();
        assert_eq!(kinds[0].needs().collect::<Vec<_>>(), [(0, false)], "armed pages do not keep a stride off the fast path");
        let cost = [10.0, 20.0].repeat(3);
        let mut rng = numalab_core::rng::stream(5, "fast-stride-armed-test", 0);
        let mut fs = FastState::default();
        fs.begin_step(2);
        let (mut acc, mut wr) = ([0u64; 2], [0u64; 2]);
        let (mut acc_ref, mut wr_ref) = ([0u64; 2], [0u64; 2]);
        let mut faults = 0;
        for _ in 0..60 {
            assert!(shares.ready(0, &mem, 2, 0.0, 1.0));
            assert!(shares.armed_frac(0) > 0.0 || faults == 14);
            let step = FastStep { kinds: &kinds, shares: &shares, total_refs: entries[0].refs, lpp: 4, slowed: mem.slowed() };
            let hot = two_node_hot(&mem);
            let mut t = Tally { rng: &mut rng, acc: &mut acc, wr: &mut wr, cost: &cost };
            let (issued, _, slow) = hot.issue_fast(&mut entries, &step, &mut fs, 3000, &mut t, 0.0);
            // What the exact path meets over the same references: the first on an armed
            // page, if any, must be the last of them and the one returned.
            let (mut first_slow, mut j) = (None, 0u64);
            reference.take_strided(issued, |line, write| {
                let h = mem.home()[(line >> 2) as usize];
                if first_slow.is_some() {
                    panic!("reference {j} follows a fault in one call");
                } else if h >= SLOW {
                    first_slow = Some((j, line >> 2, write));
                } else {
                    acc_ref[h as usize] += 1;
                    wr_ref[h as usize] += u64::from(write);
                }
                j += 1;
            });
            match slow {
                Some((page, write, _)) => {
                    assert_eq!(first_slow, Some((issued - 1, page, write)));
                    mem.disarm(page);
                    faults += 1;
                }
                None => assert_eq!(first_slow, None),
            }
        }
        assert_eq!(faults, 14, "every armed page faults once");
        fs.flush(&mut acc, &mut wr);
        assert_eq!((acc, wr), (acc_ref, wr_ref));
        assert_eq!(entries[0], reference);
    }
}
