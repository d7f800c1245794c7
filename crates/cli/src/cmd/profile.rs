//! `numalab profile`: perf counters and NUMA state of a command or a running process, and
//! `numalab profile diff a.json b.json`. JSON contract `numalab.profile/1` (docs/profile.md).
use crate::output::{emit, write_text, Format, OutputOpts, Table};
use crate::scenario::{usage, Usage};
use anyhow::{bail, Context, Result};
use numalab_core::profile::{self, diff, EventStatus, ProfileReport, Scope, DEFAULT_EVENTS};
use numalab_linux::session::{self, SessionConfig, TargetSpec};
use numalab_linux::FsRoot;
use std::path::{Path, PathBuf};

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum ScopeArg {
    Thread,
    Core,
    System,
}

impl From<ScopeArg> for Scope {
    fn from(s: ScopeArg) -> Scope {
        match s {
            ScopeArg::Thread => Scope::Thread,
            ScopeArg::Core => Scope::Core,
            ScopeArg::System => Scope::System,
        }
    }
}

#[derive(clap::Subcommand, Debug)]
pub enum ProfileAction {
    /// Compare two profiles (from sim or a real machine): per quantity a, b, b − a and the
    /// effect 100·(b − a)/a. A is the baseline (e.g. NUMA balancing off).
    Diff { a: PathBuf, b: PathBuf },
    /// List the event catalogue and the named groups.
    Events,
}

#[derive(clap::Args, Debug)]
#[command(args_conflicts_with_subcommands = true)]
pub struct ProfileArgs {
    #[command(subcommand)]
    pub action: Option<ProfileAction>,
    /// Events to count, comma-separated catalogue IDs or perf names (sw.page_faults,
    /// page-faults, node.read.remote, …). Default: software events plus cycles,
    /// instructions, LLC and node reads.
    #[arg(long, value_delimiter = ',', conflicts_with = "group")]
    pub events: Vec<String>,
    /// A named event group: software, core, llc, node.
    #[arg(long)]
    pub group: Option<String>,
    /// Sampling interval of the timeline and of the NUMA state, milliseconds.
    #[arg(long, default_value_t = 1000, value_name = "MS")]
    pub interval: u64,
    /// thread: the target's threads (inherited by threads created later); core: everything on
    /// the CPUs the target may use; system: everything on every CPU (includes all processes).
    #[arg(long, value_enum, default_value = "thread")]
    pub scope: ScopeArg,
    /// Attach to a running process (all its threads, and new ones as they appear).
    #[arg(long, conflicts_with = "command")]
    pub pid: Option<u32>,
    /// Stop after this many milliseconds (useful with --pid).
    #[arg(long, value_name = "MS")]
    pub duration: Option<u64>,
    /// Open counters disabled; start with SIGUSR1 or `start [label]` on the control FIFO.
    #[arg(long)]
    pub start_disabled: bool,
    /// A FIFO the target (or a script) writes `start [label]` / `stop` lines to, to mark
    /// phases. SIGUSR1 / SIGUSR2 to the profiler do the same.
    #[arg(long, value_name = "FIFO")]
    pub control: Option<PathBuf>,
    /// When events cannot all be counted together, rerun the command once per group instead
    /// of leaving the rest uncounted. Never multiplexes.
    #[arg(long)]
    pub repeat_split: bool,
    /// Hardware counters one group may use when planning --repeat-split runs.
    #[arg(long, default_value_t = 4)]
    pub counters: usize,
    /// Also write the timeline as CSV to FILE.
    #[arg(long, value_name = "FILE")]
    pub timeline_csv: Option<PathBuf>,
    /// The command to profile, after `--`.
    #[arg(last = true, value_name = "CMD")]
    pub command: Vec<String>,
}

/// Resolve names to catalogue IDs; unknown names are errors, `imc` and `imc.read[c]`-style
/// open catalogue names pass through (the backend reports what it cannot count).
pub fn resolve_events(a: &ProfileArgs) -> Result<Vec<String>> {
    let names: Vec<String> = match (&a.group, a.events.is_empty()) {
        (Some(g), _) => profile::group(g)
            .with_context(|| {
                format!("unknown group `{g}`; known: {}", profile::GROUPS.iter().map(|(n, _)| *n).collect::<Vec<_>>().join(", "))
            })?
            .iter()
            .map(|s| s.to_string())
            .collect(),
        (None, true) => DEFAULT_EVENTS.iter().map(|s| s.to_string()).collect(),
        (None, false) => a.events.clone(),
    };
    let mut out: Vec<String> = Vec::new();
    for n in names {
        let id = match profile::lookup(n.trim()) {
            Some(d) => d.id.to_string(),
            // Memory controllers: `imc` (every one) or one controller's reads or writes; the
            // session finds the controllers (docs/profile.md, "Memory controllers").
            None if numalab_linux::session::is_imc(n.trim()) => n.trim().to_string(),
            None => bail!("unknown event `{n}`; see `numalab profile events`"),
        };
        if !out.contains(&id) {
            out.push(id);
        }
    }
    Ok(out)
}

fn cell(v: Option<f64>) -> String {
    match v {
        Some(x) if x.fract() == 0.0 && x.abs() < 1e15 => format!("{x:.0}"),
        Some(x) => format!("{x:.3}"),
        None => String::new(),
    }
}

/// The human summary: events, derived metrics, pages per node, non-zero NUMA counters.
pub fn summary_table(r: &ProfileReport) -> Table {
    let mut t = Table::new(["item", "value", "status"]);
    for e in &r.events {
        let v = match (e.value, e.scaled_value) {
            (Some(_), Some(s)) => format!("{s:.0} (scaled)"),
            (Some(v), None) => v.to_string(),
            _ => String::new(),
        };
        t.row([format!("{} [{}]", e.name, e.scope.as_str()), v, e.status.as_str().to_string()]);
        if let Some(reason) = &e.reason {
            t.notes.push(format!("{}: {reason}", e.name));
        }
    }
    for d in r.derived.iter().filter(|d| d.status == EventStatus::Ok) {
        t.row([d.name.clone(), cell(d.value), "ok".into()]);
    }
    for p in &r.numa.pages {
        t.row([format!("pages node{} anon/file/huge", p.node), format!("{}/{}/{}", p.anon_bytes, p.file_bytes, p.huge_bytes), "ok".into()]);
    }
    for (k, c) in &r.numa.vmstat {
        if c.value != Some(0) {
            t.row([format!("vmstat {k}"), c.value.map(|v| v.to_string()).unwrap_or_default(), c.status.as_str().into()]);
        }
    }
    if let Some(s) = &r.numa.sched {
        if let Some(v) = s.numa_pages_migrated {
            t.row(["sched numa_pages_migrated".to_string(), v.to_string(), "ok".into()]);
        }
        if let Some(v) = s.numa_preferred_nid {
            t.row(["sched numa_preferred_nid".to_string(), v.to_string(), "ok".into()]);
        }
    }
    t.notes.push(format!(
        "target pid {} ran {} ms (exit {}), {} threads seen; numa_balancing = {}; virtualized = {}",
        r.target.pid.map(|p| p.to_string()).unwrap_or_else(|| "?".into()),
        r.target.duration_ms,
        r.target.exit_code.map(|c| c.to_string()).unwrap_or_else(|| "-".into()),
        r.target.threads_seen,
        r.environment.numa_balancing.map(|b| b.to_string()).unwrap_or_else(|| "unsupported".into()),
        r.environment.virtualized
    ));
    t.notes.extend(r.numa.notes.iter().cloned());
    t.notes.extend(r.notes.iter().cloned());
    t.notes.push(
        "units: counts are events (task-clock and cpu-clock in ns); (scaled) = extrapolated from the time the counter ran; \
pages node anon/file/huge in bytes; vmstat and sched values are the kernel's counters (pages or events)"
            .into(),
    );
    t
}

/// The timeline as a table (CSV): empty cells for events without a value.
pub fn timeline_table(r: &ProfileReport) -> Table {
    let events: Vec<&str> = r.events.iter().map(|e| e.name.as_str()).collect();
    let mut nodes: Vec<u32> = r.timeline.iter().filter_map(|s| s.pages.as_ref()).flatten().map(|p| p.node).collect();
    nodes.sort_unstable();
    nodes.dedup();
    let vm: Vec<&str> = ["numa_hint_faults", "numa_pages_migrated", "pgmigrate_success", "pgpromote_success"].to_vec();
    let mut headers = vec!["t_ms".to_string(), "enabled".into(), "label".into()];
    headers.extend(events.iter().map(|e| e.to_string()));
    headers.extend(nodes.iter().map(|n| format!("node{n}_total_bytes")));
    headers.extend(vm.iter().map(|k| format!("vmstat.{k}")));
    let mut t = Table::new(headers);
    for s in &r.timeline {
        let mut row = vec![s.t_ms.to_string(), s.enabled.to_string(), s.label.clone().unwrap_or_default()];
        row.extend(events.iter().map(|e| s.events.get(*e).map(|v| v.to_string()).unwrap_or_default()));
        row.extend(nodes.iter().map(|n| {
            s.pages.as_ref().and_then(|p| p.iter().find(|x| x.node == *n)).map(|p| p.total_bytes.to_string()).unwrap_or_default()
        }));
        row.extend(vm.iter().map(|k| s.vmstat.get(*k).map(|v| v.to_string()).unwrap_or_default()));
        t.row(row);
    }
    t
}

fn read_report(path: &Path) -> Result<ProfileReport> {
    let text = crate::scenario::read_user_file(path)?;
    parse_report(&text, &path.display().to_string())
}

/// Parse a `numalab.profile/1` document (`origin` names it in errors).
pub fn parse_report(text: &str, origin: &str) -> Result<ProfileReport> {
    let r: ProfileReport =
        serde_json::from_str(text).map_err(|e| anyhow::Error::new(Usage(format!("{origin} is not a numalab.profile/1 document: {e}"))))?;
    if r.schema != profile::PROFILE_SCHEMA {
        usage!("{origin}: schema `{}`, expected `{}`", r.schema, profile::PROFILE_SCHEMA);
    }
    Ok(r)
}

fn run_diff(a: &Path, b: &Path, out: &OutputOpts) -> Result<()> {
    let d = diff(&read_report(a)?, &read_report(b)?);
    let mut t = Table::new(["name", "a", "b", "delta", "effect_pct", "status"]);
    for e in &d.entries {
        t.row([e.name.clone(), cell(e.a), cell(e.b), cell(e.delta), cell(e.effect_pct), e.status.as_str().to_string()]);
    }
    t.notes.extend(d.notes.iter().cloned());
    emit(out, &serde_json::to_value(&d)?, &t)
}

fn list_events(out: &OutputOpts) -> Result<()> {
    let mut t = Table::new(["id", "perf_name", "kind", "meaning"]);
    for d in profile::CATALOGUE {
        t.row([d.id, d.perf_name, &format!("{:?}", d.kind).to_lowercase(), d.meaning]);
    }
    for (g, evs) in profile::GROUPS {
        t.notes.push(format!("group {g}: {}", evs.join(",")));
    }
    let json = serde_json::json!({
        "events": profile::CATALOGUE.iter().map(|d| serde_json::json!({"id": d.id, "perf_name": d.perf_name, "kind": d.kind, "meaning": d.meaning})).collect::<Vec<_>>(),
        "groups": profile::GROUPS.iter().map(|(g, e)| serde_json::json!({"name": g, "events": e})).collect::<Vec<_>>(),
    });
    emit(out, &json, &t)
}

pub fn run(a: &ProfileArgs, out: &OutputOpts) -> Result<()> {
    match &a.action {
        Some(ProfileAction::Diff { a: pa, b: pb }) => return run_diff(pa, pb, out),
        Some(ProfileAction::Events) => return list_events(out),
        None => {}
    }
    let target = match (a.pid, a.command.is_empty()) {
        (Some(0), _) => usage!("--pid 0 names no process (0 means the caller itself to the kernel); give the pid of a running process"),
        (Some(pid), true) => TargetSpec::Pid(pid),
        (None, false) => TargetSpec::Command(a.command.clone()),
        (Some(_), false) => usage!("give either --pid or a command after `--`, not both"),
        (None, true) => usage!("nothing to profile: give a command after `--` or --pid PID"),
    };
    if a.interval == 0 {
        usage!("--interval must be at least 1 ms");
    }
    let cfg = SessionConfig {
        target,
        events: resolve_events(a)?,
        scope: a.scope.into(),
        interval_ms: a.interval,
        duration_ms: a.duration,
        start_disabled: a.start_disabled,
        control_fifo: a.control.clone(),
        repeat_split: a.repeat_split,
        counters_per_group: a.counters,
        root: FsRoot::host(),
        child_stdout_to_stderr: out.out.is_none(),
        pre_exec: Vec::new(),
    };
    let report = session::run(&cfg)?;
    if let Some(p) = &a.timeline_csv {
        write_text(Some(p), &timeline_table(&report).render_csv())?;
    }
    let table = if out.resolved_format() == Format::Csv { timeline_table(&report) } else { summary_table(&report) };
    emit(out, &serde_json::to_value(&report)?, &table)?;
    // Like `perf stat`: exit with the profiled command's status (128 + N when killed by signal N).
    match (a.command.is_empty(), report.target.exit_code) {
        (false, Some(c)) if c != 0 => Err(anyhow::Error::new(ChildStatus(c.clamp(1, 255) as u8))),
        _ => Ok(()),
    }
}

/// The profiled (or launched) command exited with this non-zero status; `numalab` exits with it too.
#[derive(Debug)]
pub struct ChildStatus(pub u8);

impl std::fmt::Display for ChildStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "the command exited with status {}", self.0)
    }
}

impl std::error::Error for ChildStatus {}
