//! Carrefour (Dashti et al., "Traffic management: a holistic approach to memory placement on
//! NUMA systems", ASPLOS 2013): a dynamic layer over a static placement policy. Every interval
//! a global monitor computes machine-wide traffic metrics and turns three heuristics on or off;
//! a page engine then decides, for the pages the access sampler saw, whether to replicate,
//! interleave or migrate them. docs/policies/carrefour.md restates every rule.
//!
//! Files: `config` (keys), `metrics` (global metrics and gate), `pages` (sample table and the
//! per-page rules); this file wires them to the [`Policy`] hooks and executes the rounds.

pub mod config;
pub mod metrics;
pub mod open;
#[cfg(test)]
mod open_tests;
pub mod pages;
#[cfg(test)]
mod tests;

pub use config::{BaseKind, CarrefourConfig, ReadRatioMetric};
pub use open::OpenCarrefour;

use crate::decision::{AccessSample, Decision, EventRef, Extent, Outcome, PlaceRequest, SpaceId, Tick};
use crate::error::{OutOfMemory, PolicyError};
use crate::policy::{AddressSpaceInfo, MemoryState, Policy, PolicyEnv, SystemView};
use crate::statics::{FirstTouch, FirstTouchConfig, Round1G, Round1GConfig, Round4K, Round4KConfig};
use metrics::{gate, global_metrics, Flags, GateOutcome, GlobalMetrics, IntervalCounters};
use numalab_core::rng::{stream, StreamRng};
use numalab_core::{NodeId, PageIdx};
use pages::{decide_page, PageAction, SampleTable};
use rand::Rng;
use std::collections::{BTreeMap, BTreeSet};
use std::marker::PhantomData;

/// The name a Carrefour variant is registered under and the base its name implies.
pub trait Flavour: Send + 'static {
    const NAME: &'static str;
    const SUMMARY: &'static str;
    const BASE: Option<BaseKind>;
}

/// `carrefour`: the base is the `base` key (first-touch by default).
pub struct Plain;
/// `first-touch+carrefour`.
pub struct OnFirstTouch;
/// `round-4k+carrefour`.
pub struct OnRound4k;

impl Flavour for Plain {
    const NAME: &'static str = "carrefour";
    const SUMMARY: &'static str = "Carrefour: sampled hot pages replicated, interleaved or migrated when traffic is remote or imbalanced (base key: static placement)";
    const BASE: Option<BaseKind> = None;
}
impl Flavour for OnFirstTouch {
    const NAME: &'static str = "first-touch+carrefour";
    const SUMMARY: &'static str = "Carrefour over first-touch placement";
    const BASE: Option<BaseKind> = Some(BaseKind::FirstTouch);
}
impl Flavour for OnRound4k {
    const NAME: &'static str = "round-4k+carrefour";
    const SUMMARY: &'static str = "Carrefour over 4 KiB round-robin placement";
    const BASE: Option<BaseKind> = Some(BaseKind::Round4k);
}

pub type FirstTouchCarrefour = Carrefour<OnFirstTouch>;
pub type Round4kCarrefour = Carrefour<OnRound4k>;

/// The placement underneath: one of the native statics the `base` key names, or any other
/// policy handed in by [`OpenCarrefour`] (a hypervisor's VM placement, docs/vm.md,
/// "Carrefour in the hypervisor").
enum Base {
    FirstTouch(FirstTouch),
    Round4k(Round4K),
    Round1g(Round1G),
    Open(Box<dyn crate::policy::DynPolicy>),
}

/// The sampling rate in force.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rate {
    Cheap,
    Accurate,
}

/// Counters for tests, reports and the docs' worked examples.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CarrefourStats {
    pub intervals: u64,
    /// Intervals with defined metrics that passed the gate with a heuristic on.
    pub active_intervals: u64,
    /// Intervals the MAPTU (or IPC) gate closed.
    pub closed_intervals: u64,
    /// Intervals without metrics (no traffic, or a required counter unsupported).
    pub undefined_intervals: u64,
    pub samples: u64,
    pub missed_samples: u64,
    pub migrate_orders: u64,
    pub interleave_orders: u64,
    /// Pages put on a replication list, and pages of lists actually executed.
    pub replication_candidates: u64,
    pub replicated_pages: u64,
    /// Orders the driver carried out (moves applied, pages with a copy added).
    pub executed_orders: u64,
    /// The metrics of the last interval that had them.
    pub last_metrics: Option<GlobalMetrics>,
}

pub struct Carrefour<F: Flavour = Plain> {
    config: CarrefourConfig,
    base: Base,
    memory_nodes: Vec<NodeId>,
    candidates: Vec<NodeId>,
    /// Per address space, interleave destinations that replace `candidates` (a VM's home
    /// nodes when the hypervisor runs Carrefour).
    space_candidates: BTreeMap<SpaceId, Vec<NodeId>>,
    clock_ghz: f64,
    page_bytes: u64,
    seed: u64,
    flags: Flags,
    counters: IntervalCounters,
    table: SampleTable,
    rate: Rate,
    replication_executed: bool,
    /// A round's orders were issued; their outcomes set the next rate.
    round_pending: bool,
    rngs: BTreeMap<SpaceId, StreamRng>,
    stats: CarrefourStats,
    _flavour: PhantomData<F>,
}

impl<F: Flavour> Carrefour<F> {
    pub fn stats(&self) -> &CarrefourStats {
        &self.stats
    }
    pub fn flags(&self) -> Flags {
        self.flags
    }
    pub fn rate(&self) -> Rate {
        self.rate
    }
    /// Pages the current interval's samples track.
    pub fn tracked_pages(&self) -> usize {
        self.table.len()
    }

    fn build(config: CarrefourConfig, env: &PolicyEnv, base: Base) -> Self {
        let memory_nodes = env.machine.memory_nodes();
        let candidates = if config.restrict_to_allowed_nodes { env.allowed.clone() } else { memory_nodes.clone() };
        let table = SampleTable::new(config.max_pages_cheap as usize);
        Carrefour {
            config,
            base,
            memory_nodes,
            candidates,
            space_candidates: BTreeMap::new(),
            clock_ghz: env.machine.clock_ghz,
            page_bytes: env.page_bytes,
            seed: env.seed,
            flags: Flags::default(),
            counters: IntervalCounters::default(),
            table,
            rate: Rate::Cheap,
            replication_executed: false,
            round_pending: false,
            rngs: BTreeMap::new(),
            stats: CarrefourStats::default(),
            _flavour: PhantomData,
        }
    }

    /// The open base, when Carrefour runs over a policy handed in ([`Carrefour::with_base`]).
    pub fn open_base(&self) -> Option<&dyn crate::policy::DynPolicy> {
        match &self.base {
            Base::Open(p) => Some(p.as_ref()),
            _ => None,
        }
    }

    pub fn open_base_mut(&mut self) -> Option<&mut (dyn crate::policy::DynPolicy + 'static)> {
        match &mut self.base {
            Base::Open(p) => Some(p.as_mut()),
            _ => None,
        }
    }

    /// Interleave destinations of address space `space` (instead of the allowed nodes or
    /// every memory node): under a hypervisor, the home nodes of the VM the space runs in.
    /// Ignored when `restrict_to_allowed_nodes` is off, as the allowed nodes are.
    pub fn restrict_space(&mut self, space: SpaceId, nodes: Vec<NodeId>) {
        if self.config.restrict_to_allowed_nodes && !nodes.is_empty() {
            self.space_candidates.insert(space, nodes);
        }
    }

    fn max_pages(&self, rate: Rate) -> usize {
        match rate {
            Rate::Cheap => self.config.max_pages_cheap as usize,
            Rate::Accurate => self.config.max_pages_accurate as usize,
        }
    }

    /// Start a new interval's sampling at `rate`.
    fn restart_sampling(&mut self, rate: Rate) {
        self.rate = rate;
        let capacity = self.max_pages(rate);
        let old = std::mem::replace(&mut self.table, SampleTable::new(capacity));
        self.stats.missed_samples += old.missed;
    }

    fn in_window(&self, page: PageIdx) -> bool {
        let vaddr = page.saturating_mul(self.page_bytes);
        self.config.min_vaddr.is_none_or(|lo| vaddr >= lo) && self.config.max_vaddr.is_none_or(|hi| vaddr <= hi)
    }

    /// Run the page engine over the interval's samples.
    fn decide(&mut self, m: &GlobalMetrics, view: &dyn SystemView, out: &mut Vec<Decision>) {
        let table = std::mem::take(&mut self.table);
        let mut replicate: Vec<(SpaceId, PageIdx, u64)> = Vec::new();
        for (&(space, page), p) in table.iter() {
            let Some(home) = view.page_node(space, page) else { continue };
            let copies = view.page_copies(space, page);
            let candidates = self.space_candidates.get(&space).unwrap_or(&self.candidates);
            let rng = self.rngs.entry(space).or_insert_with(|| stream(self.seed, "policy.carrefour", u64::from(space)));
            let mut draw = || rng.random::<f64>();
            match decide_page(p, home, self.flags, &m.share, candidates, self.config.min_samples_migration, &mut draw) {
                // Copies go to the sampling nodes that lack one.
                PageAction::Replicate => replicate.push((space, page, p.nodes & !copies)),
                // [ours] A replicated page stays until a write collapses it: moving its home
                // would leave stale copies (the simulator refuses it as `replicated`).
                PageAction::Interleave { .. } | PageAction::Migrate { .. } if copies != 1 << home => {}
                PageAction::Interleave { to } => {
                    self.stats.interleave_orders += 1;
                    out.push(Decision::MigratePage { space, page, to });
                }
                PageAction::Migrate { to } => {
                    self.stats.migrate_orders += 1;
                    out.push(Decision::MigratePage { space, page, to });
                }
                PageAction::Nothing => {}
            }
        }
        self.stats.missed_samples += table.missed;
        self.stats.replication_candidates += replicate.len() as u64;
        let threshold = if self.replication_executed { 1 } else { self.config.replication_min_orders.max(1) as usize };
        if replicate.len() >= threshold {
            self.replication_executed = true;
            self.stats.replicated_pages += replicate.len() as u64;
            for (space, page, missing) in replicate {
                // [ours] A copy on every node that sampled the page, made now rather than on
                // each node's next read (docs/policies/carrefour.md, "Replication").
                for to in (0..u64::BITS as NodeId).filter(|&n| missing & (1 << n) != 0) {
                    out.push(Decision::Replicate { space, page, to });
                }
            }
        }
    }
}

impl Carrefour<Plain> {
    /// Carrefour over any placement policy: `base` places every page, Carrefour samples and
    /// moves them as over a native static. The config's `base` key must be unset (the base is
    /// the policy handed in).
    pub fn with_base(config: CarrefourConfig, env: &PolicyEnv, base: Box<dyn crate::policy::DynPolicy>) -> Result<Self, PolicyError> {
        config.validate(Plain::NAME)?;
        if let Some(b) = config.base {
            return Err(PolicyError::Config {
                policy: Plain::NAME.into(),
                message: format!("base = \"{}\" names a native static, but this Carrefour runs over {}", b.as_str(), base.name()),
            });
        }
        Ok(Carrefour::build(config, env, Base::Open(base)))
    }
}

impl<F: Flavour> Policy for Carrefour<F> {
    type Config = CarrefourConfig;
    const NAME: &'static str = F::NAME;
    const SUMMARY: &'static str = F::SUMMARY;

    fn new(mut config: CarrefourConfig, env: &PolicyEnv) -> Result<Self, PolicyError> {
        config.validate(F::NAME)?;
        let base_kind = match (F::BASE, config.base) {
            (Some(named), Some(set)) if named != set => {
                return Err(PolicyError::Config {
                    policy: F::NAME.into(),
                    message: format!(
                        "this policy's base is {}; for base = \"{}\" use policy carrefour with that base",
                        named.as_str(),
                        set.as_str()
                    ),
                });
            }
            (named, set) => set.or(named).unwrap_or(BaseKind::FirstTouch),
        };
        config.base = Some(base_kind);
        let base = match base_kind {
            BaseKind::FirstTouch => Base::FirstTouch(FirstTouch::new(FirstTouchConfig::default(), env)?),
            BaseKind::Round4k => Base::Round4k(Round4K::new(Round4KConfig::default(), env)?),
            BaseKind::Round1g => Base::Round1g(Round1G::new(Round1GConfig::default(), env)?),
        };
        Ok(Carrefour::build(config, env, base))
    }

    fn config(&self) -> &CarrefourConfig {
        &self.config
    }

    fn place(&mut self, req: &PlaceRequest, mem: &dyn MemoryState) -> Result<NodeId, OutOfMemory> {
        match &mut self.base {
            Base::FirstTouch(p) => p.place(req, mem),
            Base::Round4k(p) => p.place(req, mem),
            Base::Round1g(p) => p.place(req, mem),
            Base::Open(p) => p.place(req, mem),
        }
    }

    fn layout(&mut self, space: &AddressSpaceInfo, mem: &dyn MemoryState) -> Result<Option<Vec<Extent>>, OutOfMemory> {
        match &mut self.base {
            Base::FirstTouch(p) => p.layout(space, mem),
            Base::Round4k(p) => p.layout(space, mem),
            Base::Round1g(p) => p.layout(space, mem),
            Base::Open(p) => p.layout(space, mem),
        }
    }

    fn sample_period_ns(&self) -> Option<f64> {
        let cycles = match self.rate {
            Rate::Cheap => self.config.sampling_period_cheap_cycles,
            Rate::Accurate => self.config.sampling_period_accurate_cycles,
        };
        Some(cycles as f64 / self.clock_ghz)
    }

    fn on_sample(&mut self, s: &AccessSample) {
        self.stats.samples += 1;
        if self.in_window(s.page) {
            self.table.record(s.space, s.page, s.cpu_node, s.write);
        }
    }

    fn on_tick(&mut self, tick: &Tick, view: &dyn SystemView, out: &mut Vec<Decision>) {
        self.counters.add(&tick.access_matrix, &tick.write_matrix, tick.cache_refills, tick.ipc, tick.interval_ns);
        if self.counters.interval_ns < self.config.interval_ms.saturating_mul(1_000_000) {
            return;
        }
        let counters = std::mem::take(&mut self.counters);
        self.stats.intervals += 1;
        let (total, free) = self.memory_nodes.iter().fold((0, 0), |(t, f), &n| (t + view.capacity_pages(n), f + view.free_pages(n)));
        let metrics = global_metrics(&counters, &self.memory_nodes, total, free, self.config.rsd_estimator);
        let outcome = match &metrics {
            Some(m) => gate(&mut self.flags, m, &self.config, true),
            None => GateOutcome::NoMetrics,
        };
        if metrics.is_some() {
            self.stats.last_metrics = metrics.clone();
        }
        match (outcome, metrics) {
            (GateOutcome::Evaluated { active: true }, Some(m)) => {
                self.stats.active_intervals += 1;
                let before = out.len();
                self.decide(&m, view, out);
                // Sampling goes on at once; the rate follows from the orders carried out.
                self.restart_sampling(Rate::Cheap);
                self.round_pending = out.len() > before;
            }
            (outcome, _) => {
                match outcome {
                    GateOutcome::Closed => self.stats.closed_intervals += 1,
                    GateOutcome::NoMetrics => self.stats.undefined_intervals += 1,
                    GateOutcome::Evaluated { .. } => {}
                }
                // Inactive: the interval's samples are discarded, sampling restarts cheap.
                self.restart_sampling(Rate::Cheap);
            }
        }
    }

    fn on_outcomes(&mut self, cause: &EventRef, decisions: &[Decision], outcomes: &[Outcome]) {
        if !self.round_pending || !matches!(cause, EventRef::Tick) {
            return;
        }
        self.round_pending = false;
        let mut moved = 0u64;
        let mut replicated = BTreeSet::new();
        for (d, o) in decisions.iter().zip(outcomes) {
            if *o != Outcome::Applied {
                continue;
            }
            match *d {
                Decision::MigratePage { .. } => moved += 1,
                Decision::Replicate { space, page, .. } => {
                    replicated.insert((space, page));
                }
                _ => {}
            }
        }
        let executed = moved + replicated.len() as u64;
        self.stats.executed_orders += executed;
        let rate = if self.config.adaptive_sampling && executed >= u64::from(self.config.adaptive_min_orders) {
            Rate::Accurate
        } else {
            Rate::Cheap
        };
        // The round's table is already empty (`on_tick` restarted it): start at the new rate.
        self.restart_sampling(rate);
    }
}
