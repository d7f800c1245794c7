use crate::output::OutputOpts;
use anyhow::{bail, Result};

#[derive(clap::Args, Debug)]
pub struct ListArgs {}

pub fn run(_a: &ListArgs, _out: &OutputOpts) -> Result<()> {
    bail!("not implemented yet")
}
