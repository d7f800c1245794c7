use crate::output::OutputOpts;
use anyhow::{bail, Result};

#[derive(clap::Args, Debug)]
pub struct SimArgs {}

pub fn run(_a: &SimArgs, _out: &OutputOpts) -> Result<()> {
    bail!("not implemented yet")
}
