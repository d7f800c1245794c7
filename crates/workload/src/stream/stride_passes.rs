//! What a whole pass of a strided cursor puts in each run of a segment, and its write table:
//! the cache behind `Entry::take_strided_by_runs` (docs/simulator.md, "Strided passes over
//! many runs").

/// Whole passes over one fill charged run by run before the write table is built. Building it
/// sorts the run boundaries' phases and writes one row of label counts per boundary. With few
/// runs a fill serves many passes and the table pays; with many (a segment that page
/// migrations cut into thousands of runs) the starts that share a fill are few, and a table
/// per fill cost more than the passes (bt-like under autonuma on server-b-8n: 16 times
/// linux's CPU time, most of it building tables). Measured (docs/benchmarks.md): 4 keeps
/// linux's bt-like and sp-like within 3 % of building at once, and 16 costs them 9 %.
pub(super) const WRITE_TABLE_AFTER_PASSES: u32 = 4;

/// Steps of a large write table between two stored rows of per-label sums, as a power of two
/// (16): a lookup applies fewer than 16 steps one by one, and the table holds one row per 16
/// steps. A table of at most `WRITE_TABLE_DENSE_ENTRIES` entries keeps a row per step instead,
/// read directly: linux's passes, few runs and many lookups per table, were 10 % slower with
/// rows every 16 steps. A lookup finds its row by a shift.
const WRITE_TABLE_ROW_SHIFT: u32 = 4;
pub(super) const WRITE_TABLE_DENSE_ENTRIES: usize = 4096;

/// Write-table steps per bucket of phases, about: a pass's search for its phase's steps runs
/// inside one bucket instead of over all the steps (on sp-like under autonuma on server-b-8n,
/// 7 iterations, `add_pass_writes` went from 156 M to 129 M instructions: docs/benchmarks.md,
/// stop 54).
const STEPS_PER_PHASE_BUCKET: usize = 4;

/// A packed write-table step's label and its sign (+1: the label gains a write).
fn step_label(packed: u64) -> usize {
    ((packed >> 1) & 0xFF) as usize
}

fn step_sign(packed: u64) -> i64 {
    if packed & 1 == 1 {
        1
    } else {
        -1
    }
}

/// What a whole pass of a strided cursor puts in each run of a segment
/// (`Entry::take_strided_by_runs`), for the pass starts `lo..hi` over which it does not change.
#[derive(Clone, Debug)]
pub struct StridePasses {
    pub(super) key: u64,
    pub(super) stride: u64,
    pub(super) lo: u64,
    pub(super) hi: u64,
    /// Per run: the pass's references before the run's end.
    pub(super) upto: Vec<u64>,
    /// Per label: a whole pass's references in that label's runs (a whole pass is charged
    /// from these, in one step per label instead of one per run).
    pub(super) per_label: Vec<u64>,
    /// The write fraction (32-bit fixed point) the write tables below are for; 0: none.
    pub(super) write_fp: u64,
    /// Per label: a whole pass's writes in that label's runs when the pass starts at phase 0
    /// (see `fill_writes`).
    writes_at_zero: Vec<u64>,
    /// The steps where one label gains a write and another loses one, packed one per integer
    /// (phase, label, up or down), ascending (so by phase).
    packed_steps: Vec<u64>,
    /// Row `c` (one entry per label): what the first `c << row_shift` steps add to
    /// `writes_at_zero`; the steps after a row are applied one by one.
    write_step_sums: Vec<i64>,
    /// Steps per stored row, as a power of two: 0 (dense, a row per step) or
    /// `WRITE_TABLE_ROW_SHIFT`. The division by a stored count that it replaces held 1.35 %
    /// of the samples of sp-like's run under `linux` on server-b-8n, with whole passes
    /// charged together (docs/benchmarks.md, stop 71).
    row_shift: u32,
    /// Scratch of `add_pass_writes`: one row being completed.
    row_scratch: Vec<i64>,
    /// Per bucket of phases (bucket `b`: phases from `b << phase_bucket_shift` on), the first
    /// step at or above the bucket's first phase; one more entry, the number of steps.
    phase_bucket_first_step: Vec<usize>,
    phase_bucket_shift: u32,
    /// Whether the write table above is built for this fill, and the whole passes with
    /// writes charged run by run since the fill.
    write_table_built: bool,
    passes_without_table: u32,
    /// `WRITE_TABLE_AFTER_PASSES` and `WRITE_TABLE_DENSE_ENTRIES`, fields so that tests can
    /// build the table at once and make it sparse.
    table_after: u32,
    dense_entries: usize,
}

impl Default for StridePasses {
    fn default() -> Self {
        StridePasses {
            key: 0,
            stride: 0,
            lo: 0,
            hi: 0,
            upto: Vec::new(),
            per_label: Vec::new(),
            write_fp: 0,
            writes_at_zero: Vec::new(),
            packed_steps: Vec::new(),
            write_step_sums: Vec::new(),
            row_shift: 0,
            row_scratch: Vec::new(),
            phase_bucket_first_step: Vec::new(),
            phase_bucket_shift: 32,
            write_table_built: false,
            passes_without_table: 0,
            table_after: WRITE_TABLE_AFTER_PASSES,
            dense_entries: WRITE_TABLE_DENSE_ENTRIES,
        }
    }
}

impl StridePasses {
    /// A cache that builds its write table after `table_after` whole passes and keeps a row
    /// per step up to `dense_entries` entries (tests vary both).
    #[cfg(test)]
    pub(super) fn with_table_settings(table_after: u32, dense_entries: usize) -> StridePasses {
        StridePasses { table_after, dense_entries, ..StridePasses::default() }
    }

    /// Numbers for a pass from `s`, and the starts after `s` that share them: up to the
    /// first start congruent to a run's end modulo the stride, where one run gains a
    /// reference and the next loses one.
    pub(super) fn fill(&mut self, (ends, labels): (&[u64], &[u8]), label_count: usize, s: u64, stride: u64, key: u64, write_fp: u64) {
        self.upto.clear();
        let mut hi = u64::MAX;
        for &e in ends {
            // References at s, s + stride, ... below e; a run ending at or before s stays
            // empty for every later start.
            self.upto.push(if e > s { (e - s).div_ceil(stride) } else { 0 });
            if e > s {
                let d = (e - s) % stride;
                hi = hi.min(s + if d == 0 { stride } else { d });
            }
        }
        (self.key, self.stride, self.lo, self.hi) = (key, stride, s, hi);
        self.per_label.clear();
        self.per_label.resize(label_count, 0);
        let mut before = 0;
        for (&upto, &label) in self.upto.iter().zip(labels) {
            self.per_label[label as usize] += upto - before;
            before = upto;
        }
        // The write table waits until enough whole passes use this fill (`write_table_ready`).
        self.write_fp = write_fp;
        self.write_table_built = false;
        self.passes_without_table = 0;
    }

    /// Whether a whole pass's writes can come from the write table: built on the
    /// `table_after`-th whole pass since the fill; before that the caller charges them run by
    /// run (the same integers). Counts the pass when it answers no.
    pub(super) fn write_table_ready(&mut self, labels: &[u8], label_count: usize) -> bool {
        if !self.write_table_built {
            if self.passes_without_table < self.table_after {
                self.passes_without_table += 1;
                return false;
            }
            self.fill_writes(labels, label_count);
            self.write_table_built = true;
        }
        true
    }

    /// Writes of a whole pass per label, as a function of the pass's phase.
    ///
    /// Reference `i` writes by the floor rule, so the writes among references `i .. i + u`
    /// are `floor((i·w + u·w) / 2^32) - floor(i·w / 2^32)`, which depends on `i` only through
    /// its phase `φ = i·w mod 2^32`: it is `A(u) + [φ >= 2^32 - f(u)]`, with `A(u)` and
    /// `f(u)` the integer and fractional parts of `u·w / 2^32`. A run from `u0` to `u1` of the
    /// pass therefore writes `A(u1) - A(u0)` plus a step up at `φ = 2^32 - f(u1)` and a step
    /// down at `φ = 2^32 - f(u0)`. Summed per label, a pass's writes are `writes_at_zero`
    /// plus the steps at or below `φ`: one binary search per pass instead of one step per run,
    /// with the same integers.
    fn fill_writes(&mut self, labels: &[u8], label_count: usize) {
        let write_fp = self.write_fp;
        self.writes_at_zero.clear();
        self.packed_steps.clear();
        self.write_step_sums.clear();
        if write_fp == 0 {
            return;
        }
        self.writes_at_zero.resize(label_count, 0);
        let whole = |u: u64| ((u as u128 * write_fp as u128) >> 32) as u64;
        let frac = |u: u64| (u.wrapping_mul(write_fp)) & 0xFFFF_FFFF;
        // (phase, label, up or down) for every run boundary with a fractional part, packed.
        let mut steps = std::mem::take(&mut self.packed_steps);
        steps.clear();
        let pack = |phase: u64, label: u8, up: bool| (phase << 9) | (u64::from(label) << 1) | u64::from(up);
        let mut before = 0;
        for (r, (&upto, &label)) in self.upto.iter().zip(labels).enumerate() {
            self.writes_at_zero[label as usize] += whole(upto) - whole(before);
            let f = frac(upto);
            if f != 0 {
                // The run ending here gains a write from phase 2^32 - f on, and the run
                // starting here loses it (an empty run gains and loses it at one phase).
                steps.push(pack((1 << 32) - f, label, true));
                if let Some(&next) = labels.get(r + 1) {
                    steps.push(pack((1 << 32) - f, next, false));
                }
            }
            before = upto;
        }
        // One integer per step, ordered by phase: the phase (at most 2^32, 33 bits), the
        // label (8 bits), the sign (1 bit). Which of two steps at one phase comes first does
        // not matter: a pass's phase takes all of them or none.
        steps.sort_unstable();
        // Row 0 is zeros; a row every `1 << row_shift` steps, each the one before it with those
        // steps' labels moved by one (a row per step made a large table's size and its fill
        // grow with runs × labels).
        self.row_shift = if steps.len() * label_count <= self.dense_entries { 0 } else { WRITE_TABLE_ROW_SHIFT };
        self.write_step_sums.resize(label_count, 0);
        self.row_scratch.clear();
        self.row_scratch.resize(label_count, 0);
        for (done, &packed) in steps.iter().enumerate() {
            self.row_scratch[step_label(packed)] += step_sign(packed);
            if (done + 1) & ((1 << self.row_shift) - 1) == 0 {
                self.write_step_sums.extend_from_slice(&self.row_scratch);
            }
        }
        // Buckets of phases, a power of two of them (every phase is below 2^32).
        let buckets = (steps.len() / STEPS_PER_PHASE_BUCKET).max(1).next_power_of_two().min(1 << 16);
        self.phase_bucket_shift = 32 - buckets.trailing_zeros();
        self.phase_bucket_first_step.clear();
        let mut first = 0;
        for b in 0..=buckets as u64 {
            while first < steps.len() && steps[first] >> 9 < b << self.phase_bucket_shift {
                first += 1;
            }
            self.phase_bucket_first_step.push(first);
        }
        self.packed_steps = steps;
    }

    /// The number of steps at or below `phase` (`phase < 2^32`): those before its bucket, and
    /// a binary search inside it.
    fn steps_upto(&self, phase: u64) -> usize {
        let b = (phase >> self.phase_bucket_shift) as usize;
        let (lo, hi) = (self.phase_bucket_first_step[b], self.phase_bucket_first_step[b + 1]);
        lo + self.packed_steps[lo..hi].partition_point(|&p| p >> 9 <= phase)
    }

    /// Add a whole pass's writes, the pass starting at reference `i`, to `writes`: the steps
    /// at or below the pass's phase, from the last row before them and then one by one.
    pub(super) fn add_pass_writes(&mut self, i: u64, writes: &mut [u64]) {
        let phase = i.wrapping_mul(self.write_fp) & 0xFFFF_FFFF;
        let j = self.steps_upto(phase);
        let n = self.writes_at_zero.len();
        let c = j >> self.row_shift;
        let row = &self.write_step_sums[c * n..(c + 1) * n];
        let row = if c << self.row_shift == j {
            row
        } else {
            self.row_scratch.clear();
            self.row_scratch.extend_from_slice(row);
            for &packed in &self.packed_steps[c << self.row_shift..j] {
                self.row_scratch[step_label(packed)] += step_sign(packed);
            }
            &self.row_scratch
        };
        for ((w, &base), &step) in writes.iter_mut().zip(&self.writes_at_zero).zip(row) {
            *w += base.wrapping_add_signed(step);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The bucketed search counts the steps at or below a phase as a search over all of them
    /// does, for tables from no steps to many, phases at and around the steps and the buckets'
    /// edges.
    #[test]
    fn steps_upto_matches_a_search_over_all_steps() {
        for runs in [1u64, 2, 3, 7, 40, 300, 5000] {
            // Runs of uneven lengths (1 to 13 positions; their ends ascend) over 2 labels; a
            // write fraction whose phases spread.
            let ends: Vec<u64> = (1..=runs)
                .scan(0u64, |end, r| {
                    *end += 1 + r * r % 13;
                    Some(*end)
                })
                .collect();
            let labels: Vec<u8> = (0..runs).map(|r| (r % 2) as u8).collect();
            let mut cache = StridePasses::with_table_settings(0, WRITE_TABLE_DENSE_ENTRIES);
            cache.fill((&ends, &labels), 2, 0, 5, 0, 2_654_435_769);
            assert!(cache.write_table_ready(&labels, 2));
            let mut phases: Vec<u64> = vec![0, (1 << 32) - 1, 1 << 31];
            for &p in &cache.packed_steps {
                phases.extend([(p >> 9).saturating_sub(1), p >> 9, ((p >> 9) + 1).min((1 << 32) - 1)]);
            }
            phases.extend((0..=256u64).map(|b| (b << 24).min((1 << 32) - 1)));
            for phase in phases {
                assert_eq!(cache.steps_upto(phase), cache.packed_steps.partition_point(|&p| p >> 9 <= phase), "{runs} runs, phase {phase}");
            }
        }
    }
}
