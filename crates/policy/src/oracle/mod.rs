//! The oracle policies of the local/remote model (docs/policies/oracle.md; docs/model.md §3.3):
//! `ideal` gives every page the treatment the model's ideal rule picks for its DUnX class, and
//! `error` gives a fixed fraction `e_c` of each class's pages the wrong one. They know what no
//! real policy can, each page's class, so they need the driver to hand them the class map
//! ([`PolicyEnv::page_classes`]); the simulator builds it from a workload's `runs` regions,
//! and a driver without one (the live agent) gets a clear refusal from `new`.
//!
//! The treatments are carried out with DUnX's fault rules (docs/policies/dunx.md, "Faults"),
//! freezing off: **S** leaves the page on its first-touch home and only maps it (remote
//! references stay remote); **Mg** migrates the page to every node that faults on it (`mor`'s
//! rule); **Rp** replicates it to every node that reads it, and a write collapses the copies to
//! the writer (`cache`'s rule with the class, not the modification history, choosing to
//! replicate). Files: `classes` (the class map), `config` (keys), `tests`.

pub mod classes;
pub mod config;
#[cfg(test)]
mod tests;

pub use classes::{ClassRegion, PageClass, PageClasses};
pub use config::{ErrorConfig, ErrorFractions, IdealConfig};

use crate::decision::{Decision, EventRef, HintFault, Outcome, PlaceRequest, SpaceId};
use crate::dunx::{Dunx, DunxConfig, TriggerMethod};
use crate::error::{OutOfMemory, PolicyError};
use crate::policy::{MemoryState, Policy, PolicyEnv, SystemView};
use numalab_core::{Machine, NodeId, PageIdx};
use rand::Rng;
use std::sync::Arc;

/// What a policy does with a class's pages (docs/model.md §3.3, the treatments of §6.1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Treatment {
    /// S: the page stays on its home; other nodes reference it remotely.
    Static,
    /// Mg: the page migrates to each node that starts a run on it.
    Migrate,
    /// Rp: each node that reads the page gets a copy; a write collapses the copies.
    Replicate,
}

impl Treatment {
    pub fn as_str(self) -> &'static str {
        match self {
            Treatment::Static => "S",
            Treatment::Migrate => "Mg",
            Treatment::Replicate => "Rp",
        }
    }
}

/// The machine figures of the break-even counts (docs/policies/oracle.md, "The ideal rule").
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BreakEven {
    pub c_mig_ns: f64,
    pub c_rep_ns: f64,
    pub c_coh_ns: f64,
    /// `Δ`: the mean extra latency of a remote reference over a local one between the
    /// allowed nodes with CPUs, ns.
    pub delta_ns: f64,
}

impl BreakEven {
    /// From the machine's page-operation costs (`costs_ms`) and latencies; `None` when the
    /// machine gives no page-operation costs.
    pub fn from_machine(m: &Machine, allowed: &[NodeId]) -> Option<BreakEven> {
        let c = m.costs_ms?;
        let cpu = m.cpu_nodes();
        let (mut sum, mut n) = (0.0, 0u32);
        for &i in allowed.iter().filter(|i| cpu.contains(i)) {
            for &j in allowed.iter().filter(|&&j| j != i) {
                sum += m.latency_ns[i as usize][j as usize] - m.latency_ns[i as usize][i as usize];
                n += 1;
            }
        }
        let delta_ns = if n == 0 { 0.0 } else { sum / f64::from(n) };
        Some(BreakEven { c_mig_ns: c.migrate * 1e6, c_rep_ns: c.replicate * 1e6, c_coh_ns: c.coherency_fault * 1e6, delta_ns })
    }
}

/// The break-even counts of a class: `(k_mig, k_rep)`, each the scalar override when given,
/// else `C / ((1 − 1/M_c)·Δ)` (∞ when `M_c = 1` or `Δ = 0`). `Err(name)` when a count is
/// needed, not overridden, and the machine gives no costs.
pub fn break_even(r: &ClassRegion, be: Option<&BreakEven>, k_mig: Option<f64>, k_rep: Option<f64>) -> Result<(f64, f64), &'static str> {
    let denom = |be: &BreakEven| (1.0 - 1.0 / f64::from(r.sharers)) * be.delta_ns;
    let k = |given: Option<f64>, cost: fn(&BreakEven, bool) -> f64, name: &'static str| match (given, be) {
        (Some(k), _) => Ok(k),
        (None, _) if r.sharers <= 1 => Ok(f64::INFINITY),
        (None, Some(be)) => Ok(if denom(be) > 0.0 { cost(be, r.written) / denom(be) } else { f64::INFINITY }),
        (None, None) => Err(name),
    };
    Ok((k(k_mig, |b, _| b.c_mig_ns, "k_mig")?, k(k_rep, |b, written| b.c_rep_ns + if written { b.c_coh_ns } else { 0.0 }, "k_rep")?))
}

/// The ideal rule (docs/model.md §3.3): RO/RM pages are replicated when `ŵ_c > k_rep`, SS/SP
/// pages migrated when `r̂_c > k_mig`, everything else static; PR pages are static (local to
/// their one user under first touch).
pub fn ideal_treatment(class: PageClass, run_refs: f64, write_run_refs: f64, k_mig: f64, k_rep: f64) -> Treatment {
    match class {
        PageClass::Pr => Treatment::Static,
        PageClass::Ro | PageClass::Rm if write_run_refs > k_rep => Treatment::Replicate,
        PageClass::Ss | PageClass::Sp if run_refs > k_mig => Treatment::Migrate,
        _ => Treatment::Static,
    }
}

/// The error policy's wrong treatment (docs/model.md §3.3): S when the ideal moves or copies
/// the page, else what the ideal would do for the class if it paid (Rp for RO/RM, Mg for
/// SS/SP); PR pages are never wrong.
pub fn wrong_treatment(class: PageClass, ideal: Treatment) -> Treatment {
    match (class, ideal) {
        (PageClass::Pr, t) => t,
        (_, Treatment::Migrate | Treatment::Replicate) => Treatment::Static,
        (c, Treatment::Static) if c.is_read_shared() => Treatment::Replicate,
        (_, Treatment::Static) => Treatment::Migrate,
    }
}

/// The policy's own fault counts, besides DUnX's.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct OracleStats {
    /// Faults on pages treated S: a mapping only.
    pub faults_static: u64,
    /// Faults on pages outside every class region (handled as S).
    pub faults_unclassified: u64,
    pub refused: u64,
}

/// What `ideal` and `error` share: the class map, the per-class treatment, the wrong pages,
/// and two DUnX engines that carry out Mg and Rp.
pub struct Oracle {
    classes: Arc<PageClasses>,
    /// Per region of `classes`: its ideal treatment.
    ideal: Vec<Treatment>,
    /// Per region: offsets of the pages that get the wrong treatment, ascending.
    wrong: Vec<Vec<u64>>,
    /// Per class (`PageClass::index`): pages, and pages given the wrong treatment.
    pages_by_class: [u64; 5],
    wrong_by_class: [u64; 5],
    migrate: Dunx,
    replicate: Dunx,
    stats: OracleStats,
}

/// DUnX's rules with freezing off: `recent_mod = 0` migrates on every remote fault (Mg),
/// `recent_mod = inf` replicates on every remote read (Rp).
fn engine(recent_mod: f64, scan_delay_ms: u64, env: &PolicyEnv) -> Result<Dunx, PolicyError> {
    Dunx::new(
        DunxConfig {
            freeze_window_ms: 0.0,
            recent_mod,
            scan_delay_ms,
            sample_passes: 1,
            defrost_trigger: 1,
            trigger_method: TriggerMethod::InvalidateAll,
        },
        env,
    )
}

impl Oracle {
    /// `errors[c]`: the fraction of class `c`'s pages to treat wrongly (all 0 for `ideal`).
    fn new(
        policy: &'static str,
        env: &PolicyEnv,
        k_mig: Option<f64>,
        k_rep: Option<f64>,
        scan_delay_ms: u64,
        errors: [f64; 5],
    ) -> Result<Oracle, PolicyError> {
        config::validate(policy, k_mig, k_rep, scan_delay_ms, &errors)?;
        let bad = |message: String| PolicyError::Config { policy: policy.into(), message };
        let classes = match &env.page_classes {
            Some(c) if !c.is_empty() => c.clone(),
            _ => {
                return Err(bad(
                    "needs each page's DUnX class (PR, RO, RM, SS or SP), which only the simulator supplies, from a workload whose \
                     regions use the `runs` pattern with dunx_class; this workload or driver (the live agent) has none"
                        .into(),
                ))
            }
        };
        let be = BreakEven::from_machine(&env.machine, &env.allowed);
        let mut ideal = Vec::with_capacity(classes.regions().len());
        for r in classes.regions() {
            let (km, kr) = break_even(r, be.as_ref(), k_mig, k_rep).map_err(|key| {
                bad(format!(
                    "machine '{}' gives no page-operation costs (costs_ms), so the break-even count {key} of the {} class cannot be \
                     computed; set policy.{key}",
                    env.machine.name,
                    r.class.as_str()
                ))
            })?;
            ideal.push(ideal_treatment(r.class, r.run_refs, r.write_run_refs, km, kr));
        }
        let mut wrong: Vec<Vec<u64>> = vec![Vec::new(); classes.regions().len()];
        let mut pages_by_class = [0u64; 5];
        let mut wrong_by_class = [0u64; 5];
        for class in PageClass::ALL {
            // Every page of the class, in region order, as (region, offset).
            let mut pages: Vec<(usize, u64)> = Vec::new();
            for (i, r) in classes.regions().iter().enumerate().filter(|(_, r)| r.class == class) {
                pages.extend((0..r.pages).map(|o| (i, o)));
            }
            pages_by_class[class.index()] = pages.len() as u64;
            let e = errors[class.index()];
            if class == PageClass::Pr || e == 0.0 {
                continue;
            }
            // Exactly round(e·n) pages, chosen by a partial Fisher–Yates shuffle on the class's
            // own stream: the first k of one permutation, so a larger e adds pages to a smaller
            // e's set, and one class's fraction leaves the others' choice alone.
            let n = pages.len();
            let k = ((e * n as f64).round() as usize).min(n);
            let mut rng = numalab_core::rng::stream(env.seed, "policy.error", class.index() as u64);
            for i in 0..k {
                let j = rng.random_range(i..n);
                pages.swap(i, j);
            }
            for &(region, offset) in &pages[..k] {
                wrong[region].push(offset);
            }
            wrong_by_class[class.index()] = k as u64;
        }
        for w in &mut wrong {
            w.sort_unstable();
        }
        Ok(Oracle {
            classes,
            ideal,
            wrong,
            pages_by_class,
            wrong_by_class,
            migrate: engine(0.0, scan_delay_ms, env)?,
            replicate: engine(f64::INFINITY, scan_delay_ms, env)?,
            stats: OracleStats::default(),
        })
    }

    /// The page's treatment; `None` for a page outside every class region.
    pub fn treatment(&self, space: SpaceId, page: PageIdx) -> Option<Treatment> {
        let i = self.classes.region_of(space, page)?;
        let r = &self.classes.regions()[i];
        let ideal = self.ideal[i];
        Some(if self.wrong[i].binary_search(&(page - r.first_page)).is_ok() { wrong_treatment(r.class, ideal) } else { ideal })
    }

    /// The ideal treatment of each class present, in class order.
    pub fn ideal_by_class(&self) -> Vec<(PageClass, Treatment)> {
        let mut out: Vec<(PageClass, Treatment)> = Vec::new();
        for (r, &t) in self.classes.regions().iter().zip(&self.ideal) {
            if !out.iter().any(|(c, _)| *c == r.class) {
                out.push((r.class, t));
            }
        }
        out.sort_by_key(|(c, _)| *c);
        out
    }

    pub fn stats(&self) -> &OracleStats {
        &self.stats
    }

    fn place(&mut self, req: &PlaceRequest, mem: &dyn MemoryState) -> Result<NodeId, OutOfMemory> {
        Policy::place(&mut self.migrate, req, mem)
    }

    fn on_hint_fault(&mut self, f: &HintFault, view: &dyn SystemView, out: &mut Vec<Decision>) {
        match self.treatment(f.space, f.page) {
            Some(Treatment::Migrate) => self.migrate.on_hint_fault(f, view, out),
            Some(Treatment::Replicate) => self.replicate.on_hint_fault(f, view, out),
            Some(Treatment::Static) => self.stats.faults_static += 1,
            None => self.stats.faults_unclassified += 1,
        }
    }

    fn on_outcomes(&mut self, outcomes: &[Outcome]) {
        self.stats.refused += outcomes.iter().filter(|o| !o.took_effect()).count() as u64;
    }

    fn counters(&self) -> Vec<(&'static str, u64)> {
        let (m, r) = (self.migrate.stats(), self.replicate.stats());
        let s = &self.stats;
        let mut out = vec![
            ("faults_static", s.faults_static),
            ("faults_unclassified", s.faults_unclassified),
            ("faults_map_only", m.faults_map_only + r.faults_map_only),
            ("faults_migration", m.faults_migration + r.faults_migration),
            ("faults_replication", m.faults_replication + r.faults_replication),
            ("faults_coherency", m.faults_coherency + r.faults_coherency),
            ("faults_coherency_with_copy", m.faults_coherency_with_copy + r.faults_coherency_with_copy),
            ("no_free_frame", m.no_free_frame + r.no_free_frame),
            ("invalidations", m.invalidations + r.invalidations),
            ("refused", s.refused),
        ];
        let names: [(&str, &str); 4] = [
            ("pages_ro", "wrong_pages_ro"),
            ("pages_rm", "wrong_pages_rm"),
            ("pages_ss", "wrong_pages_ss"),
            ("pages_sp", "wrong_pages_sp"),
        ];
        for (c, (pages, wrong)) in PageClass::ALL[1..].iter().zip(names) {
            out.push((pages, self.pages_by_class[c.index()]));
            out.push((wrong, self.wrong_by_class[c.index()]));
        }
        out
    }
}

macro_rules! oracle_policy {
    ($ty:ident, $cfg:ty, $name:literal, $summary:literal, $errors:expr) => {
        pub struct $ty {
            config: $cfg,
            inner: Oracle,
        }

        impl $ty {
            pub fn oracle(&self) -> &Oracle {
                &self.inner
            }
        }

        impl Policy for $ty {
            type Config = $cfg;
            const NAME: &'static str = $name;
            const SUMMARY: &'static str = $summary;

            fn new(config: $cfg, env: &PolicyEnv) -> Result<Self, PolicyError> {
                let errors: [f64; 5] = $errors(&config);
                let inner = Oracle::new(Self::NAME, env, config.k_mig, config.k_rep, config.scan_delay_ms, errors)?;
                Ok($ty { config, inner })
            }
            fn config(&self) -> &$cfg {
                &self.config
            }
            fn place(&mut self, req: &PlaceRequest, mem: &dyn MemoryState) -> Result<NodeId, OutOfMemory> {
                self.inner.place(req, mem)
            }
            fn page_scanner_period_ns(&self) -> Option<u64> {
                Some(self.config.scan_delay_ms.saturating_mul(1_000_000))
            }
            fn on_hint_fault(&mut self, f: &HintFault, view: &dyn SystemView, out: &mut Vec<Decision>) {
                self.inner.on_hint_fault(f, view, out)
            }
            fn on_outcomes(&mut self, _cause: &EventRef, _decisions: &[Decision], outcomes: &[Outcome]) {
                self.inner.on_outcomes(outcomes)
            }
            fn counters(&self) -> Vec<(&'static str, u64)> {
                self.inner.counters()
            }
        }
    };
}

oracle_policy!(
    Ideal,
    IdealConfig,
    "ideal",
    "Local/remote model's ideal policy (an oracle; simulator only): each page gets its DUnX class's best treatment, static, migrate or replicate",
    |_: &IdealConfig| [0.0; 5]
);

oracle_policy!(
    ErrorPolicy,
    ErrorConfig,
    "error",
    "Local/remote model's error policy (an oracle; simulator only): ideal, but a fraction errors.CLASS of each class's pages gets the wrong treatment",
    |c: &ErrorConfig| c.errors.by_class()
);
