//! Building a simulation scenario from command-line choices: presets or files, `--set`
//! overrides on the resolved TOML tree, and the resolved config every result file carries.

use anyhow::{anyhow, bail, Context, Result};
use numalab_core::machine::presets as machine_presets;
use numalab_core::Machine;
use numalab_sim::{Scenario, SimConfig};
use numalab_workload::{presets as workload_presets, CompileOptions, WorkloadSpec};
use std::path::Path;
use std::sync::Arc;
use toml::Value;

/// Options shared by `sim` and `compare`.
#[derive(Clone, Debug, clap::Args)]
pub struct ScenarioArgs {
    /// Machine preset name (see `numalab list machines`) or a machine TOML file.
    #[arg(long, default_value = "server-a-4n")]
    pub machine: String,
    /// Workload preset name (see `numalab list workloads`) or a workload TOML file
    /// [default: master-slave].
    #[arg(long)]
    pub workload: Option<String>,
    /// Threads (default: the workload's own, usually one per core of the machine).
    #[arg(long)]
    pub threads: Option<u32>,
    /// Multiply the footprint and access counts, e.g. 0.05 for a quick look
    /// [default: 0.02 for master-slave, named or not; 1 for every other workload].
    #[arg(long)]
    pub scale: Option<f64>,
    /// Independent runs, each with its own seed derived from --seed.
    #[arg(long, default_value_t = 10)]
    pub runs: u32,
    /// Master seed: same seed and inputs give bit-identical results.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Parallel runs (default: all cores; more than the CPU count is capped, with a note).
    /// Results do not depend on it.
    #[arg(long)]
    pub jobs: Option<usize>,
    /// Simulator engine: `fast` charges random references by expected per-node counts and
    /// steady stretches in one step, `exact` draws and charges every reference (the reference,
    /// several times slower) (docs/simulator.md, "The fast engine"; the two compared in
    /// docs/results/fast-vs-exact.md).
    /// The same as `--set sim.engine=ENGINE`; a `--set sim.engine=` given too wins
    /// [default: the config's, `fast`].
    #[arg(long, value_parser = ["exact", "fast"])]
    pub engine: Option<String>,
    /// Override any key of the resolved config, e.g. machine.nodes[2].mem_bw_gbps=40,
    /// sim.epoch_us=10, policy.nodes=[0,1], workload.definition.workload.run.iterations=5.
    /// `policy.NAME.key=value` sets a key of one policy only (for `compare`).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub set: Vec<String>,
    /// Run even when the work estimate is above the limit (docs/simulator-limits.md).
    #[arg(long)]
    pub force: bool,
    /// Run N iterations of the workload's main loop instead of its own count: shortens a run
    /// while every phase keeps its full length and barriers come as often as in the full
    /// program (unlike --scale, which shrinks phases and so inflates per-second OS rates).
    #[arg(long, value_name = "N")]
    pub iterations: Option<u32>,
}

/// The workload of the built-in default comparison, and the scale that keeps it to seconds.
pub const DEFAULT_WORKLOAD: &str = "master-slave";
pub const DEFAULT_WORKLOAD_SCALE: f64 = 0.02;

impl ScenarioArgs {
    pub fn workload(&self) -> &str {
        self.workload.as_deref().unwrap_or(DEFAULT_WORKLOAD)
    }

    /// The scale: `--scale`, else 0.02 for master-slave (whether or not `--workload` names
    /// it, so naming the default changes nothing), else 1.
    pub fn scale(&self) -> f64 {
        self.scale.unwrap_or(if self.workload() == DEFAULT_WORKLOAD { DEFAULT_WORKLOAD_SCALE } else { 1.0 })
    }
}

/// A preset name, or a path when it ends in .toml or names an existing file.
fn is_path(s: &str) -> bool {
    s.ends_with(".toml") || s.contains('/') || Path::new(s).is_file()
}

/// Read a user file (machine, workload, classes, profile JSON), refusing one larger than
/// `numalab_linux::root::MAX_USER_FILE_BYTES` and text that is not UTF-8.
pub fn read_user_file(path: impl AsRef<Path>) -> Result<String> {
    read_user_file_as(path, "")
}

/// [`read_user_file`], naming what the file is (`"machine file "`) in the error.
pub fn read_user_file_as(path: impl AsRef<Path>, what: &str) -> Result<String> {
    let path = path.as_ref();
    numalab_linux::root::read_text_bounded(path, numalab_linux::root::MAX_USER_FILE_BYTES)
        .map_err(|e| anyhow!(Usage(format!("cannot read {what}{}: {e}", path.display()))))
}

fn read(path: &str) -> Result<String> {
    read_user_file(path)
}

/// An error in what the user asked for (exit status 2); everything else is a runtime
/// failure (exit status 1).
#[derive(Debug)]
pub struct Usage(pub String);

impl std::fmt::Display for Usage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Usage {}

/// `bail!` for usage errors.
macro_rules! usage {
    ($($t:tt)*) => { return Err(anyhow::Error::new($crate::scenario::Usage(format!($($t)*)))) };
}
pub(crate) use usage;

/// `(alias, policy, settings the alias implies)`.
pub type PolicyAlias = (&'static str, &'static str, &'static [(&'static str, &'static str)]);

/// numactl's policy names, accepted as aliases (README.md, "Policies"):
/// `(alias, policy, extra settings)`.
pub const POLICY_ALIASES: &[PolicyAlias] = &[
    ("interleave", "round-4k", &[]),
    ("membind", "bind", &[]),
    ("localalloc", "first-touch", &[("fallback", "distance")]),
    ("local", "first-touch", &[("fallback", "distance")]),
];

/// A policy and the settings an alias implies.
pub type CanonicalPolicy = (&'static str, Vec<(&'static str, &'static str)>);

/// A registered policy name, or the policy a numactl name stands for, with the settings
/// the alias implies.
pub fn canonical_policy(name: &str) -> Result<CanonicalPolicy> {
    if let Some((_, p, extra)) = POLICY_ALIASES.iter().find(|(a, _, _)| *a == name) {
        return Ok((numalab_policy::find(p)?.name, extra.to_vec()));
    }
    numalab_policy::find(name).map(|e| (e.name, Vec::new())).map_err(|e| anyhow!(Usage(e.to_string())))
}

pub fn load_machine(spec: &str) -> Result<Machine> {
    if is_path(spec) {
        Ok(Machine::from_toml_str(&read(spec)?, spec)?)
    } else {
        Ok(machine_presets::load(spec)?)
    }
}

/// A workload or mix, from a preset name or a file.
pub fn load_workload(spec: &str) -> Result<WorkloadSpec> {
    if is_path(spec) {
        Ok(WorkloadSpec::parse_checked(&read(spec)?, spec)?)
    } else {
        Ok(WorkloadSpec::parse(workload_presets::text(spec)?, &format!("preset:{spec}"))?)
    }
}

fn to_value<T: serde::Serialize>(v: &T) -> Result<Value> {
    Value::try_from(v).map_err(|e| anyhow!("internal: cannot serialise config: {e}"))
}

/// The fully resolved configuration of a simulation: the tree users override and result
/// files carry.
pub struct Resolved {
    pub tree: Value,
    pub scenario: Scenario,
}

/// Resolve machine, workload, policy and simulator settings, apply `--set`, and compile.
pub fn resolve(args: &ScenarioArgs, policy: &str) -> Result<Resolved> {
    let machine = load_machine(&args.machine)?;
    let workload = load_workload(args.workload())?;
    let alias = policy;
    let (policy, extra) = canonical_policy(alias)?;
    let mut policy_table = toml::Table::new();
    policy_table.insert("name".into(), Value::String(policy.into()));
    for (k, v) in extra {
        policy_table.insert(k.into(), Value::String(v.into()));
    }
    let mut wl = toml::Table::new();
    wl.insert("source".into(), Value::String(args.workload().to_string()));
    wl.insert("scale".into(), Value::Float(args.scale()));
    if let Some(t) = args.threads {
        wl.insert("threads".into(), Value::Integer(t as i64));
    }
    wl.insert("definition".into(), to_value(&workload)?);
    let mut root = toml::Table::new();
    root.insert("machine".into(), to_value(&machine)?);
    root.insert("workload".into(), Value::Table(wl));
    root.insert("policy".into(), Value::Table(policy_table));
    root.insert("sim".into(), to_value(&SimConfig::default())?);
    let mut tree = Value::Table(root);
    if let Some(n) = args.iterations {
        if n == 0 {
            usage!("--iterations must be at least 1");
        }
        if tree.get("workload").and_then(|w| w.get("definition")).and_then(|d| d.get("workload")).is_none() {
            usage!("--iterations applies to a single program; set each program's run.iterations in the mix file instead");
        }
        numalab_core::overrides::apply(&mut tree, &format!("workload.definition.workload.run.iterations={n}"))?;
    }
    if let Some(engine) = &args.engine {
        numalab_core::overrides::apply(&mut tree, &format!("sim.engine={engine}"))?;
    }
    for s in &args.set {
        if let Some(s) = policy_scoped(s, policy).or_else(|| policy_scoped(s, alias)) {
            numalab_core::overrides::apply(&mut tree, &s)?;
        }
    }
    let source = tree.get("workload").and_then(|w| w.get("source")).and_then(Value::as_str);
    if source != Some(args.workload()) {
        usage!(
            "--set workload.source: the source is recorded from --workload ('{}'); choose the workload with --workload instead",
            args.workload()
        );
    }
    let resolved = from_tree(tree)?;
    let est = numalab_sim::estimate::Estimate::of(&resolved.scenario);
    if !args.force {
        est.check(args.runs).map_err(Usage)?;
    }
    if !args.force && est.work_units * args.runs.max(1) as f64 > numalab_sim::estimate::NOTE_WORK_UNITS {
        eprintln!("note: {policy}: about {:.1e} references per run, {} runs; this takes a while", est.refs as f64, args.runs);
    }
    Ok(resolved)
}

/// `policy.NAME.key=v` applies to policy NAME only (so `compare` can configure each policy);
/// `None` when it names another registered policy. Everything else applies as written.
fn policy_scoped(set: &str, policy: &str) -> Option<String> {
    let Some(rest) = set.strip_prefix("policy.") else { return Some(set.to_string()) };
    let (first, tail) = rest.split_once('.').unwrap_or((rest, ""));
    let first = first.split(['=', '[']).next().unwrap_or(first);
    if canonical_policy(first).is_err() || tail.is_empty() {
        return Some(set.to_string());
    }
    (first == policy).then(|| format!("policy.{tail}"))
}

/// The `--set policy.NAME.key=v` settings whose NAME is a policy, but none of `run` (the
/// policies this command runs, as given): each is ignored, as `policy_scoped` drops it. A
/// combined policy has a table of its own (`policy.first-touch+carrefour.KEY`), so
/// `policy.carrefour.KEY` does not reach Carrefour's part of it; the commands say so on
/// standard error rather than ignore the setting without a word.
pub fn sets_for_other_policies<'a>(sets: &'a [String], run: &[&str]) -> Vec<(&'a str, String)> {
    let run: Vec<String> =
        run.iter().flat_map(|p| [p.to_string(), canonical_policy(p).map(|(c, _)| c.to_string()).unwrap_or_default()]).collect();
    sets.iter()
        .filter_map(|set| {
            let rest = set.strip_prefix("policy.")?;
            let (first, tail) = rest.split_once('.')?;
            let first = first.split(['=', '[']).next().unwrap_or(first);
            let named = !tail.is_empty() && canonical_policy(first).is_ok() && !run.iter().any(|r| r == first);
            named.then(|| (set.as_str(), first.to_string()))
        })
        .collect()
}

/// Say on standard error which `--set policy.NAME.…` settings name no policy of this command.
pub fn note_sets_for_other_policies(sets: &[String], run: &[&str]) {
    for (set, name) in sets_for_other_policies(sets, run) {
        // A combined policy that has NAME as a part: its keys go under its own name.
        let hint = match run.iter().find(|r| r.split('+').any(|part| part == name)) {
            Some(combined) => format!("; the keys of '{combined}' go under policy.{combined}.KEY"),
            None => String::new(),
        };
        eprintln!("note: --set {set}: policy '{name}' is not run here ({}), so the setting is ignored{hint}", run.join(", "));
    }
}

fn take_table(tree: &Value, key: &str) -> Result<Value> {
    tree.get(key).cloned().ok_or_else(|| anyhow!("the config has no [{key}] table"))
}

fn from_tree(tree: Value) -> Result<Resolved> {
    if let Some(t) = tree.as_table() {
        for k in t.keys() {
            if !["machine", "workload", "policy", "sim"].contains(&k.as_str()) {
                bail!("--set: unknown top-level key '{k}' (valid: machine, workload, policy, sim)");
            }
        }
    }
    let machine = Machine::from_toml_value(take_table(&tree, "machine")?, "machine (after --set)")?;
    let wl = take_table(&tree, "workload")?;
    let wl = wl.as_table().ok_or_else(|| anyhow!("[workload] must be a table"))?;
    for k in wl.keys() {
        if !["source", "scale", "threads", "definition"].contains(&k.as_str()) {
            bail!("--set: unknown key 'workload.{k}' (valid: source, scale, threads, definition)");
        }
    }
    let scale = match wl.get("scale") {
        Some(Value::Float(f)) => *f,
        Some(Value::Integer(i)) => *i as f64,
        _ => bail!("workload.scale must be a number"),
    };
    let threads = match wl.get("threads") {
        None => None,
        Some(Value::Integer(i)) if *i >= 0 && *i <= u32::MAX as i64 => Some(*i as u32),
        Some(v) => bail!("workload.threads = {v}: expected a whole number"),
    };
    let source = wl.get("source").and_then(Value::as_str).unwrap_or("workload").to_string();
    let definition = wl.get("definition").cloned().ok_or_else(|| anyhow!("[workload.definition] is missing"))?;
    let definition = WorkloadSpec::from_value(definition, &format!("workload {source} (after --set)"))?;
    let program = numalab_workload::compile_spec(&definition, &source, &machine, &CompileOptions { threads, scale })?;
    let mut policy = take_table(&tree, "policy")?.as_table().cloned().ok_or_else(|| anyhow!("[policy] must be a table"))?;
    let name = policy.remove("name").and_then(|v| v.as_str().map(String::from)).ok_or_else(|| anyhow!("policy.name is missing"))?;
    let (canonical, extra) = canonical_policy(&name)?;
    for (k, v) in extra {
        policy.entry(k.to_string()).or_insert_with(|| Value::String(v.into()));
    }
    let name = canonical.to_string();
    let entry = numalab_policy::find(&name)?;
    let sim: SimConfig =
        numalab_core::from_toml_tree(take_table(&tree, "sim")?).map_err(|message| anyhow!("[sim] (after --set): {message}"))?;
    let scenario = Scenario { machine: Arc::new(machine), program: Arc::new(program), policy: entry, policy_config: policy, sim };
    scenario.check()?;
    // Record the policy's resolved settings (defaults filled in) in the tree.
    let mut tree = tree;
    let mut resolved_policy = scenario.resolved_policy_config()?;
    resolved_policy.insert("name".into(), Value::String(name));
    tree.as_table_mut().expect("root is a table").insert("policy".into(), Value::Table(resolved_policy));
    Ok(Resolved { tree, scenario })
}

/// A rayon pool of `--jobs` threads (default: all cores; more than the CPU count is capped
/// with a note on standard error, since results do not depend on it).
pub fn pool(jobs: Option<usize>) -> Result<rayon::ThreadPool> {
    if jobs == Some(0) {
        usage!("--jobs must be at least 1");
    }
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let n = match jobs {
        Some(j) if j > cpus => {
            eprintln!("note: --jobs {j} is more than the {cpus} CPUs available; using {cpus}");
            cpus
        }
        Some(j) => j,
        None => cpus,
    };
    rayon::ThreadPoolBuilder::new().num_threads(n).build().context("cannot start worker threads")
}

/// Progress on standard error: a bar on a terminal; otherwise (a log file, a SLURM job) a
/// plain line at most every `PLAIN_EVERY`, so long work shows progress there too.
pub struct Progress {
    bar: indicatif::ProgressBar,
    plain: Option<std::sync::Mutex<Plain>>,
}

struct Plain {
    what: String,
    len: u64,
    done: u64,
    start: std::time::Instant,
    last: std::time::Instant,
}

const PLAIN_EVERY: std::time::Duration = std::time::Duration::from_secs(30);

impl Progress {
    pub fn inc(&self, n: u64) {
        self.bar.inc(n);
        let Some(plain) = &self.plain else { return };
        let mut p = plain.lock().unwrap_or_else(|e| e.into_inner());
        p.done += n;
        if p.last.elapsed() >= PLAIN_EVERY {
            p.last = std::time::Instant::now();
            let elapsed = p.start.elapsed().as_secs_f64();
            let left = if p.done > 0 { elapsed / p.done as f64 * (p.len - p.done.min(p.len)) as f64 } else { f64::NAN };
            eprintln!("{}: {}/{} runs, {} elapsed, about {} left", p.what, p.done, p.len, minutes(elapsed), minutes(left));
        }
    }

    pub fn set_message(&self, what: &str) {
        self.bar.set_message(what.to_string());
        if let Some(plain) = &self.plain {
            plain.lock().unwrap_or_else(|e| e.into_inner()).what = what.to_string();
        }
    }

    pub fn finish_and_clear(&self) {
        self.bar.finish_and_clear();
    }
}

fn minutes(s: f64) -> String {
    if !s.is_finite() {
        "?".into()
    } else if s < 60.0 {
        format!("{s:.0} s")
    } else {
        format!("{}m{:02.0}s", (s / 60.0).floor(), s % 60.0)
    }
}

/// Progress of `len` runs (see [`Progress`]).
pub fn progress(len: u64, what: &str) -> Progress {
    use std::io::IsTerminal;
    let bar = indicatif::ProgressBar::new(len);
    bar.set_style(
        indicatif::ProgressStyle::with_template("{msg} [{bar:30}] {pos}/{len} runs, {elapsed} elapsed, eta {eta}")
            .expect("valid template")
            .progress_chars("=> "),
    );
    bar.set_message(what.to_string());
    let plain = (!std::io::stderr().is_terminal()).then(|| {
        let now = std::time::Instant::now();
        std::sync::Mutex::new(Plain { what: what.to_string(), len, done: 0, start: now, last: now })
    });
    Progress { bar, plain }
}

/// Tree to JSON for result files.
pub fn tree_json(tree: &Value) -> serde_json::Value {
    serde_json::to_value(tree).unwrap_or(serde_json::Value::Null)
}
