//! Issuing a thread's references: the charging loops, then the exact path (docs/simulator.md).

use super::{State, World};
use crate::driver::Driver;
use crate::fast::{FastKind, FastStep};
use crate::hot::{kind_index, Hot, Tally};
use crate::memory::{single_copy_node, ARMED, FREED, NODE_MASK, REPLICATED, SLOW, UNPLACED};
use crate::SimError;
use numalab_core::{NodeId, ThreadId};
use numalab_policy::{AccessSample, EventRef, HintFault, PlaceRequest, SpaceId};
use numalab_workload::stream::{AccessKind, Swrr};

impl World<'_> {
    /// Issue thread t's accesses until its clock reaches `end` or it blocks. With `defer`
    /// (a window in the order of time), a reference the exact path must take ends the call
    /// and waits in `waiting`; a waiting reference is taken first.
    pub(super) fn run_thread(&mut self, drv: &mut Driver, t: usize, end: f64, defer: bool) -> Result<(), SimError> {
        self.counts.thread_calls += 1;
        let shift = self.p.line_shift();
        let n = self.n;
        let cpu = self.sched.cpu_of[t];
        let cpu_node = self.node_of_cpu[cpu as usize];
        if let Some(access) = self.threads[t].waiting.take() {
            self.slow_access(drv, t, cpu, cpu_node, access, false)?;
            if self.sched.cpu_of[t] != cpu || self.threads[t].clock >= end {
                return Ok(());
            }
        }
        loop {
            let step = self.threads[t].step;
            let p = self.p;
            let steps = p.steps_of(t as u32);
            let p2p = steps[step].p2p;
            // p2p steps: a stage starts once the predecessor finished the same stage; its end
            // is recorded for the successor.
            if let Some(pp) = p2p {
                let th = &self.threads[t];
                if th.stage < pp.chunks {
                    if !th.stage_started {
                        if !self.p2p_ready(t) {
                            return Ok(());
                        }
                        continue;
                    }
                    if th.issued == Self::stage_end(th.total, pp.chunks, th.stage) {
                        let (stage, clock) = (th.stage, th.clock);
                        self.p2p_done[t][step * self.max_chunks + stage as usize] = clock;
                        let th = &mut self.threads[t];
                        th.stage += 1;
                        th.stage_started = false;
                        continue;
                    }
                }
            }
            let th = &mut self.threads[t];
            // Main entries (interleaved by smooth weighted round-robin), then the epilogue.
            let in_main = th.left > 0;
            if !in_main {
                if th.epilogue_idx >= th.work.epilogue.len() {
                    // Step done.
                    if steps[step].barrier_after {
                        th.state = State::Barrier(step);
                        return Ok(());
                    }
                    self.advance(t, step + 1);
                    if self.threads[t].state == State::Done {
                        return Ok(());
                    }
                    continue;
                }
                if th.work.epilogue[th.epilogue_idx].remaining() == 0 {
                    th.epilogue_idx += 1;
                    continue;
                }
            }
            let limit = match p2p {
                Some(pp) if th.stage < pp.chunks => Self::stage_end(th.total, pp.chunks, th.stage) - th.issued,
                _ => u64::MAX,
            };
            let start_clock = th.clock;
            let lpp = self.p.lines_per_page;
            // Access sampling: the issue loop stops where the thread's sampling countdown
            // runs out; the reference after that is the sample, taken on its own through the
            // exact path (docs/simulator.md, "Access sampling").
            let sampling = self.sample_period_ns.is_some();
            let sample_now = sampling && th.sample_left_ns <= 0.0;
            let stop = if sampling && !sample_now { end.min(start_clock + th.sample_left_ns) } else { end };
            let slow_from = if sample_now { 0 } else { SLOW };
            let maps = self.maps.as_ref().map_or(&[][..], |m| m.fast());
            let hot =
                Hot { home: self.mem.home(), shift, n, end: stop, gap_exp_ns: th.gap_exp_ns, slow_from, maps, node: cpu_node as usize };
            let by_reference = !maps.is_empty();
            // The fast engine charges the step while the memory its entries range over is
            // settled; otherwise the exact paths run, with the round-robin restarted from the
            // references each entry has left (the fast blocks do not follow it).
            let fast_now = in_main && th.fast_ok && !sample_now && {
                let epoch_ns = self.cfg.epoch_us * 1e3;
                let mut ready = true;
                for (s, unarmed) in th.fast_kinds.iter().flat_map(|k| k.needs()) {
                    ready = ready
                        && self.shares.ready(s, &self.mem, shift, self.now, epoch_ns)
                        && (!unarmed || self.shares.armed_frac(s) == 0.0);
                }
                ready
            };
            // The entry of an access sample that follows fast blocks: the blocks do not follow
            // the round-robin, which restarted below would always pick the entry with the most
            // references left (`sample_entry`; docs/simulator.md, "Access sampling").
            let mut sample_entry = None;
            if in_main && th.fast_ok && !fast_now && th.swrr_stale {
                if sample_now && th.work.entries.len() > 1 {
                    let th_ref: &super::Thread = th;
                    let mix_ns: [f64; 3] = std::array::from_fn(|k| super::window::per_ref_ns(th_ref, k, n));
                    let (home, shares, kinds, cost) = (self.mem.home(), &self.shares, &th.fast_kinds, &th.cost);
                    let ns_per_ref = |i: usize, e: &numalab_workload::Entry| {
                        let k = kind_index(e.kind);
                        entry_ns_per_ref(e, &kinds[i], shares, home, shift, &cost[k * n..(k + 1) * n], mix_ns[k])
                    };
                    sample_entry = th.sample_next.draw_among(&th.work.entries, ns_per_ref, &mut th.rng);
                }
                th.swrr = Swrr::new(th.work.entries.iter().map(|e| e.remaining()));
                th.swrr_stale = false;
            }
            th.swrr_stale |= fast_now;
            let gap_exp = th.gap_exp_ns > 0.0;
            let mut tally = Tally { rng: &mut th.rng, acc: &mut th.acc, wr: &mut th.wr, cost: &th.cost };
            // Monomorphise the loop for the exponential-gap case so the common one pays nothing.
            macro_rules! issue {
                ($entries:expr, $pick:expr, $max:expr) => {
                    if gap_exp {
                        hot.issue::<true>($entries, $pick, $max, &mut tally, start_clock)
                    } else {
                        hot.issue::<false>($entries, $pick, $max, &mut tally, start_clock)
                    }
                };
            }
            let (issued, clock, slow) = if in_main {
                let max = if sample_now { 1 } else { th.left.min(limit) };
                if fast_now {
                    let step =
                        FastStep { kinds: &th.fast_kinds, shares: &self.shares, total_refs: th.main_refs, lpp, slowed: self.mem.slowed() };
                    hot.issue_fast(&mut th.work.entries, &step, &mut th.fast, max, &mut tally, start_clock)
                } else if th.work.entries.len() == 1
                    && th.work.entries[0].peek_run(lpp, 1).is_some()
                    && !gap_exp
                    && !sample_now
                    && !by_reference
                {
                    hot.issue_runs(&mut th.work.entries[0], max, &mut tally, start_clock, lpp)
                } else if th.work.entries.len() == 1 {
                    issue!(&mut th.work.entries, |_| 0, max)
                } else if th.cycles && !sample_now {
                    hot.issue_cycles(&mut th.work.entries, &mut th.swrr, max, &mut tally, start_clock, lpp)
                } else if let Some(entry) = sample_entry {
                    issue!(&mut th.work.entries, |_| entry, max)
                } else {
                    let swrr = &mut th.swrr;
                    issue!(&mut th.work.entries, |_| swrr.pick(), max)
                }
            } else {
                let idx = th.epilogue_idx;
                let max = if sample_now { 1 } else { th.work.epilogue[idx].remaining().min(limit) };
                // An epilogue entry walks (a reduction's closing read of its region): charged
                // by page runs like a single walking entry.
                if th.work.epilogue[idx].peek_run(lpp, 1).is_some() && !gap_exp && !sample_now && !by_reference {
                    hot.issue_runs(&mut th.work.epilogue[idx], max, &mut tally, start_clock, lpp)
                } else {
                    issue!(&mut th.work.epilogue, |_| idx, max)
                }
            };
            if in_main {
                th.left -= issued;
            }
            th.busy_ns += clock - start_clock;
            if sampling {
                th.sample_left_ns -= clock - start_clock;
            }
            th.clock = clock;
            th.issued += issued;
            if let Some(access) = slow {
                if sample_now {
                    th.sample_left_ns = self.sample_period_ns.unwrap_or(f64::INFINITY);
                }
                if defer {
                    debug_assert!(!sample_now, "the order of time does not apply while the policy samples");
                    th.waiting = Some(access);
                    return Ok(());
                }
                self.slow_access(drv, t, cpu, cpu_node, access, sample_now)?;
                // A decision may have moved the thread: later accesses count on its new node.
                if self.sched.cpu_of[t] != cpu {
                    return Ok(());
                }
            }
            let th = &self.threads[t];
            if th.clock >= end {
                return Ok(());
            }
        }
    }

    /// First touches, hinting faults, replicated pages and access samples.
    pub(super) fn slow_access(
        &mut self,
        drv: &mut Driver,
        t: usize,
        cpu: u32,
        cpu_node: NodeId,
        access: (u64, bool, AccessKind),
        sampled: bool,
    ) -> Result<(), SimError> {
        let (page, write, kind) = access;
        let n = self.n;
        let costs = &self.m.os_costs;
        let space = self.p.process_of(t as u32);
        let local_page = page - self.spaces[space].first_page;
        let mut h = self.mem.home()[page as usize];
        if h == FREED {
            // Only threads of a space access its pages, and a space is freed once all of them
            // finished: a freed page reached here is a simulator bug, not a user error.
            return Err(SimError::Internal(format!("thread {t} touched page {page}, freed when its program exited")));
        }
        let mut extra = 0.0;
        if h == UNPLACED {
            let req = PlaceRequest { space: space as SpaceId, thread: t as ThreadId, cpu, cpu_node, page: local_page };
            let node = drv.place(&req, self).map_err(|_| SimError::OutOfMemory { page })?;
            if node as usize >= n || self.mem.free[node as usize] == 0 {
                return Err(SimError::Policy(format!(
                    "policy '{}' placed page {page} on node {node}, which cannot hold it",
                    drv.policy_name()
                )));
            }
            self.mem.place(page, node);
            self.counters.first_touch_faults += 1;
            extra += costs.first_touch_fault_ns + drv.take_place_cost_ns();
            h = node as u8;
            if let Some(maps) = &mut self.maps {
                // The first-touch fault maps the toucher to the new (only) copy, writably.
                maps.map(page, cpu_node as usize, true);
            }
        }
        if h & ARMED != 0 {
            self.mem.disarm(page);
            h &= !ARMED;
            let page_node = (h & NODE_MASK) as NodeId;
            self.counters.numa_hint_faults += 1;
            self.counters.numa_hint_faults_local += u64::from(page_node == cpu_node);
            extra += costs.hint_fault_ns;
            let fault = HintFault {
                space: space as SpaceId,
                thread: t as ThreadId,
                cpu,
                cpu_node,
                page: local_page,
                page_node,
                write,
                pte_writable: true,
                shared_mapping: false,
                time_ns: self.threads[t].clock as u64,
            };
            self.order.taking(Some(page));
            extra += drv.dispatch(self, EventRef::from(&fault), t, true, |p, v, o| p.on_hint_fault(&fault, v, o));
            self.order.taking(None);
            h = self.mem.home()[page as usize] & !ARMED;
        }
        if self.maps.is_some() {
            extra += self.mapped_access(drv, t, cpu, cpu_node, page, local_page, write);
            h = self.mem.home()[page as usize];
        }
        let mut j = (h & NODE_MASK) as NodeId;
        if h & REPLICATED != 0 {
            if write {
                // Replicas are read-only: the write takes a protection fault, which keeps the
                // writer's local copy if it has one, frees the others and shoots down their
                // translations (docs/simulator.md, "Replicated pages").
                let freed = self.collapse_mapped(page, cpu_node);
                self.counters.replica_collapses += 1;
                self.counters.tlb_shootdowns += u64::from(freed);
                extra += costs.hint_fault_ns + f64::from(freed) * costs.tlb_shootdown_ns;
                j = self.mem.node_of(page).expect("placed");
            } else {
                j = self.mem.read_copy(page, cpu_node);
            }
        }
        if sampled {
            self.counters.access_samples += 1;
            extra += costs.access_sample_ns;
            let page_node = self.mem.node_of(page).expect("placed");
            drv.sample(&AccessSample {
                space: space as SpaceId,
                thread: t as ThreadId,
                cpu,
                cpu_node,
                page: local_page,
                served_node: j,
                page_node,
                write,
                time_ns: self.threads[t].clock as u64,
            });
        }
        let th = &mut self.threads[t];
        th.acc[j as usize] += 1;
        th.wr[j as usize] += u64::from(write);
        let c = th.cost[kind_index(kind) * n + j as usize] + extra;
        th.clock += c;
        th.busy_ns += c;
        Ok(())
    }
}

/// What one reference of entry `e` costs on average, ns, where its lines are now, from the
/// entry's row of the cost table (`cost_row[j]`: a reference served by node `j`): a walk or a
/// fixed line at the node of its next line's page, a random or strided entry at its segment's
/// node shares, owner escapes at their probability over the other blocks' shares. `mix_ns`,
/// the cost at the thread's access mix, where the next page is not placed or shares are not
/// known. The reference in flight when a sampling countdown runs out is drawn by this time
/// (`sample_entry`): a remote gather is in flight longer than a local one.
fn entry_ns_per_ref(
    e: &numalab_workload::Entry,
    fe: &crate::fast::FastEntry,
    shares: &crate::segshares::SegShares,
    home: &[u8],
    shift: u32,
    cost_row: &[f64],
    mix_ns: f64,
) -> f64 {
    let at_shares = |s: usize| {
        let w = shares.unarmed(s);
        let total: f64 = w.iter().sum();
        if total > 0.0 {
            w.iter().zip(cost_row).map(|(x, c)| x * c).sum::<f64>() / total
        } else {
            mix_ns
        }
    };
    let own = match fe.kind {
        FastKind::Random(s) | FastKind::Strided(s) => at_shares(s),
        FastKind::Walk | FastKind::Fixed => match e.next_line_known().and_then(|line| home.get((line >> shift) as usize)) {
            Some(&b) => single_copy_node(b, cost_row.len()).map_or(mix_ns, |node| cost_row[node]),
            None => mix_ns,
        },
    };
    match fe.escape {
        Some((mix, q)) => (1.0 - q) * own + q * at_shares(mix),
        None => own,
    }
}
