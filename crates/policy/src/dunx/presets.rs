//! The `cache` and `mor` policies of the DUnX model (docs/policies/dunx.md, "cache and mor"):
//! DUnX's fault machinery with freezing off. `cache` is the "always move or copy" policy of
//! software DSM (freeze window 0): a remote fault migrates a recently modified page and
//! replicates a read-mostly one, the modification history standing for the page's class. `mor`
//! (migrate on reference) also never replicates (recent_mod 0): every remote fault migrates.

use super::{Dunx, DunxConfig, TriggerMethod};
use crate::decision::{Decision, EventRef, HintFault, Outcome, PageScan, PlaceRequest};
use crate::error::{OutOfMemory, PolicyError};
use crate::policy::{MemoryState, Policy, PolicyEnv, SystemView};
use numalab_core::NodeId;
use serde::{Deserialize, Serialize};

/// Keys of `cache`: DUnX's, without those of freezing.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct CacheConfig {
    /// As DUnX's `recent_mod`: a remote fault on a page whose history exceeds it migrates the
    /// page, otherwise a read fault replicates it.
    pub recent_mod: f64,
    /// As DUnX's `scan_delay_ms`: the period of the scanners that age the history.
    pub scan_delay_ms: u64,
}

impl Default for CacheConfig {
    fn default() -> Self {
        let d = DunxConfig::default();
        CacheConfig { recent_mod: d.recent_mod, scan_delay_ms: d.scan_delay_ms }
    }
}

/// `mor` has no keys.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MorConfig {}

/// The DUnX settings a preset runs with: freeze window 0 (nothing freezes, so the defrost
/// keys have no effect).
fn unfrozen(recent_mod: f64, scan_delay_ms: u64) -> DunxConfig {
    DunxConfig {
        freeze_window_ms: 0.0,
        recent_mod,
        scan_delay_ms,
        sample_passes: 1,
        defrost_trigger: 1,
        trigger_method: TriggerMethod::InvalidateAll,
    }
}

macro_rules! preset {
    ($ty:ident, $cfg:ty, $name:literal, $summary:literal, $dunx:expr) => {
        pub struct $ty {
            config: $cfg,
            inner: Dunx,
        }

        impl $ty {
            pub fn dunx(&self) -> &Dunx {
                &self.inner
            }
        }

        impl Policy for $ty {
            type Config = $cfg;
            const NAME: &'static str = $name;
            const SUMMARY: &'static str = $summary;

            fn new(config: $cfg, env: &PolicyEnv) -> Result<Self, PolicyError> {
                let dunx_config: DunxConfig = $dunx(&config);
                dunx_config.validate(Self::NAME)?;
                let inner = Dunx::new(dunx_config, env)?;
                Ok($ty { config, inner })
            }
            fn config(&self) -> &$cfg {
                &self.config
            }
            fn place(&mut self, req: &PlaceRequest, mem: &dyn MemoryState) -> Result<NodeId, OutOfMemory> {
                self.inner.place(req, mem)
            }
            fn page_scanner_period_ns(&self) -> Option<u64> {
                self.inner.page_scanner_period_ns()
            }
            fn on_hint_fault(&mut self, f: &HintFault, view: &dyn SystemView, out: &mut Vec<Decision>) {
                self.inner.on_hint_fault(f, view, out)
            }
            fn on_page_scan(&mut self, scan: &PageScan, view: &dyn SystemView, out: &mut Vec<Decision>) {
                self.inner.on_page_scan(scan, view, out)
            }
            fn on_outcomes(&mut self, cause: &EventRef, decisions: &[Decision], outcomes: &[Outcome]) {
                self.inner.on_outcomes(cause, decisions, outcomes)
            }
            fn counters(&self) -> Vec<(&'static str, u64)> {
                self.inner.counters()
            }
        }
    };
}

preset!(
    Cache,
    CacheConfig,
    "cache",
    "DUnX model's cache policy: every remote fault migrates (recently modified) or replicates the page; nothing freezes",
    |c: &CacheConfig| unfrozen(c.recent_mod, c.scan_delay_ms)
);

preset!(
    Mor,
    MorConfig,
    "mor",
    "DUnX model's migrate-on-reference policy: every remote fault migrates the page; no replicas, nothing freezes",
    |_: &MorConfig| unfrozen(0.0, DunxConfig::default().scan_delay_ms)
);
