//! A host running VMs under hypervisor-level placement (docs/vm.md;
//! docs/vm.md). Pure and I/O-free: the caller drives it with guest events (a vCPU touches a
//! frame, the guest OS allocates or frees a frame, a driver registers a DMA buffer) and the
//! time, and reads back where frames live, what each event cost and the counters of §10.
//!
//! The hypervisor sees guest-physical frames, not guest processes: one static policy covers
//! the whole VM. A frame is *unbacked* until its placement event, then *backed* on a node
//! until the hypervisor takes the machine frame back, which happens only when the guest
//! reports the frame freed through the notification queue.

use super::config::{HypervisorConfig, StaticKind, VmConfig};
use super::error::VmError;
use super::home::{select, HomeChoice, NodeLoad};
use super::queue::{verdicts, Delivery, FrameOp, NotificationQueue};
use crate::decision::PlaceRequest;
use crate::policy::{AddressSpaceInfo, DynPolicy, MemoryState, PolicyEnv};
use crate::statics::{FirstTouch, FirstTouchConfig, Indexing, Round1G, Round1GConfig, Round4K, Round4KConfig};
use crate::Policy;
use numalab_core::{CpuId, Machine, NodeId};
use std::collections::BTreeMap;
use std::sync::Arc;

pub type VmId = u32;

/// Machine frames per node as the hypervisor sees them. A node is full when a placement would
/// leave fewer than `reserve` free frames (§1 `node_reserve_frames`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HostMemory {
    pub free: Vec<u64>,
    pub capacity: Vec<u64>,
    pub reserve: u64,
}

impl MemoryState for HostMemory {
    fn free_pages(&self, node: NodeId) -> u64 {
        self.free[node as usize].saturating_sub(self.reserve)
    }
    fn capacity_pages(&self, node: NodeId) -> u64 {
        self.capacity[node as usize]
    }
}

/// A guest frame as the hypervisor maps it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FrameState {
    /// No machine frame: the next access is a placement event.
    Unbacked,
    Backed(NodeId),
    /// Inside a hole of the guest-physical map: never backed.
    Hole,
}

/// Per-VM counters (docs/vm.md).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct VmCounters {
    /// Frames placed on each node, eagerly or at an access (a frame placed again after an
    /// unback counts again).
    pub placements_per_node: Vec<u64>,
    /// Placements that did not get the node the policy wanted first, by (wanted, got).
    pub fallbacks: BTreeMap<(NodeId, NodeId), u64>,
    pub out_of_memory: u64,
    /// Placements at an access to an unbacked frame (first-touch events).
    pub access_placements: u64,
    pub queue_appends: u64,
    pub queue_deliveries: u64,
    pub queue_entries_processed: u64,
    pub frames_unbacked: u64,
    pub frames_kept_on_alloc: u64,
    /// `Free` verdicts on DMA-target frames, which stay backed (§3).
    pub dma_frames_kept: u64,
    /// Time guest CPUs waited for a partition lock, and time deliveries held it.
    pub queue_wait_ns: f64,
    pub queue_delivery_ns: f64,
    pub policy_switches: u64,
    /// Machine frames the hypervisor moved behind a backed guest frame (Carrefour in the
    /// hypervisor, docs/vm.md).
    pub frames_migrated: u64,
}

/// One vCPU access: vCPU `vcpu`, running on physical CPU `pcpu`, touches guest frame `pfn`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Access {
    pub vcpu: u32,
    pub pcpu: CpuId,
    pub pfn: u64,
}

/// What an access found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Touch {
    pub node: NodeId,
    /// The frame was unbacked and this access placed it.
    pub placed: bool,
}

pub struct Vm {
    id: VmId,
    config: VmConfig,
    home: HomeChoice,
    /// Memory nodes among the home nodes (`A` of §1), ascending.
    allowed: Vec<NodeId>,
    kind: StaticKind,
    policy: Box<dyn DynPolicy>,
    frames: Vec<FrameState>,
    dma: Vec<bool>,
    /// The guest's own view: frames off its free list. At boot every frame is free.
    guest_in_use: Vec<bool>,
    queue: Option<NotificationQueue>,
    next_flush_ns: Option<f64>,
    counters: VmCounters,
}

impl Vm {
    pub fn id(&self) -> VmId {
        self.id
    }
    pub fn config(&self) -> &VmConfig {
        &self.config
    }
    /// Home nodes and vCPU pins chosen at creation (§5.1).
    pub fn home(&self) -> &HomeChoice {
        &self.home
    }
    /// The nodes the VM's policy places on.
    pub fn allowed(&self) -> &[NodeId] {
        &self.allowed
    }
    /// The pCPU vCPU `v` is pinned to, if the VM was packed.
    pub fn pin(&self, vcpu: u32) -> Option<CpuId> {
        match &self.home {
            HomeChoice::Packed { pins, .. } => pins.get(vcpu as usize).copied(),
            HomeChoice::Unpacked { .. } => None,
        }
    }
    pub fn static_kind(&self) -> StaticKind {
        self.kind
    }
    pub fn frames(&self) -> u64 {
        self.frames.len() as u64
    }
    pub fn frame(&self, pfn: u64) -> Option<FrameState> {
        self.frames.get(pfn as usize).copied()
    }
    /// Backed frames per node.
    pub fn backed_per_node(&self, nodes: usize) -> Vec<u64> {
        let mut v = vec![0; nodes];
        for f in &self.frames {
            if let FrameState::Backed(n) = f {
                v[*n as usize] += 1;
            }
        }
        v
    }
    pub fn counters(&self) -> &VmCounters {
        &self.counters
    }
    /// The notification queue runs (first-touch with `queue.enabled`).
    pub fn queue_active(&self) -> bool {
        self.queue.is_some()
    }
    pub fn queue_pending(&self) -> usize {
        self.queue.as_ref().map_or(0, |q| q.pending())
    }
    pub fn is_dma_target(&self, pfn: u64) -> bool {
        self.dma.get(pfn as usize).copied().unwrap_or(false)
    }

    fn check_frame(&self, pfn: u64) -> Result<(), VmError> {
        match self.frames.get(pfn as usize) {
            None => Err(VmError::NoSuchFrame { vm: self.id, pfn, frames: self.frames.len() as u64 }),
            Some(FrameState::Hole) => Err(VmError::HoleFrame { vm: self.id, pfn }),
            Some(_) => Ok(()),
        }
    }

    /// The node the policy wants first for a frame, when it is known without asking it.
    fn wanted(&self, pfn: u64, cpu_node: NodeId) -> Option<NodeId> {
        match self.kind {
            StaticKind::FirstTouch => Some(cpu_node),
            StaticKind::Round4K if self.config.r4k_indexing == Indexing::AddressIndexed => {
                Some(self.allowed[(pfn % self.allowed.len() as u64) as usize])
            }
            _ => None,
        }
    }

    /// A placement event for an unbacked frame.
    fn place(&mut self, mem: &mut HostMemory, vcpu: u32, pcpu: CpuId, cpu_node: NodeId, pfn: u64) -> Result<NodeId, VmError> {
        debug_assert_eq!(self.frames[pfn as usize], FrameState::Unbacked);
        let req = PlaceRequest { space: self.id, thread: vcpu, cpu: pcpu, cpu_node, page: pfn };
        let node = match self.policy.place(&req, mem) {
            Ok(n) if (n as usize) < mem.free.len() && mem.free[n as usize] > 0 => n,
            Ok(n) => return Err(VmError::Policy { vm: self.id, message: format!("placed frame {pfn} on node {n}, which cannot hold it") }),
            Err(e) => {
                self.counters.out_of_memory += 1;
                return Err(VmError::OutOfMemory { vm: self.id, pfn, wanted: e.wanted });
            }
        };
        mem.free[node as usize] -= 1;
        self.frames[pfn as usize] = FrameState::Backed(node);
        self.counters.placements_per_node[node as usize] += 1;
        if let Some(w) = self.wanted(pfn, cpu_node).filter(|&w| w != node) {
            *self.counters.fallbacks.entry((w, node)).or_insert(0) += 1;
        }
        Ok(node)
    }

    /// Carry out a delivery: the newest entry of each frame decides (§7).
    fn apply(&mut self, mem: &mut HostMemory, d: &Delivery) {
        self.counters.queue_deliveries += 1;
        self.counters.queue_entries_processed += d.entries.len() as u64;
        self.counters.queue_delivery_ns += d.cost_ns;
        for v in verdicts(&d.entries) {
            match v.op {
                FrameOp::Alloc => self.counters.frames_kept_on_alloc += 1,
                FrameOp::Free if self.dma[v.pfn as usize] => self.counters.dma_frames_kept += 1,
                FrameOp::Free => {
                    if let FrameState::Backed(n) = self.frames[v.pfn as usize] {
                        mem.free[n as usize] += 1;
                        self.frames[v.pfn as usize] = FrameState::Unbacked;
                        self.counters.frames_unbacked += 1;
                    }
                }
            }
        }
    }

    fn flush(&mut self, mem: &mut HostMemory, now_ns: f64) -> f64 {
        let Some(q) = self.queue.as_mut() else { return 0.0 };
        let ds = q.flush(now_ns);
        ds.iter().for_each(|d| self.apply(mem, d));
        ds.iter().map(|d| d.cost_ns).sum()
    }

    fn guest_op(&mut self, mem: &mut HostMemory, op: FrameOp, pfn: u64, now_ns: f64) -> Result<f64, VmError> {
        self.check_frame(pfn)?;
        let in_use = &mut self.guest_in_use[pfn as usize];
        match (op, *in_use) {
            (FrameOp::Alloc, true) => return Err(VmError::GuestDoubleAlloc { vm: self.id, pfn }),
            (FrameOp::Free, false) => return Err(VmError::GuestDoubleFree { vm: self.id, pfn }),
            _ => *in_use = op == FrameOp::Alloc,
        }
        let Some(q) = self.queue.as_mut() else { return Ok(0.0) };
        let a = q.append(op, pfn, now_ns);
        self.counters.queue_appends += 1;
        self.counters.queue_wait_ns += a.wait_ns;
        if let Some(d) = &a.delivery {
            self.apply(mem, d);
        }
        Ok(a.charged_ns())
    }
}

/// The machine, its free frames and pCPU reservations, and the VMs on it.
pub struct Host {
    machine: Arc<Machine>,
    config: HypervisorConfig,
    page_bytes: u64,
    node_of_cpu: Vec<NodeId>,
    /// The VM holding each pCPU's reservation.
    cpu_owner: Vec<Option<VmId>>,
    mem: HostMemory,
    memory_nodes: Vec<NodeId>,
    vms: Vec<Option<Vm>>,
}

fn build_policy(machine: &Arc<Machine>, kind: StaticKind, cfg: &VmConfig, allowed: &[NodeId]) -> Result<Box<dyn DynPolicy>, String> {
    let env = PolicyEnv { allowed: allowed.to_vec(), ..PolicyEnv::new(machine.clone()) };
    let p: Box<dyn DynPolicy> = match kind {
        StaticKind::FirstTouch => {
            Box::new(FirstTouch::new(FirstTouchConfig { fallback: cfg.ft_fallback }, &env).map_err(|e| e.to_string())?)
        }
        StaticKind::Round4K => {
            Box::new(Round4K::new(Round4KConfig { nodes: Vec::new(), indexing: cfg.r4k_indexing }, &env).map_err(|e| e.to_string())?)
        }
        // Round-1G's last resort (no home node has a page left) is any node with memory, so
        // it sees the whole machine and gets the home nodes as its node list.
        StaticKind::Round1G => Box::new(
            Round1G::new(Round1GConfig { nodes: allowed.to_vec(), holes: cfg.r1g_holes.clone() }, &PolicyEnv::new(machine.clone()))
                .map_err(|e| e.to_string())?,
        ),
    };
    Ok(p)
}

impl Host {
    pub fn new(machine: Arc<Machine>, config: HypervisorConfig) -> Result<Host, VmError> {
        config.validate()?;
        let page_bytes = machine.base_page_bytes();
        let capacity: Vec<u64> = machine.nodes.iter().map(|n| n.mem_bytes / page_bytes).collect();
        let node_of_cpu = machine.cpu_table().node_of_cpu;
        Ok(Host {
            cpu_owner: vec![None; node_of_cpu.len()],
            node_of_cpu,
            mem: HostMemory { free: capacity.clone(), capacity, reserve: config.node_reserve_frames },
            memory_nodes: machine.memory_nodes(),
            machine,
            config,
            page_bytes,
            vms: Vec::new(),
        })
    }

    pub fn page_bytes(&self) -> u64 {
        self.page_bytes
    }
    pub fn memory(&self) -> &HostMemory {
        &self.mem
    }
    pub fn vm(&self, id: VmId) -> Result<&Vm, VmError> {
        self.vms.get(id as usize).and_then(|v| v.as_ref()).ok_or(VmError::NoSuchVm { vm: id })
    }
    /// VMs alive, by id.
    pub fn vms(&self) -> impl Iterator<Item = &Vm> {
        self.vms.iter().flatten()
    }
    /// Machine frames the host's accounting has lost or made up: per node, the gap between
    /// its capacity and its free frames plus the frames every VM has backed there, summed
    /// over the nodes. 0 when machine frames are conserved (docs/vm.md, "Counters of a
    /// timed run": `vm_host_frames_unaccounted`).
    pub fn frames_unaccounted(&self) -> u64 {
        let n = self.mem.capacity.len();
        let mut used = vec![0u64; n];
        for vm in self.vms() {
            for (u, b) in used.iter_mut().zip(vm.backed_per_node(n)) {
                *u += b;
            }
        }
        (0..n).map(|i| (self.mem.free[i] + used[i]).abs_diff(self.mem.capacity[i])).sum()
    }
    /// The VM holding a pCPU's reservation.
    pub fn cpu_owner(&self, cpu: CpuId) -> Option<VmId> {
        self.cpu_owner.get(cpu as usize).copied().flatten()
    }

    fn split(&mut self, id: VmId) -> Result<(&mut Vm, &mut HostMemory), VmError> {
        match self.vms.get_mut(id as usize).and_then(|v| v.as_mut()) {
            Some(vm) => Ok((vm, &mut self.mem)),
            None => Err(VmError::NoSuchVm { vm: id }),
        }
    }

    /// What home-node selection sees of each node now.
    pub fn node_loads(&self) -> Vec<NodeLoad> {
        (0..self.machine.node_count())
            .map(|n| {
                let cpus: Vec<CpuId> =
                    (0..self.node_of_cpu.len() as CpuId).filter(|&c| self.node_of_cpu[c as usize] as usize == n).collect();
                let reserved = cpus.iter().map(|&c| self.cpu_owner[c as usize].is_some()).collect();
                let has_memory = self.memory_nodes.contains(&(n as NodeId));
                NodeLoad { node: n as NodeId, cpus, reserved, free_bytes: self.mem.free_pages(n as NodeId) * self.page_bytes, has_memory }
            })
            .collect()
    }

    /// Create a VM (§2.1 `create`): choose its home nodes and pin its vCPUs (§5.1), then lay
    /// its memory out eagerly under round-1g and round-4k; under first-touch every frame
    /// starts unbacked. Fails, leaving the host unchanged, when the configuration is invalid
    /// or the machine's free memory cannot hold the VM's RAM.
    pub fn create_vm(&mut self, config: VmConfig) -> Result<VmId, VmError> {
        let pb = self.page_bytes;
        config.validate(pb)?;
        let id = self.vms.len() as VmId;
        let total = config.frames(pb);
        // Capacity first, from the hole ranges alone, so a VM far larger than the machine is
        // refused before its frame table is allocated.
        let ram = total - config.hole_frames(pb);
        let free: u64 = self.memory_nodes.iter().map(|&n| self.mem.free_pages(n)).sum();
        if free < ram {
            return Err(VmError::MachineTooSmall { wanted_pages: ram, free_pages: free, page_bytes: pb });
        }
        let frames: Vec<FrameState> =
            (0..total).map(|f| if config.is_hole(f, pb) { FrameState::Hole } else { FrameState::Unbacked }).collect();
        debug_assert_eq!(frames.iter().filter(|&&f| f == FrameState::Unbacked).count() as u64, ram);
        let home = select(&self.node_loads(), config.vcpus, ram * pb, self.config.r1g_exhaustive_max_nodes);
        let allowed: Vec<NodeId> = home.nodes().iter().copied().filter(|n| self.memory_nodes.contains(n)).collect();
        let kind = config.static_policy;
        let policy = build_policy(&self.machine, kind, &config, &allowed).map_err(|message| VmError::Policy { vm: id, message })?;
        let queue = (kind == StaticKind::FirstTouch && config.queue.enabled).then(|| NotificationQueue::new(&config.queue));
        let next_flush_ns = config.queue.flush_ms.map(|ms| ms * 1e6);
        let mut vm = Vm {
            id,
            home,
            allowed,
            kind,
            policy,
            dma: vec![false; total as usize],
            guest_in_use: vec![false; total as usize],
            frames,
            queue,
            next_flush_ns,
            counters: VmCounters { placements_per_node: vec![0; self.machine.node_count()], ..Default::default() },
            config,
        };
        let mut mem = self.mem.clone();
        match kind {
            StaticKind::FirstTouch => {}
            StaticKind::Round4K => {
                // Eager, in ascending guest-physical order (§4): address-indexed interleave
                // then gives frame p the node A[p mod |A|].
                let cpu = self.node_of_cpu.iter().position(|n| vm.allowed.contains(n)).unwrap_or(0) as CpuId;
                for pfn in 0..total {
                    if vm.frames[pfn as usize] == FrameState::Unbacked {
                        vm.place(&mut mem, 0, cpu, self.node_of_cpu[cpu as usize], pfn)?;
                    }
                }
            }
            StaticKind::Round1G => {
                let info = AddressSpaceInfo { space: id, pages: total, threads: vm.config.vcpus };
                let extents = vm
                    .policy
                    .layout(&info, &mem)
                    .map_err(|e| VmError::OutOfMemory { vm: id, pfn: 0, wanted: e.wanted })?
                    .ok_or_else(|| VmError::Policy { vm: id, message: "round-1g gave no layout".into() })?;
                for e in extents {
                    for pfn in e.first_page..e.first_page + e.pages {
                        if vm.frames.get(pfn as usize) != Some(&FrameState::Unbacked) || mem.free[e.node as usize] == 0 {
                            return Err(VmError::Policy {
                                vm: id,
                                message: format!("round-1g laid frame {pfn} out on node {} twice or past its memory", e.node),
                            });
                        }
                        mem.free[e.node as usize] -= 1;
                        vm.frames[pfn as usize] = FrameState::Backed(e.node);
                        vm.counters.placements_per_node[e.node as usize] += 1;
                    }
                }
            }
        }
        // Commit: memory, reservations, the VM.
        self.mem = mem;
        if let HomeChoice::Packed { pins, .. } = &vm.home {
            for &c in pins {
                self.cpu_owner[c as usize] = Some(id);
            }
        }
        self.vms.push(Some(vm));
        Ok(id)
    }

    /// Destroy a VM: its machine frames and pCPU reservations return to the host.
    pub fn destroy_vm(&mut self, id: VmId) -> Result<(), VmError> {
        let vm = self.vms.get_mut(id as usize).and_then(|v| v.take()).ok_or(VmError::NoSuchVm { vm: id })?;
        for f in &vm.frames {
            if let FrameState::Backed(n) = f {
                self.mem.free[*n as usize] += 1;
            }
        }
        for o in self.cpu_owner.iter_mut().filter(|o| **o == Some(id)) {
            *o = None;
        }
        Ok(())
    }

    /// A vCPU running on `pcpu` touches a guest frame. An unbacked frame is placed now by the
    /// VM's current policy (under first-touch: the node of `pcpu`, §3).
    pub fn touch(&mut self, id: VmId, a: Access) -> Result<Touch, VmError> {
        let cpus = self.node_of_cpu.len();
        let cpu_node = *self.node_of_cpu.get(a.pcpu as usize).ok_or(VmError::NoSuchCpu { vm: id, cpu: a.pcpu, cpus })?;
        let (vm, mem) = self.split(id)?;
        if a.vcpu >= vm.config.vcpus {
            return Err(VmError::NoSuchVcpu { vm: id, vcpu: a.vcpu, vcpus: vm.config.vcpus });
        }
        vm.check_frame(a.pfn)?;
        match vm.frames[a.pfn as usize] {
            FrameState::Backed(node) => Ok(Touch { node, placed: false }),
            _ => {
                let node = vm.place(mem, a.vcpu, a.pcpu, cpu_node, a.pfn)?;
                vm.counters.access_placements += 1;
                Ok(Touch { node, placed: true })
            }
        }
    }

    /// A guest driver registers frame `pfn` as a DMA target from `pcpu` (§3, [ours]): a device
    /// cannot take a first-touch fault, so the frame is placed now if it is unbacked (by the
    /// current policy: under first-touch, the registering CPU's node) and never unbacked
    /// while it is registered.
    pub fn register_dma(&mut self, id: VmId, vcpu: u32, pcpu: CpuId, pfn: u64) -> Result<NodeId, VmError> {
        let t = self.touch(id, Access { vcpu, pcpu, pfn })?;
        let (vm, _) = self.split(id)?;
        vm.dma[pfn as usize] = true;
        Ok(t.node)
    }

    pub fn unregister_dma(&mut self, id: VmId, pfn: u64) -> Result<(), VmError> {
        let (vm, _) = self.split(id)?;
        vm.check_frame(pfn)?;
        vm.dma[pfn as usize] = false;
        Ok(())
    }

    /// The guest OS takes frame `pfn` off its free list at `now_ns`. Returns the time the
    /// guest CPU pays (queue lock wait and any delivery it triggered).
    pub fn guest_alloc(&mut self, id: VmId, pfn: u64, now_ns: f64) -> Result<f64, VmError> {
        let (vm, mem) = self.split(id)?;
        vm.guest_op(mem, FrameOp::Alloc, pfn, now_ns)
    }

    /// The guest OS puts frame `pfn` on its free list at `now_ns`. Without the queue the
    /// hypervisor never learns of it: the frame stays backed where it is.
    pub fn guest_free(&mut self, id: VmId, pfn: u64, now_ns: f64) -> Result<f64, VmError> {
        let (vm, mem) = self.split(id)?;
        vm.guest_op(mem, FrameOp::Free, pfn, now_ns)
    }

    /// The queue's flush timer (`queue.flush_ms`): deliver every partition when it is due.
    /// Returns the delivery time spent.
    pub fn timer(&mut self, id: VmId, now_ns: f64) -> Result<f64, VmError> {
        let (vm, mem) = self.split(id)?;
        let (Some(next), Some(ms)) = (vm.next_flush_ns, vm.config.queue.flush_ms) else { return Ok(0.0) };
        if now_ns < next {
            return Ok(0.0);
        }
        let period = ms * 1e6;
        vm.next_flush_ns = Some(next + ((now_ns - next) / period).floor() * period + period);
        Ok(vm.flush(mem, now_ns))
    }

    /// The hypervisor moves the machine frame behind backed guest frame `pfn` to node `to`
    /// (Carrefour in the hypervisor, docs/vm.md): the frame stays backed, now on `to`, and its
    /// old machine frame returns to the host. Fails, leaving the host unchanged, when the frame
    /// is not backed or `to` has no free frame above the reserve. Returns the node it left.
    pub fn migrate_frame(&mut self, id: VmId, pfn: u64, to: NodeId) -> Result<NodeId, VmError> {
        let (vm, mem) = self.split(id)?;
        vm.check_frame(pfn)?;
        let FrameState::Backed(from) = vm.frames[pfn as usize] else { return Err(VmError::FrameNotBacked { vm: id, pfn }) };
        if from == to {
            return Ok(from);
        }
        if (to as usize) >= mem.free.len() || mem.free_pages(to) == 0 {
            return Err(VmError::NodeFull { vm: id, pfn, to });
        }
        mem.free[to as usize] -= 1;
        mem.free[from as usize] += 1;
        vm.frames[pfn as usize] = FrameState::Backed(to);
        vm.counters.frames_migrated += 1;
        Ok(from)
    }

    /// §2.1 `set_static`: switch the VM's static policy at run time. Pending queue entries
    /// are delivered first (an extra delivery point [ours]), so every placement event sees
    /// either the old policy or the new one. Placed frames stay. Round-1G is creation-only;
    /// first-touch needs content-free guest pages and starts the queue (when enabled).
    /// Returns the delivery time spent.
    pub fn set_static(&mut self, id: VmId, kind: StaticKind, now_ns: f64) -> Result<f64, VmError> {
        let machine = self.machine.clone();
        let (vm, mem) = self.split(id)?;
        if kind == StaticKind::Round1G {
            return Err(VmError::Round1GOnlyAtCreation);
        }
        if kind == StaticKind::FirstTouch && !vm.config.guest_free_pages_are_content_free {
            return Err(VmError::FreePagesHoldContent);
        }
        let policy = build_policy(&machine, kind, &vm.config, &vm.allowed).map_err(|message| VmError::Policy { vm: id, message })?;
        let spent = vm.flush(mem, now_ns);
        vm.policy = policy;
        vm.kind = kind;
        vm.counters.policy_switches += 1;
        let wants_queue = kind == StaticKind::FirstTouch && vm.config.queue.enabled;
        match (wants_queue, vm.queue.is_some()) {
            (true, false) => vm.queue = Some(NotificationQueue::new(&vm.config.queue)),
            (false, true) => vm.queue = None,
            _ => {}
        }
        Ok(spent)
    }
}
