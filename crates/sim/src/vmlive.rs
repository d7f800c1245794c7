//! Guest churn during a timed VM run (docs/vm.md, "Guest churn during the run"): with
//! `[vm.guest] during_run = true` the guest OS keeps starting and ending processes while the
//! workload runs, so frames are freed and taken again mid-run, and the workload's pages take
//! their frames off the live free list at their first touch.

use numalab_core::rng::{stream, StreamRng};
use numalab_core::CpuId;
use numalab_policy::vm::{Access, Host, VmConfig, VmError, VmId};
use rand::Rng;
use std::collections::VecDeque;

/// One process start per period, as in the history before the run [ours].
pub const PROCESS_PERIOD_NS: f64 = 1e7;

/// What the guest's processes did during the run.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct LiveCounters {
    pub starts: u64,
    pub exits: u64,
    /// Starts that found fewer free frames than a process needs (the workload holds them).
    pub starts_skipped: u64,
    /// Queue time of the processes' appends and the deliveries they triggered: time of the
    /// guest's own processes, which the run does not simulate as threads.
    pub queue_ns: f64,
}

/// The processes of one VM's guest during the run.
pub struct LiveGuest {
    id: VmId,
    vcpus: u32,
    pins: Vec<CpuId>,
    pages: u64,
    concurrency: usize,
    rng: StreamRng,
    /// Processes alive: exit time and frames, oldest first.
    alive: VecDeque<(f64, Vec<u64>)>,
    /// Host time of the next process start.
    next_start_ns: f64,
    pub counters: LiveCounters,
}

impl LiveGuest {
    /// The live guest of VM `vm` (host id `id`), its first process starting at `start_ns`
    /// (the run's start on the host's clock); its own seeded stream `vm.guest.live`.
    /// `pins`: the pCPU each vCPU starts on (its pin, or its first pCPU under the credit
    /// scheduler, which [`LiveGuest::set_pcpu`] then follows).
    pub fn new(host: &Host, id: VmId, vm: usize, cfg: &VmConfig, pins: Vec<CpuId>, seed: u64, start_ns: f64) -> LiveGuest {
        let churn = cfg.guest.churn();
        LiveGuest {
            id,
            vcpus: cfg.vcpus,
            pins,
            pages: churn.process_bytes.div_ceil(host.page_bytes()),
            concurrency: if churn.concurrency == 0 { cfg.vcpus } else { churn.concurrency }.max(1) as usize,
            rng: stream(seed, "vm.guest.live", vm as u64),
            alive: VecDeque::new(),
            next_start_ns: start_ns,
            counters: LiveCounters::default(),
        }
    }

    /// Run every process start and exit due by `now_ns` (host time), in time order. A
    /// process lives `concurrency` periods less half a period, so it exits half a period
    /// before the start that replaces it [A: the gap between one compiler's exit and the next
    /// one's start]: between the two, the frames it freed are on top of the free list, where a
    /// workload allocation takes them. An exit frees the process's frames (pushed on `free`,
    /// the most recent on top, a `Free` append each when the queue runs); a start takes
    /// `pages` frames off `free` and allocates and touches each from a vCPU drawn uniformly
    /// (placed by the VM's policy if unbacked), or is skipped when too few are free.
    /// The pCPU vCPU `vcpu` runs on now (the hypervisor's scheduler moved it).
    pub fn set_pcpu(&mut self, vcpu: u32, pcpu: CpuId) {
        if let Some(p) = self.pins.get_mut(vcpu as usize) {
            *p = pcpu;
        }
    }

    pub fn advance(&mut self, host: &mut Host, free: &mut Vec<u64>, now_ns: f64) -> Result<(), VmError> {
        let lifetime_ns = (self.concurrency as f64 - 0.5) * PROCESS_PERIOD_NS;
        loop {
            let next_exit = self.alive.front().map_or(f64::INFINITY, |p| p.0);
            if next_exit <= now_ns && next_exit <= self.next_start_ns {
                // The exiting process's frees run one after another on its vCPU.
                let (mut t, frames) = self.alive.pop_front().unwrap_or_default();
                for f in frames {
                    let cost_ns = host.guest_free(self.id, f, t)?;
                    self.counters.queue_ns += cost_ns;
                    t += cost_ns;
                    free.push(f);
                }
                self.counters.exits += 1;
            } else if self.next_start_ns <= now_ns {
                let start_ns = self.next_start_ns;
                let mut t = start_ns;
                let vcpu = self.rng.random_range(0..self.vcpus);
                if (free.len() as u64) < self.pages {
                    self.counters.starts_skipped += 1;
                } else {
                    let mut frames = Vec::with_capacity(self.pages as usize);
                    for _ in 0..self.pages {
                        let Some(pfn) = free.pop() else { break };
                        let cost_ns = host.guest_alloc(self.id, pfn, t)?;
                        self.counters.queue_ns += cost_ns;
                        t += cost_ns;
                        host.touch(self.id, Access { vcpu, pcpu: self.pins[vcpu as usize], pfn })?;
                        frames.push(pfn);
                    }
                    self.alive.push_back((start_ns + lifetime_ns, frames));
                    self.counters.starts += 1;
                }
                self.next_start_ns += PROCESS_PERIOD_NS;
            } else {
                return Ok(());
            }
        }
    }
}
