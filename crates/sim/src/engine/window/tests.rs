//! Tests of a step's length (`window.rs`) and forecast (`forecast.rs`): the forecast's
//! offsets and its spans counted at once.

use super::super::forecast::{middles, sample_ahead, sample_one_by_one, FORECAST_SAMPLES};
use super::Shortest;
use crate::memory::{REPLICATED, UNPLACED};
use crate::metrics::StepBound;
use numalab_workload::stream::{AccessKind, Cursor, Seg};
use numalab_workload::Entry;
use proptest::prelude::*;

/// The forecast as it was before spans were counted at once: every entry's samples by
/// `sample_one_by_one`.
fn sampled_one_by_one(entries: &[Entry], window_refs: u64, left: u64, home: &[u8], shift: u32, counts: &mut [f64]) -> Option<()> {
    counts.iter_mut().for_each(|c| *c = 0.0);
    for e in entries.iter().filter(|e| e.remaining() > 0) {
        let refs = (window_refs as u128 * e.remaining() as u128).div_ceil(left as u128) as u64;
        sample_one_by_one(e, refs, refs.min(FORECAST_SAMPLES), home, shift, counts)?;
    }
    Some(())
}

proptest! {
    /// Counting a span of pages at once gives the samples' counts to the last bit, and
    /// `None` where a sample would meet an unplaced or replicated page: over walks in
    /// one chunk or across chunks and wraps, on pages of one node, of runs of nodes, and
    /// with odd pages among them.
    #[test]
    fn spans_counted_at_once_are_the_samples_counts(
        chunk in 1u64..400, chunks in 1u64..4, gap in 0u64..100, taken in 0u64..2000,
        second in 0u64..300, window_refs in 1u64..3000,
        runs in proptest::collection::vec((0u8..3, 1usize..12), 1..8),
        odd in proptest::option::of((0usize..64, prop_oneof![Just(UNPLACED), Just(REPLICATED | 1)])),
    ) {
        let segs = vec![Seg { start: 64, chunk, step: chunk + gap, chunks }, Seg::contiguous(2048, second)];
        let mut walk = Entry::new(Cursor::Walk { segs, seg: 0, pos: 0 }, 1 << 40, 0.0, AccessKind::Stream, None);
        let mut rng = numalab_core::rng::stream(1, "span-test", 0);
        for _ in 0..taken {
            walk.next(&mut rng);
        }
        // Pages of 16 lines: 256 pages cover every line the walk reaches.
        let mut home: Vec<u8> = runs.iter().cycle().flat_map(|&(node, len)| std::iter::repeat_n(node, len)).take(256).collect();
        if let Some((page, byte)) = odd {
            home[page] = byte;
        }
        let entries = [walk];
        let left = entries[0].remaining();
        let (mut at_once, mut one_by_one) = (vec![0.0; 3], vec![0.0; 3]);
        let got = sample_ahead(&entries, window_refs, left, &home, 4, &mut at_once);
        let want = sampled_one_by_one(&entries, window_refs, left, &home, 4, &mut one_by_one);
        prop_assert_eq!(got, want);
        if want.is_some() {
            prop_assert_eq!(at_once.iter().map(|c| c.to_bits()).collect::<Vec<_>>(), one_by_one.iter().map(|c| c.to_bits()).collect::<Vec<_>>());
        }
    }
}

/// The formula `middles` adds up, in 128 bits.
fn by_division(refs: u64, parts: u64) -> Vec<u64> {
    (0..parts).map(|i| ((2 * i + 1) as u128 * refs as u128 / (2 * parts) as u128) as u64).collect()
}

#[test]
fn middles_of_small_and_huge_walks() {
    assert_eq!(middles(10, 4).collect::<Vec<_>>(), [1, 3, 6, 8]);
    assert_eq!(middles(1, 1).collect::<Vec<_>>(), [0]);
    assert_eq!(middles(7, 0).count(), 0);
    assert_eq!(middles(u64::MAX, 32).collect::<Vec<_>>(), by_division(u64::MAX, 32));
}

proptest! {
    #[test]
    fn middles_are_the_divided_middles(refs in prop_oneof![0u64..100_000, any::<u64>()], parts in 1u64..=32) {
        prop_assert_eq!(middles(refs, parts).collect::<Vec<_>>(), by_division(refs, parts));
    }
}

/// A window's length comes down as `f64::min` would take it, and the bound named is the first
/// that brought it to its final length: an equal bound later leaves it, a NaN changes nothing.
#[test]
fn the_shortest_bound_is_the_first_to_reach_the_length() {
    let mut len = Shortest { epochs: 40.0, by: StepBound::NoFastForward };
    let caps = [
        (12.0, StepBound::SchedulerEvent, true),
        (f64::NAN, StepBound::PolicyTick, false),
        (30.0, StepBound::TaskTick, false),
        (3.0, StepBound::Arrival, true),
        (3.0, StepBound::LoadMove, false),
        (f64::INFINITY, StepBound::Sleep, false),
    ];
    let mut min = 40.0f64;
    for (epochs, by, lowers) in caps {
        assert_eq!(len.cap(epochs, by), lowers, "{epochs} by {by:?}");
        min = min.min(epochs);
        assert_eq!(len.epochs.to_bits(), min.to_bits());
    }
    assert_eq!(len.by, StepBound::Arrival);
}
