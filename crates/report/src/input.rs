//! Reading numalab result documents (docs/json.md) into the few typed values the charts use.
//! Fields a chart does not use are ignored, as the JSON contract asks of readers; fields it
//! uses are checked, and a bad one is reported with its path.

use crate::error::{ReportError, Result};
use crate::json::Cursor;
use serde_json::Value;

/// The schemas this reader understands, by name and version.
pub const SUPPORTED: &[&str] =
    &["numalab.sim/2", "numalab.compare/2", "numalab.study/1", "numalab.profile/1", "numalab.model-mva/1", "numalab.model-roofline/1"];

/// Thread-migration causes in the order of docs/metrics.md; a cause a newer numalab adds is
/// drawn after these, in name order.
pub const CAUSES: &[&str] = &["idle_balance", "load_balance", "wakeup", "numa_move", "numa_swap", "cluster_move", "cluster_swap", "policy"];

/// One input file.
pub struct Input {
    /// The path as the user gave it (messages and the report name files this way).
    pub path: String,
    pub schema: String,
    pub numalab_version: Option<String>,
    /// The master seed, as JSON text (seeds are u64 and may not fit an f64).
    pub seed: Option<String>,
    /// What the results were computed from, shown verbatim in the report: (label, JSON).
    pub provenance: Vec<(String, String)>,
    /// The command that reproduces the document, as far as the document tells.
    pub reproduce: String,
    pub body: Body,
}

pub enum Body {
    /// Simulated runs: sim (one cell), compare (one per policy), study (one per cell).
    Cells(Vec<Cell>),
    Profile(Profile),
    Mva(Mva),
    Roofline(Roofline),
}

/// The runs of one policy on one machine, workload and grid point.
pub struct Cell {
    /// Where in its file the cell is ("results[1]", "cells[3]").
    pub at: String,
    pub machine: String,
    /// The resolved machine tree, when the document has it: two inputs naming the same
    /// machine must describe the same hardware.
    pub machine_config: Option<Value>,
    /// Per node, whether it has memory (the uniform share is over these nodes).
    pub mem_nodes: Option<Vec<bool>>,
    /// Per node, its memory tier (`config.machine.nodes[].tier`), when the tree has them.
    pub node_tiers: Option<Vec<String>>,
    /// The machine's roofline, computed as `numalab model roofline` does (crates/model), only
    /// for cells whose runs have per-application timeline points and whose machine has a
    /// `peak_gflops_dp`.
    pub roofline: Option<Ceilings>,
    pub workload: String,
    pub policy: String,
    /// The study grid point, "key=value, …"; empty outside a study grid.
    pub grid: String,
    /// Options of `numalab sim`/`compare` read back from the resolved config (scale,
    /// iterations, engine): explicit values, so they hold whatever the defaults are.
    pub options: String,
    pub runs: Vec<Run>,
}

/// The fields of one simulated run the charts use (docs/metrics.md, "Per run").
pub struct Run {
    pub exec_time_s: f64,
    pub sim_time_s: Option<f64>,
    pub local_access_ratio: Option<f64>,
    pub hint_faults_per_s: Option<f64>,
    pub page_migrations_per_s: Option<f64>,
    /// (cause, in_node, cross_node) in `CAUSES` order.
    pub thread_migrations_by_cause: Option<Vec<(String, f64, f64)>>,
    pub node_accesses: Option<Vec<f64>>,
    pub access_matrix: Option<Vec<Vec<f64>>>,
    /// (upper edges in s, counts; one more count than edges: the open bin).
    pub pingpong_intervals_s: Option<(Vec<f64>, Vec<f64>)>,
    /// The simulator's timeline (`runs[].timeline`), if the input has one.
    pub timeline: Option<Vec<TimePoint>>,
}

/// One interval of a simulated run's timeline.
pub struct TimePoint {
    pub t_s: f64,
    pub interval_s: f64,
    pub local_access_ratio: Option<f64>,
    pub page_migrations: f64,
    pub replications: f64,
    /// Resident pages per node at the interval's end.
    pub pages_per_node: Option<Vec<f64>>,
    /// Per application of a multi-program workload (`timeline[].apps`, docs/metrics.md).
    pub apps: Vec<AppPoint>,
}

/// One application's interval (`runs[].timeline[].apps[]`).
pub struct AppPoint {
    pub app: String,
    pub flops: f64,
    pub bytes: f64,
    pub ai_flop_per_byte: Option<f64>,
    pub gflops: f64,
}

/// A machine's roofline: the compute ceiling and one bandwidth ceiling per tier, slowest first.
#[derive(Clone, Debug, PartialEq)]
pub struct Ceilings {
    pub peak_gflops: f64,
    /// (tier, GB/s).
    pub tiers: Vec<(String, f64)>,
}

/// `numalab.profile/1`: the timeline is what the report draws.
pub struct Profile {
    pub label: String,
    pub interval_ms: Option<f64>,
    pub samples: Vec<ProfileSample>,
    /// Memory-controller counts (`events[]` `imc.read[c]`, `imc.write[c]`), in controller
    /// order; `None` without them or when one of them is not `ok` (a share of an incomplete
    /// set would be wrong).
    pub imc: Option<Vec<ImcCount>>,
}

/// One memory controller's totals over the profile.
pub struct ImcCount {
    pub controller: u32,
    /// From `environment.imc[].node` (the node of the PMU's cpumask CPU).
    pub node: Option<u64>,
    pub reads: f64,
    pub writes: f64,
}

pub struct ProfileSample {
    pub t_ms: f64,
    /// Event deltas over the interval, by event name (sorted: serde_json's map is ordered).
    pub events: Vec<(String, f64)>,
    /// Resident bytes per node, when sampled.
    pub node_bytes: Option<Vec<(u64, f64)>>,
    pub vmstat: Vec<(String, f64)>,
}

/// `numalab.model-mva/1`.
pub struct Mva {
    pub machine: String,
    pub points: Vec<MvaPoint>,
}

pub struct MvaPoint {
    pub policy: String,
    pub network: String,
    /// The model's inputs (everything numeric that is not an output), by name.
    pub inputs: Vec<(String, f64)>,
    pub r_us: f64,
}

/// Numeric outputs of an MVA point; every other numeric field is an input.
const MVA_OUTPUTS: &[&str] = &[
    "r_us",
    "r_r_us",
    "r_f_us",
    "t_local_us",
    "t_remote_us",
    "w_l_us",
    "w_r_us",
    "w_n_us",
    "x_per_us",
    "p_l",
    "p_r",
    "q_m",
    "q_r",
    "q_c",
    "refs",
    "predicted_s",
    "iterations",
];

/// `numalab.model-roofline/1`.
pub struct Roofline {
    pub machine: String,
    pub bandwidth: String,
    pub peak_gflops: f64,
    /// (tier, bandwidth GB/s), slowest first.
    pub tiers: Vec<(String, f64)>,
    /// Arithmetic intensities asked for, flop/byte.
    pub ai: Vec<f64>,
}

/// Read and parse one file.
pub fn load(path: &str) -> Result<Input> {
    let text = std::fs::read_to_string(path).map_err(|source| ReportError::Read { path: path.into(), source })?;
    parse(path, &text)
}

/// Parse a document's text; `path` names it in messages.
pub fn parse(path: &str, text: &str) -> Result<Input> {
    let value: Value = serde_json::from_str(text).map_err(|e| ReportError::NotJson { path: path.into(), message: e.to_string() })?;
    let root = Cursor::root(&value, path);
    let schema = match value.get("schema").and_then(Value::as_str) {
        Some(s) if s.starts_with("numalab.") => s.to_string(),
        _ => return Err(ReportError::NotNumalab { path: path.into() }),
    };
    if !SUPPORTED.contains(&schema.as_str()) {
        return Err(ReportError::UnknownSchema { path: path.into(), schema, supported: SUPPORTED.join(", ") });
    }
    let numalab_version = value.get("numalab_version").and_then(Value::as_str).map(str::to_string);
    let seed = value.get("seed").filter(|v| !v.is_null()).map(Value::to_string);
    let mut input = Input {
        path: path.into(),
        schema: schema.clone(),
        numalab_version,
        seed,
        provenance: Vec::new(),
        reproduce: String::new(),
        body: Body::Cells(Vec::new()),
    };
    match schema.as_str() {
        "numalab.sim/2" => {
            let cell = sim_cell(&root, "(document)")?;
            input.provenance.push(("config".into(), pretty(root.get("config")?.value)));
            input.reproduce = compare_command("sim --policy", std::slice::from_ref(&cell), input.seed.as_deref());
            input.body = Body::Cells(vec![cell]);
        }
        "numalab.compare/2" => {
            let mut cells = Vec::new();
            for r in root.get("results")?.items()? {
                let at = r.field_path();
                cells.push(sim_cell(&r, &at)?);
                input
                    .provenance
                    .push((format!("{at}.config ({})", cells.last().map_or("", |c| c.policy.as_str())), pretty(r.get("config")?.value)));
            }
            if cells.is_empty() {
                return Err(ReportError::EmptyRuns { path: path.into(), field: "results".into() });
            }
            input.reproduce = compare_command("compare --policies", &cells, input.seed.as_deref());
            input.body = Body::Cells(cells);
        }
        "numalab.study/1" => {
            let study = root.get("study")?;
            input.provenance.push(("study".into(), pretty(study.value)));
            if input.seed.is_none() {
                input.seed = study.get("study")?.opt("seed").map(|s| s.value.to_string());
            }
            let name = study.get("study")?.opt("name").and_then(|n| n.value.as_str().map(str::to_string)).unwrap_or_default();
            input.provenance.push(("study file (TOML, rebuilt from the document)".into(), study_toml(study.value)));
            let file = if name.is_empty() { "STUDY".to_string() } else { name.clone() };
            input.reproduce = format!("numalab study {file}.toml --out {}   # {file}.toml: the study file under Inputs", file_name(path));
            let mut cells = Vec::new();
            for c in root.get("cells")?.items()? {
                let runs = c.get("runs")?.items()?;
                // A shard's document lists every cell but holds the runs of only some.
                if runs.is_empty() {
                    continue;
                }
                let grid = match c.opt("grid") {
                    Some(g) => grid_label(&g)?,
                    None => String::new(),
                };
                let config = c.opt("config");
                cells.push(Cell {
                    at: c.field_path(),
                    machine: c.str_field("machine")?.into(),
                    machine_config: config.as_ref().and_then(|k| k.opt("machine")).map(|m| m.value.clone()),
                    mem_nodes: match config.as_ref().and_then(|k| k.opt("machine")) {
                        Some(m) => mem_nodes(&m)?,
                        None => None,
                    },
                    node_tiers: match config.as_ref().and_then(|k| k.opt("machine")) {
                        Some(m) => node_tiers(&m)?,
                        None => None,
                    },
                    roofline: None,
                    workload: c.str_field("workload")?.into(),
                    policy: c.str_field("policy")?.into(),
                    grid,
                    options: String::new(),
                    runs: runs.iter().map(run).collect::<Result<_>>()?,
                });
                let cell = cells.last_mut().expect("just pushed");
                if let Some(m) = config.as_ref().and_then(|k| k.opt("machine")) {
                    cell.roofline = ceilings(&m, &cell.runs)?;
                }
            }
            if cells.is_empty() {
                return Err(ReportError::EmptyRuns { path: path.into(), field: "cells".into() });
            }
            input.body = Body::Cells(cells);
        }
        "numalab.profile/1" => {
            input.provenance.push(("target".into(), pretty(root.get("target")?.value)));
            if let Some(e) = root.opt("environment") {
                input.provenance.push(("environment".into(), pretty(e.value)));
            }
            input.reproduce = "numalab profile --out FILE.json -- COMMAND   # the target and environment below".into();
            input.body = Body::Profile(profile(&root)?);
        }
        "numalab.model-mva/1" => {
            let machine = root.str_field("machine")?.to_string();
            if let Some(c) = root.opt("classes") {
                input.provenance.push(("classes".into(), pretty(c.value)));
            }
            let mut points = Vec::new();
            for p in root.get("points")?.items()? {
                points.push(mva_point(&p)?);
            }
            if points.is_empty() {
                return Err(ReportError::EmptyRuns { path: path.into(), field: "points".into() });
            }
            input.reproduce =
                format!("numalab model mva --machine {machine} … --format json   # the inputs of every point are in the table");
            input.body = Body::Mva(Mva { machine, points });
        }
        "numalab.model-roofline/1" => {
            let r = roofline(&root)?;
            input.reproduce = format!(
                "numalab model roofline --machine {} --bandwidth {} --peak-gflops {} --ai {}",
                r.machine,
                r.bandwidth,
                r.peak_gflops,
                r.ai.iter().map(|a| a.to_string()).collect::<Vec<_>>().join(",")
            );
            input.body = Body::Roofline(r);
        }
        _ => unreachable!("every SUPPORTED schema has a reader"),
    }
    Ok(input)
}

/// The study file back as TOML, from the document's `study` (its `[study]` and `[grid]` tables
/// as read): what `numalab study` needs to run the same cells again.
fn study_toml(study: &Value) -> String {
    let mut out = String::new();
    for table in ["study", "grid"] {
        let Some(m) = study.get(table).and_then(Value::as_object) else { continue };
        if m.is_empty() {
            continue;
        }
        out.push_str(&format!("[{table}]\n"));
        for (k, v) in m {
            if !v.is_null() {
                out.push_str(&format!("{} = {}\n", toml_key(k), toml_value(v)));
            }
        }
    }
    out
}

/// A bare key where TOML allows one, else a quoted key (grid keys hold dots).
fn toml_key(k: &str) -> String {
    if !k.is_empty() && k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-') {
        k.to_string()
    } else {
        Value::from(k).to_string()
    }
}

/// JSON scalars and arrays are TOML as written (a JSON string is a valid TOML basic string);
/// objects become inline tables.
fn toml_value(v: &Value) -> String {
    match v {
        Value::Array(a) => format!("[{}]", a.iter().map(toml_value).collect::<Vec<_>>().join(", ")),
        Value::Object(m) => {
            format!("{{ {} }}", m.iter().map(|(k, v)| format!("{} = {}", toml_key(k), toml_value(v))).collect::<Vec<_>>().join(", "))
        }
        v => v.to_string(),
    }
}

fn pretty(v: &Value) -> String {
    serde_json::to_string_pretty(v).unwrap_or_else(|_| v.to_string())
}

fn file_name(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

/// The compare (or sim) command line for cells that share machine and workload. The settings a
/// user changed with `--set` are not recoverable from the resolved config alone, hence the note.
fn compare_command(verb: &str, cells: &[Cell], seed: Option<&str>) -> String {
    let Some(first) = cells.first() else { return String::new() };
    let policies: Vec<&str> = cells.iter().map(|c| c.policy.as_str()).collect();
    format!(
        "numalab {verb} {} --machine {} --workload {}{} --runs {}{}   # plus --set for any other setting of the resolved config below that differs from the presets",
        policies.join(","),
        first.machine,
        first.workload,
        first.options,
        first.runs.len(),
        seed.map(|s| format!(" --seed {s}")).unwrap_or_default()
    )
}

/// A `numalab.sim/2` document (alone, or one of compare's `results`).
fn sim_cell(doc: &Cursor, at: &str) -> Result<Cell> {
    let config = doc.get("config")?;
    let machine_tree = config.get("machine")?;
    let machine = machine_tree.str_field("name")?.to_string();
    let workload_tree = config.get("workload")?;
    // The workload's own name; a workload file read from disk still names itself.
    let workload = match workload_tree.opt("definition").and_then(|d| d.opt("workload")).and_then(|w| w.opt("name")) {
        Some(n) => n.str()?.to_string(),
        None => workload_tree.str_field("source")?.to_string(),
    };
    let policy = config.get("policy")?.str_field("name")?.to_string();
    let mut options = String::new();
    if let Some(x) = workload_tree.opt_f64_field("scale")? {
        options.push_str(&format!(" --scale {x}"));
    }
    let run_table = workload_tree.opt("definition").and_then(|d| d.opt("workload")).and_then(|w| w.opt("run"));
    if let Some(n) = run_table.as_ref().and_then(|r| r.opt("iterations")) {
        options.push_str(&format!(" --iterations {}", n.value));
    }
    if let Some(e) = config.opt("sim").and_then(|s| s.opt("engine")) {
        options.push_str(&format!(" --set sim.engine={}", e.str()?));
    }
    let runs_node = doc.get("runs")?;
    let runs: Vec<Run> = runs_node.items()?.iter().map(run).collect::<Result<_>>()?;
    if runs.is_empty() {
        return Err(ReportError::EmptyRuns { path: doc.file.into(), field: runs_node.field_path() });
    }
    Ok(Cell {
        at: at.into(),
        machine,
        mem_nodes: mem_nodes(&machine_tree)?,
        node_tiers: node_tiers(&machine_tree)?,
        roofline: ceilings(&machine_tree, &runs)?,
        machine_config: Some(machine_tree.value.clone()),
        workload,
        policy,
        grid: String::new(),
        options,
        runs,
    })
}

/// Which nodes have memory (`nodes[k].mem_bytes > 0`); `None` when the tree does not say.
fn mem_nodes(machine: &Cursor) -> Result<Option<Vec<bool>>> {
    let Some(nodes) = machine.opt("nodes") else { return Ok(None) };
    let mut out = Vec::new();
    for n in nodes.items()? {
        match n.opt_f64_field("mem_bytes")? {
            Some(b) => out.push(b > 0.0),
            None => return Ok(None),
        }
    }
    Ok(Some(out))
}

/// Each node's tier (`nodes[k].tier`); `None` when the tree does not say.
fn node_tiers(machine: &Cursor) -> Result<Option<Vec<String>>> {
    let Some(nodes) = machine.opt("nodes") else { return Ok(None) };
    let mut out = Vec::new();
    for n in nodes.items()? {
        match n.opt("tier") {
            Some(t) => out.push(t.str()?.to_string()),
            None => return Ok(None),
        }
    }
    Ok(Some(out))
}

/// The roofline of the machine tree, when some run has per-application points: the resolved
/// machine read back as numalab's machine type and its ceilings computed by
/// `numalab_model::roofline::Roofline::from_machine` with the peak bandwidths, exactly what
/// `numalab model roofline --machine M` prints (docs/model.md §5). `None` without
/// application points or without `peak_gflops_dp`.
fn ceilings(machine: &Cursor, runs: &[Run]) -> Result<Option<Ceilings>> {
    let has_apps = runs.iter().any(|r| r.timeline.iter().flatten().any(|p| !p.apps.is_empty()));
    if !has_apps {
        return Ok(None);
    }
    let m: numalab_core::Machine = serde_json::from_value(machine.value.clone()).map_err(|e| ReportError::BadMachine {
        path: machine.file.into(),
        field: machine.field_path(),
        message: e.to_string(),
    })?;
    if m.peak_gflops_dp.is_none() {
        return Ok(None);
    }
    let r = numalab_model::roofline::Roofline::from_machine(&m, numalab_model::roofline::BandwidthKind::Peak, None)
        .map_err(|e| ReportError::BadMachine { path: machine.file.into(), field: machine.field_path(), message: e.to_string() })?;
    Ok(Some(Ceilings { peak_gflops: r.peak_gflops, tiers: r.tiers.iter().map(|t| (t.tier.as_str().to_string(), t.bw_gbps)).collect() }))
}

fn grid_label(g: &Cursor) -> Result<String> {
    let m = g.value.as_object().ok_or_else(|| g.wrong("an object"))?;
    Ok(m.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(", "))
}

fn run(r: &Cursor) -> Result<Run> {
    let by_cause = match r.opt("thread_migrations_by_cause") {
        None => None,
        Some(m) => {
            let obj = m.value.as_object().ok_or_else(|| m.wrong("an object"))?;
            let mut names: Vec<&str> = CAUSES.iter().copied().filter(|c| obj.contains_key(*c)).collect();
            names.extend(obj.keys().map(String::as_str).filter(|k| !CAUSES.contains(k)));
            let mut out = Vec::new();
            for name in names {
                let c = m.get(name)?;
                out.push((name.to_string(), c.f64_field("in_node")?, c.f64_field("cross_node")?));
            }
            Some(out)
        }
    };
    let matrix = match r.opt("access_matrix") {
        None => None,
        Some(m) => Some(m.items()?.iter().map(|row| row.f64_list()).collect::<Result<Vec<_>>>()?),
    };
    let pingpong = match r.opt("pingpong_intervals_s") {
        None => None,
        Some(h) => {
            let edges = h.get("edges_s")?.f64_list()?;
            let counts = h.get("counts")?.f64_list()?;
            if counts.len() != edges.len() + 1 {
                return Err(h.get("counts")?.wrong("one count more than edges_s (the last bin is open)"));
            }
            Some((edges, counts))
        }
    };
    let timeline = match r.opt("timeline") {
        None => None,
        Some(t) => Some(
            t.items()?
                .iter()
                .map(|p| {
                    let apps = match p.opt("apps") {
                        None => Vec::new(),
                        Some(a) => a
                            .items()?
                            .iter()
                            .map(|a| {
                                Ok(AppPoint {
                                    app: a.str_field("app")?.to_string(),
                                    flops: a.f64_field("flops")?,
                                    bytes: a.f64_field("bytes")?,
                                    ai_flop_per_byte: a.opt_f64_field("ai_flop_per_byte")?,
                                    gflops: a.f64_field("gflops")?,
                                })
                            })
                            .collect::<Result<Vec<_>>>()?,
                    };
                    Ok(TimePoint {
                        t_s: p.f64_field("t_s")?,
                        interval_s: p.f64_field("interval_s")?,
                        local_access_ratio: p.opt_f64_field("local_access_ratio")?,
                        page_migrations: p.f64_field("page_migrations")?,
                        replications: p.f64_field("replications")?,
                        pages_per_node: match p.opt("pages_per_node") {
                            None => None,
                            Some(n) => Some(n.f64_list()?),
                        },
                        apps,
                    })
                })
                .collect::<Result<Vec<_>>>()?,
        ),
    };
    Ok(Run {
        exec_time_s: r.f64_field("exec_time_s")?,
        sim_time_s: r.opt_f64_field("sim_time_s")?,
        local_access_ratio: r.opt_f64_field("local_access_ratio")?,
        hint_faults_per_s: r.opt_f64_field("hint_faults_per_s")?,
        page_migrations_per_s: r.opt_f64_field("page_migrations_per_s")?,
        thread_migrations_by_cause: by_cause,
        node_accesses: match r.opt("node_accesses") {
            None => None,
            Some(n) => Some(n.f64_list()?),
        },
        access_matrix: matrix,
        pingpong_intervals_s: pingpong,
        timeline,
    })
}

fn profile(root: &Cursor) -> Result<Profile> {
    let target = root.get("target")?;
    let command = match target.opt("command") {
        Some(c) => c.items()?.iter().map(|a| a.str().map(str::to_string)).collect::<Result<Vec<_>>>()?.join(" "),
        None => String::new(),
    };
    let labels = target.opt("labels").map(|l| l.value.to_string()).unwrap_or_default();
    let label = match (command.is_empty(), labels.is_empty()) {
        (false, _) => command,
        (true, false) => labels,
        (true, true) => target.opt("pid").map(|p| format!("pid {}", p.value)).unwrap_or_else(|| "profile".into()),
    };
    let interval_ms = match root.opt("environment") {
        Some(e) => e.opt_f64_field("interval_ms")?,
        None => None,
    };
    let mut samples = Vec::new();
    if let Some(t) = root.opt("timeline") {
        for s in t.items()? {
            let mut events = Vec::new();
            if let Some(e) = s.opt("events") {
                let obj = e.value.as_object().ok_or_else(|| e.wrong("an object"))?;
                for k in obj.keys() {
                    events.push((k.clone(), e.f64_field(k)?));
                }
            }
            let node_bytes = match s.opt("pages") {
                None => None,
                Some(p) => {
                    let mut v = Vec::new();
                    for n in p.items()? {
                        let node = n.get("node")?;
                        let id = node.value.as_u64().ok_or_else(|| node.wrong("a node number"))?;
                        v.push((id, n.f64_field("total_bytes")?));
                    }
                    Some(v)
                }
            };
            let mut vmstat = Vec::new();
            if let Some(vm) = s.opt("vmstat") {
                let obj = vm.value.as_object().ok_or_else(|| vm.wrong("an object"))?;
                for k in obj.keys() {
                    // A counter the kernel lacks is absent or null in a sample, not zero.
                    if let Some(x) = vm.opt_f64_field(k)? {
                        vmstat.push((k.clone(), x));
                    }
                }
            }
            samples.push(ProfileSample { t_ms: s.f64_field("t_ms")?, events, node_bytes, vmstat });
        }
    }
    Ok(Profile { label, interval_ms, samples, imc: imc_counts(root)? })
}

/// `imc.read[c]` / `imc.write[c]` of `events[]` (the scaled value of a multiplexed one), with
/// each controller's node from `environment.imc`.
fn imc_counts(root: &Cursor) -> Result<Option<Vec<ImcCount>>> {
    let Some(events) = root.opt("events") else { return Ok(None) };
    let mut counts: Vec<ImcCount> = Vec::new();
    let mut complete = true;
    for e in events.items()? {
        let name = e.str_field("name")?;
        let (write, rest) = match (name.strip_prefix("imc.read["), name.strip_prefix("imc.write[")) {
            (Some(r), _) => (false, r),
            (_, Some(w)) => (true, w),
            _ => continue,
        };
        let Some(c) = rest.strip_suffix(']').and_then(|c| c.parse::<u32>().ok()) else {
            return Err(e.get("name")?.wrong("an event name such as imc.read[0]"));
        };
        if e.str_field("status")? != "ok" {
            complete = false;
            continue;
        }
        let v = match e.opt_f64_field("scaled_value")? {
            Some(x) => x,
            None => e.f64_field("value")?,
        };
        let k = match counts.iter().position(|x| x.controller == c) {
            Some(k) => k,
            None => {
                counts.push(ImcCount { controller: c, node: None, reads: f64::NAN, writes: f64::NAN });
                counts.len() - 1
            }
        };
        if write {
            counts[k].writes = v;
        } else {
            counts[k].reads = v;
        }
    }
    // Both directions of every controller, or no share at all.
    if !complete || counts.is_empty() || counts.iter().any(|x| x.reads.is_nan() || x.writes.is_nan()) {
        return Ok(None);
    }
    if let Some(list) = root.opt("environment").and_then(|e| e.opt("imc")) {
        for m in list.items()? {
            let c = m.get("controller")?;
            let c = c.value.as_u64().ok_or_else(|| c.wrong("a controller number"))?;
            let node = match m.opt("node") {
                Some(n) => Some(n.value.as_u64().ok_or_else(|| n.wrong("a node number"))?),
                None => None,
            };
            if let Some(x) = counts.iter_mut().find(|x| x.controller as u64 == c) {
                x.node = node;
            }
        }
    }
    counts.sort_by_key(|x| x.controller);
    Ok(Some(counts))
}

fn mva_point(p: &Cursor) -> Result<MvaPoint> {
    let obj = p.value.as_object().ok_or_else(|| p.wrong("an object"))?;
    let inputs = obj
        .iter()
        .filter(|(k, v)| v.is_number() && !MVA_OUTPUTS.contains(&k.as_str()))
        .filter_map(|(k, v)| v.as_f64().map(|x| (k.clone(), x)))
        .collect();
    Ok(MvaPoint { policy: p.str_field("policy")?.into(), network: p.str_field("network")?.into(), inputs, r_us: p.f64_field("r_us")? })
}

fn roofline(root: &Cursor) -> Result<Roofline> {
    let mut tiers = Vec::new();
    for t in root.get("tiers")?.items()? {
        tiers.push((t.str_field("tier")?.to_string(), t.f64_field("bw_gbps")?));
    }
    if tiers.is_empty() {
        return Err(ReportError::EmptyRuns { path: root.file.into(), field: "tiers".into() });
    }
    let mut ai = Vec::new();
    for p in root.get("points")?.items()? {
        ai.push(p.f64_field("ai")?);
    }
    Ok(Roofline {
        machine: root.str_field("machine")?.into(),
        bandwidth: root.str_field("bandwidth")?.into(),
        peak_gflops: root.f64_field("peak_gflops")?,
        tiers,
        ai,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn study_files_come_back_as_toml() {
        let study: Value = serde_json::from_str(
            r#"{"study": {"name": "s", "runs": 2, "threads": null, "iterations": {"is-like": 3}},
                "grid": {"sim.sched.noise_rate_per_cpu_hz": [50.0, 0.0]}}"#,
        )
        .unwrap();
        assert_eq!(
            study_toml(&study),
            "[study]\niterations = { is-like = 3 }\nname = \"s\"\nruns = 2\n[grid]\n\"sim.sched.noise_rate_per_cpu_hz\" = [50.0, 0.0]\n"
        );
    }
}
