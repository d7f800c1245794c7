//! The `[policy]` keys of `ideal` and `error` (docs/policies/oracle.md, "Config").

use crate::error::PolicyError;
use serde::{Deserialize, Serialize};

/// Keys of `ideal`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct IdealConfig {
    /// Scalar override of the migration break-even count, references per run, for every class
    /// (the model's `k_mig`); unset: the per-class break-even of the model's §6.1 rule.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub k_mig: Option<f64>,
    /// Scalar override of the replication break-even count (the model's `k_rep`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub k_rep: Option<f64>,
    /// Period of the page-scanner daemons, ms. The oracle reads no scanner state; the scanners
    /// come with the per-node mappings whose faults it needs (docs/simulator.md, "Page mappings
    /// and scanner daemons"). As DUnX's default, so runs compare with `cache` and `mor`.
    pub scan_delay_ms: u64,
}

/// The error fractions `e_c` of `error`, one per shared class (PR pages are never wrong).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ErrorFractions {
    pub ro: f64,
    pub rm: f64,
    pub ss: f64,
    pub sp: f64,
}

impl ErrorFractions {
    /// `[e_PR = 0, e_RO, e_RM, e_SS, e_SP]`, indexed by `PageClass::index`.
    pub fn by_class(&self) -> [f64; 5] {
        [0.0, self.ro, self.rm, self.ss, self.sp]
    }
}

/// Keys of `error`: those of `ideal` and the fractions.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ErrorConfig {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub k_mig: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub k_rep: Option<f64>,
    pub scan_delay_ms: u64,
    pub errors: ErrorFractions,
}

pub(crate) const DEFAULT_SCAN_DELAY_MS: u64 = 1000;

impl Default for IdealConfig {
    fn default() -> Self {
        IdealConfig { k_mig: None, k_rep: None, scan_delay_ms: DEFAULT_SCAN_DELAY_MS }
    }
}

impl Default for ErrorConfig {
    fn default() -> Self {
        ErrorConfig { k_mig: None, k_rep: None, scan_delay_ms: DEFAULT_SCAN_DELAY_MS, errors: ErrorFractions::default() }
    }
}

/// Range checks shared by both policies.
pub(crate) fn validate(
    policy: &str,
    k_mig: Option<f64>,
    k_rep: Option<f64>,
    scan_delay_ms: u64,
    errors: &[f64; 5],
) -> Result<(), PolicyError> {
    let bad = |message: String| Err(PolicyError::Config { policy: policy.into(), message });
    for (name, v) in [("k_mig", k_mig), ("k_rep", k_rep)] {
        if let Some(v) = v {
            if v.is_nan() || v < 0.0 {
                return bad(format!("{name} = {v}: must be at least 0 (inf allowed)"));
            }
        }
    }
    if scan_delay_ms == 0 {
        return bad("scan_delay_ms = 0: the scanners need a period of at least 1 ms".into());
    }
    for (name, e) in ["pr", "ro", "rm", "ss", "sp"].iter().zip(errors) {
        if !(0.0..=1.0).contains(e) {
            return bad(format!("errors.{name} = {e}: an error fraction must lie in [0, 1]"));
        }
    }
    Ok(())
}
