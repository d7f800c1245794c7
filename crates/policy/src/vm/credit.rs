//! Xen's credit scheduler for vCPUs (docs/vm.md, "The hypervisor's vCPU scheduler"):
//! which physical CPU each vCPU of every VM is queued on or running on, tick by tick.
//!
//! Read from Xen's `xen/common/sched/credit.c` (`csched_tick`, `csched_acct`,
//! `csched_schedule`, `csched_load_balance`, `csched_runq_steal`, `_csched_cpu_pick`):
//!
//! - every pCPU has a run queue sorted by priority (UNDER, vCPUs with credit left, before
//!   OVER, vCPUs without), FIFO within a priority;
//! - a running vCPU burns 10 credits per millisecond (`CSCHED_CREDITS_PER_MSEC`); every
//!   timeslice (30 ms, three ticks of 10 ms) the accounting hands out `300 × pCPUs` credits
//!   over the active vCPUs by their domain's weight (256, equal for every VM) and sets each
//!   vCPU's priority from the sign of its credit;
//! - at the end of its timeslice a pCPU puts its vCPU back in its queue and takes the head;
//!   when that head is OVER (or the queue is empty) it first tries to steal a vCPU of
//!   strictly higher priority from another pCPU's queue: in the soft-affinity step only a
//!   vCPU whose soft affinity holds this pCPU, then in the hard-affinity step any vCPU; in each
//!   step nodes are visited from the pCPU's own node on, and in each node the busy pCPUs from
//!   the node's balance bias on.
//!
//! Differences from Xen, each in docs/vm.md: no boost priority (no wake-up events), no
//! migration of a running vCPU from the tick's `_csched_cpu_pick` check, no caps, the
//! initial pick ignores SMT/core idleness, and an idle pCPU looks for work at every tick [A]
//! (Xen's idle pCPUs wait to be tickled by vCPU wake-ups, which this model has no events for).
//!
//! Pure and deterministic: pCPUs act in ascending id order at each tick; no randomness.

use super::error::VmError;
use numalab_core::{CpuId, NodeId};
use serde::{Deserialize, Serialize};

/// `[hypervisor] vcpu_scheduler`: how vCPUs get their physical CPUs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum VcpuScheduler {
    /// Each vCPU pinned to the pCPU the home-node selection reserved for it (§5.1); a VM
    /// that cannot be packed is refused.
    #[default]
    Pinned,
    /// Xen's credit scheduler with soft affinity to the VM's home nodes.
    Credit,
}

/// `[hypervisor.credit]`: the credit scheduler's settings (Xen's boot parameters).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct CreditConfig {
    /// `sched_credit_tslice_ms`: the timeslice (Xen default 30, range 1..=1000).
    pub tslice_ms: u32,
    /// `vcpu_migration_delay`: a vCPU that ran on its pCPU less than this long ago is cache
    /// hot and is not stolen (Xen default 0, range 0..=100000).
    pub vcpu_migration_delay_us: u32,
}

impl Default for CreditConfig {
    fn default() -> Self {
        CreditConfig { tslice_ms: CSCHED_DEFAULT_TSLICE_MS, vcpu_migration_delay_us: 0 }
    }
}

/// Xen's `CSCHED_DEFAULT_TSLICE_MS`.
pub const CSCHED_DEFAULT_TSLICE_MS: u32 = 30;
/// Xen's `CSCHED_TICKS_PER_TSLICE`.
pub const CSCHED_TICKS_PER_TSLICE: u32 = 3;
/// Xen's `CSCHED_CREDITS_PER_MSEC`.
pub const CSCHED_CREDITS_PER_MSEC: i64 = 10;
/// Xen's `CSCHED_DEFAULT_WEIGHT` (every VM has it: no `weight` key here).
pub const CSCHED_DEFAULT_WEIGHT: i64 = 256;
/// Xen's `XEN_SYSCTL_CSCHED_TSLICE_MAX` and `XEN_SYSCTL_CSCHED_MGR_DLY_MAX_US`.
pub const MAX_TSLICE_MS: u32 = 1000;
pub const MAX_MIGRATION_DELAY_US: u32 = 100_000;

/// Priorities (`CSCHED_PRI_TS_UNDER`, `CSCHED_PRI_TS_OVER`, `CSCHED_PRI_IDLE`).
pub const PRI_UNDER: i32 = -1;
pub const PRI_OVER: i32 = -2;
pub const PRI_IDLE: i32 = -64;

impl CreditConfig {
    pub fn validate(&self) -> Result<(), VmError> {
        if !(1..=MAX_TSLICE_MS).contains(&self.tslice_ms) {
            return Err(VmError::Config {
                key: "hypervisor.credit.tslice_ms",
                message: format!("{} is outside 1..={MAX_TSLICE_MS}", self.tslice_ms),
            });
        }
        if self.vcpu_migration_delay_us > MAX_MIGRATION_DELAY_US {
            return Err(VmError::Config {
                key: "hypervisor.credit.vcpu_migration_delay_us",
                message: format!("{} is outside 0..={MAX_MIGRATION_DELAY_US}", self.vcpu_migration_delay_us),
            });
        }
        Ok(())
    }

    /// Ticks per timeslice: 3, or 1 for a timeslice shorter than 3 ms (`csched_init`).
    pub fn ticks_per_tslice(&self) -> u32 {
        if self.tslice_ms < CSCHED_TICKS_PER_TSLICE {
            1
        } else {
            CSCHED_TICKS_PER_TSLICE
        }
    }

    /// The tick period in nanoseconds (`tick_period_us = tslice_ms × 1000 / ticks`).
    pub fn tick_ns(&self) -> u64 {
        u64::from(self.tslice_ms) * 1000 / u64::from(self.ticks_per_tslice()) * 1000
    }

    /// Credits a vCPU may hold: one timeslice's worth (`credits_per_tslice`).
    pub fn credits_per_tslice(&self) -> i64 {
        CSCHED_CREDITS_PER_MSEC * i64::from(self.tslice_ms)
    }
}

/// A vCPU as the scheduler is given it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VcpuSpec {
    /// Its VM (the accounting's domain).
    pub vm: usize,
    /// Its soft affinity: the pCPUs of the VM's home nodes (libxl sets it so after NUMA
    /// placement). Hard affinity is every pCPU.
    pub soft_cpus: Vec<CpuId>,
}

/// Which balance step a steal happened in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BalanceStep {
    Soft,
    Hard,
}

/// A vCPU that changed pCPU.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct VcpuMove {
    pub vcpu: usize,
    pub from: CpuId,
    pub to: CpuId,
    pub cross_node: bool,
    pub step: BalanceStep,
    pub at_ns: u64,
}

/// Counters of the scheduler (docs/vm.md, "Counters").
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CreditCounters {
    pub moves: u64,
    pub cross_node_moves: u64,
    pub steals_soft: u64,
    pub steals_hard: u64,
    /// Context switches: a pCPU started running a different vCPU.
    pub switches: u64,
    pub accountings: u64,
}

#[derive(Clone, Debug)]
struct Vcpu {
    vm: usize,
    soft: Vec<bool>,
    has_soft: bool,
    processor: usize,
    credit: i64,
    pri: i32,
    runnable: bool,
    active: bool,
    /// When it last stopped running (`last_sched_time`), for the migration delay.
    last_sched_ns: Option<u64>,
}

#[derive(Clone, Debug, Default)]
struct Pcpu {
    curr: Option<usize>,
    runq: Vec<usize>,
    slice_end_ns: u64,
}

/// The credit scheduler's state over the machine's pCPUs.
#[derive(Clone, Debug)]
pub struct CreditScheduler {
    cfg: CreditConfig,
    node_of_cpu: Vec<NodeId>,
    cpus_of_node: Vec<Vec<usize>>,
    vcpus: Vec<Vcpu>,
    pcpus: Vec<Pcpu>,
    balance_bias: Vec<usize>,
    credit_balance: i64,
    /// Ticks done; the next is at `ticks × tick_ns`.
    ticks: u64,
    pub counters: CreditCounters,
    moves: Vec<VcpuMove>,
}

/// `cpumask_cycle(n, mask)`: the first element of `mask` after `n`, wrapping.
fn cycle(n: usize, mask: &[usize]) -> Option<usize> {
    mask.iter().copied().find(|&c| c > n).or_else(|| mask.first().copied())
}

impl CreditScheduler {
    /// Every vCPU placed as Xen places a new one (`csched_res_pick` at insertion), in order:
    /// vCPU `k` of a VM starts from the `k`-th pCPU of its soft affinity (round robin, as
    /// `sched_init_vcpu` cycles), takes it if idle, else the next idle pCPU of its soft
    /// affinity, else the next idle pCPU of the machine, else stays there. Every vCPU starts
    /// runnable, UNDER, with no credit; then every pCPU schedules.
    pub fn new(cfg: CreditConfig, node_of_cpu: Vec<NodeId>, specs: &[VcpuSpec]) -> Result<CreditScheduler, VmError> {
        cfg.validate()?;
        let cpus = node_of_cpu.len();
        if cpus == 0 {
            return Err(VmError::Config { key: "hypervisor.vcpu_scheduler", message: "the machine has no CPU".into() });
        }
        let nodes = node_of_cpu.iter().map(|&n| n as usize + 1).max().unwrap_or(1);
        let cpus_of_node: Vec<Vec<usize>> = (0..nodes).map(|n| (0..cpus).filter(|&c| node_of_cpu[c] as usize == n).collect()).collect();
        let mut s = CreditScheduler {
            cfg,
            node_of_cpu,
            cpus_of_node,
            vcpus: Vec::new(),
            pcpus: vec![Pcpu::default(); cpus],
            balance_bias: vec![0; nodes],
            credit_balance: 0,
            ticks: 0,
            counters: CreditCounters::default(),
            moves: Vec::new(),
        };
        let all: Vec<usize> = (0..cpus).collect();
        let mut nth_of_vm: Vec<usize> = Vec::new();
        for spec in specs {
            if let Some(&c) = spec.soft_cpus.iter().find(|&&c| c as usize >= cpus) {
                return Err(VmError::NoSuchCpu { vm: spec.vm as u32, cpu: c, cpus });
            }
            let mut soft_list: Vec<usize> = spec.soft_cpus.iter().map(|&c| c as usize).collect();
            soft_list.sort_unstable();
            soft_list.dedup();
            let mut soft = vec![false; cpus];
            soft_list.iter().for_each(|&c| soft[c] = true);
            // `has_soft_affinity`: a soft affinity that is not every pCPU.
            let has_soft = !soft_list.is_empty() && soft_list.len() < cpus;
            if nth_of_vm.len() <= spec.vm {
                nth_of_vm.resize(spec.vm + 1, 0);
            }
            let k = nth_of_vm[spec.vm];
            nth_of_vm[spec.vm] += 1;
            let base = if soft_list.is_empty() { &all } else { &soft_list };
            let start = base[k % base.len()];
            let idle = |s: &CreditScheduler, c: usize| s.pcpus[c].curr.is_none() && s.pcpus[c].runq.is_empty();
            let mut chosen = None;
            for mask in [has_soft.then_some(&soft_list), Some(&all)].into_iter().flatten() {
                let from = if mask.contains(&start) { start } else { cycle(start, mask).unwrap_or(start) };
                if idle(&s, from) {
                    chosen = Some(from);
                    break;
                }
                let after = mask.iter().copied().filter(|&c| c > from).chain(mask.iter().copied().filter(|&c| c < from));
                if let Some(c) = after.into_iter().find(|&c| idle(&s, c)) {
                    chosen = Some(c);
                    break;
                }
            }
            let cpu = chosen.unwrap_or(start);
            let v = s.vcpus.len();
            s.vcpus.push(Vcpu {
                vm: spec.vm,
                soft,
                has_soft,
                processor: cpu,
                credit: 0,
                pri: PRI_UNDER,
                runnable: true,
                active: true,
                last_sched_ns: None,
            });
            s.runq_insert(cpu, v);
        }
        for c in 0..cpus {
            s.schedule(c, 0);
        }
        // The first schedule is part of creation: its steals are not counted as moves.
        s.counters = CreditCounters::default();
        s.moves.clear();
        Ok(s)
    }

    pub fn config(&self) -> &CreditConfig {
        &self.cfg
    }

    /// The pCPU vCPU `v` is queued on or running on (`v->processor`).
    pub fn processor(&self, v: usize) -> CpuId {
        self.vcpus[v].processor as CpuId
    }

    /// The vCPU running on `cpu`, if any.
    pub fn running(&self, cpu: CpuId) -> Option<usize> {
        self.pcpus[cpu as usize].curr
    }

    /// The vCPUs waiting in `cpu`'s run queue, head first.
    pub fn runq(&self, cpu: CpuId) -> &[usize] {
        &self.pcpus[cpu as usize].runq
    }

    pub fn credit(&self, v: usize) -> i64 {
        self.vcpus[v].credit
    }

    pub fn priority(&self, v: usize) -> i32 {
        self.vcpus[v].pri
    }

    pub fn vcpu_count(&self) -> usize {
        self.vcpus.len()
    }

    /// Time of the next tick.
    pub fn next_tick_ns(&self) -> u64 {
        (self.ticks + 1) * self.cfg.tick_ns()
    }

    /// The moves made since the last call.
    pub fn take_moves(&mut self) -> Vec<VcpuMove> {
        std::mem::take(&mut self.moves)
    }

    /// A vCPU blocks (no guest thread left to run) or wakes. A blocked vCPU leaves its run
    /// queue; a running one is descheduled at its pCPU's next tick. A woken one joins the run
    /// queue of its pCPU (no boost: docs/vm.md).
    pub fn set_runnable(&mut self, v: usize, runnable: bool) {
        if self.vcpus[v].runnable == runnable {
            return;
        }
        self.vcpus[v].runnable = runnable;
        let p = self.vcpus[v].processor;
        if runnable {
            if self.pcpus[p].curr != Some(v) {
                self.runq_insert(p, v);
            }
        } else {
            self.pcpus[p].runq.retain(|&x| x != v);
        }
    }

    /// Run every tick due by `now_ns`.
    pub fn advance_to(&mut self, now_ns: u64) {
        while self.next_tick_ns() <= now_ns {
            self.ticks += 1;
            let t = self.ticks * self.cfg.tick_ns();
            self.tick(t);
        }
    }

    /// One tick at `t`: the running vCPUs burn their credit (`csched_tick`), every
    /// `ticks_per_tslice` ticks the accounting runs (`csched_acct`) and the run queues are
    /// re-sorted (`csched_runq_sort`), then every pCPU whose timeslice ended, whose vCPU
    /// blocked or that is idle schedules (`csched_schedule`).
    fn tick(&mut self, t: u64) {
        let burn = CSCHED_CREDITS_PER_MSEC * self.cfg.tick_ns() as i64 / 1_000_000;
        for c in 0..self.pcpus.len() {
            if let Some(v) = self.pcpus[c].curr {
                let x = &mut self.vcpus[v];
                x.credit -= burn;
                // `csched_unit_acct`: an idling vCPU that runs again earns credit again.
                x.active = true;
            }
        }
        if self.ticks.is_multiple_of(u64::from(self.cfg.ticks_per_tslice())) {
            self.account();
            for p in &mut self.pcpus {
                let vcpus = &self.vcpus;
                p.runq.sort_by_key(|&v| std::cmp::Reverse(vcpus[v].pri));
            }
        }
        for c in 0..self.pcpus.len() {
            let p = &self.pcpus[c];
            let due = match p.curr {
                None => true,
                Some(v) => !self.vcpus[v].runnable || t >= p.slice_end_ns,
            };
            if due {
                self.schedule(c, t);
            }
        }
    }

    /// `csched_acct` for equal weights and no caps.
    fn account(&mut self) {
        self.counters.accountings += 1;
        let cpt = self.cfg.credits_per_tslice();
        let vms = self.vcpus.iter().map(|v| v.vm + 1).max().unwrap_or(0);
        let mut active_of_vm: Vec<Vec<usize>> = vec![Vec::new(); vms];
        for (i, v) in self.vcpus.iter().enumerate() {
            if v.active && v.runnable {
                active_of_vm[v.vm].push(i);
            }
        }
        let n_active: i64 = active_of_vm.iter().map(|a| a.len() as i64).sum();
        let weight_total = CSCHED_DEFAULT_WEIGHT * n_active;
        if weight_total == 0 {
            self.credit_balance = 0;
            return;
        }
        let mut credit_total = cpt * self.pcpus.len() as i64;
        if self.credit_balance < 0 {
            credit_total -= self.credit_balance;
        }
        let mut weight_left = weight_total;
        let mut credit_balance = 0i64;
        for members in active_of_vm.iter().filter(|a| !a.is_empty()) {
            let n = members.len() as i64;
            let w = CSCHED_DEFAULT_WEIGHT;
            weight_left -= w * n;
            let mut credit_peak = n * cpt;
            if self.credit_balance < 0 {
                credit_peak += (-self.credit_balance * w * n + (weight_total - 1)) / weight_total;
            }
            let mut credit_fair = (credit_total * w * n + (weight_total - 1)) / weight_total;
            if credit_fair >= credit_peak {
                if weight_left != 0 {
                    credit_total += ((credit_fair - credit_peak) * weight_total + (weight_left - 1)) / weight_left;
                }
                credit_fair = credit_peak;
            }
            let per_vcpu = (credit_fair + (n - 1)) / n;
            for &i in members {
                let v = &mut self.vcpus[i];
                v.credit += per_vcpu;
                if v.credit < 0 {
                    v.pri = PRI_OVER;
                    v.credit = v.credit.max(-cpt);
                } else {
                    v.pri = PRI_UNDER;
                    if v.credit > cpt {
                        // Stops earning; halved so that it starts "a little bit ahead".
                        v.active = false;
                        v.credit /= 2;
                    }
                }
                credit_balance += v.credit;
            }
        }
        self.credit_balance = credit_balance;
    }

    /// `__runq_insert`: after every vCPU of equal or higher priority.
    fn runq_insert(&mut self, cpu: usize, v: usize) {
        let pri = self.vcpus[v].pri;
        let vcpus = &self.vcpus;
        let at = self.pcpus[cpu].runq.iter().position(|&x| vcpus[x].pri < pri).unwrap_or(self.pcpus[cpu].runq.len());
        self.pcpus[cpu].runq.insert(at, v);
    }

    /// `csched_schedule` on `cpu` at `t`.
    fn schedule(&mut self, cpu: usize, t: u64) {
        let prev = self.pcpus[cpu].curr.take();
        if let Some(v) = prev {
            self.vcpus[v].last_sched_ns = Some(t);
            if self.vcpus[v].runnable {
                self.runq_insert(cpu, v);
            }
        }
        let head = self.pcpus[cpu].runq.first().copied();
        let head_pri = head.map_or(PRI_IDLE, |v| self.vcpus[v].pri);
        let next = if head_pri <= PRI_OVER {
            match self.load_balance(cpu, head_pri, t) {
                Some(stolen) => Some(stolen),
                None => {
                    if let Some(h) = head {
                        self.pcpus[cpu].runq.remove(0);
                        Some(h)
                    } else {
                        None
                    }
                }
            }
        } else {
            self.pcpus[cpu].runq.remove(0);
            head
        };
        if next.is_some() && next != prev {
            self.counters.switches += 1;
        }
        self.pcpus[cpu].curr = next;
        self.pcpus[cpu].slice_end_ns = t + u64::from(self.cfg.tslice_ms) * 1_000_000;
    }

    /// `nr_runnable` of a pCPU: its running vCPU and its queue.
    fn nr_runnable(&self, c: usize) -> usize {
        self.pcpus[c].runq.len() + usize::from(self.pcpus[c].curr.is_some())
    }

    /// `csched_load_balance`: a vCPU stolen for `cpu`, if any.
    fn load_balance(&mut self, cpu: usize, pri: i32, t: u64) -> Option<usize> {
        let nodes = self.cpus_of_node.len();
        let node = self.node_of_cpu[cpu] as usize;
        for step in [BalanceStep::Soft, BalanceStep::Hard] {
            for k in 0..nodes {
                let peer_node = (node + k) % nodes;
                // Busy pCPUs of the node (not idlers), this one excluded.
                let workers: Vec<usize> =
                    self.cpus_of_node[peer_node].iter().copied().filter(|&c| c != cpu && self.pcpus[c].curr.is_some()).collect();
                let Some(first) = cycle(self.balance_bias[peer_node], &workers) else { continue };
                let start = workers.iter().position(|&c| c == first).unwrap_or(0);
                for j in 0..workers.len() {
                    let peer = workers[(start + j) % workers.len()];
                    if self.nr_runnable(peer) <= 1 {
                        continue;
                    }
                    if let Some(v) = self.runq_steal(peer, cpu, pri, step, t) {
                        self.balance_bias[peer_node] = peer;
                        return Some(v);
                    }
                }
            }
        }
        None
    }

    /// `csched_runq_steal`: the first vCPU of `peer`'s queue of strictly higher priority than
    /// `pri` that may run on `cpu` in this step and is not cache hot.
    fn runq_steal(&mut self, peer: usize, cpu: usize, pri: i32, step: BalanceStep, t: u64) -> Option<usize> {
        let delay_ns = u64::from(self.cfg.vcpu_migration_delay_us) * 1000;
        let mut found = None;
        for (i, &v) in self.pcpus[peer].runq.iter().enumerate() {
            let x = &self.vcpus[v];
            if x.pri <= pri {
                break;
            }
            if step == BalanceStep::Soft && !x.has_soft {
                continue;
            }
            let hot = delay_ns > 0 && x.last_sched_ns.is_some_and(|l| t.saturating_sub(l) < delay_ns);
            let allowed = match step {
                BalanceStep::Soft => x.soft[cpu],
                BalanceStep::Hard => true,
            };
            if !hot && allowed {
                found = Some((i, v));
                break;
            }
        }
        let (i, v) = found?;
        self.pcpus[peer].runq.remove(i);
        self.vcpus[v].processor = cpu;
        let cross = self.node_of_cpu[peer] != self.node_of_cpu[cpu];
        self.counters.moves += 1;
        self.counters.cross_node_moves += u64::from(cross);
        match step {
            BalanceStep::Soft => self.counters.steals_soft += 1,
            BalanceStep::Hard => self.counters.steals_hard += 1,
        }
        self.moves.push(VcpuMove { vcpu: v, from: peer as CpuId, to: cpu as CpuId, cross_node: cross, step, at_ns: t });
        Some(v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two nodes of two pCPUs: 0, 1 on node 0; 2, 3 on node 1.
    fn two_by_two(specs: &[VcpuSpec]) -> CreditScheduler {
        CreditScheduler::new(CreditConfig::default(), vec![0, 0, 1, 1], specs).unwrap()
    }

    fn vm(vm: usize, n: usize, soft: &[CpuId]) -> Vec<VcpuSpec> {
        (0..n).map(|_| VcpuSpec { vm, soft_cpus: soft.to_vec() }).collect()
    }

    fn running(s: &CreditScheduler) -> Vec<Option<usize>> {
        (0..4).map(|c| s.running(c)).collect()
    }

    #[test]
    fn xen_defaults() {
        let c = CreditConfig::default();
        assert_eq!((c.tslice_ms, c.ticks_per_tslice(), c.tick_ns(), c.credits_per_tslice()), (30, 3, 10_000_000, 300));
        let short = CreditConfig { tslice_ms: 2, ..Default::default() };
        assert_eq!((short.ticks_per_tslice(), short.tick_ns()), (1, 2_000_000));
    }

    #[test]
    fn bad_settings_name_their_key() {
        let e = CreditConfig { tslice_ms: 0, ..Default::default() }.validate().unwrap_err();
        assert!(matches!(e, VmError::Config { key: "hypervisor.credit.tslice_ms", .. }), "{e}");
        let e = CreditConfig { vcpu_migration_delay_us: 100_001, ..Default::default() }.validate().unwrap_err();
        assert!(matches!(e, VmError::Config { key: "hypervisor.credit.vcpu_migration_delay_us", .. }), "{e}");
        let e = CreditScheduler::new(CreditConfig::default(), vec![0, 1], &vm(0, 1, &[2])).unwrap_err();
        assert!(matches!(e, VmError::NoSuchCpu { cpu: 2, .. }), "{e}");
    }

    /// Three vCPUs with soft affinity to node 0: two take node 0's idle pCPUs, the third the
    /// first idle pCPU of the machine after its start (pCPU 2). Nothing is ever queued, so
    /// nothing moves, and pCPU 3 stays idle.
    #[test]
    fn placement_prefers_idle_soft_then_idle_hard_and_nothing_moves_without_overcommit() {
        let mut s = two_by_two(&vm(0, 3, &[0, 1]));
        assert_eq!((0..3).map(|v| s.processor(v)).collect::<Vec<_>>(), vec![0, 1, 2]);
        s.advance_to(200_000_000);
        assert_eq!(running(&s), vec![Some(0), Some(1), Some(2), None]);
        assert_eq!((s.counters.moves, s.counters.accountings), (0, 6));
    }

    /// Five vCPUs soft-affine to node 0 on four pCPUs: v0, v1 on node 0, v2, v3 on node 1's
    /// idle pCPUs, v4 queued behind v0. Worked by hand from `csched_acct` and
    /// `csched_schedule`:
    /// - t = 30 ms: v0..v3 ran 30 ms (−300 credits), the accounting gives each of the five
    ///   ⌈1200 / 5⌉ = 240: v0..v3 at −60 (OVER), v4 at 240 (UNDER). pCPU 0 switches to v4;
    ///   pCPUs 1–3 find only OVER work (v0, waiting, is OVER too) and keep theirs.
    /// - t = 60 ms: v4 at 180, v0 at 180 (waited), v1..v3 at −120. pCPU 0 runs v0 (head of
    ///   its queue, UNDER, ahead of v4 re-queued behind it); pCPU 1's head v1 is OVER, so it
    ///   steals v4 (UNDER) from pCPU 0 in the soft step: a move inside node 0.
    #[test]
    fn time_sharing_and_a_soft_steal_inside_the_home_node() {
        let mut s = two_by_two(&vm(0, 5, &[0, 1]));
        assert_eq!((0..5).map(|v| s.processor(v)).collect::<Vec<_>>(), vec![0, 1, 2, 3, 0]);
        assert_eq!((running(&s), s.runq(0).to_vec()), (vec![Some(0), Some(1), Some(2), Some(3)], vec![4]));
        s.advance_to(30_000_000);
        assert_eq!((0..5).map(|v| s.credit(v)).collect::<Vec<_>>(), vec![-60, -60, -60, -60, 240]);
        assert_eq!((running(&s), s.runq(0).to_vec()), (vec![Some(4), Some(1), Some(2), Some(3)], vec![0]));
        assert_eq!(s.counters.moves, 0);
        s.advance_to(60_000_000);
        assert_eq!((0..5).map(|v| s.credit(v)).collect::<Vec<_>>(), vec![180, -120, -120, -120, 180]);
        assert_eq!(running(&s), vec![Some(0), Some(4), Some(2), Some(3)]);
        assert_eq!((s.runq(0).to_vec(), s.runq(1).to_vec()), (vec![], vec![1]));
        assert_eq!(
            s.take_moves(),
            vec![VcpuMove { vcpu: 4, from: 0, to: 1, cross_node: false, step: BalanceStep::Soft, at_ns: 60_000_000 }]
        );
        assert_eq!((s.counters.steals_soft, s.counters.steals_hard, s.counters.cross_node_moves), (1, 0, 0));
    }

    /// VM A (v0..v3, soft node 0) fills the machine; VM B (v4, v5, soft node 1) queues behind
    /// v2 and v3 on node 1.
    /// - t = 30 ms: six active vCPUs share 1200 credits, 200 each: A's four at −100 (OVER),
    ///   B's at 200 (UNDER). pCPU 0's head is OVER: the soft step finds nothing (B is not
    ///   soft-affine to node 0), the hard step steals v4 from pCPU 2 (node 1's first busy
    ///   pCPU after its bias), across nodes; pCPU 1 then steals v5 from pCPU 3 the same way.
    /// - t = 60 ms: B's vCPUs at 100 (UNDER), a0, a1 at 100 (waited), a2, a3 at −200. pCPUs
    ///   0 and 1 run a0 and a1 again; pCPU 2's head a2 is OVER, and in the soft step it takes
    ///   v5 back from pCPU 1 (node 0 visited after its own); pCPU 3 takes v4 back from pCPU 0.
    #[test]
    fn hard_steals_across_nodes_then_soft_steals_bring_vcpus_home() {
        let mut specs = vm(0, 4, &[0, 1]);
        specs.extend(vm(1, 2, &[2, 3]));
        let mut s = two_by_two(&specs);
        assert_eq!((0..6).map(|v| s.processor(v)).collect::<Vec<_>>(), vec![0, 1, 2, 3, 2, 3]);
        s.advance_to(30_000_000);
        assert_eq!((0..6).map(|v| s.credit(v)).collect::<Vec<_>>(), vec![-100, -100, -100, -100, 200, 200]);
        assert_eq!(running(&s), vec![Some(4), Some(5), Some(2), Some(3)]);
        assert_eq!((s.runq(0).to_vec(), s.runq(1).to_vec()), (vec![0], vec![1]));
        let hard = |vcpu, from, to| VcpuMove { vcpu, from, to, cross_node: true, step: BalanceStep::Hard, at_ns: 30_000_000 };
        assert_eq!(s.take_moves(), vec![hard(4, 2, 0), hard(5, 3, 1)]);
        s.advance_to(60_000_000);
        assert_eq!((0..6).map(|v| s.credit(v)).collect::<Vec<_>>(), vec![100, 100, -200, -200, 100, 100]);
        assert_eq!(running(&s), vec![Some(0), Some(1), Some(5), Some(4)]);
        assert_eq!((s.runq(2).to_vec(), s.runq(3).to_vec()), (vec![2], vec![3]));
        let soft = |vcpu, from, to| VcpuMove { vcpu, from, to, cross_node: true, step: BalanceStep::Soft, at_ns: 60_000_000 };
        assert_eq!(s.take_moves(), vec![soft(5, 1, 2), soft(4, 0, 3)]);
        assert_eq!((s.counters.moves, s.counters.cross_node_moves, s.counters.steals_soft, s.counters.steals_hard), (4, 4, 2, 2));
    }

    /// An idle pCPU takes a waiting vCPU (any priority beats idle); a blocked vCPU leaves its
    /// pCPU, and a cache-hot one (migration delay) is not stolen.
    #[test]
    fn idle_pcpus_steal_and_blocked_or_hot_vcpus_stay() {
        // v0 → 0, v1 → 1, v2 → 2 (idle, hard), v3 → 3, v4 queued on 0.
        let mut s = two_by_two(&vm(0, 5, &[0, 1]));
        s.set_runnable(3, false);
        s.advance_to(10_000_000);
        // pCPU 3 goes idle at the first tick and steals v4 from pCPU 0 in the hard step (the
        // soft step finds no vCPU soft-affine to node 1).
        assert_eq!(running(&s), vec![Some(0), Some(1), Some(2), Some(4)]);
        assert_eq!(s.processor(4), 3);
        assert_eq!((s.counters.steals_soft, s.counters.steals_hard), (0, 1));

        let cfg = CreditConfig { vcpu_migration_delay_us: 20_000, ..Default::default() };
        let mut s = CreditScheduler::new(cfg, vec![0, 0, 1, 1], &vm(0, 5, &[0, 1])).unwrap();
        s.advance_to(30_000_000);
        // At 30 ms v0 was descheduled (hot until 50 ms): pCPU 1..3 do not take it; at 40 ms and
        // 50 ms pCPU 3 is not idle and the others run their own; nothing moves while it is hot.
        s.set_runnable(3, false);
        s.advance_to(40_000_000);
        assert_eq!((s.running(3), s.processor(0)), (None, 0), "v0 is hot: pCPU 3 stays idle");
        s.advance_to(50_000_000);
        assert_eq!((s.running(3), s.processor(0)), (Some(0), 3), "at 50 ms v0 has cooled down");
    }
}
