//! Timed VM runs (docs/vm.md, "A workload inside VMs"): the epoch simulator runs a
//! workload's threads as vCPUs of one or more VMs under hypervisor-level placement.
//!
//! The least invasive reading of a VM in the simulator, with no change to the engine:
//!
//! - **vCPUs pinned by the home-node selection** (the default). A
//!   [`numalab_policy::vm::Host`] creates the VMs on the machine (docs/vm.md, "Home nodes");
//!   thread `i` of a VM (its threads in ascending global id) runs on vCPU `i mod vcpus`, and
//!   the program's starting CPU of that thread becomes the pCPU the vCPU is pinned to. The
//!   program runs pinned: the balancer never moves a thread, so the guest's scheduler cannot
//!   move work across nodes (nor across vCPUs, a simplification).
//! - **Or scheduled by Xen's credit scheduler** (`[hypervisor] vcpu_scheduler = "credit"`,
//!   docs/vm.md, "The hypervisor's vCPU scheduler"): vCPUs time-share and are stolen across
//!   pCPUs and nodes; each guest thread follows its vCPU by a `MoveThread` decision
//!   ([`DynPolicy::moves_pinned_threads`]), and a VM that cannot be packed runs.
//! - **Guest memory placed by the VM's policy.** The run's placement policy is
//!   [`VmPlacement`], which asks the host: page `j` of the VM's workload is guest frame
//!   `ram[j]` (the VM's RAM frames, holes skipped, in ascending order; the processes of a VM
//!   follow one another), and the frame's machine node is where the host backed it: eagerly
//!   at VM creation under round-4k and round-1g, at the first touch of a vCPU under
//!   first-touch (the node of the pCPU it is pinned to).
//!
//! - **Guest frame reuse** (docs/vm.md, "Guest frame reuse"). Before the workload starts, the
//!   guest OS runs the processes of its `[vm.guest]` behaviour (a preset such as
//!   `build-like`): each takes frames off the guest's free list (most recently freed first),
//!   touches them from one vCPU, and frees them at its exit. The workload's pages then take
//!   frames off that free list in page order, so a reused frame is backed where the earlier
//!   process's vCPU first touched it unless the notification queue reported its free and the
//!   hypervisor unbacked it. Each workload page's first touch is a guest allocation: with the
//!   queue on, its append (and any delivery it triggers) costs the touching thread.
//!
//! - **Guest churn during the run** (`[vm.guest] during_run`, docs/vm.md, "Guest churn during
//!   the run"; `crate::vmlive`): the guest's processes go on starting and ending while the
//!   workload runs, and the workload's pages take their frames off the live free list at their
//!   first touch.
//! - **Carrefour in the hypervisor** (`vm:KIND+carrefour`, docs/vm.md): Carrefour over the
//!   VM placement as an open base; the host's frame table follows every move ([`vm_policy`]).
//!
//! What this does not model: the workload's own frees reused during the run (a process of a mix that
//! exits returns its frames, but no later process of the run reuses them); the guest OS's own
//! memory; second-level address translation costs.

pub use crate::vmplace::{QueueTime, VmPlacement, UNASSIGNED};
use crate::{metrics::RunMetrics, run_with_policy, Scenario, SimError};
use numalab_core::{CpuId, Machine, NodeId};
use numalab_policy::carrefour::OpenCarrefour;
use numalab_policy::vm::{
    Access, CreditScheduler, HomeChoice, Host, HypervisorConfig, StaticKind, VcpuScheduler, VcpuSpec, VmConfig, VmError, VmId,
};
use numalab_policy::{DynPolicy, PolicyEnv};
use numalab_workload::Program;
use rand::Rng;
use rayon::prelude::*;
use serde::{Deserialize, Serialize};
use std::collections::VecDeque;
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

    /// The same VMs under the policy `vm:NAME` names: `first-touch`, `round-4k`, `round-1g`
    /// (the queue as the file sets it, on by default), `first-touch+queue` and
    /// `first-touch-no-queue` (the notification queue forced on or off), each with or without
    /// `+carrefour` (Carrefour run by the hypervisor over that placement, with the file's
    /// `[hypervisor.carrefour]` keys or the defaults; docs/vm.md, "Carrefour in the
    /// hypervisor").
    pub fn with_policy_name(&self, name: &str) -> Result<VmSetup, VmSetupError> {
        let (base, carrefour) = match name.strip_suffix("+carrefour") {
            Some(base) => (base, true),
            None => (name, false),
        };
        let (kind, queue) = match base {
            "first-touch+queue" => (StaticKind::FirstTouch, Some(true)),
            "first-touch-no-queue" => (StaticKind::FirstTouch, Some(false)),
            other => (static_kind(other).map_err(|_| unknown_vm_policy(name))?, None),
        };
        let mut s = self.with_policy(kind);
        if let Some(on) = queue {
            s.vm.iter_mut().for_each(|v| v.queue.enabled = on);
        }
        s.hypervisor.carrefour = match carrefour {
            true => Some(self.hypervisor.carrefour.clone().unwrap_or_default()),
            false => None,
        };
        Ok(s)
    }
}

pub(crate) fn unknown_vm_policy(name: &str) -> VmSetupError {
    VmSetupError::Config {
        key: "policy".into(),
        message: format!(
            "unknown vm policy '{name}': a vm runs first-touch, first-touch+queue, first-touch-no-queue, round-4k or round-1g, \
             each optionally with +carrefour"
        ),
    }
}

/// Every `vm:NAME` a VM run accepts: each static kind (first-touch also with the queue
/// forced on and off), each without and with `+carrefour` (docs/vm.md). The VM cases of the
/// conformance suite run every one.
pub fn vm_policy_names() -> Vec<String> {
    let mut names = Vec::new();
    for k in StaticKind::ALL {
        let bases: &[&str] = match k {
            StaticKind::FirstTouch => &["first-touch", "first-touch+queue", "first-touch-no-queue"],
            _ => &[k.name()],
        };
        for b in bases {
            names.push(b.to_string());
            names.push(format!("{b}+carrefour"));
        }
    }
    names
}

/// The static policy named `name` (`first-touch`, `round-4k`, `round-1g`).
pub fn static_kind(name: &str) -> Result<StaticKind, VmSetupError> {
    StaticKind::ALL.into_iter().find(|k| k.name() == name).ok_or_else(|| unknown_vm_policy(name))
}

/// Where every thread and page of a program goes in the VMs of a setup.
#[derive(Clone, Debug, PartialEq)]
pub struct VmPlan {
    /// Per VM: its home nodes (ascending).
    pub home_nodes: Vec<Vec<NodeId>>,
    /// Per VM: the pCPU each vCPU is pinned to (under the credit scheduler: the pCPU it
    /// starts on).
    pub pins: Vec<Vec<CpuId>>,
    /// Under the credit scheduler: every vCPU of every VM in VM order, with its soft
    /// affinity (the pCPUs of its VM's home nodes); empty when vCPUs are pinned.
    pub vcpu_specs: Vec<VcpuSpec>,
    /// Per thread: (VM, vCPU).
    pub thread_vcpu: Vec<(usize, u32)>,
    /// Per process (address space) of the program: its VM.
    pub space_vm: Vec<usize>,
    /// Per page of the program (global numbering): its guest frame in its VM in a freshly
    /// booted guest (a run with a guest history takes frames off the guest's free list
    /// instead: [`VmPlacement::frame_of_page`]).
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
pub(crate) fn host_of(machine: &Arc<Machine>, setup: &VmSetup) -> Result<(Host, Vec<VmId>), VmSetupError> {
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
    for (i, v) in setup.vm.iter().enumerate() {
        let c = v.guest.churn();
        let concurrency = u64::from(if c.concurrency == 0 { v.vcpus } else { c.concurrency }.min(c.processes));
        let pb = machine.base_page_bytes();
        let ram_pages = v.frames(pb) - v.hole_frames(pb);
        if c.processes > 0 && concurrency * c.process_bytes.div_ceil(pb) > ram_pages {
            return bad(
                &format!("vm[{i}].guest"),
                format!(
                    "{concurrency} guest processes of {} bytes at once do not fit in the vm's {ram_pages} pages of RAM",
                    c.process_bytes
                ),
            );
        }
    }
    let spaces = program.members.len().max(1);
    let space_vm: Vec<usize> = match setup.vm.len() {
        1 => vec![0; spaces],
        n if n == spaces => (0..n).collect(),
        n => return bad("vm", format!("{n} [[vm]] tables for a workload of {spaces} process(es): give one VM, or one per process")),
    };
    let (host, ids) = host_of(machine, setup)?;
    let credit = setup.hypervisor.vcpu_scheduler == VcpuScheduler::Credit;
    let mut home_nodes = Vec::new();
    let mut pins = Vec::new();
    for (i, &id) in ids.iter().enumerate() {
        let v = host.vm(id)?;
        match v.home() {
            HomeChoice::Packed { nodes, pins: p } => {
                home_nodes.push(nodes.clone());
                pins.push(p.clone());
            }
            // The credit scheduler time-shares and moves vCPUs: a VM that could not be packed
            // runs with every memory node as its home (docs/vm.md, "The hypervisor's vCPU
            // scheduler").
            HomeChoice::Unpacked { nodes } if credit => {
                home_nodes.push(nodes.clone());
                pins.push(Vec::new());
            }
            HomeChoice::Unpacked { .. } => {
                return bad(
                    &format!("vm[{i}]"),
                    format!(
                        "{} vCPUs and {} bytes do not fit on the pCPUs and memory left free by the VMs before it: with pinned vCPUs a \
                         VM needs one free pCPU per vCPU (set [hypervisor] vcpu_scheduler = \"credit\" to time-share them)",
                        setup.vm[i].vcpus, setup.vm[i].mem_bytes
                    ),
                );
            }
        }
    }
    let vcpu_specs = if credit { credit_specs(machine, setup, &home_nodes) } else { Vec::new() };
    if credit {
        let sched = credit_scheduler(machine, setup, &vcpu_specs)?;
        let mut g = 0;
        for (vm, cfg) in setup.vm.iter().enumerate() {
            pins[vm] = (0..cfg.vcpus as usize).map(|k| sched.processor(g + k)).collect();
            g += cfg.vcpus as usize;
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
    Ok(VmPlan { home_nodes, pins, vcpu_specs, thread_vcpu, space_vm, frame_of_page })
}

/// Every vCPU of every VM, in VM order, soft-affine to the pCPUs of its VM's home nodes.
pub(crate) fn credit_specs(machine: &Machine, setup: &VmSetup, home_nodes: &[Vec<NodeId>]) -> Vec<VcpuSpec> {
    let node_of_cpu = machine.cpu_table().node_of_cpu;
    let mut specs = Vec::new();
    for (vm, cfg) in setup.vm.iter().enumerate() {
        let soft_cpus: Vec<CpuId> =
            (0..node_of_cpu.len() as CpuId).filter(|&c| home_nodes[vm].contains(&node_of_cpu[c as usize])).collect();
        specs.extend((0..cfg.vcpus).map(|_| VcpuSpec { vm, soft_cpus: soft_cpus.clone() }));
    }
    specs
}

/// The credit scheduler over the machine's pCPUs with the plan's vCPUs placed.
pub(crate) fn credit_scheduler(machine: &Machine, setup: &VmSetup, specs: &[VcpuSpec]) -> Result<CreditScheduler, VmSetupError> {
    CreditScheduler::new(setup.hypervisor.credit.clone(), machine.cpu_table().node_of_cpu, specs).map_err(|e| match e {
        VmError::Config { .. } => VmSetupError::Config { key: "hypervisor".into(), message: e.to_string() },
        e => e.into(),
    })
}

pub(crate) fn program_pages_of_vm(p: &Program, space_vm: &[usize], vm: usize, spaces: usize) -> u64 {
    if p.members.is_empty() {
        return p.total_pages;
    }
    (0..spaces).filter(|&s| space_vm[s] == vm).map(|s| p.members[s].program.total_pages).sum()
}

/// The guest's free list of VM `vm` after its `[vm.guest]` history, replayed on `host` (frames
/// touched from the vCPUs' pins, frees appended to the notification queue when it runs).
/// `pop()` gives the next frame the guest allocates: most recently freed first; at boot, RAM
/// frames in ascending order [A] (docs/vm.md, "Guest frame reuse"). Also returns the host
/// time at which the run starts: one process period after the history's last queue operation
/// (with the lock waits and deliveries it paid) is over, so no delivery of the history still
/// holds a partition's lock when the workload starts.
pub fn replay_guest(
    host: &mut Host,
    id: VmId,
    vm: usize,
    cfg: &VmConfig,
    pins: &[CpuId],
    seed: u64,
) -> Result<(Vec<u64>, f64), VmSetupError> {
    let pb = host.page_bytes();
    let mut free: Vec<u64> = (0..cfg.frames(pb)).rev().filter(|&f| !cfg.is_hole(f, pb)).collect();
    let churn = cfg.guest.churn();
    if churn.processes == 0 {
        return Ok((free, 0.0));
    }
    let concurrency = if churn.concurrency == 0 { cfg.vcpus } else { churn.concurrency } as usize;
    let pages = churn.process_bytes.div_ceil(pb);
    let mut rng = numalab_core::rng::stream(seed, "vm.guest", vm as u64);
    let mut alive: VecDeque<Vec<u64>> = VecDeque::new();
    // Event times only order the queue's appends; one process start per 10 ms [ours], longer
    // than the deliveries one start and one exit trigger at the preset sizes.
    let mut now_ns = 0.0;
    // A process's frees (at its exit) and allocations (at its start) run one after another on
    // its vCPU: each starts when the previous one, with any lock wait and delivery it paid,
    // is over (docs/vm.md, "Counters of a timed run").
    // Returns the time the exit's last free (and any delivery it triggered) is over.
    let exit = |host: &mut Host, free: &mut Vec<u64>, frames: Vec<u64>, now_ns: f64| -> Result<f64, VmError> {
        let mut t = now_ns;
        for f in frames {
            t += host.guest_free(id, f, t)?;
            free.push(f);
        }
        Ok(t)
    };
    // When the history's last queue operation is over.
    let mut ops_end_ns: f64 = 0.0;
    for _ in 0..churn.processes {
        if alive.len() >= concurrency {
            let old = alive.pop_front().unwrap_or_default();
            ops_end_ns = ops_end_ns.max(exit(host, &mut free, old, now_ns)?);
        }
        let vcpu = rng.random_range(0..cfg.vcpus);
        let mut frames = Vec::with_capacity(pages as usize);
        let mut t = now_ns;
        for _ in 0..pages {
            let Some(pfn) = free.pop() else {
                return Err(VmSetupError::Config {
                    key: format!("vm[{vm}].guest"),
                    message: format!(
                        "{concurrency} guest processes of {} bytes at once do not fit in the vm's {} bytes",
                        churn.process_bytes, cfg.mem_bytes
                    ),
                });
            };
            t += host.guest_alloc(id, pfn, t)?;
            host.touch(id, Access { vcpu, pcpu: pins[vcpu as usize], pfn })?;
            frames.push(pfn);
        }
        ops_end_ns = ops_end_ns.max(t);
        alive.push_back(frames);
        now_ns += 1e7;
    }
    // The processes still alive exit together, each on its vCPU, so they contend for the
    // partitions' locks: with many large processes (the `build-like` preset: 48 exits of 32 MiB,
    // 768 deliveries over 4 partitions) the last delivery ends tens of milliseconds later.
    while let Some(old) = alive.pop_front() {
        ops_end_ns = ops_end_ns.max(exit(host, &mut free, old, now_ns)?);
    }
    // The run starts once the last delivery is over, one process period later [ours].
    Ok((free, now_ns.max(ops_end_ns) + 1e7))
}

/// The name a run under `setup` reports: `vm:KIND` (with `+carrefour` when the hypervisor
/// runs Carrefour) when every VM runs the same placement, `vm` otherwise.
pub fn policy_name(setup: &VmSetup) -> &'static str {
    let kinds: Vec<StaticKind> = setup.vm.iter().map(|v| v.static_policy).collect();
    let base = match kinds.first() {
        Some(k) if kinds.iter().all(|x| x == k) => match k {
            StaticKind::FirstTouch if setup.vm.iter().all(|v| v.queue.enabled) => "first-touch+queue",
            StaticKind::FirstTouch if setup.vm.iter().all(|v| !v.queue.enabled) => "first-touch-no-queue",
            StaticKind::FirstTouch => "",
            StaticKind::Round4K => "round-4k",
            StaticKind::Round1G => "round-1g",
        },
        _ => "",
    };
    match (base, setup.hypervisor.carrefour.is_some()) {
        ("", false) => "vm",
        ("", true) => "vm+carrefour",
        ("first-touch+queue", false) => "vm:first-touch+queue",
        ("first-touch+queue", true) => "vm:first-touch+queue+carrefour",
        ("first-touch-no-queue", false) => "vm:first-touch-no-queue",
        ("first-touch-no-queue", true) => "vm:first-touch-no-queue+carrefour",
        ("round-4k", false) => "vm:round-4k",
        ("round-4k", true) => "vm:round-4k+carrefour",
        (_, false) => "vm:round-1g",
        (_, true) => "vm:round-1g+carrefour",
    }
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
    run_with_policy(s2, vm_policy(s2, setup, plan, seed)?, seed, None)
}

/// The policy of a VM run: the VMs' placement, under Carrefour when the hypervisor runs it
/// (`[hypervisor.carrefour]`), each address space's interleave destinations its VM's home
/// nodes (docs/vm.md, "Carrefour in the hypervisor").
pub fn vm_policy(s2: &Scenario, setup: &VmSetup, plan: &Arc<VmPlan>, seed: u64) -> Result<Box<dyn DynPolicy>, SimError> {
    let p = VmPlacement::new(&s2.machine, &s2.program, setup, plan.clone(), seed).map_err(|e| SimError::Config(e.to_string()))?;
    let Some(config) = setup.hypervisor.carrefour.clone() else { return Ok(Box::new(p)) };
    let name = p.name;
    let nodes: Vec<Vec<NodeId>> = (0..plan.space_vm.len()).map(|s| p.space_nodes(s)).collect();
    let env = PolicyEnv::new(s2.machine.clone()).with_seed(seed);
    let mut c = OpenCarrefour::new(name, config, &env, Box::new(p)).map_err(|e| SimError::Config(e.to_string()))?;
    for (space, n) in nodes.into_iter().enumerate() {
        c.restrict_space(space as u32, n);
    }
    Ok(Box::new(c))
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
