//! `numalab attach --pid PID --policy autonuma`: a dynamic policy managing a running process
//! through the live engine (docs/live.md, "Dynamic policies on a running process"). JSON
//! contract `numalab.attach/1` with `mode = "dynamic"`.
use crate::cmd::attach::{read_target_maps, AttachArgs};
use crate::cmd::run::{host_policy, StaticPolicy};
use crate::output::{render_summary, write_text, OutputOpts, Table};
use crate::scenario::{usage, Usage};
use anyhow::{Context, Result};
use numalab_linux::act::pages::{MoveOptions, SystemPageMover};
use numalab_linux::live::perf_sampler::{check_samplers, monotonic_ns, PerfObserver};
use numalab_linux::live::{
    drive, AccessObserver, LiveConfig, LiveEngine, LiveHost, LiveIo, LiveSummary, ProcTarget, ScriptedObserver, StopOnSignals, StopReason,
    SystemThreadPlacer,
};
use numalab_linux::{FsRoot, Topology};
use std::io::Write;
use std::time::{Duration, Instant};

const PAGE_BYTES: u64 = 4096;

/// The observer `--sampler` asks for, or the sentence saying why none can run.
fn observer(a: &AttachArgs, policy: &str, root: &FsRoot, topo: &Topology, start_ns: u64) -> Result<Box<dyn AccessObserver>> {
    if let Some(path) = a.sampler.strip_prefix("replay:") {
        let text = std::fs::read_to_string(path).with_context(|| format!("--sampler replay:{path}: cannot read it"))?;
        let o = ScriptedObserver::from_json_lines(&text).map_err(|e| Usage(format!("--sampler replay:{path}: {e}")))?;
        return Ok(Box::new(o));
    }
    let checks = check_samplers(root);
    let pick = |name: &str| checks.iter().find(|c| c.sampler == name);
    let chosen = match a.sampler.as_str() {
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
        "perf" => {
            let mut cpu_node = Vec::new();
            for n in &topo.nodes {
                for &c in &n.cpus {
                    if cpu_node.len() <= c as usize {
                        cpu_node.resize(c as usize + 1, None);
                    }
                    cpu_node[c as usize] = Some(n.id);
                }
            }
            Ok(Box::new(PerfObserver::open(root.clone(), a.pid, cpu_node, a.sample_period, start_ns).map_err(|e| Usage(e.to_string()))?))
        }
        other => usage!("--sampler {other}: not built"),
    }
}

pub fn run(a: &AttachArgs, out: &OutputOpts, root: &FsRoot, topo: &Topology, start: Instant) -> Result<()> {
    if a.period_ms == 0 {
        usage!("--period-ms 0: the period must be at least 1 ms");
    }
    if let Some(d) = a.duration {
        if !(d.is_finite() && d > 0.0) {
            usage!("--duration {d}: must be a finite number of seconds > 0");
        }
    }
    let StaticPolicy { name, policy } = host_policy(&a.policy, &a.set, topo, "attach")?;
    // Permission and existence first: the same rules as ptrace read.
    read_target_maps(root, a.pid)?;
    let start_ns = monotonic_ns();
    let mut observer = observer(a, name, root, topo, start_ns)?;
    let mut target = match ProcTarget::new(root.clone(), a.pid) {
        Ok(t) => t,
        Err(e) if e.is_not_found() => usage!("--pid {}: no such process", a.pid),
        Err(e) => return Err(e.into()),
    };
    let mut mover = match SystemPageMover::for_process(a.pid) {
        Ok(m) => m,
        Err(e) if e.is_not_found() => usage!("--pid {}: no such process", a.pid),
        Err(e) => return Err(e.into()),
    };
    let mut placer = SystemThreadPlacer { pid: a.pid as i32 };
    let cfg = LiveConfig {
        dry_run: a.dry_run,
        moves: MoveOptions {
            rate_limit_bytes_per_s: (a.rate_limit_mbps > 0.0).then_some((a.rate_limit_mbps * 1e6) as u64),
            page_bytes: PAGE_BYTES,
            ..Default::default()
        },
        ..Default::default()
    };
    let config_json = crate::scenario::tree_json(&toml::Value::Table(policy.config_toml()));
    let engine = LiveEngine::new(policy, LiveHost::from_topology(topo, PAGE_BYTES), cfg, a.pid as i32);
    let mut log_file = match &a.decision_log {
        Some(p) => Some(std::io::BufWriter::new(
            std::fs::File::create(p).with_context(|| format!("cannot create the decision log {}", p.display()))?,
        )),
        None => None,
    };
    let sampler_name = observer.name();
    let limits = observer.limits();
    let (summary, reason) = {
        let _signals = StopOnSignals::install();
        let mut io = LiveIo {
            target: &mut target,
            observer: observer.as_mut(),
            mover: &mut mover,
            placer: &mut placer,
            log: log_file.as_mut().map(|f| f as &mut dyn Write),
        };
        let duration = a.duration.map(Duration::from_secs_f64);
        drive(engine, &mut io, start, Duration::from_millis(a.period_ms), duration, &StopOnSignals::stopped)?
    };
    let wall = start.elapsed();
    let agent_cpu_s = numalab_linux::act::own_cpu_seconds();
    let doc = serde_json::json!({
        "schema": "numalab.attach/1",
        "numalab_version": env!("CARGO_PKG_VERSION"),
        "mode": "dynamic",
        "pid": a.pid,
        "policy": { "name": name, "config": config_json },
        "host_nodes": topo.nodes.iter().map(|n| n.id).collect::<Vec<_>>(),
        "dry_run": a.dry_run,
        "sampler": sampler_name,
        "period_ms": a.period_ms,
        "rate_limit_mbps": a.rate_limit_mbps,
        "stopped_by": reason,
        "live": summary,
        "wall_s": wall.as_secs_f64(),
        "agent_cpu_s": agent_cpu_s,
    });
    let table = summary_table(name, a, sampler_name, limits, &summary, reason, wall, agent_cpu_s);
    write_text(out.out.as_deref(), &render_summary(out, &doc, &table)?)
}

#[allow(clippy::too_many_arguments)]
fn summary_table(
    name: &str,
    a: &AttachArgs,
    sampler: &str,
    limits: &str,
    s: &LiveSummary,
    reason: StopReason,
    wall: Duration,
    agent_cpu_s: f64,
) -> Table {
    let mut t = Table::new(["numalab attach", "value"]);
    t.row(["process".to_string(), a.pid.to_string()]);
    t.row(["policy".to_string(), format!("{name}{}", if a.dry_run { " (dry run: nothing moved)" } else { "" })]);
    t.row(["sampler".to_string(), format!("{sampler} ({limits})")]);
    let stopped = match reason {
        StopReason::TargetExited => "the process exited",
        StopReason::Deadline => "--duration passed",
        StopReason::Signal => "SIGINT/SIGTERM",
    };
    t.row(["stopped by".to_string(), stopped.to_string()]);
    t.row(["periods".to_string(), format!("{} of {} ms", s.rounds, a.period_ms)]);
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
    t.row(["wall time".to_string(), format!("{:.3} s", wall.as_secs_f64())]);
    let share = if wall.as_secs_f64() > 0.0 { 100.0 * agent_cpu_s / wall.as_secs_f64() } else { 0.0 };
    t.row(["agent CPU".to_string(), format!("{agent_cpu_s:.3} s ({share:.2} % of one core)")]);
    if s.refused.keys().any(|k| k.starts_with("set_preferred_node")) {
        t.notes.push("note: Linux keeps a task's preferred NUMA node in the kernel, with no system call to set it: set_preferred_node decisions are refused".into());
    }
    t
}
