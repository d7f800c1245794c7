//! `numalab report`: charts and one self-contained HTML file from numalab's JSON results
//! (docs/report.md).
//!
//! The pipeline has three steps, each testable on its own: [`input`] reads the documents
//! (docs/json.md) into typed values, [`charts`] extracts the data of every chart the inputs
//! have data for (golden tests pin these), [`draw`] turns a chart into SVG with plotters and
//! [`html`] assembles the report.

pub mod charts;
pub mod draw;
pub mod error;
pub mod html;
pub mod input;
mod json;
pub mod png;

pub use charts::{Chart, Table};
pub use error::{ReportError, Result};
pub use input::Input;

/// Inputs read, and the charts drawn from them.
pub struct Report {
    pub inputs: Vec<Input>,
    pub charts: Vec<Chart>,
    /// `svgs[k]` draws `charts[k]`.
    pub svgs: Vec<String>,
}

impl Report {
    /// Read every file, extract and draw the charts.
    pub fn from_files(paths: &[String]) -> Result<Report> {
        if paths.is_empty() {
            return Err(ReportError::NoInput);
        }
        let inputs = paths.iter().map(|p| input::load(p)).collect::<Result<Vec<_>>>()?;
        Report::new(inputs)
    }

    pub fn new(inputs: Vec<Input>) -> Result<Report> {
        let charts = charts::charts(&inputs)?;
        let svgs = charts.iter().map(draw::svg).collect::<Result<Vec<_>>>()?;
        Ok(Report { inputs, charts, svgs })
    }

    pub fn html(&self) -> String {
        html::render(&self.inputs, &self.charts, &self.svgs)
    }
}
