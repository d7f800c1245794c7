//! Building a run: pages placed before it, address spaces, threads (docs/simulator.md, "Pages").

use super::timeorder::{OrderQueue, TimeOrder};
use super::{Engine, ScanCursor, Space, State, Thread, World};
use crate::config::SimConfig;
use crate::contention::{Contention, Demand};
use crate::driver::Driver;
use crate::fast::{EscapeMemo, FastState, SegShares};
use crate::mappings::{Mappings, MAX_MAPPED_NODES};
use crate::memory::{Memory, MAX_NODES, UNPLACED};
use crate::metrics::{Counters, EngineCounts};
use crate::pingpong::PingPong;
use crate::sched::{Scheduler, TaskState};
use crate::windows::SpaceCounters;
use crate::SimError;
use numalab_core::rng::stream;
use numalab_core::Machine;
use numalab_policy::{AddressSpaceInfo, SpaceId};
use numalab_workload::program::{HomeRule, ThreadWork};
use numalab_workload::stream::Swrr;
use numalab_workload::{EscapeLists, Program};
use std::collections::VecDeque;

/// The address spaces of a program: one per process.
fn spaces_of(p: &Program) -> Vec<Space> {
    if p.members.is_empty() {
        return vec![Space { first_page: 0, pages: p.total_pages, threads: 0..p.threads, exited: false }];
    }
    p.members
        .iter()
        .map(|m| Space {
            first_page: m.first_page,
            pages: m.program.total_pages,
            threads: m.first_thread..m.first_thread + m.program.threads,
            exited: false,
        })
        .collect()
}

impl<'a, 'l> Engine<'a, 'l> {
    pub fn new(m: &'a Machine, p: &'a Program, cfg: &'a SimConfig, drv: Driver<'l>, seed: u64) -> Result<Engine<'a, 'l>, SimError> {
        let n = m.node_count();
        if n > MAX_NODES {
            return Err(SimError::Machine(format!("{n} nodes: the simulator supports at most {MAX_NODES}")));
        }
        let cpus = m.cpu_table();
        let capacity: Vec<u64> = m.nodes.iter().map(|node| node.mem_bytes / p.page_bytes).collect();
        let mut mem = Memory::new(p.total_pages, capacity);
        // Regions with an explicit home are placed before the run, whoever touches them.
        let memory_nodes = m.memory_nodes();
        for r in &p.regions {
            let Some(rule) = r.home else { continue };
            for i in 0..r.pages {
                let want = match rule {
                    HomeRule::Node(node) => node,
                    HomeRule::Interleave => memory_nodes[(i % memory_nodes.len() as u64) as usize],
                    HomeRule::Owner => {
                        let owner = r.thread_base + r.owner_of.owner(i, r.pages).unwrap_or(0);
                        cpus.node_of_cpu[p.initial_cpus[owner as usize] as usize]
                    }
                };
                let node = if mem.free[want as usize] > 0 {
                    want
                } else {
                    memory_nodes
                        .iter()
                        .copied()
                        .find(|&n| mem.free[n as usize] > 0)
                        .ok_or(SimError::OutOfMemory { page: r.first_page + i })?
                };
                mem.place(r.first_page + i, node);
            }
        }
        let spaces = spaces_of(p);
        let mut drv = drv;
        // Eager layouts (round-1g) cover every page of a space not placed by a home rule.
        for (s, sp) in spaces.iter().enumerate() {
            let info = AddressSpaceInfo { space: s as SpaceId, pages: sp.pages, threads: sp.threads.len() as u32 };
            let Some(extents) = drv.policy_mut().layout(&info, &mem).map_err(|e| SimError::Policy(e.to_string()))? else { continue };
            for e in extents {
                if e.first_page.checked_add(e.pages).is_none_or(|end| end > sp.pages) || e.node as usize >= n {
                    return Err(SimError::Policy(format!(
                        "policy '{}' laid out pages {}..+{} on node {} outside space {s} ({} pages)",
                        drv.policy_name(),
                        e.first_page,
                        e.pages,
                        e.node,
                        sp.pages
                    )));
                }
                for pg in sp.first_page + e.first_page..sp.first_page + e.first_page + e.pages {
                    if mem.home()[pg as usize] == UNPLACED {
                        if mem.free[e.node as usize] == 0 {
                            return Err(SimError::OutOfMemory { page: pg });
                        }
                        mem.place(pg, e.node);
                    }
                }
            }
        }
        let maps = match drv.policy_mut().page_scanner_period_ns() {
            None => None,
            Some(0) => {
                return Err(SimError::Policy(format!("policy '{}' asked for page scanners with a period of 0 ns", drv.policy_name())))
            }
            Some(_) if n > MAX_MAPPED_NODES => {
                return Err(SimError::Policy(format!(
                "policy '{}' needs per-node mappings, which the simulator keeps for at most {MAX_MAPPED_NODES} nodes; this machine has {n}",
                drv.policy_name()
            )))
            }
            Some(period) => Some(Mappings::new(p.total_pages, n, period as f64)),
        };
        let ic = m.interconnect();
        let cont = Contention::new(m, &ic, p.access_bytes, p.threads as usize);
        let mut sched = Scheduler::new(
            cfg.sched.clone(),
            cpus.node_of_cpu.clone(),
            cpus.core_of_cpu.clone(),
            p.initial_cpus.clone(),
            p.pinned,
            stream(seed, "sched", 0),
        );
        if drv.policy_mut().moves_pinned_threads() {
            sched.let_policy_place();
        }
        let threads: Vec<Thread> = (0..p.threads)
            .map(|t| {
                let node = cpus.node_of_cpu[p.initial_cpus[t as usize] as usize] as usize;
                let mut frac = vec![0.0; n];
                frac[node] = 1.0;
                Thread {
                    rng: stream(seed, "workload.thread", t as u64),
                    step: 0,
                    work: ThreadWork::default(),
                    swrr: Swrr::default(),
                    cycles: false,
                    left: 0,
                    epilogue_idx: 0,
                    clock: 0.0,
                    busy_ns: 0.0,
                    spin_ns: 0.0,
                    spin_limit_ns: cfg.barrier_spin_ns(m, p.process_threads(p.process_of(t)).len() as u32),
                    state: State::Run,
                    issued: 0,
                    total: 0,
                    stage: 0,
                    stage_started: false,
                    cost: vec![0.0; 3 * n],
                    cost_from: (f64::NAN, f64::NAN, u64::MAX),
                    gap_exp_ns: 0.0,
                    acc: vec![0; n],
                    wr: vec![0; n],
                    frac,
                    write_frac: 0.0,
                    sample_left_ns: f64::INFINITY,
                    waiting: None,
                    main_refs: 0,
                    fast_ok: false,
                    swrr_stale: false,
                    sample_next: Default::default(),
                    fast_kinds: Vec::new(),
                    escape_memo: EscapeMemo::default(),
                    escape_lists: EscapeLists::default(),
                    fast: FastState::default(),
                }
            })
            .collect();
        let max_chunks =
            (0..p.threads).flat_map(|t| p.steps_of(t).iter()).filter_map(|s| s.p2p.map(|x| x.chunks as usize)).max().unwrap_or(0);
        let p2p_done =
            if max_chunks > 0 { (0..p.threads).map(|t| vec![f64::NAN; p.steps_of(t).len() * max_chunks]).collect() } else { Vec::new() };
        let space_counters = SpaceCounters::new(&spaces, &mem, n);
        let links = cont.links();
        let link_capacity = ic.links.iter().map(|l| l.capacity_gbps).collect();
        let eff = cfg.memory.random_efficiency;
        let shortest_spin_ns = threads.iter().map(|th| th.spin_limit_ns).fold(f64::INFINITY, f64::min);
        let mut w = World {
            m,
            p,
            cfg,
            mem,
            sched,
            scan: vec![ScanCursor::default(); spaces.len()],
            spaces,
            cont,
            threads,
            shortest_spin_ns,
            n,
            node_of_cpu: cpus.node_of_cpu.clone(),
            memory_nodes,
            ns_per_flop: 1.0 / (m.clock_ghz * cfg.core.flops_per_cycle),
            mlp: [cfg.core.mlp_stream_on(m), cfg.core.mlp_random, cfg.core.mlp_dependent],
            svc_mult: [1.0, 1.0 / eff, 1.0 / eff],
            now: 0.0,
            p2p_done,
            max_chunks,
            access_matrix: vec![0; n * n],
            write_matrix: vec![0; n * n],
            link_bytes_interval: vec![0.0; links],
            settled_acc: vec![0; n],
            settled_wr: vec![0; n],
            interval_start: 0.0,
            interval_maxima: Vec::new(),
            timeline: Vec::new(),
            interval_counters: Counters::default(),
            interval_cross_node_moves: 0,
            interval_matrix: vec![0; n * n],
            link_capacity,
            counters: Counters::default(),
            pingpong: PingPong::new(p.threads as usize),
            follow_ups: VecDeque::new(),
            tick_next_ns: cfg.tick_ms * 1e6,
            task_tick_next_ns: 1e9 / cfg.sched.tick_hz,
            tick_matrix: vec![0; n * n],
            tick_write_matrix: vec![0; n * n],
            tick_start: 0.0,
            sample_period_ns: None,
            states: vec![TaskState::Runnable; p.threads as usize],
            share: vec![1.0; p.threads as usize],
            moves: Vec::new(),
            naps: Vec::new(),
            after_load_moved: false,
            release_floor: Vec::new(),
            arrive_ns: vec![f64::NAN; p.threads as usize],
            first_arrival: Vec::new(),
            blend_inv: Vec::new(),
            forecast_counts: Vec::new(),
            demands: vec![Demand::default(); p.threads as usize],
            solved_for: Vec::new(),
            solved_share: Vec::new(),
            solves: 0,
            cost_built: vec![usize::MAX; p.threads as usize],
            steps_begun: 0,
            steps_begun_at_last: 0,
            counts: EngineCounts::default(),
            shares: SegShares::default(),
            space_counters,
            maps,
            order: TimeOrder::default(),
            order_queue: OrderQueue::default(),
        };
        for t in 0..p.threads {
            w.load_step(t as usize);
        }
        Ok(Engine { w, drv })
    }
}
