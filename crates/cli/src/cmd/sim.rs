//! `numalab sim`: one policy, several seeded runs.

use crate::output::{emit, OutputOpts, Table};
use crate::scenario::{pool, progress, resolve, tree_json, usage, ScenarioArgs};
use anyhow::{Context, Result};
use numalab_sim::vmrun::{run_many_vm, vm_scenario, VmSetup};
use numalab_sim::{run_many, run_many_logged, DecisionLog, RunMetrics, RunsSummary, SimError};
use serde_json::json;
use std::fs::File;
use std::io::BufWriter;
use std::path::{Path, PathBuf};

/// Each run streams its decisions to its own part file beside the log; once every run has
/// finished, the parts are joined in run order, so the log's bytes do not depend on `--jobs`.
struct LogParts {
    path: PathBuf,
    runs: u32,
}

impl LogParts {
    fn new(path: &Path, runs: u32) -> LogParts {
        LogParts { path: path.to_path_buf(), runs }
    }

    fn part(&self, k: u32) -> PathBuf {
        let name = self.path.file_name().map_or_else(|| "decisions".into(), |n| n.to_string_lossy().into_owned());
        self.path.with_file_name(format!(".{name}.run{k}.part"))
    }

    /// Write the parts, in run order, through to the log (a device or FIFO is written
    /// through, never replaced).
    fn join(&self) -> Result<()> {
        let mut out =
            BufWriter::new(File::create(&self.path).with_context(|| format!("cannot write the decision log {}", self.path.display()))?);
        for k in 0..self.runs {
            let mut part = File::open(self.part(k)).with_context(|| format!("cannot read {}", self.part(k).display()))?;
            std::io::copy(&mut part, &mut out).with_context(|| format!("cannot write the decision log {}", self.path.display()))?;
        }
        std::io::Write::flush(&mut out).with_context(|| format!("cannot write the decision log {}", self.path.display()))
    }

    fn remove(&self) {
        for k in 0..self.runs {
            let _ = std::fs::remove_file(self.part(k));
        }
    }
}

#[derive(clap::Args, Debug)]
pub struct SimArgs {
    /// Placement policy (see `numalab list policies`).
    #[arg(long, default_value = "first-touch")]
    pub policy: String,
    /// Print the profile of the first run in the live profiler's format (numalab.profile/1:
    /// perf-style counters, pages per node, vmstat names), to compare or `profile diff` with a
    /// profile of a real machine.
    #[arg(long)]
    pub profile: bool,
    /// Write every decision of the policy, with its time, cause and outcome, as JSON lines
    /// (numalab.decisions/1, docs/json.md) to FILE; runs appear in run order.
    #[arg(long, value_name = "FILE")]
    pub decision_log: Option<std::path::PathBuf>,
    /// Run the workload inside the VMs of FILE (`[hypervisor]` and `[[vm]]` tables, docs/vm.md,
    /// "A workload inside VMs") with `--policy vm` (each VM's own static_policy) or
    /// `--policy vm:KIND` (every VM under first-touch, first-touch+queue, first-touch-no-queue,
    /// round-4k or round-1g, each optionally with `+carrefour`: Carrefour run by the hypervisor
    /// with the file's `[hypervisor.carrefour]` keys, docs/vm.md).
    #[arg(long, value_name = "FILE")]
    pub vm: Option<PathBuf>,
    #[command(flatten)]
    pub scenario: ScenarioArgs,
}

/// Read a VM setup file (`--vm`).
pub fn load_vm_setup(path: &Path) -> Result<VmSetup> {
    let text = crate::scenario::read_user_file_as(path, "vm setup file ")?;
    VmSetup::from_toml_str(&text).map_err(|e| anyhow::Error::new(crate::scenario::Usage(format!("{}: {e}", path.display()))))
}

/// Is `policy` a VM run (`vm` or `vm:KIND`)?
pub fn is_vm_policy(policy: &str) -> bool {
    policy == "vm" || policy.starts_with("vm:")
}

/// The VMs a policy name runs in: `vm` = the setup as written, `vm:KIND` = every VM under
/// KIND; `None` for a native policy.
pub fn vm_setup_for(policy: &str, setup: Option<&VmSetup>) -> Result<Option<VmSetup>> {
    if !is_vm_policy(policy) {
        return Ok(None);
    }
    let Some(setup) = setup else { usage!("policy '{policy}' runs the workload in VMs: give them with --vm FILE (docs/vm.md)") };
    match policy.strip_prefix("vm:") {
        None => Ok(Some(setup.clone())),
        Some(kind) => Ok(Some(setup.with_policy_name(kind).map_err(|e| anyhow::Error::new(crate::scenario::Usage(e.to_string())))?)),
    }
}

pub fn fmt_opt(v: Option<f64>, digits: usize) -> String {
    v.map_or("n/a".to_string(), |x| format!("{x:.digits$}"))
}

/// Resolve a VM run (shared with `study`): the native scenario (machine, workload, [sim]) with
/// a placeholder policy, checked against the VMs, and the VMs in place of the [policy] table,
/// so the resolved tree (and a study cell's cache key) names them.
pub fn resolve_vm(args: &ScenarioArgs, policy: &str, setup: &VmSetup) -> Result<crate::scenario::Resolved> {
    if let Some(s) = args.set.iter().find(|s| s.starts_with("policy.")) {
        usage!("--set {s}: a VM run has no [policy] table; its settings are the [[vm]] tables of the --vm file");
    }
    let mut r = resolve(args, "first-touch")?;
    vm_scenario(&r.scenario, setup).map_err(|e| anyhow::Error::new(crate::scenario::Usage(e.to_string())))?;
    let mut table = toml::Table::new();
    table.insert("name".into(), toml::Value::String(policy.into()));
    if let Ok(toml::Value::Table(t)) = toml::Value::try_from(setup) {
        table.extend(t);
    }
    if let Some(root) = r.tree.as_table_mut() {
        root.insert("policy".into(), toml::Value::Table(table));
    }
    Ok(r)
}

/// Run a resolved scenario with a progress bar; shared with `compare`.
pub fn simulate(args: &ScenarioArgs, policy: &str, vm: Option<&VmSetup>) -> Result<(serde_json::Value, Vec<RunMetrics>, RunsSummary)> {
    simulate_resolved(args, policy, None, vm).map(|(doc, runs, summary, _)| (doc, runs, summary))
}

fn simulate_resolved(
    args: &ScenarioArgs,
    policy: &str,
    decision_log: Option<&Path>,
    vm: Option<&VmSetup>,
) -> Result<(serde_json::Value, Vec<RunMetrics>, RunsSummary, crate::scenario::Resolved)> {
    let vm_setup = vm_setup_for(policy, vm)?;
    if vm_setup.is_some() && decision_log.is_some() {
        usage!("--decision-log: a VM run's placements are the hypervisor's, which the decision log does not record");
    }
    let resolved = match &vm_setup {
        None => resolve(args, policy)?,
        Some(setup) => resolve_vm(args, policy, setup)?,
    };
    let pool = pool(args.jobs)?;
    let pb = progress(args.runs as u64, policy);
    let runs = match decision_log {
        None => match &vm_setup {
            None => pool.install(|| run_many(&resolved.scenario, args.seed, args.runs, &|| pb.inc(1)))?,
            Some(setup) => pool.install(|| run_many_vm(&resolved.scenario, setup, args.seed, args.runs, &|| pb.inc(1)))?,
        },
        Some(path) => {
            let parts = LogParts::new(path, args.runs);
            let make = |k: u32| -> Result<Option<DecisionLog<'static>>, SimError> {
                let part = parts.part(k);
                let f = File::create(&part).map_err(|e| SimError::Io(format!("cannot create {}: {e}", part.display())))?;
                Ok(Some(DecisionLog::new(k, Box::new(BufWriter::new(f)), path.display().to_string())))
            };
            let runs = pool.install(|| run_many_logged(&resolved.scenario, args.seed, args.runs, &|| pb.inc(1), &make));
            let runs = runs.map_err(anyhow::Error::from).and_then(|r| parts.join().map(|_| r));
            parts.remove();
            runs?
        }
    };
    pb.finish_and_clear();
    let summary = RunsSummary::of(&runs).ok_or_else(|| anyhow::anyhow!("--runs must be at least 1"))?;
    let doc = json!({
        "schema": "numalab.sim/2",
        "numalab_version": env!("CARGO_PKG_VERSION"),
        "seed": args.seed,
        "config": tree_json(&resolved.tree),
        "runs": runs,
        "summary": summary,
    });
    Ok((doc, runs, summary, resolved))
}

pub fn run(a: &SimArgs, out: &OutputOpts) -> Result<()> {
    if a.scenario.runs == 0 {
        anyhow::bail!("--runs must be at least 1");
    }
    let vm = a.vm.as_deref().map(load_vm_setup).transpose()?;
    if vm.is_some() && !is_vm_policy(&a.policy) {
        usage!(
            "--vm runs the workload in VMs only under --policy vm or vm:KIND (first-touch, first-touch+queue, first-touch-no-queue, \
             round-4k, round-1g, each optionally with +carrefour), not '{}'",
            a.policy
        );
    }
    crate::scenario::note_sets_for_other_policies(&a.scenario.set, &[a.policy.as_str()]);
    let (doc, runs, s, resolved) = simulate_resolved(&a.scenario, &a.policy, a.decision_log.as_deref(), vm.as_ref())?;
    if a.profile {
        return emit_profile(a, &runs[0], &resolved, out);
    }
    let mut t =
        Table::new(["run", "seed", "exec_time_s", "local_ratio", "imbalance_%", "link_load_%", "ft_faults", "thread_migs", "cross_node"]);
    for (i, r) in runs.iter().enumerate() {
        t.row([
            i.to_string(),
            r.seed.to_string(),
            format!("{:.6}", r.exec_time_s),
            fmt_opt(r.local_access_ratio, 3),
            fmt_opt(r.node_imbalance, 1),
            fmt_opt(r.interconnect_load, 1),
            r.first_touch_faults.to_string(),
            r.thread_migrations.to_string(),
            r.thread_migrations_by_cause.cross_node().to_string(),
        ]);
    }
    let e = &s.exec_time_s;
    t.notes.push(format!(
        "{} on {} ({} runs): exec time mean {:.6} s, median {:.6}, min {:.6}, max {:.6}, stddev {:.6}, cv {:.2}%, nmmd {:.2}%",
        a.policy,
        a.scenario.machine,
        s.runs,
        e.mean,
        e.median,
        e.min,
        e.max,
        e.stddev,
        100.0 * e.cv,
        100.0 * e.nmmd
    ));
    emit(out, &doc, &t)
}

fn emit_profile(a: &SimArgs, run: &RunMetrics, resolved: &crate::scenario::Resolved, out: &OutputOpts) -> Result<()> {
    let labels = std::collections::BTreeMap::from([
        ("machine".to_string(), resolved.scenario.machine.name.clone()),
        ("workload".to_string(), a.scenario.workload().to_string()),
        ("policy".to_string(), a.policy.clone()),
        ("scale".to_string(), a.scenario.scale().to_string()),
        ("seed".to_string(), run.seed.to_string()),
    ]);
    let program = &resolved.scenario.program;
    let report = numalab_sim::profile::profile_of(run, program.threads, program.page_bytes, labels);
    let mut t = Table::new(["event", "status", "value", "reason"]);
    for e in &report.events {
        t.row([
            e.name.clone(),
            e.status.as_str().to_string(),
            e.value.map_or("n/a".into(), |v| v.to_string()),
            e.reason.clone().unwrap_or_default(),
        ]);
    }
    for d in &report.derived {
        t.row([d.name.clone(), d.status.as_str().to_string(), fmt_opt(d.value, 2), d.reason.clone().unwrap_or_default()]);
    }
    t.notes.push(format!("simulated profile of run 0 (seed {}) of {} on {}", run.seed, a.policy, resolved.scenario.machine.name));
    emit(out, &serde_json::to_value(&report)?, &t)
}
