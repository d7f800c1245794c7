//! `numalab topo` (placeholder until the live-observation work lands).
use crate::output::OutputOpts;
use anyhow::{bail, Result};

#[derive(clap::Args, Debug)]
pub struct TopoArgs {}

pub fn run(_a: &TopoArgs, _out: &OutputOpts) -> Result<()> {
    bail!("`topo` is not implemented yet")
}
