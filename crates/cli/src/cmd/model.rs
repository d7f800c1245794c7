//! `numalab model` (placeholder until the analytic-model work lands).
use crate::output::OutputOpts;
use anyhow::Result;

#[derive(clap::Subcommand, Debug)]
pub enum ModelCmd {}

pub fn run(cmd: &ModelCmd, _out: &OutputOpts) -> Result<()> {
    match *cmd {}
}
