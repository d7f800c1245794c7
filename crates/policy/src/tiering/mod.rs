//! `linux-tiering`: Linux's NUMA balancing in memory-tiering mode (`kernel.numa_balancing = 2`,
//! Linux 5.18+; docs/policies/linux-tiering.md). Scan steps unmap slow-tier pages only and
//! stamp them with the scan time; a hinting fault on one promotes it to a top-tier node when
//! its hint-fault latency is under the hot threshold, within the promotion rate limit, and
//! when the target node is above its high watermark. The threshold is adjusted once per
//! period to hold the candidate rate near the limit. A top-tier node that falls to its low
//! watermark wakes "kswapd", which demotes its coldest pages to the next lower tier until the
//! node is above its promotion watermark.

mod config;
#[cfg(test)]
mod tests;

pub use config::{LinuxTieringConfig, TopTier};

use crate::decision::{
    AccessSample, Decision, EventRef, HintFault, Outcome, PlaceRequest, RegionHeat, ScanStepDone, SpaceId, TaskTick, ThreadMigrated,
};
use crate::dynamic::autonuma::period;
use crate::dynamic::{pages_of_mb, ScanClock};
use crate::error::{OutOfMemory, PolicyError};
use crate::policy::{MemoryState, Policy, PolicyEnv, SystemView};
use crate::statics::tier_rank;
use numalab_core::rng::{stream, StreamRng};
use numalab_core::{NodeId, PageIdx, ThreadId};

/// No time recorded.
const NONE: u64 = u64::MAX;
/// `NUMA_MIGRATION_ADJUST_STEPS`: the threshold moves by `2 × hot_threshold / 16` per period.
const ADJUST_STEPS: u64 = 16;
/// Linux's scheduler tick (`TICK_NSEC` at HZ = 250), used by `task_tick_numa`.
const TICK_NS: u64 = 4_000_000;

/// A node's watermarks in pages (`mm/page_alloc.c`, `__setup_per_zone_wmarks`; one zone per
/// node [A]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Watermarks {
    pub min: u64,
    pub low: u64,
    pub high: u64,
    pub promo: u64,
}

/// Linux's `calculate_min_free_kbytes`: `sqrt(16 × lowmem_kbytes)`, clamped to 128 KiB..256 MiB.
pub fn default_min_free_kbytes(total_bytes: u64) -> u64 {
    ((total_bytes / 1024).saturating_mul(16)).isqrt().clamp(128, 262_144)
}

/// `__setup_per_zone_wmarks` for one node of `managed` pages out of `total_managed`: `min` is
/// the node's share of `min_free_kbytes`; the gap between marks is the larger of `min / 4`
/// and `managed × watermark_scale_factor / 10000`; low, high and promo are 1, 2 and 3 gaps
/// above min.
pub fn watermarks(managed: u64, total_managed: u64, min_free_kbytes: u64, page_bytes: u64, scale_factor: u64) -> Watermarks {
    let min_pages = min_free_kbytes * 1024 / page_bytes.max(1);
    let min = (min_pages as u128 * managed as u128 / total_managed.max(1) as u128) as u64;
    let gap = (min / 4).max((managed as u128 * scale_factor as u128 / 10_000) as u64);
    Watermarks { min, low: min + gap, high: min + 2 * gap, promo: min + 3 * gap }
}

/// Per target node: the promotion state Linux keeps in `pg_data_t` (`nbp_*`) and its
/// `PGPROMOTE_CANDIDATE` count.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PromoState {
    /// Current hot threshold, ms; 0 = the default (`nbp_threshold`).
    pub threshold_ms: u64,
    /// Start of the current threshold period, ms (`nbp_th_start`).
    pub th_start_ms: u64,
    /// Candidates at the start of the threshold period (`nbp_th_nr_cand`).
    pub th_nr_cand: u64,
    /// Start of the current one-second rate-limit window, ms (`nbp_rl_start`).
    pub rl_start_ms: u64,
    /// Candidates at the start of that window (`nbp_rl_nr_cand`).
    pub rl_nr_cand: u64,
    /// `PGPROMOTE_CANDIDATE`: pages that passed the threshold, limited or not.
    pub candidates: u64,
}

/// Why a hinting fault on a slow-tier page did or did not lead to a promotion attempt.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// The target node has plenty of room: promote whatever the latency (threshold reset).
    FreeSpaceEnough,
    /// Latency under the threshold and within the rate limit.
    Hot,
    /// Latency at or over the threshold.
    Cold,
    /// The candidate exceeds the rate limit of its one-second window.
    RateLimited,
}

/// Counters under the names of `/proc/vmstat` (and ours, marked so in the docs).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TieringCounters {
    pub pgpromote_success: u64,
    pub pgpromote_candidate: u64,
    pub pgpromote_candidate_nrl: u64,
    pub pgdemote_kswapd: u64,
    /// Hint faults on slow-tier pages over the threshold [ours].
    pub promote_cold: u64,
    /// Candidates refused by the rate limit [ours].
    pub promote_rate_limited: u64,
    /// Promotions refused because the target was not above high watermark + 1 [ours].
    pub promote_fail_wmark: u64,
    /// Promotions the driver refused (the node filled meanwhile) [ours].
    pub promote_fail_driver: u64,
    /// Demotions the driver refused [ours].
    pub demote_fail: u64,
    /// kswapd runs [ours].
    pub kswapd_runs: u64,
    /// Threshold adjustments that lowered / raised it [ours].
    pub threshold_down: u64,
    pub threshold_up: u64,
}

/// Per address space.
#[derive(Clone, Debug, Default)]
struct Mm {
    next_scan_ns: Option<u64>,
    /// Per page: when a scan last unmapped it (Linux stamps the folio's access time), or NONE.
    scan_ns: Vec<u64>,
    /// Per page: the last access the policy knows of (placement, hinting fault, promotion,
    /// access sample) — the LRU age used to pick the coldest pages.
    last_ns: Vec<u64>,
}

impl Mm {
    fn grow(&mut self, pages: usize) {
        if self.scan_ns.len() < pages {
            self.scan_ns.resize(pages, NONE);
            self.last_ns.resize(pages, 0);
        }
    }
}

/// A task's state: only its scan clock (tiering mode keeps no fault statistics).
type Task = ScanClock;

pub struct LinuxTiering {
    config: LinuxTieringConfig,
    rng: StreamRng,
    page_bytes: u64,
    nodes: usize,
    /// Per node: top tier.
    top: Vec<bool>,
    /// Per CPU node: where its hot slow-tier pages are promoted.
    promo_target: Vec<Option<NodeId>>,
    /// Per node: the nodes of the next lower tier, nearest first (`next_demotion_node`).
    demote_to: Vec<Vec<NodeId>>,
    /// Per accessing node: allowed nodes by distance (the zonelist).
    zonelist: Vec<Vec<NodeId>>,
    wmark: Vec<Watermarks>,
    /// Per node: present pages (`node_present_pages`).
    present: Vec<u64>,
    pgdat: Vec<PromoState>,
    /// Per node: kswapd was woken and has not run yet.
    kswapd_wake: Vec<bool>,
    mms: Vec<Mm>,
    tasks: Vec<Task>,
    /// Latest time seen in any event.
    clock_ns: u64,
    /// Time of the scan step being carried out (stamped on the pages it unmaps).
    scan_now_ns: u64,
    counters: TieringCounters,
}

impl LinuxTiering {
    pub fn counters(&self) -> &TieringCounters {
        &self.counters
    }

    pub fn promo_state(&self, node: NodeId) -> &PromoState {
        &self.pgdat[node as usize]
    }

    pub fn watermarks_of(&self, node: NodeId) -> Watermarks {
        self.wmark[node as usize]
    }

    pub fn is_top_tier(&self, node: NodeId) -> bool {
        self.top[node as usize]
    }

    fn mm(&mut self, space: SpaceId) -> &mut Mm {
        if self.mms.len() <= space as usize {
            self.mms.resize(space as usize + 1, Mm::default());
        }
        &mut self.mms[space as usize]
    }

    fn task(&mut self, t: ThreadId) -> &mut Task {
        if self.tasks.len() <= t as usize {
            self.tasks.resize(t as usize + 1, Task { period_ms: self.config.scan_delay_ms, ..Task::default() });
        }
        &mut self.tasks[t as usize]
    }

    fn see(&mut self, t_ns: u64) {
        self.clock_ns = self.clock_ns.max(t_ns);
    }

    /// `pgdat_free_space_enough`: free pages above the promotion watermark plus the larger of
    /// 1 GiB and 1/16 of the node.
    fn free_space_enough(&self, node: NodeId, free: u64) -> bool {
        let enough = ((1u64 << 30) / self.page_bytes.max(1)).max(self.present[node as usize] >> 4);
        free > self.wmark[node as usize].promo + enough
    }

    /// `numa_promotion_adjust_threshold`: once per `scan_period_max_ms`, compare the period's
    /// candidates with what the rate limit allows over it and move the threshold one step
    /// against the difference (±10% dead band), within [step, 2 × default].
    fn adjust_threshold(&mut self, node: NodeId, now_ms: u64, rate_limit_pages: u64) {
        let ref_th = self.config.hot_threshold_ms;
        let period = self.config.scan_period_max_ms;
        let s = &mut self.pgdat[node as usize];
        if now_ms.saturating_sub(s.th_start_ms) <= period {
            return;
        }
        s.th_start_ms = now_ms;
        let ref_cand = rate_limit_pages.saturating_mul(period) / 1000;
        let diff = s.candidates - s.th_nr_cand;
        let unit = ref_th * 2 / ADJUST_STEPS;
        let old = if s.threshold_ms == 0 { ref_th } else { s.threshold_ms };
        let mut th = old;
        if diff > ref_cand.saturating_mul(11) / 10 {
            th = th.saturating_sub(unit).max(unit);
        } else if diff < ref_cand.saturating_mul(9) / 10 {
            th = (th + unit).min(ref_th * 2);
        }
        s.th_nr_cand = s.candidates;
        s.threshold_ms = th;
        self.counters.threshold_down += u64::from(th < old);
        self.counters.threshold_up += u64::from(th > old);
    }

    /// `numa_promotion_rate_limit`: count the candidate, open a new one-second window if the
    /// last one is over, and refuse when the window's candidates reach the limit.
    fn rate_limited(&mut self, node: NodeId, now_ms: u64, rate_limit_pages: u64, nr: u64) -> bool {
        let s = &mut self.pgdat[node as usize];
        s.candidates += nr;
        self.counters.pgpromote_candidate += nr;
        if now_ms.saturating_sub(s.rl_start_ms) > 1000 {
            s.rl_start_ms = now_ms;
            s.rl_nr_cand = s.candidates;
        }
        s.candidates - s.rl_nr_cand >= rate_limit_pages
    }

    /// The memory-tiering branch of `should_numa_migrate_memory` for one base page faulting
    /// with `latency_ms` towards `dst` whose free pages are `free`.
    pub fn should_promote(&mut self, dst: NodeId, free: u64, now_ms: u64, latency_ms: u64) -> Verdict {
        if self.free_space_enough(dst, free) {
            self.pgdat[dst as usize].threshold_ms = 0;
            self.counters.pgpromote_candidate_nrl += 1;
            return Verdict::FreeSpaceEnough;
        }
        let rate_limit = pages_of_mb(self.config.promote_rate_limit_mbps, self.page_bytes);
        self.adjust_threshold(dst, now_ms, rate_limit);
        let s = &self.pgdat[dst as usize];
        let th = if s.threshold_ms == 0 { self.config.hot_threshold_ms } else { s.threshold_ms };
        if latency_ms >= th {
            self.counters.promote_cold += 1;
            return Verdict::Cold;
        }
        if self.rate_limited(dst, now_ms, rate_limit, 1) {
            self.counters.promote_rate_limited += 1;
            return Verdict::RateLimited;
        }
        Verdict::Hot
    }

    /// kswapd on `node` with demotion: the coldest pages of the node (least recent known
    /// access, then space and page order) go to the next lower tier until the node is above
    /// its promotion watermark (`pgdat_balanced` in tiering mode). Targets take pages while
    /// they are above their min watermark.
    fn kswapd(&mut self, node: NodeId, view: &dyn SystemView, out: &mut Vec<Decision>) {
        self.kswapd_wake[node as usize] = false;
        let free = view.free_pages(node);
        let goal = self.wmark[node as usize].promo + 1;
        if free >= goal || !self.config.demotion_enabled || self.demote_to[node as usize].is_empty() {
            return;
        }
        self.counters.kswapd_runs += 1;
        let want = (goal - free) as usize;
        let mut room: Vec<(NodeId, u64)> = self.demote_to[node as usize]
            .iter()
            .map(|&n| (n, view.free_pages(n).saturating_sub(self.wmark[n as usize].min + 1)))
            .filter(|&(_, r)| r > 0)
            .collect();
        if room.is_empty() {
            return;
        }
        let mut cands: Vec<(u64, SpaceId, PageIdx)> = Vec::new();
        for space in 0..view.spaces() {
            let pages = view.space_pages(space);
            self.mm(space).grow(pages as usize);
            let mm = &self.mms[space as usize];
            for page in 0..pages {
                if view.page_node(space, page) == Some(node) {
                    cands.push((mm.last_ns[page as usize], space, page));
                }
            }
        }
        let k = want.min(cands.len());
        if k == 0 {
            return;
        }
        if k < cands.len() {
            cands.select_nth_unstable(k - 1);
            cands.truncate(k);
        }
        cands.sort_unstable();
        let mut r = 0;
        for (_, space, page) in cands {
            while r < room.len() && room[r].1 == 0 {
                r += 1;
            }
            let Some(slot) = room.get_mut(r) else { break };
            slot.1 -= 1;
            out.push(Decision::MigratePage { space, page, to: slot.0 });
        }
    }

    /// Wake kswapd where free memory is at or under the low watermark, and run it.
    fn balance(&mut self, view: &dyn SystemView, out: &mut Vec<Decision>) {
        for n in 0..self.nodes as NodeId {
            if self.demote_to[n as usize].is_empty() || view.capacity_pages(n) == 0 {
                continue;
            }
            if self.kswapd_wake[n as usize] || view.free_pages(n) <= self.wmark[n as usize].low {
                self.kswapd(n, view, out);
            }
        }
    }
}

impl Policy for LinuxTiering {
    type Config = LinuxTieringConfig;
    const NAME: &'static str = "linux-tiering";
    const SUMMARY: &'static str =
        "Linux NUMA balancing in memory-tiering mode: hot slow-tier pages promoted on hint-fault latency, cold fast-tier pages demoted on reclaim";

    fn new(config: LinuxTieringConfig, env: &PolicyEnv) -> Result<Self, PolicyError> {
        config.validate()?;
        let m = &env.machine;
        let nodes = m.node_count();
        let page_bytes = env.page_bytes.max(1);
        let rank = |n: NodeId| tier_rank(m.nodes[n as usize].tier);
        let allowed = &env.allowed;
        // Top tier.
        let fastest = allowed.iter().map(|&n| rank(n)).min().unwrap_or(0);
        let top_rank = match config.top_tier {
            TopTier::Fastest => fastest,
            TopTier::CpuTiers => allowed.iter().filter(|&&n| m.nodes[n as usize].cores > 0).map(|&n| rank(n)).max().unwrap_or(fastest),
        };
        let top: Vec<bool> = (0..nodes as NodeId).map(|n| allowed.contains(&n) && rank(n) <= top_rank).collect();
        let by_distance = |from: NodeId, set: &mut Vec<NodeId>| set.sort_by_key(|&n| (m.distance(from, n), n));
        let promo_target = (0..nodes as NodeId)
            .map(|from| {
                if top[from as usize] && m.nodes[from as usize].mem_bytes > 0 && config.top_tier == TopTier::CpuTiers {
                    return Some(from);
                }
                let mut t: Vec<NodeId> = allowed.iter().copied().filter(|&n| top[n as usize]).collect();
                by_distance(from, &mut t);
                if config.top_tier == TopTier::CpuTiers {
                    // Linux targets the CPU's own node; a CPU on a slow node has none.
                    return None;
                }
                t.first().copied()
            })
            .collect();
        // Demotion: the next lower tier present among the allowed nodes, nearest first.
        let demote_to = (0..nodes as NodeId)
            .map(|from| {
                if !allowed.contains(&from) {
                    return Vec::new();
                }
                let next = allowed.iter().map(|&n| rank(n)).filter(|&r| r > rank(from)).min();
                let mut t: Vec<NodeId> = allowed.iter().copied().filter(|&n| Some(rank(n)) == next).collect();
                by_distance(from, &mut t);
                t
            })
            .collect();
        let zonelist = (0..nodes as NodeId)
            .map(|from| {
                let mut t = allowed.clone();
                by_distance(from, &mut t);
                t
            })
            .collect();
        let present: Vec<u64> = (0..nodes).map(|n| m.nodes[n].mem_bytes / page_bytes).collect();
        let total_bytes: u64 = allowed.iter().map(|&n| m.nodes[n as usize].mem_bytes).sum();
        let total_pages: u64 = allowed.iter().map(|&n| present[n as usize]).sum();
        let mfk = config.min_free_kbytes.unwrap_or_else(|| default_min_free_kbytes(total_bytes));
        let wmark = (0..nodes).map(|n| watermarks(present[n], total_pages, mfk, page_bytes, config.watermark_scale_factor)).collect();
        Ok(LinuxTiering {
            rng: stream(env.seed, "policy.linux-tiering", 0),
            page_bytes,
            nodes,
            top,
            promo_target,
            demote_to,
            zonelist,
            wmark,
            present,
            pgdat: vec![PromoState::default(); nodes],
            kswapd_wake: vec![false; nodes],
            mms: Vec::new(),
            tasks: Vec::new(),
            clock_ns: 0,
            scan_now_ns: 0,
            counters: TieringCounters::default(),
            config,
        })
    }

    fn config(&self) -> &LinuxTieringConfig {
        &self.config
    }

    /// The page allocator: the local node, then by distance, each while it is above its min
    /// watermark; then any node with a free page. Taking a node to its low watermark wakes
    /// its kswapd.
    fn place(&mut self, req: &PlaceRequest, mem: &dyn MemoryState) -> Result<NodeId, OutOfMemory> {
        let order = &self.zonelist[req.cpu_node as usize];
        let pick = order
            .iter()
            .copied()
            .find(|&n| mem.free_pages(n) > self.wmark[n as usize].min)
            .or_else(|| order.iter().copied().find(|&n| mem.free_pages(n) > 0))
            .ok_or(OutOfMemory { wanted: order.first().copied().unwrap_or(req.cpu_node), pages: 1 })?;
        if mem.free_pages(pick) <= self.wmark[pick as usize].low + 1 {
            self.kswapd_wake[pick as usize] = true;
        }
        let now = self.clock_ns;
        let mm = self.mm(req.space);
        mm.grow(req.page as usize + 1);
        mm.last_ns[req.page as usize] = now;
        Ok(pick)
    }

    /// In tiering mode only pages on slow-tier nodes are unmapped (`change_pte_range` skips
    /// top-tier pages when `NUMA_BALANCING_NORMAL` is off), and each gets the scan time.
    fn should_unmap(&mut self, space: SpaceId, page: PageIdx, node: NodeId) -> bool {
        if self.top.get(node as usize).copied().unwrap_or(true) {
            return false;
        }
        let now = self.scan_now_ns;
        let mm = self.mm(space);
        mm.grow(page as usize + 1);
        mm.scan_ns[page as usize] = now;
        true
    }

    /// `task_tick_numa` / `task_numa_work`: in tiering mode the task's scan period stays at
    /// `task_scan_start` (no fault statistics are kept for slow-tier faults, so
    /// `task_numa_placement` never runs). Each tick also lets kswapd run where it was woken.
    fn on_task_tick(&mut self, tick: &TaskTick, view: &dyn SystemView, out: &mut Vec<Decision>) {
        self.see(tick.time_ns);
        self.balance(view, out);
        let delay_ns = self.config.scan_delay_ms * 1_000_000;
        self.mm(tick.space).next_scan_ns.get_or_insert(tick.time_ns + delay_ns);
        self.task(tick.thread);
        let Some(first) = self.tasks[tick.thread as usize].runtime_due(tick.runtime_ns, &mut self.rng) else {
            return;
        };
        if first {
            let scan_pages = pages_of_mb(self.config.scan_size_mb, self.page_bytes);
            let b = period::bounds(
                view.space_pages(tick.space),
                scan_pages,
                self.config.scan_size_mb,
                self.config.scan_period_min_ms,
                self.config.scan_period_max_ms,
                None,
            );
            self.tasks[tick.thread as usize].period_ms = b.scan_start;
        }
        let mm_next = &mut self.mms[tick.space as usize].next_scan_ns;
        if !self.tasks[tick.thread as usize].claim_scan(tick.time_ns, mm_next, TICK_NS) {
            return;
        }
        self.scan_now_ns = tick.time_ns;
        out.push(Decision::ScanStep {
            space: tick.space,
            thread: tick.thread,
            pages: pages_of_mb(self.config.scan_size_mb, self.page_bytes),
        });
    }

    fn on_scan_step(&mut self, step: &ScanStepDone, _view: &dyn SystemView, _out: &mut Vec<Decision>) {
        self.see(step.time_ns);
        self.task(step.thread).node_stamp_ns += 32 * step.cpu_ns;
    }

    /// `do_numa_page` → `should_numa_migrate_memory` (tiering branch) → `migrate_misplaced_folio`.
    fn on_hint_fault(&mut self, f: &HintFault, view: &dyn SystemView, out: &mut Vec<Decision>) {
        self.see(f.time_ns);
        let mm = self.mm(f.space);
        mm.grow(f.page as usize + 1);
        // numa_hint_fault_latency: swap the page's stamp for the fault time.
        let scanned = std::mem::replace(&mut mm.scan_ns[f.page as usize], f.time_ns);
        mm.last_ns[f.page as usize] = f.time_ns;
        if self.top.get(f.page_node as usize).copied().unwrap_or(true) {
            return;
        }
        let Some(dst) = self.promo_target.get(f.cpu_node as usize).copied().flatten() else { return };
        if dst == f.page_node || view.capacity_pages(dst) == 0 {
            return;
        }
        let latency_ms = if scanned == NONE { u64::MAX } else { f.time_ns.saturating_sub(scanned) / 1_000_000 };
        let free = view.free_pages(dst);
        match self.should_promote(dst, free, f.time_ns / 1_000_000, latency_ms) {
            Verdict::Cold | Verdict::RateLimited => return,
            Verdict::FreeSpaceEnough | Verdict::Hot => {}
        }
        // migrate_balanced_pgdat: the target must stay above its high watermark after the
        // move; otherwise wake its kswapd and give up this time.
        if free <= self.wmark[dst as usize].high + 1 {
            self.kswapd_wake[dst as usize] = true;
            self.counters.promote_fail_wmark += 1;
            return;
        }
        out.push(Decision::MigratePage { space: f.space, page: f.page, to: dst });
    }

    fn on_thread_migrated(&mut self, m: &ThreadMigrated, _view: &dyn SystemView, _out: &mut Vec<Decision>) {
        self.see(m.time_ns);
    }

    fn sample_period_ns(&self) -> Option<f64> {
        (self.config.lru_sample_period_us > 0).then_some(self.config.lru_sample_period_us as f64 * 1e3)
    }

    /// A sampled access refreshes the page's LRU age (the referenced bit reclaim would find).
    fn on_sample(&mut self, s: &AccessSample) {
        self.see(s.time_ns);
        let mm = self.mm(s.space);
        mm.grow(s.page as usize + 1);
        mm.last_ns[s.page as usize] = s.time_ns;
    }

    /// Region heat (docs/policies/linux-tiering.md, "Region heat"): the pages of a region
    /// found accessed in the last aggregation interval are as recently used as that interval's
    /// end — the kernel's DAMON_LRU_SORT marks such regions' pages referenced on the LRU
    /// (`DAMOS_LRU_PRIO`). Only the age kswapd ranks by changes: promotion still needs a
    /// hinting fault (its accessor's node picks the target, its latency the hotness).
    fn on_region_heat(&mut self, h: &RegionHeat) {
        if h.nr_accesses == 0 || h.pages == 0 {
            return;
        }
        self.see(h.time_ns);
        let end = (h.first_page + h.pages) as usize;
        let mm = self.mm(h.space);
        mm.grow(end);
        for t in &mut mm.last_ns[h.first_page as usize..end] {
            *t = (*t).max(h.time_ns);
        }
    }

    fn on_outcomes(&mut self, _cause: &EventRef, decisions: &[Decision], outcomes: &[Outcome]) {
        for (d, o) in decisions.iter().zip(outcomes) {
            if let Decision::MigratePage { to, .. } = *d {
                let promotion = self.top.get(to as usize).copied().unwrap_or(false);
                match (promotion, o) {
                    (true, Outcome::Applied) => self.counters.pgpromote_success += 1,
                    (true, Outcome::Refused(_)) => self.counters.promote_fail_driver += 1,
                    (false, Outcome::Applied) => self.counters.pgdemote_kswapd += 1,
                    (false, Outcome::Refused(_)) => self.counters.demote_fail += 1,
                    // Only a whole-space move is carried out in part; a page moves or not.
                    (true, Outcome::Partial { moved_pages, .. }) => self.counters.pgpromote_success += moved_pages,
                    (false, Outcome::Partial { moved_pages, .. }) => self.counters.pgdemote_kswapd += moved_pages,
                }
            }
        }
    }

    fn counters(&self) -> Vec<(&'static str, u64)> {
        let c = &self.counters;
        vec![
            ("pgpromote_success", c.pgpromote_success),
            ("pgpromote_candidate", c.pgpromote_candidate),
            ("pgpromote_candidate_nrl", c.pgpromote_candidate_nrl),
            ("pgdemote_kswapd", c.pgdemote_kswapd),
            ("promote_cold", c.promote_cold),
            ("promote_rate_limited", c.promote_rate_limited),
            ("promote_fail_wmark", c.promote_fail_wmark),
            ("promote_fail_driver", c.promote_fail_driver),
            ("demote_fail", c.demote_fail),
            ("kswapd_runs", c.kswapd_runs),
            ("threshold_down", c.threshold_down),
            ("threshold_up", c.threshold_up),
        ]
    }
}
