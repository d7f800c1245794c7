//! Typed errors of the analytic models. Every variant says where the problem came from.

use thiserror::Error;

/// Why a model input was rejected or a solve failed.
#[derive(Debug, Error, Clone, PartialEq)]
pub enum ModelError {
    /// A page-class file is not valid TOML or does not match the schema (unknown key, wrong type).
    #[error("{origin}{}: {message}", line_suffix(*line))]
    ClassParse { origin: String, line: Option<usize>, message: String },

    /// A page-class value breaks a rule of docs/model.md §3.2.
    #[error("{origin}{}: class {class}, field '{field}': {problem}", line_suffix(*line))]
    ClassInvalid { origin: String, line: Option<usize>, class: &'static str, field: &'static str, problem: String },

    #[error("unknown page-class preset '{name}'; valid presets: {valid}")]
    UnknownClassPreset { name: String, valid: String },

    /// A scalar model parameter is out of range.
    #[error("parameter '{name}' = {value}: {problem}")]
    InvalidParameter { name: String, value: f64, problem: String },

    /// A queueing network is malformed (dimensions, negative demands, ...).
    #[error("invalid queueing network: {problem}")]
    InvalidNetwork { problem: String },

    /// Exact MVA would visit more population vectors than allowed.
    #[error("exact MVA needs {states} population vectors, above the limit of {limit}; use the Schweitzer or Linearizer solver")]
    StateSpaceTooLarge { states: f64, limit: u64 },

    /// A fixed-point iteration hit its cap.
    #[error("{solver} did not converge in {iterations} iterations (last change {residual:e})")]
    NoConvergence { solver: &'static str, iterations: u64, residual: f64 },

    /// A machine preset lacks what a model needs.
    #[error("machine '{machine}': {problem}")]
    Machine { machine: String, problem: String },

    /// A machine lacks a figure a model needs and no explicit value was given.
    #[error("machine '{machine}': no {what} ({field}); give it explicitly")]
    MachineLacks { machine: String, field: &'static str, what: &'static str },

    /// A `--sweep` specification could not be parsed.
    #[error("bad sweep '{spec}': {problem}")]
    Sweep { spec: String, problem: String },
}

fn line_suffix(line: Option<usize>) -> String {
    line.map(|l| format!(":{l}")).unwrap_or_default()
}

impl ModelError {
    pub(crate) fn param(name: &str, value: f64, problem: impl Into<String>) -> ModelError {
        ModelError::InvalidParameter { name: name.to_string(), value, problem: problem.into() }
    }

    pub(crate) fn network(problem: impl Into<String>) -> ModelError {
        ModelError::InvalidNetwork { problem: problem.into() }
    }
}
