//! `numalab workload show`.

use crate::output::{write_text, Format, OutputOpts};
use crate::scenario::load_workload;
use anyhow::Result;

#[derive(clap::Subcommand, Debug)]
pub enum WorkloadCmd {
    /// Print a workload (preset name or file) as TOML, the starting point for your own.
    Show(ShowArgs),
}

#[derive(clap::Args, Debug)]
pub struct ShowArgs {
    /// Preset name (see `numalab list workloads`) or a workload TOML file.
    pub workload: String,
}

pub fn run(cmd: &WorkloadCmd, out: &OutputOpts) -> Result<()> {
    match cmd {
        WorkloadCmd::Show(a) => {
            let text = match (out.format, numalab_workload::presets::text(&a.workload)) {
                (Some(Format::Json), _) => serde_json::to_string_pretty(&load_workload(&a.workload)?)? + "\n",
                (Some(Format::Csv), _) => {
                    anyhow::bail!("workload show prints TOML or JSON, not CSV")
                }
                // A preset's own text keeps its comments (sources of every number).
                (_, Ok(text)) => text.to_string(),
                (_, Err(_)) => toml::to_string_pretty(&load_workload(&a.workload)?)?,
            };
            write_text(out.out.as_deref(), &text)
        }
    }
}
