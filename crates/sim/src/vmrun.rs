//! Timed VM runs (docs/vm.md, "A workload inside VMs"): the epoch simulator runs a
//! workload's threads as vCPUs of one or more VMs under hypervisor-level placement.
//!
//! The least invasive reading of a VM in the simulator, with no change to the engine:
//!
//! - **vCPUs pinned by the home-node selection.** A [`numalab_policy::vm::Host`] creates the
//!   VMs on the machine (docs/vm.md, "Home nodes"); thread `i` of a VM (its threads in
//!   ascending global id) runs on vCPU `i mod vcpus`, and the program's starting CPU of that
//!   thread becomes the pCPU the vCPU is pinned to. The program runs pinned: no balancer and
//!   no policy can move a thread, so the guest's scheduler cannot move work across nodes
//!   (nor across vCPUs, a simplification).
//! - **Guest memory placed by the VM's policy.** The run's placement policy is
//!   [`VmPlacement`], which asks the host: page `j` of the VM's workload is guest frame
//!   `ram[j]` (the VM's RAM frames, holes skipped, in ascending order; the processes of a VM
//!   follow one another), and the frame's machine node is where the host backed it: eagerly
//!   at VM creation under round-4k and round-1g, at the first touch of a vCPU under
//!   first-touch (the node of the pCPU it is pinned to).
//!
//! What this does not model: guest frame reuse (a process that exits returns its frames to
//! the guest, but no later process of the run reuses them, so the notification queue never
//! delivers a free that matters); the guest OS's own memory; second-level address
//! translation costs; a hypervisor scheduler that moves vCPUs (a VM that cannot be packed is
//! refused).

use crate::{metrics::RunMetrics, run_with_policy, Scenario, SimError};
use numalab_core::{CpuId, Machine, NodeId};
use numalab_policy::decision::{
    AccessSample, Decision, EventRef, Extent, HintFault, MempolicyIntent, Outcome, PageScan, PlaceRequest, ScanStepDone, TaskTick,
    ThreadMigrated, Tick,
};
use numalab_policy::vm::{Access, FrameState, HomeChoice, Host, HypervisorConfig, StaticKind, VmConfig, VmError, VmId};
use numalab_policy::{AddressSpaceInfo, DynPolicy, MemoryState, OutOfMemory, SystemView};
use numalab_workload::Program;
use rayon::prelude::*;
use serde::{Deserialize, Serialize};
use std::sync::Arc;
use thiserror::Error;

/// Why a workload cannot run in the VMs asked for.
#[derive(Debug, Error, Clone, PartialEq)]
pub enum VmSetupError {
    #[error("vm setup '{key}': {message}")]
    Config { key: String, message: String },
    #[error(transparent)]
    Vm(#[from] VmError),
}

/// A VM setup file: `[hypervisor]` and one `[[vm]]` table per VM (docs/vm.md, "A workload
/// inside VMs").
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct VmSetup {
    pub hypervisor: HypervisorConfig,
    pub vm: Vec<VmConfig>,
}

impl VmSetup {
    pub fn from_toml_str(text: &str) -> Result<VmSetup, VmSetupError> {
        toml::from_str(text)
            .map_err(|e: toml::de::Error| VmSetupError::Config { key: "file".into(), message: numalab_core::one_line(e.message()) })
    }

    /// The same VMs, every one under `kind` (`numalab compare --policies vm:KIND`).
    pub fn with_policy(&self, kind: StaticKind) -> VmSetup {
        let mut s = self.clone();
        s.vm.iter_mut().for_each(|v| v.static_policy = kind);
        s
    }
}

/// The static policy named `name` (`first-touch`, `round-4k`, `round-1g`).
pub fn static_kind(name: &str) -> Result<StaticKind, VmSetupError> {
    [StaticKind::FirstTouch, StaticKind::Round4K, StaticKind::Round1G].into_iter().find(|k| k.name() == name).ok_or_else(|| {
        VmSetupError::Config {
            key: "policy".into(),
            message: format!("unknown vm policy '{name}': a vm runs first-touch, round-4k or round-1g"),
        }
    })
}

/// Where every thread and page of a program goes in the VMs of a setup.
#[derive(Clone, Debug, PartialEq)]
pub struct VmPlan {
    /// Per VM: its home nodes (ascending).
    pub home_nodes: Vec<Vec<NodeId>>,
    /// Per VM: the pCPU each vCPU is pinned to.
    pub pins: Vec<Vec<CpuId>>,
    /// Per thread: (VM, vCPU).
    pub thread_vcpu: Vec<(usize, u32)>,
    /// Per process (address space) of the program: its VM.
    pub space_vm: Vec<usize>,
    /// Per page of the program (global numbering): its guest frame in its VM.
    pub frame_of_page: Vec<u64>,
}

impl VmPlan {
    /// The program with each thread starting on its vCPU's pCPU, pinned.
    pub fn pinned_program(&self, p: &Program) -> Program {
        let mut q = p.clone();
        q.initial_cpus = self.thread_vcpu.iter().map(|&(vm, v)| self.pins[vm][v as usize]).collect();
        q.pinned = true;
        q
    }
}

/// Build the host and its VMs for `setup` on `machine`.
fn host_of(machine: &Arc<Machine>, setup: &VmSetup) -> Result<(Host, Vec<VmId>), VmSetupError> {
    let mut host = Host::new(machine.clone(), setup.hypervisor.clone())?;
    let mut ids = Vec::new();
    for (i, v) in setup.vm.iter().enumerate() {
        let id = host.create_vm(v.clone()).map_err(|e| match e {
            VmError::MachineTooSmall { .. } | VmError::Config { .. } => {
                VmSetupError::Config { key: format!("vm[{i}]"), message: e.to_string() }
            }
            e => e.into(),
        })?;
        ids.push(id);
    }
    Ok((host, ids))
}

/// Check that `program` fits in the VMs of `setup` on `machine` and map its threads and
/// pages onto them. The processes of a mix go one per VM (as many `[[vm]]` tables as
/// processes), or all into one VM.
pub fn plan(machine: &Arc<Machine>, program: &Program, setup: &VmSetup) -> Result<VmPlan, VmSetupError> {
    let bad = |key: &str, message: String| Err(VmSetupError::Config { key: key.into(), message });
    if setup.vm.is_empty() {
        return bad("vm", "no [[vm]] table: a vm run needs at least one VM".into());
    }
    if program.page_bytes != machine.base_page_bytes() {
        return bad(
            "vm",
            format!("the program's pages of {} bytes are not the machine's {} bytes", program.page_bytes, machine.base_page_bytes()),
        );
    }
    if let Some(r) = program.regions.iter().find(|r| r.home.is_some()) {
        return bad(
            "vm",
            format!(
                "region '{}' has an explicit home node, which a guest cannot ask for: the hypervisor hides the machine's nodes",
                r.name
            ),
        );
    }
    let machine_bytes: u64 = machine.nodes.iter().map(|n| n.mem_bytes).sum();
    if let Some((i, v)) = setup.vm.iter().enumerate().find(|(_, v)| v.r1g_holes.is_empty() && v.mem_bytes > machine_bytes) {
        // Refused before the host sizes the VM's frame table.
        return bad(
            &format!("vm[{i}].mem_bytes"),
            format!("{} bytes of guest memory exceed the machine's {machine_bytes} bytes", v.mem_bytes),
        );
    }
    let spaces = program.members.len().max(1);
    let space_vm: Vec<usize> = match setup.vm.len() {
        1 => vec![0; spaces],
        n if n == spaces => (0..n).collect(),
        n => return bad("vm", format!("{n} [[vm]] tables for a workload of {spaces} process(es): give one VM, or one per process")),
    };
    let (host, ids) = host_of(machine, setup)?;
    let mut home_nodes = Vec::new();
    let mut pins = Vec::new();
    for (i, &id) in ids.iter().enumerate() {
        let v = host.vm(id)?;
        match v.home() {
            HomeChoice::Packed { nodes, pins: p } => {
                home_nodes.push(nodes.clone());
                pins.push(p.clone());
            }
            HomeChoice::Unpacked { .. } => {
                return bad(
                    &format!("vm[{i}]"),
                    format!(
                        "{} vCPUs and {} bytes do not fit on the pCPUs and memory left free by the VMs before it: the simulator pins vCPUs \
                         and has no hypervisor scheduler for an overcommitted machine",
                        setup.vm[i].vcpus, setup.vm[i].mem_bytes
                    ),
                );
            }
        }
    }
    // Pages and threads of each space, in order.
    let space_range = |s: usize| -> (u64, u64, std::ops::Range<u32>) {
        if program.members.is_empty() {
            (0, program.total_pages, 0..program.threads)
        } else {
            let m = &program.members[s];
            (m.first_page, m.program.total_pages, m.first_thread..m.first_thread + m.program.threads)
        }
    };
    let mut frame_of_page = vec![0u64; program.total_pages as usize];
    let mut thread_vcpu = vec![(0usize, 0u32); program.threads as usize];
    for (vm, cfg) in setup.vm.iter().enumerate() {
        let pb = machine.base_page_bytes();
        let mut ram = (0..cfg.frames(pb)).filter(|&f| !cfg.is_hole(f, pb));
        let mut next_thread = 0u32;
        for s in (0..spaces).filter(|&s| space_vm[s] == vm) {
            let (first, pages, threads) = space_range(s);
            for pg in first..first + pages {
                match ram.next() {
                    Some(f) => frame_of_page[pg as usize] = f,
                    None => {
                        let ram_pages = (0..cfg.frames(pb)).filter(|&f| !cfg.is_hole(f, pb)).count();
                        return bad(
                            &format!("vm[{vm}].mem_bytes"),
                            format!(
                                "the workload needs at least {} pages of {pb} bytes in this VM but it has {ram_pages} pages of RAM",
                                program_pages_of_vm(program, &space_vm, vm, spaces)
                            ),
                        );
                    }
                }
            }
            for t in threads {
                thread_vcpu[t as usize] = (vm, next_thread % cfg.vcpus);
                next_thread += 1;
            }
        }
    }
    Ok(VmPlan { home_nodes, pins, thread_vcpu, space_vm, frame_of_page })
}

fn program_pages_of_vm(p: &Program, space_vm: &[usize], vm: usize, spaces: usize) -> u64 {
    if p.members.is_empty() {
        return p.total_pages;
    }
    (0..spaces).filter(|&s| space_vm[s] == vm).map(|s| p.members[s].program.total_pages).sum()
}

/// The placement policy of a VM run: every page goes where the host backs its guest frame.
pub struct VmPlacement {
    host: Host,
    ids: Vec<VmId>,
    plan: Arc<VmPlan>,
    /// First global page of each space.
    space_first_page: Vec<u64>,
    name: &'static str,
    config: toml::Table,
}

impl VmPlacement {
    pub fn new(machine: &Arc<Machine>, program: &Program, setup: &VmSetup, plan: Arc<VmPlan>) -> Result<VmPlacement, VmSetupError> {
        let (host, ids) = host_of(machine, setup)?;
        let kinds: Vec<StaticKind> = setup.vm.iter().map(|v| v.static_policy).collect();
        let name = match kinds.first() {
            Some(k) if kinds.iter().all(|x| x == k) => match k {
                StaticKind::FirstTouch => "vm:first-touch",
                StaticKind::Round4K => "vm:round-4k",
                StaticKind::Round1G => "vm:round-1g",
            },
            _ => "vm",
        };
        let config = match toml::Value::try_from(setup) {
            Ok(toml::Value::Table(t)) => t,
            _ => toml::Table::new(),
        };
        let space_first_page = if program.members.is_empty() { vec![0] } else { program.members.iter().map(|m| m.first_page).collect() };
        Ok(VmPlacement { host, ids, plan, space_first_page, name, config })
    }

    pub fn host(&self) -> &Host {
        &self.host
    }

    fn frame(&self, space: usize, local_page: u64) -> (VmId, u64) {
        let global = self.space_first_page[space] + local_page;
        (self.ids[self.plan.space_vm[space]], self.plan.frame_of_page[global as usize])
    }
}

impl DynPolicy for VmPlacement {
    fn name(&self) -> &'static str {
        self.name
    }
    fn config_toml(&self) -> toml::Table {
        self.config.clone()
    }
    /// The node of the page's guest frame; an unbacked frame is placed by the VM's policy
    /// now, from the pCPU the thread's vCPU is pinned to (`req.cpu`: threads are pinned).
    fn place(&mut self, req: &PlaceRequest, _mem: &dyn MemoryState) -> Result<NodeId, OutOfMemory> {
        let (vm, pfn) = self.frame(req.space as usize, req.page);
        let (_, vcpu) = self.plan.thread_vcpu[req.thread as usize];
        match self.host.touch(vm, Access { vcpu, pcpu: req.cpu, pfn }) {
            Ok(t) => Ok(t.node),
            Err(VmError::OutOfMemory { wanted, .. }) => Err(OutOfMemory { wanted, pages: 1 }),
            Err(_) => Err(OutOfMemory { wanted: req.cpu_node, pages: 1 }),
        }
    }
    /// Eager VM layouts (round-4k, round-1g) back every frame at creation: the space's pages
    /// get those nodes, in runs. Under first-touch nothing is backed yet.
    fn layout(&mut self, space: &AddressSpaceInfo, _mem: &dyn MemoryState) -> Result<Option<Vec<Extent>>, OutOfMemory> {
        let s = space.space as usize;
        let vm = self.host.vm(self.ids[self.plan.space_vm[s]]).map_err(|_| OutOfMemory { wanted: 0, pages: space.pages })?;
        let mut out: Vec<Extent> = Vec::new();
        for page in 0..space.pages {
            let pfn = self.plan.frame_of_page[(self.space_first_page[s] + page) as usize];
            let Some(FrameState::Backed(node)) = vm.frame(pfn) else { continue };
            match out.last_mut() {
                Some(e) if e.node == node && e.first_page + e.pages == page => e.pages += 1,
                _ => out.push(Extent { first_page: page, pages: 1, node }),
            }
        }
        Ok(if out.is_empty() { None } else { Some(out) })
    }
    fn should_unmap(&mut self, _space: u32, _page: u64, _node: NodeId) -> bool {
        false
    }
    fn on_hint_fault(&mut self, _fault: &HintFault, _view: &dyn SystemView, _out: &mut Vec<Decision>) {}
    fn on_scan_step(&mut self, _step: &ScanStepDone, _view: &dyn SystemView, _out: &mut Vec<Decision>) {}
    fn on_tick(&mut self, _tick: &Tick, _view: &dyn SystemView, _out: &mut Vec<Decision>) {}
    fn on_task_tick(&mut self, _tick: &TaskTick, _view: &dyn SystemView, _out: &mut Vec<Decision>) {}
    fn on_thread_migrated(&mut self, _moved: &ThreadMigrated, _view: &dyn SystemView, _out: &mut Vec<Decision>) {}
    fn sample_period_ns(&self) -> Option<f64> {
        None
    }
    fn on_sample(&mut self, _sample: &AccessSample) {}
    fn on_outcomes(&mut self, _cause: &EventRef, _decisions: &[Decision], _outcomes: &[Outcome]) {}
    fn mempolicy(&self) -> Option<MempolicyIntent> {
        None
    }
    /// Summed over the VMs (docs/vm.md, "Counters").
    fn counters(&self) -> Vec<(&'static str, u64)> {
        let mut access = 0;
        let mut fallbacks = 0;
        let mut oom = 0;
        for &id in &self.ids {
            if let Ok(v) = self.host.vm(id) {
                let c = v.counters();
                access += c.access_placements;
                fallbacks += c.fallbacks.values().sum::<u64>();
                oom += c.out_of_memory;
            }
        }
        vec![("vm_access_placements", access), ("vm_fallbacks", fallbacks), ("vm_out_of_memory", oom)]
    }
    fn page_scanner_period_ns(&self) -> Option<u64> {
        None
    }
    fn on_page_scan(&mut self, _scan: &PageScan, _view: &dyn SystemView, _out: &mut Vec<Decision>) {}
}

/// A scenario's workload run inside the VMs of `setup`: the plan, and the scenario with its
/// program pinned to the vCPUs' pCPUs.
pub fn vm_scenario(s: &Scenario, setup: &VmSetup) -> Result<(Scenario, Arc<VmPlan>), VmSetupError> {
    let plan = plan(&s.machine, &s.program, setup)?;
    let mut s2 = s.clone();
    s2.program = Arc::new(plan.pinned_program(&s.program));
    Ok((s2, Arc::new(plan)))
}

/// One run of the scenario's workload inside the VMs of `setup`.
pub fn run_one_vm(s: &Scenario, setup: &VmSetup, seed: u64) -> Result<RunMetrics, SimError> {
    let (s2, plan) = vm_scenario(s, setup).map_err(|e| SimError::Config(e.to_string()))?;
    run_planned(&s2, setup, &plan, seed)
}

fn run_planned(s2: &Scenario, setup: &VmSetup, plan: &Arc<VmPlan>, seed: u64) -> Result<RunMetrics, SimError> {
    let p = VmPlacement::new(&s2.machine, &s2.program, setup, plan.clone()).map_err(|e| SimError::Config(e.to_string()))?;
    run_with_policy(s2, Box::new(p), seed, None)
}

/// `runs` runs inside the VMs of `setup`, seeded as [`crate::run_many`] seeds them.
pub fn run_many_vm(
    s: &Scenario,
    setup: &VmSetup,
    master_seed: u64,
    runs: u32,
    on_done: &(dyn Fn() + Sync),
) -> Result<Vec<RunMetrics>, SimError> {
    s.sim.validate().map_err(SimError::Config)?;
    let (s2, plan) = vm_scenario(s, setup).map_err(|e| SimError::Config(e.to_string()))?;
    (0..runs as u64)
        .into_par_iter()
        .map(|k| {
            let r = run_planned(&s2, setup, &plan, numalab_core::rng::run_seed(master_seed, k));
            on_done();
            r
        })
        .collect()
}
