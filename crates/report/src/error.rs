//! What can go wrong reading results and writing a report. Every message names the file and,
//! where there is one, the field, so a user can find the offending value.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    #[error("no result files given")]
    NoInput,
    #[error("cannot read {path}: {source}")]
    Read {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: not a JSON document ({message})")]
    NotJson { path: String, message: String },
    #[error("{path}: not a numalab result (no \"schema\" naming a numalab document)")]
    NotNumalab { path: String },
    #[error("{path}: schema {schema} is not one numalab report reads ({supported})")]
    UnknownSchema { path: String, schema: String, supported: String },
    #[error("{path}: field {field} is missing")]
    Missing { path: String, field: String },
    #[error("{path}: field {field} is not {expected}")]
    WrongType { path: String, field: String, expected: &'static str },
    /// A machine tree the roofline needs that numalab's machine type does not read.
    #[error("{path}: field {field} is not a numalab machine: {message}")]
    BadMachine { path: String, field: String, message: String },
    #[error("{path}: field {field} is empty; there is nothing to chart")]
    EmptyRuns { path: String, field: String },
    /// Two inputs name the same machine but describe different hardware: a chart of that
    /// machine would put results of two machines side by side under one name.
    #[error("{first} and {second} both name machine {machine} but with different settings; one chart would mix two machines (rename one machine or report the files separately)")]
    MixedMachines { machine: String, first: String, second: String },
    /// The same policy on the same machine, workload and grid point twice: its box would be
    /// drawn twice under one label.
    #[error("{first} and {second} both hold {cell}; report them separately")]
    Duplicate {
        /// "linux on cg-like / server-a-4n"
        cell: String,
        first: String,
        second: String,
    },
    #[error("cannot write {}: {source}", path.display())]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// plotters failed to lay out a chart (it draws into a string, so this is a bug or an
    /// unusable value such as an empty range).
    #[error("cannot draw chart {chart}: {message}")]
    Draw { chart: String, message: String },
    /// PNG needs a font for the charts' text, and none was found.
    #[error("PNG output needs a TrueType or OpenType font for the charts' labels, and none was found in {searched}; install one (e.g. Debian's fonts-dejavu-core) or use --svg")]
    NoFonts { searched: String },
}

pub type Result<T> = std::result::Result<T, ReportError>;
