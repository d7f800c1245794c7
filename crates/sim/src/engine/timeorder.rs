//! Fast-forward windows run in the order of time (docs/simulator.md, "Fast-forward", "In the
//! order of time"), and so do the exact engine's epochs (its windows of one epoch; "The exact
//! engine in the order of time too").
//!
//! While the policy observes references one at a time (pages armed for hinting faults), a
//! window of several epochs used to run in lockstep: every thread to the end of the first
//! epoch, then of the second, so that the policy sees the faults in about the order of time.
//! That costs a call of the charging loop per thread and epoch. Here the thread whose clock
//! is earliest runs instead, up to its next reference the exact path must see (or the
//! window's end), and that reference waits until no other thread is behind it: the policy
//! sees the faults in the order of time exactly, and a thread costs a call per fault.
//!
//! Why the references a thread charged ahead of the others stay right: inside a window the
//! memory changes only at those references (a first touch places the page, a hinting fault
//! disarms it and the policy may move it). A thread charged ahead only pages that needed no
//! exact path (a walk or stride stops before an armed or unplaced page, a random entry draws
//! its armed references on its own): no page it charged can change before it gets there.
//! A decision that reaches further (a scan step, a page other than the faulting one, a
//! replica, mappings) breaks that argument: the rest of the window then runs in lockstep.
//! Thread moves do not: a thread's costs are those of the window's solve wherever it runs,
//! in lockstep as here.

use super::{State, Thread, World};
use crate::config::EngineKind;
use crate::driver::Driver;
use crate::SimError;
use numalab_policy::Decision;
use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// What a window run in the order of time watches for.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct TimeOrder {
    /// A window is running in the order of time.
    active: bool,
    /// The global page whose reference the exact path is taking now.
    page: Option<u64>,
    /// A decision changed memory beyond that page: the window's rest runs in lockstep.
    broken: bool,
}

impl TimeOrder {
    /// The exact path takes a reference to global page `page` (`None`: it is done).
    pub(crate) fn taking(&mut self, page: Option<u64>) {
        self.page = page;
    }

    /// Whether `d`, carried out now, keeps the order of time: it moves the page being
    /// faulted on, or moves threads, or only names a preferred node.
    fn keeps_order(&self, d: &Decision, global: Option<u64>) -> bool {
        match d {
            Decision::MigratePage { .. } => global.is_some() && global == self.page,
            Decision::SetPreferredNode { .. } | Decision::MoveThread { .. } | Decision::SwapThreads { .. } => true,
            Decision::Replicate { .. }
            | Decision::CollapseReplicas { .. }
            | Decision::Unmap { .. }
            | Decision::ScanStep { .. }
            | Decision::MoveSpace { .. }
            | Decision::DropMappings { .. } => false,
        }
    }
}

/// Thread `th`'s clock if it has something to do before `end`: a reference waiting for the
/// exact path, or time left while it runs.
fn ready_at(th: &Thread, end: f64) -> Option<f64> {
    (th.waiting.is_some() || (th.state == State::Run && th.clock < end)).then_some(th.clock)
}

/// The threads of a window in the order of their clocks (ties to the lowest index): the
/// next to run is the earliest. A thread's entry is made when it is queued; its clock may grow
/// while it waits in the queue (a follow-up event charges it), so an entry whose clock is no
/// longer the thread's is queued again at the thread's clock when it comes out. `ready(t)` is
/// thread `t`'s clock if it has something to do, `None` if not.
#[derive(Clone, Debug, Default)]
pub(crate) struct OrderQueue {
    heap: BinaryHeap<Reverse<(u64, usize)>>,
    /// Per thread: the clock (as its bits) of its entry in `heap`, if it has one.
    queued: Vec<Option<u64>>,
}

impl OrderQueue {
    /// Every thread of `threads` that has something to do, anew.
    fn refill(&mut self, threads: usize, ready: impl Fn(usize) -> Option<f64>) {
        self.heap.clear();
        self.queued.clear();
        self.queued.resize(threads, None);
        for t in 0..threads {
            self.push_if_ready(t, ready(t));
        }
    }

    /// Queue thread `t` at `clock` (its `ready`), unless it has nothing to do or is queued.
    fn push_if_ready(&mut self, t: usize, clock: Option<f64>) {
        if let (Some(clock), None) = (clock, self.queued[t]) {
            // Clocks are not negative: their bits order as they do.
            let key = clock.to_bits();
            self.heap.push(Reverse((key, t)));
            self.queued[t] = Some(key);
        }
    }

    /// The earliest thread that has something to do.
    fn pop(&mut self, ready: impl Fn(usize) -> Option<f64>) -> Option<usize> {
        while let Some(Reverse((key, t))) = self.heap.pop() {
            self.queued[t] = None;
            let clock = ready(t);
            if clock.map(f64::to_bits) == Some(key) {
                return Some(t);
            }
            self.push_if_ready(t, clock);
        }
        None
    }
}

impl World<'_> {
    /// Note a decision about to be carried out (the driver calls this for every one).
    pub(crate) fn note_decision(&mut self, d: &Decision) {
        if !self.order.active || self.order.broken {
            return;
        }
        let global = match *d {
            Decision::MigratePage { space, page, .. } => self.global_page(space, page).ok(),
            _ => None,
        };
        if !self.order.keeps_order(d, global) {
            self.order.broken = true;
        }
    }

    /// Whether this window may run in the order of time: the engine's setting allows it
    /// (`fast_forward_time_order` on the fast engine, `exact_time_order` on the exact one,
    /// whose windows are single epochs), the policy observes references through armed pages
    /// only (no access sampling, no per-node mappings) and no thread is in a pipelined step
    /// (whose stages wait on each other epoch by epoch).
    pub(super) fn time_order_applies(&self) -> bool {
        let allowed = match self.cfg.engine {
            EngineKind::Fast => self.cfg.fast_forward_time_order,
            EngineKind::Exact => self.cfg.exact_time_order,
        };
        allowed
            && self.sample_period_ns.is_none()
            && self.maps.is_none()
            && self.threads.iter().enumerate().all(|(t, th)| th.state == State::Done || self.p.steps_of(t as u32)[th.step].p2p.is_none())
    }

    /// Run the window to `end` in the order of time. `Ok(false)`: a decision broke the order
    /// and the rest of the window must run in lockstep (every thread's clock and waiting
    /// reference are kept).
    pub(super) fn run_in_time_order(&mut self, drv: &mut Driver, end: f64) -> Result<bool, SimError> {
        self.order = TimeOrder { active: true, page: None, broken: false };
        let done = self.time_order_loop(drv, end);
        self.order.active = false;
        done
    }

    fn time_order_loop(&mut self, drv: &mut Driver, end: f64) -> Result<bool, SimError> {
        let mut queue = std::mem::take(&mut self.order_queue);
        let threads = self.threads.len();
        queue.refill(threads, |t| ready_at(&self.threads[t], end));
        let done = loop {
            if self.order.broken {
                break Ok(false);
            }
            let Some(t) = queue.pop(|t| ready_at(&self.threads[t], end)) else {
                if self.release_barrier() {
                    self.after_release(drv);
                    queue.refill(threads, |t| ready_at(&self.threads[t], end));
                    continue;
                }
                break Ok(true);
            };
            if let Err(e) = self.run_thread(drv, t, end, true) {
                break Err(e);
            }
            queue.push_if_ready(t, ready_at(&self.threads[t], end));
            if matches!(self.threads[t].state, State::Barrier(_) | State::Done) && self.release_barrier() {
                self.after_release(drv);
                queue.refill(threads, |t| ready_at(&self.threads[t], end));
            }
        };
        self.order_queue = queue;
        done
    }

    /// Take every reference still waiting for the exact path (after a window's lockstep rest,
    /// those of threads whose clock passed its end).
    pub(super) fn take_waiting(&mut self, drv: &mut Driver, end: f64) -> Result<(), SimError> {
        for t in 0..self.threads.len() {
            if self.threads[t].waiting.is_some() {
                self.run_thread(drv, t, end, false)?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use numalab_policy::MoveCause;

    #[test]
    fn the_queue_gives_the_earliest_clock_first_and_ties_to_the_lowest_thread() {
        let clocks = [Some(30.0), Some(10.0), None, Some(10.0), Some(20.0)];
        let mut q = OrderQueue::default();
        q.refill(clocks.len(), |t| clocks[t]);
        let order: Vec<usize> = std::iter::from_fn(|| q.pop(|t| clocks[t])).collect();
        assert_eq!(order, vec![1, 3, 4, 0], "thread 2 has nothing to do");
    }

    #[test]
    fn a_clock_that_grew_in_the_queue_comes_out_at_its_new_place() {
        let mut clocks = [Some(10.0), Some(20.0), Some(30.0)];
        let mut q = OrderQueue::default();
        q.refill(clocks.len(), |t| clocks[t]);
        // A follow-up event charges thread 0 while it waits; thread 1 finishes its window.
        clocks[0] = Some(25.0);
        clocks[1] = None;
        assert_eq!(q.pop(|t| clocks[t]), Some(0));
        assert_eq!(q.pop(|t| clocks[t]), Some(2));
        assert_eq!(q.pop(|t| clocks[t]), None);
        // A thread run and queued again is not queued twice.
        q.push_if_ready(2, Some(40.0));
        q.push_if_ready(2, Some(40.0));
        assert_eq!(q.pop(|t| clocks[t].map(|_| 40.0)), Some(2));
        assert_eq!(q.pop(|t| clocks[t].map(|_| 40.0)), None);
    }

    #[test]
    fn only_decisions_about_the_faulting_page_or_threads_keep_the_order() {
        let order = TimeOrder { active: true, page: Some(7), broken: false };
        let keeps = |d: Decision, global: Option<u64>| order.keeps_order(&d, global);
        assert!(keeps(Decision::MigratePage { space: 0, page: 7, to: 1 }, Some(7)));
        assert!(!keeps(Decision::MigratePage { space: 0, page: 8, to: 1 }, Some(8)));
        assert!(!keeps(Decision::MigratePage { space: 0, page: 99, to: 1 }, None), "a page that does not exist");
        assert!(keeps(Decision::MoveThread { thread: 3, to: 1, cpu: None, cause: MoveCause::Policy }, None));
        assert!(keeps(Decision::SwapThreads { a: 1, b: 2, cause: MoveCause::Policy }, None));
        assert!(keeps(Decision::SetPreferredNode { thread: 1, node: Some(0) }, None));
        assert!(!keeps(Decision::ScanStep { space: 0, thread: 0, pages: 64 }, None));
        assert!(!keeps(Decision::Replicate { space: 0, page: 7, to: 1 }, Some(7)));
        assert!(!keeps(Decision::Unmap { space: 0, page: 7 }, None));
        let outside = TimeOrder { active: true, page: None, broken: false };
        assert!(!outside.keeps_order(&Decision::MigratePage { space: 0, page: 7, to: 1 }, Some(7)), "no fault being taken");
    }
}
