//! The `[policy]` keys of DUnX, their defaults and their range checks (docs/policies/dunx.md,
//! "Config").

use crate::error::PolicyError;
use serde::{Deserialize, Serialize};

/// Width of the aged modification history, bits (docs/policies/dunx.md, "Scanner daemons").
pub const MOD_BITS: u32 = 8;

/// How a defrost makes the page's users fault again (docs/policies/dunx.md, "Defrosting").
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum TriggerMethod {
    /// Drop every mapping of the page, the scanning node's included.
    InvalidateAll,
    /// Drop the mappings of the nodes other than the scanning (home) node.
    InvalidateRemote,
    /// `invalidate-all` when the page was modified recently (`mod_hist > recent_mod`), else
    /// `invalidate-remote`.
    ByModHistory,
}

impl TriggerMethod {
    pub fn as_str(self) -> &'static str {
        match self {
            TriggerMethod::InvalidateAll => "invalidate-all",
            TriggerMethod::InvalidateRemote => "invalidate-remote",
            TriggerMethod::ByModHistory => "by-mod-history",
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct DunxConfig {
    /// A page that takes a remote fault less than this long after its last invalidation
    /// (migration or coherency fault) is frozen. `0` never freezes, `inf` freezes after the
    /// first invalidation.
    pub freeze_window_ms: f64,
    /// Threshold on the aged modification history: a remote fault on a page whose history
    /// exceeds it migrates the page, otherwise a read fault replicates it. An integer in
    /// `0..=255`, or `inf` (never exceeded).
    pub recent_mod: f64,
    /// Period of every node's scanner daemon, ms (≥ 1).
    pub scan_delay_ms: u64,
    /// Scanner passes per decision point (≥ 1): defrost test and halving of the counts.
    pub sample_passes: u32,
    /// `remote − local` sample successes at a decision point that defrost a frozen page.
    pub defrost_trigger: i64,
    pub trigger_method: TriggerMethod,
}

impl Default for DunxConfig {
    fn default() -> Self {
        DunxConfig {
            freeze_window_ms: 1000.0,
            recent_mod: 31.0,
            scan_delay_ms: 1000,
            sample_passes: 2,
            defrost_trigger: 1,
            trigger_method: TriggerMethod::ByModHistory,
        }
    }
}

impl DunxConfig {
    pub fn validate(&self, policy: &str) -> Result<(), PolicyError> {
        let bad = |message: String| Err(PolicyError::Config { policy: policy.into(), message });
        if self.freeze_window_ms.is_nan() || self.freeze_window_ms < 0.0 {
            return bad(format!("freeze_window_ms = {}: must be at least 0 (inf allowed)", self.freeze_window_ms));
        }
        let max = f64::from((1u32 << MOD_BITS) - 1);
        let r = self.recent_mod;
        if r != f64::INFINITY && (r.is_nan() || r < 0.0 || r > max || r.fract() != 0.0) {
            return bad(format!("recent_mod = {r}: must be a whole number in 0..={max} or inf"));
        }
        if self.scan_delay_ms == 0 {
            return bad("scan_delay_ms = 0: the scanners need a period of at least 1 ms".into());
        }
        if self.sample_passes == 0 {
            return bad("sample_passes = 0: a decision point needs at least one pass".into());
        }
        Ok(())
    }

    /// `mod_hist > recent_mod` (never true with `inf`).
    pub fn recently_modified(&self, mod_hist: u32) -> bool {
        f64::from(mod_hist) > self.recent_mod
    }

    /// The freeze window in ns (`None` = infinite).
    pub fn freeze_window_ns(&self) -> Option<f64> {
        self.freeze_window_ms.is_finite().then_some(self.freeze_window_ms * 1e6)
    }
}
