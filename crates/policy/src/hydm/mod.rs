//! HyDM (docs/policies/hydm.md): a daemon that, once per time window, moves one whole
//! application to the fast memory tier, choosing the one with the lowest predicted arithmetic
//! intensity (the roofline: it gains most from bandwidth), skipping applications with more
//! page faults than the mean and those whose earlier move did not pay; when the fast tier is
//! full it rolls back an application whose flops never improved there. After Lee et al.,
//! "HyDM" (Intel Knights Landing, flat MCDRAM).
//!
//! Windows are built from the simulator's per-space counters (`Tick::spaces`,
//! docs/simulator.md "Per-space windows"): ticks are summed until `period_ms` has passed.

pub mod config;
pub mod roofline;
pub mod state;
#[cfg(test)]
mod tests;

pub use config::{HydmConfig, NewPages};
pub use state::{LoopState, Pending, Record, Step};

use crate::decision::{Decision, EventRef, NodeMask, Outcome, PlaceRequest, SpaceId, Tick};
use crate::error::{OutOfMemory, PolicyError};
use crate::fallback::first_fit;
use crate::policy::{AppMove, AppMoveKind, MemoryState, Policy, PolicyEnv, SystemView};
use crate::statics::tier_rank;
use numalab_core::{Machine, NodeId};
use std::collections::BTreeMap;
use std::sync::Arc;

/// Counters of the window being built, per space.
#[derive(Clone, Copy, Debug, Default)]
struct Partial {
    fp: f64,
    pref: u64,
    pf: u64,
}

pub struct Hydm {
    config: HydmConfig,
    machine: Arc<Machine>,
    page_bytes: u64,
    /// Fast- and slow-tier nodes (ascending).
    fast: Vec<NodeId>,
    slow: Vec<NodeId>,
    /// The same as node masks: what a rollback and a promotion move from.
    fast_mask: NodeMask,
    slow_mask: NodeMask,
    /// Per accessing node, where new pages go (`new_pages`): every allowed node by distance
    /// (`local`), or slow nodes by distance, then fast nodes, then any other (`slow-first`).
    order: Vec<Vec<NodeId>>,
    /// The slow tier's ridge point, when `require_memory_bound` is set.
    max_intensity: Option<f64>,
    state: LoopState,
    window_ns: u64,
    partial: BTreeMap<SpaceId, Partial>,
    /// Every step taken, with its window index (for tests and inspection).
    steps: Vec<(u64, Step)>,
    /// The step whose move was just handed to the driver, until its outcome comes back.
    pending: Option<Pending>,
    /// Every settled move: window index, step, outcome (for tests and inspection).
    outcomes: Vec<(u64, Step, Outcome)>,
    /// Every move decided, with its predicted intensity and (once known) its outcome: the
    /// run's `app_moves` (docs/policies/hydm.md, "What a run reports").
    moves: Vec<AppMove>,
    /// Windows ended, and steps that found a candidate that did not fit and nothing to roll
    /// back (`hydm_windows`, `hydm_blocked` of the run's `policy_counters`).
    windows_ended: u64,
    blocked: u64,
}

/// The allowed nodes of the tier with the highest bandwidth (a tier's bandwidth: the best of
/// its nodes'; ties go to the faster tier rank).
fn fastest_tier(m: &Machine, allowed: &[NodeId]) -> Vec<NodeId> {
    let mut tiers: BTreeMap<u8, f64> = BTreeMap::new();
    for &n in allowed {
        let node = &m.nodes[n as usize];
        let bw = tiers.entry(tier_rank(node.tier)).or_insert(0.0);
        *bw = bw.max(node.mem_bw_gbps);
    }
    let Some((&best, _)) = tiers.iter().max_by(|a, b| a.1.total_cmp(b.1).then(b.0.cmp(a.0))) else { return Vec::new() };
    allowed.iter().copied().filter(|&n| tier_rank(m.nodes[n as usize].tier) == best).collect()
}

impl Hydm {
    /// Every migration step so far: (window index, step).
    pub fn steps(&self) -> &[(u64, Step)] {
        &self.steps
    }

    pub fn state(&self) -> &LoopState {
        &self.state
    }

    /// Every move whose outcome came back: (window index, step, outcome).
    pub fn outcomes(&self) -> &[(u64, Step, Outcome)] {
        &self.outcomes
    }

    fn check_nodes(&self, nodes: &[NodeId], env: &PolicyEnv) -> Result<(), PolicyError> {
        for &n in nodes {
            if n as usize >= env.machine.node_count() {
                return Err(PolicyError::NoSuchNode { policy: Self::NAME.into(), node: n, nodes: env.machine.node_count() });
            }
            if env.machine.nodes[n as usize].mem_bytes == 0 {
                return Err(PolicyError::MemorylessNode { policy: Self::NAME.into(), node: n });
            }
        }
        Ok(())
    }

    /// The fast node to move to: the one with the most free pages (then the lowest id).
    fn fast_target(&self, mem: &dyn MemoryState) -> NodeId {
        let mut best = self.fast[0];
        for &n in &self.fast[1..] {
            if mem.free_pages(n) > mem.free_pages(best) {
                best = n;
            }
        }
        best
    }

    /// The slow node to roll back to: the nearest to the node of the application's first
    /// thread (then the most free pages, then the lowest id).
    fn slow_target(&self, space: SpaceId, view: &dyn SystemView) -> NodeId {
        let from = view.node_of_thread(view.space_threads(space).start);
        let mut best = self.slow[0];
        for &n in &self.slow[1..] {
            let key = |x: NodeId| (self.machine.distance(from, x), std::cmp::Reverse(view.free_pages(x)));
            if key(n) < key(best) {
                best = n;
            }
        }
        best
    }

    fn bytes_on(&self, nodes: &[NodeId], mem: &dyn MemoryState, used: bool) -> u64 {
        nodes.iter().map(|&n| if used { mem.capacity_pages(n) - mem.free_pages(n) } else { mem.capacity_pages(n) }).sum::<u64>()
            * self.page_bytes
    }

    /// One iteration of the loop at the end of a window: monitor, select, migrate.
    fn iterate(&mut self, tick: &Tick, view: &dyn SystemView, out: &mut Vec<Decision>) {
        let mut apps = BTreeMap::new();
        for sw in &tick.spaces {
            if !view.space_threads(sw.space).any(|t| view.thread_alive(t)) {
                continue;
            }
            let p = self.partial.get(&sw.space).copied().unwrap_or_default();
            let fast_pages: u64 = self.fast.iter().filter_map(|&n| sw.pages_per_node.get(n as usize)).sum();
            apps.insert(
                sw.space,
                Record {
                    fp: p.fp,
                    pref: p.pref,
                    pf: p.pf,
                    rss_bytes: sw.resident_pages() * self.page_bytes,
                    fast_bytes: fast_pages * self.page_bytes,
                },
            );
        }
        self.partial.clear();
        self.state.push_window(apps);
        let b = self.state.select(self.config.bytes_per_ref, self.max_intensity);
        let used = self.bytes_on(&self.fast, view, true);
        let capacity = self.bytes_on(&self.fast, view, false);
        let fast_before = self.state.fast.clone();
        let step = self.state.migrate_step(b, used, capacity, self.config.threshold, self.config.rollback_rel_eps);
        self.pending = self.state.pending(step, &fast_before);
        self.windows_ended += 1;
        // A promotion moves the pages on the slow tier and a rollback those on the fast tier,
        // as the source's `migrate_pages(2)` from one tier's nodes to the other's: with two
        // fast nodes (one per socket) the pages already on the fast tier stay where first touch
        // put them (docs/policies/hydm.md, "Migration, threshold and rollback").
        let (space, kind, to, from) = match step {
            Step::Migrate(a) => (a, AppMoveKind::Promote, self.fast_target(view), self.slow_mask),
            Step::Rollback { back, .. } => (back, AppMoveKind::Rollback, self.slow_target(back, view), self.fast_mask),
            Step::Blocked { .. } => {
                self.blocked += 1;
                self.steps.push((self.state.g, step));
                return;
            }
            Step::Idle => return,
        };
        out.push(Decision::MoveSpace { space, to, from: Some(from) });
        let resident_pages = self.state.windows.front().and_then(|w| w.apps.get(&space)).map_or(0, |r| r.rss_bytes / self.page_bytes);
        self.moves.push(AppMove {
            time_ns: tick.time_ns,
            window: Some(self.state.g),
            space,
            kind,
            to,
            intensity_flop_per_byte: self.state.predicted_intensity(space, self.config.bytes_per_ref),
            resident_pages,
            outcome: None,
        });
        self.steps.push((self.state.g, step));
    }
}

impl Policy for Hydm {
    type Config = HydmConfig;
    const NAME: &'static str = "hydm";
    const SUMMARY: &'static str =
        "moves whole applications to the fast tier, lowest predicted arithmetic intensity first; page-fault filter, capacity threshold, rollback";

    fn new(config: HydmConfig, env: &PolicyEnv) -> Result<Self, PolicyError> {
        config.validate(Self::NAME)?;
        let m = env.machine.clone();
        let mut h = Hydm {
            config: config.clone(),
            machine: m.clone(),
            page_bytes: env.page_bytes,
            fast: Vec::new(),
            slow: Vec::new(),
            fast_mask: NodeMask::default(),
            slow_mask: NodeMask::default(),
            order: Vec::new(),
            max_intensity: None,
            state: LoopState::new(config.history),
            window_ns: 0,
            partial: BTreeMap::new(),
            steps: Vec::new(),
            pending: None,
            outcomes: Vec::new(),
            moves: Vec::new(),
            windows_ended: 0,
            blocked: 0,
        };
        h.check_nodes(&config.fast_nodes, env)?;
        h.check_nodes(&config.slow_nodes, env)?;
        let mut fast = if config.fast_nodes.is_empty() { fastest_tier(&m, &env.allowed) } else { config.fast_nodes.clone() };
        fast.sort_unstable();
        fast.dedup();
        let mut slow: Vec<NodeId> = if config.slow_nodes.is_empty() {
            env.allowed.iter().copied().filter(|n| !fast.contains(n)).collect()
        } else {
            config.slow_nodes.clone()
        };
        slow.sort_unstable();
        slow.dedup();
        if config.require_memory_bound {
            let peak = config.peak_gflops.or(m.peak_gflops_dp).ok_or_else(|| PolicyError::Config {
                policy: Self::NAME.into(),
                message: "require_memory_bound needs peak_gflops (the machine gives no peak_gflops_dp)".into(),
            })?;
            let bw = slow.iter().map(|&n| m.nodes[n as usize].mem_peak_gbps.unwrap_or(m.nodes[n as usize].mem_bw_gbps)).fold(0.0, f64::max);
            h.max_intensity = (bw > 0.0).then(|| roofline::ridge_point(peak, bw));
        }
        h.order = (0..m.node_count() as NodeId)
            .map(|from| {
                let by_distance = |set: &[NodeId]| {
                    let mut v = set.to_vec();
                    v.sort_by_key(|&n| (m.distance(from, n), n));
                    v
                };
                match config.new_pages {
                    NewPages::Local => by_distance(&env.allowed),
                    NewPages::SlowFirst => {
                        let rest: Vec<NodeId> = env.allowed.iter().copied().filter(|n| !fast.contains(n) && !slow.contains(n)).collect();
                        [by_distance(&slow), by_distance(&fast), by_distance(&rest)].concat()
                    }
                }
            })
            .collect();
        let mask = |nodes: &[NodeId]| {
            NodeMask::of(nodes).ok_or_else(|| PolicyError::Config {
                policy: Self::NAME.into(),
                message: format!("its tiers' nodes must be below {} (a whole-space move names them in a node mask)", NodeMask::NODES),
            })
        };
        (h.fast_mask, h.slow_mask) = (mask(&fast)?, mask(&slow)?);
        h.fast = fast;
        h.slow = slow;
        Ok(h)
    }

    fn config(&self) -> &HydmConfig {
        &self.config
    }

    /// New pages go where `new_pages` says: by default the touching CPU's node, then the
    /// others by distance, as Linux with no memory policy set (docs/policies/hydm.md, "New
    /// pages").
    fn place(&mut self, req: &PlaceRequest, mem: &dyn MemoryState) -> Result<NodeId, OutOfMemory> {
        let order = &self.order[req.cpu_node as usize];
        first_fit(order.iter().copied(), mem, 1).ok_or(OutOfMemory { wanted: order.first().copied().unwrap_or(req.cpu_node), pages: 1 })
    }

    fn on_tick(&mut self, tick: &Tick, view: &dyn SystemView, out: &mut Vec<Decision>) {
        // No per-space counters (a driver that does not count them), or no two tiers: idle.
        if tick.spaces.is_empty() || self.fast.is_empty() || self.slow.is_empty() {
            return;
        }
        for sw in &tick.spaces {
            let p = self.partial.entry(sw.space).or_default();
            p.fp += sw.flops;
            p.pref += sw.mem_refs;
            p.pf += sw.page_faults;
        }
        self.window_ns += tick.interval_ns;
        if self.window_ns < self.config.period_ms.saturating_mul(1_000_000) {
            return;
        }
        self.window_ns = 0;
        self.iterate(tick, view, out);
    }

    /// The outcome of the window's move: `F`, `V` and the moved bytes follow what was
    /// actually moved (docs/policies/hydm.md, "Outcomes").
    fn on_outcomes(&mut self, cause: &EventRef, decisions: &[Decision], outcomes: &[Outcome]) {
        if !matches!(cause, EventRef::Tick) {
            return;
        }
        let Some(pending) = self.pending.take() else { return };
        let space = match pending.step {
            Step::Migrate(a) => a,
            Step::Rollback { back, .. } => back,
            Step::Idle | Step::Blocked { .. } => return,
        };
        let found = decisions.iter().zip(outcomes).find(|(d, _)| matches!(d, Decision::MoveSpace { space: s, .. } if *s == space));
        if let Some((_, &outcome)) = found {
            self.state.settle(pending, outcome, self.page_bytes);
            self.outcomes.push((self.state.g, pending.step, outcome));
            if let Some(m) = self.moves.last_mut().filter(|m| m.space == space && m.outcome.is_none()) {
                m.outcome = Some(outcome);
            }
        }
    }

    /// `hydm_windows`: monitoring windows ended;
    /// `hydm_promotions` / `hydm_rollbacks`: moves decided; `hydm_blocked`: windows whose
    /// candidate did not fit under the threshold with nothing to roll back.
    fn counters(&self) -> Vec<(&'static str, u64)> {
        let promotions = self.moves.iter().filter(|m| m.kind == AppMoveKind::Promote).count() as u64;
        vec![
            ("hydm_windows", self.windows_ended),
            ("hydm_promotions", promotions),
            ("hydm_rollbacks", self.moves.len() as u64 - promotions),
            ("hydm_blocked", self.blocked),
        ]
    }

    fn app_moves(&self) -> Vec<AppMove> {
        self.moves.clone()
    }
}
