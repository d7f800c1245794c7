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
    /// The start or exit whose queue operations are under way (at most one at a time).
    current: Option<Ops>,
    /// When the last start's or exit's operations were over: the next begins at its own time
    /// or then, whichever is later.
    ops_end_ns: f64,
    pub counters: LiveCounters,
}

/// A process's frame operations, run one after another on its vCPU, each at its own time:
/// only those due by the time the guest is advanced to have run, so the queue sees them in
/// time order with the workload's own appends (docs/vm.md, "Guest churn during the run").
struct Ops {
    kind: OpsKind,
    /// Host time of the next operation (the previous one, with its lock wait and delivery,
    /// is over).
    t_ns: f64,
}

enum OpsKind {
    /// A start on `vcpu` at `start_ns`: `left` more frames to take off the free list;
    /// `frames` taken so far.
    Start { vcpu: u32, start_ns: f64, left: u64, frames: Vec<u64> },
    /// An exit: `frames[next..]` still to free.
    Exit { frames: Vec<u64>, next: usize },
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
            current: None,
            ops_end_ns: start_ns,
            counters: LiveCounters::default(),
        }
    }

    /// The pCPU vCPU `vcpu` runs on now (the hypervisor's scheduler moved it).
    pub fn set_pcpu(&mut self, vcpu: u32, pcpu: CpuId) {
        if let Some(p) = self.pins.get_mut(vcpu as usize) {
            *p = pcpu;
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
    /// A start's or exit's operations run one after another from its time, each when the one
    /// before (with its lock wait and delivery) is over; only those due by `now_ns` run now,
    /// the rest at later calls, so a frame is on the free list only once its free has run and
    /// a partition's lock is held only by deliveries that have begun. The next start or exit
    /// begins at its own time or when the one under way is over, whichever is later.
    pub fn advance(&mut self, host: &mut Host, free: &mut Vec<u64>, now_ns: f64) -> Result<(), VmError> {
        let lifetime_ns = (self.concurrency as f64 - 0.5) * PROCESS_PERIOD_NS;
        loop {
            if self.current.is_some() {
                if !self.run_ops(host, free, now_ns, lifetime_ns)? {
                    return Ok(());
                }
                continue;
            }
            let next_exit = self.alive.front().map_or(f64::INFINITY, |p| p.0);
            if next_exit <= now_ns && next_exit <= self.next_start_ns {
                let (t_ns, frames) = self.alive.pop_front().unwrap_or_default();
                self.current = Some(Ops { kind: OpsKind::Exit { frames, next: 0 }, t_ns: t_ns.max(self.ops_end_ns) });
                self.counters.exits += 1;
            } else if self.next_start_ns <= now_ns {
                let start_ns = self.next_start_ns;
                let vcpu = self.rng.random_range(0..self.vcpus);
                if (free.len() as u64) < self.pages {
                    self.counters.starts_skipped += 1;
                } else {
                    let kind = OpsKind::Start { vcpu, start_ns, left: self.pages, frames: Vec::with_capacity(self.pages as usize) };
                    self.current = Some(Ops { kind, t_ns: start_ns.max(self.ops_end_ns) });
                    self.counters.starts += 1;
                }
                self.next_start_ns += PROCESS_PERIOD_NS;
            } else {
                return Ok(());
            }
        }
    }

    /// Run the operations of the start or exit under way that are due by `now_ns`; `true`
    /// when it is over (a start's process is then alive until its exit).
    fn run_ops(&mut self, host: &mut Host, free: &mut Vec<u64>, now_ns: f64, lifetime_ns: f64) -> Result<bool, VmError> {
        let Some(mut ops) = self.current.take() else { return Ok(true) };
        loop {
            let done = match &ops.kind {
                OpsKind::Start { left, .. } => *left == 0,
                OpsKind::Exit { frames, next } => *next >= frames.len(),
            };
            if done {
                break;
            }
            if ops.t_ns > now_ns {
                self.current = Some(ops);
                return Ok(false);
            }
            let cost_ns = match &mut ops.kind {
                OpsKind::Start { vcpu, left, frames, .. } => {
                    let Some(pfn) = free.pop() else {
                        // The workload took the rest of the free list meanwhile.
                        *left = 0;
                        continue;
                    };
                    let cost_ns = host.guest_alloc(self.id, pfn, ops.t_ns)?;
                    host.touch(self.id, Access { vcpu: *vcpu, pcpu: self.pins[*vcpu as usize], pfn })?;
                    frames.push(pfn);
                    *left -= 1;
                    cost_ns
                }
                OpsKind::Exit { frames, next } => {
                    let f = frames[*next];
                    let cost_ns = host.guest_free(self.id, f, ops.t_ns)?;
                    free.push(f);
                    *next += 1;
                    cost_ns
                }
            };
            self.counters.queue_ns += cost_ns;
            ops.t_ns += cost_ns;
        }
        self.ops_end_ns = ops.t_ns;
        if let OpsKind::Start { start_ns, frames, .. } = ops.kind {
            self.alive.push_back((start_ns + lifetime_ns, frames));
        }
        Ok(true)
    }
}
