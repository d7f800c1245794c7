//! Smooth weighted round-robin: the order in which a thread interleaves its entries.

/// Smooth weighted round-robin over a thread's entries, in proportion to their counts
/// (docs/workloads.md, "Generator semantics": a triad alternates b, c, a rather than running entry after entry).
///
/// The pick sequence is periodic: with `g` the greatest common divisor of the counts, every
/// `period = total / g` picks entry `i` is picked exactly `count_i / g` times and the
/// accumulators are back at zero (the state the sequence started from). The simulator uses
/// this to charge whole cycles of a multi-entry walk at once (docs/simulator.md, "Charging
/// runs of references").
#[derive(Clone, Debug, Default)]
pub struct Swrr {
    pub(super) current: Vec<i64>,
    weights: Vec<i64>,
    total: i64,
    /// `count_i / g`: picks of entry `i` in one cycle.
    cycle: Vec<u64>,
    /// Picks in one cycle (`total / g`; 0 when every count is 0).
    period: u64,
    /// Picks made since the current cycle began.
    pos: u64,
}

fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

impl Swrr {
    pub fn new(counts: impl IntoIterator<Item = u64>) -> Swrr {
        // Counts above i64::MAX / 4 would overflow the accumulators; no step issues that many.
        let weights: Vec<i64> = counts.into_iter().map(|c| c.min(i64::MAX as u64 / 4) as i64).collect();
        let total = weights.iter().sum();
        let g = weights.iter().fold(0, |g, &w| gcd(g, w as u64));
        let cycle: Vec<u64> = weights.iter().map(|&w| (w as u64).checked_div(g).unwrap_or(0)).collect();
        let period = cycle.iter().sum();
        Swrr { current: vec![0; weights.len()], weights, total, cycle, period, pos: 0 }
    }

    /// Index of the next entry (lowest index on ties).
    #[inline]
    pub fn pick(&mut self) -> usize {
        let mut best = 0;
        for i in 0..self.current.len() {
            self.current[i] += self.weights[i];
            if self.current[i] > self.current[best] {
                best = i;
            }
        }
        self.current[best] -= self.total;
        self.pos += 1;
        if self.pos == self.period {
            self.pos = 0;
        }
        best
    }

    /// Picks in one cycle of the sequence.
    pub fn period(&self) -> u64 {
        self.period
    }

    /// Picks of entry `i` in one cycle.
    #[inline]
    pub fn cycle_picks(&self, i: usize) -> u64 {
        self.cycle[i]
    }

    /// Picks left until the current cycle ends (`period` at the start of a cycle).
    #[inline]
    pub fn picks_to_cycle_end(&self) -> u64 {
        self.period - self.pos
    }
}
