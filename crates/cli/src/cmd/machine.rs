//! `numalab machine show|import|measure`.

use crate::output::{write_text, Format, OutputOpts};
use crate::scenario::load_machine;
use anyhow::Result;

#[derive(clap::Subcommand, Debug)]
pub enum MachineCmd {
    /// Print a machine (preset name or file) as resolved TOML (or JSON with --format json).
    Show(ShowArgs),
    /// Import this host's topology from sysfs as a machine TOML.
    Import(super::machine_import::ImportArgs),
    /// Measure this host's latencies and bandwidths per node pair into a machine TOML.
    Measure(super::machine_measure::MeasureArgs),
}

#[derive(clap::Args, Debug)]
pub struct ShowArgs {
    /// Preset name (see `numalab list machines`) or a machine TOML file.
    pub machine: String,
}

pub fn run(cmd: &MachineCmd, out: &OutputOpts) -> Result<()> {
    match cmd {
        MachineCmd::Show(a) => {
            let m = load_machine(&a.machine)?;
            let text = match out.format {
                Some(Format::Json) => serde_json::to_string_pretty(&m)? + "\n",
                Some(Format::Csv) => anyhow::bail!("machine show prints TOML or JSON, not CSV"),
                _ => m.to_toml_string(),
            };
            write_text(out.out.as_deref(), &text)
        }
        MachineCmd::Import(a) => super::machine_import::run(a, out),
        MachineCmd::Measure(a) => super::machine_measure::run(a, out),
    }
}
