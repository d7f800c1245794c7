//! `numalab profile` (placeholder until the live-observation work lands).
use crate::output::OutputOpts;
use anyhow::{bail, Result};

#[derive(clap::Args, Debug)]
pub struct ProfileArgs {}

pub fn run(_a: &ProfileArgs, _out: &OutputOpts) -> Result<()> {
    bail!("`profile` is not implemented yet")
}
