//! The placement policy of a VM run (docs/vm.md, "A workload inside VMs"): every page of
//! the workload goes where the host backs its guest frame, and under Xen's credit scheduler
//! each guest thread follows its vCPU (the run itself: `crate::vmrun`).

use crate::vmlive::LiveGuest;
use crate::vmrun::{credit_scheduler, host_of, policy_name, replay_guest, VmPlan, VmSetup, VmSetupError};
use numalab_core::{Machine, NodeId};
use numalab_policy::decision::{EventRef, Outcome, PlaceRequest, Tick};
use numalab_policy::vm::{Access, CreditScheduler, Host, VcpuScheduler, VmError, VmId};
use numalab_policy::{DynPolicy, MemoryState, OutOfMemory, SystemView};
use numalab_workload::Program;
use std::sync::Arc;

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
    pub(crate) name: &'static str,
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
