use crate::output::OutputOpts;
use anyhow::{bail, Result};

#[derive(clap::Args, Debug)]
pub struct BenchArgs {}

pub fn run(_a: &BenchArgs, _out: &OutputOpts) -> Result<()> {
    bail!("not implemented yet")
}
