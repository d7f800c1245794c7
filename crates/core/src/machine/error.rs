use thiserror::Error;

/// Why a machine description was rejected. Every variant names where the text came from.
#[derive(Debug, Error, Clone, PartialEq)]
pub enum MachineError {
    #[error("{origin}{}: {message}", line.map(|l| format!(":{l}")).unwrap_or_default())]
    Parse { origin: String, line: Option<usize>, message: String },
    #[error("{origin}: {problem}")]
    Invalid { origin: String, problem: String },
    #[error("unknown machine preset '{name}'; valid presets: {valid}")]
    UnknownPreset { name: String, valid: String },
}

impl MachineError {
    pub(crate) fn parse(origin: &str, text: &str, e: toml::de::Error) -> MachineError {
        let line = e.span().map(|span| text[..span.start.min(text.len())].matches('\n').count() + 1);
        MachineError::Parse { origin: origin.to_string(), line, message: crate::one_line(e.message()) }
    }
}
