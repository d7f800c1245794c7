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
    /// Instead of the hot-loop scenarios, measure what a study costs: one run of each NPB-like
    /// workload (about 0.5–1 simulated second each; 10–15 with `--length study`) and its
    /// slowdown, wall seconds per simulated second, on one core. Several minutes.
    #[arg(long)]
    pub slowdown: bool,
    /// Machine of the slowdown benchmark.
    #[arg(long, default_value = "server-b-8n", requires = "slowdown")]
    pub machine: String,
    /// Policy of the slowdown benchmark (repeat for several).
    #[arg(long = "policy", default_value = "linux", requires = "slowdown")]
    pub policies: Vec<String>,
    /// Workloads of the slowdown benchmark (repeat; default the NPB-like suite).
    #[arg(long = "workload", requires = "slowdown")]
    pub workloads: Vec<String>,
    /// Iterations of every workload of the slowdown benchmark (default: the suite's counts).
    #[arg(long, requires = "slowdown", value_parser = clap::value_parser!(u32).range(1..))]
    pub iterations: Option<u32>,
    /// Engine of the slowdown benchmark: `exact` charges every reference, `fast` charges
    /// random references by expected per-node counts (docs/simulator.md, "The fast engine").
    #[arg(long, default_value = "fast", requires = "slowdown", value_parser = ["exact", "fast"])]
    pub engine: String,
    /// Run length of the slowdown benchmark's workloads: `short`, about 1 simulated second on
    /// server-a-4n (0.5–1 s on server-b-8n), or `study`, the 10–15 simulated seconds per run on
    /// server-b-8n of the stability study (studies/stability-b-fast.toml), the runs whose cost
    /// the speed target is about; a short run weighs the set-up (first touch of every page)
    /// ten times more. `--iterations` overrides either.
    #[arg(long, default_value = "short", requires = "slowdown", value_parser = ["short", "study"])]
    pub length: String,
    /// Runs of each workload and policy in the slowdown benchmark, run `k` with the seed that
    /// `numalab sim --seed 1` gives its run `k`. A dynamic policy's runs take different
    /// courses (how many pages move, how a stride is counted), and one run's cost can be 10 %
    /// off the mean of a few: each row's slowdown is then the runs' wall seconds over their
    /// simulated seconds, with the least and largest of one run beside it.
    #[arg(long, default_value_t = 1, requires = "slowdown", value_parser = clap::value_parser!(u32).range(1..))]
    pub runs: u32,
    /// Override a configuration key in every run of the slowdown benchmark (repeatable), as
    /// `numalab sim --set` does, e.g. `--set sim.memory.demand_tolerance=0.01`: what a knob
    /// costs or saves, with the engine's counts beside it. The engine and the iterations
    /// have their own options (`--engine`, `--iterations`).
    #[arg(long = "set", value_name = "KEY=VALUE", requires = "slowdown")]
    pub set: Vec<String>,
}

/// Keys the slowdown benchmark sets from its own options, which `--set` may not override:
/// each row names its engine and iterations, and an override would make them wrong.
const OWN_KEYS: &[(&str, &str)] = &[("sim.engine", "--engine"), (crate::study::ITERATIONS_KEY, "--iterations")];

/// `--set` overrides, refused where they would override the benchmark's own options.
fn checked_overrides(set: &[String]) -> Result<Vec<String>> {
    for kv in set {
        let key = kv.split_once('=').map_or(kv.as_str(), |(k, _)| k).trim();
        if let Some((_, option)) = OWN_KEYS.iter().find(|(own, _)| *own == key) {
            anyhow::bail!("bench --slowdown --set {kv}: {key} is set by {option}; use {option} instead");
        }
    }
    Ok(set.to_vec())
}

/// The NPB-like suite and the iteration counts that make each run about 1 simulated second
/// on server-a-4n (a tenth of the full programs; ep-like's one iteration is longer), as in
/// `docs/results/linux-baseline-short.toml`.
const SLOWDOWN_SUITE: &[(&str, u32)] = &[
    ("is-like", 14),
    ("ep-like", 1),
    ("cg-like", 1),
    ("mg-like", 5),
    ("ft-like", 2),
    ("bt-like", 6),
    ("sp-like", 7),
    ("lu-like", 2),
    ("ua-like", 234),
];

/// The NPB-like suite at the iteration counts of studies/stability-b-fast.toml: about 10–15
/// simulated seconds per run on server-b-8n (that file says how they were chosen).
const STUDY_SUITE: &[(&str, u32)] = &[
    ("is-like", 330),
    ("ep-like", 10),
    ("cg-like", 10),
    ("mg-like", 100),
    ("ft-like", 40),
    ("bt-like", 155),
    ("sp-like", 165),
    ("lu-like", 25),
    ("ua-like", 3500),
];

/// The suite of `--length` (`short` or `study`).
fn suite(length: &str) -> &'static [(&'static str, u32)] {
    if length == "study" {
        STUDY_SUITE
    } else {
        SLOWDOWN_SUITE
    }
}

fn slowdown(a: &BenchArgs, out: &OutputOpts) -> Result<()> {
    use crate::scenario::{resolve, ScenarioArgs};
    let overrides = checked_overrides(&a.set)?;
    let workloads: Vec<(String, Option<u32>)> = if a.workloads.is_empty() {
        suite(&a.length).iter().map(|&(w, i)| (w.to_string(), a.iterations.or(Some(i)))).collect()
    } else {
        a.workloads.iter().map(|w| (w.clone(), a.iterations.or(suite(&a.length).iter().find(|s| s.0 == w).map(|s| s.1)))).collect()
    };
    let mut t = Table::new([
        "machine",
        "workload",
        "policy",
        "engine",
        "iterations",
        "runs",
        "wall_s",
        "simulated_s",
        "slowdown",
        "slowdown_range",
        "cpu_s",
        "cpu_vs_first",
    ]);
    let mut rows = Vec::new();
    // CPU seconds of the first policy per workload: what a dynamic policy costs over it. CPU
    // time of the running thread, not wall time, so that other work on a shared machine does
    // not enter the ratio.
    let mut first_cpu_s: Vec<f64> = Vec::with_capacity(workloads.len());
    let pb = crate::scenario::progress((workloads.len() * a.policies.len()) as u64 * u64::from(a.runs), "bench --slowdown");
    for (policy_index, policy) in a.policies.iter().enumerate() {
        let mut log_sum = 0.0;
        let mut log_cost_sum = 0.0;
        for (workload_index, (w, iterations)) in workloads.iter().enumerate() {
            let args = ScenarioArgs {
                machine: a.machine.clone(),
                workload: Some(w.clone()),
                threads: None,
                scale: Some(1.0),
                runs: 1,
                seed: 1,
                jobs: None,
                engine: None,
                set: iterations
                    .map(|i| format!("{}={i}", crate::study::ITERATIONS_KEY))
                    .into_iter()
                    .chain([format!("sim.engine={}", a.engine)])
                    .chain(overrides.iter().cloned())
                    .collect(),
                force: true,
                iterations: None,
            };
            let r = resolve(&args, policy)?;
            // Sums over the runs, and the least and largest slowdown of one run.
            let (mut wall_s, mut cpu_s, mut sim_s) = (0.0, 0.0, 0.0);
            // What the engine did, and the hinting faults behind much of it, summed over the runs.
            let (mut counts, mut hint_faults) = (numalab_sim::EngineCounts::default(), 0);
            let (mut least, mut largest) = (f64::INFINITY, 0.0f64);
            for k in 0..a.runs {
                let start = std::time::Instant::now();
                let cpu_start_s = thread_cpu_s();
                let m = numalab_sim::run_one(&r.scenario, numalab_core::rng::run_seed(1, u64::from(k)))?;
                cpu_s += thread_cpu_s() - cpu_start_s;
                let run_wall_s = start.elapsed().as_secs_f64();
                (wall_s, sim_s) = (wall_s + run_wall_s, sim_s + m.sim_time_s);
                counts += m.engine;
                hint_faults += m.hint_faults;
                let run_slowdown = run_wall_s / m.sim_time_s;
                (least, largest) = (least.min(run_slowdown), largest.max(run_slowdown));
                pb.inc(1);
            }
            let ratio = wall_s / sim_s;
            log_sum += ratio.ln();
            if policy_index == 0 {
                first_cpu_s.push(cpu_s);
            }
            let cpu_vs_first = cpu_s / first_cpu_s[workload_index];
            log_cost_sum += cpu_vs_first.ln();
            t.row([
                a.machine.clone(),
                w.clone(),
                policy.clone(),
                a.engine.clone(),
                iterations.map_or("all".into(), |i| i.to_string()),
                a.runs.to_string(),
                format!("{wall_s:.2}"),
                format!("{sim_s:.3}"),
                format!("{ratio:.3}"),
                format!("{least:.3}–{largest:.3}"),
                format!("{cpu_s:.2}"),
                format!("{cpu_vs_first:.2}"),
            ]);
            rows.push(json!({"machine": a.machine, "workload": w, "policy": policy, "engine": a.engine, "iterations": iterations,
                "runs": a.runs, "wall_s": wall_s, "simulated_s": sim_s, "slowdown": ratio, "slowdown_min": least,
                "slowdown_max": largest, "cpu_s": cpu_s, "cpu_vs_first": cpu_vs_first, "hint_faults": hint_faults, "engine_counts": counts}));
        }
        let n = workloads.len() as f64;
        t.notes.push(format!(
            "{policy}: geometric mean slowdown {:.2}, CPU time {:.2}x that of {}",
            (log_sum / n).exp(),
            (log_cost_sum / n).exp(),
            a.policies[0]
        ));
    }
    pb.finish_and_clear();
    t.notes.push(
        "slowdown = wall seconds per simulated second, over the runs, on one core (target of the speed issue: 0.2; 0.3 for dynamic policies)"
            .into(),
    );
    t.notes.push("cpu_vs_first = CPU time over that of the first --policy on the same workload (target for dynamic policies: 1.5)".into());
    if !overrides.is_empty() {
        t.notes.push(format!("every run with --set {}", overrides.join(" --set ")));
    }
    let doc = json!({"schema": "numalab.bench-slowdown/1", "numalab_version": env!("CARGO_PKG_VERSION"), "set": overrides, "runs": rows});
    emit(out, &doc, &t)
}

/// CPU time consumed by the calling thread, seconds (`CLOCK_THREAD_CPUTIME_ID`).
fn thread_cpu_s() -> f64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `ts` is a valid, writable timespec and the clock id is a constant the kernel knows.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    if rc != 0 {
        return f64::NAN;
    }
    ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9
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
    if a.slowdown {
        return slowdown(a, out);
    }
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
    let mut t =
        Table::new(["scenario", "policy", "events", "seconds", "M_events_per_s", "bare_M_per_s", "ratio_to_bare", "rng_only_M_per_s"]);
    for r in &results {
        t.row([
            r.name.clone(),
            r.policy.clone(),
            r.events.to_string(),
            format!("{:.3}", r.seconds),
            format!("{:.1}", r.events_per_s / 1e6),
            format!("{:.1}", r.bare_loop_events_per_s / 1e6),
            format!("{:.2}", r.ratio_to_bare),
            r.rng_limit_events_per_s.map_or("-".into(), |x| format!("{:.1}", x / 1e6)),
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
            "ratio_to_bare": r.ratio_to_bare, "rng_limit_events_per_s": r.rng_limit_events_per_s,
            "simulated_pages": r.simulated_pages,
        })).collect::<Vec<_>>(),
        "bytes_per_page": bytes_per_page,
        "model": {"name": "model-local-remote", "solves": solves, "seconds": elapsed.as_secs_f64(), "solves_per_s": model_rate},
    });
    emit(out, &doc, &t)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overrides_of_the_benchmarks_own_options_are_refused() {
        assert_eq!(checked_overrides(&["sim.memory.demand_tolerance=0.01".into()]).unwrap(), ["sim.memory.demand_tolerance=0.01"]);
        let err = checked_overrides(&["sim.engine=exact".into()]).unwrap_err().to_string();
        assert!(err.contains("sim.engine") && err.contains("--engine"), "{err}");
        let err = checked_overrides(&[format!(" {} =3", crate::study::ITERATIONS_KEY)]).unwrap_err().to_string();
        assert!(err.contains("--iterations"), "{err}");
    }

    #[test]
    fn both_lengths_cover_the_same_suite_and_study_runs_are_longer() {
        assert_eq!(SLOWDOWN_SUITE.len(), STUDY_SUITE.len());
        for (&(short_w, short_i), &(study_w, study_i)) in SLOWDOWN_SUITE.iter().zip(STUDY_SUITE) {
            assert_eq!(short_w, study_w);
            assert!(study_i >= 4 * short_i, "{study_w}: {study_i} study iterations against {short_i}");
        }
        assert_eq!(suite("study").iter().find(|s| s.0 == "ua-like").map(|s| s.1), Some(3500));
        assert_eq!(suite("short").iter().find(|s| s.0 == "ua-like").map(|s| s.1), Some(234));
    }
}
