//! Studies (docs/study.md): a TOML file names machines × workloads × policies × a parameter
//! grid × runs; it expands into independent jobs (one simulated run each), whose results are
//! cached under a content hash of everything that determines them, so a study resumes after
//! an interruption and an extended study computes only what is new. A deterministic slice
//! (`--shard I/N`) runs part of the jobs; `merge` joins the slices into the same bytes the
//! whole study gives.

use crate::output::Table;
use crate::scenario::{resolve, tree_json, Resolved, ScenarioArgs};
use anyhow::{anyhow, bail, Context, Result};
use numalab_core::stats::Summary;
use numalab_sim::vmrun::VmSetup;
use numalab_sim::{RunMetrics, RunsSummary};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

pub const SCHEMA: &str = "numalab.study/1";

/// The `[study]` table.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StudySpec {
    /// A name for the result file's readers.
    #[serde(default)]
    pub name: String,
    pub machines: Vec<String>,
    pub workloads: Vec<String>,
    pub policies: Vec<String>,
    /// Runs per cell; run k of every cell uses the same seed (common random numbers).
    pub runs: u32,
    #[serde(default = "default_seed")]
    pub seed: u64,
    /// Footprint and access-count multiplier (as `--scale`); default 1.
    #[serde(default)]
    pub scale: Option<f64>,
    /// Threads (as `--threads`); default: the workload's own.
    #[serde(default)]
    pub threads: Option<u32>,
    /// Overrides applied to every cell (as `--set`).
    #[serde(default)]
    pub set: Vec<String>,
    /// Shorten (or lengthen) runs by the iteration count of the workload's main loop, keeping
    /// each phase as long as in the full program: one number for every workload, or a table
    /// of workload names to numbers (workloads it does not name keep their own).
    #[serde(default)]
    pub iterations: Option<Iterations>,
    /// Iteration counts for one machine, by workload, over `iterations`: the same program
    /// runs for different lengths on machines of different speed, and one study over two
    /// machines keeps each run about as long in simulated time.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub machine_iterations: BTreeMap<String, BTreeMap<String, u32>>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Iterations {
    All(u32),
    PerWorkload(BTreeMap<String, u32>),
}

impl StudySpec {
    /// The iteration count of `workload` on `machine`: the machine's own table first, then
    /// `iterations`; `None` keeps the workload's own.
    pub fn iterations_of(&self, machine: &str, workload: &str) -> Option<u32> {
        self.machine_iterations
            .get(machine)
            .and_then(|m| m.get(workload))
            .copied()
            .or_else(|| self.iterations.as_ref().and_then(|i| i.of(workload)))
    }
}

impl Iterations {
    fn of(&self, workload: &str) -> Option<u32> {
        match self {
            Iterations::All(n) => Some(*n),
            Iterations::PerWorkload(m) => m.get(workload).copied(),
        }
    }
}

/// The override that sets a single program's iteration count.
pub const ITERATIONS_KEY: &str = "workload.definition.workload.run.iterations";

fn default_seed() -> u64 {
    1
}

/// A study file: `[study]` and an optional `[grid]` of config keys to lists of values.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StudyFile {
    pub study: StudySpec,
    #[serde(default)]
    pub grid: BTreeMap<String, Vec<toml::Value>>,
    /// The VMs that `vm` and `vm:KIND` policies run the workload in: the `[hypervisor]` and
    /// `[[vm]]` tables of a `--vm` file (docs/vm.md, "VMs in a study").
    #[serde(default, skip_serializing_if = "is_default_hypervisor")]
    pub hypervisor: numalab_policy::vm::HypervisorConfig,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub vm: Vec<numalab_policy::vm::VmConfig>,
}

fn is_default_hypervisor(h: &numalab_policy::vm::HypervisorConfig) -> bool {
    *h == numalab_policy::vm::HypervisorConfig::default()
}

impl StudyFile {
    pub fn parse(text: &str, path: &str) -> Result<StudyFile> {
        let f: StudyFile = toml::from_str(text).map_err(|e| anyhow!("{path}: {}", numalab_core::one_line(&e.to_string())))?;
        let s = &f.study;
        for (what, list) in [("machines", &s.machines), ("workloads", &s.workloads), ("policies", &s.policies)] {
            if list.is_empty() {
                bail!("{path}: study.{what} must name at least one");
            }
        }
        if s.runs == 0 {
            bail!("{path}: study.runs must be at least 1");
        }
        match &s.iterations {
            Some(Iterations::All(0)) => bail!("{path}: study.iterations must be at least 1"),
            Some(Iterations::PerWorkload(m)) => {
                for (w, n) in m {
                    if !s.workloads.contains(w) {
                        bail!("{path}: study.iterations names '{w}', which is not in study.workloads");
                    }
                    if *n == 0 {
                        bail!("{path}: study.iterations.{w} must be at least 1");
                    }
                }
            }
            _ => {}
        }
        for (machine, counts) in &s.machine_iterations {
            if !s.machines.contains(machine) {
                bail!("{path}: study.machine_iterations names machine '{machine}', which is not in study.machines");
            }
            for (w, n) in counts {
                if !s.workloads.contains(w) {
                    bail!("{path}: study.machine_iterations.{machine} names '{w}', which is not in study.workloads");
                }
                if *n == 0 {
                    bail!("{path}: study.machine_iterations.{machine}.{w} must be at least 1");
                }
            }
        }
        if let Some(x) = s.scale {
            if !(x.is_finite() && x > 0.0) {
                bail!("{path}: study.scale = {x} must be a positive number");
            }
        }
        for (k, v) in &f.grid {
            if v.is_empty() {
                bail!("{path}: grid.\"{k}\" has no values");
            }
            if k == FAST_TIER_FRACTION {
                for x in v {
                    match x.as_float().or_else(|| x.as_integer().map(|i| i as f64)) {
                        Some(x) if x.is_finite() && x > 0.0 => {}
                        _ => bail!("{path}: grid.{FAST_TIER_FRACTION} = {x}: every value must be a positive number"),
                    }
                }
            }
        }
        Ok(f)
    }

    /// The VMs of the file, if it has any `[[vm]]` table.
    pub fn vm_setup(&self) -> Option<VmSetup> {
        (!self.vm.is_empty()).then(|| VmSetup { hypervisor: self.hypervisor.clone(), vm: self.vm.clone() })
    }

    /// The grid's points: every combination, the last key varying fastest. One empty point
    /// when there is no grid.
    pub fn grid_points(&self) -> Vec<BTreeMap<String, toml::Value>> {
        let mut points = vec![BTreeMap::new()];
        for (k, values) in &self.grid {
            points = points
                .into_iter()
                .flat_map(|p| {
                    values.iter().map(move |v| {
                        let mut q = p.clone();
                        q.insert(k.clone(), v.clone());
                        q
                    })
                })
                .collect();
        }
        points
    }
}

/// The grid key that sizes the fast tier from the workload (docs/study.md, "Sizing the fast
/// tier"): not a config key, but a fraction of the cell's footprint.
pub const FAST_TIER_FRACTION: &str = "fast_tier_fraction";

/// The nodes of the machine's fastest tier (the `tier-static` order, docs/policies/tier-static.md).
pub fn fast_tier_nodes(m: &numalab_core::machine::Machine) -> Vec<usize> {
    use numalab_policy::statics::tier_rank;
    let best = m.nodes.iter().map(|n| tier_rank(n.tier)).min().unwrap_or(0);
    (0..m.nodes.len()).filter(|&i| tier_rank(m.nodes[i].tier) == best).collect()
}

/// The overrides that give the fastest tier `fraction` of the program's footprint in all,
/// split evenly over its nodes, each rounded up to whole base pages.
pub fn fast_tier_sets(m: &numalab_core::machine::Machine, footprint_bytes: u64, page_bytes: u64, fraction: f64) -> Vec<String> {
    let nodes = fast_tier_nodes(m);
    let total_pages = (footprint_bytes as f64 * fraction / page_bytes as f64).ceil() as u64;
    let per_node_pages = total_pages.div_ceil(nodes.len().max(1) as u64);
    nodes.iter().map(|i| format!("machine.nodes[{i}].mem_bytes={}", per_node_pages * page_bytes)).collect()
}

/// One cell: a machine, a workload, a policy and a grid point, resolved.
pub struct Cell {
    pub machine: String,
    pub workload: String,
    pub policy: String,
    pub grid: BTreeMap<String, toml::Value>,
    pub resolved: Resolved,
    /// The VMs a `vm`/`vm:KIND` cell runs in (the policy's setup); `None` for a native cell.
    pub vm: Option<VmSetup>,
    /// Content hash of the resolved config and the numalab version.
    pub key: String,
}

/// Expand a study into resolved cells, machine-major, then workload, policy, grid point.
pub fn cells(f: &StudyFile) -> Result<Vec<Cell>> {
    let mut out = Vec::new();
    let setup = f.vm_setup();
    for machine in &f.study.machines {
        for workload in &f.study.workloads {
            for policy in &f.study.policies {
                for grid in f.grid_points() {
                    let mut set = f.study.set.clone();
                    if let Some(n) = f.study.iterations_of(machine, workload) {
                        set.push(format!("{ITERATIONS_KEY}={n}"));
                    }
                    set.extend(grid.iter().filter(|(k, _)| *k != FAST_TIER_FRACTION).map(|(k, v)| format!("{k}={v}")));
                    let mut args = ScenarioArgs {
                        machine: machine.clone(),
                        workload: Some(workload.clone()),
                        threads: f.study.threads,
                        scale: Some(f.study.scale.unwrap_or(1.0)),
                        runs: f.study.runs,
                        seed: f.study.seed,
                        jobs: None,
                        engine: None,
                        set,
                        // A study is a cached, resumable batch the user sized on purpose.
                        force: true,
                        // Per-workload iterations go in through `set` above.
                        iterations: None,
                    };
                    let vm = crate::cmd::sim::vm_setup_for(policy, setup.as_ref())
                        .with_context(|| format!("cell {machine} / {workload} / {policy} (a study gives its VMs as [[vm]] tables)"))?;
                    let resolve = |args: &ScenarioArgs| match &vm {
                        None => resolve(args, policy),
                        Some(s) => crate::cmd::sim::resolve_vm(args, policy, s),
                    };
                    let mut resolved = resolve(&args).with_context(|| format!("cell {machine} / {workload} / {policy}"))?;
                    if let Some(x) = grid.get(FAST_TIER_FRACTION) {
                        // Sized from the cell as resolved so far (its machine, its footprint at
                        // the study's scale), then resolved again with the new node sizes.
                        let fraction = x.as_float().or_else(|| x.as_integer().map(|i| i as f64)).unwrap_or(1.0);
                        let sc = &resolved.scenario;
                        args.set.extend(fast_tier_sets(&sc.machine, sc.program.footprint_bytes(), sc.program.page_bytes, fraction));
                        resolved = resolve(&args).with_context(|| format!("cell {machine} / {workload} / {policy}"))?;
                    }
                    let key = cell_key(&resolved);
                    out.push(Cell {
                        machine: machine.clone(),
                        workload: workload.clone(),
                        policy: policy.clone(),
                        grid,
                        resolved,
                        vm,
                        key,
                    });
                }
            }
        }
    }
    Ok(out)
}

/// SHA-256 of the resolved config tree (canonical: tables are ordered) and of the build: two
/// cells with the same key simulate the same thing with the same code.
fn cell_key(r: &Resolved) -> String {
    let mut h = Sha256::new();
    h.update(b"numalab-study-cell/2\n");
    h.update(build_id().as_bytes());
    h.update(b"\n");
    h.update(serde_json::to_string(&tree_json(&r.tree)).expect("a config tree serialises").as_bytes());
    format!("{:x}", h.finalize())
}

/// What identifies this build of numalab: the version and the SHA-256 of the running
/// executable. The version alone does not change between commits, and a cache filled by an
/// older simulator must not answer for a newer one; any change to the code changes the
/// executable. If the executable cannot be read (a deleted file on some systems), the version
/// alone, with a warning.
pub fn build_id() -> &'static str {
    static ID: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    ID.get_or_init(|| {
        let version = env!("CARGO_PKG_VERSION");
        let hash = std::env::current_exe().and_then(|p| {
            let mut h = Sha256::new();
            std::io::copy(&mut std::fs::File::open(p)?, &mut h)?;
            Ok(format!("{:x}", h.finalize()))
        });
        match hash {
            Ok(hash) => format!("{version}+exe.{hash}"),
            Err(e) => {
                eprintln!("warning: cannot read the numalab executable to key the study cache ({e}); keying by version {version} only");
                version.to_string()
            }
        }
    })
}

/// `I/N`: this process runs the jobs whose index modulo N is I.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shard {
    pub index: u32,
    pub count: u32,
}

impl std::str::FromStr for Shard {
    type Err = String;
    fn from_str(s: &str) -> Result<Shard, String> {
        let bad = || format!("'{s}': a shard is I/N with 0 <= I < N, e.g. 0/4");
        let (i, n) = s.split_once('/').ok_or_else(bad)?;
        let (index, count): (u32, u32) = (i.trim().parse().map_err(|_| bad())?, n.trim().parse().map_err(|_| bad())?);
        if count == 0 || index >= count {
            return Err(bad());
        }
        Ok(Shard { index, count })
    }
}

impl std::fmt::Display for Shard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

/// The jobs of a study (cell index, run index), cell-major; a shard keeps every N-th.
pub fn jobs(cells: usize, runs: u32, shard: Option<Shard>) -> Vec<(usize, u32)> {
    let all = (0..cells).flat_map(|c| (0..runs).map(move |k| (c, k)));
    all.enumerate().filter(|(i, _)| shard.is_none_or(|s| *i as u64 % s.count as u64 == s.index as u64)).map(|(_, j)| j).collect()
}

/// Where a job's result lives in the cache.
pub fn cache_path(cache: &Path, cell: &Cell, run: u32, seed: u64) -> PathBuf {
    cache.join(&cell.key).join(format!("run{run}-seed{seed}.json"))
}

/// Read a cached result; a missing or unreadable file is a miss (it is recomputed).
pub fn read_cached(path: &Path) -> Option<RunMetrics> {
    let text = std::fs::read_to_string(path).ok()?;
    serde_json::from_str(&text).ok()
}

/// Store a result: written to a temporary file and renamed, so an interrupted study never
/// leaves a half-written result behind.
pub fn write_cached(path: &Path, run: &RunMetrics) -> Result<()> {
    let dir = path.parent().expect("cache paths have a directory");
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create the cache directory {}", dir.display()))?;
    let tmp = path.with_extension(format!("tmp{}", std::process::id()));
    std::fs::write(&tmp, serde_json::to_vec(run)?).with_context(|| format!("cannot write {}", tmp.display()))?;
    std::fs::rename(&tmp, path).with_context(|| format!("cannot write {}", path.display()))
}

/// One run in a study document, with its index in the cell.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct IndexedRun {
    pub run: u32,
    #[serde(flatten)]
    pub metrics: RunMetrics,
}

/// One cell of a study document.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CellDoc {
    pub machine: String,
    pub workload: String,
    pub policy: String,
    pub grid: BTreeMap<String, toml::Value>,
    pub key: String,
    pub config: serde_json::Value,
    pub runs: Vec<IndexedRun>,
    /// Across the cell's runs; `null` when this document holds none of them (a shard).
    pub summary: Option<RunsSummary>,
}

/// `numalab.study/1`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StudyDoc {
    pub schema: String,
    pub numalab_version: String,
    pub study: StudyFile,
    /// Present only in a shard's document; `merge` removes it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shard: Option<String>,
    pub cells: Vec<CellDoc>,
}

pub fn cell_doc(cell: &Cell, mut runs: Vec<IndexedRun>) -> CellDoc {
    runs.sort_by_key(|r| r.run);
    let metrics: Vec<RunMetrics> = runs.iter().map(|r| r.metrics.clone()).collect();
    CellDoc {
        machine: cell.machine.clone(),
        workload: cell.workload.clone(),
        policy: cell.policy.clone(),
        grid: cell.grid.clone(),
        key: cell.key.clone(),
        config: tree_json(&cell.resolved.tree),
        summary: RunsSummary::of(&metrics),
        runs,
    }
}

/// Join shard documents of one study: the same study and cells, runs united by index.
pub fn merge(docs: Vec<StudyDoc>) -> Result<StudyDoc> {
    let mut docs = docs.into_iter();
    let mut out = docs.next().ok_or_else(|| anyhow!("merge needs at least one study document"))?;
    for d in docs {
        if d.schema != out.schema || d.numalab_version != out.numalab_version {
            bail!("cannot merge {} {} with {} {}", d.schema, d.numalab_version, out.schema, out.numalab_version);
        }
        if d.study != out.study {
            bail!("cannot merge documents of different studies (their [study] or [grid] tables differ)");
        }
        if d.cells.len() != out.cells.len() || d.cells.iter().zip(&out.cells).any(|(a, b)| a.key != b.key) {
            bail!("cannot merge: the documents' cells differ (same study file, other machine or workload files?)");
        }
        for (into, from) in out.cells.iter_mut().zip(d.cells) {
            for r in from.runs {
                match into.runs.iter().find(|x| x.run == r.run) {
                    Some(x) if *x != r => bail!("run {} of cell {} differs between the documents", r.run, into.key),
                    Some(_) => {}
                    None => into.runs.push(r),
                }
            }
        }
    }
    out.shard = None;
    for c in &mut out.cells {
        c.runs.sort_by_key(|r| r.run);
        let metrics: Vec<RunMetrics> = c.runs.iter().map(|r| r.metrics.clone()).collect();
        c.summary = RunsSummary::of(&metrics);
    }
    Ok(out)
}

/// Mean over runs of `f(run) / sim_time_s`.
fn mean_rate(runs: &[IndexedRun], f: impl Fn(&RunMetrics) -> u64) -> f64 {
    let rates: Vec<f64> = runs.iter().filter(|r| r.metrics.sim_time_s > 0.0).map(|r| f(&r.metrics) as f64 / r.metrics.sim_time_s).collect();
    if rates.is_empty() {
        f64::NAN
    } else {
        rates.iter().sum::<f64>() / rates.len() as f64
    }
}

/// One row per cell: what a reader of a placement study looks at first.
pub fn table(doc: &StudyDoc) -> Table {
    let grid_keys: Vec<String> = doc.study.grid.keys().cloned().collect();
    let mut headers: Vec<String> = ["machine", "workload", "policy"].iter().map(|s| s.to_string()).collect();
    headers.extend(grid_keys.iter().cloned());
    headers.extend(
        [
            "runs",
            "mean_s",
            "vs_first",
            "cv_%",
            "nmmd_%",
            "local_ratio",
            "local_ratio_sd",
            "xnode_migs_per_s",
            "idle_balance_per_s",
            "load_balance_per_s",
            "wakeup_per_s",
            "numa_move_per_s",
            "numa_swap_per_s",
            "cluster_per_s",
            "policy_per_s",
            "hint_faults_per_s",
            "page_migs_per_s",
            "tlb_shootdowns_per_s",
            "pingpong_%",
        ]
        .iter()
        .map(|s| s.to_string()),
    );
    let mut t = Table::new(headers);
    let f = |x: f64, d: usize| if x.is_finite() { format!("{x:.d$}") } else { "n/a".into() };
    // `vs_first`: mean time over that of the study's first policy in the same machine, workload
    // and grid point; its geometric mean over workloads per machine and policy goes in a note.
    let first_policy = doc.study.study.policies.first();
    let mean_of = |c: &CellDoc| c.summary.as_ref().map(|s| s.exec_time_s.mean);
    let baseline = |c: &CellDoc| {
        doc.cells
            .iter()
            .find(|b| Some(&b.policy) == first_policy && b.machine == c.machine && b.workload == c.workload && b.grid == c.grid)
            .and_then(mean_of)
    };
    let mut geo: BTreeMap<(String, String), (f64, u32)> = BTreeMap::new();
    for c in &doc.cells {
        let mut row = vec![c.machine.clone(), c.workload.clone(), c.policy.clone()];
        // A string value as itself (`fast`), not as TOML (`"fast"`), which a CSV would quote again.
        row.extend(grid_keys.iter().map(|k| {
            c.grid.get(k).map_or(String::new(), |v| match v {
                toml::Value::String(s) => s.clone(),
                v => v.to_string(),
            })
        }));
        let Some(s) = &c.summary else {
            row.push("0".into());
            row.extend(std::iter::repeat_n("n/a".to_string(), 18));
            t.row(row);
            continue;
        };
        let by = |g: fn(&numalab_sim::sched::MigrationCounts) -> u64| mean_rate(&c.runs, |m| g(&m.thread_migrations_by_cause));
        let xnode: u64 = c.runs.iter().map(|r| r.metrics.thread_migrations_by_cause.cross_node()).sum();
        let returns: u64 = c.runs.iter().map(|r| r.metrics.pingpong_returns).sum();
        let vs_first = baseline(c).map_or(f64::NAN, |b| s.exec_time_s.mean / b);
        if vs_first.is_finite() && vs_first > 0.0 {
            let g = geo.entry((c.machine.clone(), c.policy.clone())).or_insert((0.0, 0));
            *g = (g.0 + vs_first.ln(), g.1 + 1);
        }
        let locals: Vec<f64> = c.runs.iter().filter_map(|r| r.metrics.local_access_ratio).collect();
        let local_sd = Summary::of(&locals).map_or(f64::NAN, |x| x.stddev);
        row.extend([
            s.runs.to_string(),
            f(s.exec_time_s.mean, 6),
            f(vs_first, 3),
            f(100.0 * s.exec_time_s.cv, 2),
            f(100.0 * s.exec_time_s.nmmd, 2),
            s.local_access_ratio.map_or("n/a".into(), |x| format!("{x:.3}")),
            f(local_sd, 4),
            f(s.thread_migrations_per_s, 3),
            f(by(|m| m.idle_balance.cross_node), 3),
            f(by(|m| m.load_balance.cross_node), 3),
            f(by(|m| m.wakeup.cross_node), 3),
            f(by(|m| m.numa_move.cross_node), 3),
            f(by(|m| m.numa_swap.cross_node), 3),
            f(by(|m| m.cluster_move.cross_node + m.cluster_swap.cross_node), 3),
            f(by(|m| m.policy.cross_node), 3),
            f(s.hint_faults_per_s, 1),
            f(s.page_migrations_per_s, 1),
            f(mean_rate(&c.runs, |m| m.tlb_shootdowns), 1),
            if xnode > 0 { format!("{:.1}", 100.0 * returns as f64 / xnode as f64) } else { "n/a".into() },
        ]);
        t.row(row);
    }
    t.notes.push(format!(
        "{} ({} cells, {} runs each, seed {}); *_per_s columns are cross-node thread migrations per simulated second by cause; pingpong_% = returns / cross-node migrations",
        if doc.study.study.name.is_empty() { "study" } else { &doc.study.study.name },
        doc.cells.len(),
        doc.study.study.runs,
        doc.study.study.seed
    ));
    if let Some(first) = first_policy {
        for ((machine, policy), (log_sum, n)) in &geo {
            t.notes.push(format!(
                "{machine} / {policy}: geometric mean of vs_first (mean time / {first}'s) over {n} cells: {:.3}",
                (log_sum / *n as f64).exp()
            ));
        }
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_grid_is_a_cartesian_product_last_key_fastest() {
        let f = StudyFile::parse(
            "[study]\nmachines=['a']\nworkloads=['w']\npolicies=['p']\nruns=1\n[grid]\n'x.a' = [1, 2]\n'x.b' = ['u', 'v', 'w']\n",
            "s.toml",
        )
        .unwrap();
        let p = f.grid_points();
        assert_eq!(p.len(), 6);
        assert_eq!(p[1]["x.a"], toml::Value::Integer(1));
        assert_eq!(p[1]["x.b"], toml::Value::String("v".into()));
        assert_eq!(p[3]["x.a"], toml::Value::Integer(2));
    }

    #[test]
    fn the_fast_tier_is_split_evenly_and_rounded_up_to_pages() {
        let cxl = crate::scenario::load_machine("cxl-expander").unwrap();
        // 4,689 pages at 25 %: 1,172.25 -> 1,173 pages in all -> 587 per DRAM node (0 and 1).
        let sets = fast_tier_sets(&cxl, 4689 * 4096, 4096, 0.25);
        assert_eq!(sets, ["machine.nodes[0].mem_bytes=2404352", "machine.nodes[1].mem_bytes=2404352"]);
        let hbm = crate::scenario::load_machine("xeon-max-hbm-flat").unwrap();
        assert_eq!(fast_tier_nodes(&hbm), [2, 3], "the HBM nodes, not the DDR5 ones");
        let sets = fast_tier_sets(&hbm, 10 * 4096, 4096, 1.0);
        assert_eq!(sets, ["machine.nodes[2].mem_bytes=20480", "machine.nodes[3].mem_bytes=20480"]);
        let knl = crate::scenario::load_machine("knl-7250-flat").unwrap();
        assert_eq!(fast_tier_sets(&knl, 16896 * 4096, 4096, 0.5), ["machine.nodes[1].mem_bytes=34603008"]);
    }

    #[test]
    fn a_fast_tier_fraction_must_be_positive() {
        let head = "[study]\nmachines=['m']\nworkloads=['a']\npolicies=['p']\nruns=1\n[grid]\n";
        for bad in ["0.0", "-1", "'half'"] {
            let e = StudyFile::parse(&format!("{head}fast_tier_fraction = [0.5, {bad}]\n"), "s.toml").unwrap_err();
            assert!(e.to_string().starts_with("s.toml: grid.fast_tier_fraction = "), "{e}");
            assert!(e.to_string().ends_with(": every value must be a positive number"), "{e}");
        }
        assert!(StudyFile::parse(&format!("{head}fast_tier_fraction = [0.25, 1]\n"), "s.toml").is_ok());
    }

    #[test]
    fn shards_partition_the_jobs() {
        let all = jobs(3, 4, None);
        assert_eq!(all.len(), 12);
        let mut union: Vec<_> = (0..5).flat_map(|i| jobs(3, 4, Some(Shard { index: i, count: 5 }))).collect();
        union.sort();
        assert_eq!(union, all);
        assert_eq!("2/4".parse::<Shard>().unwrap(), Shard { index: 2, count: 4 });
        for bad in ["4/4", "1", "a/2", "0/0"] {
            assert!(bad.parse::<Shard>().unwrap_err().contains("a shard is I/N"), "{bad}");
        }
    }

    #[test]
    fn a_machine_s_own_iterations_come_before_the_study_s() {
        let head = "[study]\nmachines = [\"m1\", \"m2\"]\nworkloads = [\"a\", \"b\"]\npolicies = [\"p\"]\nruns = 1\n";
        let f =
            StudyFile::parse(&format!("{head}iterations = {{ a = 3 }}\nmachine_iterations = {{ m2 = {{ a = 9, b = 4 }} }}\n"), "s.toml")
                .unwrap();
        assert_eq!(f.study.iterations_of("m1", "a"), Some(3));
        assert_eq!(f.study.iterations_of("m1", "b"), None);
        assert_eq!(f.study.iterations_of("m2", "a"), Some(9));
        assert_eq!(f.study.iterations_of("m2", "b"), Some(4));
        let e = StudyFile::parse(&format!("{head}machine_iterations = {{ m3 = {{ a = 1 }} }}\n"), "s.toml").unwrap_err();
        assert_eq!(e.to_string(), "s.toml: study.machine_iterations names machine 'm3', which is not in study.machines");
        let e = StudyFile::parse(&format!("{head}machine_iterations = {{ m1 = {{ c = 1 }} }}\n"), "s.toml").unwrap_err();
        assert_eq!(e.to_string(), "s.toml: study.machine_iterations.m1 names 'c', which is not in study.workloads");
        let e = StudyFile::parse(&format!("{head}machine_iterations = {{ m1 = {{ a = 0 }} }}\n"), "s.toml").unwrap_err();
        assert_eq!(e.to_string(), "s.toml: study.machine_iterations.m1.a must be at least 1");
    }

    #[test]
    fn iterations_are_one_number_or_per_workload() {
        let head = "[study]\nmachines=['m']\nworkloads=['a', 'b']\npolicies=['p']\nruns=1\n";
        let f = StudyFile::parse(&format!("{head}iterations = 7\n"), "s.toml").unwrap();
        assert_eq!(f.study.iterations.unwrap().of("b"), Some(7));
        let f = StudyFile::parse(&format!("{head}iterations = {{ a = 3 }}\n"), "s.toml").unwrap();
        let it = f.study.iterations.unwrap();
        assert_eq!((it.of("a"), it.of("b")), (Some(3), None));
        let e = StudyFile::parse(&format!("{head}iterations = {{ c = 3 }}\n"), "s.toml").unwrap_err();
        assert_eq!(e.to_string(), "s.toml: study.iterations names 'c', which is not in study.workloads");
        let e = StudyFile::parse(&format!("{head}iterations = 0\n"), "s.toml").unwrap_err();
        assert_eq!(e.to_string(), "s.toml: study.iterations must be at least 1");
    }

    #[test]
    fn bad_study_files_get_one_clear_sentence() {
        let e = StudyFile::parse("[study]\nmachines=[]\nworkloads=['w']\npolicies=['p']\nruns=1\n", "s.toml").unwrap_err();
        assert_eq!(e.to_string(), "s.toml: study.machines must name at least one");
        let e = StudyFile::parse("[study]\nmachines=['m']\nworkloads=['w']\npolicies=['p']\nruns=0\n", "s.toml").unwrap_err();
        assert_eq!(e.to_string(), "s.toml: study.runs must be at least 1");
        let e = StudyFile::parse("[study]\nmachines=['m']\nworkloads=['w']\npolicies=['p']\nruns=1\nrnus=2\n", "s.toml").unwrap_err();
        assert!(e.to_string().contains("unknown field `rnus`"), "{e}");
        assert!(e.to_string().starts_with("s.toml: "), "{e}");
    }
}
