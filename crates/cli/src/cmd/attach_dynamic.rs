//! `numalab attach --pid PID --policy autonuma` and `numalab run --policy autonuma -- CMD`: a
//! dynamic policy managing a process through the live engine (docs/live.md, "Dynamic policies on a running process"). JSON
//! contract `numalab.attach/1` with `mode = "dynamic"`.
use crate::cmd::attach::{read_target_maps, AttachArgs};
use crate::cmd::run::{host_policy, StaticPolicy};
use crate::output::{render_summary, write_text, OutputOpts, Table};
use crate::scenario::{usage, Usage};
use anyhow::{Context, Result};
use numalab_linux::act::pages::{MoveOptions, SystemPageMover};
use numalab_linux::live::damon_sampler::{DamonConfig, DamonObserver};
use numalab_linux::live::hint_sampler::{ChildEnv, HintConfig, HintObserver};
use numalab_linux::live::perf_sampler::{check_samplers, monotonic_ns, PerfObserver};
use numalab_linux::live::{
    drive, AccessObserver, LiveConfig, LiveEngine, LiveHost, LiveIo, LiveSummary, ProcTarget, ScriptedObserver, StopOnSignals, StopReason,
    SystemThreadPlacer,
};
use numalab_linux::{FsRoot, Topology};
use std::io::Write;
use std::path::Path;
use std::time::{Duration, Instant};

const PAGE_BYTES: u64 = 4096;

/// The live agent's options, shared by `numalab run` and `numalab attach` (docs/live.md).
#[derive(clap::Args, Debug)]
pub struct AgentArgs {
    /// Move at most this many MB (10^6 bytes) of pages per second, so the program keeps its
    /// memory bandwidth; 0 = no limit (`run`: dynamic policies and round-1g only).
    #[arg(long, default_value_t = 1000.0, value_name = "MB/S")]
    pub rate_limit_mbps: f64,
    /// Dynamic policies: how accesses are observed: `auto` (the first available), `perf`
    /// (hardware sampling), `damon`, `hinting-faults` (a library loaded into a launched
    /// program that protects a few of its pages at a time; `run` only), or `replay:FILE`
    /// (observations from a file, one JSON array per period).
    #[arg(long, default_value = "auto", value_name = "SAMPLER")]
    pub sampler: String,
    /// Dynamic policies and round-1g under `run`: the agent's period, milliseconds.
    #[arg(long, default_value_t = 100, value_name = "MS")]
    pub period_ms: u64,
    /// Dynamic policies and round-1g under `run`: stop managing the program after this many
    /// seconds (default: when it exits); the program runs on.
    #[arg(long, value_name = "SECONDS")]
    pub duration: Option<f64>,
    /// Dynamic policies: events between two hardware samples of a thread (perf sampler).
    #[arg(long, default_value_t = 10007, value_name = "EVENTS")]
    pub sample_period: u64,
}

/// The dynamic-policy settings `attach` and `run` share.
pub(crate) struct LiveArgs<'a> {
    pub dry_run: bool,
    pub decision_log: Option<&'a Path>,
    pub rate_limit_mbps: f64,
    pub sampler: &'a str,
    pub period_ms: u64,
    pub duration: Option<f64>,
    pub sample_period: u64,
}

impl<'a> LiveArgs<'a> {
    /// The agent's settings, with the command's own `--dry-run` and `--decision-log`.
    pub fn new(agent: &'a AgentArgs, dry_run: bool, decision_log: Option<&'a Path>) -> LiveArgs<'a> {
        LiveArgs {
            dry_run,
            decision_log,
            rate_limit_mbps: agent.rate_limit_mbps,
            sampler: &agent.sampler,
            period_ms: agent.period_ms,
            duration: agent.duration,
            sample_period: agent.sample_period,
        }
    }

    /// The checks made before anything starts.
    pub fn check(&self) -> Result<()> {
        if self.period_ms == 0 {
            usage!("--period-ms 0: the period must be at least 1 ms");
        }
        if let Some(d) = self.duration {
            if !(d.is_finite() && d > 0.0) {
                usage!("--duration {d}: must be a finite number of seconds > 0");
            }
        }
        if !(self.rate_limit_mbps.is_finite() && self.rate_limit_mbps >= 0.0) {
            usage!("--rate-limit-mbps {}: must be a finite number >= 0", self.rate_limit_mbps);
        }
        Ok(())
    }
}

/// The sampler `--sampler` resolves to, chosen before the program starts (a launched
/// program's sampler may have to be set up before its `exec`).
pub(crate) enum Sampler {
    Replay(ScriptedObserver),
    Perf,
    /// The kernel's DAMON, set up on the process once it runs.
    Damon,
    /// The preloaded library, set up before the launch (`run` only).
    HintFaults(Box<HintObserver>),
}

/// Kernel node of each CPU.
fn cpu_kernel_nodes(topo: &Topology) -> Vec<Option<u32>> {
    let mut cpu_node = Vec::new();
    for n in &topo.nodes {
        for &c in &n.cpus {
            if cpu_node.len() <= c as usize {
                cpu_node.resize(c as usize + 1, None);
            }
            cpu_node[c as usize] = Some(n.id);
        }
    }
    cpu_node
}

/// Resolve `--sampler` for `policy` (`auto`: the first sampler available here), or the
/// sentence saying why none can run. `launch`: the program is yet to be started by `run`
/// (the hinting-fault sampler is then possible; its environment is returned for the launch).
pub(crate) fn choose_sampler(
    l: &LiveArgs,
    policy: &str,
    root: &FsRoot,
    topo: &Topology,
    start: Instant,
    launch: bool,
) -> Result<(Sampler, ChildEnv)> {
    if let Some(path) = l.sampler.strip_prefix("replay:") {
        let text = std::fs::read_to_string(path).with_context(|| format!("--sampler replay:{path}: cannot read it"))?;
        let o = ScriptedObserver::from_json_lines(&text).map_err(|e| Usage(format!("--sampler replay:{path}: {e}")))?;
        return Ok((Sampler::Replay(o), Vec::new()));
    }
    let mut checks = check_samplers(root);
    if !launch {
        for c in checks.iter_mut().filter(|c| c.sampler == "hinting-faults") {
            c.status = Err("only for programs numalab launches (`numalab run --policy NAME -- CMD`): the library must be loaded at the program's start".into());
        }
    }
    // DAMON names no accessing thread, and every dynamic policy's hooks need one
    // (docs/live.md, "The DAMON sampler"): `auto` never takes it, `--sampler damon` does.
    if l.sampler == "auto" {
        for c in checks.iter_mut().filter(|c| c.sampler == "damon" && c.status.is_ok()) {
            c.status = Err(format!(
                "available, but it reports how often address regions are accessed, not by which thread, which {policy}'s hooks need (`--sampler damon` runs it as a monitor only)"
            ));
        }
    }
    let pick = |name: &str| checks.iter().find(|c| c.sampler == name);
    let chosen = match l.sampler {
        "auto" => match checks.iter().find(|c| c.status.is_ok()) {
            Some(c) => c.sampler,
            None => {
                let why: Vec<String> = checks
                    .iter()
                    .map(|c| format!("{}: {}", c.sampler, c.status.as_ref().err().map_or("available", String::as_str)))
                    .collect();
                usage!(
                    "{policy} needs to observe the program's memory accesses, and no access sampler is available on this host: {}",
                    why.join("; ")
                );
            }
        },
        name => match pick(name) {
            Some(c) => match &c.status {
                Ok(()) => c.sampler,
                Err(reason) => usage!("--sampler {name} is not available on this host: {reason}"),
            },
            None => usage!("--sampler {name}: unknown sampler (auto, perf, damon, hinting-faults, replay:FILE)"),
        },
    };
    match chosen {
        "perf" => Ok((Sampler::Perf, Vec::new())),
        "damon" => Ok((Sampler::Damon, Vec::new())),
        "hinting-faults" => {
            let cfg = HintConfig { period_ns: l.period_ms * 1_000_000, ..HintConfig::default() };
            let start_ns = monotonic_ns().saturating_sub(start.elapsed().as_nanos() as u64);
            let (o, env) = HintObserver::prepare(cfg, cpu_kernel_nodes(topo), start_ns).map_err(|e| Usage(e.to_string()))?;
            Ok((Sampler::HintFaults(Box::new(o)), env))
        }
        other => usage!("--sampler {other}: not built"),
    }
}

/// The observer of a chosen sampler, opened on `pid`.
fn open_observer(s: Sampler, l: &LiveArgs, pid: u32, root: &FsRoot, topo: &Topology, start_ns: u64) -> Result<Box<dyn AccessObserver>> {
    match s {
        Sampler::Replay(o) => Ok(Box::new(o)),
        Sampler::Perf => Ok(Box::new(
            PerfObserver::open(root.clone(), pid, cpu_kernel_nodes(topo), l.sample_period, start_ns).map_err(|e| Usage(e.to_string()))?,
        )),
        Sampler::Damon => Ok(Box::new(
            DamonObserver::start_host(root.clone(), pid, &DamonConfig::for_period_ms(l.period_ms)).map_err(|e| Usage(e.to_string()))?,
        )),
        Sampler::HintFaults(mut o) => {
            o.close_child_fds();
            Ok(o)
        }
    }
}

/// What a live run did, for the summary and the JSON.
pub(crate) struct LiveOutcome {
    pub summary: LiveSummary,
    pub reason: StopReason,
    pub sampler: &'static str,
    pub limits: &'static str,
    pub config_json: serde_json::Value,
    /// The sampler's own counters.
    pub sampler_counters: Vec<(&'static str, u64)>,
    /// What the sampler saw beside observations (DAMON: its regions).
    pub sampler_report: Option<serde_json::Value>,
}

/// Run the live engine with `policy` on `pid` until `stop` names a reason, `--duration`
/// passes, or the target is gone.
#[allow(clippy::too_many_arguments)]
pub(crate) fn manage(
    l: &LiveArgs,
    policy: Box<dyn numalab_policy::DynPolicy>,
    sampler: Sampler,
    pid: u32,
    root: &FsRoot,
    topo: &Topology,
    start: Instant,
    stop: &mut dyn FnMut() -> Option<StopReason>,
) -> Result<LiveOutcome> {
    let start_ns = monotonic_ns().saturating_sub(start.elapsed().as_nanos() as u64);
    let mut observer = open_observer(sampler, l, pid, root, topo, start_ns)?;
    let mut target = match ProcTarget::new(root.clone(), pid) {
        Ok(t) => t,
        Err(e) if e.is_not_found() => usage!("--pid {pid}: no such process"),
        Err(e) => return Err(e.into()),
    };
    let mut mover = match SystemPageMover::for_process(pid) {
        Ok(m) => m,
        Err(e) if e.is_not_found() => usage!("--pid {pid}: no such process"),
        Err(e) => return Err(e.into()),
    };
    let mut placer = SystemThreadPlacer { pid: pid as i32 };
    let cfg = LiveConfig {
        dry_run: l.dry_run,
        moves: MoveOptions {
            rate_limit_bytes_per_s: (l.rate_limit_mbps > 0.0).then_some((l.rate_limit_mbps * 1e6) as u64),
            page_bytes: PAGE_BYTES,
            ..Default::default()
        },
        ..Default::default()
    };
    let config_json = crate::scenario::tree_json(&toml::Value::Table(policy.config_toml()));
    let engine = LiveEngine::new(policy, LiveHost::from_topology(topo, PAGE_BYTES), cfg, pid as i32);
    let mut log_file = match l.decision_log {
        Some(p) => Some(std::io::BufWriter::new(
            std::fs::File::create(p).with_context(|| format!("cannot create the decision log {}", p.display()))?,
        )),
        None => None,
    };
    let sampler = observer.name();
    let limits = observer.limits();
    let mut io = LiveIo {
        target: &mut target,
        observer: observer.as_mut(),
        mover: &mut mover,
        placer: &mut placer,
        log: log_file.as_mut().map(|f| f as &mut dyn Write),
    };
    let duration = l.duration.map(Duration::from_secs_f64);
    let (summary, reason) = drive(engine, &mut io, start, Duration::from_millis(l.period_ms), duration, stop)?;
    let sampler_counters = observer.counters();
    let sampler_report = observer.report();
    Ok(LiveOutcome { summary, reason, sampler, limits, config_json, sampler_counters, sampler_report })
}

pub fn run(a: &AttachArgs, out: &OutputOpts, root: &FsRoot, topo: &Topology, start: Instant) -> Result<()> {
    let l = LiveArgs::new(&a.agent, a.dry_run, a.decision_log.as_deref());
    l.check()?;
    let StaticPolicy { name, policy } = host_policy(&a.policy, &a.set, topo, "attach")?;
    // Permission and existence first: the same rules as ptrace read.
    read_target_maps(root, a.pid)?;
    let (sampler, _) = choose_sampler(&l, name, root, topo, start, false)?;
    let o = {
        let _signals = StopOnSignals::install();
        manage(&l, policy, sampler, a.pid, root, topo, start, &mut StopOnSignals::reason)?
    };
    let wall = start.elapsed();
    let agent_cpu_s = numalab_linux::act::own_cpu_seconds();
    let doc = serde_json::json!({
        "schema": "numalab.attach/1",
        "numalab_version": env!("CARGO_PKG_VERSION"),
        "mode": "dynamic",
        "pid": a.pid,
        "policy": { "name": name, "config": o.config_json },
        "host_nodes": topo.nodes.iter().map(|n| n.id).collect::<Vec<_>>(),
        "dry_run": a.dry_run,
        "sampler": o.sampler,
        "period_ms": a.agent.period_ms,
        "rate_limit_mbps": a.agent.rate_limit_mbps,
        "stopped_by": o.reason,
        "live": o.summary,
        "sampler_counters": sampler_counters_json(&o),
        "sampler_report": o.sampler_report,
        "wall_s": wall.as_secs_f64(),
        "agent_cpu_s": agent_cpu_s,
    });
    let mut table = Table::new(["numalab attach", "value"]);
    table.row(["process".to_string(), a.pid.to_string()]);
    live_rows(&mut table, name, &l, &o);
    table.row(["wall time".to_string(), format!("{:.3} s", wall.as_secs_f64())]);
    let share = if wall.as_secs_f64() > 0.0 { 100.0 * agent_cpu_s / wall.as_secs_f64() } else { 0.0 };
    table.row(["agent CPU".to_string(), format!("{agent_cpu_s:.3} s ({share:.2} % of one core)")]);
    write_text(out.out.as_deref(), &render_summary(out, &doc, &table)?)
}

/// The summary rows of a live run (shared by `attach` and `run`).
pub(crate) fn live_rows(t: &mut Table, name: &str, l: &LiveArgs, o: &LiveOutcome) {
    let s = &o.summary;
    t.row(["policy".to_string(), format!("{name}{}", if l.dry_run { " (dry run: nothing moved)" } else { "" })]);
    t.row(["sampler".to_string(), format!("{} ({})", o.sampler, o.limits)]);
    let stopped = match o.reason {
        StopReason::TargetExited => "the process exited",
        StopReason::Deadline => "--duration passed",
        StopReason::Signal => "SIGINT/SIGTERM",
    };
    t.row(["stopped by".to_string(), stopped.to_string()]);
    t.row(["periods".to_string(), format!("{} of {} ms", s.rounds, l.period_ms)]);
    t.row([
        "observations".to_string(),
        format!(
            "{} ({} not placeable: outside the managed mappings, unknown thread or page not resident)",
            s.observations, s.observations_unmapped
        ),
    ]);
    t.row(["hinting faults (from observations)".to_string(), s.hint_faults.to_string()]);
    t.row(["scan steps".to_string(), format!("{} ({} pages marked)", s.scan_steps, s.pages_marked)]);
    t.row(["decisions".to_string(), format!("{} made, {} applied, {} dry run", s.decisions, s.applied, s.dry_run)]);
    for (what, n) in &s.refused {
        t.row([format!("refused: {what}"), n.to_string()]);
    }
    t.row(["pages moved".to_string(), format!("{} in {} move_pages calls", s.pages_moved, s.move_pages_calls)]);
    t.row([
        "threads moved".to_string(),
        format!("{} ({} affinities restored, {} threads gone)", s.thread_moves, s.affinities_restored, s.affinities_gone),
    ]);
    if !o.sampler_counters.is_empty() {
        let c: Vec<String> = o.sampler_counters.iter().map(|(k, v)| format!("{k} {v}")).collect();
        t.row(["sampler counters".to_string(), c.join(", ")]);
    }
    if s.refused.keys().any(|k| k.starts_with("set_preferred_node")) {
        t.notes.push("note: Linux keeps a task's preferred NUMA node in the kernel, with no system call to set it: set_preferred_node decisions are refused".into());
    }
}

/// The sampler's counters as a JSON object (key order: the sampler's).
pub(crate) fn sampler_counters_json(o: &LiveOutcome) -> serde_json::Value {
    serde_json::Value::Object(o.sampler_counters.iter().map(|(k, v)| (k.to_string(), serde_json::Value::from(*v))).collect())
}
