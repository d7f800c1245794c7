//! Built-in workload presets (`*-like`: synthetic approximations of real programs).

use crate::error::WorkloadError;
use crate::schema::WorkloadFile;

/// `(name, what it mimics, TOML text)`.
pub const PRESETS: &[(&str, &str, &str)] = &[
    ("cg-like", "NPB CG class C: private sparse-matrix rows streamed by their owners, a shared vector gathered by all", include_str!("../presets/cg-like.toml")),
    ("stream-like", "STREAM triad: per-thread arrays, parallel first touch, sequential a = b + s*c", include_str!("../presets/stream-like.toml")),
    ("master-slave", "kmeans/streamcluster: one master thread allocates and fills everything, workers scan their slices", include_str!("../presets/master-slave.toml")),
    ("dunx-synth", "DUnX synth: five page classes (PR, RO, RM, SS, SP) with exact run schedules, 8 processes one per node", include_str!("../presets/dunx-synth.toml")),
];

pub fn names() -> Vec<&'static str> {
    PRESETS.iter().map(|p| p.0).collect()
}

pub fn text(name: &str) -> Result<&'static str, WorkloadError> {
    PRESETS
        .iter()
        .find(|p| p.0 == name)
        .map(|p| p.2)
        .ok_or_else(|| WorkloadError::UnknownPreset {
            name: name.to_string(),
            valid: names().join(", "),
        })
}

/// Parse workload TOML (`origin` names it in errors).
pub fn parse(text: &str, origin: &str) -> Result<WorkloadFile, WorkloadError> {
    toml::from_str(text).map_err(|e| WorkloadError::parse(origin, text, e))
}

pub fn load(name: &str) -> Result<WorkloadFile, WorkloadError> {
    parse(text(name)?, &format!("preset:{name}"))
}
