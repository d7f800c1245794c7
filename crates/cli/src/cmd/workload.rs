use crate::output::OutputOpts;
use anyhow::Result;

#[derive(clap::Subcommand, Debug)]
pub enum WorkloadCmd {}

pub fn run(cmd: &WorkloadCmd, _out: &OutputOpts) -> Result<()> {
    match *cmd {}
}
