//! `numalab bench`: the simulator's throughput against a bare access-generating loop.

use crate::output::{emit, OutputOpts, Table};
use anyhow::Result;
use numalab_sim::bench::{measure, scenarios};
use serde_json::json;

#[derive(clap::Args, Debug)]
pub struct BenchArgs {
    /// Small footprint and event count: under a second in a release build (about 0.3 s measured
    /// on a 2-core machine), instead of about 4 s for the full benchmark.
    #[arg(long)]
    pub quick: bool,
}

/// Peak and current resident set size of this process, bytes (Linux; None elsewhere).
fn rss_bytes() -> Option<(u64, u64)> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let field = |name: &str| -> Option<u64> {
        let line = status.lines().find(|l| l.starts_with(name))?;
        Some(line.split_whitespace().nth(1)?.parse::<u64>().ok()? * 1024)
    };
    Some((field("VmHWM:")?, field("VmRSS:")?))
}

pub fn run(a: &BenchArgs, out: &OutputOpts) -> Result<()> {
    let list = scenarios(a.quick)?;
    let before = rss_bytes();
    let mut results = Vec::new();
    let pb = crate::scenario::progress(list.len() as u64, "bench");
    for b in &list {
        pb.set_message(b.name);
        results.push(measure(b)?);
        pb.inc(1);
    }
    // The analytic local/remote model: solves per second (issue target: 100 000).
    let (solves, elapsed) = numalab_model::bench_local_remote(if a.quick { 200_000 } else { 2_000_000 });
    let model_rate = solves as f64 / elapsed.as_secs_f64();
    pb.finish_and_clear();
    // Peak RSS growth over the run, per simulated page of the largest scenario.
    let pages = results.iter().map(|r| r.simulated_pages).max().unwrap_or(1);
    let bytes_per_page = match (before, rss_bytes()) {
        (Some((_, rss0)), Some((hwm, _))) => Some(hwm.saturating_sub(rss0) as f64 / pages as f64),
        _ => None,
    };
    let mut t = Table::new(["scenario", "policy", "events", "seconds", "M_events_per_s", "bare_M_per_s", "ratio_to_bare"]);
    for r in &results {
        t.row([
            r.name.clone(),
            r.policy.clone(),
            r.events.to_string(),
            format!("{:.3}", r.seconds),
            format!("{:.1}", r.events_per_s / 1e6),
            format!("{:.1}", r.bare_loop_events_per_s / 1e6),
            format!("{:.2}", r.ratio_to_bare),
        ]);
    }
    t.notes.push(format!(
        "model-local-remote: {solves} solves of the local/remote MVA model in {:.3} s = {:.0} solves/s",
        elapsed.as_secs_f64(),
        model_rate
    ));
    t.notes.push(match bytes_per_page {
        Some(b) => {
            format!("peak RSS growth per simulated page: {b:.1} bytes ({pages} pages of 4 KiB)")
        }
        None => "peak RSS: unsupported on this system (no /proc/self/status)".to_string(),
    });
    let doc = json!({
        "schema": "numalab.bench/1",
        "numalab_version": env!("CARGO_PKG_VERSION"),
        "quick": a.quick,
        "scenarios": results.iter().map(|r| json!({
            "name": r.name, "policy": r.policy, "events": r.events, "seconds": r.seconds,
            "events_per_s": r.events_per_s, "bare_loop_events_per_s": r.bare_loop_events_per_s,
            "ratio_to_bare": r.ratio_to_bare, "simulated_pages": r.simulated_pages,
        })).collect::<Vec<_>>(),
        "bytes_per_page": bytes_per_page,
        "model": {"name": "model-local-remote", "solves": solves, "seconds": elapsed.as_secs_f64(), "solves_per_s": model_rate},
    });
    emit(out, &doc, &t)
}
