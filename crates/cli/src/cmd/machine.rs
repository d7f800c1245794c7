//! `numalab machine show|import`.
use crate::output::OutputOpts;
use anyhow::Result;

#[derive(clap::Subcommand, Debug)]
pub enum MachineCmd {
    /// Import this host's topology from sysfs as a machine TOML.
    Import(super::machine_import::ImportArgs),
}

pub fn run(cmd: &MachineCmd, out: &OutputOpts) -> Result<()> {
    match cmd {
        MachineCmd::Import(a) => super::machine_import::run(a, out),
    }
}
