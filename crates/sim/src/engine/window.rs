//! How long a step of the loop is and how its threads run (docs/simulator.md, "Fast-forward").

use super::{State, World};
use crate::config::EngineKind;
use crate::driver::Driver;
use crate::hot::kind_index;
use crate::SimError;

/// The share of a step's predicted remaining time a fast-forward window may cover: the
/// prediction takes this epoch's latencies and CPU share, which may still change [ours].
const FAST_FORWARD_MARGIN: f64 = 0.75;

impl World<'_> {
    /// How many epochs of `epoch_ns` the window starting at `start` spans (docs/simulator.md,
    /// "Fast-forward"). One, unless the fast engine may fast-forward, the loop's last step
    /// began no thread's step and no follow-up event is queued. Then the window runs up to the
    /// first event that an epoch boundary would have to meet: a background task that starts
    /// or ends on a CPU without a thread, a scheduler balance, the policy tick, the scheduler
    /// tick, a page scan, the end of a metrics interval, and the predicted end of every running
    /// thread's step; at most `sim.fast_forward_max_us`. Every boundary stays on the grid of
    /// `epoch_ns` from 0.
    pub(super) fn fast_forward_epochs(&self, start: f64, epoch_ns: f64) -> u64 {
        let max_ns = self.cfg.fast_forward_max_us * 1e3;
        if self.cfg.engine != EngineKind::Fast
            || max_ns < 2.0 * epoch_ns
            || self.steps_begun != self.steps_begun_at_last
            || !self.follow_ups.is_empty()
        {
            return 1;
        }
        // Epochs that fit before `at`, where an event must start an epoch of its own, and
        // epochs until the first boundary at or after `at`, where an event fires at the
        // boundary.
        let before = |at: f64| ((at - start) / epoch_ns).floor();
        let until = |at: f64| ((at - start) / epoch_ns).ceil();
        let due_ns = self.sched.next_event();
        let mut epochs = (max_ns / epoch_ns).floor().min(until(due_ns));
        epochs = epochs.min(until(self.tick_next_ns)).min(until(self.task_tick_next_ns));
        if let Some(maps) = &self.maps {
            epochs = epochs.min(until(maps.next_ns));
        }
        epochs = epochs.min(until(self.interval_start + self.cfg.metrics_interval_ms * 1e6));
        // A thread that waits (at a barrier, or for its pipeline predecessor) changes what the
        // scheduler sees once it stops spinning and sleeps, `spin_ns` after it arrived: the
        // window ends at the first boundary after that for a thread already waiting, and short
        // of it for one that may begin to wait in the window. No thread that begins to wait in
        // the window sleeps before `start + spin_ns`; beyond that, the window needs the
        // predicted end of every running thread's step, with a margin for the prediction's
        // error (its CPU share and latencies may still change). A pipelined step may wait at
        // any stage, so it allows no more than the spin.
        let n = self.n;
        let spin_ns = self.cfg.sched.barrier_spin_us * 1e3;
        let spin_floor = before(start + spin_ns).max(1.0);
        for (t, th) in self.threads.iter().enumerate() {
            if epochs <= 1.0 {
                break;
            }
            match th.state {
                State::Done => continue,
                State::Barrier(_) | State::P2pWait => {
                    if th.clock + spin_ns > start {
                        epochs = epochs.min(until(th.clock + spin_ns));
                    }
                    continue;
                }
                State::Run => {}
            }
            if self.p.steps_of(t as u32)[th.step].p2p.is_some() {
                epochs = epochs.min(spin_floor);
                continue;
            }
            let mut step_ns = 0.0;
            for e in th.work.entries.iter().chain(&th.work.epilogue) {
                let k = kind_index(e.kind);
                let per_ref_ns: f64 = (0..n).map(|j| th.frac[j] * th.cost[k * n + j]).sum();
                step_ns += e.remaining() as f64 * per_ref_ns;
            }
            if step_ns.is_nan() || step_ns <= 0.0 {
                epochs = epochs.min(spin_floor);
                continue;
            }
            epochs = epochs.min(before(th.clock.max(start) + FAST_FORWARD_MARGIN * step_ns + spin_ns).max(spin_floor));
        }
        epochs.max(1.0) as u64
    }

    /// Take the policy's sampling period for this epoch. A thread's countdown starts (or
    /// restarts) when sampling is switched on or the period changes; a period shorter than
    /// one access samples every access.
    pub(super) fn update_sampling(&mut self, period_ns: Option<f64>) {
        let period_ns = period_ns.filter(|p| p.is_finite() && *p >= 0.0);
        if period_ns == self.sample_period_ns {
            return;
        }
        self.sample_period_ns = period_ns;
        let left = period_ns.unwrap_or(f64::INFINITY);
        for th in &mut self.threads {
            th.sample_left_ns = left;
        }
    }

    /// Run the threads from `start` to `end`, a window of whole epochs. While the policy
    /// observes references one at a time (pages armed for hinting faults, or access
    /// sampling), a window of several epochs runs in lockstep, every thread one epoch at a
    /// time, as the epoch-by-epoch loop would: run thread after thread over the whole
    /// window, the first thread would take the hinting fault of every page it shares with
    /// the others, and a page-state machine would see each shared page as the first thread's
    /// (docs/simulator.md, "Fast-forward"). The window's other savings stay: one scheduler
    /// step, one contention solve, one round of services.
    pub(super) fn run_window(&mut self, drv: &mut Driver, start: f64, end: f64, epoch_ns: f64) -> Result<(), SimError> {
        let epochs = ((end - start) / epoch_ns).round() as u64;
        let observed = self.mem.armed_pages() > 0 || self.sample_period_ns.is_some();
        if !observed {
            return self.run_epoch(drv, end);
        }
        // In the order of time where that applies (`timeorder`), even for a single epoch; in
        // lockstep for the rest of a window whose order a decision broke, and where it does
        // not apply.
        if self.time_order_applies() && self.run_in_time_order(drv, end)? {
            return Ok(());
        }
        if epochs > 1 && self.cfg.fast_forward_lockstep {
            for i in 1..epochs {
                self.run_epoch(drv, start + epoch_ns * i as f64)?;
            }
        }
        self.run_epoch(drv, end)?;
        self.take_waiting(drv, end)
    }

    pub(super) fn run_epoch(&mut self, drv: &mut Driver, end: f64) -> Result<(), SimError> {
        loop {
            let mut progressed = false;
            for t in 0..self.threads.len() {
                match self.threads[t].state {
                    State::Run if self.threads[t].clock < end => {
                        self.run_thread(drv, t, end, false)?;
                        progressed = true;
                    }
                    State::P2pWait => progressed |= self.p2p_ready(t),
                    _ => {}
                }
            }
            if self.release_barrier() {
                self.after_release(drv);
                progressed = true;
            }
            if !progressed {
                return Ok(());
            }
        }
    }
}
