//! `numalab calibrate`: the simulated machine's probes beside its published figures
//! (docs/calibration.md). The probes live in `numalab_sim::calibrate`; this module parses and
//! prints.

use crate::output::{emit, OutputOpts, Table};
use anyhow::Result;
use numalab_sim::calibrate::{calibrate, ProbeOptions};

/// `--check` found a figure beyond the tolerance: a result, not a usage error (exit status 1).
#[derive(Debug)]
pub struct CheckFailed(String);

impl std::fmt::Display for CheckFailed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for CheckFailed {}

#[derive(clap::Args, Debug)]
pub struct CalibrateArgs {
    /// A machine preset (`numalab list machines`) or a machine TOML file.
    #[arg(long)]
    pub machine: String,
    /// Exit with status 1 when a figure is off by more than the machine's documented tolerance.
    #[arg(long)]
    pub check: bool,
}

fn fmt_opt(v: Option<f64>, digits: usize) -> String {
    v.map(|x| format!("{x:.digits$}")).unwrap_or_else(|| "-".into())
}

pub fn run(a: &CalibrateArgs, out: &OutputOpts) -> Result<()> {
    let machine = crate::scenario::load_machine(&a.machine)?;
    let report = calibrate(&machine, &ProbeOptions::default())?;
    let mut t = Table::new(["probe", "what", "simulated", "published", "rel_error", "source"]);
    // Sources are long (URLs): the table names them [1], [2], … and lists them after it.
    let mut sources: Vec<String> = Vec::new();
    for c in &report.comparisons {
        let source = match &c.source {
            Some(s) => {
                let k = sources.iter().position(|x| x == s).unwrap_or_else(|| {
                    sources.push(s.clone());
                    sources.len() - 1
                });
                format!("[{}]", k + 1)
            }
            None => "not published".into(),
        };
        let source = if c.gap.is_some() { format!("{source} gap") } else { source };
        t.row([
            c.figure.to_string(),
            c.probe.clone(),
            format!("{:.2}", c.simulated),
            fmt_opt(c.published, 2),
            c.rel_error.map(|e| format!("{:+.1}%", if (e * 100.0).abs() < 0.05 { 0.0 } else { e * 100.0 })).unwrap_or_else(|| "-".into()),
            source,
        ]);
    }
    for p in &report.pairs {
        t.row([
            format!("chase_ns[{}][{}]", p.cpu_node, p.mem_node),
            format!("idle pointer chase, {} hop(s); preset latency_ns {:.1}", p.hops, p.preset_ns),
            format!("{:.2}", p.simulated_ns),
            "-".into(),
            "-".into(),
            "-".into(),
        ]);
    }
    for l in &report.loaded {
        t.row([
            format!("loaded_gap_{}ns", l.gap_ns),
            format!("{} threads of node {} streaming its memory: {:.2} GB/s", report.loaded_threads, report.loaded_node, l.bandwidth_gbps),
            format!("{:.2}", l.latency_ns),
            "-".into(),
            "-".into(),
            "-".into(),
        ]);
    }
    for r in &report.contended {
        t.row([
            format!("contended_ns[{}][{}]", r.cpu_node, report.contended_node),
            format!(
                "every core chases node {}; {} thread(s) of node {} at {} hop(s)",
                report.contended_node, r.threads, r.cpu_node, r.hops
            ),
            format!("{:.2}", r.simulated_ns),
            fmt_opt(r.machine_ns, 2),
            "-".into(),
            if r.machine_ns.is_some() { "latency_ns_contended".into() } else { "-".into() },
        ]);
    }
    for (k, s) in sources.iter().enumerate() {
        t.notes.push(format!("[{}] {s}", k + 1));
    }
    for c in report.comparisons.iter().filter(|c| c.gap.is_some()) {
        t.notes.push(format!("gap in {}: {}", c.figure, c.gap.as_deref().unwrap_or_default()));
    }
    match report.tolerance_pct {
        Some(tol) => t.notes.push(format!("tolerance: {tol}% (docs/results/calibration.md)")),
        None => t.notes.push(format!("machine '{}' stores no published figures", report.machine)),
    }
    let bad = report.out_of_tolerance();
    emit(out, &serde_json::to_value(&report)?, &t)?;
    if a.check && !bad.is_empty() {
        let names: Vec<&str> = bad.iter().map(|c| c.figure).collect();
        return Err(CheckFailed(format!(
            "machine '{}' is off its published figures beyond {}%: {}",
            report.machine,
            report.tolerance_pct.unwrap_or(0.0),
            names.join(", ")
        ))
        .into());
    }
    Ok(())
}
