//! A compiled workload: page layout, first touches and per-step, per-thread access streams.

use crate::escapes::EscapeLists;
use crate::stream::{Compute, Entry, Seg};
use numalab_core::{CpuId, NodeId};
use serde::Serialize;

/// Where a region's pages go, overriding the policy under test.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum HomeRule {
    Node(NodeId),
    /// The node of the owner's starting core.
    Owner,
    /// Page `i` of the region on memory node `i mod N`.
    Interleave,
}

/// One region laid out in the address space.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RegionLayout {
    pub name: String,
    /// Global id of the owning process's thread 0 (its owners are numbered from here).
    #[serde(skip)]
    pub thread_base: u32,
    pub first_page: u64,
    pub pages: u64,
    pub home: Option<HomeRule>,
    /// Threads that own blocks of the region (for `HomeRule::Owner`): owner of page `i`.
    #[serde(skip)]
    pub owner_of: OwnerMap,
}

/// Page ownership inside a region.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum OwnerMap {
    #[default]
    None,
    Block {
        threads: u32,
    },
    Cyclic {
        threads: u32,
    },
}

impl OwnerMap {
    pub fn owner(&self, page_in_region: u64, pages: u64) -> Option<u32> {
        match *self {
            OwnerMap::None => None,
            OwnerMap::Block { threads } => Some(((page_in_region as u128 * threads as u128) / pages as u128) as u32),
            OwnerMap::Cyclic { threads } => Some((page_in_region % threads as u64) as u32),
        }
    }
}

/// How threads synchronise inside and after a step.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct P2p {
    pub chunks: u32,
    /// `p2p_neighbours_rev`: wait on `t+1` instead of `t-1`.
    pub reverse: bool,
}

/// One unit of the run's schedule: the first touches, or one repeat of one phase.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Step {
    /// `None`: the initial first-touch step.
    pub phase: Option<usize>,
    pub phase_name: String,
    pub iteration: u32,
    pub repeat: u32,
    /// All threads meet at a barrier after this step.
    pub barrier_after: bool,
    pub p2p: Option<P2p>,
}

/// Per-thread work of one step.
#[derive(Clone, Debug, Default)]
pub struct ThreadWork {
    pub entries: Vec<Entry>,
    /// Issued after every entry is done (the closing reads of a `reduction`).
    pub epilogue: Vec<Entry>,
    pub compute: Option<Compute>,
}

impl ThreadWork {
    pub fn total_refs(&self) -> u64 {
        self.entries.iter().chain(&self.epilogue).map(|e| e.refs).sum()
    }
}

/// A workload compiled for one machine.
#[derive(Clone, Debug)]
pub struct Program {
    pub name: String,
    pub threads: u32,
    pub access_bytes: u64,
    pub page_bytes: u64,
    /// `page_bytes / access_bytes`, a power of two.
    pub lines_per_page: u64,
    pub total_pages: u64,
    pub regions: Vec<RegionLayout>,
    /// CPU each thread starts on.
    pub initial_cpus: Vec<CpuId>,
    /// Threads may not be moved by any policy or balancer.
    pub pinned: bool,
    pub steps: Vec<Step>,
    /// Per thread: the pages it first-touches before any phase (one line per page).
    pub(crate) init: Vec<Vec<Seg>>,
    pub(crate) phases: Vec<crate::compile::CompiledPhase>,
    pub(crate) internals: crate::compile::Internals,
    /// A mix: independent processes, each a compiled program with its own threads, pages and
    /// schedule (empty for a single program).
    pub members: Vec<Member>,
}

/// One process of a mix, placed in the combined thread and page numbering.
#[derive(Clone, Debug)]
pub struct Member {
    /// `<PROG>.<k>`, e.g. `cg-like.0`.
    pub name: String,
    pub program: Program,
    pub first_thread: u32,
    pub first_page: u64,
}

impl Program {
    pub fn line_shift(&self) -> u32 {
        self.lines_per_page.trailing_zeros()
    }

    pub fn footprint_bytes(&self) -> u64 {
        self.total_pages * self.page_bytes
    }

    /// The region holding a page.
    pub fn region_of_page(&self, page: u64) -> Option<&RegionLayout> {
        let i = self.regions.partition_point(|r| r.first_page + r.pages <= page);
        self.regions.get(i).filter(|r| page >= r.first_page)
    }

    /// Total references of the whole run (for progress and benchmarks), without drawing.
    pub fn total_refs(&self) -> u64 {
        let mut rng = numalab_core::rng::stream(0, "count", 0);
        (0..self.threads).map(|t| (0..self.steps_of(t).len()).map(|s| self.work(s, t, &mut rng).total_refs()).sum::<u64>()).sum()
    }

    /// References of the whole run, counted from the compiled phases without generating any
    /// stream (cheap: proportional to phases, not to steps × threads). Exact for plain
    /// phases, and for `runs` phases from their class counts; first touches count one
    /// reference per page. Used by the work estimate before a run.
    pub fn estimated_refs(&self) -> u64 {
        if !self.members.is_empty() {
            return self.members.iter().fold(0u64, |a, m| a.saturating_add(m.program.estimated_refs()));
        }
        let mut total = self.total_pages;
        for p in &self.phases {
            let per_pass: u64 = match &p.synth {
                Some(sy) => sy.total_refs(),
                None => p.entry_refs(),
            };
            total = total.saturating_add(per_pass.saturating_mul(p.passes));
        }
        total
    }

    /// Compute of the whole run, from the compiled phases: `(flops, gap_ns)` summed over all
    /// references (an estimate, like [`Program::estimated_refs`]).
    pub fn estimated_compute(&self) -> (f64, f64) {
        if !self.members.is_empty() {
            return self.members.iter().map(|m| m.program.estimated_compute()).fold((0.0, 0.0), |a, b| (a.0 + b.0, a.1 + b.1));
        }
        let (mut flops, mut gap) = (0.0, 0.0);
        for p in &self.phases {
            let refs = p.entry_refs() as f64 * p.passes as f64;
            match p.compute {
                Some(Compute::Flops(f)) => flops += f * refs,
                Some(Compute::GapConst(ns)) | Some(Compute::GapExp(ns)) => gap += ns * refs,
                _ => {}
            }
        }
        (flops, gap)
    }

    /// Processes: 1 for a single program, one per instance for a mix.
    pub fn processes(&self) -> usize {
        self.members.len().max(1)
    }

    /// The process thread `t` belongs to.
    pub fn process_of(&self, t: u32) -> usize {
        if self.members.is_empty() {
            0
        } else {
            self.members.partition_point(|m| m.first_thread <= t) - 1
        }
    }

    /// Threads of process `p`: `first..first + count`.
    pub fn process_threads(&self, p: usize) -> std::ops::Range<u32> {
        match self.members.get(p) {
            None => 0..self.threads,
            Some(m) => m.first_thread..m.first_thread + m.program.threads,
        }
    }

    /// The schedule thread `t` follows (its process's).
    pub fn steps_of(&self, t: u32) -> &[Step] {
        if self.members.is_empty() {
            &self.steps
        } else {
            &self.members[self.process_of(t)].program.steps
        }
    }

    /// The work of thread `t` in step `s` of its process's schedule. `rng` is the thread's
    /// own stream (start offsets of `any` streams are drawn from it).
    pub fn work<R: rand::Rng + ?Sized>(&self, s: usize, t: u32, rng: &mut R) -> ThreadWork {
        self.work_with(s, t, rng, &mut EscapeLists::none())
    }

    /// [`Program::work`], taking escape lists from `lists` where it holds them (a memo kept
    /// per thread: crate::escapes). The result is the same as `work`'s.
    pub fn work_with<R: rand::Rng + ?Sized>(&self, s: usize, t: u32, rng: &mut R, lists: &mut EscapeLists) -> ThreadWork {
        if self.members.is_empty() {
            return self.work_single(s, t, rng, 0, lists);
        }
        let p = self.process_of(t);
        let m = &self.members[p];
        let mut w = m.program.work_single(s, t - m.first_thread, rng, p, lists);
        let delta = m.first_page * self.lines_per_page;
        for e in w.entries.iter_mut().chain(w.epilogue.iter_mut()) {
            e.shift_lines(delta);
        }
        w
    }
}
