use thiserror::Error;

/// Why a workload was rejected. Messages name the file, line, region, phase or field.
#[derive(Debug, Error, Clone, PartialEq)]
pub enum WorkloadError {
    #[error("{origin}{}: {message}", line.map(|l| format!(":{l}")).unwrap_or_default())]
    Parse { origin: String, line: Option<usize>, message: String },
    #[error("{origin}: {message}")]
    Invalid { origin: String, message: String },
    #[error("unknown workload preset '{name}'; valid presets: {valid}")]
    UnknownPreset { name: String, valid: String },
    #[error("{origin}: footprint {need_bytes} bytes exceeds the machine's memory ({have_bytes} bytes) by {over_bytes} bytes ({over_pct:.1}%); try --scale {suggest_scale:.3}")]
    TooLarge { origin: String, need_bytes: u64, have_bytes: u64, over_bytes: u64, over_pct: f64, suggest_scale: f64 },
}

impl WorkloadError {
    pub(crate) fn parse(origin: &str, text: &str, e: toml::de::Error) -> WorkloadError {
        let line = e.span().map(|span| text[..span.start.min(text.len())].matches('\n').count() + 1);
        WorkloadError::Parse { origin: origin.to_string(), line, message: numalab_core::one_line(e.message()) }
    }
    /// A footprint of `need` bytes on a machine with `have`, at `scale`: says by how much and
    /// suggests a scale that fits with 10% to spare.
    pub(crate) fn too_large(origin: &str, need: u64, have: u64, scale: f64) -> WorkloadError {
        let over = need - have;
        WorkloadError::TooLarge {
            origin: origin.to_string(),
            need_bytes: need,
            have_bytes: have,
            over_bytes: over,
            over_pct: 100.0 * over as f64 / have as f64,
            suggest_scale: scale * 0.9 * have as f64 / need as f64,
        }
    }

    pub(crate) fn invalid(origin: &str, message: impl Into<String>) -> WorkloadError {
        WorkloadError::Invalid { origin: origin.to_string(), message: message.into() }
    }
}
