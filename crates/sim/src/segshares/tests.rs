//! Tests of the per-segment counts: journal-kept counts against full recounts, mixtures, sweeps
//! (docs/simulator.md, "The fast engine").

use super::pages::class;
use super::segment::MAX_RUNS;
use super::*;
use crate::memory::{NODE_MASK, UNPLACED};
use numalab_core::NodeId;

fn memory(nodes_of_pages: &[Option<NodeId>]) -> Memory {
    let mut m = Memory::new(nodes_of_pages.len() as u64, vec![1 << 20; 4]);
    for (p, n) in nodes_of_pages.iter().enumerate() {
        if let Some(n) = n {
            m.place(p as u64, *n);
        }
    }
    m
}

/// A segment counted once, then followed through the journal, against a fresh full count
/// after every change.
fn assert_same_as_recount(shares: &SegShares, i: usize, mem: &Memory, shift: u32) {
    let mut fresh = SegShare::new(shares.segs[i].seg, None, shares.segs[i].lines_on.len());
    fresh.runs_wanted = shares.segs[i].runs_wanted;
    fresh.count(mem.home(), shift);
    let s = &shares.segs[i];
    assert_eq!(
        (&s.lines_on, &s.armed_on, s.blocked_lines, s.settled),
        (&fresh.lines_on, &fresh.armed_on, fresh.blocked_lines, fresh.settled)
    );
    assert_eq!((&s.share, &s.unarmed, s.armed_frac), (&fresh.share, &fresh.unarmed, fresh.armed_frac));
    // Named armed pages, unless either side overflowed its set (the journal-kept side
    // names them again only once fewer than half remain).
    if !s.armed.overflowed && !fresh.armed.overflowed {
        let mut a: Vec<_> = s.armed.pages.clone();
        let mut b: Vec<_> = fresh.armed.pages.clone();
        a.sort_unstable();
        b.sort_unstable();
        assert_eq!(a, b, "armed pages and their lines");
    }
    if s.armed_frac > 0.0 {
        let mut rng = numalab_core::rng::stream(9, "segshares-recount", 0);
        let page = shares.draw_armed(i, &mut rng, mem.home(), shift);
        assert!(matches!(class(mem.home()[page as usize]), Some((_, true))), "drew page {page}, not armed");
    }
    if s.runs_ok {
        assert_eq!((&s.run_ends, &s.run_nodes), (&fresh.run_ends, &fresh.run_nodes));
    }
    if !s.runs_stale {
        assert_eq!(s.runs_ok, fresh.runs_ok, "runs are kept exactly when a count keeps them");
    }
}

#[test]
fn counts_lines_and_blocks_on_unplaced_pages() {
    // Pages of 4 lines; the segment covers lines 2..14: pages 0 (2 lines), 1, 2 (4 each),
    // 3 (2 lines).
    let mem = memory(&[Some(0), Some(1), Some(1), Some(0)]);
    let mut shares = SegShares::default();
    let i = shares.intern(Seg::contiguous(2, 12), 2);
    shares.want_runs(i);
    assert!(shares.ready(i, &mem, 2, 0.0, 1.0));
    assert_eq!(shares.share(i), [4.0 / 12.0, 8.0 / 12.0]);
    // Runs: positions 0..2 on node 0, 2..10 on node 1, 10..12 on node 0.
    assert_eq!(shares.runs(i), Some((&[2u64, 10, 12][..], &[0u8, 1, 0][..])));
    // A chunked segment: chunks of 3 lines every 8 lines from line 1 (lines 1-3, 9-11):
    // pages 0 and 2, then 2 again; runs merge across chunks on the same node.
    let mem = memory(&[Some(0), Some(1), Some(0), Some(1)]);
    let j = shares.intern(Seg { start: 1, chunk: 3, step: 8, chunks: 2 }, 2);
    shares.want_runs(j);
    assert!(shares.ready(j, &mem, 2, 0.0, 1.0));
    assert_eq!(shares.runs(j), Some((&[6u64][..], &[0u8][..])));
    let mem = memory(&[Some(0), Some(1), None, Some(0)]);
    let mut shares = SegShares::default();
    let i = shares.intern(Seg::contiguous(2, 12), 2);
    assert!(!shares.ready(i, &mem, 2, 0.0, 1.0), "an unplaced page blocks");
    assert!(!shares.ready(i, &mem, 2, 0.5, 1.0), "and the back-off waits an epoch before counting again");
}

#[test]
fn a_sweep_drops_what_no_thread_holds_and_its_index_goes_to_the_next_segment() {
    // Pages of 4 lines on nodes 0, 1, 0, 1, ...; blocks a, b, c of two pages each, and two
    // mixtures, of which only `m` is still held.
    let mut mem = memory(&(0..8).map(|p| Some((p % 2) as NodeId)).collect::<Vec<_>>());
    let mut shares = SegShares::default();
    let (a, b, c) =
        (shares.intern(Seg::contiguous(0, 8), 2), shares.intern(Seg::contiguous(8, 8), 2), shares.intern(Seg::contiguous(16, 8), 2));
    let m = shares.intern_mix(vec![a, b], 2);
    let old = shares.intern_mix(vec![b, c], 2);
    for i in [a, b, c, m, old] {
        assert!(shares.ready(i, &mem, 2, 0.0, 1.0));
    }
    assert!(shares.sweep_due(), "5 segments, at least twice the minimum kept");
    shares.sweep([m]);
    assert!(!shares.sweep_due(), "3 kept: the next sweep waits for 6");
    // The mixture held and its parts keep their indices; c and the other mixture left
    // the table and the buckets.
    assert_eq!((shares.intern(Seg::contiguous(0, 8), 2), shares.intern(Seg::contiguous(8, 8), 2)), (a, b));
    assert_eq!(shares.intern_mix(vec![a, b], 2), m);
    let mut freed = shares.free.clone();
    freed.sort_unstable();
    assert_eq!(freed, vec![c.min(old), c.max(old)]);
    assert!(shares.buckets.iter().chain([&shares.wide]).flatten().all(|&(i, _)| ![c, old].contains(&(i as usize))));
    // A page of c moves while it is out of the table; a new block takes a dropped index,
    // and c interned again counts afresh, to the counts of a full count.
    assert!(mem.migrate(4, 1));
    let d = shares.intern(Seg::contiguous(24, 8), 2);
    assert!([c, old].contains(&d));
    let c2 = shares.intern(Seg::contiguous(16, 8), 2);
    assert!([c, old].contains(&c2) && c2 != d);
    for i in [a, m, c2, d] {
        assert!(shares.ready(i, &mem, 2, 0.0, 1.0));
    }
    assert_eq!(shares.share(c2), [0.0, 1.0]);
    for i in [a, b, c2, d] {
        assert_same_as_recount(&shares, i, &mem, 2);
    }
    // The mixture held through the sweep follows its parts as before.
    assert!(mem.migrate(0, 1));
    assert!(shares.ready(m, &mem, 2, 0.0, 1.0));
    assert_eq!(shares.share(m), [0.25, 0.75]);
}

#[test]
fn armed_pages_are_counted_apart() {
    // Pages of 4 lines, lines 2..14 as above; page 1 (4 lines, node 1) armed.
    let mut mem = memory(&[Some(0), Some(1), Some(1), Some(0)]);
    mem.arm(1);
    let mut shares = SegShares::default();
    let i = shares.intern(Seg::contiguous(2, 12), 2);
    assert!(shares.ready(i, &mem, 2, 0.0, 1.0), "armed pages do not block");
    assert_eq!(shares.share(i), [4.0 / 12.0, 8.0 / 12.0]);
    assert_eq!(shares.unarmed(i), [4.0 / 12.0, 4.0 / 12.0]);
    assert_eq!(shares.armed_frac(i), 4.0 / 12.0);
    let mut rng = numalab_core::rng::stream(1, "segshares-test", 0);
    assert_eq!(shares.draw_armed(i, &mut rng, mem.home(), 2), 1);
    // The edge page 0 (2 of its 4 lines in the segment) armed too: drawn about a third
    // of the time.
    mem.arm(0);
    assert!(shares.ready(i, &mem, 2, 0.0, 1.0));
    assert_eq!(shares.armed_frac(i), 6.0 / 12.0);
    let zeros = (0..30_000).filter(|_| shares.draw_armed(i, &mut rng, mem.home(), 2) == 0).count();
    assert!((9_000..11_000).contains(&zeros), "page 0 drawn {zeros} times of 30000");
}

#[test]
fn too_many_armed_pages_are_drawn_by_rejection_then_named_again() {
    // 20 pages of 4 lines; 12 armed: more than the test's set of 8 names.
    let mut mem = memory(&(0..20).map(|p| Some((p % 2) as NodeId)).collect::<Vec<_>>());
    let mut shares = SegShares::default();
    let i = shares.intern(Seg::contiguous(0, 80), 2);
    assert!(shares.ready(i, &mem, 2, 0.0, 1.0));
    for p in 0..12 {
        mem.arm(p);
    }
    assert!(shares.ready(i, &mem, 2, 0.0, 1.0));
    assert!(shares.segs[i].armed.overflowed);
    assert_eq!(shares.armed_frac(i), 0.6);
    let mut rng = numalab_core::rng::stream(1, "segshares-test", 2);
    let mut hits = [0u32; 20];
    for _ in 0..12_000 {
        hits[shares.draw_armed(i, &mut rng, mem.home(), 2) as usize] += 1;
    }
    assert!(hits[12..].iter().all(|&h| h == 0), "only armed pages: {hits:?}");
    assert!(hits[..12].iter().all(|&h| (800..1200).contains(&h)), "each armed page about equally: {hits:?}");
    // Down to 3 armed pages (fewer than half of 8): named again by the next epoch's count.
    for p in 3..12 {
        mem.disarm(p);
    }
    assert!(shares.ready(i, &mem, 2, 0.0, 1.0));
    assert!(shares.segs[i].armed.overflowed, "not in the epoch of the last count");
    assert!(shares.ready(i, &mem, 2, 1.0, 1.0));
    assert!(!shares.segs[i].armed.overflowed);
    assert_eq!(shares.segs[i].armed.pages.len(), 3);
}

#[test]
fn mixtures_average_their_parts() {
    let mut mem = memory(&[Some(0), Some(0), Some(1), Some(1)]);
    mem.arm(3);
    let mut shares = SegShares::default();
    let a = shares.intern(Seg::contiguous(0, 8), 2);
    let b = shares.intern(Seg::contiguous(8, 8), 2);
    let m = shares.intern_mix(vec![a, b], 2);
    assert!(shares.ready(m, &mem, 2, 0.0, 1.0));
    assert_eq!(shares.share(m), [0.5, 0.5]);
    assert_eq!(shares.unarmed(m), [0.5, 0.25]);
    assert_eq!(shares.armed_frac(m), 0.25);
    let mut rng = numalab_core::rng::stream(1, "segshares-test", 1);
    assert_eq!(shares.draw_armed(m, &mut rng, mem.home(), 2), 3, "only part b has an armed page");
    // A change outside both parts leaves the mixture as it is; one inside moves it.
    let mut mem2 = Memory::new(6, vec![8, 8]);
    for p in 0..6 {
        mem2.place(p, if p < 2 { 0 } else { 1 });
    }
    mem2.arm(3);
    let mut shares = SegShares::default();
    let (a, b) = (shares.intern(Seg::contiguous(0, 8), 2), shares.intern(Seg::contiguous(8, 8), 2));
    let m = shares.intern_mix(vec![a, b], 2);
    assert!(shares.ready(m, &mem2, 2, 0.0, 1.0));
    mem2.arm(5);
    assert!(shares.ready(m, &mem2, 2, 0.0, 1.0));
    assert_eq!(shares.armed_frac(m), 0.25, "page 5 is in neither part");
    mem2.disarm(3);
    mem2.migrate(0, 1);
    assert!(shares.ready(m, &mem2, 2, 0.0, 1.0));
    assert_eq!((shares.armed_frac(m), shares.share(m)), (0.0, &[0.25, 0.75][..]));
}

#[derive(Clone, Debug)]
enum Op {
    Place(u64, NodeId),
    Arm(u64),
    Disarm(u64),
    Migrate(u64, NodeId),
    Replicate(u64, NodeId),
    Collapse(u64, NodeId),
    Release(u64),
}

proptest::proptest! {
    /// Counts followed through the journal equal a full count after every change, on
    /// contiguous and chunked segments, and a journal that was outrun falls back to a
    /// full count.
    #[test]
    fn journal_updates_equal_a_recount(
        ops in proptest::collection::vec((0u8..7, 0u64..12, 0 as NodeId..3), 1..60),
        seg in (0u64..20, 1u64..9, 0u64..4, 1u64..5),
    ) {
        let shift = 2;
        let seg = Seg { start: seg.0, chunk: seg.1, step: seg.1 + seg.2, chunks: seg.3 };
        let mut mem = Memory::new(16, vec![64; 3]);
        let mut shares = SegShares::default();
        let i = shares.intern(seg, 3);
        shares.want_runs(i);
        shares.ready(i, &mem, shift, 0.0, 1.0);
        for (epoch, (op, page, node)) in ops.into_iter().enumerate() {
            let op = match op {
                0 => Op::Place(page, node),
                1 => Op::Arm(page),
                2 => Op::Disarm(page),
                3 => Op::Migrate(page, node),
                4 => Op::Replicate(page, node),
                5 => Op::Collapse(page, node),
                _ => Op::Release(page),
            };
            let h = mem.home()[page as usize];
            match op {
                Op::Place(p, n) if h == UNPLACED => mem.place(p, n),
                Op::Arm(p) if h & NODE_MASK != UNPLACED => mem.arm(p),
                Op::Disarm(p) => mem.disarm(p),
                Op::Migrate(p, n) => { mem.migrate(p, n); }
                Op::Replicate(p, n) => { mem.replicate(p, n); }
                Op::Collapse(p, n) => { mem.collapse(p, n); }
                Op::Release(p) => { mem.release(p); }
                _ => {}
            }
            // A new epoch each time, so a stale runs list is remade.
            shares.ready(i, &mem, shift, epoch as f64 + 1.0, 1.0);
            assert_same_as_recount(&shares, i, &mem, shift);
        }
    }
}

proptest::proptest! {
    /// Several segments over the same pages, each needed only now and then: those the
    /// journal's buckets keep up to date, those that went idle and catch up by themselves
    /// (also when they went idle in the middle of a run of changes), and those listed again
    /// after that, all equal a full count whenever they are needed.
    #[test]
    fn segments_needed_now_and_then_equal_a_recount(
        ops in proptest::collection::vec((0u8..5, 0u64..12, 0 as NodeId..3), 1..80),
        segs in proptest::collection::vec((0u64..20, 1u64..9, 0u64..4, 1u64..5), 1..5),
        needed in proptest::collection::vec(0u8..16, 80),
    ) {
        let shift = 2;
        let mut mem = Memory::new(16, vec![64; 3]);
        let mut shares = SegShares::default();
        let ids: Vec<usize> = segs
            .iter()
            .map(|&(start, chunk, gap, chunks)| shares.intern(Seg { start, chunk, step: chunk + gap, chunks }, 3))
            .collect();
        for (k, &i) in ids.iter().enumerate() {
            if k % 2 == 0 {
                shares.want_runs(i);
            }
            shares.ready(i, &mem, shift, 0.0, 1.0);
        }
        for (epoch, (op, page, node)) in ops.into_iter().enumerate() {
            let h = mem.home()[page as usize];
            match op {
                0 if h == UNPLACED => mem.place(page, node),
                1 if h & NODE_MASK != UNPLACED => mem.arm(page),
                2 => mem.disarm(page),
                3 => { mem.migrate(page, node); }
                4 => { mem.release(page); }
                _ => {}
            }
            for (k, &i) in ids.iter().enumerate() {
                if needed[epoch] & (1 << k) != 0 {
                    shares.ready(i, &mem, shift, epoch as f64 + 1.0, 1.0);
                    assert_same_as_recount(&shares, i, &mem, shift);
                }
            }
        }
    }
}

/// A mixture's shares against a full count of each of its parts: exactly the sum of the
/// parts' fixed-point shares over their number, and within the rounding of that fixed point
/// of the average of their shares.
fn assert_mixture_as_recounted_parts(shares: &SegShares, m: usize, mem: &Memory, shift: u32) {
    let parts = shares.segs[m].parts.clone().expect("a mixture");
    let n = shares.segs[m].share.len();
    let mut sums = vec![0u64; 2 * n + 1];
    let mut average = vec![0.0; 2 * n + 1];
    for &p in &parts {
        let mut fresh = SegShare::new(shares.segs[p].seg, None, n);
        fresh.count(mem.home(), shift);
        for (k, (sum, &x)) in sums.iter_mut().zip(&fresh.fixed).enumerate() {
            *sum += x;
            let value = fresh.share.iter().chain(&fresh.unarmed).chain([&fresh.armed_frac]).nth(k).unwrap();
            average[k] += value / parts.len() as f64;
        }
    }
    let scale = 1.0 / (segment::FIXED_ONE * parts.len() as f64);
    let got: Vec<f64> = shares.share(m).iter().chain(shares.unarmed(m)).chain([&shares.armed_frac(m)]).copied().collect();
    let want: Vec<f64> = sums.iter().map(|&x| x as f64 * scale).collect();
    assert_eq!(got, want, "the sums of the parts' fixed-point shares");
    for (g, a) in got.iter().zip(&average) {
        assert!((g - a).abs() < 1e-13, "{got:?} against the average {average:?}");
    }
}

/// Sixteen pages placed on nodes 0, 1, 2, 0, ... (of three).
fn striped_memory() -> Memory {
    let mut mem = Memory::new(16, vec![64; 3]);
    for p in 0..16 {
        mem.place(p, (p % 3) as NodeId);
    }
    mem
}

/// The change `op` of the proptests below to `page`: arm, disarm, migrate to `node`,
/// replicate there, collapse there, or nothing (5 and up).
fn change_page(mem: &mut Memory, op: u8, page: u64, node: NodeId) {
    let h = mem.home()[page as usize];
    match op {
        0 if h & NODE_MASK != UNPLACED => mem.arm(page),
        1 => mem.disarm(page),
        2 => {
            mem.migrate(page, node);
        }
        3 => {
            mem.replicate(page, node);
        }
        4 => {
            mem.collapse(page, node);
        }
        _ => {}
    }
}

/// `(op, page, node)` for `change_page`, ops below `ops`, on the 12 first pages.
fn page_changes(ops: u8) -> impl proptest::strategy::Strategy<Value = Vec<(u8, u64, NodeId)>> {
    proptest::collection::vec((0u8..ops, 0u64..12, 0 as NodeId..3), 1..80)
}

/// Five to eight segments `(start, chunk, gap, chunks)` for `three_mixtures`.
fn mixture_segments() -> impl proptest::strategy::Strategy<Value = Vec<(u64, u64, u64, u64)>> {
    proptest::collection::vec((0u64..20, 1u64..9, 0u64..4, 1u64..5), 5..9)
}

/// The mixtures of the proptest below: of every segment, of all but the first, of all but the
/// last (the last two kept on the first as their base).
fn three_mixtures(shares: &mut SegShares, segs: &[(u64, u64, u64, u64)]) -> Vec<usize> {
    let ids: Vec<usize> =
        segs.iter().map(|&(start, chunk, gap, chunks)| shares.intern(Seg { start, chunk, step: chunk + gap, chunks }, 3)).collect();
    let k = ids.len();
    vec![shares.intern_mix(ids.clone(), 3), shares.intern_mix(ids[1..].to_vec(), 3), shares.intern_mix(ids[..k - 1].to_vec(), 3)]
}

proptest::proptest! {
    /// Mixtures (of all the segments, and of all but one, as a thread's escapes mix every
    /// block but its own) follow their parts through any changes of the memory and sweeps
    /// that keep one of them: whenever they are needed, their shares are those of their parts
    /// counted afresh, whether a mixture is plain or kept on another as its base.
    #[test]
    fn mixtures_equal_their_parts_counted_afresh(
        ops in page_changes(5),
        segs in mixture_segments(),
        needed in proptest::collection::vec(0u8..16, 80),
    ) {
        let shift = 2;
        let mut mem = striped_memory();
        let mut shares = SegShares::default();
        let mut mixes = three_mixtures(&mut shares, &segs);
        proptest::prop_assert!(shares.segs[mixes[0]].base.is_none());
        proptest::prop_assert!(shares.segs[mixes[1]].base.is_some() && shares.segs[mixes[2]].base.is_some());
        for (epoch, (op, page, node)) in ops.into_iter().enumerate() {
            change_page(&mut mem, op, page, node);
            if needed[epoch] & 8 != 0 {
                // A sweep keeps one mixture; the others are interned again (from their parts
                // as they stand) when next needed.
                let keep = mixes[epoch % 3];
                shares.sweep([keep]);
                mixes = three_mixtures(&mut shares, &segs);
                proptest::prop_assert_eq!(mixes[epoch % 3], keep);
            }
            for (k, &m) in mixes.iter().enumerate() {
                if needed[epoch] & (1 << k) != 0 && shares.ready(m, &mem, shift, epoch as f64 + 1.0, 1.0) {
                    assert_mixture_as_recounted_parts(&shares, m, &mem, shift);
                }
            }
        }
    }
}

proptest::proptest! {
    /// A mixture that watches its parts gives what one that polls every part gives, step for
    /// step: whether it is settled, its shares, and each segment's state as a poll of every
    /// part leaves it (its generation, which decides between the quick path, a catch-up and
    /// a count, and when a segment is idle; whether it is clean and settled; its version),
    /// through changes of the memory, idle parts leaving the buckets, and sweeps.
    #[test]
    fn watched_mixtures_poll_as_mixtures_that_look_at_every_part(
        ops in page_changes(6),
        segs in mixture_segments(),
        needed in proptest::collection::vec(0u8..32, 80),
    ) {
        let shift = 2;
        let mut mem = striped_memory();
        let (mut watched, mut polling) = (SegShares::default(), SegShares { no_watch: true, ..SegShares::default() });
        let mut mixes = three_mixtures(&mut watched, &segs);
        proptest::prop_assert_eq!(&three_mixtures(&mut polling, &segs), &mixes);
        // Watched unless a segment is a part twice (then every part is looked at).
        let mut parts = watched.segs[mixes[0]].parts.clone().unwrap();
        parts.sort_unstable();
        parts.dedup();
        let distinct = parts.len() == segs.len();
        proptest::prop_assert!(watched.segs[mixes[0]].watched == distinct && !polling.segs[mixes[0]].watched);
        // Parts that keep runs (a stride ranges over them): a part's runs wait for the next
        // epoch's count, so a poll can leave it unclean, to be looked at again.
        let want_runs = |shares: &mut SegShares, mixes: &[usize]| {
            for p in shares.segs[mixes[0]].parts.clone().unwrap() {
                if p % 2 == 0 {
                    shares.want_runs(p);
                }
            }
        };
        want_runs(&mut watched, &mixes);
        want_runs(&mut polling, &mixes);
        for (epoch, (op, page, node)) in ops.into_iter().enumerate() {
            change_page(&mut mem, op, page, node);
            if needed[epoch] & 8 != 0 {
                let keep = mixes[epoch % 3];
                watched.sweep([keep]);
                polling.sweep([keep]);
                mixes = three_mixtures(&mut watched, &segs);
                proptest::prop_assert_eq!(&three_mixtures(&mut polling, &segs), &mixes);
                want_runs(&mut watched, &mixes);
                want_runs(&mut polling, &mixes);
            }
            // A part needed on its own now and then (a thread's own block).
            // Two changes per epoch: a part whose runs were remade this epoch waits for the
            // next to have them remade again.
            let at = (epoch / 2) as f64 + 1.0;
            if needed[epoch] & 16 != 0 {
                let part = watched.segs[mixes[0]].parts.as_ref().unwrap()[epoch % 5];
                proptest::prop_assert_eq!(watched.ready(part, &mem, shift, at, 1.0), polling.ready(part, &mem, shift, at, 1.0));
            }
            for (k, &m) in mixes.iter().enumerate() {
                if needed[epoch] & (1 << k) != 0 {
                    proptest::prop_assert_eq!(watched.ready(m, &mem, shift, at, 1.0), polling.ready(m, &mem, shift, at, 1.0));
                    proptest::prop_assert_eq!((watched.share(m), watched.unarmed(m)), (polling.share(m), polling.unarmed(m)));
                }
            }
            proptest::prop_assert_eq!(watched.segs.len(), polling.segs.len());
            for i in 0..watched.segs.len() {
                let (a, b) = (&watched.quick[i], &polling.quick[i]);
                proptest::prop_assert_eq!(watch::generation_of(&watched.segs, a), b.generation, "segment {}", i);
                proptest::prop_assert_eq!((a.clean, a.settled, a.version), (b.clean, b.settled, b.version), "segment {}", i);
                proptest::prop_assert_eq!(watched.segs[i].listing, polling.segs[i].listing, "segment {}", i);
            }
        }
    }
}

#[test]
fn runs_are_dropped_past_the_limit() {
    // Pages of one line alternating nodes: one run per page.
    let pages = 2 * MAX_RUNS;
    let mem = memory(&(0..pages).map(|p| Some((p % 2) as NodeId)).collect::<Vec<_>>());
    let mut shares = SegShares::default();
    let i = shares.intern(Seg::contiguous(0, MAX_RUNS as u64), 2);
    shares.want_runs(i);
    assert!(shares.ready(i, &mem, 0, 0.0, 1.0));
    assert_eq!(shares.runs(i).unwrap().1.len(), MAX_RUNS);
    let j = shares.intern(Seg::contiguous(0, MAX_RUNS as u64 + 1), 2);
    shares.want_runs(j);
    assert!(shares.ready(j, &mem, 0, 0.0, 1.0));
    assert_eq!(shares.runs(j), None);
    assert_eq!(shares.share(j), [0.5 + 0.5 / (MAX_RUNS as f64 + 1.0), 0.5 - 0.5 / (MAX_RUNS as f64 + 1.0)]);
}
