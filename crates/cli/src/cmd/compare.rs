//! `numalab compare`: several policies, same machine, workload and seeds.

use super::sim::{fmt_opt, is_vm_policy, load_vm_setup, simulate, vm_setup_for};
use crate::output::{emit, OutputOpts, Table};
use crate::scenario::ScenarioArgs;
use anyhow::{bail, Result};
use serde_json::json;

#[derive(clap::Args, Debug)]
pub struct CompareArgs {
    /// Comma-separated policies; times are normalised to the first. With --vm, `vm` runs the
    /// workload in the file's VMs under their own static_policy and `vm:KIND` under KIND
    /// (first-touch, first-touch+queue, first-touch-no-queue, round-4k, round-1g); e.g. linux,vm:round-1g,vm:round-4k,vm:first-touch.
    #[arg(long, value_delimiter = ',', default_value = "first-touch,round-4k,round-1g")]
    pub policies: Vec<String>,
    /// VM setup file (`[hypervisor]`, `[[vm]]`) for the `vm` and `vm:KIND` policies
    /// (docs/vm.md, "A workload inside VMs").
    #[arg(long, value_name = "FILE")]
    pub vm: Option<std::path::PathBuf>,
    #[command(flatten)]
    pub scenario: ScenarioArgs,
    /// Also write the comparison's charts as one self-contained HTML report (as `numalab
    /// report` draws them from this result; docs/report.md).
    #[arg(long, value_name = "FILE.html")]
    pub report: Option<std::path::PathBuf>,
}

pub fn run(a: &CompareArgs, out: &OutputOpts) -> Result<()> {
    if a.policies.is_empty() {
        bail!("--policies needs at least one policy");
    }
    if a.scenario.runs == 0 {
        bail!("--runs must be at least 1");
    }
    let vm = a.vm.as_deref().map(load_vm_setup).transpose()?;
    if vm.is_some() && !a.policies.iter().any(|p| is_vm_policy(p)) {
        crate::scenario::usage!("--vm is given but no policy runs in a VM: name vm or vm:KIND in --policies");
    }
    let mut seen: Vec<(&str, crate::scenario::CanonicalPolicy)> = Vec::new();
    let mut seen_vm: Vec<&str> = Vec::new();
    for p in &a.policies {
        if is_vm_policy(p) {
            vm_setup_for(p, vm.as_ref())?;
            if seen_vm.contains(&p.as_str()) {
                bail!("--policies lists '{p}' twice");
            }
            seen_vm.push(p);
            continue;
        }
        let c = crate::scenario::canonical_policy(p)?;
        if let Some((earlier, _)) = seen.iter().find(|(_, s)| *s == c) {
            if earlier == p {
                bail!("--policies lists '{p}' twice");
            }
            bail!("--policies lists '{p}' and '{earlier}', the same policy under two names");
        }
        seen.push((p, c));
    }
    let names: Vec<&str> = a.policies.iter().map(String::as_str).collect();
    crate::scenario::note_sets_for_other_policies(&a.scenario.set, &names);
    let mut results = Vec::new();
    let mut rows = Vec::new();
    for p in &a.policies {
        let (doc, _runs, summary) = simulate(&a.scenario, p, vm.as_ref())?;
        rows.push((p.clone(), summary));
        results.push(doc);
    }
    let base = rows[0].1.exec_time_s.mean;
    let mut t = Table::new([
        "policy",
        "mean_s",
        "stddev_s",
        "cv_%",
        "nmmd_%",
        "vs_first",
        "local_ratio",
        "imbalance_%",
        "link_load_%",
        "thread_migs",
    ]);
    for (p, s) in &rows {
        let e = &s.exec_time_s;
        t.row([
            p.clone(),
            format!("{:.6}", e.mean),
            format!("{:.6}", e.stddev),
            format!("{:.2}", 100.0 * e.cv),
            format!("{:.2}", 100.0 * e.nmmd),
            format!("{:.3}", e.mean / base),
            fmt_opt(s.local_access_ratio, 3),
            fmt_opt(s.node_imbalance, 1),
            fmt_opt(s.interconnect_load, 1),
            format!("{:.1}", s.thread_migrations),
        ]);
    }
    t.notes.push(format!(
        "{} on {}, scale {}, {} runs per policy, seed {}; vs_first = mean time / mean time of {}",
        a.scenario.workload(),
        a.scenario.machine,
        a.scenario.scale(),
        a.scenario.runs,
        a.scenario.seed,
        a.policies[0]
    ));
    t.notes.push(
        "legend: mean_s, stddev_s = simulated execution time over the runs, seconds; cv_% = stddev / mean; \
nmmd_% = (max - min) / mean of the run times; local_ratio = share of memory accesses served by the local node; \
imbalance_% = relative standard deviation of the accesses served per memory node; link_load_% = mean interconnect \
utilisation; thread_migs = thread migrations per run (docs/metrics.md)"
            .into(),
    );
    let normalised: Vec<f64> = rows.iter().map(|(_, s)| s.exec_time_s.mean / base).collect();
    let doc = json!({
        "schema": "numalab.compare/2",
        "numalab_version": env!("CARGO_PKG_VERSION"),
        "seed": a.scenario.seed,
        "baseline": a.policies[0],
        "normalised_exec_time": normalised,
        "results": results,
    });
    if let Some(path) = &a.report {
        write_report(path, out, &doc)?;
    }
    emit(out, &doc, &t)
}

/// The report of this comparison, from the same document `--out` writes.
fn write_report(path: &std::path::Path, out: &OutputOpts, doc: &serde_json::Value) -> Result<()> {
    let name = out.out.as_ref().map_or_else(|| "numalab compare (this run)".to_string(), |p| p.display().to_string());
    let input = numalab_report::input::parse(&name, &serde_json::to_string(doc)?)?;
    let report = numalab_report::Report::new(vec![input])?;
    crate::output::write_text(Some(path), &report.html())?;
    eprintln!("{}: {} chart(s)", path.display(), report.charts.len());
    Ok(())
}
