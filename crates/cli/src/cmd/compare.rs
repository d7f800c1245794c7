use crate::output::OutputOpts;
use anyhow::{bail, Result};

#[derive(clap::Args, Debug)]
pub struct CompareArgs {}

pub fn run(_a: &CompareArgs, _out: &OutputOpts) -> Result<()> {
    bail!("not implemented yet")
}
