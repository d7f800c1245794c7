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

use crate::vmlive::LiveGuest;
use crate::{metrics::RunMetrics, run_with_policy, Scenario, SimError};
use numalab_core::{CpuId, Machine, NodeId};
use numalab_policy::carrefour::OpenCarrefour;
use numalab_policy::decision::{EventRef, Outcome, PlaceRequest, Tick};
use numalab_policy::vm::{
    Access, CreditScheduler, HomeChoice, Host, HypervisorConfig, StaticKind, VcpuScheduler, VcpuSpec, VmConfig, VmError, VmId,
};
use numalab_policy::{DynPolicy, MemoryState, OutOfMemory, PolicyEnv, SystemView};
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

fn unknown_vm_policy(name: &str) -> VmSetupError {
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
fn credit_specs(machine: &Machine, setup: &VmSetup, home_nodes: &[Vec<NodeId>]) -> Vec<VcpuSpec> {
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
fn credit_scheduler(machine: &Machine, setup: &VmSetup, specs: &[VcpuSpec]) -> Result<CreditScheduler, VmSetupError> {
    CreditScheduler::new(setup.hypervisor.credit.clone(), machine.cpu_table().node_of_cpu, specs).map_err(|e| match e {
        VmError::Config { .. } => VmSetupError::Config { key: "hypervisor".into(), message: e.to_string() },
        e => e.into(),
    })
}

fn program_pages_of_vm(p: &Program, space_vm: &[usize], vm: usize, spaces: usize) -> u64 {
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

/// The placement policy of a VM run: every page goes where the host backs its guest frame.
pub struct VmPlacement {
    host: Host,
    ids: Vec<VmId>,
    plan: Arc<VmPlan>,
    /// First global page of each space.
    space_first_page: Vec<u64>,
    /// Per page of the program: its guest frame, taken off its VM's free list after the
    /// guest's history (page order); [`UNASSIGNED`] until its first touch in a VM whose guest
    /// churns during the run.
    frame_of_page: Vec<u64>,
    /// Per VM: the guest's free list (most recently freed on top) and, with `during_run`, its
    /// processes during the run.
    free_lists: Vec<Vec<u64>>,
    live: Vec<Option<LiveGuest>>,
    /// The host's clock as this policy knows it: the run's start on the host's clock (after
    /// the guests' histories) plus the last tick's time, advanced by the queue time it charged
    /// since (the placement hook is not handed the time).
    clock_ns: f64,
    /// Host time at which the run started.
    start_ns: f64,
    /// Queue time the last placement charged, taken by the engine.
    pending_cost_ns: f64,
    name: &'static str,
    config: toml::Table,
    /// Carrefour's moves the host carried out in its frame tables, and those it refused (the
    /// target node had no free machine frame in the host's accounting).
    host_migrations: u64,
    host_migrations_refused: u64,
    /// Copies of machine frames Carrefour made (the host's tables record each frame's home
    /// copy only: docs/vm.md, "Carrefour in the hypervisor").
    replicas: u64,
    /// Live guests stopped by a frame-table error (a simulator bug: 0 in every test).
    guest_errors: u64,
    /// The hypervisor's credit scheduler, when `[hypervisor] vcpu_scheduler = "credit"`.
    credit: Option<CreditRun>,
    /// Notification-queue time by where it was spent (docs/vm.md, "Counters of a timed run").
    queue_time: QueueTime,
}

/// Notification-queue time of a VM run, split by who spent it and whether the run's clock
/// paid it: lock waits and delivery calls, each of the guest histories before the run (not
/// charged), of the live guests' processes during the run (not charged: their computation is
/// not modelled) and of the workload's first touches (charged to the touching thread).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct QueueTime {
    pub history_wait_ns: f64,
    pub history_delivery_ns: f64,
    pub live_wait_ns: f64,
    pub live_delivery_ns: f64,
    pub charged_wait_ns: f64,
    pub charged_delivery_ns: f64,
}

/// The host's queue waits and delivery times summed over its VMs.
fn queue_totals(host: &Host, ids: &[VmId]) -> (f64, f64) {
    ids.iter().filter_map(|&id| host.vm(id).ok()).fold((0.0, 0.0), |(w, d), v| {
        let c = v.counters();
        (w + c.queue_wait_ns, d + c.queue_delivery_ns)
    })
}

/// A VM run's credit scheduler and how its vCPUs map to the program's threads (docs/vm.md,
/// "The hypervisor's vCPU scheduler").
struct CreditRun {
    sched: CreditScheduler,
    node_of_cpu: Vec<NodeId>,
    /// Per VM: its first vCPU in the scheduler's numbering.
    first_vcpu: Vec<usize>,
    /// Per vCPU (scheduler numbering): the program's threads that run on it.
    threads_of_vcpu: Vec<Vec<u32>>,
}

impl CreditRun {
    fn new(machine: &Machine, setup: &VmSetup, plan: &VmPlan) -> Result<CreditRun, VmSetupError> {
        let sched = credit_scheduler(machine, setup, &plan.vcpu_specs)?;
        let mut first_vcpu = Vec::new();
        let mut g = 0;
        for cfg in &setup.vm {
            first_vcpu.push(g);
            g += cfg.vcpus as usize;
        }
        let mut threads_of_vcpu = vec![Vec::new(); g];
        for (t, &(vm, v)) in plan.thread_vcpu.iter().enumerate() {
            threads_of_vcpu[first_vcpu[vm] + v as usize].push(t as u32);
        }
        Ok(CreditRun { sched, node_of_cpu: machine.cpu_table().node_of_cpu, first_vcpu, threads_of_vcpu })
    }

    /// Run the scheduler's ticks due by `now_ns` (a vCPU is runnable while one of its guest
    /// threads is alive [A]) and move every thread to the pCPU its vCPU is on now.
    fn follow(&mut self, now_ns: u64, view: &dyn SystemView, out: &mut Vec<numalab_policy::Decision>) -> bool {
        if self.sched.next_tick_ns() > now_ns {
            return false;
        }
        for (v, threads) in self.threads_of_vcpu.iter().enumerate() {
            self.sched.set_runnable(v, threads.iter().any(|&t| view.thread_alive(t)));
        }
        self.sched.advance_to(now_ns);
        self.sched.take_moves();
        for (v, threads) in self.threads_of_vcpu.iter().enumerate() {
            let cpu = self.sched.processor(v);
            for &t in threads.iter().filter(|&&t| view.thread_alive(t) && view.cpu_of_thread(t) != cpu) {
                out.push(numalab_policy::Decision::MoveThread {
                    thread: t,
                    to: self.node_of_cpu[cpu as usize],
                    cpu: Some(cpu),
                    cause: numalab_policy::MoveCause::Policy,
                });
            }
        }
        true
    }
}

/// `frame_of_page` of a page without a frame yet.
pub const UNASSIGNED: u64 = u64::MAX;

impl VmPlacement {
    /// The VMs of `setup` created on `machine`, each guest's history replayed with the run's
    /// `seed` (its own stream per VM), and every page of `program` given its guest frame.
    pub fn new(
        machine: &Arc<Machine>,
        program: &Program,
        setup: &VmSetup,
        plan: Arc<VmPlan>,
        seed: u64,
    ) -> Result<VmPlacement, VmSetupError> {
        let (mut host, ids) = host_of(machine, setup)?;
        let name = policy_name(setup);
        let config = match toml::Value::try_from(setup) {
            Ok(toml::Value::Table(t)) => t,
            _ => toml::Table::new(),
        };
        let space_first_page = if program.members.is_empty() { vec![0] } else { program.members.iter().map(|m| m.first_page).collect() };
        let mut free_lists = Vec::new();
        let mut start_ns: f64 = 0.0;
        for (i, (&id, cfg)) in ids.iter().zip(&setup.vm).enumerate() {
            let (free, end_ns) = replay_guest(&mut host, id, i, cfg, &plan.pins[i], seed)?;
            free_lists.push(free);
            start_ns = start_ns.max(end_ns);
        }
        let live: Vec<Option<LiveGuest>> = ids
            .iter()
            .zip(&setup.vm)
            .enumerate()
            .map(|(i, (&id, cfg))| cfg.guest.during_run.then(|| LiveGuest::new(&host, id, i, cfg, plan.pins[i].clone(), seed, start_ns)))
            .collect();
        let (history_wait_ns, history_delivery_ns) = queue_totals(&host, &ids);
        let queue_time = QueueTime { history_wait_ns, history_delivery_ns, ..Default::default() };
        let credit = match setup.hypervisor.vcpu_scheduler {
            VcpuScheduler::Credit => Some(CreditRun::new(machine, setup, &plan)?),
            VcpuScheduler::Pinned => None,
        };
        let mut frame_of_page = vec![UNASSIGNED; program.total_pages as usize];
        for (s, &first) in space_first_page.iter().enumerate() {
            let vm = plan.space_vm[s];
            if live[vm].is_some() {
                // Taken off the live free list at the page's first touch.
                continue;
            }
            let pages = if program.members.is_empty() { program.total_pages } else { program.members[s].program.total_pages };
            for pg in first..first + pages {
                frame_of_page[pg as usize] = free_lists[vm].pop().ok_or_else(|| VmSetupError::Config {
                    key: format!("vm[{vm}].mem_bytes"),
                    message: "the guest's free list ran out before the workload's last page".into(),
                })?;
            }
        }
        Ok(VmPlacement {
            host,
            ids,
            plan,
            space_first_page,
            frame_of_page,
            free_lists,
            live,
            clock_ns: start_ns,
            start_ns,
            pending_cost_ns: 0.0,
            name,
            config,
            host_migrations: 0,
            host_migrations_refused: 0,
            replicas: 0,
            guest_errors: 0,
            credit,
            queue_time,
        })
    }

    /// The memory nodes of the VM that space `space` runs in (its home nodes).
    pub fn space_nodes(&self, space: usize) -> Vec<NodeId> {
        self.host.vm(self.ids[self.plan.space_vm[space]]).map(|v| v.allowed().to_vec()).unwrap_or_default()
    }

    pub fn host(&self) -> &Host {
        &self.host
    }

    /// The guest frame of the program's page `global_page` ([`UNASSIGNED`] before the first
    /// touch of a page whose guest churns during the run).
    pub fn frame_of_page(&self, global_page: u64) -> u64 {
        self.frame_of_page[global_page as usize]
    }

    /// The frame the guest will hand out next in the VM of space `space` (the top of its free
    /// list), if any.
    pub fn next_free_frame(&self, space: usize) -> Option<u64> {
        self.free_lists[self.plan.space_vm[space]].last().copied()
    }

    /// Under the credit scheduler: its ticks due by run time `now_ns`, the threads moved after
    /// their vCPUs, and the live guests' processes run from their vCPUs' pCPUs.
    fn follow_scheduler(&mut self, now_ns: u64, view: &dyn SystemView, out: &mut Vec<numalab_policy::Decision>) {
        let Some(c) = &mut self.credit else { return };
        if !c.follow(now_ns, view, out) {
            return;
        }
        for (vm, g) in self.live.iter_mut().enumerate() {
            if let Some(g) = g {
                for k in 0..self.plan.pins[vm].len() {
                    g.set_pcpu(k as u32, c.sched.processor(c.first_vcpu[vm] + k));
                }
            }
        }
    }

    /// Run the guests' processes due by host time `now_ns` (`during_run` only).
    pub fn advance_guests(&mut self, now_ns: f64) -> Result<(), VmError> {
        if self.live.iter().all(Option::is_none) {
            return Ok(());
        }
        let (w0, d0) = queue_totals(&self.host, &self.ids);
        let mut result = Ok(());
        for (vm, g) in self.live.iter_mut().enumerate() {
            if let Some(g) = g {
                if let Err(e) = g.advance(&mut self.host, &mut self.free_lists[vm], now_ns) {
                    result = Err(e);
                    break;
                }
            }
        }
        let (w1, d1) = queue_totals(&self.host, &self.ids);
        self.queue_time.live_wait_ns += w1 - w0;
        self.queue_time.live_delivery_ns += d1 - d0;
        result
    }

    /// Queue time of this run so far, by where it was spent.
    pub fn queue_time(&self) -> QueueTime {
        self.queue_time
    }

    fn frame(&self, space: usize, local_page: u64) -> (VmId, u64) {
        let global = self.space_first_page[space] + local_page;
        (self.ids[self.plan.space_vm[space]], self.frame_of_page[global as usize])
    }

    /// The page's frame, taken off its VM's free list now if it has none yet.
    fn frame_at_first_touch(&mut self, space: usize, local_page: u64) -> Option<(VmId, u64)> {
        let global = (self.space_first_page[space] + local_page) as usize;
        let vm = self.plan.space_vm[space];
        if self.frame_of_page[global] == UNASSIGNED {
            self.frame_of_page[global] = self.free_lists[vm].pop()?;
        }
        Some((self.ids[vm], self.frame_of_page[global]))
    }
}

impl DynPolicy for VmPlacement {
    fn name(&self) -> &'static str {
        self.name
    }
    fn config_toml(&self) -> toml::Table {
        self.config.clone()
    }
    /// The page's first touch in the guest: the guest allocates its frame (an append to the
    /// notification queue when it runs, charged to the thread), then the vCPU touches it. A
    /// backed frame keeps its node; an unbacked one is placed by the VM's policy now, from the
    /// pCPU the thread's vCPU is on at this moment (`req.cpu`: a guest thread keeps its vCPU,
    /// and the thread is where its vCPU is: pinned, or moved by the credit scheduler).
    fn place(&mut self, req: &PlaceRequest, _mem: &dyn MemoryState) -> Result<NodeId, OutOfMemory> {
        // Guest processes due by now run first, so the free list is the guest's at this time.
        if self.advance_guests(self.clock_ns).is_err() {
            return Err(OutOfMemory { wanted: req.cpu_node, pages: 1 });
        }
        let Some((vm, pfn)) = self.frame_at_first_touch(req.space as usize, req.page) else {
            return Err(OutOfMemory { wanted: req.cpu_node, pages: 1 });
        };
        let (_, vcpu) = self.plan.thread_vcpu[req.thread as usize];
        let (w0, d0) = queue_totals(&self.host, &self.ids);
        match self.host.guest_alloc(vm, pfn, self.clock_ns) {
            Ok(cost_ns) => {
                self.clock_ns += cost_ns;
                self.pending_cost_ns += cost_ns;
                let (w1, d1) = queue_totals(&self.host, &self.ids);
                self.queue_time.charged_wait_ns += w1 - w0;
                self.queue_time.charged_delivery_ns += d1 - d0;
            }
            Err(_) => return Err(OutOfMemory { wanted: req.cpu_node, pages: 1 }),
        }
        match self.host.touch(vm, Access { vcpu, pcpu: req.cpu, pfn }) {
            Ok(t) => Ok(t.node),
            Err(VmError::OutOfMemory { wanted, .. }) => Err(OutOfMemory { wanted, pages: 1 }),
            Err(_) => Err(OutOfMemory { wanted: req.cpu_node, pages: 1 }),
        }
    }
    fn take_place_cost_ns(&mut self) -> f64 {
        std::mem::take(&mut self.pending_cost_ns)
    }
    /// Under the credit scheduler the threads follow their vCPUs.
    fn moves_pinned_threads(&self) -> bool {
        self.credit.is_some()
    }
    /// The credit scheduler's ticks run at the run's task ticks (docs/vm.md, "The
    /// hypervisor's vCPU scheduler").
    fn on_task_tick(&mut self, tick: &numalab_policy::TaskTick, view: &dyn SystemView, out: &mut Vec<numalab_policy::Decision>) {
        self.follow_scheduler(tick.time_ns.max(view.now_ns()), view, out);
    }
    /// Scan steps never unmap a VM's pages: the hypervisor runs no NUMA balancing.
    fn should_unmap(&mut self, _space: u32, _page: u64, _node: NodeId) -> bool {
        false
    }
    /// Keeps the policy's clock up with the run's (the queue's lock times).
    /// and runs the guests' processes due by then (`during_run`).
    fn on_tick(&mut self, _tick: &Tick, view: &dyn SystemView, out: &mut Vec<numalab_policy::Decision>) {
        self.follow_scheduler(view.now_ns(), view, out);
        self.clock_ns = self.clock_ns.max(self.start_ns + view.now_ns() as f64);
        // An error here is a frame table out of step with the guest (a simulator bug); the
        // guests stop churning rather than abort the run, and the counters show it.
        if self.advance_guests(self.clock_ns).is_err() {
            self.live.iter_mut().for_each(|g| *g = None);
            self.guest_errors += 1;
        }
    }
    /// Carrefour's orders as the hypervisor carries them out: a page moved by the simulator is
    /// the machine frame behind its guest frame, moved in the host's frame table too, so a
    /// later free and reuse of the frame starts from where it now lives.
    fn on_outcomes(&mut self, _cause: &EventRef, decisions: &[numalab_policy::Decision], outcomes: &[Outcome]) {
        for (d, o) in decisions.iter().zip(outcomes) {
            if *o != Outcome::Applied {
                continue;
            }
            match *d {
                numalab_policy::Decision::MigratePage { space, page, to } => {
                    let (vm, pfn) = self.frame(space as usize, page);
                    match self.host.migrate_frame(vm, pfn, to) {
                        Ok(_) => self.host_migrations += 1,
                        Err(_) => self.host_migrations_refused += 1,
                    }
                }
                numalab_policy::Decision::Replicate { .. } => self.replicas += 1,
                _ => {}
            }
        }
    }
    /// Summed over the VMs (docs/vm.md, "Counters").
    fn counters(&self) -> Vec<(&'static str, u64)> {
        let mut access = 0;
        let mut fallbacks = 0;
        let mut oom = 0;
        let mut unbacked = 0;
        let mut kept = 0;
        let mut deliveries = 0;
        for &id in &self.ids {
            if let Ok(v) = self.host.vm(id) {
                let c = v.counters();
                access += c.access_placements;
                fallbacks += c.fallbacks.values().sum::<u64>();
                oom += c.out_of_memory;
                unbacked += c.frames_unbacked;
                kept += c.frames_kept_on_alloc;
                deliveries += c.queue_deliveries;
            }
        }
        let mut live = Vec::new();
        if self.live.iter().any(Option::is_some) || self.guest_errors > 0 {
            let sum = |f: fn(&crate::vmlive::LiveCounters) -> u64| -> u64 { self.live.iter().flatten().map(|g| f(&g.counters)).sum() };
            live = vec![
                ("vm_guest_starts", sum(|c| c.starts)),
                ("vm_guest_exits", sum(|c| c.exits)),
                ("vm_guest_starts_skipped", sum(|c| c.starts_skipped)),
                ("vm_guest_queue_wait_ns", self.queue_time.live_wait_ns as u64),
                ("vm_guest_queue_delivery_ns", self.queue_time.live_delivery_ns as u64),
                ("vm_guest_errors", self.guest_errors),
            ];
        }
        let mut c = vec![
            ("vm_access_placements", access),
            ("vm_fallbacks", fallbacks),
            ("vm_out_of_memory", oom),
            ("vm_frames_unbacked", unbacked),
            ("vm_frames_kept_on_alloc", kept),
            ("vm_queue_deliveries", deliveries),
            ("vm_queue_charged_wait_ns", self.queue_time.charged_wait_ns as u64),
            ("vm_queue_charged_delivery_ns", self.queue_time.charged_delivery_ns as u64),
            ("vm_queue_history_wait_ns", self.queue_time.history_wait_ns as u64),
            ("vm_queue_history_delivery_ns", self.queue_time.history_delivery_ns as u64),
            ("vm_frames_migrated", self.host_migrations),
            ("vm_frames_migrate_refused", self.host_migrations_refused),
            ("vm_frames_replicated", self.replicas),
            ("vm_host_frames_unaccounted", self.host.frames_unaccounted()),
        ];
        c.extend(live);
        if let Some(cr) = &self.credit {
            let k = cr.sched.counters;
            c.extend([
                ("vm_vcpu_moves", k.moves),
                ("vm_vcpu_cross_node_moves", k.cross_node_moves),
                ("vm_vcpu_steals_soft", k.steals_soft),
                ("vm_vcpu_steals_hard", k.steals_hard),
                ("vm_vcpu_switches", k.switches),
            ]);
        }
        c
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
