//! Built-in machine presets (docs/machines.md), compiled into the binary.

use super::{Machine, MachineError};

/// `(name, TOML text)` of every preset, in the order `numalab list machines` prints them.
pub const PRESETS: &[(&str, &str)] = &[
    ("amd48", include_str!("../../presets/machines/amd48.toml")),
    ("xeon-e5-2690-2s", include_str!("../../presets/machines/xeon-e5-2690-2s.toml")),
    ("xeon-e5-2690-1n", include_str!("../../presets/machines/xeon-e5-2690-1n.toml")),
    ("knl-7250-flat", include_str!("../../presets/machines/knl-7250-flat.toml")),
    ("gp1000", include_str!("../../presets/machines/gp1000.toml")),
    ("server-a-4n", include_str!("../../presets/machines/server-a-4n.toml")),
    ("server-a-2n", include_str!("../../presets/machines/server-a-2n.toml")),
    ("server-b-8n", include_str!("../../presets/machines/server-b-8n.toml")),
    ("epyc-2s-nps4", include_str!("../../presets/machines/epyc-2s-nps4.toml")),
    ("xeon-max-hbm-flat", include_str!("../../presets/machines/xeon-max-hbm-flat.toml")),
    ("cxl-expander", include_str!("../../presets/machines/cxl-expander.toml")),
];

pub fn names() -> Vec<&'static str> {
    PRESETS.iter().map(|(n, _)| *n).collect()
}

/// The TOML text of a preset.
pub fn text(name: &str) -> Result<&'static str, MachineError> {
    PRESETS
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, t)| *t)
        .ok_or_else(|| MachineError::UnknownPreset { name: name.to_string(), valid: names().join(", ") })
}

/// Load and validate a preset.
pub fn load(name: &str) -> Result<Machine, MachineError> {
    Machine::from_toml_str(text(name)?, &format!("preset:{name}"))
}
