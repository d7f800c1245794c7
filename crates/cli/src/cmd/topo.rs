//! `numalab topo`: this host's NUMA topology (nodes, CPUs, memory, distances, memory tiers,
//! CPU-less nodes, numastat), and `--export` of a machine file the simulator loads.
//! JSON contract `numalab.topo/1` (docs/topo.md).
use crate::output::{emit, write_text, OutputOpts, Table};
use anyhow::{Context, Result};
use numalab_linux::export::{to_machine, ExportOptions};
use numalab_linux::procfs::settings::{cpu_facts, kernel_release};
use numalab_linux::{FsRoot, Topology};
use serde_json::json;
use std::path::PathBuf;

pub const TOPO_SCHEMA: &str = "numalab.topo/1";

#[derive(clap::Args, Debug)]
pub struct TopoArgs {
    /// Read /sys and /proc under DIR instead of / (a captured tree, a container's view).
    /// `--sysfs DIR`, as `machine import` calls it, is the same flag; a directory named
    /// `sys` is taken as the sysfs tree itself.
    #[arg(long, alias = "sysfs", value_name = "DIR", default_value = "/")]
    pub root: PathBuf,
    /// Also write a machine TOML the simulator loads; values sysfs cannot tell (latency,
    /// bandwidth, clock) are estimated and marked `# estimate:` in the file.
    #[arg(long, value_name = "FILE")]
    pub export: Option<PathBuf>,
    /// Machine name written by --export.
    #[arg(long, default_value = "host")]
    pub name: String,
}

/// Bytes as a short human string (tables only; JSON carries exact bytes).
pub fn human_bytes(b: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = b as f64;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < UNITS.len() {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{b} B")
    } else {
        format!("{v:.1} {}", UNITS[u])
    }
}

/// The `numalab.topo/1` document.
pub fn topo_json(t: &Topology, root: &FsRoot) -> serde_json::Value {
    let facts = cpu_facts(root);
    let nodes: Vec<_> = t
        .nodes
        .iter()
        .map(|n| {
            json!({
                "id": n.id,
                "cpus": n.cpus,
                "mem_total_bytes": n.mem_total_bytes,
                "mem_free_bytes": n.mem_free_bytes,
                "tier": t.tier_of(n.id),
                "distances": n.distances,
                "cpu_less": n.cpus.is_empty(),
                "numastat": n.numastat,
            })
        })
        .collect();
    json!({
        "schema": TOPO_SCHEMA,
        "nodes": nodes,
        "tiers": t.tiers,
        "cpu_less_nodes": t.cpu_less_nodes(),
        "possible_nodes": t.lists.possible,
        "kernel": kernel_release(root),
        "virtualized": facts.virtualized,
    })
}

/// The topology table; `exact` gives memory in bytes (CSV), otherwise in KiB/MiB/GiB.
pub fn topo_table_with(t: &Topology, exact: bool) -> Table {
    let human_bytes = |b: u64| if exact { b.to_string() } else { human_bytes(b) };
    let (total, free) = if exact { ("mem_total_bytes", "mem_free_bytes") } else { ("mem_total", "mem_free") };
    let mut table = Table::new(["node", "cpus", total, free, "tier", "distances", "numa_hit", "numa_miss", "other_node"]);
    for n in &t.nodes {
        let stat = |k: &str| n.numastat.get(k).map(|v| v.to_string()).unwrap_or_else(|| "n/a".into());
        table.row([
            n.id.to_string(),
            if n.cpus.is_empty() { "(none)".to_string() } else { numalab_linux::parse::format_list(&n.cpus) },
            human_bytes(n.mem_total_bytes),
            human_bytes(n.mem_free_bytes),
            t.tier_of(n.id).map(|x| x.to_string()).unwrap_or_else(|| "n/a".into()),
            n.distances.iter().map(|d| d.to_string()).collect::<Vec<_>>().join(" "),
            stat("numa_hit"),
            stat("numa_miss"),
            stat("other_node"),
        ]);
    }
    match &t.tiers {
        Some(tiers) => {
            let list: Vec<String> =
                tiers.iter().map(|x| format!("memory_tier{}: nodes {}", x.id, numalab_linux::parse::format_list(&x.nodes))).collect();
            table.notes.push(format!("memory tiers (lower = faster): {}", list.join("; ")));
        }
        None => table.notes.push("memory tiers: not exposed by this kernel (/sys/devices/virtual/memory_tiering absent)".into()),
    }
    let cpu_less = t.cpu_less_nodes();
    if !cpu_less.is_empty() {
        table.notes.push(format!("CPU-less memory nodes: {}", numalab_linux::parse::format_list(&cpu_less)));
    }
    table.notes.push(
        "numastat counts allocations, cumulative since boot (one per allocation of any size: a 2 MiB huge page counts once), not pages and not memory accesses"
            .into(),
    );
    table
}

pub fn run(a: &TopoArgs, out: &OutputOpts) -> Result<()> {
    let root = if a.root.file_name().and_then(|n| n.to_str()) == Some("sys") && a.root.join("devices/system/node").is_dir() {
        super::machine_import::root_of(&a.root)?
    } else {
        FsRoot::at(&a.root)
    };
    let t = Topology::read(&root).context("cannot read the NUMA topology")?;
    if let Some(path) = &a.export {
        let e = to_machine(&t, &ExportOptions { name: a.name.clone(), ..Default::default() })
            .map_err(|m| anyhow::Error::new(crate::scenario::Usage(format!("{}: {m}", a.root.display()))))?;
        write_text(Some(path), &e.toml)?;
        eprintln!("wrote {} ({} estimated or adjusted fields, marked `# estimate:`)", path.display(), e.estimates.len());
    }
    let exact = out.resolved_format() == crate::output::Format::Csv;
    emit(out, &topo_json(&t, &root), &topo_table_with(&t, exact))
}
