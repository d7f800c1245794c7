//! Steps begun and ended: barriers, pipeline stages, program exit (docs/simulator.md, "Barriers").

use super::{task_state, State, World};
use crate::config::EngineKind;
use crate::driver::Driver;
use crate::fast::FastEntry;
use crate::sched::TaskState;
use numalab_core::ThreadId;
use numalab_workload::stream::{Compute, Swrr};

/// Longest round-robin cycle charged in bulk: a cycle goes in one step only if every entry's
/// run on its page holds its picks, and a run is at most one page (64 lines of 64 bytes in a
/// 4 KiB page), so longer cycles would almost never qualify.
const MAX_BULK_PERIOD: u64 = 64;

impl World<'_> {
    pub(super) fn load_step(&mut self, t: usize) {
        self.steps_begun += 1;
        if self.cfg.engine == EngineKind::Fast && self.shares.sweep_due() {
            // The table of segments keeps what some thread's entries range over; the memos
            // of mixtures are emptied, since a dropped index goes to the next one interned.
            let live: Vec<usize> =
                self.threads.iter().flat_map(|th| th.fast_kinds.iter().flat_map(|k| k.needs().map(|(i, _)| i))).collect();
            self.shares.sweep(live);
            self.threads.iter_mut().for_each(|th| th.escape_memo.clear());
        }
        let th = &mut self.threads[t];
        th.work = self.p.work_with(th.step, t as u32, &mut th.rng, &mut th.escape_lists);
        th.swrr = Swrr::new(th.work.entries.iter().map(|e| e.refs));
        th.left = th.work.entries.iter().map(|e| e.refs).sum();
        th.main_refs = th.left;
        th.epilogue_idx = 0;
        th.issued = 0;
        th.total = th.work.total_refs();
        th.stage = 0;
        th.stage_started = false;
        th.gap_exp_ns = match th.work.compute {
            Some(Compute::GapExp(ns)) => ns,
            _ => 0.0,
        };
        let lpp = self.p.lines_per_page;
        th.cycles = th.work.entries.len() > 1
            && th.gap_exp_ns == 0.0
            && th.swrr.period() <= MAX_BULK_PERIOD
            && th.work.entries.iter().all(|e| e.peek_run(lpp, 1).is_some());
        // The fast engine takes over what the exact paths charge one reference at a time:
        // steps with a random entry, and multi-entry walks whose cycle is too long to charge
        // whole (docs/simulator.md, "The fast engine").
        th.fast_kinds.clear();
        th.fast_ok = false;
        th.swrr_stale = false;
        th.sample_next.clear();
        if self.maps.is_some() {
            // Mappings are checked reference by reference (`Hot::issue` only).
            th.cycles = false;
            return;
        }
        if self.cfg.engine == EngineKind::Fast && th.gap_exp_ns == 0.0 && th.left > 0 {
            let n = self.n;
            let memo = &mut th.escape_memo;
            let kinds: Option<Vec<FastEntry>> = th.work.entries.iter().map(|e| FastEntry::of(e, &mut self.shares, memo, n)).collect();
            if let Some(kinds) = kinds {
                // Walk-only steps too: a block's walk run spans up to 32 pages of one node,
                // where the exact paths stop at every page.
                th.fast_ok = !kinds.is_empty();
                th.fast_kinds = kinds;
                th.fast.begin_step(n);
            }
        }
    }

    /// After a barrier's release: its follow-up events, the task states of the threads that
    /// do not run, and the costs of the new phase, whose threads load memory from now on.
    pub(super) fn after_release(&mut self, drv: &mut Driver) {
        drv.deliver_follow_ups(self);
        for (t, th) in self.threads.iter().enumerate() {
            self.states[t] = task_state(th, th.clock.max(self.now));
        }
        self.update_costs(None);
    }

    /// Release each process's barrier when all its threads have arrived (or finished).
    pub(super) fn release_barrier(&mut self) -> bool {
        let mut released = false;
        for proc in 0..self.p.processes() {
            let threads = self.p.process_threads(proc);
            let mut step = None;
            let mut all_in = true;
            for t in threads.clone() {
                match self.threads[t as usize].state {
                    State::Barrier(s) => step = Some(s),
                    State::Done => {}
                    _ => all_in = false,
                }
            }
            let Some(s) = step.filter(|_| all_in) else { continue };
            let release = threads.clone().map(|t| self.threads[t as usize].clock).fold(0.0, f64::max);
            // The states of the epoch start before the release: the window's naps up to it.
            let epoch_ns = self.cfg.epoch_us * 1e3;
            self.note_naps(self.now + ((release - self.now) / epoch_ns).floor().max(0.0) * epoch_ns);
            for t in threads {
                let t = t as usize;
                if self.threads[t].state == State::Barrier(s) {
                    // A waiter still spinning continues in place; one asleep is woken, and the
                    // scheduler may place it on another CPU.
                    let asleep = task_state(&self.threads[t], release) == TaskState::Sleeping;
                    let th = &mut self.threads[t];
                    th.spin_ns += (release - th.clock).min(th.spin_limit_ns);
                    th.clock = release;
                    self.advance(t, s + 1);
                    if asleep {
                        self.states[t] = TaskState::Runnable;
                        let mut woke = Vec::new();
                        self.sched.wake(t as ThreadId, release, &self.states, &mut woke);
                        self.note_moves(&woke);
                        self.moves.extend(woke);
                    }
                }
            }
            released = true;
        }
        released
    }

    pub(super) fn advance(&mut self, t: usize, next: usize) {
        if next >= self.p.steps_of(t as u32).len() {
            self.threads[t].state = State::Done;
            self.exit_if_last(t);
            return;
        }
        self.threads[t].step = next;
        self.threads[t].state = State::Run;
        self.load_step(t);
    }

    /// Thread `t` just finished. If it was the last thread of its address space and other
    /// threads of the run still have work, the program exits and its memory is freed
    /// (docs/simulator.md, "Program exit"): every placed page of the space returns its home
    /// copy and its replicas to their nodes and becomes `FREED`; pages never touched stay
    /// unplaced. The run's last program is not freed: the run ends with its exit, and the
    /// end-of-run residency (`pages_per_node`) is taken at that moment.
    fn exit_if_last(&mut self, t: usize) {
        if self.threads.iter().all(|th| th.state == State::Done) {
            return;
        }
        let space = self.p.process_of(t as ThreadId);
        let sp = &self.spaces[space];
        if sp.exited || sp.threads.clone().any(|u| self.threads[u as usize].state != State::Done) {
            return;
        }
        for g in sp.first_page..sp.first_page + sp.pages {
            self.mem.release(g);
        }
        self.spaces[space].exited = true;
    }

    /// p2p: may thread t start its next stage? Updates its clock and state.
    pub(super) fn p2p_ready(&mut self, t: usize) -> bool {
        let th = &self.threads[t];
        let step = th.step;
        let Some(p2p) = self.p.steps_of(t as u32)[step].p2p else {
            self.threads[t].state = State::Run;
            return true;
        };
        // The neighbour inside the same process.
        let range = self.p.process_threads(self.p.process_of(t as u32));
        let pred = if p2p.reverse { t + 1 } else { t.wrapping_sub(1) };
        if !range.contains(&(pred as u32)) {
            self.threads[t].state = State::Run;
            self.threads[t].stage_started = true;
            return true;
        }
        let done = self.p2p_done[pred][step * self.max_chunks + th.stage as usize];
        if done.is_nan() {
            self.threads[t].state = State::P2pWait;
            return false;
        }
        let th = &mut self.threads[t];
        th.clock = th.clock.max(done);
        th.state = State::Run;
        th.stage_started = true;
        true
    }

    /// References issued when stage `stage` ends.
    pub(super) fn stage_end(total: u64, chunks: u32, stage: u32) -> u64 {
        ((stage as u128 + 1) * total as u128 / chunks as u128) as u64
    }
}
