//! One round of an OpenMP runtime's barrier spin, timed on one CPU: what `[core]
//! pause_cycles` of a measured machine is derived from (docs/calibration.md, "What goes into
//! the file").

use super::{kernels, median, MeasureError, Sizes};

/// Timed runs of the spin; the median is kept.
pub const TRIALS: usize = 5;

/// Rounds per timed run: 1,000,000, a fifth with `--quick` (about 10 to 150 ms a run at 10
/// to 140 cycles per PAUSE).
pub fn rounds(sizes: &Sizes) -> u64 {
    if sizes.quick {
        200_000
    } else {
        1_000_000
    }
}

/// ns per round of the spin on `cpu`: the median of [`TRIALS`] runs of [`rounds`], after one
/// untimed run that lets the core settle.
pub fn ns_per_round(cpu: u32, sizes: &Sizes) -> Result<f64, MeasureError> {
    kernels::pin_to_cpu(cpu)?;
    let rounds = rounds(sizes);
    kernels::spin_wait(rounds);
    let times: Vec<f64> = (0..TRIALS).map(|_| kernels::spin_wait(rounds).as_nanos() as f64 / rounds as f64).collect();
    Ok(median(&times))
}
