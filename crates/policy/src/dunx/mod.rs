//! DUnX (LaRowe, Ellis and Holliday, "Evaluation of NUMA memory management through modeling
//! and measurements", IEEE TPDS 1992; the DUnX kernel on the BBN GP1000): tunable dynamic
//! multiple-copy placement. Pages start where they are first touched; a node's reference
//! without a mapping faults, and the fault migrates the page, replicates it, or maps it
//! remotely and freezes it when it was invalidated too recently. Per-node scanner daemons
//! age a modification history and reference counts, and defrost frozen pages that remote
//! nodes use more than the home does. docs/policies/dunx.md restates every rule.
//!
//! The policy asks the driver for per-node mappings and scanner daemons
//! ([`Policy::page_scanner_period_ns`]): faults arrive through `on_hint_fault`, scanner passes
//! through `on_page_scan`. Files: `config` (keys), `tests`; this file holds the page state and
//! the rules.

pub mod config;
pub mod presets;
#[cfg(test)]
mod tests;

pub use config::{DunxConfig, TriggerMethod, MOD_BITS};
pub use presets::{Cache, CacheConfig, Mor, MorConfig};

use crate::decision::{Decision, EventRef, HintFault, Outcome, PageScan, PlaceRequest, SpaceId};
use crate::error::{OutOfMemory, PolicyError};
use crate::policy::{MemoryState, Policy, PolicyEnv, SystemView};
use numalab_core::{NodeId, PageIdx};
use std::collections::BTreeMap;

/// What DUnX keeps per page (docs/policies/dunx.md, "Page state"). The copies and the primary
/// (the home) are the driver's; everything else is here.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PageState {
    pub frozen: bool,
    /// Time of the last invalidation (migration or coherency fault), ns.
    pub last_inval_ns: Option<u64>,
    /// Aged modification history, `MOD_BITS` wide: bit `MOD_BITS − 1` is the latest scan.
    pub mod_hist: u32,
    pub local_cnt: u32,
    pub remote_cnt: u32,
    /// Scanner passes since the last decision point.
    pub passes: u32,
    /// Invalidations and migrations of this page (§8 metrics).
    pub invalidations: u64,
    pub migrations: u64,
    /// The node the page left in its last migration.
    pub left_node: Option<NodeId>,
}

/// The kind of fault, for the counters (docs/policies/dunx.md, "Counters").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FaultKind {
    /// Only a mapping was installed (local copy, frozen page, or no free frame).
    MapOnly,
    Migration,
    Replication,
    /// Write through a read-only mapping with a local replica: the other copies go.
    Coherency,
    /// Write on a replicated page without a local copy: the primary's copy moves here and the
    /// others go.
    CoherencyWithCopy,
}

/// Counters of §9 of the source's statistics, kept by the policy.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DunxStats {
    pub faults_map_only: u64,
    pub faults_migration: u64,
    pub faults_replication: u64,
    pub faults_coherency: u64,
    pub faults_coherency_with_copy: u64,
    /// Remote mappings made because the faulting node had no free frame.
    pub no_free_frame: u64,
    pub freezes: u64,
    pub defrosts: u64,
    pub triggers_invalidate_all: u64,
    pub triggers_invalidate_remote: u64,
    pub scanner_passes: u64,
    /// Migrations whose destination is the node the page left in its previous migration.
    pub pingpong_migrations: u64,
    pub invalidations: u64,
    /// Decisions the driver refused (none expected).
    pub refused: u64,
}

pub struct Dunx {
    config: DunxConfig,
    allowed: Vec<NodeId>,
    pages: BTreeMap<(SpaceId, PageIdx), PageState>,
    stats: DunxStats,
}

impl Dunx {
    pub fn stats(&self) -> &DunxStats {
        &self.stats
    }

    pub fn page(&self, space: SpaceId, page: PageIdx) -> Option<&PageState> {
        self.pages.get(&(space, page))
    }

    /// Set a page's state (tests and worked examples start from a given history).
    pub fn set_page(&mut self, space: SpaceId, page: PageIdx, state: PageState) {
        self.pages.insert((space, page), state);
    }

    /// The kind of the last fault handled (for tests).
    fn note(&mut self, kind: FaultKind) {
        let s = &mut self.stats;
        match kind {
            FaultKind::MapOnly => s.faults_map_only += 1,
            FaultKind::Migration => s.faults_migration += 1,
            FaultKind::Replication => s.faults_replication += 1,
            FaultKind::Coherency => s.faults_coherency += 1,
            FaultKind::CoherencyWithCopy => s.faults_coherency_with_copy += 1,
        }
    }

    /// An invalidation of `v` at `now`: `last_inval` and the page's count.
    fn invalidate(&mut self, key: (SpaceId, PageIdx), now: u64) {
        let st = self.pages.entry(key).or_default();
        st.last_inval_ns = Some(now);
        st.invalidations += 1;
        self.stats.invalidations += 1;
    }

    /// The page moves from `from` to `to` (a migration, or the copy of a coherency fault):
    /// the scanner's counts restart, ping-pong is counted.
    fn moved(&mut self, key: (SpaceId, PageIdx), from: NodeId, to: NodeId) {
        let st = self.pages.entry(key).or_default();
        if st.left_node == Some(to) {
            self.stats.pingpong_migrations += 1;
        }
        st.left_node = Some(from);
        st.migrations += 1;
        st.local_cnt = 0;
        st.remote_cnt = 0;
        st.passes = 0;
    }

    /// The fault rules (docs/policies/dunx.md, "Faults"), for a fault of node `i` on a placed
    /// page whose copies are `copies` (a node mask) and whose primary is `home`.
    pub fn decide(&mut self, f: &HintFault, copies: u64, view: &dyn MemoryState, out: &mut Vec<Decision>) -> FaultKind {
        let (i, home, now) = (f.cpu_node, f.page_node, f.time_ns);
        let (space, page) = (f.space, f.page);
        let key = (space, page);
        let replicated = copies.count_ones() > 1;
        let local = copies & (1 << i) != 0;
        let full = view.is_full(i, 1);
        let kind = if local {
            if !replicated || !f.write {
                // A local single copy (writable) or a local replica read (read-only).
                FaultKind::MapOnly
            } else {
                // Coherency fault: keep the local copy, drop every other copy and every
                // other node's mapping.
                out.push(Decision::CollapseReplicas { space, page, keep: i });
                out.push(Decision::DropMappings { space, page, keep: Some(i) });
                self.invalidate(key, now);
                FaultKind::Coherency
            }
        } else if !replicated {
            let st = self.pages.entry(key).or_default();
            let window = self.config.freeze_window_ns();
            let recent = st.last_inval_ns.is_some_and(|t| window.is_none_or(|w| (now.saturating_sub(t) as f64) < w));
            if st.frozen || recent {
                if !st.frozen {
                    st.frozen = true;
                    self.stats.freezes += 1;
                }
                FaultKind::MapOnly
            } else if full {
                self.stats.no_free_frame += 1;
                FaultKind::MapOnly
            } else if f.write || self.config.recent_mod == 0.0 || self.config.recently_modified(st.mod_hist) {
                out.push(Decision::MigratePage { space, page, to: i });
                self.invalidate(key, now);
                self.moved(key, home, i);
                FaultKind::Migration
            } else {
                out.push(Decision::Replicate { space, page, to: i });
                FaultKind::Replication
            }
        } else if !f.write {
            if full {
                // Map the primary read-only; no replica.
                self.stats.no_free_frame += 1;
                FaultKind::MapOnly
            } else {
                out.push(Decision::Replicate { space, page, to: i });
                FaultKind::Replication
            }
        } else if full {
            // Coherency fault that keeps the primary's copy.
            self.stats.no_free_frame += 1;
            out.push(Decision::CollapseReplicas { space, page, keep: home });
            out.push(Decision::DropMappings { space, page, keep: Some(i) });
            self.invalidate(key, now);
            FaultKind::Coherency
        } else {
            // Copy the primary here and drop every other copy: collapse to the primary, then
            // migrate it (which drops every mapping).
            out.push(Decision::CollapseReplicas { space, page, keep: home });
            out.push(Decision::MigratePage { space, page, to: i });
            self.invalidate(key, now);
            self.moved(key, home, i);
            FaultKind::CoherencyWithCopy
        };
        self.note(kind);
        kind
    }

    /// One node's scanner pass (docs/policies/dunx.md, "Scanner daemons").
    pub fn scan(&mut self, scan: &PageScan, out: &mut Vec<Decision>) {
        self.stats.scanner_passes += 1;
        for p in &scan.pages {
            let st = self.pages.entry((p.space, p.page)).or_default();
            st.local_cnt += u32::from(p.local_ref);
            st.remote_cnt += u32::from(p.remote_ref);
            st.mod_hist = (st.mod_hist >> 1) | (u32::from(p.dirty) << (MOD_BITS - 1));
            st.passes += 1;
            if st.passes < self.config.sample_passes {
                continue;
            }
            if st.frozen && i64::from(st.remote_cnt) - i64::from(st.local_cnt) >= self.config.defrost_trigger {
                st.frozen = false;
                self.stats.defrosts += 1;
                let all = match self.config.trigger_method {
                    TriggerMethod::InvalidateAll => true,
                    TriggerMethod::InvalidateRemote => false,
                    TriggerMethod::ByModHistory => self.config.recently_modified(st.mod_hist),
                };
                if all {
                    self.stats.triggers_invalidate_all += 1;
                    out.push(Decision::DropMappings { space: p.space, page: p.page, keep: None });
                } else {
                    self.stats.triggers_invalidate_remote += 1;
                    out.push(Decision::DropMappings { space: p.space, page: p.page, keep: Some(scan.node) });
                }
            }
            st.local_cnt >>= 1;
            st.remote_cnt >>= 1;
            st.passes = 0;
        }
    }

    /// Largest count of migrations and of invalidations of one page.
    fn per_page_maxima(&self) -> (u64, u64) {
        self.pages.values().fold((0, 0), |(m, i), p| (m.max(p.migrations), i.max(p.invalidations)))
    }
}

impl Policy for Dunx {
    type Config = DunxConfig;
    const NAME: &'static str = "dunx";
    const SUMMARY: &'static str =
        "DUnX: first touch, then remote faults migrate or replicate pages; pages invalidated too often freeze until scanners defrost them";

    fn new(config: DunxConfig, env: &PolicyEnv) -> Result<Self, PolicyError> {
        config.validate(Self::NAME)?;
        Ok(Dunx { config, allowed: env.allowed.clone(), pages: BTreeMap::new(), stats: DunxStats::default() })
    }

    fn config(&self) -> &DunxConfig {
        &self.config
    }

    /// First touch; on a full node the lowest-numbered allowed node with a free frame.
    fn place(&mut self, req: &PlaceRequest, mem: &dyn MemoryState) -> Result<NodeId, OutOfMemory> {
        let want = req.cpu_node;
        if self.allowed.contains(&want) && !mem.is_full(want, 1) {
            return Ok(want);
        }
        self.allowed.iter().copied().find(|&n| !mem.is_full(n, 1)).ok_or(OutOfMemory { wanted: want, pages: 1 })
    }

    fn page_scanner_period_ns(&self) -> Option<u64> {
        Some(self.config.scan_delay_ms.saturating_mul(1_000_000))
    }

    fn on_hint_fault(&mut self, f: &HintFault, view: &dyn SystemView, out: &mut Vec<Decision>) {
        let copies = view.page_copies(f.space, f.page);
        if copies == 0 {
            return;
        }
        self.decide(f, copies, view, out);
    }

    fn on_page_scan(&mut self, scan: &PageScan, _view: &dyn SystemView, out: &mut Vec<Decision>) {
        self.scan(scan, out);
    }

    fn on_outcomes(&mut self, _cause: &EventRef, _decisions: &[Decision], outcomes: &[Outcome]) {
        self.stats.refused += outcomes.iter().filter(|o| !o.took_effect()).count() as u64;
    }

    fn counters(&self) -> Vec<(&'static str, u64)> {
        let s = &self.stats;
        let (max_migrations, max_invalidations) = self.per_page_maxima();
        let frozen_now = self.pages.values().filter(|p| p.frozen).count() as u64;
        vec![
            ("faults_map_only", s.faults_map_only),
            ("faults_migration", s.faults_migration),
            ("faults_replication", s.faults_replication),
            ("faults_coherency", s.faults_coherency),
            ("faults_coherency_with_copy", s.faults_coherency_with_copy),
            ("no_free_frame", s.no_free_frame),
            ("freezes", s.freezes),
            ("defrosts", s.defrosts),
            ("frozen_at_end", frozen_now),
            ("triggers_invalidate_all", s.triggers_invalidate_all),
            ("triggers_invalidate_remote", s.triggers_invalidate_remote),
            ("scanner_passes", s.scanner_passes),
            ("invalidations", s.invalidations),
            ("max_invalidations_per_page", max_invalidations),
            ("max_migrations_per_page", max_migrations),
            ("pingpong_migrations", s.pingpong_migrations),
            ("refused", s.refused),
        ]
    }
}
