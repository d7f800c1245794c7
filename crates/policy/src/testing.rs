//! A scripted system for policy tests: worked examples set the state field by field, call a
//! hook and assert the exact decisions that come out (as ChampSim tests a replacement policy).

use crate::decision::{Decision, HintFault, SpaceId};
use crate::policy::{DynPolicy, MemoryState, SystemView};
use numalab_core::{CpuId, NodeId, PageIdx, ThreadId};
use std::collections::BTreeMap;

pub use crate::statics::testing::FixedMemory;

/// Every field is public: a test builds the situation it needs.
#[derive(Clone, Debug)]
pub struct FakeSystem {
    pub now_ns: u64,
    pub mem: FixedMemory,
    /// Node of each CPU (CPUs are numbered node-major).
    pub node_of_cpu: Vec<NodeId>,
    /// CPU of each thread.
    pub cpu_of_thread: Vec<CpuId>,
    /// Space of each thread; spaces own contiguous thread ranges.
    pub space_of_thread: Vec<SpaceId>,
    /// Pages of each space.
    pub space_pages: Vec<u64>,
    pub alive: Vec<bool>,
    pub runtime_ns: Vec<u64>,
    pub preferred: Vec<Option<NodeId>>,
    pub pinned: Vec<bool>,
    /// Background tasks running per CPU (they count in `nr_running`, make a CPU non-idle).
    pub background: Vec<u32>,
    /// Home node of placed pages, per (space, page).
    pub pages: BTreeMap<(SpaceId, PageIdx), NodeId>,
}

impl FakeSystem {
    /// `nodes` nodes of `cpus_per_node` CPUs, one space of `pages` pages, and `threads` threads
    /// placed one per CPU in order (thread t on CPU t), all alive; every node has `free` pages.
    pub fn new(nodes: usize, cpus_per_node: usize, threads: usize, pages: u64, free: u64) -> FakeSystem {
        let cpus = nodes * cpus_per_node;
        assert!(threads <= cpus, "FakeSystem::new places one thread per CPU");
        FakeSystem {
            now_ns: 0,
            mem: FixedMemory::uniform(nodes, free),
            node_of_cpu: (0..cpus).map(|c| (c / cpus_per_node) as NodeId).collect(),
            cpu_of_thread: (0..threads as CpuId).collect(),
            space_of_thread: vec![0; threads],
            space_pages: vec![pages],
            alive: vec![true; threads],
            runtime_ns: vec![0; threads],
            preferred: vec![None; threads],
            pinned: vec![false; threads],
            background: vec![0; cpus],
            pages: BTreeMap::new(),
        }
    }

    /// Put a thread on a CPU.
    pub fn put(&mut self, thread: ThreadId, cpu: CpuId) -> &mut Self {
        self.cpu_of_thread[thread as usize] = cpu;
        self
    }

    /// A read hint fault of `thread` on page `page` of space 0 (which must be placed), on the
    /// thread's current CPU at the current time.
    pub fn fault(&self, thread: ThreadId, page: PageIdx) -> HintFault {
        let cpu = self.cpu_of_thread[thread as usize];
        HintFault {
            space: 0,
            thread,
            cpu,
            cpu_node: self.node_of_cpu[cpu as usize],
            page,
            page_node: self.pages[&(0, page)],
            write: false,
            pte_writable: true,
            shared_mapping: false,
            time_ns: self.now_ns,
        }
    }

    /// Deliver [`FakeSystem::fault`] to `policy`, carry out its page migrations on this system
    /// and return every decision it made.
    pub fn hit(&mut self, policy: &mut dyn DynPolicy, thread: ThreadId, page: PageIdx) -> Vec<Decision> {
        let mut out = Vec::new();
        policy.on_hint_fault(&self.fault(thread, page), self, &mut out);
        for d in &out {
            if let Decision::MigratePage { space, page, to } = *d {
                self.pages.insert((space, page), to);
            }
        }
        out
    }

    fn threads_on(&self, cpu: CpuId) -> impl Iterator<Item = ThreadId> + '_ {
        (0..self.cpu_of_thread.len() as ThreadId).filter(move |&t| self.alive[t as usize] && self.cpu_of_thread[t as usize] == cpu)
    }
}

impl MemoryState for FakeSystem {
    fn free_pages(&self, node: NodeId) -> u64 {
        self.mem.free_pages(node)
    }
    fn capacity_pages(&self, node: NodeId) -> u64 {
        self.mem.capacity_pages(node)
    }
}

impl SystemView for FakeSystem {
    fn now_ns(&self) -> u64 {
        self.now_ns
    }
    fn spaces(&self) -> u32 {
        self.space_pages.len() as u32
    }
    fn space_pages(&self, space: SpaceId) -> u64 {
        self.space_pages[space as usize]
    }
    fn space_threads(&self, space: SpaceId) -> std::ops::Range<ThreadId> {
        let first = self.space_of_thread.iter().position(|&s| s == space).unwrap_or(0) as ThreadId;
        let count = self.space_of_thread.iter().filter(|&&s| s == space).count() as ThreadId;
        first..first + count
    }
    fn thread_count(&self) -> u32 {
        self.cpu_of_thread.len() as u32
    }
    fn space_of_thread(&self, thread: ThreadId) -> SpaceId {
        self.space_of_thread[thread as usize]
    }
    fn thread_alive(&self, thread: ThreadId) -> bool {
        self.alive[thread as usize]
    }
    fn thread_runtime_ns(&self, thread: ThreadId) -> u64 {
        self.runtime_ns[thread as usize]
    }
    fn cpu_of_thread(&self, thread: ThreadId) -> CpuId {
        self.cpu_of_thread[thread as usize]
    }
    fn node_of_thread(&self, thread: ThreadId) -> NodeId {
        self.node_of_cpu[self.cpu_of_thread[thread as usize] as usize]
    }
    fn preferred_node(&self, thread: ThreadId) -> Option<NodeId> {
        self.preferred[thread as usize]
    }
    fn thread_pinned(&self, thread: ThreadId) -> bool {
        self.pinned[thread as usize]
    }
    fn cpu_count(&self) -> u32 {
        self.node_of_cpu.len() as u32
    }
    fn node_of_cpu(&self, cpu: CpuId) -> NodeId {
        self.node_of_cpu[cpu as usize]
    }
    fn node_cpu_count(&self, node: NodeId) -> u32 {
        self.node_of_cpu.iter().filter(|&&n| n == node).count() as u32
    }
    /// The lowest-numbered live thread on the CPU stands for the current one.
    fn current_thread(&self, cpu: CpuId) -> Option<ThreadId> {
        self.threads_on(cpu).next()
    }
    fn cpu_idle(&self, cpu: CpuId) -> bool {
        self.background[cpu as usize] == 0 && self.threads_on(cpu).next().is_none()
    }
    fn nr_running(&self, node: NodeId) -> u32 {
        (0..self.node_of_cpu.len() as CpuId)
            .filter(|&c| self.node_of_cpu[c as usize] == node)
            .map(|c| self.background[c as usize] + self.threads_on(c).count() as u32)
            .sum()
    }
    fn page_node(&self, space: SpaceId, page: PageIdx) -> Option<NodeId> {
        self.pages.get(&(space, page)).copied()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fake_counts_what_it_is_told() {
        let mut s = FakeSystem::new(2, 4, 6, 100, 1000);
        s.put(5, 1);
        s.background[7] = 1;
        assert_eq!(s.nr_running(0), 5, "threads 0-3 and 5");
        assert_eq!(s.nr_running(1), 2, "thread 4 and a background task");
        assert!(s.cpu_idle(6));
        assert!(!s.cpu_idle(7));
        assert_eq!(s.current_thread(1), Some(1));
        assert_eq!(s.node_of_thread(5), 0);
        assert_eq!(s.space_threads(0), 0..6);
    }
}
