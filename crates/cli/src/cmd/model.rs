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
    /// workload under a placement policy (approximate MVA, mva-model.md).
    Mva(Box<MvaArgs>),
    /// Roofline: attainable GFLOP/s per memory tier for given arithmetic intensities.
    Roofline(RooflineArgs),
    /// Print a built-in page-class set as TOML (a starting point for --classes files).
    Classes(ClassesArgs),
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
    /// Page-class set: a built-in preset name or a TOML file (path ending in .toml).
    #[arg(long, default_value = "dunx-synth-8c")]
    pub classes: String,
    /// Policies, comma-separated: static, cache, mor, ideal, rc, error, or all.
    #[arg(long, default_value = "ideal")]
    pub policy: String,
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
    /// One migration break-even count for every class (default: per class, mva-model.md §6.1).
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
    }
}

fn is_file_arg(s: &str) -> bool {
    s.ends_with(".toml")
}

fn load_machine(name: &str) -> Result<Machine> {
    if is_file_arg(name) {
        let text = std::fs::read_to_string(name)
            .with_context(|| format!("cannot read machine file {name}"))?;
        Ok(Machine::from_toml_str(&text, name)?)
    } else {
        Ok(numalab_core::machine::presets::load(name)?)
    }
}

fn load_classes(name: &str) -> Result<ClassSet> {
    if is_file_arg(name) {
        let text = std::fs::read_to_string(name)
            .with_context(|| format!("cannot read page-class file {name}"))?;
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
                bail!(
                    "unknown policy '{p}'; valid policies: {}, all",
                    PolicyKind::ALL.map(|k| k.as_str()).join(", ")
                )
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
        return if v.is_nan() {
            "-".to_string()
        } else {
            "inf".to_string()
        };
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
    let sweeps = a
        .sweep
        .iter()
        .map(|s| Sweep::parse(s))
        .collect::<Result<Vec<_>, _>>()?;

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
    let mut params = PolicyParams {
        k_mig: a.k_mig,
        k_rep: a.k_rep,
        ..PolicyParams::default()
    };
    params.errors[ClassKind::Ro.index()] = a.e_ro;
    params.errors[ClassKind::Rm.index()] = a.e_rm;
    params.errors[ClassKind::Ss.index()] = a.e_ss;
    params.errors[ClassKind::Sp.index()] = a.e_sp;
    let base = Scenario {
        hardware: hw,
        classes: class_set,
        policy: policies[0],
        params,
        calibration: Calibration {
            tau_us: a.tau,
            q_o: a.q_o,
            c_o_us: a.c_o,
        },
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
    let mut input_params: Vec<Param> = [
        "n",
        "tau",
        "cost_scale",
        "t_l",
        "t_x",
        "c_mig",
        "c_rep",
        "c_coh",
        "k_mig",
        "k_rep",
        "e_ro",
        "e_rm",
        "e_ss",
        "e_sp",
        "q_o",
        "c_o",
    ]
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
    headers.extend(
        [
            "p_l",
            "q_m",
            "q_r",
            "q_c",
            "w_l_us",
            "w_r_us",
            "r_us",
            "predicted_s",
        ]
        .map(String::from),
    );
    let mut table = Table::new(headers);
    let mut points = Vec::new();
    let mut treatments_note: Option<String> = None;
    for point in &grid {
        let mut sc = base.clone();
        for &(p, v) in point {
            sc.set(p, v)
                .with_context(|| format!("sweep point {}={v}", p.name()))?;
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
                obj.insert(
                    p.name(),
                    if *p == Param::Nodes {
                        json!(v as u64)
                    } else {
                        num(v)
                    },
                );
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
                .map(|k| {
                    (
                        k.as_str().to_string(),
                        json!(pl.classes[k.index()].ideal.as_str()),
                    )
                })
                .collect();
            if treatments_note.is_none() {
                let list: Vec<String> = ClassKind::ALL
                    .iter()
                    .filter(|k| sc.classes.get(**k).pages > 0.0)
                    .map(|k| format!("{} {}", k.as_str(), pl.classes[k.index()].ideal.as_str()))
                    .collect();
                treatments_note = Some(format!(
                    "ideal treatments (first point): {}",
                    list.join(", ")
                ));
            }
            obj.insert("ideal_treatments".into(), Value::Object(ideal));
            obj.insert("iterations".into(), json!(s.iterations));
            points.push(Value::Object(obj));

            let mut row = vec![policy.as_str().to_string()];
            row.extend(point.iter().map(|&(_, v)| sig(v, 6)));
            row.extend(
                [
                    pl.p_l,
                    pl.q_m,
                    pl.q_r,
                    pl.q_c,
                    s.w_l,
                    s.w_r,
                    s.r,
                    pred.time_s,
                ]
                .map(|v| sig(v, 6)),
            );
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
    table.notes.push(
        "r_us: mean time per reference R = tau + R_r + R_f; predicted_s = N x R per process".into(),
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
        let v: f64 = t
            .parse()
            .map_err(|_| anyhow::anyhow!("bad --ai value '{t}': not a number"))?;
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
        headers.push(format!(
            "gain_{}_over_{}",
            roof.tiers[fast].tier.as_str(),
            roof.tiers[slow].tier.as_str()
        ));
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
            tiers.push(
                json!({"tier": t.tier.as_str(), "attainable_gflops": p, "bound": b.as_str()}),
            );
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
            let text = classes::PRESETS
                .iter()
                .find(|(n, _)| n == name)
                .map(|(_, t)| *t)
                .unwrap_or_default();
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
            emit(
                out,
                &json!({"schema": "numalab.model-classes/1", "presets": list}),
                &table,
            )
        }
    }
}
