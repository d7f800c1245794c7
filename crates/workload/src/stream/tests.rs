//! Tests of the reference streams (`stream.rs`): cursors, runs, strides and look-ahead.

use super::*;

#[test]
fn take_strided_issues_what_next_would() {
    let seg = Seg { start: 100, chunk: 7, step: 20, chunks: 5 };
    let mk = || Entry::new(Cursor::Strided { seg, pos: 3, start: 3, stride: 4 }, 1000, 0.3, AccessKind::Stream, None);
    let mut rng = numalab_core::rng::stream(1, "strided-test", 0);
    for k in [0u64, 1, 9, 36, 999] {
        let (mut a, mut b) = (mk(), mk());
        let by_next: Vec<(u64, bool)> = (0..k).map(|_| a.next(&mut rng)).collect();
        let mut by_take = Vec::new();
        assert!(b.take_strided(k, |line, write| by_take.push((line, write))));
        assert_eq!(by_take, by_next, "{k} references");
        assert_eq!(a, b);
    }
    let mut walk = Entry::new(Cursor::Fixed { line: 5 }, 10, 0.0, AccessKind::Stream, None);
    assert!(!walk.take_strided(3, |_, _| ()), "only strided cursors");
    assert_eq!(walk.issued, 0);
}

/// A walk of a chunked segment (`chunks` chunks of `chunk` lines, `gap` lines apart) and a
/// contiguous one of 37 lines, after `taken` references.
fn chunked_walk_after(chunk: u64, chunks: u64, gap: u64, taken: u64) -> Entry {
    let segs = vec![Seg { start: 1000, chunk, step: chunk + gap, chunks }, Seg::contiguous(50_000, 37)];
    let mut walk = Entry::new(Cursor::Walk { segs, seg: 0, pos: 0 }, 10_000, 0.0, AccessKind::Stream, None);
    let mut rng = numalab_core::rng::stream(1, "chunked-walk", 0);
    for _ in 0..taken {
        walk.next(&mut rng);
    }
    walk
}

proptest::proptest! {
    /// A walk's line `offset` references ahead is the line `next` gives after `offset`
    /// references, for any chunking, wrap and start.
    #[test]
    fn line_ahead_is_where_the_walk_will_be(
        chunk in 1u64..50, chunks in 1u64..4, gap in 0u64..30, taken in 0u64..500, offset in 0u64..700,
    ) {
        let mut walk = chunked_walk_after(chunk, chunks, gap, taken);
        let mut rng = numalab_core::rng::stream(1, "line-ahead-test", 0);
        let ahead = walk.line_ahead(offset).unwrap();
        for _ in 0..offset {
            walk.next(&mut rng);
        }
        proptest::prop_assert_eq!(ahead, walk.next(&mut rng).0);
    }
}

#[test]
fn line_ahead_knows_only_walks() {
    let random = Entry::new(Cursor::Random { seg: Seg::contiguous(0, 100) }, 10, 0.0, AccessKind::Stream, None);
    assert_eq!(random.line_ahead(3), None);
    assert!(random.lines_ahead([3u64].into_iter()).is_none());
}

proptest::proptest! {
    /// One pass gives `line_ahead` at every offset: across empty segments, chunked ones
    /// and several wraps of the whole walk.
    #[test]
    fn lines_ahead_is_line_ahead_at_each_offset(
        chunk in 1u64..50, chunks in 1u64..4, gap in 0u64..30, empty_at in 0usize..4, taken in 0u64..500,
        mut offsets in proptest::collection::vec(0u64..3000, 0..40),
    ) {
        let mut segs = vec![Seg { start: 1000, chunk, step: chunk + gap, chunks }, Seg::contiguous(50_000, 37), Seg::contiguous(90_000, 5)];
        segs.insert(empty_at.min(segs.len()), Seg::contiguous(70_000, 0));
        let mut walk = Entry::new(Cursor::Walk { segs, seg: 0, pos: 0 }, 10_000, 0.0, AccessKind::Stream, None);
        let mut rng = numalab_core::rng::stream(1, "lines-ahead-test", 0);
        for _ in 0..taken {
            walk.next(&mut rng);
        }
        offsets.sort_unstable();
        let one_by_one: Vec<u64> = offsets.iter().map(|&o| walk.line_ahead(o).unwrap()).collect();
        let in_one_pass: Vec<u64> = walk.lines_ahead(offsets.iter().copied()).unwrap().collect();
        proptest::prop_assert_eq!(in_one_pass, one_by_one);
    }
}

proptest::proptest! {
    /// Where `contiguous_ahead` answers, the lines ahead are its line plus the offset; it
    /// answers for every span inside the current chunk and for no longer one.
    #[test]
    fn contiguous_ahead_is_where_lines_ahead_are(
        chunk in 1u64..50, chunks in 1u64..4, gap in 0u64..30, taken in 0u64..500, refs in 1u64..120,
    ) {
        let walk = chunked_walk_after(chunk, chunks, gap, taken);
        let lines: Vec<u64> = walk.lines_ahead(0..refs).unwrap().collect();
        let (_, _, in_chunk) = walk.peek_run_and_chunk(1, u64::MAX).unwrap();
        match walk.contiguous_ahead(refs) {
            Some(line) => proptest::prop_assert_eq!(lines, (line..line + refs).collect::<Vec<u64>>()),
            None => proptest::prop_assert!(refs > in_chunk, "{refs} references inside a chunk of {in_chunk} left"),
        }
    }
}

#[test]
fn contiguous_ahead_knows_only_walks_without_escapes() {
    let walk = Entry::new(Cursor::Walk { segs: vec![Seg::contiguous(10, 100)], seg: 0, pos: 40 }, 1000, 0.0, AccessKind::Stream, None);
    assert_eq!(walk.contiguous_ahead(60), Some(50));
    assert_eq!(walk.contiguous_ahead(61), None, "past the segment's end the walk wraps");
    let random = Entry::new(Cursor::Random { seg: Seg::contiguous(0, 100) }, 10, 0.0, AccessKind::Stream, None);
    assert_eq!(random.contiguous_ahead(1), None);
    let escape = Escape { threshold: 1, others: vec![Seg::contiguous(500, 10)].into() };
    let escaping =
        Entry::new(Cursor::Walk { segs: vec![Seg::contiguous(10, 100)], seg: 0, pos: 0 }, 10, 0.0, AccessKind::Stream, Some(escape));
    assert_eq!(escaping.contiguous_ahead(1), None);
}

proptest::proptest! {
    /// Counting by runs gives what `take_strided` visits, label by label, and leaves the
    /// entry where it leaves it.
    #[test]
    fn take_strided_by_runs_counts_what_take_strided_visits(
        chunk in 1u64..40, chunks in 1u64..4, gap in 0u64..9, stride in 1u64..50,
        pos_seed in 0u64..1000,
        write_frac in proptest::prop_oneof![proptest::strategy::Just(0.0), proptest::strategy::Just(0.5), proptest::strategy::Just(1.0), 0.0f64..1.0],
        cuts in proptest::collection::vec(0u64..200, 0..40),
        ks in proptest::collection::vec(0u64..3000, 1..5),
        table_after in proptest::prop_oneof![proptest::strategy::Just(0u32), proptest::strategy::Just(2), proptest::strategy::Just(WRITE_TABLE_AFTER_PASSES)],
        dense_entries in proptest::prop_oneof![proptest::strategy::Just(0usize), proptest::strategy::Just(WRITE_TABLE_DENSE_ENTRIES)],
    ) {
        // Runs: cut the segment's positions at the given points, labels cycling 0..3.
        let (seg, pos, start, ends) = super::strided_case(chunk, chunks, gap, stride, pos_seed, &cuts);
        let labels: Vec<u8> = (0..ends.len()).map(|r| (r % 3) as u8).collect();
        let label_of = |line: u64| {
            // The position of an absolute line of the segment.
            let off = line - seg.start;
            let p = (off / seg.step) * seg.chunk + off % seg.step;
            labels[ends.partition_point(|&e| e <= p)] as usize
        };
        let mk = || Entry::new(Cursor::Strided { seg, pos, start, stride }, 1 << 20, write_frac, AccessKind::Stream, None);
        let (mut a, mut b) = (mk(), mk());
        let mut cache = StridePasses::with_table_settings(table_after, dense_entries);
        for k in ks {
            let (mut ca, mut wa) = ([0u64; 3], [0u64; 3]);
            a.take_strided(k, |line, write| {
                ca[label_of(line)] += 1;
                wa[label_of(line)] += u64::from(write);
            });
            let (mut cb, mut wb) = ([0u64; 3], [0u64; 3]);
            proptest::prop_assert!(b.take_strided_by_runs(k, (&ends, &labels), 7, &mut cache, &mut cb, &mut wb));
            proptest::prop_assert_eq!(ca, cb);
            proptest::prop_assert_eq!(wa, wb);
            proptest::prop_assert_eq!(&a, &b);
        }
    }
}

#[test]
fn take_strided_by_runs_refuses_other_cursors() {
    let mut walk = Entry::new(Cursor::Fixed { line: 5 }, 10, 0.0, AccessKind::Stream, None);
    let (mut c, mut w) = ([0u64; 1], [0u64; 1]);
    assert!(!walk.take_strided_by_runs(3, (&[1], &[0]), 0, &mut StridePasses::default(), &mut c, &mut w));
    assert_eq!((walk.issued, c), (0, [0]));
}

#[test]
fn next_line_known_is_what_next_gives() {
    let walk = Cursor::Walk { segs: vec![Seg::contiguous(60, 3), Seg { start: 200, chunk: 2, step: 64, chunks: 2 }], seg: 0, pos: 0 };
    let stride = Cursor::Strided { seg: Seg { start: 8, chunk: 5, step: 9, chunks: 3 }, pos: 0, start: 0, stride: 4 };
    for cursor in [walk, stride, Cursor::Fixed { line: 17 }] {
        let mut e = Entry::new(cursor, 40, 0.5, AccessKind::Stream, None);
        let mut r = rng();
        for _ in 0..20 {
            let known = e.next_line_known().expect("no draw decides it");
            assert_eq!(known, e.next(&mut r).0);
        }
    }
    let random = Entry::new(Cursor::Random { seg: Seg::contiguous(0, 8) }, 4, 0.0, AccessKind::Random, None);
    assert_eq!(random.next_line_known(), None);
}

#[test]
fn take_run_advances_a_strided_cursor_as_next_would() {
    let mk = || {
        let seg = Seg { start: 100, chunk: 7, step: 20, chunks: 5 };
        Entry::new(Cursor::Strided { seg, pos: 3, start: 3, stride: 4 }, 1000, 0.3, AccessKind::Stream, None)
    };
    let mut rng = numalab_core::rng::stream(1, "strided-test", 0);
    for k in [0u64, 1, 2, 8, 9, 35, 36, 100, 999] {
        let (mut a, mut b) = (mk(), mk());
        let mut writes = 0;
        for _ in 0..k {
            writes += u64::from(a.next(&mut rng).1);
        }
        assert_eq!(b.take_run(k), writes, "writes over {k} references");
        assert_eq!(a, b, "cursor after {k} references");
    }
}

fn rng() -> numalab_core::rng::StreamRng {
    numalab_core::rng::stream(1, "test", 0)
}

#[test]
fn runs_of_a_walk_match_reference_by_reference() {
    let segs = vec![Seg::contiguous(60, 10), Seg { start: 200, chunk: 3, step: 64, chunks: 2 }];
    let mk = || Entry::new(Cursor::Walk { segs: segs.clone(), seg: 0, pos: 0 }, 40, 0.3, AccessKind::Stream, None);
    let mut one = mk();
    let singles: Vec<(u64, bool)> = (0..40).map(|_| one.next(&mut rng())).collect();
    let mut batched = mk();
    let mut got = Vec::new();
    while got.len() < 40 {
        let (line, k) = batched.peek_run(64, 40 - got.len() as u64).unwrap();
        let i0 = got.len();
        let writes = batched.take_run(k);
        let expect: u64 = singles[i0..i0 + k as usize].iter().filter(|x| x.1).count() as u64;
        assert_eq!(writes, expect);
        for d in 0..k {
            got.push((line + d, false));
            assert_eq!(line + d, singles[i0 + d as usize].0, "run from {line} of {k}");
            assert_eq!((line + d) >> 6, line >> 6, "a run stays in one page");
        }
    }
    assert_eq!(batched.issued, one.issued);
}

#[test]
fn swrr_interleaves_in_proportion() {
    let mut s = Swrr::new([1, 1, 1]);
    let seq: Vec<usize> = (0..6).map(|_| s.pick()).collect();
    assert_eq!(seq, vec![0, 1, 2, 0, 1, 2]);
    let mut s = Swrr::new([5, 1, 1]);
    let seq: Vec<usize> = (0..7).map(|_| s.pick()).collect();
    assert_eq!(seq, vec![0, 0, 1, 0, 2, 0, 0]);
    assert_eq!(seq.iter().filter(|&&i| i == 0).count(), 5);
}

proptest::proptest! {
    /// The cycle property the simulator's bulk charging relies on: every `period` picks
    /// each entry is picked `cycle_picks` times and the state is back where it started.
    #[test]
    fn swrr_repeats_every_cycle(w in proptest::collection::vec(0u64..7, 1..6), scale in 1u64..1000) {
        let counts: Vec<u64> = w.iter().map(|&c| c * scale).collect();
        let mut s = Swrr::new(counts.clone());
        proptest::prop_assume!(s.period() > 0);
        let first: Vec<usize> = (0..s.period()).map(|_| s.pick()).collect();
        for (i, _) in counts.iter().enumerate() {
            proptest::prop_assert_eq!(first.iter().filter(|&&x| x == i).count() as u64, s.cycle_picks(i));
        }
        proptest::prop_assert!(s.current.iter().all(|&c| c == 0));
        proptest::prop_assert_eq!(s.picks_to_cycle_end(), s.period());
        let second: Vec<usize> = (0..s.period()).map(|_| s.pick()).collect();
        proptest::prop_assert_eq!(first, second);
    }
}

#[test]
fn write_rule_matches_the_spec() {
    // read_frac 0.5 -> every second reference is a write, starting with the second.
    let mut e = Entry::new(Cursor::Fixed { line: 0 }, 4, 0.5, AccessKind::Stream, None);
    let w: Vec<bool> = (0..4).map(|_| e.next(&mut rng()).1).collect();
    assert_eq!(w, vec![false, true, false, true]);
    let mut e = Entry::new(Cursor::Fixed { line: 0 }, 4, 0.0, AccessKind::Stream, None);
    assert!((0..10).all(|_| !e.next(&mut rng()).1));
}

#[test]
fn walk_wraps_over_segments_and_strided_restarts() {
    let mut c = Cursor::Walk { segs: vec![Seg::contiguous(10, 2), Seg::contiguous(0, 1)], seg: 0, pos: 0 };
    let lines: Vec<u64> = (0..5).map(|_| c.next_line(&mut rng()).0).collect();
    assert_eq!(lines, vec![10, 11, 0, 10, 11]);
    let mut s = Cursor::Strided { seg: Seg::contiguous(100, 6), pos: 0, start: 0, stride: 4 };
    let lines: Vec<u64> = (0..6).map(|_| s.next_line(&mut rng()).0).collect();
    assert_eq!(lines, vec![100, 104, 101, 105, 102, 103]);
    let cyc = Seg { start: 64, chunk: 64, step: 256, chunks: 3 };
    assert_eq!(cyc.lines(), 192);
    assert_eq!(cyc.line_at(64), 320);
    assert_eq!(cyc.line_at(130), 64 + 512 + 2);
}

#[test]
fn runs_spread_writes_by_the_floor_rule() {
    let mut c = Cursor::Runs { runs: vec![(7, 4, 2), (9, 2, 0)], idx: 0, pos: 0 };
    let got: Vec<(u64, Option<bool>)> = (0..6).map(|_| c.next_line(&mut rng())).collect();
    assert_eq!(got, vec![(7, Some(false)), (7, Some(true)), (7, Some(false)), (7, Some(true)), (9, Some(false)), (9, Some(false))]);
}
