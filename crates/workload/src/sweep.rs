//! Strided passes over a segment cut into many runs, followed start by start
//! (docs/simulator.md, "The fast engine": "Strided passes over many runs").
//!
//! A strided cursor's pass from start `s` references positions `s, s + stride, ...` of its
//! segment; after a whole pass the start moves one position on. `Entry::take_strided_by_runs`
//! recounts a pass's references per run whenever a run boundary falls between two starts, a
//! division per run: cheap when a segment has a few runs of one node, as under first-touch,
//! but when page migrations cut it into thousands of runs, every few starts cost a recount of
//! all of them. Here a thread keeps instead the node label of each reference of its current
//! pass. Moving the start by one changes the label of exactly one reference per run boundary
//! congruent to the new start modulo the stride (the reference that stood on the run's last
//! position now stands on the next run's first), so a whole sweep of starts costs one update
//! per boundary plus one label per reference of the first pass. The boundaries ordered by
//! their residue are shared by every thread that strides over the segment
//! ([`StrideCrossings`]).

use crate::stream::{Cursor, Entry};

/// Bits of a packed crossing that hold the run index.
const RUN_BITS: u32 = 24;
/// The floor rule's phases are `i·w mod 2^32`.
const PHASE_MASK: u64 = 0xFFFF_FFFF;

/// The run boundaries of one segment ordered by their position modulo one stride: the starts
/// at which a reference of a pass leaves one run for the next.
#[derive(Clone, Debug)]
pub struct StrideCrossings {
    stride: u64,
    /// `residue << RUN_BITS | run`, ascending: run `run` ends at a position congruent to
    /// `residue` modulo the stride.
    packed: Vec<u64>,
}

impl StrideCrossings {
    /// The crossings of the runs ending at `ends` for `stride`; `None` when the numbers do not
    /// fit the packing (more than 2^24 runs, or a stride of 2^40 positions or more).
    pub fn new(ends: &[u64], stride: u64) -> Option<StrideCrossings> {
        if stride == 0 || ends.len() >= 1 << RUN_BITS || stride >= 1 << (64 - RUN_BITS) {
            return None;
        }
        let packed = if stride as usize <= 4 * ends.len() + 1024 {
            by_residue(ends, stride)
        } else {
            let mut packed: Vec<u64> = ends.iter().enumerate().map(|(r, &e)| ((e % stride) << RUN_BITS) | r as u64).collect();
            packed.sort_unstable();
            packed
        };
        Some(StrideCrossings { stride, packed })
    }

    pub fn stride(&self) -> u64 {
        self.stride
    }

    fn residue(&self, c: usize) -> u64 {
        self.packed[c] >> RUN_BITS
    }

    fn run(&self, c: usize) -> usize {
        (self.packed[c] & ((1 << RUN_BITS) - 1)) as usize
    }

    /// The first crossing whose residue is above `s`.
    fn first_above(&self, s: u64) -> usize {
        self.packed.partition_point(|&c| c >> RUN_BITS <= s)
    }
}

/// `(residue << RUN_BITS) | run` for every run, ascending, by a counting sort on the residue
/// (`stride` buckets; the runs go into them in order, so each bucket holds its runs
/// ascending): the same vector as sorting the packed values. A segment whose pages keep
/// moving has its runs remade in most epochs, and each sweeping stride then orders them
/// again; the sort was 4 % of sp-like's instructions under autonuma (docs/benchmarks.md).
fn by_residue(ends: &[u64], stride: u64) -> Vec<u64> {
    let residues: Vec<u64> = ends.iter().map(|&e| e % stride).collect();
    let mut next = vec![0usize; stride as usize + 1];
    for &res in &residues {
        next[res as usize + 1] += 1;
    }
    for k in 1..next.len() {
        next[k] += next[k - 1];
    }
    let mut packed = vec![0u64; ends.len()];
    for (run, &res) in residues.iter().enumerate() {
        let slot = &mut next[res as usize];
        packed[*slot] = (res << RUN_BITS) | run as u64;
        *slot += 1;
    }
    packed
}

/// One thread's view of its current pass: the label of each of its references.
#[derive(Clone, Debug, Default)]
pub struct StrideSweep {
    /// Names the runs and stride the labels below are for (the caller's key).
    key: u64,
    stride: u64,
    /// The pass's start, and whether the fields below describe it.
    start: u64,
    valid: bool,
    /// Per reference `q` of the pass (at `start + q·stride`): its run's label.
    labels: Vec<u8>,
    /// Per label: the pass's references with that label.
    per_label: Vec<u64>,
    /// The first crossing whose residue is above `start`.
    next: usize,
    /// Per 64 references of the pass, one word per label (`label_count` to a row): bit `q`
    /// set when reference `q` of those has that label. Word-major, so a whole pass's write
    /// count reads one row per 64 references. A whole pass's writes on a label are the
    /// bits its mask shares with the pass's write bits ([`WriteWords`]).
    masks: Vec<u64>,
    words: usize,
    label_count: usize,
    /// The write bits of 64 consecutive references for this entry's write fraction (made
    /// again when another fraction uses the sweep).
    write_words: WriteWords,
}

/// The floor rule's write bits of 64 consecutive references as a function of the first one's
/// phase `φ = i·w mod 2^32`: reference `i + q` writes when `(φ + q·w) mod 2^32 ≥ 2^32 - w`,
/// so bit `q` turns on at `φ = -(q + 1)·w` and off at `φ = -q·w` (modulo 2^32). Between the
/// (at most 65) points where some bit turns, the 64 bits do not change: a sorted list of
/// those points and the word after each gives the bits with one binary search.
#[derive(Clone, Debug, Default)]
struct WriteWords {
    write_fp: u64,
    /// Ascending, the first 0.
    bounds: Vec<u64>,
    /// `words[k]`: the write bits for every phase in `bounds[k] .. bounds[k + 1]`.
    words: Vec<u64>,
    /// Per 2^24 phases (the phase's top 8 bits): the index of the last bound at or below
    /// the first phase of that range, where `at` starts looking (at most 65 bounds over 256
    /// ranges, so it rarely steps on).
    start: Vec<u8>,
}

impl WriteWords {
    fn new(write_fp: u64) -> WriteWords {
        // Bit q turns on where bit q + 1 of the previous reference turned off: the points
        // are the 65 phases -q·w, q = 0..=64 (a word of 64 floor-rule bits takes at most 65
        // values).
        let mut bounds: Vec<u64> = (0..=64u64).map(|q| 0u64.wrapping_sub(q.wrapping_mul(write_fp)) & PHASE_MASK).collect();
        bounds.sort_unstable();
        bounds.dedup();
        let words = bounds
            .iter()
            .map(|&phase| {
                (0..64u64).fold(0u64, |word, q| word | (((((phase + q.wrapping_mul(write_fp)) & PHASE_MASK) + write_fp) >> 32) << q))
            })
            .collect();
        let start = (0..256u64).map(|r| (bounds.partition_point(|&b| b <= r << 24) - 1) as u8).collect();
        WriteWords { write_fp, bounds, words, start }
    }

    /// The write bits of references `i .. i + 64` for `i` of phase `phase`.
    fn at(&self, phase: u64) -> u64 {
        let mut k = self.start[(phase >> 24) as usize] as usize;
        while k + 1 < self.bounds.len() && self.bounds[k + 1] <= phase {
            k += 1;
        }
        self.words[k]
    }
}

impl StrideSweep {
    /// Labels for the pass from `s`, looked up run by run (the runs' ends are ascending, and
    /// so are the pass's positions).
    fn fill(&mut self, on: &SweepRuns<'_>, label_count: usize, s: u64) {
        let SweepRuns { ends, labels, crossings, key } = *on;
        let (lines, stride) = (*ends.last().expect("at least one run"), crossings.stride);
        self.labels.clear();
        self.per_label.clear();
        self.per_label.resize(label_count, 0);
        let mut r = 0;
        let mut p = s;
        while p < lines {
            // The run of position p, galloping from the last one: a pass crosses about
            // runs / references runs between two references.
            let mut span = 1;
            while r + span < ends.len() && ends[r + span - 1] <= p {
                r += span;
                span *= 2;
            }
            r += ends[r..(r + span).min(ends.len())].partition_point(|&e| e <= p);
            let label = labels[r];
            self.labels.push(label);
            self.per_label[label as usize] += 1;
            p += stride;
        }
        self.words = self.labels.len().div_ceil(64);
        self.masks.clear();
        self.masks.resize(label_count * self.words, 0);
        self.label_count = label_count;
        for (q, &label) in self.labels.iter().enumerate() {
            self.masks[q / 64 * label_count + label as usize] |= 1 << (q % 64);
        }
        self.next = crossings.first_above(s);
        (self.key, self.stride, self.start, self.valid) = (key, stride, s, true);
    }

    /// Move the pass one start on, to `s` (the previous start plus one): every run ending at
    /// a position congruent to `s` hands one reference to the next run, and the last run's
    /// hands it out of the segment (the pass gets one reference shorter).
    fn advance(&mut self, on: &SweepRuns<'_>, s: u64) {
        let SweepRuns { ends, labels, crossings, .. } = *on;
        let stride = self.stride;
        while self.next < crossings.packed.len() && crossings.residue(self.next) == s {
            let r = crossings.run(self.next);
            let q = ((ends[r] - s) / stride) as usize;
            let from = labels[r];
            debug_assert_eq!(self.labels[q], from, "the reference at the run's last position");
            self.per_label[from as usize] -= 1;
            let (word, bit) = (q / 64, 1u64 << (q % 64));
            self.masks[word * self.label_count + from as usize] &= !bit;
            match labels.get(r + 1) {
                Some(&to) => {
                    self.labels[q] = to;
                    self.per_label[to as usize] += 1;
                    self.masks[word * self.label_count + to as usize] |= bit;
                }
                None => {
                    debug_assert_eq!(q + 1, self.labels.len(), "the pass's last reference");
                    self.labels.pop();
                }
            }
            self.next += 1;
        }
        self.start = s;
    }

    /// Adds to `counts[label]` and `writes[label]` what references `q0 .. q1` of the pass
    /// (`q0 < q1`; reference `q0` is the entry's reference `i`) issue on each label, from the
    /// masks: per word of 64 references, the bits of the range each label's mask holds, and
    /// of those the bits the floor rule writes, instead of one step per reference: the
    /// engine's calls start and end inside passes, and under autonuma bt-like's parts of
    /// passes held 1.13 G of its 8.08 G swept references (docs/benchmarks.md, stop 40).
    fn count_part(&self, q0: usize, q1: usize, i: u64, write_fp: u64, counts: &mut [u64], writes: &mut [u64]) {
        debug_assert!(q0 < q1 && q1 <= self.labels.len());
        let label_count = self.label_count;
        let (first_word, last_word) = (q0 / 64, (q1 - 1) / 64);
        // The word's bit 0 is the entry's reference `i - q0 % 64` (wrapping: only the phase
        // modulo 2^32 is read, and 2^32 divides 2^64).
        let mut phase = i.wrapping_sub((q0 % 64) as u64).wrapping_mul(write_fp) & PHASE_MASK;
        let phase_step = 64u64.wrapping_mul(write_fp) & PHASE_MASK;
        for word in first_word..=last_word {
            let lo = if word == first_word { q0 % 64 } else { 0 };
            let hi = if word == last_word { (q1 - 1) % 64 + 1 } else { 64 };
            let range = (u64::MAX >> (64 - (hi - lo))) << lo;
            let written = if write_fp != 0 { self.write_words.at(phase) & range } else { 0 };
            let row = &self.masks[word * label_count..(word + 1) * label_count];
            for ((c, w), &mask) in counts.iter_mut().zip(writes.iter_mut()).zip(row) {
                *c += u64::from((mask & range).count_ones());
                *w += u64::from((mask & written).count_ones());
            }
            phase = (phase + phase_step) & PHASE_MASK;
        }
    }
}

/// What a sweep counts against: a segment's runs of one node (as for
/// `Entry::take_strided_by_runs`), their crossings for the cursor's stride, and a key naming
/// them (the caller changes it when the runs change).
#[derive(Clone, Copy, Debug)]
pub struct SweepRuns<'a> {
    pub ends: &'a [u64],
    pub labels: &'a [u8],
    pub crossings: &'a StrideCrossings,
    pub key: u64,
}

impl Entry {
    /// `take_strided` counted from a [`StrideSweep`]: adds to `counts[label]` and
    /// `writes[label]` what `k` calls of `next` would reference on each label of the runs.
    /// Returns false, consuming nothing, for any cursor but a strided one without escapes whose
    /// position lies on its pass, or crossings for another stride.
    pub fn take_strided_by_sweep(
        &mut self,
        k: u64,
        on: SweepRuns<'_>,
        sweep: &mut StrideSweep,
        counts: &mut [u64],
        writes: &mut [u64],
    ) -> bool {
        if self.escape.is_some() {
            return false;
        }
        let write_fp = self.write_fp();
        let mut i = self.issued;
        let Cursor::Strided { seg, pos, start, stride } = &mut self.cursor else { return false };
        let (lines, stride) = (seg.lines(), *stride);
        if *pos < *start || (*pos - *start) % stride != 0 || on.ends.last() != Some(&lines) || on.crossings.stride != stride {
            return false;
        }
        if write_fp != 0 && sweep.write_words.write_fp != write_fp {
            sweep.write_words = WriteWords::new(write_fp);
        }
        let starts = stride.min(lines).max(1);
        let mut left = k;
        while left > 0 {
            let s = *start;
            if !(sweep.valid && sweep.key == on.key && sweep.stride == stride && sweep.start == s) {
                sweep.fill(&on, counts.len(), s);
            }
            let in_pass = sweep.labels.len() as u64;
            let q0 = (*pos - s) / stride;
            let q1 = in_pass.min(q0 + left);
            let whole = q0 == 0 && q1 == in_pass;
            if whole {
                counts.iter_mut().zip(&sweep.per_label).for_each(|(c, &n)| *c += n);
            }
            if whole && write_fp != 0 {
                // Reference q of the pass is reference i + q of the entry: per label, the
                // write bits its mask keeps, 64 references at a time.
                let mut phase = i.wrapping_mul(write_fp) & PHASE_MASK;
                let phase_step = 64u64.wrapping_mul(write_fp) & PHASE_MASK;
                for row in sweep.masks.chunks_exact(sweep.label_count) {
                    let written = sweep.write_words.at(phase);
                    for (w, &mask) in writes.iter_mut().zip(row) {
                        *w += u64::from((mask & written).count_ones());
                    }
                    phase = (phase + phase_step) & PHASE_MASK;
                }
            } else if !whole {
                sweep.count_part(q0 as usize, q1 as usize, i, write_fp, counts, writes);
            }
            i += q1 - q0;
            left -= q1 - q0;
            if q1 == in_pass {
                let next = (s + 1) % starts;
                if next == 0 {
                    // A new sweep: labelled afresh at the next call.
                    sweep.valid = false;
                } else {
                    sweep.advance(&on, next);
                }
                *start = next;
                *pos = next;
            } else {
                *pos = s + q1 * stride;
            }
        }
        self.issued += k;
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stream::{is_write, AccessKind, Seg};

    proptest::proptest! {
        /// Counting from the sweep gives what `take_strided` visits, label by label, and
        /// leaves the entry where it leaves it, across whole sweeps and runs that change.
        #[test]
        fn take_strided_by_sweep_counts_what_take_strided_visits(
            chunk in 1u64..40, chunks in 1u64..4, gap in 0u64..9, stride in 1u64..50,
            pos_seed in 0u64..1000,
            write_frac in proptest::prop_oneof![proptest::strategy::Just(0.0), proptest::strategy::Just(0.5), proptest::strategy::Just(0.25), proptest::strategy::Just(0.375), proptest::strategy::Just(1.0), 0.0f64..1.0],
            cuts in proptest::collection::vec(0u64..200, 0..40),
            label_count in proptest::prop_oneof![proptest::strategy::Just(3usize), proptest::strategy::Just(12)],
            ks in proptest::collection::vec((0u64..3000, proptest::bool::ANY), 1..6),
        ) {
            // Runs: cut the segment's positions at the given points, labels cycling; a
            // recut (the second element of a `ks` item) shifts the labels by one.
            let (seg, pos, start, ends) = crate::stream::strided_case(chunk, chunks, gap, stride, pos_seed, &cuts);
            let crossings = StrideCrossings::new(&ends, stride).unwrap();
            let mk = || Entry::new(Cursor::Strided { seg, pos, start, stride }, 1 << 20, write_frac, AccessKind::Stream, None);
            let (mut a, mut b) = (mk(), mk());
            let mut sweep = StrideSweep::default();
            let mut shift = 0;
            for (k, recut) in ks {
                if recut {
                    shift += 1;
                }
                let labels: Vec<u8> = (0..ends.len()).map(|r| ((r + shift) % label_count) as u8).collect();
                let label_of = |line: u64| {
                    let off = line - seg.start;
                    let p = (off / seg.step) * seg.chunk + off % seg.step;
                    labels[ends.partition_point(|&e| e <= p)] as usize
                };
                let (mut ca, mut wa) = (vec![0u64; label_count], vec![0u64; label_count]);
                a.take_strided(k, |line, write| {
                    ca[label_of(line)] += 1;
                    wa[label_of(line)] += u64::from(write);
                });
                let (mut cb, mut wb) = (vec![0u64; label_count], vec![0u64; label_count]);
                let on = SweepRuns { ends: &ends, labels: &labels, crossings: &crossings, key: shift as u64 };
                proptest::prop_assert!(b.take_strided_by_sweep(k, on, &mut sweep, &mut cb, &mut wb));
                proptest::prop_assert_eq!(ca, cb);
                proptest::prop_assert_eq!(wa, wb);
                proptest::prop_assert_eq!(&a, &b);
            }
        }
    }

    /// A worked example: 10 positions in runs [0, 3) on node 0, [3, 7) on 1, [7, 10) on 0,
    /// stride 4. The pass from 0 references 0, 4, 8 (labels 0, 1, 0); from 1: 1, 5, 9
    /// (0, 1, 0); from 2: 2, 6 (0, 1; position 10 is past the end); from 3: 3, 7 (1, 0).
    #[test]
    fn a_sweep_moves_one_reference_per_boundary() {
        let (ends, labels) = (vec![3u64, 7, 10], vec![0u8, 1, 0]);
        let crossings = StrideCrossings::new(&ends, 4).unwrap();
        // Residues: 3 % 4 = 3, 7 % 4 = 3, 10 % 4 = 2.
        assert_eq!(crossings.packed.iter().map(|c| c >> RUN_BITS).collect::<Vec<_>>(), [2, 3, 3]);
        let mut sweep = StrideSweep::default();
        // One mask per label, a bit per reference of the pass.
        let on = SweepRuns { ends: &ends, labels: &labels, crossings: &crossings, key: 1 };
        sweep.fill(&on, 2, 0);
        assert_eq!((sweep.labels.as_slice(), sweep.per_label.as_slice()), (&[0u8, 1, 0][..], &[2u64, 1][..]));
        assert_eq!(sweep.masks, [0b101, 0b010]);
        sweep.advance(&on, 1);
        assert_eq!(sweep.labels, [0, 1, 0]);
        sweep.advance(&on, 2);
        assert_eq!((sweep.labels.as_slice(), sweep.per_label.as_slice()), (&[0u8, 1][..], &[1u64, 1][..]));
        assert_eq!(sweep.masks, [0b01, 0b10]);
        sweep.advance(&on, 3);
        assert_eq!((sweep.labels.as_slice(), sweep.per_label.as_slice()), (&[1u8, 0][..], &[1u64, 1][..]));
        assert_eq!(sweep.masks, [0b10, 0b01]);
    }

    #[test]
    fn take_strided_by_sweep_refuses_other_cursors_and_strides() {
        let crossings = StrideCrossings::new(&[10], 4).unwrap();
        let on = SweepRuns { ends: &[10], labels: &[0], crossings: &crossings, key: 0 };
        let (mut c, mut w) = ([0u64; 1], [0u64; 1]);
        let mut walk = Entry::new(Cursor::Fixed { line: 5 }, 10, 0.0, AccessKind::Stream, None);
        assert!(!walk.take_strided_by_sweep(3, on, &mut StrideSweep::default(), &mut c, &mut w));
        let seg = Seg::contiguous(0, 10);
        let mut other = Entry::new(Cursor::Strided { seg, pos: 0, start: 0, stride: 3 }, 10, 0.0, AccessKind::Stream, None);
        assert!(!other.take_strided_by_sweep(3, on, &mut StrideSweep::default(), &mut c, &mut w));
        assert_eq!((walk.issued, other.issued, c), (0, 0, [0]));
    }

    /// The table's word against 64 applications of the floor rule, at every bound, just
    /// below it, and at phases drawn across the circle.
    #[test]
    fn write_words_are_the_floor_rule() {
        for write_fp in [1u64, 1 << 31, 3 << 30, 3_006_477_107, (1 << 32) - 1, 1 << 32] {
            let words = WriteWords::new(write_fp);
            assert!(words.bounds.len() <= 65);
            let mut phases: Vec<u64> = words.bounds.iter().flat_map(|&b| [b, b.wrapping_sub(1) & 0xFFFF_FFFF]).collect();
            phases.extend((0..200u64).map(|k| k.wrapping_mul(0x9E37_79B9) & 0xFFFF_FFFF));
            for phase in phases {
                // A reference index with this phase: i·w ≡ phase needs w invertible, so build
                // the bits from the phase directly, as the rule reads them.
                let expected =
                    (0..64u64).fold(0u64, |word, q| word | (((((phase + q.wrapping_mul(write_fp)) & 0xFFFF_FFFF) + write_fp) >> 32) << q));
                assert_eq!(words.at(phase), expected, "write_fp {write_fp}, phase {phase}");
            }
        }
        // And against is_write from a reference index.
        let words = WriteWords::new(3_006_477_107);
        for i in [0u64, 1, 77, 1 << 40] {
            let expected = (0..64u64).fold(0u64, |word, q| word | (u64::from(is_write(i + q, 3_006_477_107)) << q));
            assert_eq!(words.at(i.wrapping_mul(3_006_477_107) & 0xFFFF_FFFF), expected);
        }
    }

    proptest::proptest! {
        /// The counting sort gives what sorting the packed crossings gives.
        #[test]
        fn crossings_by_residue_are_the_sorted_crossings(
            gaps in proptest::collection::vec(1u64..300, 1..200),
            stride in 1u64..2000,
        ) {
            let ends: Vec<u64> = gaps.iter().scan(0, |end, g| { *end += g; Some(*end) }).collect();
            let mut sorted: Vec<u64> = ends.iter().enumerate().map(|(r, &e)| ((e % stride) << RUN_BITS) | r as u64).collect();
            sorted.sort_unstable();
            proptest::prop_assert_eq!(by_residue(&ends, stride), sorted.clone());
            proptest::prop_assert_eq!(StrideCrossings::new(&ends, stride).unwrap().packed, sorted);
        }
    }

    #[test]
    fn crossings_refuse_what_does_not_pack() {
        assert!(StrideCrossings::new(&[10], 0).is_none());
        assert!(StrideCrossings::new(&[10], 1 << 40).is_none());
        assert!(StrideCrossings::new(&[10], (1 << 40) - 1).is_some());
    }
}
