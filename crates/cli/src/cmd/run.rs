//! `numalab run`: launch a program under a static placement policy, numactl-like, through the
//! same policy code the simulator runs (docs/live.md). JSON contract `numalab.run/1`.
use crate::cmd::attach::PageRecord;
use crate::cmd::machine_import::root_of;
use crate::cmd::profile::ChildStatus;
use crate::cmd::round_1g;
use crate::output::{render_summary, write_text, OutputOpts, Table};
use crate::scenario::{canonical_policy, usage, Usage};
use anyhow::{Context, Result};
use numalab_core::profile::{ProfileReport, Scope, DEFAULT_EVENTS};
use numalab_linux::act::pages::{MoveOptions, PageOutcome};
use numalab_linux::act::range_bind::RangeBind;
use numalab_linux::act::range_move::RangeMap;
use numalab_linux::act::{self, ActError, LaunchReport, SystemLauncher};
use numalab_linux::export::{to_machine, ExportOptions};
use numalab_linux::live::StopReason;
use numalab_linux::session::{self, SessionConfig, TargetSpec};
use numalab_linux::{FsRoot, Topology};
use numalab_policy::{DynPolicy, PolicyEnv, PolicyKind};
use std::ffi::OsString;
use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;

#[derive(clap::Args, Debug)]
#[command(after_help = "Examples:
  numalab run --policy round-4k -- ./app args        interleave pages over every memory node
  numalab run --policy bind --set policy.nodes=[1] --cpus-on 1 -- ./app
  numalab run --dry-run --decision-log actions.jsonl --policy preferred --set policy.nodes=[0] -- ./app
  numalab run --policy autonuma -- ./app             the agent manages the program until it exits
  numalab run --policy stable-numa --sampler hinting-faults --decision-log d.jsonl -- ./app

A dynamic policy (autonuma, stable-numa, ...) starts the program with the kernel's default
placement (first touch) and manages it with the live engine until it exits (or --duration
passes: the program then runs on unmanaged), from the accesses an access sampler observes.
The summary goes to standard error (or to --out FILE); the program's own output is untouched.
numalab exits with the program's status.")]
pub struct RunArgs {
    /// Static placement policy (`numalab list policies`), or a numactl name: interleave,
    /// membind, local, localalloc.
    #[arg(long, default_value = "linux")]
    pub policy: String,
    /// A policy setting, `policy.KEY=VALUE` (repeatable), e.g. `--set policy.nodes=[1]`.
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub set: Vec<String>,
    /// Run the program only on the CPUs of these nodes (comma-separated), as numactl's
    /// --cpunodebind.
    #[arg(long, value_delimiter = ',', value_name = "NODES")]
    pub cpus_on: Vec<u32>,
    /// Decide and log every action, but launch the program unchanged.
    #[arg(long)]
    pub dry_run: bool,
    /// Write every action and its outcome as JSON lines (`numalab.decisions/1`).
    #[arg(long, value_name = "FILE")]
    pub decision_log: Option<PathBuf>,
    /// Plan for the topology of a captured sysfs tree (a directory holding `sys/`) instead of
    /// this host's; only with --dry-run.
    #[arg(long, value_name = "DIR", requires = "dry_run")]
    pub root: Option<PathBuf>,
    /// Also profile the program as `numalab profile` does (default events, 1 s samples of
    /// its NUMA state), and add the profile to the summary.
    #[arg(long)]
    pub profile: bool,
    #[command(flatten)]
    pub agent: crate::cmd::attach_dynamic::AgentArgs,
    /// The program and its arguments, after `--`.
    #[arg(last = true, value_name = "CMD", required = true)]
    pub command: Vec<OsString>,
}

pub fn run(a: &RunArgs, out: &OutputOpts) -> Result<()> {
    let root = match &a.root {
        Some(dir) => root_of(&dir.join("sys")).or_else(|_| root_of(dir))?,
        None => FsRoot::host(),
    };
    let topo = Topology::read(&root).context("cannot read the NUMA topology")?;
    let (canonical, _) = canonical_policy(&a.policy)?;
    if numalab_policy::find(canonical)?.kind == PolicyKind::Dynamic {
        return run_dynamic(a, out, &root, &topo);
    }
    let StaticPolicy { name, policy } = static_policy(&a.policy, &a.set, &topo, "run")?;
    let r1g = if name == "round-1g" { Some(round_1g_setup(a, policy.as_ref(), &topo)?) } else { None };
    let Some(intent) = r1g.as_ref().map(|r| r.intent.clone()).or_else(|| policy.mempolicy()) else {
        usage!("{name} has no Linux memory policy to launch a program with: use round-4k or bind");
    };
    let plan = act::static_plan(&intent, &topo, &a.cpus_on).map_err(|e| Usage(e.to_string()))?;
    // The kernel's own NUMA balancing migrates pages whatever the memory policy says (except
    // bind without MPOL_F_NUMA_BALANCING): the summary says so when it is on.
    let numa_balancing = numalab_linux::procfs::settings::numa_balancing(&root).ok().flatten();

    let to_anyhow = |e: ActError| match e {
        ActError::Spawn { .. } | ActError::KernelRefused { .. } => anyhow::Error::new(e),
        other => anyhow::Error::new(Usage(other.to_string())),
    };
    let mut ranges = None;
    let mut moves: Option<round_1g::RangeRun> = None;
    if r1g.is_some() {
        // The agent's settings, as a dynamic policy's are checked.
        crate::cmd::attach_dynamic::LiveArgs::new(&a.agent, a.dry_run, a.decision_log.as_deref()).check()?;
    }
    let rate_limit = (a.agent.rate_limit_mbps > 0.0).then_some((a.agent.rate_limit_mbps * 1e6) as u64);
    let (report, profile) = if a.profile {
        launch_profiled(a, &plan, &root).map_err(|e| e.context("numalab run --profile"))?
    } else if let (Some(r), false) = (&r1g, a.dry_run) {
        // round-1g: the process-wide interleave before exec, the preloaded library's
        // per-range mbind after, and the agent moving what lands elsewhere while the program
        // runs (docs/live.md, "round-1g for launched programs", "round-1g by moving pages").
        let start = std::time::Instant::now();
        let calls = act::checked_calls(&mut SystemLauncher, &plan).map_err(to_anyhow)?;
        let kernel_nodes: Vec<u32> = r.intent.nodes.iter().map(|&n| topo.nodes[n as usize].id).collect();
        let (bind, env) = RangeBind::prepare(&kernel_nodes, r.map.range_bytes).map_err(|e| Usage(e.to_string()))?;
        let actions = act::action_records(&plan, false, start.elapsed().as_nanos() as u64);
        let child = act::spawn(&a.command, &calls, &env).map_err(to_anyhow)?;
        if round_1g::agent_moves(&r.map) {
            let opts = MoveOptions { rate_limit_bytes_per_s: rate_limit, page_bytes: round_1g::PAGE_BYTES, ..Default::default() };
            let period = std::time::Duration::from_millis(a.agent.period_ms);
            let duration = a.agent.duration.map(std::time::Duration::from_secs_f64);
            moves = Some(round_1g::correct_while_running(&child, r.map.clone(), period, duration, &opts, a.decision_log.is_some(), start));
        }
        let exit = child.wait().map_err(to_anyhow)?;
        ranges = Some(bind.report());
        (LaunchReport { actions, exit, wall_s: start.elapsed().as_secs_f64() }, None)
    } else {
        (act::launch(&mut SystemLauncher, &a.command, &plan, a.dry_run).map_err(to_anyhow)?, None)
    };
    let agent_cpu_s = act::own_cpu_seconds();
    if let Some(path) = &a.decision_log {
        write_decision_log(path, &report, moves.as_ref().map_or(&[][..], |m| &m.records[..]))?;
    }
    let doc = serde_json::json!({
        "schema": "numalab.run/1",
        "numalab_version": env!("CARGO_PKG_VERSION"),
        "policy": { "name": name, "config": crate::scenario::tree_json(&toml::Value::Table(policy.config_toml())) },
        "command": a.command.iter().map(|s| s.to_string_lossy().into_owned()).collect::<Vec<_>>(),
        "host_nodes": topo.nodes.iter().map(|n| n.id).collect::<Vec<_>>(),
        "kernel_numa_balancing": numa_balancing,
        "dry_run": a.dry_run,
        "actions": report.actions,
        "exit": report.exit,
        "wall_s": report.wall_s,
        "agent_cpu_s": agent_cpu_s,
        "profile": profile,
        "range_bytes": r1g.as_ref().map(|r| r.map.range_bytes),
        "ranges": ranges.as_ref().and_then(|r| r.as_ref().ok()),
        "range_moves": moves.as_ref().map(|m| serde_json::json!({
            "period_ms": a.agent.period_ms,
            "rate_limit_mbps": a.agent.rate_limit_mbps,
            "totals": m.totals,
            "error": m.error,
        })),
    });
    let mut table = summary_table(name, &report, a.dry_run);
    if let Some(r) = &r1g {
        table.row(["range size".to_string(), format!("{} bytes, range k on node k mod {}", r.map.range_bytes, r.intent.nodes.len())]);
        if !round_1g::agent_moves(&r.map) {
            table.notes.push(format!("note: {}", round_1g::small_range_note(r.map.range_bytes)));
        }
    }
    if let Some(m) = &moves {
        range_move_rows(&mut table, m);
    }
    if let Some(Ok(r)) = &ranges {
        let failed =
            if r.pieces_failed > 0 { format!(", {} refused (last errno {})", r.pieces_failed, r.last_errno) } else { String::new() };
        table.row(["ranges bound".to_string(), format!("{} pieces of {} anonymous mappings{failed}", r.pieces_bound, r.mappings)]);
    }
    t_agent_row(&mut table, agent_cpu_s, report.wall_s);
    if let Some(p) = &profile {
        let pt = crate::cmd::profile::summary_table(p);
        for row in pt.rows {
            table.row([format!("profile: {}", row[0]), format!("{} ({})", row[1], row[2])]);
        }
        table.notes.extend(pt.notes);
    }
    if let Some(mode) = numa_balancing.filter(|&m| m != 0) {
        table.notes.push(format!(
            "note: kernel NUMA balancing is on (kernel.numa_balancing = {mode}): the kernel may migrate the program's pages away from where this policy put them"
        ));
    }
    // Without --out the summary goes to standard error: standard output is the program's.
    let text = render_summary(out, &doc, &table)?;
    match &out.out {
        Some(p) => write_text(Some(p), &text)?,
        None => {
            let _ = std::io::stderr().write_all(text.as_bytes());
        }
    }
    if let Some(Err(e)) = ranges {
        return Err(anyhow::Error::new(e));
    }
    match report.exit.shell_status() {
        0 => Ok(()),
        s => Err(anyhow::Error::new(ChildStatus(s.clamp(1, 255) as u8))),
    }
}

/// round-1g's launch settings: the process-wide interleave over the home nodes (the heap,
/// the stacks and what the library cannot see) and the range size.
struct Round1gSetup {
    intent: numalab_policy::MempolicyIntent,
    map: RangeMap,
}

fn round_1g_setup(a: &RunArgs, policy: &dyn DynPolicy, topo: &Topology) -> Result<Round1gSetup> {
    if a.profile {
        usage!("round-1g cannot be combined with --profile in this version: run it without --profile, or profile round-4k");
    }
    let map = round_1g::range_map(policy, topo)?;
    let intent = numalab_policy::MempolicyIntent {
        mode: numalab_policy::MempolicyMode::Interleave,
        nodes: map.home.clone(),
        caveat: Some(
            "private anonymous mappings made with mmap are bound per range by numalab's preload library; the rest interleaves, and the agent moves its pages to their range's node while the program runs".into(),
        ),
    };
    Ok(Round1gSetup { intent, map })
}

/// The agent's page moves for round-1g in the summary.
fn range_move_rows(t: &mut Table, m: &round_1g::RangeRun) {
    let s = &m.totals;
    t.row([
        "agent's range passes".to_string(),
        format!(
            "{} passes, {} pages asked about, {} resident elsewhere than their range's node",
            s.passes, s.scanned_pages, s.misplaced_pages
        ),
    ]);
    t.row(["pages moved to their range's node".to_string(), s.count(PageOutcome::Moved).to_string()]);
    crate::cmd::attach::unmoved_rows(t, |o| s.count(o), "program");
    t.row(["move_pages calls".to_string(), format!("{} status, {} moves ({:.3} s)", s.locate_calls, s.move_pages_calls, s.busy_s)]);
    if let Some(e) = &m.error {
        t.notes.push(format!("note: the agent stopped moving pages: {e}"));
    }
}

/// The agent's own CPU time (numalab's start-up included, the program's time not), and its
/// share of one core over the program's run once that is long enough for the share to mean
/// something (start-up dominates a short run).
fn t_agent_row(t: &mut Table, cpu_s: f64, wall_s: f64) {
    let text = if wall_s >= 10.0 {
        format!("{cpu_s:.3} s ({:.2} % of one core over the run)", 100.0 * cpu_s / wall_s)
    } else {
        format!("{cpu_s:.3} s")
    };
    t.row(["agent CPU".to_string(), text]);
}

/// `run --profile`: the profiler launches the program (its fork makes the planned calls
/// before exec) and counts it from its first instruction.
fn launch_profiled(a: &RunArgs, plan: &[act::LaunchAction], root: &FsRoot) -> Result<(LaunchReport, Option<ProfileReport>)> {
    let start = std::time::Instant::now();
    let calls = if a.dry_run { Vec::new() } else { act::checked_calls(&mut SystemLauncher, plan)? };
    let actions = act::action_records(plan, a.dry_run, start.elapsed().as_nanos() as u64);
    let argv: Vec<String> = a.command.iter().map(|s| s.to_string_lossy().into_owned()).collect();
    let cfg = SessionConfig {
        target: TargetSpec::Command(argv),
        events: DEFAULT_EVENTS.iter().map(|s| s.to_string()).collect(),
        scope: Scope::Thread,
        interval_ms: 1000,
        duration_ms: None,
        start_disabled: false,
        control_fifo: None,
        repeat_split: false,
        counters_per_group: 4,
        root: root.clone(),
        child_stdout_to_stderr: false,
        pre_exec: calls,
    };
    let report = session::run(&cfg)?;
    let code = report.target.exit_code;
    let exit =
        act::ChildExit { code: code.filter(|&c| c < 128), signal: code.filter(|&c| c >= 128).map(|c| c - 128), wall: start.elapsed() };
    Ok((LaunchReport { actions, exit, wall_s: start.elapsed().as_secs_f64() }, Some(report)))
}

/// A static policy built for this host from `--policy` and `--set policy.KEY=VALUE`.
pub struct StaticPolicy {
    pub name: &'static str,
    pub policy: Box<dyn DynPolicy>,
}

/// Build a static policy for the host `topo` describes (shared by `run` and `attach`).
pub fn static_policy(policy: &str, sets: &[String], topo: &Topology, command: &str) -> Result<StaticPolicy> {
    let (name, _) = canonical_policy(policy)?;
    if numalab_policy::find(name)?.kind == PolicyKind::Dynamic {
        usage!(
            "{name} is a dynamic policy; `numalab {command}` applies static policies only in this version (first-touch, round-4k, bind, preferred, weighted-interleave, linux, tier-static)"
        );
    }
    host_policy(policy, sets, topo, command)
}

/// Build any policy, static or dynamic, for the host `topo` describes.
pub fn host_policy(policy: &str, sets: &[String], topo: &Topology, command: &str) -> Result<StaticPolicy> {
    let (name, implied) = canonical_policy(policy)?;
    let entry = numalab_policy::find(name)?;
    let mut tree = toml::Value::Table(toml::Table::new());
    for (k, v) in implied {
        numalab_core::overrides::apply(&mut tree, &format!("policy.{k}={v}")).map_err(|e| Usage(e.to_string()))?;
    }
    for s in sets {
        if !s.trim_start().starts_with("policy.") {
            usage!("--set {s}: `numalab {command}` takes policy settings only (policy.KEY=VALUE)");
        }
        numalab_core::overrides::apply(&mut tree, s).map_err(|e| Usage(e.to_string()))?;
    }
    let config = match tree.get("policy") {
        Some(toml::Value::Table(t)) => t.clone(),
        _ => toml::Table::new(),
    };
    let machine = to_machine(topo, &ExportOptions::default()).map_err(|m| Usage(format!("this host's topology: {m}")))?.machine;
    let env = PolicyEnv::new(Arc::new(machine));
    let policy = entry.build(config, &env).map_err(|e| Usage(e.to_string()))?;
    Ok(StaticPolicy { name, policy })
}

fn summary_table(policy: &str, r: &LaunchReport, dry_run: bool) -> Table {
    let mut t = Table::new(["numalab run", "value"]);
    t.row(["policy".to_string(), policy.to_string()]);
    for rec in &r.actions {
        let state = if dry_run { "dry run, not applied" } else { "applied" };
        t.row(["action".to_string(), format!("{} ({state})", rec.decision.describe())]);
        if let act::LaunchAction::SetMempolicy(k) = &rec.decision {
            if let Some(c) = &k.caveat {
                t.notes.push(format!("note: {c}"));
            }
        }
    }
    let exit = match (r.exit.code, r.exit.signal) {
        (Some(c), _) => format!("exit code {c}"),
        (None, Some(s)) => format!("killed by signal {s}"),
        _ => "unknown".into(),
    };
    t.row(["program".to_string(), exit]);
    t.row(["wall time".to_string(), format!("{:.3} s", r.wall_s)]);
    t
}

fn write_decision_log(path: &std::path::Path, r: &LaunchReport, page_records: &[PageRecord]) -> Result<()> {
    let mut text = String::new();
    for rec in &r.actions {
        text.push_str(&serde_json::to_string(rec)?);
        text.push('\n');
    }
    for rec in page_records {
        text.push_str(&serde_json::to_string(rec)?);
        text.push('\n');
    }
    write_text(Some(path), &text)
}

/// `run --policy <dynamic>`: launch the program (its CPUs as --cpus-on says, its pages where
/// first touch puts them) and drive the live engine on it until it exits (docs/live.md,
/// "Dynamic policies on a launched program").
fn run_dynamic(a: &RunArgs, out: &OutputOpts, root: &FsRoot, topo: &Topology) -> Result<()> {
    use crate::cmd::attach_dynamic::{choose_sampler, live_rows, manage, sampler_counters_json, LiveArgs};
    let start = std::time::Instant::now();
    if a.root.is_some() {
        usage!("--root: a dynamic policy acts on a running program of this host; --root plans static policies only");
    }
    if a.profile {
        usage!("--profile with a dynamic policy: not built (profile the program with a static policy, or run `numalab profile --pid` beside it)");
    }
    let l = LiveArgs::new(&a.agent, a.dry_run, a.decision_log.as_deref());
    l.check()?;
    let StaticPolicy { name, policy } = host_policy(&a.policy, &a.set, topo, "run")?;
    let plan: Vec<act::LaunchAction> = act::cpu_plan(topo, &a.cpus_on).map_err(|e| Usage(e.to_string()))?.into_iter().collect();
    let (sampler, env) = choose_sampler(&l, name, root, topo, start, true)?;
    // A dry run launches the program unchanged, as for a static policy.
    let calls = if a.dry_run { Vec::new() } else { act::checked_calls(&mut SystemLauncher, &plan)? };
    let launch_actions = act::action_records(&plan, a.dry_run, start.elapsed().as_nanos() as u64);
    let numa_balancing = numalab_linux::procfs::settings::numa_balancing(root).ok().flatten();
    let child = act::spawn(&a.command, &calls, &env)?;
    let pid = child.pid();
    let mut stop = || child.exited().then_some(StopReason::TargetExited);
    let managed = manage(&l, policy, sampler, pid, root, topo, start, &mut stop);
    if let Err(e) = &managed {
        // The program is ours to wait for whatever happened to the engine.
        eprintln!("numalab: the live engine stopped ({e:#}); the program runs on unmanaged");
    }
    let exit = child.wait()?;
    let o = managed?;
    let wall_s = start.elapsed().as_secs_f64();
    let agent_cpu_s = act::own_cpu_seconds();
    let doc = serde_json::json!({
        "schema": "numalab.run/1",
        "numalab_version": env!("CARGO_PKG_VERSION"),
        "mode": "dynamic",
        "policy": { "name": name, "config": o.config_json },
        "command": a.command.iter().map(|s| s.to_string_lossy().into_owned()).collect::<Vec<_>>(),
        "host_nodes": topo.nodes.iter().map(|n| n.id).collect::<Vec<_>>(),
        "kernel_numa_balancing": numa_balancing,
        "dry_run": a.dry_run,
        "actions": launch_actions,
        "pid": pid,
        "sampler": o.sampler,
        "period_ms": a.agent.period_ms,
        "rate_limit_mbps": a.agent.rate_limit_mbps,
        "stopped_by": o.reason,
        "live": o.summary,
        "sampler_counters": sampler_counters_json(&o),
        "sampler_report": o.sampler_report,
        "exit": exit,
        "wall_s": wall_s,
        "agent_cpu_s": agent_cpu_s,
        "profile": null,
    });
    let mut table = Table::new(["numalab run", "value"]);
    for rec in &launch_actions {
        let state = if a.dry_run { "dry run, not applied" } else { "applied" };
        table.row(["action".to_string(), format!("{} ({state})", rec.decision.describe())]);
    }
    live_rows(&mut table, name, &l, &o);
    let status = match (exit.code, exit.signal) {
        (Some(c), _) => format!("exit code {c}"),
        (None, Some(s)) => format!("killed by signal {s}"),
        _ => "unknown".into(),
    };
    table.row(["program".to_string(), status]);
    table.row(["wall time".to_string(), format!("{wall_s:.3} s")]);
    t_agent_row(&mut table, agent_cpu_s, wall_s);
    if let Some(mode) = numa_balancing.filter(|&m| m != 0) {
        table.notes.push(format!(
            "note: kernel NUMA balancing is on (kernel.numa_balancing = {mode}): the kernel migrates the program's pages too, beside the agent"
        ));
    }
    if o.reason == StopReason::Deadline {
        table.notes.push("note: --duration passed before the program exited; it ran on unmanaged".into());
    }
    let text = render_summary(out, &doc, &table)?;
    match &out.out {
        Some(p) => write_text(Some(p), &text)?,
        None => {
            let _ = std::io::stderr().write_all(text.as_bytes());
        }
    }
    match exit.shell_status() {
        0 => Ok(()),
        s => Err(anyhow::Error::new(ChildStatus(s.clamp(1, 255) as u8))),
    }
}
