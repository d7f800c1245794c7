//! Carrying out policy decisions in the simulated world (docs/policies/README.md,
//! "Decisions"; docs/simulator.md, "The hinting scanner"): each decision is applied or
//! refused with a reason, and its cost is returned for the thread that made it.

use crate::driver::FollowUp;
use crate::engine::World;
use crate::memory::{Memory, ARMED, NODE_MASK, REPLICATED, UNPLACED};
use numalab_core::{NodeId, ThreadId};
use numalab_policy::scan::{scan_walk, ScanPages};
use numalab_policy::{space_move_takes, Decision, MoveCause, Outcome, Refusal, ScanStepDone, SpaceId};

impl World<'_> {
    /// A space's page as a global page index, if the decision names an existing one.
    pub(crate) fn global_page(&self, space: SpaceId, page: u64) -> Result<u64, Refusal> {
        match self.spaces.get(space as usize) {
            Some(s) if s.exited => Err(Refusal::SpaceExited),
            Some(s) if page < s.pages => Ok(s.first_page + page),
            _ => Err(Refusal::NoSuchTarget),
        }
    }

    /// Carry out one decision for `actor`; returns its outcome and the time charged to the
    /// actor. Costs: docs/simulator.md, "Policies and decisions".
    pub(crate) fn apply(&mut self, d: &Decision, actor: usize, in_fault: bool) -> (Outcome, f64) {
        match self.try_apply(d, actor, in_fault) {
            Ok((ns, outcome)) => (outcome, ns),
            Err(r) => {
                if r == Refusal::NodeFull && matches!(d, Decision::MigratePage { .. }) {
                    self.counters.pgmigrate_fail += 1;
                }
                (Outcome::Refused(r), 0.0)
            }
        }
    }

    fn node_ok(&self, node: NodeId) -> Result<(), Refusal> {
        if (node as usize) < self.n {
            Ok(())
        } else {
            Err(Refusal::NoSuchTarget)
        }
    }

    fn try_apply(&mut self, d: &Decision, actor: usize, in_fault: bool) -> Result<(f64, Outcome), Refusal> {
        let costs = &self.m.os_costs;
        let page_bytes = self.p.page_bytes as f64;
        match *d {
            Decision::MigratePage { space, page, to } => {
                let g = self.global_page(space, page)?;
                self.node_ok(to)?;
                let from = self.mem.node_of(g).ok_or(Refusal::NotPlaced)?;
                if from == to {
                    return Err(Refusal::AlreadyThere);
                }
                if self.mem.home()[g as usize] & REPLICATED != 0 {
                    return Err(Refusal::Replicated);
                }
                if !self.mem.migrate(g, to) {
                    return Err(Refusal::NodeFull);
                }
                if let Some(maps) = &mut self.maps {
                    // The old frame is gone, and every mapping to it.
                    maps.drop_nodes(g, u64::MAX);
                }
                self.counters.page_migrations += 1;
                self.counters.numa_pages_migrated += u64::from(in_fault);
                self.counters.tlb_shootdowns += 1;
                let bw = self.m.nodes[to as usize].mem_bw_gbps.min(self.m.nodes[from as usize].mem_bw_gbps);
                Ok((costs.migrate_fixed_ns + page_bytes / bw + costs.tlb_shootdown_ns, Outcome::Applied))
            }
            Decision::Replicate { space, page, to } => {
                let g = self.global_page(space, page)?;
                self.node_ok(to)?;
                let home = self.mem.node_of(g).ok_or(Refusal::NotPlaced)?;
                if home == to || self.mem.replica_mask(g) & (1 << to) != 0 {
                    return Err(Refusal::AlreadyThere);
                }
                if !self.mem.replicate(g, to) {
                    return Err(Refusal::NodeFull);
                }
                if let Some(maps) = &mut self.maps {
                    // No copy of a replicated page is writable.
                    maps.downgrade_all(g);
                }
                self.counters.replications += 1;
                Ok((costs.migrate_fixed_ns + page_bytes / self.m.nodes[to as usize].mem_bw_gbps, Outcome::Applied))
            }
            Decision::CollapseReplicas { space, page, keep } => {
                let g = self.global_page(space, page)?;
                self.node_ok(keep)?;
                self.mem.node_of(g).ok_or(Refusal::NotPlaced)?;
                let freed = self.collapse_mapped(g, keep);
                if freed == 0 {
                    return Err(Refusal::AlreadyThere);
                }
                self.counters.replica_collapses += 1;
                self.counters.tlb_shootdowns += u64::from(freed);
                Ok((f64::from(freed) * costs.tlb_shootdown_ns, Outcome::Applied))
            }
            Decision::Unmap { space, page } => {
                let g = self.global_page(space, page)?;
                self.mem.node_of(g).ok_or(Refusal::NotPlaced)?;
                if self.mem.home()[g as usize] & ARMED != 0 {
                    return Err(Refusal::AlreadyThere);
                }
                self.mem.arm(g);
                self.counters.numa_pte_updates += 1;
                Ok((costs.scan_unmap_ns, Outcome::Applied))
            }
            Decision::DropMappings { space, page, keep } => {
                let g = self.global_page(space, page)?;
                if let Some(k) = keep {
                    self.node_ok(k)?;
                }
                self.mem.node_of(g).ok_or(Refusal::NotPlaced)?;
                let maps = self.maps.as_mut().ok_or(Refusal::Unsupported)?;
                // Clearing mappings that are already gone is a no-op, not a refusal: the
                // policy cannot see them. A PTE change of the scanner daemon, charged
                // nothing (docs/simulator.md, "Page mappings and scanner daemons").
                maps.drop_nodes(g, keep.map_or(u64::MAX, |k| !(1u64 << k)));
                Ok((0.0, Outcome::Applied))
            }
            Decision::ScanStep { .. } => unreachable!("the driver carries out scan steps"),
            Decision::MoveThread { thread, to, cpu, cause } => {
                crate::driver::check_thread(self.p.threads, thread)?;
                if !self.thread_alive(thread) {
                    return Err(Refusal::NoSuchTarget);
                }
                let at = self.now_ns(actor) as f64;
                let mv = self.sched.move_thread(thread, to, cpu, cause, &self.states, at)?;
                self.counters.sched_move_numa += u64::from(cause == MoveCause::NumaMove);
                self.note_moves(&[mv]);
                Ok((0.0, Outcome::Applied))
            }
            Decision::SwapThreads { a, b, cause } => {
                crate::driver::check_thread(self.p.threads, a)?;
                crate::driver::check_thread(self.p.threads, b)?;
                let at = self.now_ns(actor) as f64;
                if !self.thread_alive(a) || !self.thread_alive(b) {
                    return Err(Refusal::NoSuchTarget);
                }
                let (ma, mb) = self.sched.swap(a, b, cause, at)?;
                self.counters.sched_swap_numa += u64::from(cause == MoveCause::NumaSwap);
                self.note_moves(&[ma, mb]);
                Ok((0.0, Outcome::Applied))
            }
            Decision::SetPreferredNode { thread, node } => {
                crate::driver::check_thread(self.p.threads, thread)?;
                if let Some(n) = node {
                    self.node_ok(n)?;
                }
                self.sched.set_preferred(thread, node);
                Ok((0.0, Outcome::Applied))
            }
            Decision::MoveSpace { space, to, from: from_nodes } => {
                self.node_ok(to)?;
                let sp = self.spaces.get(space as usize).ok_or(Refusal::NoSuchTarget)?.clone();
                if sp.exited {
                    return Err(Refusal::SpaceExited);
                }
                // docs/simulator.md, "Whole-space moves": per page a batched fixed cost and
                // the copy at min(move_space_copy_gbps, source, target bandwidth); the time
                // stalls every thread of the moved space, not the mover.
                let copy_gbps = |from: NodeId| {
                    costs.move_space_copy_gbps.min(self.m.nodes[from as usize].mem_bw_gbps).min(self.m.nodes[to as usize].mem_bw_gbps)
                };
                let mut stall_ns = 0.0;
                let mut moved = 0u64;
                let mut full = false;
                let mut placed = false;
                let moves = |node: NodeId| space_move_takes(to, from_nodes, node);
                for g in sp.first_page..sp.first_page + sp.pages {
                    let Some(from) = self.mem.node_of(g) else { continue };
                    placed = true;
                    if !moves(from) {
                        continue;
                    }
                    if !self.mem.migrate(g, to) {
                        // Pages moved so far stay moved; the rest could not follow.
                        full = true;
                        break;
                    }
                    if let Some(maps) = &mut self.maps {
                        maps.drop_nodes(g, u64::MAX);
                    }
                    moved += 1;
                    stall_ns += costs.migrate_fixed_ns / 64.0 + page_bytes / copy_gbps(from);
                }
                if moved == 0 {
                    return Err(if full {
                        Refusal::NodeFull
                    } else if placed {
                        Refusal::AlreadyThere
                    } else {
                        Refusal::NotPlaced
                    });
                }
                self.counters.page_migrations += moved;
                for t in sp.threads.clone() {
                    self.charge_thread(t as usize, stall_ns);
                }
                // A move the target's capacity cut short says how far it got, so that the
                // policy's books follow the pages that moved (docs/policies/README.md,
                // "Decisions").
                let outcome = if full {
                    let left = (sp.first_page..sp.first_page + sp.pages).filter(|&g| self.mem.node_of(g).is_some_and(moves)).count();
                    Outcome::Partial { moved_pages: moved, left_pages: left as u64 }
                } else {
                    Outcome::Applied
                };
                Ok((0.0, outcome))
            }
        }
    }

    /// One step of a space's hinting scanner, in `thread`'s context (docs/simulator.md, "The
    /// hinting scanner"): from the resume offset, 2 MiB range by range, mark every placed,
    /// unmarked page the policy agrees to; a range counts against the page budget only if it
    /// changed a PTE, and every range against the 8× virtual budget. The end of the space
    /// completes a pass and ends the step.
    pub(crate) fn scan_step(
        &mut self,
        space: SpaceId,
        thread: ThreadId,
        pages: u64,
        should_unmap: &mut dyn FnMut(SpaceId, u64, NodeId) -> bool,
    ) -> Result<(), Refusal> {
        crate::driver::check_thread(self.p.threads, thread)?;
        let sp = self.spaces.get(space as usize).ok_or(Refusal::NoSuchTarget)?.clone();
        if sp.exited {
            return Err(Refusal::SpaceExited);
        }
        if pages == 0 || sp.pages == 0 {
            return Err(Refusal::NoSuchTarget);
        }
        let range_pages = ((2u64 << 20) / self.p.page_bytes).max(1);
        // An mm with a single user skips pages already on the scanning thread's node.
        let skip_node = (sp.threads.len() == 1).then(|| self.sched.node_of_thread(thread));
        let cursor = &mut self.scan[space as usize];
        let mut pages_of = SpacePages { mem: &mut self.mem, first_page: sp.first_page };
        let walk = scan_walk(cursor, space, sp.pages, range_pages, pages, skip_node, &mut pages_of, should_unmap);
        let updates = walk.updates;
        let pass_completed = walk.pass_completed;
        let sequence = cursor.sequence;
        let cpu_ns = updates as f64 * self.m.os_costs.scan_unmap_ns;
        self.counters.numa_pte_updates += updates;
        self.charge_thread(thread as usize, cpu_ns);
        let time_ns = self.now_ns(thread as usize);
        self.follow_ups.push_back(FollowUp::ScanStep(ScanStepDone {
            space,
            thread,
            pte_updates: updates,
            cpu_ns: cpu_ns as u64,
            sequence,
            pass_completed,
            time_ns,
        }));
        Ok(())
    }
}

/// A space's pages in the simulated page table, for the shared scan walk
/// (`numalab_policy::scan`).
struct SpacePages<'m> {
    mem: &'m mut Memory,
    first_page: u64,
}

impl ScanPages for SpacePages<'_> {
    fn markable(&self, page: u64) -> Option<NodeId> {
        let h = self.mem.home()[(self.first_page + page) as usize];
        (h & NODE_MASK != UNPLACED && h & ARMED == 0).then_some((h & NODE_MASK) as NodeId)
    }
    fn mark(&mut self, page: u64) {
        self.mem.arm(self.first_page + page);
    }
}
