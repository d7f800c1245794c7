//! `numalab machine measure`: this host as a machine file, by measurement (docs/calibration.md,
//! "Measuring your own machine"). The kernels and the file builder live in
//! `numalab_linux::measure`; this module chooses the nodes, shows progress and writes.

use crate::output::{write_text, Format, OutputOpts};
use anyhow::{Context, Result};
use numalab_linux::export::{to_machine, ExportOptions};
use numalab_linux::measure::build::{build, utc_date, HostId};
use numalab_linux::measure::{self, kernels, NodeSpec};
use numalab_linux::procfs::settings;
use numalab_linux::{FsRoot, Topology};
use std::time::Instant;

/// LLC assumed when sysfs does not give one [A] (docs/calibration.md).
const ASSUMED_LLC_BYTES: u64 = 32 << 20;

#[derive(clap::Args, Debug)]
pub struct MeasureArgs {
    /// Small buffers and few repetitions: seconds instead of minutes; rough numbers (the
    /// file says it was a quick measurement).
    #[arg(long)]
    pub quick: bool,
    /// Measure only these Linux node ids (comma-separated); the file describes only them.
    #[arg(long, value_delimiter = ',', value_name = "IDS")]
    pub nodes: Option<Vec<u32>>,
    /// Measure one node alone (a host with one node, or one node chosen with --nodes): the
    /// file has that one node.
    #[arg(long)]
    pub single_node: bool,
    /// Name of the measured machine.
    #[arg(long, default_value = "host")]
    pub name: String,
    /// Do not try MAP_HUGETLB (the buffers still ask for transparent huge pages).
    #[arg(long)]
    pub no_hugetlb: bool,
}

fn usage(msg: String) -> anyhow::Error {
    anyhow::Error::new(crate::scenario::Usage(msg))
}

/// The CPUs that measure on each node: the first allowed hardware thread of each core.
fn node_specs(topo: &Topology, machine: &numalab_core::machine::Machine) -> Result<Vec<NodeSpec>> {
    let allowed = kernels::allowed_cpus();
    let mut specs = Vec::new();
    for (i, node) in topo.nodes.iter().enumerate() {
        let all: Vec<u32> = node.cpus.iter().copied().filter(|c| allowed.contains(c)).collect();
        if !node.cpus.is_empty() && all.is_empty() {
            return Err(usage(format!(
                "node {}'s CPUs ({:?}) are all outside this process's CPU affinity; choose other nodes with --nodes",
                node.id, node.cpus
            )));
        }
        let siblings = |c: u32| topo.cpu(c).and_then(|x| x.siblings.clone()).unwrap_or_else(|| vec![c]);
        let mut cores: Vec<u32> = Vec::new();
        for &c in &all {
            if !cores.iter().any(|&k| siblings(k).contains(&c)) {
                cores.push(c);
            }
        }
        let chase_siblings = cores.first().map(|&c| siblings(c)).unwrap_or_default();
        specs.push(NodeSpec {
            kernel_id: node.id,
            socket: machine.nodes[i].socket,
            cpus: cores,
            chase_siblings,
            mem_bytes: node.mem_total_bytes,
        });
    }
    Ok(specs)
}

fn host_id() -> HostId {
    let root = FsRoot::host();
    let secs = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
    HostId {
        date: utc_date(secs),
        hostname: std::fs::read_to_string("/proc/sys/kernel/hostname").map(|s| s.trim().to_string()).unwrap_or_default(),
        cpu_model: settings::cpu_facts(&root).model_name.unwrap_or_default(),
        kernel_release: settings::kernel_release(&root).unwrap_or_default(),
        tool: format!("numalab machine measure {}", env!("CARGO_PKG_VERSION")),
    }
}

/// Progress on standard error, one unit per measurement step: a bar on a terminal, a line per
/// step otherwise (the style of `numalab study`'s progress).
struct StepProgress {
    bar: Option<indicatif::ProgressBar>,
    len: usize,
    start: Instant,
}

impl StepProgress {
    fn new(len: usize) -> StepProgress {
        use std::io::IsTerminal;
        let bar = std::io::stderr().is_terminal().then(|| {
            let b = indicatif::ProgressBar::new(len as u64);
            b.set_style(
                indicatif::ProgressStyle::with_template("{msg} [{bar:30}] {pos}/{len} measurements, {elapsed} elapsed")
                    .expect("valid template")
                    .progress_chars("=> "),
            );
            b
        });
        StepProgress { bar, len, start: Instant::now() }
    }

    fn step(&self, k: usize, what: &str) {
        match &self.bar {
            Some(b) => {
                b.set_position(k as u64);
                b.set_message(what.to_string());
            }
            None => eprintln!("measure: {}/{} {what} ({:.1} s)", k + 1, self.len, self.start.elapsed().as_secs_f64()),
        }
    }

    fn finish(&self) {
        if let Some(b) = &self.bar {
            b.finish_and_clear();
        }
    }
}

pub fn run(a: &MeasureArgs, out: &OutputOpts) -> Result<()> {
    if out.format == Some(Format::Csv) {
        crate::scenario::usage!("machine measure prints TOML or JSON, not CSV");
    }
    let sysfs = crate::cmd::machine_import::root_of(std::path::Path::new("/sys")).map_err(|e| usage(e.to_string()))?;
    let topo = Topology::read(&sysfs).context("cannot read the NUMA topology")?;
    let online: Vec<u32> = topo.nodes.iter().map(|n| n.id).collect();
    let topo = match &a.nodes {
        Some(ids) => {
            if ids.is_empty() {
                crate::scenario::usage!("--nodes needs at least one node id");
            }
            topo.restrict(ids).ok_or_else(|| usage(format!("--nodes {ids:?}: this host's online nodes are {online:?}")))?
        }
        None => topo,
    };
    let n = topo.nodes.len();
    if n == 1 && !a.single_node {
        if online.len() == 1 {
            crate::scenario::usage!(
                "this host has one NUMA node; nothing to measure between nodes (give --single-node to measure the one node alone)"
            );
        }
        crate::scenario::usage!("--nodes selects one node; nothing to measure between nodes (add --single-node to measure it alone)");
    }
    if n > 1 && a.single_node {
        crate::scenario::usage!("--single-node measures one node, and this host has {n}; choose it with --nodes ID");
    }
    let exported = to_machine(&topo, &ExportOptions { name: a.name.clone(), ..Default::default() }).map_err(usage)?;
    let specs = node_specs(&topo, &exported.machine)?;
    let llc = topo.cpus.iter().filter_map(|c| c.llc_bytes).max();
    let smallest = topo.nodes.iter().filter(|n| n.mem_total_bytes > 0).map(|n| n.mem_free_bytes.min(n.mem_total_bytes)).min().unwrap_or(0);
    let sizes = measure::sizes(llc.unwrap_or(ASSUMED_LLC_BYTES), smallest, a.quick, !a.no_hugetlb);
    if llc.is_none() {
        eprintln!("note: the LLC size is not readable from sysfs; buffers are sized for {} MiB", ASSUMED_LLC_BYTES >> 20);
    }
    let steps = measure::plan(&specs);
    let progress = StepProgress::new(steps.len());
    let start = Instant::now();
    let raw = measure::run(&specs, &sizes, &mut |k, s| progress.step(k, &s.label()));
    progress.finish();
    let raw = raw.map_err(|e| anyhow::Error::new(std::io::Error::other(e.to_string())).context("the measurement failed"))?;
    let ids: Vec<u32> = specs.iter().map(|s| s.kernel_id).collect();
    let (machine, text) = build(&exported.machine, &exported.estimates, &ids, &raw, &host_id(), &sizes).map_err(|e| anyhow::anyhow!(e))?;
    let bad: Vec<&str> = raw.pinning.iter().filter(|c| !c.ok()).map(|c| c.what.as_str()).collect();
    if !bad.is_empty() {
        eprintln!("warning: the kernel did not keep the pinning of {} (see [[measured.pinning]] in the file)", bad.join(", "));
    }
    let text = match out.format {
        Some(Format::Json) => serde_json::to_string_pretty(&machine)? + "\n",
        _ => text,
    };
    write_text(out.out.as_deref(), &text)?;
    let p = machine.published.as_ref();
    let lat = p.and_then(|p| p.latency_local_ns.as_ref()).map(|f| format!("local latency {:.1} ns", f.value));
    let bw = p.and_then(|p| p.stream_triad_all_gbps.as_ref()).map(|f| format!("triad {:.1} GB/s", f.value));
    eprintln!(
        "measured {n} node(s) in {:.1} s ({} pages{}): {}",
        start.elapsed().as_secs_f64(),
        raw.backing.as_str(),
        if a.quick { ", quick" } else { "" },
        [lat, bw].into_iter().flatten().collect::<Vec<_>>().join(", ")
    );
    Ok(())
}
