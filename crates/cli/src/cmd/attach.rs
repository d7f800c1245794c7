//! `numalab attach --pid PID --policy P`: apply a static policy to a running process by moving
//! its resident anonymous pages with move_pages (docs/live.md). JSON contract
//! `numalab.attach/1`.
use crate::cmd::run::{static_policy, StaticPolicy};
use crate::output::{render_summary, write_text, OutputOpts, Table};
use crate::scenario::{usage, Usage};
use anyhow::{Context, Result};
use numalab_linux::act::attach::{plan_attach, AttachPlan};
use numalab_linux::act::pages::{move_batched, MoveOptions, MoveStats, PageMove, PageOutcome, SystemPageMover};
use numalab_linux::act::range_move::plan_ranges;
use numalab_linux::procfs::maps::{read_maps, read_smaps_anon_huge};
use numalab_linux::{FsRoot, LinuxError, Topology};
use std::path::PathBuf;
use std::time::{Duration, Instant};

#[derive(clap::Args, Debug)]
#[command(after_help = "Examples:
  numalab attach --pid 1234 --policy round-4k                        interleave what is resident
  numalab attach --pid 1234 --policy bind --set policy.nodes=[1] --rate-limit-mbps 200
  numalab attach --pid 1234 --policy round-4k --dry-run --decision-log moves.jsonl
  numalab attach --pid 1234 --policy round-1g                        each 1 GiB range to its node
  numalab attach --pid 1234 --policy autonuma                        manage it until it exits
  numalab attach --pid 1234 --policy stable-numa --dry-run --duration 30 --decision-log d.jsonl

A static policy moves the process's resident private anonymous pages (heap, stacks, anonymous
mmap) once; it cannot change the memory policy the process allocates new pages with. A dynamic
policy (autonuma, stable-numa, ...) manages the process until it exits, --duration passes, or
numalab gets SIGINT/SIGTERM, from the memory accesses an access sampler observes (--sampler);
thread affinities it changed are restored at the end.")]
pub struct AttachArgs {
    /// The process to place.
    #[arg(long)]
    pub pid: u32,
    /// Static placement policy (`numalab list policies`), or a numactl name.
    #[arg(long)]
    pub policy: String,
    /// A policy setting, `policy.KEY=VALUE` (repeatable).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub set: Vec<String>,
    /// Plan and log the moves, but move nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Write every page decision and its outcome as JSON lines (`numalab.decisions/1`).
    #[arg(long, value_name = "FILE")]
    pub decision_log: Option<PathBuf>,
    #[command(flatten)]
    pub agent: crate::cmd::attach_dynamic::AgentArgs,
}

#[derive(serde::Serialize)]
pub(crate) struct PageRecord {
    run: u32,
    time_ns: u64,
    cause: AttachCause,
    decision: MigrateDecision,
    outcome: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    reason: Option<&'static str>,
}

/// A page decision of the decision log: `cause.event` is `attach`, or `range_scan` for
/// round-1g's periodic passes; `outcome` `None` is a dry run.
pub(crate) fn move_record(event: &'static str, time_ns: u64, m: &PageMove, outcome: Option<PageOutcome>) -> PageRecord {
    let (outcome, reason) = outcome.map_or(("dry_run", None), outcome_strs);
    PageRecord {
        run: 0,
        time_ns,
        cause: AttachCause { event },
        decision: MigrateDecision { kind: "migrate_page", space: 0, page: m.addr / 4096, to: m.node, pages: m.pages },
        outcome,
        reason,
    }
}

/// `cause` of every attach record: `{"event":"attach"}`.
#[derive(serde::Serialize)]
struct AttachCause {
    event: &'static str,
}

/// The simulator's `migrate_page` decision (docs/json.md), with `pages` for a huge page.
#[derive(serde::Serialize)]
struct MigrateDecision {
    kind: &'static str,
    space: u32,
    /// Virtual page number.
    page: u64,
    /// Kernel node id.
    to: i32,
    #[serde(skip_serializing_if = "is_base_page")]
    pages: u32,
}

fn is_base_page(pages: &u32) -> bool {
    *pages == 1
}

fn outcome_strs(o: PageOutcome) -> (&'static str, Option<&'static str>) {
    match o {
        PageOutcome::Moved => ("applied", None),
        PageOutcome::Busy => ("refused", Some("busy")),
        PageOutcome::Shared => ("refused", Some("shared")),
        PageOutcome::NotPresent => ("refused", Some("not_present")),
        PageOutcome::NoMemory => ("refused", Some("node_full")),
        PageOutcome::ProcessGone => ("refused", Some("process_gone")),
        PageOutcome::Failed => ("refused", Some("failed")),
    }
}

pub fn run(a: &AttachArgs, out: &OutputOpts) -> Result<()> {
    if a.pid == 0 {
        usage!("--pid 0 names no process");
    }
    if a.pid == std::process::id() {
        usage!("--pid {}: numalab cannot attach to itself", a.pid);
    }
    if !(a.agent.rate_limit_mbps.is_finite() && a.agent.rate_limit_mbps >= 0.0) {
        usage!("--rate-limit-mbps {}: must be a finite number >= 0", a.agent.rate_limit_mbps);
    }
    let start = Instant::now();
    let root = FsRoot::host();
    let topo = Topology::read(&root).context("cannot read the NUMA topology")?;
    let (canonical, _) = crate::scenario::canonical_policy(&a.policy)?;
    if numalab_policy::find(canonical)?.kind == numalab_policy::PolicyKind::Dynamic {
        return crate::cmd::attach_dynamic::run(a, out, &root, &topo, start);
    }
    let StaticPolicy { name, mut policy } = static_policy(&a.policy, &a.set, &topo, "attach")?;
    // round-1g: every resident page to its range's node (docs/live.md, "round-1g by moving
    // pages").
    let ranges = if name == "round-1g" {
        let map = crate::cmd::round_1g::range_map(policy.as_ref(), &topo)?;
        if !crate::cmd::round_1g::agent_moves(&map) {
            usage!(
                "{}={}: numalab attach moves pages per range of at least 2 MiB (a transparent huge page could span two smaller ranges)",
                numalab_linux::act::range_bind::RANGE_ENV,
                map.range_bytes
            );
        }
        Some(map)
    } else {
        None
    };
    let maps = read_target_maps(&root, a.pid)?;
    // Without smaps (a kernel without it, the process gone) every page is a base page.
    let anon_huge = read_smaps_anon_huge(&root, a.pid).unwrap_or_default();
    const PAGE_BYTES: u64 = 4096;
    let pid = a.pid as i32;
    // Bound to the process's start time: a pid reused after the target exits is never touched.
    let mut mover = match SystemPageMover::for_process(a.pid) {
        Ok(m) => m,
        Err(e) if e.is_not_found() => usage!("--pid {}: no such process", a.pid),
        Err(e) => return Err(e.into()),
    };
    let plan = match &ranges {
        Some(map) => plan_ranges(&mut mover, pid, &maps, map, PAGE_BYTES)?,
        None => plan_attach(&mut mover, pid, &maps, &anon_huge, policy.as_mut(), &topo, PAGE_BYTES)?,
    };
    let mut records: Vec<PageRecord> = Vec::new();
    let cause = || AttachCause { event: "attach" };
    let decision = |m: &PageMove| MigrateDecision { kind: "migrate_page", space: 0, page: m.addr / PAGE_BYTES, to: m.node, pages: m.pages };
    let mut notes = Vec::new();
    let (plan, stats) = match plan {
        None => {
            notes.push(format!("process {} exited before anything was moved", a.pid));
            (AttachPlan::default(), MoveStats::default())
        }
        Some(plan) if a.dry_run => {
            let t = start.elapsed().as_nanos() as u64;
            for m in &plan.moves {
                records.push(PageRecord { run: 0, time_ns: t, cause: cause(), decision: decision(m), outcome: "dry_run", reason: None });
            }
            (plan, MoveStats { requested_pages: 0, ..Default::default() })
        }
        Some(plan) => {
            let opts = MoveOptions {
                rate_limit_bytes_per_s: (a.agent.rate_limit_mbps > 0.0).then_some((a.agent.rate_limit_mbps * 1e6) as u64),
                page_bytes: PAGE_BYTES,
                ..Default::default()
            };
            let log = a.decision_log.is_some();
            let stats = move_batched(&mut mover, pid, &plan.moves, &opts, &mut |m, o| {
                if log {
                    let (outcome, reason) = outcome_strs(o);
                    records.push(PageRecord {
                        run: 0,
                        time_ns: start.elapsed().as_nanos() as u64,
                        cause: cause(),
                        decision: decision(m),
                        outcome,
                        reason,
                    });
                }
            })?;
            if stats.process_gone {
                notes.push(format!("process {} exited during the move; the rest was not moved", a.pid));
            }
            (plan, stats)
        }
    };
    if let Some(path) = &a.decision_log {
        let mut text = String::new();
        for r in &records {
            text.push_str(&serde_json::to_string(r)?);
            text.push('\n');
        }
        write_text(Some(path), &text)?;
    }
    let wall = start.elapsed();
    let doc = serde_json::json!({
        "schema": "numalab.attach/1",
        "numalab_version": env!("CARGO_PKG_VERSION"),
        "pid": a.pid,
        "policy": { "name": name, "config": crate::scenario::tree_json(&toml::Value::Table(policy.config_toml())) },
        "host_nodes": topo.nodes.iter().map(|n| n.id).collect::<Vec<_>>(),
        "dry_run": a.dry_run,
        "rate_limit_mbps": a.agent.rate_limit_mbps,
        "range_bytes": ranges.as_ref().map(|m| m.range_bytes),
        "plan": plan,
        "planned_moves": plan.moves.len(),
        "planned_move_pages": plan.moves.iter().map(|m| m.pages as u64).sum::<u64>(),
        "move": stats,
        "notes": notes,
        "wall_s": wall.as_secs_f64(),
        "agent_cpu_s": numalab_linux::act::own_cpu_seconds(),
    });
    let mut table = summary(name, a, &plan, &stats, &notes, wall);
    if let Some(m) = &ranges {
        table.rows.insert(2, vec!["range size".to_string(), format!("{} bytes, range k on node k mod {}", m.range_bytes, m.home.len())]);
    }
    write_text(out.out.as_deref(), &render_summary(out, &doc, &table)?)
}

/// The target's memory map, with the errors a user can act on: no such process, or no
/// ptrace-read rights.
pub(crate) fn read_target_maps(root: &FsRoot, pid: u32) -> Result<Vec<numalab_linux::procfs::maps::MapsEntry>> {
    read_maps(root, pid).map_err(|e| match &e {
        LinuxError::Io { source, .. } if source.kind() == std::io::ErrorKind::NotFound => {
            anyhow::Error::new(Usage(format!("--pid {pid}: no such process")))
        }
        LinuxError::Io { source, .. } if source.kind() == std::io::ErrorKind::PermissionDenied => anyhow::Error::new(Usage(format!(
            "--pid {pid}: permission denied reading its memory map (attaching needs the rights of ptrace read: the same user, or CAP_SYS_PTRACE)"
        ))),
        _ => anyhow::Error::new(e),
    })
}

fn summary(name: &str, a: &AttachArgs, plan: &AttachPlan, s: &MoveStats, notes: &[String], wall: Duration) -> Table {
    let mut t = Table::new(["numalab attach", "value"]);
    t.row(["process".to_string(), a.pid.to_string()]);
    t.row(["policy".to_string(), name.to_string()]);
    t.row(["anonymous pages".to_string(), format!("{} scanned, {} resident", plan.scanned_pages, plan.resident_pages)]);
    let before: Vec<String> = plan.before.iter().map(|(n, p)| format!("node {n}: {p}")).collect();
    t.row(["resident before".to_string(), if before.is_empty() { "-".into() } else { before.join(", ") }]);
    t.row(["already placed".to_string(), plan.in_place_pages.to_string()]);
    if plan.huge_unit_pages > 0 {
        t.row(["in transparent huge pages (moved whole)".to_string(), plan.huge_unit_pages.to_string()]);
    }
    if plan.unplaceable_pages > 0 {
        t.row(["no room on any allowed node".to_string(), plan.unplaceable_pages.to_string()]);
    }
    if a.dry_run {
        t.row(["to move (dry run, nothing moved)".to_string(), plan.moves.iter().map(|m| m.pages as u64).sum::<u64>().to_string()]);
    } else {
        t.row(["moved".to_string(), s.count(PageOutcome::Moved).to_string()]);
        unmoved_rows(&mut t, |o| s.count(o), "process");
        t.row(["move_pages calls".to_string(), format!("{} (largest {} pages)", s.calls, s.largest_batch_pages)]);
    }
    t.row(["wall time".to_string(), format!("{:.3} s", wall.as_secs_f64())]);
    t.row(["agent CPU".to_string(), format!("{:.3} s", numalab_linux::act::own_cpu_seconds())]);
    t.notes.extend(notes.iter().cloned());
    t
}

/// One summary row per outcome, other than moved, that some pages had (`count`), in a fixed
/// order; `whose` names what exited ("process" for attach, "program" for a launched one).
pub(crate) fn unmoved_rows(t: &mut Table, count: impl Fn(PageOutcome) -> u64, whose: &str) {
    let gone = format!("not moved: {whose} exited");
    for (o, what) in [
        (PageOutcome::Busy, "busy after retries"),
        (PageOutcome::Shared, "shared with another process (skipped)"),
        (PageOutcome::NotPresent, "gone before their move"),
        (PageOutcome::NoMemory, "target node full"),
        (PageOutcome::ProcessGone, gone.as_str()),
        (PageOutcome::Failed, "failed"),
    ] {
        if count(o) > 0 {
            t.row([what.to_string(), count(o).to_string()]);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn page_records_are_the_documented_json() {
        let rec = |pages, outcome, reason| PageRecord {
            run: 0,
            time_ns: 5,
            cause: AttachCause { event: "attach" },
            decision: MigrateDecision { kind: "migrate_page", space: 0, page: 7, to: 1, pages },
            outcome,
            reason,
        };
        assert_eq!(
            serde_json::to_string(&rec(512, "applied", None)).unwrap(),
            r#"{"run":0,"time_ns":5,"cause":{"event":"attach"},"decision":{"kind":"migrate_page","space":0,"page":7,"to":1,"pages":512},"outcome":"applied"}"#
        );
        assert_eq!(
            serde_json::to_string(&rec(1, "refused", Some("busy"))).unwrap(),
            r#"{"run":0,"time_ns":5,"cause":{"event":"attach"},"decision":{"kind":"migrate_page","space":0,"page":7,"to":1},"outcome":"refused","reason":"busy"}"#
        );
    }
}
