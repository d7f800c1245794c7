//! `numalab report`: charts and one self-contained HTML file from numalab's JSON results
//! (docs/report.md). The work is in the `numalab-report` crate; this is the command line.

use crate::output::{write_text, OutputOpts};
use crate::scenario::Usage;
use anyhow::{Context, Result};
use numalab_report::{Report, ReportError};
use std::path::PathBuf;

#[derive(clap::Args, Debug)]
#[command(after_help = "Reads numalab.sim/2, numalab.compare/2, numalab.study/1, numalab.profile/1, numalab.model-mva/1 and \
numalab.model-roofline/1 documents (`--format json` of those commands). Each chart is drawn only when the inputs have its data.")]
pub struct ReportArgs {
    /// numalab JSON results, e.g. from `numalab compare --out results.json`.
    #[arg(required = true, value_name = "RESULT.json")]
    pub files: Vec<PathBuf>,
    /// Write the HTML report to FILE (default: standard output; the global --out works too).
    #[arg(short = 'o', long = "output", value_name = "FILE.html")]
    pub output: Option<PathBuf>,
    /// Also write each chart as an SVG file into DIR (created if missing), named after the
    /// chart's anchor in the report.
    #[arg(long, value_name = "DIR")]
    pub svg: Option<PathBuf>,
    /// Also write each chart as a PNG file (twice the SVG's size) and as an SVG file into DIR
    /// (created if missing). The labels use the system's fonts (DejaVu Sans if installed).
    #[arg(long, value_name = "DIR")]
    pub png: Option<PathBuf>,
}

pub fn run(a: &ReportArgs, out: &OutputOpts) -> Result<()> {
    if out.format.is_some() {
        return Err(anyhow::Error::new(Usage("numalab report writes HTML; --format does not apply (use -o FILE.html)".into())));
    }
    if a.output.is_some() && out.out.is_some() {
        return Err(anyhow::Error::new(Usage("give the report's file once: -o/--output or --out, not both".into())));
    }
    let files: Vec<String> = a.files.iter().map(|p| p.display().to_string()).collect();
    let report = Report::from_files(&files).map_err(|e| match e {
        // Bad inputs are the user's to fix (exit code 2); a failed drawing is ours (1).
        ReportError::Draw { .. } | ReportError::Write { .. } => anyhow::Error::new(e),
        e => anyhow::Error::new(Usage(e.to_string())),
    })?;
    // Fonts first: a machine without any fails before anything is written.
    let fonts = match &a.png {
        Some(_) => Some(numalab_report::png::Fonts::system().map_err(|e| anyhow::Error::new(Usage(e.to_string())))?),
        None => None,
    };
    for dir in a.svg.iter().chain(&a.png) {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
        for (chart, svg) in report.charts.iter().zip(&report.svgs) {
            write_text(Some(&dir.join(format!("{}.svg", chart.id))), svg)?;
        }
    }
    if let (Some(dir), Some(fonts)) = (&a.png, &fonts) {
        for (chart, svg) in report.charts.iter().zip(&report.svgs) {
            let bytes = numalab_report::png::png(&chart.id, svg, fonts)?;
            let path = dir.join(format!("{}.png", chart.id));
            std::fs::write(&path, bytes).with_context(|| format!("cannot write {}", path.display()))?;
        }
    }
    let target = a.output.as_deref().or(out.out.as_deref());
    write_text(target, &report.html())?;
    if let Some(path) = target {
        eprintln!(
            "{}: {} chart(s) from {} input(s){}{}",
            path.display(),
            report.charts.len(),
            report.inputs.len(),
            a.svg.as_ref().map_or(String::new(), |d| format!("; SVG files in {}", d.display())),
            a.png.as_ref().map_or(String::new(), |d| format!("; PNG and SVG files in {}", d.display()))
        );
    }
    Ok(())
}
