//! Mapping faults and the per-node page-scanner daemons, for a policy that asks for per-node
//! mappings (docs/simulator.md, "Page mappings and scanner daemons"). The mapping state lives
//! in [`crate::mappings::Mappings`]; this file is what the engine does with it.

use crate::driver::Driver;
use crate::engine::World;
use crate::memory::NODE_MASK;
use numalab_core::{NodeId, ThreadId};
use numalab_policy::{EventRef, HintFault, PageScan, ScannedPage, SpaceId};

impl World<'_> {
    /// A reference of a thread on `cpu_node` to a placed page, in a run with mappings: a node
    /// without a mapping that allows the reference faults (the policy's `on_hint_fault`); the
    /// faulting node is then mapped to its own copy if it holds one, else to the home, writably
    /// exactly when the page has a single copy; the reference sets the mapping's referenced
    /// bit, and a write its modified bit. Returns the time the fault cost the thread.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn mapped_access(
        &mut self,
        drv: &mut Driver,
        t: usize,
        cpu: u32,
        cpu_node: NodeId,
        page: u64,
        local_page: u64,
        write: bool,
    ) -> f64 {
        let node = cpu_node as usize;
        let maps = self.maps.as_ref().expect("a run with mappings");
        let mut extra = 0.0;
        if !maps.permits(page, node, write) {
            let pte_writable = maps.permits(page, node, true);
            let before = (self.counters.page_migrations, self.counters.replications, self.counters.replica_collapses);
            let space = self.p.process_of(t as ThreadId);
            let page_node = self.mem.node_of(page).expect("placed");
            let fault = HintFault {
                space: space as SpaceId,
                thread: t as ThreadId,
                cpu,
                cpu_node,
                page: local_page,
                page_node,
                write,
                pte_writable,
                shared_mapping: false,
                time_ns: self.now_ns(t),
            };
            self.counters.mapping_faults += 1;
            let decided_ns = drv.dispatch(self, EventRef::from(&fault), t, true, |p, v, o| p.on_hint_fault(&fault, v, o));
            let mut collapse_ns = 0.0;
            if write && self.mem.replica_mask(page) != 0 {
                // The policy left the page replicated: the write's protection fault collapses
                // it as in any run (docs/simulator.md, "Replicated pages").
                let freed = self.collapse_mapped(page, cpu_node);
                self.counters.replica_collapses += 1;
                self.counters.tlb_shootdowns += u64::from(freed);
                collapse_ns = f64::from(freed) * self.m.os_costs.tlb_shootdown_ns;
            }
            let single = self.mem.replica_mask(page) == 0;
            let maps = self.maps.as_mut().expect("a run with mappings");
            maps.map(page, node, single);
            let after = (self.counters.page_migrations, self.counters.replications, self.counters.replica_collapses);
            extra += match self.m.costs_ms {
                // The machine gives whole-fault service times (the DUnX measurements): the
                // fault costs that of the heaviest page operation it did, a mapping-only fault
                // nothing (docs/simulator.md, "Page mappings and scanner daemons").
                Some(c) => {
                    if after.0 > before.0 {
                        c.migrate * 1e6
                    } else if after.1 > before.1 {
                        c.replicate * 1e6
                    } else if after.2 > before.2 {
                        c.coherency_fault * 1e6
                    } else {
                        0.0
                    }
                }
                None => self.m.os_costs.hint_fault_ns + decided_ns + collapse_ns,
            };
        }
        let maps = self.maps.as_mut().expect("a run with mappings");
        maps.touch(page, node, write);
        debug_assert!(self.mem.replica_mask(page) == 0 || maps.writable_mask(page) == 0, "a replicated page has no writable mapping");
        extra
    }

    /// Collapse a page's copies to `keep` (the home if `keep` has none), and remove the
    /// mappings that went to a discarded copy. Returns the copies freed.
    pub(crate) fn collapse_mapped(&mut self, page: u64, keep: NodeId) -> u32 {
        let (home, all) = match self.mem.node_of(page) {
            Some(h) => (h, self.mem.replica_mask(page) | (1 << h)),
            None => return 0,
        };
        let freed = self.mem.collapse(page, keep);
        if let (Some(maps), Some(kept)) = (self.maps.as_mut(), self.mem.node_of(page)) {
            let (mapped, _) = maps.mask(page);
            let lose = (0..self.n)
                .filter(|&j| mapped & (1 << j) != 0)
                .filter(|&j| if all & (1 << j) != 0 { j as NodeId } else { home } != kept)
                .fold(0u64, |m, j| m | (1 << j));
            maps.drop_nodes(page, lose);
        }
        freed
    }

    /// Node `k`'s scanner pass: every page homed on `k`, in space and page order, with the
    /// bits of the mappings to that copy (k's own, and those of the nodes without a copy of
    /// their own), which it clears.
    fn page_scan(&mut self, k: usize, now_ns: f64) -> PageScan {
        let maps = self.maps.as_mut().expect("a run with mappings");
        maps.passes[k] += 1;
        let mut pages = Vec::new();
        for (s, sp) in self.spaces.iter().enumerate() {
            if sp.exited {
                continue;
            }
            for local in 0..sp.pages {
                let g = sp.first_page + local;
                let h = self.mem.home()[g as usize] & NODE_MASK;
                if h as usize != k {
                    continue;
                }
                let targeting = !(self.mem.replica_mask(g)) | (1 << k);
                let (local_ref, remote_ref, dirty) = maps.sample(g, k, targeting);
                pages.push(ScannedPage { space: s as SpaceId, page: local, local_ref, remote_ref, dirty });
            }
        }
        PageScan { node: k as NodeId, pass: maps.passes[k], time_ns: now_ns as u64, pages }
    }

    /// The scanner daemons due at `end`: at most one round per epoch, each node's pass in
    /// increasing node order, each delivered to the policy before the next node scans. A
    /// daemon's work runs on its node's first CPU.
    pub(crate) fn run_page_scanners(&mut self, drv: &mut Driver, end: f64) {
        let Some(maps) = self.maps.as_mut() else { return };
        if end < maps.next_ns {
            return;
        }
        while maps.next_ns <= end {
            maps.next_ns += maps.period_ns;
        }
        for k in 0..self.n {
            let scan = self.page_scan(k, end);
            let ns = drv.dispatch(self, EventRef::PageScan { node: k as NodeId }, 0, false, |p, v, o| p.on_page_scan(&scan, v, o));
            let cpu = (0..self.sched.cpu_count()).find(|&c| self.sched.node_of_cpu(c as u32) as usize == k).unwrap_or(0);
            self.sched.run_daemon(cpu, end, ns);
        }
    }
}
