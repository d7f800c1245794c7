//! `numalab machine import` (placeholder until the sysfs reader lands).
use crate::output::OutputOpts;
use anyhow::{bail, Result};

#[derive(clap::Args, Debug)]
pub struct ImportArgs {}

pub fn run(_a: &ImportArgs, _out: &OutputOpts) -> Result<()> {
    bail!("`machine import` is not implemented yet")
}
