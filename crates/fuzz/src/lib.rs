//! Fuzz targets: one entry point per parser a user's text reaches. Each takes raw bytes and
//! returns `Ok` or the parser's error message; a panic is the bug the fuzzer looks for.
//! `numalab-fuzz` mutates seed inputs through them; `tests/corpus.rs` replays the
//! regression corpus (`corpus/<target>/`) on every `cargo test`.

use numalab_core::Machine;
use numalab_workload::{CompileOptions, WorkloadSpec};
use std::path::Path;

/// A fuzz target: name, what it covers, entry point.
pub struct Target {
    pub name: &'static str,
    pub covers: &'static str,
    pub run: fn(&[u8]) -> Result<(), String>,
}

pub const TARGETS: &[Target] = &[
    Target { name: "machine", covers: "machine TOML files (Machine::from_toml_str and validation)", run: machine },
    Target { name: "workload", covers: "workload TOML files, parsed and compiled for a preset machine", run: workload },
    Target { name: "mix", covers: "mix TOML files, parsed and compiled", run: workload },
    Target { name: "classes", covers: "page-class files of `model` (ClassSet::from_toml_str)", run: classes },
    Target {
        name: "set",
        covers: "`--set KEY=VALUE` lines applied to the resolved tree, then machine, workload and [sim] rebuilt",
        run: set,
    },
    Target { name: "sysfs", covers: "sysfs readers: cpulists, node meminfo, distance, numastat, cache sizes", run: sysfs },
    Target {
        name: "topology",
        covers:
            "a whole sysfs tree (`=== path` sections) read by Topology::read and exported as a machine (`machine import`, `topo --export`)",
        run: topology,
    },
    Target { name: "procfs", covers: "procfs readers: numa_maps, vmstat, sched, cpuinfo", run: procfs },
    Target { name: "profile", covers: "profile JSON documents (numalab.profile/1) and their diff", run: profile },
];

pub fn target(name: &str) -> Option<&'static Target> {
    TARGETS.iter().find(|t| t.name == name)
}

fn text(data: &[u8]) -> Result<&str, String> {
    std::str::from_utf8(data).map_err(|e| format!("not UTF-8: {e}"))
}

fn machine(data: &[u8]) -> Result<(), String> {
    let m = Machine::from_toml_str(text(data)?, "fuzz").map_err(|e| e.to_string())?;
    // A validated machine must serialise and load back.
    Machine::from_toml_str(&m.to_toml_string(), "round-trip").map_err(|e| format!("round trip failed: {e}"))?;
    let _ = m.interconnect();
    Ok(())
}

fn fuzz_machine() -> Machine {
    numalab_core::machine::presets::load("server-a-4n").expect("preset")
}

fn compile(spec: &WorkloadSpec, machine: &Machine, scale: f64) -> Result<(), String> {
    let p = numalab_workload::compile_spec(spec, "fuzz", machine, &CompileOptions { threads: None, scale }).map_err(|e| e.to_string())?;
    let _ = p.estimated_refs();
    let _ = p.estimated_compute();
    Ok(())
}

fn workload(data: &[u8]) -> Result<(), String> {
    let spec = WorkloadSpec::parse_checked(text(data)?, "fuzz").map_err(|e| e.to_string())?;
    compile(&spec, &fuzz_machine(), 0.001)
}

fn classes(data: &[u8]) -> Result<(), String> {
    numalab_model::classes::ClassSet::from_toml_str(text(data)?, "fuzz").map(|_| ()).map_err(|e| e.to_string())
}

/// Each line is one `--set`; the tree is the one `numalab sim` builds for its defaults.
fn set(data: &[u8]) -> Result<(), String> {
    let machine = fuzz_machine();
    let wl = WorkloadSpec::parse(numalab_workload::presets::text("master-slave").map_err(|e| e.to_string())?, "preset")
        .map_err(|e| e.to_string())?;
    let mut root = toml::Table::new();
    root.insert("machine".into(), toml::Value::try_from(&machine).map_err(|e| e.to_string())?);
    let mut w = toml::Table::new();
    w.insert("scale".into(), toml::Value::Float(0.001));
    w.insert("definition".into(), toml::Value::try_from(&wl).map_err(|e| e.to_string())?);
    root.insert("workload".into(), toml::Value::Table(w));
    root.insert("sim".into(), toml::Value::try_from(numalab_sim::SimConfig::default()).map_err(|e| e.to_string())?);
    let mut tree = toml::Value::Table(root);
    for line in text(data)?.lines().take(64) {
        numalab_core::overrides::apply(&mut tree, line).map_err(|e| e.to_string())?;
    }
    let m = Machine::from_toml_value(tree["machine"].clone(), "machine").map_err(|e| e.to_string())?;
    let sim: numalab_sim::SimConfig = tree["sim"].clone().try_into().map_err(|e: toml::de::Error| e.to_string())?;
    sim.validate()?;
    let w = tree.get("workload").and_then(|w| w.get("definition")).cloned().ok_or("no definition")?;
    let spec = WorkloadSpec::from_value(w, "workload").map_err(|e| e.to_string())?;
    let scale = match tree.get("workload").and_then(|w| w.get("scale")) {
        Some(toml::Value::Float(f)) => *f,
        Some(toml::Value::Integer(i)) => *i as f64,
        _ => return Err("workload.scale must be a number".into()),
    };
    compile(&spec, &m, scale)
}

/// The first line picks the reader, the rest is the file's text.
fn sysfs(data: &[u8]) -> Result<(), String> {
    let t = text(data)?;
    let (which, body) = t.split_once('\n').unwrap_or((t, ""));
    let p = Path::new("fuzz");
    let e = |e: numalab_linux::LinuxError| e.to_string();
    match which.trim() {
        "cpulist" => {
            let l = numalab_linux::parse::parse_list(body, p, "cpulist").map_err(e)?;
            let back = numalab_linux::parse::parse_list(&numalab_linux::parse::format_list(&l), p, "cpulist").map_err(e)?;
            if back != l {
                panic!("cpulist does not round-trip: {l:?} vs {back:?}");
            }
        }
        "meminfo" => drop(numalab_linux::sysfs::node::parse_node_meminfo(body, p).map_err(e)?),
        "distance" => drop(numalab_linux::sysfs::node::parse_distance(body, p).map_err(e)?),
        "numastat" => drop(numalab_linux::parse::parse_key_values(body, p).map_err(e)?),
        "cache" => drop(numalab_linux::sysfs::cpu::parse_cache_size(body, p).map_err(e)?),
        _ => {
            // Unknown selector: every reader on the whole text.
            let _ = numalab_linux::parse::parse_list(t, p, "cpulist");
            let _ = numalab_linux::sysfs::node::parse_node_meminfo(t, p);
            let _ = numalab_linux::sysfs::node::parse_distance(t, p);
            let _ = numalab_linux::parse::parse_key_values(t, p);
            let _ = numalab_linux::sysfs::cpu::parse_cache_size(t, p);
        }
    }
    Ok(())
}

fn procfs(data: &[u8]) -> Result<(), String> {
    let t = text(data)?;
    let (which, body) = t.split_once('\n').unwrap_or((t, ""));
    let p = Path::new("fuzz");
    let e = |e: numalab_linux::LinuxError| e.to_string();
    match which.trim() {
        "numa_maps" => {
            let entries = numalab_linux::procfs::numa_maps::parse_numa_maps(body, p).map_err(e)?;
            let _ = numalab_linux::procfs::numa_maps::pages_per_node(&entries);
        }
        "vmstat" => drop(numalab_linux::procfs::vmstat::parse_vmstat(body, p).map_err(e)?),
        "sched" => drop(numalab_linux::procfs::sched::parse_sched_numa(body, p).map_err(e)?),
        "cpuinfo" => drop(numalab_linux::procfs::settings::parse_cpuinfo(body)),
        _ => {
            let _ = numalab_linux::procfs::numa_maps::parse_numa_maps(t, p).map(|v| numalab_linux::procfs::numa_maps::pages_per_node(&v));
            let _ = numalab_linux::procfs::vmstat::parse_vmstat(t, p);
            let _ = numalab_linux::procfs::sched::parse_sched_numa(t, p);
            let _ = numalab_linux::procfs::settings::parse_cpuinfo(t);
        }
    }
    Ok(())
}

fn profile(data: &[u8]) -> Result<(), String> {
    let r: numalab_core::profile::ProfileReport = serde_json::from_slice(data).map_err(|e| e.to_string())?;
    let d = numalab_core::profile::diff(&r, &r);
    serde_json::to_string(&d).map_err(|e| e.to_string())?;
    Ok(())
}

/// `=== relative/path` lines start files of a sysfs tree under a scratch root; the tree is
/// read as `machine import` reads it and exported.
fn topology(data: &[u8]) -> Result<(), String> {
    let t = text(data)?;
    let dir = std::env::temp_dir().join(format!("numalab-fuzz-topology-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let mut files = 0;
    for section in t.split("=== ").skip(1) {
        let (path, body) = section.split_once('\n').unwrap_or((section, ""));
        let path = path.trim();
        if path.is_empty() || path.starts_with('/') || path.split('/').any(|c| c == ".." || c.is_empty()) || files > 256 {
            continue;
        }
        let p = dir.join(path);
        if let Some(parent) = p.parent() {
            if std::fs::create_dir_all(parent).is_err() {
                continue;
            }
        }
        let _ = std::fs::write(&p, body);
        files += 1;
    }
    let root = numalab_linux::FsRoot::at(&dir);
    let r = numalab_linux::Topology::read(&root)
        .map_err(|e| e.to_string())
        .and_then(|topo| numalab_linux::export::to_machine(&topo, &numalab_linux::export::ExportOptions::default()).map(|_| ()));
    let _ = std::fs::remove_dir_all(&dir);
    r
}
