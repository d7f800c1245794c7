//! `numalab model mva|roofline|classes`: the analytic models of numalab-model.
//!
//! JSON contracts: `numalab.model-mva/1`, `numalab.model-roofline/1` (docs/model.md).
use crate::output::{emit, OutputOpts, Table};
use anyhow::{bail, Context, Result};
use numalab_core::Machine;
use numalab_model::classes::{self, ClassKind, ClassSet};
use numalab_model::local_remote::{Hardware, NetworkMode};
use numalab_model::policy::{PolicyKind, PolicyParams};
use numalab_model::roofline::{BandwidthKind, Roofline};
use numalab_model::scenario::{Param, Scenario, Sweep};
use numalab_model::validate::Calibration;
use serde_json::{json, Map, Value};

#[derive(clap::Subcommand, Debug)]
pub enum ModelCmd {
    /// Local/remote NUMA model: mean time per reference and predicted run time of a page-class
    /// workload under a placement policy (approximate MVA, docs/model.md).
    Mva(Box<MvaArgs>),
    /// Roofline: attainable GFLOP/s per memory tier for given arithmetic intensities.
    Roofline(RooflineArgs),
    /// Print a built-in page-class set as TOML (a starting point for --classes files).
    Classes(ClassesArgs),
    /// Check the local/remote model against the simulator on synth instances: calibrate tau on
    /// one node, predict the n-node static run, simulate it over several seeds, compare.
    Validate(ValidateArgs),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum NetworkArg {
    /// No waiting at the network ports (default).
    Delay,
    /// Network ports are queues.
    Queue,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum BandwidthArg {
    /// Nominal peak bandwidth (mem_peak_gbps; the sustained figure where no peak is given).
    Peak,
    /// Sustained bandwidth (mem_bw_gbps).
    Sustained,
}

#[derive(clap::Args, Debug)]
pub struct MvaArgs {
    /// Machine preset name, or a machine TOML file (path ending in .toml).
    #[arg(long, default_value = "gp1000")]
    pub machine: String,
    /// Page-class set: a built-in preset name, a page-class TOML file, or a workload TOML file
    /// whose regions carry `dunx_class` (a synth instance; path ending in .toml).
    #[arg(long, default_value = "dunx-synth-8c")]
    pub classes: String,
    /// Policies, comma-separated: static, cache, mor, ideal, rc, error, or all (these six);
    /// also measured (needs --p-l, --q-m, --q-r, --q-c).
    #[arg(long, default_value = "ideal")]
    pub policy: String,
    /// Policy measured: the share of local references (docs/model.md §3.4).
    #[arg(long)]
    pub p_l: Option<f64>,
    /// Policy measured: page migrations per reference.
    #[arg(long)]
    pub q_m: Option<f64>,
    /// Policy measured: page replications per reference.
    #[arg(long)]
    pub q_r: Option<f64>,
    /// Policy measured: coherency faults per reference.
    #[arg(long)]
    pub q_c: Option<f64>,
    /// Mean compute time between memory references, us.
    #[arg(long, default_value_t = 2.0)]
    pub tau: f64,
    /// Node count n (default: the machine's).
    #[arg(long)]
    pub nodes: Option<u32>,
    /// Network ports: delay (no waiting) or queue.
    #[arg(long, value_enum, default_value = "delay")]
    pub network: NetworkArg,
    /// Multiplies the migration, replication and coherency-fault costs.
    #[arg(long, default_value_t = 1.0)]
    pub cost_scale: f64,
    /// Memory service time t_l, us (default: the machine's local latency).
    #[arg(long)]
    pub t_l: Option<f64>,
    /// Network transfer time t_x, us (default: half of remote minus local latency).
    #[arg(long)]
    pub t_x: Option<f64>,
    /// Migration cost, us (default: the machine's costs_ms.migrate).
    #[arg(long)]
    pub c_mig: Option<f64>,
    /// Replication cost, us.
    #[arg(long)]
    pub c_rep: Option<f64>,
    /// Coherency-fault cost, us.
    #[arg(long)]
    pub c_coh: Option<f64>,
    /// One migration break-even count for every class (default: per class, docs/model.md §3.3).
    #[arg(long)]
    pub k_mig: Option<f64>,
    /// One replication break-even count for every class.
    #[arg(long)]
    pub k_rep: Option<f64>,
    /// Error policy: fraction of wrong decisions for RO pages.
    #[arg(long, default_value_t = 0.0)]
    pub e_ro: f64,
    /// Error policy: fraction of wrong decisions for RM pages.
    #[arg(long, default_value_t = 0.0)]
    pub e_rm: f64,
    /// Error policy: fraction of wrong decisions for SS pages.
    #[arg(long, default_value_t = 0.0)]
    pub e_ss: f64,
    /// Error policy: fraction of wrong decisions for SP pages.
    #[arg(long, default_value_t = 0.0)]
    pub e_sp: f64,
    /// Other faults per reference (first touch etc.).
    #[arg(long, default_value_t = 0.0)]
    pub q_o: f64,
    /// Mean cost of an other fault, us.
    #[arg(long, default_value_t = 0.0)]
    pub c_o: f64,
    /// Sweep a parameter: NAME=START:END:STEP (inclusive) or NAME=V1,V2,... Repeat for a grid.
    /// NAME: tau, n, cost_scale, t_l, t_x, c_mig, c_rep, c_coh, k_mig, k_rep, e_ro, e_rm, e_ss,
    /// e_sp, q_o, c_o, or CLASS.FIELD (e.g. SS.run_granularity).
    #[arg(long, value_name = "SPEC")]
    pub sweep: Vec<String>,
}

#[derive(clap::Args, Debug)]
pub struct RooflineArgs {
    /// Machine preset name, or a machine TOML file (path ending in .toml).
    #[arg(long, default_value = "knl-7250-flat")]
    pub machine: String,
    /// Arithmetic intensities, flop/B, comma-separated.
    #[arg(long, required = true, value_delimiter = ',', num_args = 1..)]
    pub ai: Vec<String>,
    /// Which bandwidth figure makes the tier ceilings.
    #[arg(long, value_enum, default_value = "peak")]
    pub bandwidth: BandwidthArg,
    /// Compute ceiling, GFLOP/s (default: the machine's peak_gflops_dp).
    #[arg(long)]
    pub peak_gflops: Option<f64>,
}

#[derive(clap::Args, Debug)]
pub struct ClassesArgs {
    /// Built-in page-class set (omit to list them).
    pub name: Option<String>,
}

pub fn run(cmd: &ModelCmd, out: &OutputOpts) -> Result<()> {
    match cmd {
        ModelCmd::Mva(a) => run_mva(a, out),
        ModelCmd::Roofline(a) => run_roofline(a, out),
        ModelCmd::Classes(a) => run_classes(a, out),
        ModelCmd::Validate(a) => run_validate(a, out),
    }
}

#[derive(clap::Args, Debug)]
pub struct ValidateArgs {
    /// Machine preset name, or a machine TOML file (path ending in .toml).
    #[arg(long, default_value = "gp1000")]
    pub machine: String,
    /// Instance set: `synth` (variants of the dunx-synth workload), or a comma-separated list
    /// of its instance names.
    #[arg(long, default_value = "synth")]
    pub instances: String,
    /// Simulated runs per case (calibration and prediction each); `--seeds` is an older name.
    #[arg(long = "runs", alias = "seeds", default_value_t = 10)]
    pub seeds: u32,
    /// Master seed of the simulated runs.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Bytes per reference in the simulation (the workload compiler's minimum is 8).
    #[arg(long, default_value_t = 8)]
    pub access_bytes: u64,
    /// Keep the machine's memory bandwidths. By default each node's bandwidth is set to
    /// access_bytes / t_l, so that a reference occupies its module for t_l as in the model
    /// (the gp1000 preset's figure is one 4-byte word per 0.6 us).
    #[arg(long)]
    pub keep_bandwidth: bool,
    /// Misses in flight per thread in the simulation (the model's processor waits for every
    /// reference: 1).
    #[arg(long, default_value_t = 1.0)]
    pub mlp: f64,
    /// Synth phase transitions: sharp (a barrier after every synth phase, the preset's) or
    /// fuzzy (no barriers).
    #[arg(long, value_enum, default_value = "sharp")]
    pub phases: PhasesArg,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum PhasesArg {
    /// Barrier after every synth phase.
    Sharp,
    /// No barriers between synth phases.
    Fuzzy,
}

fn is_file_arg(s: &str) -> bool {
    s.ends_with(".toml")
}

fn load_machine(name: &str) -> Result<Machine> {
    if is_file_arg(name) {
        let text = crate::scenario::read_user_file_as(name, "machine file ")?;
        Ok(Machine::from_toml_str(&text, name)?)
    } else {
        Ok(numalab_core::machine::presets::load(name)?)
    }
}

fn load_classes(name: &str) -> Result<ClassSet> {
    if is_file_arg(name) {
        let text = crate::scenario::read_user_file_as(name, "page-class file ")?;
        // A workload file (a synth instance) has a [workload] table; a page-class file has none.
        let is_workload = toml::from_str::<toml::Table>(&text).map(|t| t.contains_key("workload")).unwrap_or(false);
        if is_workload {
            let file = numalab_workload::presets::parse(&text, name)?;
            return classes_of_workload(&file, name);
        }
        Ok(ClassSet::from_toml_str(&text, name)?)
    } else {
        Ok(classes::preset(name)?)
    }
}

fn parse_policies(s: &str) -> Result<Vec<PolicyKind>> {
    if s.trim().eq_ignore_ascii_case("all") {
        return Ok(PolicyKind::ALL.to_vec());
    }
    let mut out = Vec::new();
    for part in s.split(',') {
        let p = part.trim();
        match PolicyKind::parse(p) {
            Some(k) => out.push(k),
            None => {
                bail!("unknown policy '{p}'; valid policies: {}, all", PolicyKind::ALL.map(|k| k.as_str()).join(", "))
            }
        }
    }
    Ok(out)
}

/// Format with `sig` significant digits, dropping trailing zeros (table cells).
fn sig(v: f64, digits: usize) -> String {
    if v == 0.0 {
        return "0".to_string();
    }
    if !v.is_finite() {
        return if v.is_nan() { "-".to_string() } else { "inf".to_string() };
    }
    let mag = v.abs().log10().floor() as i32;
    if !(-2..=9).contains(&mag) {
        return format!("{:.*e}", digits - 1, v);
    }
    let decimals = (digits as i32 - 1 - mag).max(0) as usize;
    let s = format!("{v:.decimals$}");
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    }
}

/// A JSON number, or null for NaN/∞ (JSON has neither).
fn num(v: f64) -> Value {
    if v.is_finite() {
        json!(v)
    } else {
        Value::Null
    }
}

fn run_mva(a: &MvaArgs, out: &OutputOpts) -> Result<()> {
    let machine = load_machine(&a.machine)?;
    let class_set = load_classes(&a.classes)?;
    let policies = parse_policies(&a.policy)?;
    let sweeps = a.sweep.iter().map(|s| Sweep::parse(s)).collect::<Result<Vec<_>, _>>()?;

    let costs = match (a.c_mig, a.c_rep, a.c_coh) {
        (Some(m), Some(r), Some(c)) => Some([m, r, c]),
        _ => None,
    };
    let (mut hw, hw_notes) = Hardware::from_machine(&machine, costs).map_err(|e| match e {
        numalab_model::ModelError::MachineLacks { .. } => {
            anyhow::anyhow!("{e} with --c-mig, --c-rep and --c-coh (us)")
        }
        e => e.into(),
    })?;
    if let Some(n) = a.nodes {
        hw.nodes = n;
    }
    if let Some(v) = a.t_l {
        hw.t_l = v;
    }
    if let Some(v) = a.t_x {
        hw.t_x = v;
    }
    if let Some(v) = a.c_mig {
        hw.c_mig = v;
    }
    if let Some(v) = a.c_rep {
        hw.c_rep = v;
    }
    if let Some(v) = a.c_coh {
        hw.c_coh = v;
    }
    hw.cost_scale = a.cost_scale;
    hw.network = match a.network {
        NetworkArg::Delay => NetworkMode::Delay,
        NetworkArg::Queue => NetworkMode::Queue,
    };
    let mix = [a.p_l, a.q_m, a.q_r, a.q_c];
    let measured = if policies.contains(&PolicyKind::Measured) {
        let [Some(p_l), Some(q_m), Some(q_r), Some(q_c)] = mix else {
            bail!("policy measured needs all of --p-l, --q-m, --q-r and --q-c");
        };
        Some(numalab_model::policy::MeasuredMix { p_l, q_m, q_r, q_c })
    } else {
        if mix.iter().any(Option::is_some) {
            bail!("--p-l, --q-m, --q-r and --q-c apply only to --policy measured");
        }
        None
    };
    let mut params = PolicyParams { k_mig: a.k_mig, k_rep: a.k_rep, measured, ..PolicyParams::default() };
    params.errors[ClassKind::Ro.index()] = a.e_ro;
    params.errors[ClassKind::Rm.index()] = a.e_rm;
    params.errors[ClassKind::Ss.index()] = a.e_ss;
    params.errors[ClassKind::Sp.index()] = a.e_sp;
    let base = Scenario {
        hardware: hw,
        classes: class_set,
        policy: policies[0],
        params,
        calibration: Calibration { tau_us: a.tau, q_o: a.q_o, c_o_us: a.c_o },
    };

    // Every point of the sweep grid (first axis outermost), for every policy.
    let mut grid: Vec<Vec<(Param, f64)>> = vec![Vec::new()];
    for s in &sweeps {
        grid = grid
            .into_iter()
            .flat_map(|prefix| {
                s.values.iter().map(move |&v| {
                    let mut p = prefix.clone();
                    p.push((s.param, v));
                    p
                })
            })
            .collect();
    }
    let swept: Vec<Param> = sweeps.iter().map(|s| s.param).collect();
    // Class parameters appear in a point only when swept.
    let mut input_params: Vec<Param> =
        ["n", "tau", "cost_scale", "t_l", "t_x", "c_mig", "c_rep", "c_coh", "k_mig", "k_rep", "e_ro", "e_rm", "e_ss", "e_sp", "q_o", "c_o"]
            .iter()
            .map(|n| Param::parse(n).expect("known parameter"))
            .collect();
    for p in &swept {
        if !input_params.contains(p) {
            input_params.push(*p);
        }
    }

    let mut headers: Vec<String> = vec!["policy".into()];
    headers.extend(swept.iter().map(|p| p.name()));
    headers.extend(["p_l", "q_m", "q_r", "q_c", "w_l_us", "w_r_us", "r_us", "predicted_s"].map(String::from));
    let mut table = Table::new(headers);
    let mut points = Vec::new();
    let mut treatments_note: Option<String> = None;
    for point in &grid {
        let mut sc = base.clone();
        for &(p, v) in point {
            sc.set(p, v).with_context(|| format!("sweep point {}={v}", p.name()))?;
        }
        for &policy in &policies {
            sc.policy = policy;
            let where_ = || {
                let mut s = format!("policy {}", policy.as_str());
                for &(p, v) in point {
                    s.push_str(&format!(", {}={v}", p.name()));
                }
                s
            };
            let pred = sc.solve().with_context(where_)?;
            let mut obj = Map::new();
            obj.insert("policy".into(), json!(policy.as_str()));
            obj.insert("network".into(), json!(sc.hardware.network.as_str()));
            for p in &input_params {
                let v = sc.get(*p);
                obj.insert(p.name(), if *p == Param::Nodes { json!(v as u64) } else { num(v) });
            }
            let (pl, s) = (&pred.placement, &pred.solution);
            for (k, v) in [
                ("r_us", s.r),
                ("r_r_us", s.r_r),
                ("r_f_us", s.r_f),
                ("t_local_us", s.t_local),
                ("t_remote_us", s.t_remote),
                ("w_l_us", s.w_l),
                ("w_r_us", s.w_r),
                ("w_n_us", s.w_n),
                ("x_per_us", s.x),
                ("p_l", pl.p_l),
                ("p_r", pl.p_r),
                ("q_m", pl.q_m),
                ("q_r", pl.q_r),
                ("q_c", pl.q_c),
                ("refs", pl.refs),
                ("predicted_s", pred.time_s),
            ] {
                obj.insert(k.into(), num(v));
            }
            let ideal: Map<String, Value> = ClassKind::ALL
                .iter()
                .filter(|k| sc.classes.get(**k).pages > 0.0)
                .map(|k| (k.as_str().to_string(), json!(pl.classes[k.index()].ideal.as_str())))
                .collect();
            if treatments_note.is_none() {
                let list: Vec<String> = ClassKind::ALL
                    .iter()
                    .filter(|k| sc.classes.get(**k).pages > 0.0)
                    .map(|k| format!("{} {}", k.as_str(), pl.classes[k.index()].ideal.as_str()))
                    .collect();
                treatments_note = Some(format!("ideal treatments (first point): {}", list.join(", ")));
            }
            obj.insert("ideal_treatments".into(), Value::Object(ideal));
            obj.insert("iterations".into(), json!(s.iterations));
            points.push(Value::Object(obj));

            let mut row = vec![policy.as_str().to_string()];
            row.extend(point.iter().map(|&(_, v)| sig(v, 6)));
            row.extend([pl.p_l, pl.q_m, pl.q_r, pl.q_c, s.w_l, s.w_r, s.r, pred.time_s].map(|v| sig(v, 6)));
            table.row(row);
        }
    }
    let hw = &base.hardware;
    table.notes.push(format!(
        "machine {} (n = {}, t_l = {} us, t_x = {} us, C_mig/C_rep/C_coh = {}/{}/{} us, cost_scale {}, network {}); classes {} ({}); tau = {} us",
        machine.name,
        hw.nodes,
        sig(hw.t_l, 6),
        sig(hw.t_x, 6),
        hw.c_mig,
        hw.c_rep,
        hw.c_coh,
        hw.cost_scale,
        hw.network.as_str(),
        if base.classes.name.is_empty() { "-" } else { &base.classes.name },
        base.classes.origin,
        sig(a.tau, 6)
    ));
    if let Some(n) = treatments_note {
        table.notes.push(n);
    }
    table.notes.push("r_us: mean time per reference R = tau + R_r + R_f; predicted_s = N x R per process".into());
    table.notes.push(
        "legend: p_l = share of references that are local; q_m, q_r, q_c = page migrations, replications and \
coherency faults per reference (docs/model.md §3.2); w_l_us, w_r_us = mean wait at the local and remote memory, microseconds"
            .into(),
    );
    table.notes.extend(hw_notes.iter().cloned());

    let doc = json!({
        "schema": "numalab.model-mva/1",
        "machine": machine.name,
        "classes": {"name": base.classes.name, "origin": base.classes.origin},
        "notes": hw_notes,
        "points": points,
    });
    emit(out, &doc, &table)
}

fn run_roofline(a: &RooflineArgs, out: &OutputOpts) -> Result<()> {
    let machine = load_machine(&a.machine)?;
    let mut ais = Vec::with_capacity(a.ai.len());
    for s in &a.ai {
        let t = s.trim();
        let v: f64 = t.parse().map_err(|_| anyhow::anyhow!("bad --ai value '{t}': not a number"))?;
        if !(v.is_finite() && v > 0.0) {
            bail!("bad --ai value '{t}': arithmetic intensity must be finite and > 0");
        }
        ais.push(v);
    }
    let kind = match a.bandwidth {
        BandwidthArg::Peak => BandwidthKind::Peak,
        BandwidthArg::Sustained => BandwidthKind::Sustained,
    };
    let roof = Roofline::from_machine(&machine, kind, a.peak_gflops).map_err(|e| match e {
        numalab_model::ModelError::MachineLacks { .. } => anyhow::anyhow!("{e} with --peak-gflops"),
        e => e.into(),
    })?;
    let (slow, fast) = (roof.slowest(), roof.fastest());
    let multi = roof.tiers.len() > 1;

    let mut headers = vec!["ai".to_string()];
    for t in &roof.tiers {
        headers.push(format!("{}_gflops", t.tier.as_str()));
        headers.push(format!("{}_bound", t.tier.as_str()));
    }
    if multi {
        headers.push(format!("gain_{}_over_{}", roof.tiers[fast].tier.as_str(), roof.tiers[slow].tier.as_str()));
    }
    let mut table = Table::new(headers);
    let mut points = Vec::new();
    for &ai in &ais {
        let mut row = vec![sig(ai, 6)];
        let mut tiers = Vec::new();
        for (i, t) in roof.tiers.iter().enumerate() {
            let p = roof.attainable(i, ai);
            let b = roof.bound(i, ai);
            row.push(sig(p, 8));
            row.push(b.as_str().to_string());
            tiers.push(json!({"tier": t.tier.as_str(), "attainable_gflops": p, "bound": b.as_str()}));
        }
        let gain = multi.then(|| roof.gain(slow, fast, ai));
        if let Some(g) = gain {
            row.push(sig(g, 6));
        }
        table.row(row);
        points.push(json!({"ai": ai, "tiers": tiers, "gain": gain}));
    }
    table.notes.push(format!(
        "machine {}: compute ceiling {} GFLOP/s; {} bandwidth",
        machine.name,
        sig(roof.peak_gflops, 8),
        kind.as_str()
    ));
    for (i, t) in roof.tiers.iter().enumerate() {
        table.notes.push(format!(
            "  {}: B = {} GB/s (nodes {:?}), ridge point I* = {} flop/B",
            t.tier.as_str(),
            sig(t.bw_gbps, 8),
            t.nodes,
            sig(roof.ridge(i), 6)
        ));
    }
    let doc = json!({
        "schema": "numalab.model-roofline/1",
        "machine": machine.name,
        "bandwidth": kind.as_str(),
        "peak_gflops": roof.peak_gflops,
        "tiers": roof.tiers.iter().enumerate().map(|(i, t)| json!({
            "tier": t.tier.as_str(),
            "nodes": t.nodes,
            "bw_gbps": t.bw_gbps,
            "ridge_flop_per_byte": roof.ridge(i),
        })).collect::<Vec<_>>(),
        "gain_from": multi.then(|| roof.tiers[slow].tier.as_str()),
        "gain_to": multi.then(|| roof.tiers[fast].tier.as_str()),
        "points": points,
    });
    emit(out, &doc, &table)
}

fn run_classes(a: &ClassesArgs, out: &OutputOpts) -> Result<()> {
    match &a.name {
        Some(name) => {
            classes::preset(name)?;
            if matches!(out.format, Some(crate::output::Format::Csv | crate::output::Format::Json)) {
                crate::scenario::usage!("model classes NAME prints the TOML file only, not CSV or JSON");
            }
            let text = classes::PRESETS.iter().find(|(n, _)| n == name).map(|(_, t)| *t).unwrap_or_default();
            crate::output::write_text(out.out.as_deref(), text)
        }
        None => {
            let mut table = Table::new(["name", "description"]);
            let mut list = Vec::new();
            for n in classes::preset_names() {
                let set = classes::preset(n)?;
                table.row([n.to_string(), set.description.clone()]);
                list.push(json!({"name": n, "description": set.description}));
            }
            emit(out, &json!({"schema": "numalab.model-classes/1", "presets": list}), &table)
        }
    }
}

// ---------------------------------------------------------------------------------------------
// `model validate`: docs/model.md §6 against the simulator.

/// Synth instances: variants of the `dunx-synth` workload preset (its §8(c) classes), keeping
/// the listed classes. The paper's nine instances lost their page counts; these are ours.
const SYNTH_INSTANCES: &[(&str, &[&str])] = &[
    ("synth-5c", &["PR", "RO", "RM", "SS", "SP"]),
    ("synth-pr-ro", &["PR", "RO"]),
    ("synth-rm-ss", &["PR", "RM", "SS"]),
    ("synth-sp", &["SP"]),
];

/// The page classes of a synth workload file, for the model.
fn classes_of_workload(file: &numalab_workload::WorkloadFile, origin: &str) -> Result<ClassSet> {
    let mut params = [classes::ClassParams::ABSENT; 5];
    for r in &file.region {
        let Some(k) = ClassKind::parse(&r.dunx_class) else { bail!("{origin}: region '{}' has no DUnX class", r.name) };
        let need = |v: Option<f64>, what: &str| v.ok_or_else(|| anyhow::anyhow!("{origin}: region '{}' lacks {what}", r.name));
        params[k.index()] = classes::ClassParams {
            pages: need(r.pages.map(|p| p as f64), "pages")?,
            reads: need(r.reads, "reads")?,
            writes: need(r.writes, "writes")?,
            run_granularity: need(r.run_granularity, "run_granularity")?,
            write_granularity: need(r.write_granularity, "write_granularity")?,
            sharers: need(r.sharers.map(f64::from), "sharers")?,
        };
    }
    Ok(ClassSet::new(&file.workload.name, origin, params)?)
}

/// The machine reduced to its node 0 (the 1-node calibration machine).
fn first_node_only(m: &Machine) -> Result<Machine> {
    let mut one = m.clone();
    one.name = format!("{}-node0", m.name);
    one.sockets = 1;
    one.nodes.truncate(1);
    one.nodes[0].socket = 0;
    one.latency_ns = vec![vec![m.latency_ns[0][0]]];
    one.latency_ns_contended = m.latency_ns_contended.as_ref().map(|l| vec![vec![l[0][0]]]);
    one.slit = vec![vec![m.slit[0][0]]];
    one.hops = vec![vec![0]];
    one.io_nodes.retain(|&n| n == 0);
    one.link_bw_gbps = 0.0;
    one.link_bw_narrow_gbps = None;
    one.link_util_counter_pct = None;
    Ok(Machine::from_toml_str(&one.to_toml_string(), &one.name)?)
}

struct SimCase {
    exec_s: Vec<f64>,
    refs_per_thread: f64,
    first_touch_faults: f64,
    local_ratio: f64,
}

fn simulate(machine: &Machine, file: &numalab_workload::WorkloadFile, origin: &str, a: &ValidateArgs) -> Result<SimCase> {
    use std::sync::Arc;
    // The comparison runs the simulator at the model's one MLP (`--mlp`), so a machine's own
    // streaming MLP (`[core] mlp_stream`, docs/machines.md) is set aside.
    let mut machine = machine.clone();
    machine.core = None;
    let machine = Arc::new(machine);
    let program = numalab_workload::compile(file, origin, &machine, &Default::default())
        .with_context(|| format!("compiling {origin} for {}", machine.name))?;
    let threads = program.threads as f64;
    let mut sim = numalab_sim::SimConfig::default();
    sim.core.mlp_stream = a.mlp;
    sim.core.mlp_random = a.mlp;
    sim.core.mlp_dependent = a.mlp;
    sim.memory.random_efficiency = 1.0;
    // The model's processors run nothing but their process.
    sim.sched.noise_rate_per_cpu_hz = 0.0;
    let scenario = numalab_sim::Scenario {
        machine,
        program: Arc::new(program),
        policy: numalab_policy::find("first-touch")?,
        policy_config: Default::default(),
        sim,
    };
    let runs = numalab_sim::run_many(&scenario, a.seed, a.seeds, &|| {})?;
    let n = runs.len() as f64;
    Ok(SimCase {
        exec_s: runs.iter().map(|r| r.exec_time_s).collect(),
        refs_per_thread: runs[0].accesses as f64 / threads,
        first_touch_faults: runs.iter().map(|r| r.first_touch_faults as f64).sum::<f64>() / n,
        local_ratio: runs.iter().map(|r| r.local_access_ratio.unwrap_or(0.0)).sum::<f64>() / n,
    })
}

fn run_validate(a: &ValidateArgs, out: &OutputOpts) -> Result<()> {
    use numalab_model::validate::{calibrate_tau, ci99, predict_static, FaultCount};
    if a.seeds < 2 {
        bail!("--seeds must be at least 2 for a confidence interval");
    }
    let mut machine = load_machine(&a.machine)?;
    let (hw, hw_notes) = Hardware::from_machine(&machine, None)?;
    if !a.keep_bandwidth {
        for node in &mut machine.nodes {
            node.mem_bw_gbps = a.access_bytes as f64 / (hw.t_l * 1000.0);
            node.mem_peak_gbps = None;
        }
        machine = Machine::from_toml_str(&machine.to_toml_string(), &machine.name)?;
    }
    let one = first_node_only(&machine)?;
    let base = numalab_workload::presets::load("dunx-synth")?;
    let wanted: Vec<&(&str, &[&str])> = if a.instances.trim() == "synth" {
        SYNTH_INSTANCES.iter().collect()
    } else {
        a.instances
            .split(',')
            .map(|n| {
                SYNTH_INSTANCES.iter().find(|(name, _)| *name == n.trim()).ok_or_else(|| {
                    anyhow::anyhow!(
                        "unknown instance '{}'; valid: synth, {}",
                        n.trim(),
                        SYNTH_INSTANCES.iter().map(|(n, _)| *n).collect::<Vec<_>>().join(", ")
                    )
                })
            })
            .collect::<Result<_>>()?
    };
    let first_touch_us = machine.os_costs.first_touch_fault_ns / 1000.0;
    let mut table =
        Table::new(["instance", "tau_us", "predicted_s", "simulated_mean_s", "ci99_lo", "ci99_hi", "rel_error", "p_l_model", "p_l_sim"]);
    let mut rows = Vec::new();
    for (name, keep) in wanted {
        let origin = format!("preset:dunx-synth/{name}");
        let mut file = base.clone();
        file.workload.name = name.to_string();
        file.workload.access_bytes = a.access_bytes;
        file.region.retain(|r| keep.contains(&r.dunx_class.as_str()));
        let kept: Vec<String> = file.region.iter().map(|r| r.name.clone()).collect();
        for ph in &mut file.phase {
            ph.accesses.retain(|acc| kept.contains(&acc.region));
            if a.phases == PhasesArg::Fuzzy {
                ph.barrier = numalab_workload::schema::Barrier::None;
            }
        }
        let classes_n = classes_of_workload(&file, &origin)?;
        // 1-node calibration: one process, every page private to it.
        let mut file1 = file.clone();
        file1.workload.threads = numalab_workload::schema::Threads::Count(1);
        for r in &mut file1.region {
            r.sharers = Some(1);
        }
        let cal_sim = simulate(&one, &file1, &origin, a)?;
        let t1 = cal_sim.exec_s.iter().sum::<f64>() / cal_sim.exec_s.len() as f64;
        let cal = calibrate_tau(
            t1,
            cal_sim.refs_per_thread,
            hw.t_l,
            &[FaultCount { count: cal_sim.first_touch_faults, cost_us: first_touch_us }],
        )?;
        let pred = predict_static(&hw, &classes_n, &cal)?;
        let sim_n = simulate(&machine, &file, &origin, a)?;
        if (sim_n.refs_per_thread - pred.placement.refs).abs() > 0.5 {
            bail!("{name}: the simulator made {} references per process, the model counts {}", sim_n.refs_per_thread, pred.placement.refs);
        }
        let ci = ci99(&sim_n.exec_s).expect("at least two samples");
        let rel = (pred.time_s - ci.mean) / ci.mean;
        table.row([
            name.to_string(),
            sig(cal.tau_us, 6),
            sig(pred.time_s, 6),
            sig(ci.mean, 6),
            sig(ci.lo, 6),
            sig(ci.hi, 6),
            format!("{:+.2}%", rel * 100.0),
            sig(pred.placement.p_l, 6),
            sig(sim_n.local_ratio, 6),
        ]);
        rows.push(json!({
            "name": name,
            "predicted_s": pred.time_s,
            "simulated_mean_s": ci.mean,
            "ci99": [ci.lo, ci.hi],
            "rel_error": rel,
            "tau_us": cal.tau_us,
            "calibration_mean_s": t1,
            "refs_per_process": pred.placement.refs,
            "p_l_model": pred.placement.p_l,
            "p_l_simulated": sim_n.local_ratio,
            "samples_s": sim_n.exec_s,
        }));
    }
    table.notes.push(format!(
        "machine {} (n = {}), policy static (simulator: first-touch), {} seeds per case, {} B per reference, MLP {}, module bandwidth {} GB/s, {:?} phases",
        machine.name, hw.nodes, a.seeds, a.access_bytes, a.mlp, sig(machine.nodes[0].mem_bw_gbps, 6), a.phases
    ));
    table.notes.push("rel_error = (predicted - simulated mean) / simulated mean; ci99: Student t, n-1 d.o.f.".into());
    table.notes.extend(hw_notes);
    let doc = json!({"schema": "numalab.model-validate/1", "machine": machine.name, "instances": rows});
    emit(out, &doc, &table)
}
