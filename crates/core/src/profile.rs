//! The profile data model shared by the live Linux profiler and the simulator
//! (docs/profile.md): the event catalogue, per-event readings with an explicit status, NUMA state,
//! the timeline, derived metrics and the diff of two profiles. Pure data and arithmetic.
//!
//! # Contract
//!
//! [`ProfileReport`] serialises to the JSON contract `numalab.profile/1` (see
//! `docs/profile.md`). Every counter carries a [`EventStatus`]; its `value` is `null` unless the
//! status is `ok`. A counter that could not be counted is never reported as 0.
//!
//! # How a backend fills a report
//!
//! 1. `ProfileReport::new(Backend::Sim | Backend::Linux, target)`.
//! 2. For every requested event, push one [`EventReading`]: event IDs come from [`CATALOGUE`]
//!    (or an open-catalogue name such as `imc.read[3]`); use [`EventReading::ok`] with the raw
//!    count and the enabled/running times, or [`EventReading::not_ok`] with a status and a
//!    reason. A backend that time-slices groups sets `running_ns < enabled_ns`; `ok` then marks
//!    the reading `multiplexed` and fills `scaled_value` — never silently.
//!    The simulator counts every catalogue ID natively; it reports an ID listed in
//!    `sim_unsupported_events` as `Unsupported` with the reason "listed in
//!    sim_unsupported_events".
//! 3. Fill [`NumaSummary`]: `pages` (resident bytes per node at the end of the window, split
//!    anon/file/huge), `vmstat` (deltas of the `/proc/vmstat` names of docs/profile.md —
//!    `numa_hint_faults`, `numa_pages_migrated`, `pgmigrate_success`, … — the simulator uses
//!    the same names for the quantities it models and marks the rest `Unsupported`),
//!    `numastat` per node (allocation outcomes, `numa_hit`, `numa_miss`, …), and optionally
//!    `sched` (per-task NUMA balancing state).
//! 4. Optionally push [`TimelineSample`]s: per-interval deltas of events and counters, and the
//!    pages per node at the sample time.
//! 5. Call [`ProfileReport::finish`], which computes `derived` from `events` (operands with a
//!    non-`ok` status make the metric non-numeric with that status).
//!
//! Two reports from any backends compare with [`diff`].

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// JSON schema tag of a profile.
pub const PROFILE_SCHEMA: &str = "numalab.profile/1";
/// JSON schema tag of a profile diff.
pub const DIFF_SCHEMA: &str = "numalab.profile-diff/1";

/// Which counter facility an event needs (perfutil §1.1).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EventKind {
    Software,
    FixedCore,
    ProgrammableCore,
    Uncore,
}

/// One catalogue entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EventDef {
    /// Stable ID used in every output (`sw.page_faults`).
    pub id: &'static str,
    /// The `perf` tool's name for the generic event, accepted as an alias.
    pub perf_name: &'static str,
    pub kind: EventKind,
    pub meaning: &'static str,
}

/// The event catalogue (perfutil §1.2 plus `sw.task_clock`). Open: backends may report other
/// IDs (e.g. `imc.read[2]`), which [`lookup`] does not know.
pub const CATALOGUE: &[EventDef] = &[
    EventDef { id: "sw.task_clock", perf_name: "task-clock", kind: EventKind::Software, meaning: "CPU time of the monitored threads, ns" },
    EventDef { id: "sw.page_faults", perf_name: "page-faults", kind: EventKind::Software, meaning: "page faults of the monitored context" },
    EventDef { id: "sw.page_faults.minor", perf_name: "minor-faults", kind: EventKind::Software, meaning: "faults served without I/O" },
    EventDef { id: "sw.page_faults.major", perf_name: "major-faults", kind: EventKind::Software, meaning: "faults that needed I/O" },
    EventDef { id: "sw.context_switches", perf_name: "context-switches", kind: EventKind::Software, meaning: "context switches" },
    EventDef {
        id: "sw.cpu_migrations",
        perf_name: "cpu-migrations",
        kind: EventKind::Software,
        meaning: "moves of a thread from one CPU to another",
    },
    EventDef { id: "cpu.cycles", perf_name: "cycles", kind: EventKind::FixedCore, meaning: "core cycles" },
    EventDef { id: "cpu.instructions", perf_name: "instructions", kind: EventKind::FixedCore, meaning: "instructions retired" },
    EventDef { id: "cpu.ref_cycles", perf_name: "ref-cycles", kind: EventKind::FixedCore, meaning: "reference (constant-rate) cycles" },
    EventDef {
        id: "llc.read.access",
        perf_name: "LLC-loads",
        kind: EventKind::ProgrammableCore,
        meaning: "loads looking up the local LLC",
    },
    EventDef {
        id: "llc.read.miss",
        perf_name: "LLC-load-misses",
        kind: EventKind::ProgrammableCore,
        meaning: "loads missing the local LLC",
    },
    EventDef {
        id: "llc.write.access",
        perf_name: "LLC-stores",
        kind: EventKind::ProgrammableCore,
        meaning: "stores (RFO) looking up the local LLC",
    },
    EventDef {
        id: "llc.write.miss",
        perf_name: "LLC-store-misses",
        kind: EventKind::ProgrammableCore,
        meaning: "stores (RFO) missing the local LLC",
    },
    EventDef {
        id: "node.read.local",
        perf_name: "node-loads",
        kind: EventKind::ProgrammableCore,
        meaning: "reads served by the local node",
    },
    EventDef {
        id: "node.read.remote",
        perf_name: "node-load-misses",
        kind: EventKind::ProgrammableCore,
        meaning: "reads served by a remote node (cache or memory)",
    },
    EventDef {
        id: "node.write.local",
        perf_name: "node-stores",
        kind: EventKind::ProgrammableCore,
        meaning: "writes served by the local node",
    },
    EventDef {
        id: "node.write.remote",
        perf_name: "node-store-misses",
        kind: EventKind::ProgrammableCore,
        meaning: "writes served by a remote node",
    },
];

/// Event groups selectable by name (`--group`).
pub const GROUPS: &[(&str, &[&str])] = &[
    (
        "software",
        &["sw.task_clock", "sw.page_faults", "sw.page_faults.minor", "sw.page_faults.major", "sw.context_switches", "sw.cpu_migrations"],
    ),
    ("core", &["cpu.cycles", "cpu.instructions", "cpu.ref_cycles"]),
    ("llc", &["llc.read.access", "llc.read.miss", "llc.write.access", "llc.write.miss"]),
    ("node", &["node.read.local", "node.read.remote", "node.write.local", "node.write.remote", "llc.read.miss", "llc.write.miss"]),
];

/// Default event set: every software event plus the hardware events of the derived metrics.
pub const DEFAULT_EVENTS: &[&str] = &[
    "sw.task_clock",
    "sw.page_faults",
    "sw.page_faults.minor",
    "sw.page_faults.major",
    "sw.context_switches",
    "sw.cpu_migrations",
    "cpu.cycles",
    "cpu.instructions",
    "llc.read.access",
    "llc.read.miss",
    "node.read.local",
    "node.read.remote",
];

/// Catalogue entry by ID or `perf` alias.
pub fn lookup(name: &str) -> Option<&'static EventDef> {
    CATALOGUE.iter().find(|d| d.id == name || d.perf_name == name)
}

/// Events of a named group.
pub fn group(name: &str) -> Option<&'static [&'static str]> {
    GROUPS.iter().find(|(g, _)| *g == name).map(|(_, ev)| *ev)
}

/// Where a counter counts (perfutil §3).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum Scope {
    /// The target's threads (with inheritance), on any CPU.
    #[default]
    Thread,
    /// Everything on the CPUs the target may run on.
    Core,
    /// Everything on every CPU ("includes all processes").
    System,
}

impl Scope {
    pub fn as_str(self) -> &'static str {
        match self {
            Scope::Thread => "thread",
            Scope::Core => "core",
            Scope::System => "system",
        }
    }
}

/// Outcome of one counter. Only `Ok` carries a value.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EventStatus {
    Ok,
    /// The machine cannot count it (no PMU, no encoding, procfs field missing).
    Unsupported,
    /// The kernel refused for lack of privilege.
    Denied,
    /// Opened, but never counted (pinned group not schedulable, or never ran).
    NotCounted,
    /// Opening or reading failed for another reason (errno in `reason`).
    Failed,
    /// A derived metric whose denominator is zero.
    Undefined,
}

impl EventStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            EventStatus::Ok => "ok",
            EventStatus::Unsupported => "unsupported",
            EventStatus::Denied => "denied",
            EventStatus::NotCounted => "not_counted",
            EventStatus::Failed => "failed",
            EventStatus::Undefined => "undefined",
        }
    }
}

/// One counter's result over the profile window.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct EventReading {
    pub name: String,
    pub scope: Scope,
    /// Raw count; `null` unless `status` is `ok`.
    pub value: Option<u64>,
    pub status: EventStatus,
    /// Why the status is not `ok` (errno, missing PMU, privilege needed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    #[serde(default)]
    pub enabled_ns: u64,
    #[serde(default)]
    pub running_ns: u64,
    /// `running_ns < enabled_ns`: the counter shared hardware with other groups.
    #[serde(default)]
    pub multiplexed: bool,
    /// `value · enabled / running`, only when multiplexed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scaled_value: Option<f64>,
    /// Run (of `--repeat-split`) that counted it, from 0.
    #[serde(default)]
    pub run: u32,
}

impl EventReading {
    /// A counted value. `running_ns == 0` with `enabled_ns > 0` is not a value: the counter
    /// never ran, so it becomes `NotCounted` (perfutil §8).
    pub fn ok(name: &str, scope: Scope, raw: u64, enabled_ns: u64, running_ns: u64) -> EventReading {
        if enabled_ns > 0 && running_ns == 0 {
            return EventReading::not_ok(name, scope, EventStatus::NotCounted, "never ran (time_running = 0)");
        }
        let multiplexed = running_ns < enabled_ns;
        let scaled_value = multiplexed.then(|| raw as f64 * enabled_ns as f64 / running_ns as f64);
        EventReading {
            name: name.to_string(),
            scope,
            value: Some(raw),
            status: EventStatus::Ok,
            reason: None,
            enabled_ns,
            running_ns,
            multiplexed,
            scaled_value,
            run: 0,
        }
    }

    pub fn not_ok(name: &str, scope: Scope, status: EventStatus, reason: impl Into<String>) -> EventReading {
        EventReading {
            name: name.to_string(),
            scope,
            value: None,
            status,
            reason: Some(reason.into()),
            enabled_ns: 0,
            running_ns: 0,
            multiplexed: false,
            scaled_value: None,
            run: 0,
        }
    }

    /// Best estimate of the count: scaled when multiplexed.
    pub fn estimate(&self) -> Option<f64> {
        match (self.status, self.value) {
            (EventStatus::Ok, Some(v)) => Some(self.scaled_value.unwrap_or(v as f64)),
            _ => None,
        }
    }
}

/// A number from procfs/sysfs or the simulator that may be missing on this system.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Counter {
    pub value: Option<i64>,
    pub status: EventStatus,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

impl Counter {
    pub fn ok(value: i64) -> Counter {
        Counter { value: Some(value), status: EventStatus::Ok, reason: None }
    }
    pub fn unsupported(reason: impl Into<String>) -> Counter {
        Counter { value: None, status: EventStatus::Unsupported, reason: Some(reason.into()) }
    }
}

/// Resident memory of the target on one node, bytes.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodePages {
    pub node: u32,
    /// Anonymous private memory (heap, stacks, anonymous mmap, THP).
    pub anon_bytes: u64,
    /// File-backed mappings (including their private copy-on-write pages).
    pub file_bytes: u64,
    /// hugetlbfs pages.
    pub huge_bytes: u64,
    pub total_bytes: u64,
}

/// Per-task NUMA-balancing state (`/proc/PID/sched`, docs/profile.md).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SchedNuma {
    pub numa_scan_seq: Option<i64>,
    pub numa_pages_migrated: Option<i64>,
    pub numa_preferred_nid: Option<i64>,
    pub total_numa_faults: Option<i64>,
    pub current_node: Option<i64>,
    pub numa_group_id: Option<i64>,
    /// Thread moves between CPUs (`se.nr_migrations`).
    pub nr_migrations: Option<i64>,
    /// Per node: `task_private`, `task_shared`, `group_private`, `group_shared` (advisory split).
    #[serde(default)]
    pub faults: Vec<NodeFaults>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeFaults {
    pub node: u32,
    pub task_private: i64,
    pub task_shared: i64,
    pub group_private: i64,
    pub group_shared: i64,
}

/// NUMA state over the window.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct NumaSummary {
    /// Pages per node at the last sample taken while the target was alive.
    pub pages: Vec<NodePages>,
    /// Largest `total_bytes` seen per node over the window.
    #[serde(default)]
    pub peak_total_bytes: BTreeMap<u32, u64>,
    /// `/proc/vmstat` NUMA, migration and tiering counters: delta over the window.
    #[serde(default)]
    pub vmstat: BTreeMap<String, Counter>,
    /// Per node allocation outcomes (`numastat`), delta over the window. Not access counts.
    #[serde(default)]
    pub numastat: BTreeMap<u32, BTreeMap<String, Counter>>,
    /// Per-task NUMA balancing state at the last sample (absent without NUMA balancing).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sched: Option<SchedNuma>,
    /// Why a part above is empty or missing.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

/// One interval of the timeline: deltas since the previous sample.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TimelineSample {
    /// Milliseconds since the profile started.
    pub t_ms: u64,
    /// Counting enabled during this interval (start/stop control).
    pub enabled: bool,
    /// Event deltas; absent for events that are not `ok`.
    pub events: BTreeMap<String, u64>,
    /// Resident bytes per node at the sample time (`null` when not sampled this interval).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pages: Option<Vec<NodePages>>,
    /// `/proc/vmstat` deltas of the tracked counters.
    #[serde(default)]
    pub vmstat: BTreeMap<String, i64>,
    /// Phase label set by the control channel, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Backend {
    Linux,
    Sim,
}

/// What was profiled.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Target {
    /// Command line (launched target) or empty when attached with `--pid`.
    #[serde(default)]
    pub command: Vec<String>,
    pub pid: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    pub duration_ms: u64,
    /// Threads seen over the window.
    #[serde(default)]
    pub threads_seen: u32,
    /// Simulator: machine / workload / policy names.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    /// The OpenMP runtime the target loaded and its wait settings; absent when none was found
    /// (docs/profile.md, "The OpenMP runtime").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub openmp: Option<OpenMp>,
}

/// An OpenMP runtime found in a profiled process (docs/profile.md, "The OpenMP runtime").
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct OpenMp {
    /// `libgomp` (GCC), `libomp` (LLVM) or `libiomp5` (Intel).
    pub runtime: String,
    /// The library as `/proc/PID/maps` names it.
    pub library: String,
    /// The variables of the process's environment that set the wait (`OMP_WAIT_POLICY`,
    /// `GOMP_SPINCOUNT`, `KMP_BLOCKTIME`, `KMP_LIBRARY`) and `OMP_NUM_THREADS`, as written.
    #[serde(default)]
    pub environment: BTreeMap<String, String>,
    /// The `--set` settings that make the simulator's barrier waiters wait as this process's do
    /// (docs/scheduler.md, "Barrier waits: spin, then sleep").
    pub sim_set: Vec<String>,
    /// Settings found that the simulator does not represent, each with why.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unrepresented: Vec<String>,
}

/// Controlled variables recorded with every run (perfutil §4.2 rule 4).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Environment {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kernel: Option<String>,
    #[serde(default)]
    pub virtualized: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub numa_balancing: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub perf_event_paranoid: Option<i32>,
    /// Kernel-mode counting was refused and events count user mode only.
    #[serde(default)]
    pub user_only: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nodes: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_model: Option<String>,
    #[serde(default)]
    pub interval_ms: u64,
    /// The memory controllers whose `imc.read[c]` / `imc.write[c]` were counted (uncore IMC
    /// PMUs, docs/profile.md "Memory controllers"); empty and absent otherwise.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub imc: Vec<ImcController>,
}

/// One memory controller of the profile: `c` of `imc.read[c]`, the PMU and CPU it was counted
/// on, and the node of that CPU.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ImcController {
    pub controller: u32,
    pub pmu: String,
    pub cpu: u32,
    /// The node of `cpu`; `null` when sysfs does not say.
    pub node: Option<u32>,
    /// Bytes one count stands for (the event's `.scale` × `.unit`; 64 for a CAS); `null`
    /// when the unit is not one of bytes.
    pub bytes_per_count: Option<f64>,
}

/// Which events were counted together in which run (`--repeat-split`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunPlan {
    pub run: u32,
    pub groups: Vec<Vec<String>>,
}

/// A derived metric; `value` is `null` unless `status` is `ok`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Derived {
    pub name: String,
    pub value: Option<f64>,
    pub status: EventStatus,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

impl Derived {
    fn ok(name: &str, v: f64) -> Derived {
        Derived { name: name.into(), value: Some(v), status: EventStatus::Ok, reason: None }
    }
    fn not_ok(name: &str, status: EventStatus, reason: String) -> Derived {
        Derived { name: name.into(), value: None, status, reason: Some(reason) }
    }
}

/// The whole profile (`numalab.profile/1`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ProfileReport {
    pub schema: String,
    pub backend: Backend,
    pub target: Target,
    #[serde(default)]
    pub environment: Environment,
    pub events: Vec<EventReading>,
    #[serde(default)]
    pub derived: Vec<Derived>,
    pub numa: NumaSummary,
    #[serde(default)]
    pub timeline: Vec<TimelineSample>,
    #[serde(default)]
    pub runs: Vec<RunPlan>,
    /// Totals per labelled phase (`start LABEL` … `stop` on the control channel), summed over
    /// the timeline samples that carry the label; absent without labels.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub phases: Vec<PhaseTotal>,
    /// Always present (docs/profile.md shows `"notes": []`), so consumers need not test for it.
    #[serde(default)]
    pub notes: Vec<String>,
}

impl ProfileReport {
    pub fn new(backend: Backend, target: Target) -> ProfileReport {
        ProfileReport {
            schema: PROFILE_SCHEMA.to_string(),
            backend,
            target,
            environment: Environment::default(),
            events: Vec::new(),
            derived: Vec::new(),
            numa: NumaSummary::default(),
            timeline: Vec::new(),
            runs: Vec::new(),
            phases: Vec::new(),
            notes: Vec::new(),
        }
    }

    pub fn event(&self, name: &str) -> Option<&EventReading> {
        self.events.iter().find(|e| e.name == name)
    }

    /// Compute the derived metrics from the events.
    pub fn finish(&mut self) {
        self.derived = derive_all(&self.events);
        self.phases = phase_totals(&self.timeline);
    }
}

/// Event totals of one labelled phase.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct PhaseTotal {
    pub label: String,
    /// Timeline samples (intervals) that carry the label.
    pub samples: u32,
    /// Event deltas summed over those samples.
    pub events: BTreeMap<String, u64>,
}

/// Per-label sums of the timeline's event deltas, labels in order of first appearance. A
/// phase that recurs (`start a`, `stop`, `start a`) adds up under its one label.
pub fn phase_totals(timeline: &[TimelineSample]) -> Vec<PhaseTotal> {
    let mut phases: Vec<PhaseTotal> = Vec::new();
    for s in timeline {
        let Some(label) = &s.label else { continue };
        let i = match phases.iter().position(|p| &p.label == label) {
            Some(i) => i,
            None => {
                phases.push(PhaseTotal { label: label.clone(), ..Default::default() });
                phases.len() - 1
            }
        };
        let p = &mut phases[i];
        p.samples += 1;
        for (name, v) in &s.events {
            *p.events.entry(name.clone()).or_insert(0) += v;
        }
    }
    phases
}

/// An operand of a derived metric: its estimate or why it has none.
pub type Operand = Result<f64, (EventStatus, String)>;

fn operand(events: &[EventReading], name: &str) -> Operand {
    match events.iter().find(|e| e.name == name) {
        None => Err((EventStatus::Unsupported, format!("{name} was not requested"))),
        Some(e) => {
            e.estimate().ok_or_else(|| (e.status, format!("{name}: {}", e.reason.clone().unwrap_or_else(|| e.status.as_str().into()))))
        }
    }
}

/// `100 · num / den`, with the status of the first failing operand, `Undefined` for den = 0.
pub fn ratio_pct(name: &str, num: Operand, den: Operand) -> Derived {
    match (num, den) {
        (Err((s, r)), _) | (_, Err((s, r))) => Derived::not_ok(name, s, r),
        (Ok(_), Ok(0.0)) => Derived::not_ok(name, EventStatus::Undefined, "denominator is 0".into()),
        (Ok(n), Ok(d)) => Derived::ok(name, 100.0 * n / d),
    }
}

/// `num / den` (a plain ratio such as IPC), statuses as in [`ratio_pct`].
pub fn ratio(name: &str, num: Operand, den: Operand) -> Derived {
    let mut d = ratio_pct(name, num, den);
    d.value = d.value.map(|v| v / 100.0);
    d
}

fn sum_operands(a: Operand, b: Operand) -> Operand {
    Ok(a? + b?)
}

/// Derived metrics of perfutil §5 that a single profile supports.
pub fn derive_all(events: &[EventReading]) -> Vec<Derived> {
    let op = |n: &str| operand(events, n);
    let mut out = vec![
        ratio_pct("llc.read.miss_rate_pct", op("llc.read.miss"), op("llc.read.access")),
        ratio_pct("llc.write.miss_rate_pct", op("llc.write.miss"), op("llc.write.access")),
        ratio_pct(
            "llc.miss_rate_pct",
            sum_operands(op("llc.read.miss"), op("llc.write.miss")),
            sum_operands(op("llc.read.access"), op("llc.write.access")),
        ),
        // May exceed 100: the operands count in different domains; reported, never clamped.
        ratio_pct("node.read.miss_rate_pct", op("node.read.remote"), op("llc.read.miss")),
        ratio_pct("node.write.miss_rate_pct", op("node.write.remote"), op("llc.write.miss")),
        ratio_pct("node.read.remote_share_pct", op("node.read.remote"), sum_operands(op("node.read.local"), op("node.read.remote"))),
        ratio_pct("node.write.remote_share_pct", op("node.write.remote"), sum_operands(op("node.write.local"), op("node.write.remote"))),
        ratio("cpu.ipc", op("cpu.instructions"), op("cpu.cycles")),
    ];
    // Controller shares, when the backend reports imc.read[c] / imc.write[c].
    let mut channels: Vec<u32> = events.iter().filter_map(|e| channel_of(&e.name)).collect();
    channels.sort_unstable();
    channels.dedup();
    if !channels.is_empty() {
        let per_channel: Vec<Operand> =
            channels.iter().map(|c| sum_operands(op(&format!("imc.read[{c}]")), op(&format!("imc.write[{c}]")))).collect();
        out.extend(share_metrics("imc", &per_channel));
    }
    out
}

fn channel_of(name: &str) -> Option<u32> {
    let rest = name.strip_prefix("imc.read[").or_else(|| name.strip_prefix("imc.write["))?;
    rest.strip_suffix(']')?.parse().ok()
}

/// Shares of a set of counts against the uniform line `100 / C` (perfutil §5 controller share):
/// per-part share, the uniform line, the largest share, the largest absolute deviation from
/// the line and the RSD (sample) of the shares. `prefix` names them (`imc.share_pct[0]`, …).
pub fn share_metrics(prefix: &str, counts: &[Operand]) -> Vec<Derived> {
    let names = |what: &str| format!("{prefix}.{what}");
    let failing = counts.iter().find_map(|c| c.clone().err());
    let mut out = Vec::new();
    let summary = ["uniform_pct", "max_share_pct", "max_abs_dev_pct", "share_rsd_pct"];
    if let Some((s, r)) = failing {
        for (i, _) in counts.iter().enumerate() {
            out.push(Derived::not_ok(&format!("{prefix}.share_pct[{i}]"), s, r.clone()));
        }
        for what in summary {
            out.push(Derived::not_ok(&names(what), s, r.clone()));
        }
        return out;
    }
    let values: Vec<f64> = counts.iter().map(|c| *c.as_ref().unwrap_or(&0.0)).collect();
    match shares_pct(&values) {
        None => {
            for (i, _) in counts.iter().enumerate() {
                out.push(Derived::not_ok(&format!("{prefix}.share_pct[{i}]"), EventStatus::Undefined, "all counts are 0".into()));
            }
            for what in summary {
                out.push(Derived::not_ok(&names(what), EventStatus::Undefined, "all counts are 0".into()));
            }
        }
        Some(sh) => {
            for (i, s) in sh.shares_pct.iter().enumerate() {
                out.push(Derived::ok(&format!("{prefix}.share_pct[{i}]"), *s));
            }
            out.push(Derived::ok(&names("uniform_pct"), sh.uniform_pct));
            out.push(Derived::ok(&names("max_share_pct"), sh.max_share_pct));
            out.push(Derived::ok(&names("max_abs_dev_pct"), sh.max_abs_dev_pct));
            match sh.rsd_pct {
                Some(r) => out.push(Derived::ok(&names("share_rsd_pct"), r)),
                None => out.push(Derived::not_ok(&names("share_rsd_pct"), EventStatus::Undefined, "fewer than 2 parts".into())),
            }
        }
    }
    out
}

/// Result of [`shares_pct`].
#[derive(Clone, Debug, PartialEq)]
pub struct Shares {
    pub shares_pct: Vec<f64>,
    pub uniform_pct: f64,
    pub max_share_pct: f64,
    pub max_abs_dev_pct: f64,
    /// Sample RSD of the shares; `None` with fewer than two parts.
    pub rsd_pct: Option<f64>,
}

/// Shares of `counts` in percent; `None` when empty or all zero.
pub fn shares_pct(counts: &[f64]) -> Option<Shares> {
    let total: f64 = counts.iter().sum();
    if counts.is_empty() || total == 0.0 {
        return None;
    }
    let shares: Vec<f64> = counts.iter().map(|c| 100.0 * c / total).collect();
    let uniform = 100.0 / counts.len() as f64;
    let max_share = shares.iter().copied().fold(f64::MIN, f64::max);
    let max_dev = shares.iter().map(|s| (s - uniform).abs()).fold(0.0, f64::max);
    Some(Shares {
        rsd_pct: rsd_sample_pct(&shares),
        shares_pct: shares,
        uniform_pct: uniform,
        max_share_pct: max_share,
        max_abs_dev_pct: max_dev,
    })
}

/// Relative standard deviation (sample estimator), percent; `None` for < 2 values or mean 0.
pub fn rsd_sample_pct(values: &[f64]) -> Option<f64> {
    if values.len() < 2 {
        return None;
    }
    let n = values.len() as f64;
    let mean = values.iter().sum::<f64>() / n;
    if mean == 0.0 {
        return None;
    }
    let var = values.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0);
    Some(100.0 * var.sqrt() / mean)
}

/// Page-migration effect `100 · (on − off) / off`; `None` (undefined) when `off` is 0.
pub fn effect_pct(on: f64, off: f64) -> Option<f64> {
    (off != 0.0).then(|| 100.0 * (on - off) / off)
}

/// One compared quantity of a diff: `a` → `b`, with `effect_pct = 100 · (b − a) / a`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DiffEntry {
    pub name: String,
    pub a: Option<f64>,
    pub b: Option<f64>,
    pub delta: Option<f64>,
    pub effect_pct: Option<f64>,
    pub status: EventStatus,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// Difference of two profiles (`numalab.profile-diff/1`): `a` is the baseline (e.g. NUMA
/// balancing off), `b` the variant; `effect_pct` is the page-migration effect of perfutil §5
/// when the two differ only in `numa_balancing`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ProfileDiff {
    pub schema: String,
    pub a_backend: Backend,
    pub b_backend: Backend,
    pub entries: Vec<DiffEntry>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

fn diff_entry(name: String, a: Result<f64, String>, b: Result<f64, String>) -> DiffEntry {
    match (a, b) {
        (Ok(a), Ok(b)) => {
            // 0 → 0 is no change (effect 0 %); only a change from 0 has no relative effect.
            let effect = if a == 0.0 && b == 0.0 { Some(0.0) } else { effect_pct(b, a) };
            DiffEntry {
                name,
                a: Some(a),
                b: Some(b),
                delta: Some(b - a),
                effect_pct: effect,
                status: if effect.is_some() { EventStatus::Ok } else { EventStatus::Undefined },
                reason: effect.is_none().then(|| "baseline is 0".to_string()),
            }
        }
        (a, b) => {
            let reason = [a.err().map(|r| format!("a: {r}")), b.err().map(|r| format!("b: {r}"))]
                .into_iter()
                .flatten()
                .collect::<Vec<_>>()
                .join("; ");
            DiffEntry { name, a: None, b: None, delta: None, effect_pct: None, status: EventStatus::Unsupported, reason: Some(reason) }
        }
    }
}

/// Compare two profiles: events, derived metrics, duration, resident bytes per node and the
/// vmstat counters present in either.
pub fn diff(a: &ProfileReport, b: &ProfileReport) -> ProfileDiff {
    let mut entries = Vec::new();
    let mut notes = Vec::new();
    let event_val = |r: &ProfileReport, n: &str| -> Result<f64, String> {
        match r.event(n) {
            None => Err("not in profile".into()),
            Some(e) => e.estimate().ok_or_else(|| e.status.as_str().to_string()),
        }
    };
    let mut names: Vec<&str> = a.events.iter().map(|e| e.name.as_str()).collect();
    names.extend(b.events.iter().map(|e| e.name.as_str()).filter(|n| a.event(n).is_none()));
    for n in names {
        entries.push(diff_entry(n.to_string(), event_val(a, n), event_val(b, n)));
    }
    let derived_val = |r: &ProfileReport, n: &str| -> Result<f64, String> {
        match r.derived.iter().find(|d| d.name == n) {
            None => Err("not in profile".into()),
            Some(d) => d.value.ok_or_else(|| d.status.as_str().to_string()),
        }
    };
    for d in &a.derived {
        entries.push(diff_entry(format!("derived.{}", d.name), derived_val(a, &d.name), derived_val(b, &d.name)));
    }
    entries.push(diff_entry("target.duration_ms".into(), Ok(a.target.duration_ms as f64), Ok(b.target.duration_ms as f64)));
    let mut nodes: Vec<u32> = a.numa.pages.iter().chain(&b.numa.pages).map(|p| p.node).collect();
    nodes.sort_unstable();
    nodes.dedup();
    let node_bytes = |r: &ProfileReport, n: u32| -> Result<f64, String> {
        if r.numa.pages.is_empty() {
            return Err("no pages sampled".into());
        }
        Ok(r.numa.pages.iter().find(|p| p.node == n).map(|p| p.total_bytes as f64).unwrap_or(0.0))
    };
    for n in nodes {
        entries.push(diff_entry(format!("numa.pages.node{n}.total_bytes"), node_bytes(a, n), node_bytes(b, n)));
    }
    let mut keys: Vec<&String> = a.numa.vmstat.keys().chain(b.numa.vmstat.keys()).collect();
    keys.sort();
    keys.dedup();
    let vm = |r: &ProfileReport, k: &str| -> Result<f64, String> {
        match r.numa.vmstat.get(k) {
            None => Err("not in profile".into()),
            Some(c) => c.value.map(|v| v as f64).ok_or_else(|| c.status.as_str().to_string()),
        }
    };
    for k in keys {
        entries.push(diff_entry(format!("vmstat.{k}"), vm(a, k), vm(b, k)));
    }
    if a.environment.numa_balancing == b.environment.numa_balancing {
        notes.push("numa_balancing is the same in both profiles: effect_pct is not a page-migration effect".into());
    }
    if a.backend != b.backend {
        notes.push(format!("comparing a {:?} profile with a {:?} profile", a.backend, b.backend).to_lowercase());
    }
    ProfileDiff { schema: DIFF_SCHEMA.into(), a_backend: a.backend, b_backend: b.backend, entries, notes }
}

/// Pack events into runs so that no group exceeds `budget` counters (perfutil §4.2 rule 1,
/// §2): every pair in `together` (ratio operands) shares a group, opening a shared operand in
/// several groups when needed. Software events have no budget and join the first group.
/// Returns runs, each a list of groups; here each run holds one group (one PMU).
pub fn plan_runs(events: &[String], budget: usize, is_software: impl Fn(&str) -> bool, together: &[(&str, &str)]) -> Vec<Vec<String>> {
    let budget = budget.max(1);
    let hw: Vec<&String> = events.iter().filter(|e| !is_software(e)).collect();
    let sw: Vec<String> = events.iter().filter(|e| is_software(e)).cloned().collect();
    let mut groups: Vec<Vec<String>> = Vec::new();
    let place = |groups: &mut Vec<Vec<String>>, members: &[&str]| {
        if groups.iter().any(|g| members.iter().all(|m| g.iter().any(|x| x == m))) {
            return;
        }
        // Prefer a group already holding some members that has room for the rest.
        for g in groups.iter_mut() {
            let missing: Vec<&&str> = members.iter().filter(|m| !g.iter().any(|x| x == **m)).collect();
            if missing.len() < members.len() && g.len() + missing.len() <= budget {
                g.extend(missing.into_iter().map(|m| m.to_string()));
                return;
            }
        }
        for g in groups.iter_mut() {
            if g.len() + members.len() <= budget {
                g.extend(members.iter().map(|m| m.to_string()));
                return;
            }
        }
        groups.push(members.iter().map(|m| m.to_string()).collect());
    };
    for (x, y) in together {
        let has = |n: &str| hw.iter().any(|e| e.as_str() == n);
        if has(x) && has(y) && budget >= 2 {
            place(&mut groups, &[x, y]);
        }
    }
    for e in &hw {
        if !groups.iter().any(|g| g.contains(e)) {
            place(&mut groups, &[e.as_str()]);
        }
    }
    if groups.is_empty() {
        groups.push(Vec::new());
    }
    groups[0].extend(sw);
    groups
}

/// Ratio operand pairs that must share a group (perfutil §2).
pub const RATIO_PAIRS: &[(&str, &str)] = &[
    ("node.read.remote", "llc.read.miss"),
    ("node.write.remote", "llc.write.miss"),
    ("llc.read.miss", "llc.read.access"),
    ("llc.write.miss", "llc.write.access"),
    ("node.read.remote", "node.read.local"),
    ("node.write.remote", "node.write.local"),
    ("cpu.instructions", "cpu.cycles"),
];

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(name: &str, v: u64) -> EventReading {
        EventReading::ok(name, Scope::Thread, v, 1000, 1000)
    }
    fn unsupported(name: &str) -> EventReading {
        EventReading::not_ok(name, Scope::Thread, EventStatus::Unsupported, "ENOENT: no encoding")
    }
    fn derived<'a>(d: &'a [Derived], name: &str) -> &'a Derived {
        d.iter().find(|x| x.name == name).unwrap_or_else(|| panic!("{name} missing"))
    }

    #[test]
    fn unsupported_event_serialises_as_null_never_zero() {
        let e = unsupported("node.write.remote");
        let v: serde_json::Value = serde_json::to_value(&e).unwrap();
        assert_eq!(v["value"], serde_json::Value::Null);
        assert_eq!(v["status"], "unsupported");
        assert_eq!(v["reason"], "ENOENT: no encoding");
    }

    #[test]
    fn unsupported_operand_propagates_only_to_its_ratios() {
        // perfutil §11 vector 3.
        let events = vec![
            ok("llc.read.miss", 100),
            ok("node.read.remote", 25),
            ok("llc.write.miss", 40),
            unsupported("node.write.remote"),
            ok("node.write.local", 7),
        ];
        let d = derive_all(&events);
        assert_eq!(derived(&d, "node.write.miss_rate_pct").status, EventStatus::Unsupported);
        assert_eq!(derived(&d, "node.write.miss_rate_pct").value, None);
        assert!(derived(&d, "node.write.miss_rate_pct").reason.as_deref().unwrap().contains("node.write.remote"));
        assert_eq!(derived(&d, "node.read.miss_rate_pct").value, Some(25.0));
        // node.write.local unsupported instead: both miss rates stay numeric.
        let events = vec![
            ok("llc.read.miss", 100),
            ok("node.read.remote", 25),
            ok("llc.write.miss", 40),
            ok("node.write.remote", 50),
            unsupported("node.write.local"),
        ];
        let d = derive_all(&events);
        assert_eq!(derived(&d, "node.write.miss_rate_pct").value, Some(125.0), "may exceed 100, never clamped");
        assert_eq!(derived(&d, "node.read.miss_rate_pct").value, Some(25.0));
        assert_eq!(derived(&d, "node.write.remote_share_pct").status, EventStatus::Unsupported);
    }

    #[test]
    fn zero_denominator_is_undefined() {
        let d = derive_all(&[ok("llc.read.miss", 0), ok("llc.read.access", 0)]);
        assert_eq!(derived(&d, "llc.read.miss_rate_pct").status, EventStatus::Undefined);
        assert_eq!(derived(&d, "llc.read.miss_rate_pct").value, None);
    }

    #[test]
    fn multiplexed_reading_is_scaled_and_flagged() {
        let e = EventReading::ok("cpu.cycles", Scope::Thread, 7, 1000, 500);
        assert!(e.multiplexed);
        assert_eq!(e.scaled_value, Some(14.0));
        assert_eq!(e.estimate(), Some(14.0));
        let never = EventReading::ok("cpu.cycles", Scope::Thread, 0, 1000, 0);
        assert_eq!(never.status, EventStatus::NotCounted);
        assert_eq!(never.value, None);
    }

    #[test]
    fn controller_shares_against_uniform_line() {
        // perfutil §11 vector 4.
        let s = shares_pct(&[30.0, 10.0, 10.0, 10.0, 10.0, 10.0, 10.0, 10.0]).unwrap();
        assert!((s.shares_pct[0] - 30.0).abs() < 1e-9);
        assert!((s.uniform_pct - 12.5).abs() < 1e-9);
        assert!((s.max_abs_dev_pct - 17.5).abs() < 1e-9);
        assert!((s.max_share_pct - 30.0).abs() < 1e-9);
        assert!(shares_pct(&[0.0, 0.0]).is_none());
        let mut events = Vec::new();
        for (c, v) in [20u64, 10, 5, 5].iter().enumerate() {
            events.push(ok(&format!("imc.read[{c}]"), *v));
            events.push(ok(&format!("imc.write[{c}]"), *v));
        }
        let d = derive_all(&events);
        assert_eq!(derived(&d, "imc.share_pct[0]").value, Some(50.0));
        assert_eq!(derived(&d, "imc.uniform_pct").value, Some(25.0));
    }

    #[test]
    fn page_migration_effect() {
        // perfutil §11 vector 5.
        assert_eq!(effect_pct(80.0, 100.0), Some(-20.0));
        assert_eq!(effect_pct(80.0, 0.0), None);
    }

    #[test]
    fn planner_keeps_ratio_operands_together_within_budget() {
        // perfutil §11 vector 6.
        let events: Vec<String> = [
            "llc.read.miss",
            "node.read.remote",
            "llc.write.miss",
            "node.write.remote",
            "llc.read.access",
            "llc.write.access",
            "sw.page_faults",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let runs = plan_runs(&events, 4, |e| e.starts_with("sw."), RATIO_PAIRS);
        assert!(runs.len() >= 2, "{runs:?}");
        for g in &runs {
            assert!(g.iter().filter(|e| !e.starts_with("sw.")).count() <= 4, "{g:?}");
        }
        for (x, y) in [
            ("node.read.remote", "llc.read.miss"),
            ("node.write.remote", "llc.write.miss"),
            ("llc.read.miss", "llc.read.access"),
            ("llc.write.miss", "llc.write.access"),
        ] {
            assert!(runs.iter().any(|g| g.iter().any(|e| e == x) && g.iter().any(|e| e == y)), "{x},{y} apart in {runs:?}");
        }
        assert!(runs.iter().flatten().any(|e| e == "sw.page_faults"));
    }

    #[test]
    fn diff_reports_effect_and_unsupported() {
        let mut a = ProfileReport::new(Backend::Sim, Target::default());
        a.events = vec![ok("sw.page_faults", 100), unsupported("node.read.remote")];
        a.numa.pages = vec![NodePages { node: 0, total_bytes: 4096, ..Default::default() }];
        a.environment.numa_balancing = Some(0);
        let mut b = a.clone();
        b.backend = Backend::Linux;
        b.events[0] = ok("sw.page_faults", 80);
        b.numa.pages = vec![NodePages { node: 1, total_bytes: 8192, ..Default::default() }];
        b.environment.numa_balancing = Some(1);
        a.finish();
        b.finish();
        let d = diff(&a, &b);
        let get = |n: &str| d.entries.iter().find(|e| e.name == n).unwrap();
        assert_eq!(get("sw.page_faults").effect_pct, Some(-20.0));
        assert_eq!(get("node.read.remote").status, EventStatus::Unsupported);
        assert_eq!(get("numa.pages.node1.total_bytes").a, Some(0.0));
        assert_eq!(get("numa.pages.node0.total_bytes").effect_pct, Some(-100.0));
        assert_eq!(get("numa.pages.node1.total_bytes").status, EventStatus::Undefined);
        assert!(d.notes.iter().any(|n| n.contains("sim")));
    }

    #[test]
    fn phase_totals_sum_each_labels_samples_in_order_of_first_appearance() {
        let sample = |label: Option<&str>, faults: u64| TimelineSample {
            label: label.map(String::from),
            enabled: label.is_some(),
            events: BTreeMap::from([("sw.page_faults".to_string(), faults)]),
            ..Default::default()
        };
        let t = [
            sample(None, 1),
            sample(Some("solve"), 10),
            sample(Some("solve"), 20),
            sample(None, 2),
            sample(Some("io"), 5),
            sample(Some("solve"), 7),
        ];
        let p = phase_totals(&t);
        assert_eq!(
            p.iter().map(|p| (p.label.as_str(), p.samples, p.events["sw.page_faults"])).collect::<Vec<_>>(),
            vec![("solve", 3, 37), ("io", 1, 5)]
        );
        assert!(phase_totals(&[sample(None, 3)]).is_empty());
    }

    #[test]
    fn diff_of_zero_and_zero_is_no_change_not_undefined() {
        let mut a = ProfileReport::new(Backend::Linux, Target::default());
        a.events = vec![ok("sw.page_faults", 0), ok("sw.cpu_migrations", 0)];
        let mut b = a.clone();
        b.events[1] = ok("sw.cpu_migrations", 5);
        a.finish();
        b.finish();
        let d = diff(&a, &b);
        let get = |n: &str| d.entries.iter().find(|e| e.name == n).unwrap();
        assert_eq!((get("sw.page_faults").status, get("sw.page_faults").effect_pct), (EventStatus::Ok, Some(0.0)));
        assert_eq!(get("sw.page_faults").reason, None);
        // From 0 to something has no relative effect.
        assert_eq!(get("sw.cpu_migrations").status, EventStatus::Undefined);
        assert_eq!(get("sw.cpu_migrations").reason.as_deref(), Some("baseline is 0"));
    }

    #[test]
    fn report_roundtrips_through_json() {
        let mut r = ProfileReport::new(Backend::Linux, Target { pid: Some(7), ..Default::default() });
        r.events.push(ok("sw.page_faults", 3));
        r.numa.vmstat.insert("numa_hint_faults".into(), Counter::unsupported("no CONFIG_NUMA_BALANCING"));
        r.finish();
        let text = serde_json::to_string(&r).unwrap();
        let back: ProfileReport = serde_json::from_str(&text).unwrap();
        assert_eq!(back, r);
        assert!(text.contains("\"schema\":\"numalab.profile/1\""));
        assert!(text.ends_with("\"notes\":[]}"), "notes is always present: {text}");
    }

    #[test]
    fn catalogue_lookup_by_id_and_perf_alias() {
        assert_eq!(lookup("node-load-misses").unwrap().id, "node.read.remote");
        assert_eq!(lookup("sw.cpu_migrations").unwrap().perf_name, "cpu-migrations");
        assert!(lookup("bogus").is_none());
        for (_, evs) in GROUPS {
            for e in *evs {
                assert!(lookup(e).is_some(), "{e}");
            }
        }
    }
}
