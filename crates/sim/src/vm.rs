//! VM churn runs (docs/vm.md, "Churn runs"): several VMs on one machine under
//! hypervisor-level placement (`numalab_policy::vm`), each guest running a stream of
//! processes that allocate guest frames from the guest's free list, touch them and free them
//! at exit. Frame reuse across vCPUs is what makes hypervisor-level first-touch misplace
//! frames unless the notification queue reports the frees.
//!
//! This is a small model beside the epoch simulator, not part of it: a touch costs the
//! machine's idle latency from the vCPU's node to the frame's node (no contention, no
//! caches), a placement at an access adds `os_costs.first_touch_fault_ns`, and the queue's
//! lock waits and deliveries are charged to the guest CPU that appended. A guest demand fault
//! (a process touching a page with no guest frame yet) and a hypervisor placement each cost
//! `os_costs.first_touch_fault_ns` [A].

use numalab_core::rng::stream;
use numalab_core::{CpuId, Machine, NodeId};
use numalab_policy::vm::{Access, FrameState, HomeChoice, Host, HypervisorConfig, VmConfig, VmCounters, VmError};
use rand::Rng;
use serde::{Deserialize, Serialize};
use std::sync::Arc;
use thiserror::Error;

#[derive(Debug, Error, Clone, PartialEq)]
pub enum VmRunError {
    #[error("vm run setting '{key}': {message}")]
    Config { key: String, message: String },
    #[error(transparent)]
    Vm(#[from] VmError),
}

/// `[[guest]]`: what the guest OS of the VM with the same index does [A: a synthetic
/// process-churn model, docs/vm.md].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct GuestChurn {
    /// Processes each vCPU runs one after another.
    pub processes_per_vcpu: u32,
    /// Mean guest frames a process allocates when it starts and frees when it exits; each
    /// process draws its size uniformly in `1..=2 × mean − 1` [A].
    pub frames_per_process: u64,
    /// Touches of a process per frame it holds, each to one of its frames drawn uniformly.
    pub touches_per_frame: u64,
}

impl Default for GuestChurn {
    fn default() -> Self {
        GuestChurn { processes_per_vcpu: 8, frames_per_process: 256, touches_per_frame: 16 }
    }
}

/// A whole churn run: `[hypervisor]`, `[[vm]]` (with `[vm.queue]`) and one `[[guest]]` per VM.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct VmRunConfig {
    pub hypervisor: HypervisorConfig,
    pub vm: Vec<VmConfig>,
    pub guest: Vec<GuestChurn>,
}

/// Largest processes per vCPU, mean frames per process and touches per frame [ours].
pub const MAX_PROCESSES: u32 = 1 << 16;
pub const MAX_FRAMES: u64 = 1 << 24;
pub const MAX_TOUCHES: u64 = 1 << 16;

impl VmRunConfig {
    pub fn from_toml_str(text: &str) -> Result<VmRunConfig, VmRunError> {
        toml::from_str(text)
            .map_err(|e: toml::de::Error| VmRunError::Config { key: "file".into(), message: numalab_core::one_line(e.message()) })
    }

    /// Check everything but what needs the machine (done by the host at VM creation).
    pub fn validate(&self) -> Result<(), VmRunError> {
        let bad = |key: String, message: String| Err(VmRunError::Config { key, message });
        self.hypervisor.validate()?;
        if self.vm.is_empty() {
            return bad("vm".into(), "no [[vm]] table: a run needs at least one VM".into());
        }
        if self.guest.len() != self.vm.len() {
            return bad("guest".into(), format!("{} [[guest]] tables for {} [[vm]] tables: one each", self.guest.len(), self.vm.len()));
        }
        for (i, g) in self.guest.iter().enumerate() {
            if !(1..=MAX_PROCESSES).contains(&g.processes_per_vcpu) {
                return bad(format!("guest[{i}].processes_per_vcpu"), format!("{} is outside 1..={MAX_PROCESSES}", g.processes_per_vcpu));
            }
            if !(1..=MAX_FRAMES).contains(&g.frames_per_process) {
                return bad(format!("guest[{i}].frames_per_process"), format!("{} is outside 1..={MAX_FRAMES}", g.frames_per_process));
            }
            if !(1..=MAX_TOUCHES).contains(&g.touches_per_frame) {
                return bad(format!("guest[{i}].touches_per_frame"), format!("{} is outside 1..={MAX_TOUCHES}", g.touches_per_frame));
            }
        }
        Ok(())
    }
}

/// What one VM did in a run.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct VmRunMetrics {
    pub vm: u32,
    pub static_policy: &'static str,
    pub queue_active: bool,
    pub home_nodes: Vec<NodeId>,
    pub pinned: bool,
    pub touches: u64,
    pub local_touches: u64,
    /// `local_touches / touches`.
    pub local_ratio: f64,
    /// Latest vCPU clock at the end: the VM's run time.
    pub makespan_ns: f64,
    /// Touch latency, fault and queue time over all vCPUs.
    pub touch_ns: f64,
    pub fault_ns: f64,
    pub queue_ns: f64,
    pub backed_frames_per_node: Vec<u64>,
    pub access_placements: u64,
    pub placements_per_node: Vec<u64>,
    pub queue_appends: u64,
    pub queue_deliveries: u64,
    pub queue_entries_processed: u64,
    pub frames_unbacked: u64,
    pub frames_kept_on_alloc: u64,
}

struct Vcpu {
    vm: usize,
    vcpu: u32,
    pcpu: CpuId,
    clock: f64,
    processes_left: u32,
    /// The running process's pages: the guest frame behind each, once touched.
    pages: Vec<Option<u64>>,
    touches_left: u64,
    /// At exit: the next page to free.
    free_at: usize,
}

/// Run the VMs to completion. Same machine, config and seed give the same metrics.
pub fn run(machine: Arc<Machine>, cfg: &VmRunConfig, seed: u64) -> Result<Vec<VmRunMetrics>, VmRunError> {
    cfg.validate()?;
    let node_of_cpu = machine.cpu_table().node_of_cpu;
    let cpus = node_of_cpu.len() as CpuId;
    let fault_ns = machine.os_costs.first_touch_fault_ns;
    let mut host = Host::new(machine.clone(), cfg.hypervisor.clone())?;
    let mut ids = Vec::new();
    let mut free_lists: Vec<Vec<u64>> = Vec::new();
    let mut vcpus: Vec<Vcpu> = Vec::new();
    for (i, (vc, g)) in cfg.vm.iter().zip(&cfg.guest).enumerate() {
        let id = host.create_vm(vc.clone())?;
        let v = host.vm(id)?;
        let ram: Vec<u64> = (0..v.frames()).filter(|&p| v.frame(p) != Some(FrameState::Hole)).collect();
        // The largest process is 2 × mean − 1 frames: every vCPU may hold one at once.
        if u64::from(vc.vcpus) * (2 * g.frames_per_process - 1) > ram.len() as u64 {
            return Err(VmRunError::Config {
                key: format!("guest[{i}].frames_per_process"),
                message: format!(
                    "{} vCPUs × up to {} frames (2 × {} − 1) exceed the vm's {} frames of RAM",
                    vc.vcpus,
                    2 * g.frames_per_process - 1,
                    g.frames_per_process,
                    ram.len()
                ),
            });
        }
        // The guest's free list is one LIFO stack, lowest frame on top at boot: the most
        // recently freed frame is reused first (docs/vm.md, "Churn runs").
        free_lists.push(ram.into_iter().rev().collect());
        for vcpu in 0..vc.vcpus {
            // Unpinned vCPUs (an unpacked VM) run on pCPU v mod cpus [A]: no hypervisor
            // scheduler yet.
            let pcpu = v.pin(vcpu).unwrap_or(vcpu % cpus);
            vcpus.push(Vcpu {
                vm: i,
                vcpu,
                pcpu,
                clock: 0.0,
                processes_left: g.processes_per_vcpu,
                pages: Vec::new(),
                touches_left: 0,
                free_at: 0,
            });
        }
        ids.push(id);
    }
    let n = machine.node_count();
    let mut acc = vec![(0u64, 0u64, 0.0f64, 0.0f64, 0.0f64); ids.len()]; // touches, local, touch, fault, queue ns
    let mut rngs: Vec<_> = (0..vcpus.len()).map(|k| stream(seed, "vm.guest", k as u64)).collect();
    // Event loop: the vCPU with the earliest clock takes one step (ties: lowest index), so
    // queue appends reach the queue in time order.
    let next = |vcpus: &[Vcpu]| {
        (0..vcpus.len())
            .filter(|&k| vcpus[k].processes_left > 0 || !vcpus[k].pages.is_empty())
            .min_by(|&a, &b| vcpus[a].clock.total_cmp(&vcpus[b].clock).then(a.cmp(&b)))
    };
    while let Some(k) = next(&vcpus) {
        let vc = &mut vcpus[k];
        let (vm, id, g) = (vc.vm, ids[vc.vm], &cfg.guest[vc.vm]);
        let a = &mut acc[vm];
        let mut queue_ns = host.timer(id, vc.clock)?;
        if vc.pages.is_empty() {
            // A process starts with its pages not yet backed by guest frames.
            vc.processes_left -= 1;
            let size = rngs[k].random_range(1..=2 * g.frames_per_process - 1);
            vc.pages = vec![None; size as usize];
            vc.touches_left = size * g.touches_per_frame;
            vc.free_at = 0;
        } else if vc.touches_left > 0 {
            let page = rngs[k].random_range(0..vc.pages.len());
            let mut fault = 0.0;
            let pfn = match vc.pages[page] {
                Some(pfn) => pfn,
                None => {
                    // The guest's demand fault: a frame off the free list.
                    let pfn = free_lists[vm].pop().expect("checked: vCPUs × largest process fit in RAM");
                    queue_ns += host.guest_alloc(id, pfn, vc.clock)?;
                    vc.pages[page] = Some(pfn);
                    fault += fault_ns;
                    pfn
                }
            };
            let t = host.touch(id, Access { vcpu: vc.vcpu, pcpu: vc.pcpu, pfn })?;
            let cpu_node = node_of_cpu[vc.pcpu as usize];
            let lat = machine.latency_ns[cpu_node as usize][t.node as usize];
            if t.placed {
                fault += fault_ns;
            }
            a.0 += 1;
            a.1 += u64::from(t.node == cpu_node);
            a.2 += lat;
            a.3 += fault;
            vc.clock += lat + fault;
            vc.touches_left -= 1;
        } else {
            // The process exits: one frame back on the free list per step, in page order.
            match vc.pages[vc.free_at..].iter().position(|p| p.is_some()) {
                Some(off) => {
                    let i = vc.free_at + off;
                    let pfn = vc.pages[i].take().expect("some");
                    queue_ns += host.guest_free(id, pfn, vc.clock)?;
                    free_lists[vm].push(pfn);
                    vc.free_at = i + 1;
                }
                None => vc.pages.clear(),
            }
        }
        a.4 += queue_ns;
        vc.clock += queue_ns;
    }
    Ok(ids
        .iter()
        .enumerate()
        .map(|(i, &id)| {
            let v = host.vm(id).expect("alive");
            let c: &VmCounters = v.counters();
            let (touches, local, touch_ns, fault_ns, queue_ns) = acc[i];
            VmRunMetrics {
                vm: id,
                static_policy: v.static_kind().name(),
                queue_active: v.queue_active(),
                home_nodes: v.home().nodes().to_vec(),
                pinned: matches!(v.home(), HomeChoice::Packed { .. }),
                touches,
                local_touches: local,
                local_ratio: if touches == 0 { 0.0 } else { local as f64 / touches as f64 },
                makespan_ns: vcpus.iter().filter(|x| x.vm == i).map(|x| x.clock).fold(0.0, f64::max),
                touch_ns,
                fault_ns,
                queue_ns,
                backed_frames_per_node: v.backed_per_node(n),
                access_placements: c.access_placements,
                placements_per_node: c.placements_per_node.clone(),
                queue_appends: c.queue_appends,
                queue_deliveries: c.queue_deliveries,
                queue_entries_processed: c.queue_entries_processed,
                frames_unbacked: c.frames_unbacked,
                frames_kept_on_alloc: c.frames_kept_on_alloc,
            }
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use numalab_core::machine::presets;

    fn config(queue: bool, policy: &str) -> VmRunConfig {
        let text = format!(
            "[hypervisor]\n\
             [[vm]]\nvcpus = 12\nmem_bytes = 67108864\nstatic_policy = \"{policy}\"\n[vm.queue]\nenabled = {queue}\ncapacity = 64\n\
             [[guest]]\nprocesses_per_vcpu = 6\nframes_per_process = 256\ntouches_per_frame = 8\n"
        );
        VmRunConfig::from_toml_str(&text).unwrap()
    }

    fn amd48() -> Arc<Machine> {
        Arc::new(presets::load("amd48").unwrap())
    }

    /// One VM of 12 vCPUs on amd48 (8 nodes of 6 cores, 16 GiB each): it packs on nodes
    /// {0, 1}, vCPUs pinned to CPUs 0..12. Under first-touch without the queue, frames freed by
    /// one vCPU's process and reused by another's keep their first node; with the queue most
    /// are placed again where the new owner runs, at a queue cost.
    #[test]
    fn the_queue_restores_locality_under_churn() {
        let m = amd48();
        let off = run(m.clone(), &config(false, "first-touch"), 1).unwrap().remove(0);
        let on = run(m.clone(), &config(true, "first-touch"), 1).unwrap().remove(0);
        let r4k = run(m, &config(true, "round-4k"), 1).unwrap().remove(0);
        assert_eq!((off.home_nodes.clone(), off.pinned), (vec![0, 1], true));
        assert_eq!((off.touches, on.touches), (r4k.touches, r4k.touches), "the guest does the same under every policy");
        assert_eq!(off.touches % 8, 0);
        assert!(!off.queue_active && on.queue_active && !r4k.queue_active);
        assert_eq!((off.queue_deliveries, off.frames_unbacked, off.queue_ns), (0, 0, 0.0));
        assert!(on.frames_unbacked > 0 && on.queue_ns > 0.0);
        assert!(on.local_ratio > off.local_ratio + 0.1, "queue on {:.3} vs off {:.3}", on.local_ratio, off.local_ratio);
        // Round-4k interleaves by frame over the two home nodes: about half local.
        assert!((r4k.local_ratio - 0.5).abs() < 0.05, "{}", r4k.local_ratio);
        assert_eq!(r4k.access_placements, 0, "eager at creation");
        // Without the queue every frame is placed once; with it, again after each reported free.
        assert!(off.access_placements <= 16384 && on.access_placements > off.access_placements);
    }

    #[test]
    fn same_seed_same_result_and_two_vms_share_the_machine() {
        let m = amd48();
        let mut cfg = config(true, "first-touch");
        cfg.vm.push(cfg.vm[0].clone());
        cfg.guest.push(GuestChurn { processes_per_vcpu: 2, frames_per_process: 64, touches_per_frame: 4 });
        let a = run(m.clone(), &cfg, 7).unwrap();
        let b = run(m.clone(), &cfg, 7).unwrap();
        assert_eq!(a, b);
        assert_eq!(a[1].home_nodes, vec![2, 3], "the second VM packs on the next free nodes");
        assert!(a[1].touches > 0 && a[1].touches.is_multiple_of(4));
        let c = run(m, &cfg, 8).unwrap();
        assert_ne!(a[0].local_touches, c[0].local_touches, "the seed drives the touches");
    }

    #[test]
    fn bad_run_files_are_typed_errors() {
        let m = amd48();
        let e = VmRunConfig::from_toml_str("[[vm]]\nvcpus = 2\nbogus = 1\n").unwrap_err();
        assert!(matches!(&e, VmRunError::Config { key, message } if key == "file" && message.contains("unknown field `bogus`")), "{e}");
        let mut cfg = config(true, "first-touch");
        cfg.guest.clear();
        assert!(matches!(run(m.clone(), &cfg, 1), Err(VmRunError::Config { key, .. }) if key == "guest"));
        let mut cfg = config(true, "first-touch");
        cfg.guest[0].frames_per_process = 1000;
        let e = run(m.clone(), &cfg, 1).unwrap_err();
        assert_eq!(
            e.to_string(),
            "vm run setting 'guest[0].frames_per_process': 12 vCPUs × up to 1999 frames (2 × 1000 − 1) exceed the vm's 16384 frames of RAM"
        );
        let mut cfg = config(true, "first-touch");
        cfg.vm[0].queue.partitions = 3;
        assert!(matches!(run(m.clone(), &cfg, 1), Err(VmRunError::Vm(VmError::Config { key: "vm.queue.partitions", .. }))));
        let mut cfg = config(true, "first-touch");
        cfg.guest[0].touches_per_frame = 0;
        assert!(matches!(run(m, &cfg, 1), Err(VmRunError::Config { key, .. }) if key == "guest[0].touches_per_frame"));
    }
}
