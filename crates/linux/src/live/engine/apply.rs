//! Carrying out a policy's decisions on the live target (docs/live.md, "The live engine"):
//! page moves booked for the round's paced `move_pages` batch, whole-process moves with
//! `migrate_pages`, thread moves with `sched_setaffinity`; what live Linux cannot do is refused
//! with a counted reason.

use super::state::{LivePages, UNKNOWN};
use super::{affinity_error, FollowUp, LiveEngine, LiveError, LiveIo};
use crate::act::pages::{move_batched, MoveError, PageMove, PageOutcome};
use numalab_core::{NodeId, ThreadId};
use numalab_policy::scan::{scan_walk, ScanPages};
use numalab_policy::{space_move_takes, Decision, MemoryState, NodeMask, Outcome, Refusal, ScanStepDone, SystemView, ThreadMigrated};
use std::collections::{BTreeMap, VecDeque};

impl LiveEngine {
    /// Carry out one decision; `None`: a page move waiting for the round's batch.
    pub(super) fn apply(&mut self, io: &mut LiveIo, d: &Decision, pending: usize, k: usize) -> Result<Option<Outcome>, LiveError> {
        let refused = |r| Ok(Some(Outcome::Refused(r)));
        let nodes = self.st.host.kernel_nodes.len();
        match *d {
            Decision::MigratePage { space, page, to } => {
                if space != 0 || page >= self.st.space.pages() || to as usize >= nodes {
                    return refused(Refusal::NoSuchTarget);
                }
                let Some(from) = self.st.node_of_page(page) else { return refused(Refusal::NotPlaced) };
                if from == to {
                    return refused(Refusal::AlreadyThere);
                }
                if self.st.free_pages(to) == 0 {
                    return refused(Refusal::NodeFull);
                }
                if self.st.cfg.dry_run {
                    return Ok(Some(Outcome::Applied));
                }
                let addr = self.st.space.addr_of(page).expect("numbered page");
                let kernel = self.st.host.kernel_nodes[to as usize] as i32;
                self.moves.push((pending, k, page, from, to, PageMove::base(addr, kernel)));
                self.booked.insert(page);
                // Booked now, corrected by the batch's answer.
                self.st.page_node[page as usize] = to as u8;
                self.st.free_pages[to as usize] -= 1;
                self.st.free_pages[from as usize] += 1;
                Ok(None)
            }
            Decision::Unmap { space, page } => {
                if space != 0 || page >= self.st.space.pages() {
                    return refused(Refusal::NoSuchTarget);
                }
                if self.st.node_of_page(page).is_none() {
                    return refused(Refusal::NotPlaced);
                }
                if self.st.is_marked(page) {
                    return refused(Refusal::AlreadyThere);
                }
                self.st.set_marked(page, true);
                self.st.summary.pages_marked += 1;
                self.arm_dirty = true;
                Ok(Some(Outcome::Applied))
            }
            Decision::ScanStep { space, thread, pages } => {
                if space != 0 || pages == 0 || self.st.space.pages() == 0 || thread as usize >= self.st.threads.len() {
                    return refused(Refusal::NoSuchTarget);
                }
                let range_pages = ((2u64 << 20) / self.st.cfg.moves.page_bytes).max(1);
                let alive = self.st.threads.iter().filter(|t| t.alive).count();
                let skip_node = (alive == 1).then(|| self.st.node_of_thread(thread));
                let space_pages = self.st.space.pages();
                let mut cursor = self.st.cursor;
                let policy = self.policy.as_mut();
                let mut pages_of = LivePages { st: &mut self.st, mover: io.mover, error: None };
                let walk = scan_walk(&mut cursor, 0, space_pages, range_pages, pages, skip_node, &mut pages_of, &mut |s, p, n| {
                    policy.should_unmap(s, p, n)
                });
                if let Some(e) = pages_of.error {
                    return Err(e.into());
                }
                self.st.cursor = cursor;
                if self.st.gone {
                    return refused(Refusal::SpaceExited);
                }
                self.st.summary.scan_steps += 1;
                self.st.summary.pages_marked += walk.updates;
                self.arm_dirty |= walk.updates > 0;
                // The agent did the walk: the target thread was charged no time.
                self.follow_ups.push_back(FollowUp::Scan(ScanStepDone {
                    space,
                    thread,
                    pte_updates: walk.updates,
                    cpu_ns: 0,
                    sequence: cursor.sequence,
                    pass_completed: walk.pass_completed,
                    time_ns: self.st.now_ns,
                }));
                Ok(Some(Outcome::Applied))
            }
            Decision::MoveThread { thread, to, cpu, cause } => {
                let Some(th) = self.st.threads.get(thread as usize).filter(|t| t.alive) else {
                    return refused(Refusal::NoSuchTarget);
                };
                if to as usize >= nodes || cpu.is_some_and(|c| self.st.host.cpu_node.get(c as usize).copied().flatten() != Some(to)) {
                    return refused(Refusal::NoSuchTarget);
                }
                if th.pinned {
                    return refused(Refusal::Pinned);
                }
                let from = self.st.node_of_thread(thread);
                let cpus = self.st.host.cpus_of(to);
                if cpus.is_empty() {
                    return refused(Refusal::NoSuchTarget);
                }
                if let Some(r) = self.set_node(io, thread, &cpus)? {
                    return refused(r);
                }
                self.st.threads[thread as usize].cpu = cpu.unwrap_or(cpus[0]);
                if from != to {
                    self.follow_ups.push_back(FollowUp::Migrated(ThreadMigrated {
                        space: 0,
                        thread,
                        from_node: from,
                        to_node: to,
                        cause,
                        time_ns: self.st.now_ns,
                    }));
                }
                Ok(Some(Outcome::Applied))
            }
            Decision::SwapThreads { a, b, cause } => {
                let ok = |t: ThreadId| self.st.threads.get(t as usize).is_some_and(|x| x.alive);
                if !ok(a) || !ok(b) || a == b {
                    return refused(Refusal::NoSuchTarget);
                }
                if self.st.threads[a as usize].pinned || self.st.threads[b as usize].pinned {
                    return refused(Refusal::Pinned);
                }
                let (na, nb) = (self.st.node_of_thread(a), self.st.node_of_thread(b));
                let (ca, cb) = (self.st.threads[a as usize].cpu, self.st.threads[b as usize].cpu);
                let (cpus_a, cpus_b) = (self.st.host.cpus_of(nb), self.st.host.cpus_of(na));
                if let Some(r) = self.set_node(io, a, &cpus_a)? {
                    return refused(r);
                }
                if let Some(r) = self.set_node(io, b, &cpus_b)? {
                    return refused(r);
                }
                self.st.threads[a as usize].cpu = cb;
                self.st.threads[b as usize].cpu = ca;
                if na != nb {
                    let now = self.st.now_ns;
                    for (t, from, to) in [(a, na, nb), (b, nb, na)] {
                        self.follow_ups.push_back(FollowUp::Migrated(ThreadMigrated {
                            space: 0,
                            thread: t,
                            from_node: from,
                            to_node: to,
                            cause,
                            time_ns: now,
                        }));
                    }
                }
                Ok(Some(Outcome::Applied))
            }
            Decision::MoveSpace { space, to, from } => {
                if space != 0 || to as usize >= nodes {
                    return refused(Refusal::NoSuchTarget);
                }
                if self.st.cfg.dry_run {
                    return Ok(Some(Outcome::Applied));
                }
                self.space_moves.push((pending, k, to, from));
                Ok(None)
            }
            // Linux keeps a task's preferred node (`numa_preferred_nid`) in the kernel, with no
            // system call to set it; replication is not built.
            Decision::SetPreferredNode { .. }
            | Decision::Replicate { .. }
            | Decision::CollapseReplicas { .. }
            | Decision::DropMappings { .. } => refused(Refusal::Unsupported),
        }
    }

    /// A whole-process move to policy node `to` (docs/live.md, "Whole-process moves"): one
    /// `migrate_pages` call from the nodes of `from` (every other node when `None`), at the
    /// end of the round, after its page moves. The pages are located first (`move_pages`
    /// status, in batches); the kernel then says how many pages it could not move, not which:
    /// the pages that were on the source nodes are then unknown until located again, and the
    /// outcome is `Partial` with the count of pages that were there minus those left.
    pub(super) fn move_space(&mut self, io: &mut LiveIo, to: NodeId, from: Option<NodeMask>) -> Result<Outcome, LiveError> {
        if self.st.gone {
            return Ok(Outcome::Refused(Refusal::SpaceExited));
        }
        // Where every numbered page is now, so that the outcome counts what moved.
        let total = self.st.space.pages();
        let chunk = self.st.cfg.locate_batch_pages.max(1) as u64;
        let mut start = 0;
        while start < total {
            let end = (start + chunk).min(total);
            let mut pages_of = LivePages { st: &mut self.st, mover: io.mover, error: None };
            pages_of.visit_range(start, end);
            if let Some(e) = pages_of.error {
                return Err(e.into());
            }
            if self.st.gone {
                return Ok(Outcome::Refused(Refusal::SpaceExited));
            }
            start = end;
        }
        let moves = |node: usize| space_move_takes(to, from, node as NodeId);
        let elsewhere: Vec<usize> =
            (0..self.st.page_node.len()).filter(|&p| self.st.page_node[p] != UNKNOWN && moves(self.st.page_node[p] as usize)).collect();
        let kernel = &self.st.host.kernel_nodes;
        let old_nodes: Vec<u32> = kernel.iter().enumerate().filter(|&(i, _)| moves(i)).map(|(_, &k)| k).collect();
        if old_nodes.is_empty() {
            // Nothing to move from (`from` holds only `to`): as the simulator answers it.
            return Ok(Outcome::Refused(Refusal::AlreadyThere));
        }
        match io.mover.migrate_pages(self.st.pid, &old_nodes, &[kernel[to as usize]]) {
            Ok(left) => {
                self.st.summary.space_moves += 1;
                self.st.summary.space_move_pages_left += left;
                let moved = (elsewhere.len() as u64).saturating_sub(left);
                for &p in &elsewhere {
                    let old = self.st.page_node[p] as usize;
                    if left == 0 {
                        self.st.free_pages[old] += 1;
                        self.st.free_pages[to as usize] = self.st.free_pages[to as usize].saturating_sub(1);
                        self.st.page_node[p] = to as u8;
                    } else {
                        self.st.page_node[p] = UNKNOWN;
                    }
                }
                Ok(if left == 0 { Outcome::Applied } else { Outcome::Partial { moved_pages: moved, left_pages: left } })
            }
            Err(libc::ESRCH) => {
                self.st.gone = true;
                Ok(Outcome::Refused(Refusal::SpaceExited))
            }
            Err(libc::ENOSYS) => Ok(Outcome::Refused(Refusal::Unsupported)),
            Err(libc::EPERM) => Err(MoveError::Permission { pid: self.st.pid }.into()),
            Err(e) => Err(MoveError::Call { pid: self.st.pid, errno: e, reason: crate::act::syscall::errno_text(e) }.into()),
        }
    }

    /// Confine a thread to `cpus` (its first move saves its affinity for the restore);
    /// `Some(refusal)` if it cannot be done.
    pub(super) fn set_node(&mut self, io: &mut LiveIo, thread: ThreadId, cpus: &[u32]) -> Result<Option<Refusal>, LiveError> {
        if self.st.cfg.dry_run {
            return Ok(None);
        }
        let tid = self.st.threads[thread as usize].tid;
        if let std::collections::btree_map::Entry::Vacant(slot) = self.st.original_affinity.entry(tid) {
            match io.placer.get_affinity(tid) {
                Ok(c) => {
                    slot.insert(c);
                }
                Err(libc::ESRCH) => {
                    self.st.threads[thread as usize].alive = false;
                    return Ok(Some(Refusal::NoSuchTarget));
                }
                Err(e) => return Err(affinity_error(self.st.pid, tid, e)),
            }
        }
        match io.placer.set_affinity(tid, cpus) {
            Ok(()) => {
                self.st.summary.thread_moves += 1;
                Ok(None)
            }
            Err(libc::ESRCH) => {
                self.st.threads[thread as usize].alive = false;
                Ok(Some(Refusal::NoSuchTarget))
            }
            // A CPU outside the thread's cpuset: the kernel refuses (EINVAL).
            Err(libc::EINVAL) => Ok(Some(Refusal::Pinned)),
            Err(e) => Err(affinity_error(self.st.pid, tid, e)),
        }
    }

    /// Carry out the round's page moves in paced batches, then log and report the hooks that
    /// waited for them, in order.
    pub(super) fn flush_moves(&mut self, io: &mut LiveIo) -> Result<(), LiveError> {
        let moves = std::mem::take(&mut self.moves);
        self.booked.clear();
        if !moves.is_empty() {
            let list: Vec<PageMove> = moves.iter().map(|m| m.5).collect();
            // Outcomes by address, first decided first (a page moved twice in a round is
            // asked twice, in order).
            let mut heard: BTreeMap<u64, VecDeque<PageOutcome>> = BTreeMap::new();
            let stats =
                move_batched(io.mover, self.st.pid, &list, &self.st.cfg.moves, &mut |m, o| heard.entry(m.addr).or_default().push_back(o))?;
            self.st.summary.move_pages_calls += stats.calls;
            for (pending, k, page, from, to, m) in moves {
                let o = heard.get_mut(&m.addr).and_then(VecDeque::pop_front).unwrap_or(PageOutcome::Failed);
                *self.st.summary.page_outcomes.entry(o).or_insert(0) += 1;
                let outcome = match o {
                    PageOutcome::Moved => {
                        self.st.summary.pages_moved += 1;
                        Outcome::Applied
                    }
                    PageOutcome::Busy => Outcome::Refused(Refusal::Busy),
                    PageOutcome::Shared => Outcome::Refused(Refusal::Shared),
                    PageOutcome::NotPresent => Outcome::Refused(Refusal::NotPlaced),
                    PageOutcome::NoMemory => Outcome::Refused(Refusal::NodeFull),
                    PageOutcome::ProcessGone => Outcome::Refused(Refusal::SpaceExited),
                    PageOutcome::Failed => Outcome::Refused(Refusal::Failed),
                };
                if o != PageOutcome::Moved {
                    // The booking made when the move was decided is undone.
                    self.st.free_pages[to as usize] += 1;
                    self.st.free_pages[from as usize] = self.st.free_pages[from as usize].saturating_sub(1);
                    self.st.page_node[page as usize] = if o == PageOutcome::NotPresent { UNKNOWN } else { from as u8 };
                }
                self.pending[pending].outcomes[k] = Some(outcome);
            }
            if stats.process_gone {
                self.st.gone = true;
            }
        }
        for (pending, k, to, from) in std::mem::take(&mut self.space_moves) {
            self.pending[pending].outcomes[k] = Some(self.move_space(io, to, from)?);
        }
        let pending = std::mem::take(&mut self.pending);
        for p in pending {
            self.conclude(io, p);
        }
        Ok(())
    }
}
