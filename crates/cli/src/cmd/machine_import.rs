//! `numalab machine import --sysfs [/sys]`: this host's topology as a machine TOML (shares the
//! reader and the export with `topo --export`).
use crate::output::{write_text, Format, OutputOpts};
use anyhow::{bail, Context, Result};
use numalab_linux::export::{to_machine, ExportOptions};
use numalab_linux::{FsRoot, Topology};
use std::path::{Path, PathBuf};

#[derive(clap::Args, Debug)]
pub struct ImportArgs {
    /// Import from a sysfs tree [default: /sys]: a directory named `sys` whose
    /// `devices/system/node` holds the node directories, or a root directory holding `sys/`
    /// (`--root DIR`, as `topo` calls it, is the same flag).
    #[arg(long, alias = "root", value_name = "SYS", num_args = 0..=1, default_missing_value = "/sys")]
    pub sysfs: Option<PathBuf>,
    /// Name of the imported machine.
    #[arg(long, default_value = "host")]
    pub name: String,
}

/// The root that holds `sys/`: the parent of a sysfs mount, or a directory containing `sys/`.
pub fn root_of(sysfs: &Path) -> Result<FsRoot> {
    if sysfs.join("devices/system/node").is_dir() {
        let parent = sysfs.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
        if sysfs.file_name().and_then(|n| n.to_str()) != Some("sys") {
            bail!("{}: a sysfs tree must be a directory named `sys`", sysfs.display());
        }
        return Ok(FsRoot::at(parent));
    }
    if sysfs.join("sys/devices/system/node").is_dir() {
        return Ok(FsRoot::at(sysfs));
    }
    bail!("{}: no devices/system/node here (kernel without NUMA support, or not a sysfs tree)", sysfs.display())
}

pub fn run(a: &ImportArgs, out: &OutputOpts) -> Result<()> {
    if out.format == Some(Format::Csv) {
        crate::scenario::usage!("machine import prints TOML or JSON, not CSV");
    }
    let sysfs = a.sysfs.clone().unwrap_or_else(|| PathBuf::from("/sys"));
    let root = root_of(&sysfs)?;
    let t = Topology::read(&root).context("cannot read the NUMA topology")?;
    let e = to_machine(&t, &ExportOptions { name: a.name.clone(), ..Default::default() })
        .map_err(|m| anyhow::Error::new(crate::scenario::Usage(format!("{}: {m}", sysfs.display()))))?;
    let text = match out.format {
        Some(Format::Json) => {
            let mut s = serde_json::to_string_pretty(&serde_json::json!({ "machine": e.machine, "estimates": e.estimates }))?;
            s.push('\n');
            s
        }
        _ => e.toml,
    };
    write_text(out.out.as_deref(), &text)
}
