//! Benchmark scenarios for `numalab bench`: the simulator against a bare loop that only
//! generates the same accesses and looks up each page's node.

use crate::{run_one, Scenario, SimConfig, SimError};
use numalab_core::machine::presets;
use numalab_workload::{compile, presets as wp, CompileOptions, Program};
use std::sync::Arc;
use std::time::Instant;

/// One benchmark scenario.
pub struct BenchScenario {
    pub name: &'static str,
    pub policy: &'static str,
    pub scenario: Scenario,
}

/// What one scenario measured.
#[derive(Clone, Debug, serde::Serialize)]
pub struct BenchResult {
    pub name: String,
    pub policy: String,
    pub events: u64,
    pub seconds: f64,
    pub events_per_s: f64,
    pub bare_loop_events_per_s: f64,
    pub ratio_to_bare: f64,
    /// Random scenarios: the rate of drawing the random line numbers alone (the generator and
    /// its unbiased range reduction), a limit no per-reference simulation of them can pass.
    pub rng_limit_events_per_s: Option<f64>,
    pub simulated_pages: u64,
}

fn workload_toml(pattern: &str, footprint_bytes: u64, refs: u64) -> String {
    format!(
        "[workload]\nname = \"bench-{pattern}\"\nthreads = 16\ninit = \"parallel_ft\"\n\
         [[region]]\nname = \"data\"\nbytes = {footprint_bytes}\nsharing = \"partitioned\"\ninit_by = \"owner\"\n\
         [[phase]]\nname = \"sweep\"\nrefs = {refs}\nflops_per_access = 1.0\n\
         accesses = [ {{ region = \"data\", who = \"all\", pattern = \"{pattern}\", share = 1.0, read_frac = 0.9 }} ]\n"
    )
}

/// A STREAM-like triad: three arrays walked together, `a = b + s·c`, each thread over its own
/// block; three entries taking turns, the multi-entry case of the simulator's bulk charging.
fn triad_toml(footprint_bytes: u64, refs: u64) -> String {
    let third = footprint_bytes / 3;
    let mut t = "[workload]\nname = \"bench-triad\"\nthreads = 16\ninit = \"parallel_ft\"\n".to_string();
    for r in ["a", "b", "c"] {
        t += &format!("[[region]]\nname = \"{r}\"\nbytes = {third}\nsharing = \"partitioned\"\ninit_by = \"owner\"\n");
    }
    t += &format!(
        "[[phase]]\nname = \"triad\"\nrefs = {refs}\nflops_per_access = 0.67\n\
         accesses = [ {{ region = \"b\", who = \"owner\", pattern = \"seq\", share = 0.3333333333333333, read_frac = 1.0 }},\n\
         {{ region = \"c\", who = \"owner\", pattern = \"seq\", share = 0.3333333333333333, read_frac = 1.0 }},\n\
         {{ region = \"a\", who = \"owner\", pattern = \"seq\", share = 0.3333333333333334, read_frac = 0.0 }} ]\n"
    );
    t
}

/// The fixed scenarios: sequential, multi-array sequential and random access over a large
/// footprint with a static policy. `quick` shrinks footprint and event count for CI.
pub fn scenarios(quick: bool) -> Result<Vec<BenchScenario>, SimError> {
    let machine = Arc::new(presets::load("server-a-4n").map_err(|e| SimError::Machine(e.to_string()))?);
    let (footprint, refs) = if quick { (4u64 << 30, 10_000_000u64) } else { (32u64 << 30, 100_000_000u64) };
    let mut out = Vec::new();
    for (name, policy) in [("seq-first-touch", "first-touch"), ("triad-first-touch", "first-touch"), ("random-round-4k", "round-4k")] {
        let text = match name {
            "seq-first-touch" => workload_toml("seq", footprint, refs),
            "triad-first-touch" => triad_toml(footprint, refs),
            _ => workload_toml("random", footprint, refs),
        };
        let file = wp::parse(&text, name).map_err(|e| SimError::Internal(e.to_string()))?;
        let program = compile(&file, name, &machine, &CompileOptions::default()).map_err(|e| SimError::Internal(e.to_string()))?;
        let entry = numalab_policy::find(policy).map_err(|e| SimError::Policy(e.to_string()))?;
        let scenario = Scenario {
            machine: machine.clone(),
            program: Arc::new(program),
            policy: entry,
            policy_config: Default::default(),
            sim: SimConfig::default(),
        };
        out.push(BenchScenario { name, policy, scenario });
    }
    Ok(out)
}

/// Generate every access of the program (first touches included) and look up each page's
/// node in a one-byte-per-page table, nothing else. Walking entries are taken a page run at a
/// time, as the simulator takes them (one lookup per run), so the loop is the limit of the
/// simulator's own method rather than of reference-by-reference generation. Returns
/// (events, seconds).
pub fn bare_loop(p: &Program, nodes: usize) -> (u64, f64) {
    let home: Vec<u8> = (0..p.total_pages).map(|pg| (pg % nodes as u64) as u8).collect();
    let shift = p.line_shift();
    let lpp = p.lines_per_page;
    let start = Instant::now();
    let mut events = 0u64;
    let mut sink = 0u64;
    for t in 0..p.threads {
        for s in 0..p.steps_of(t).len() {
            let mut rng = numalab_core::rng::stream(1, "bench.bare", t as u64);
            let mut w = p.work(s, t, &mut rng);
            for e in w.entries.iter_mut().chain(w.epilogue.iter_mut()) {
                let mut left = e.refs;
                while let Some((line, k)) = e.peek_run(lpp, left).filter(|_| left > 0) {
                    let writes = e.take_run(k);
                    sink = sink.wrapping_add(home[(line >> shift) as usize] as u64 * k + writes);
                    left -= k;
                }
                for _ in 0..left {
                    let (line, write) = e.next(&mut rng);
                    sink = sink.wrapping_add(home[(line >> shift) as usize] as u64 + write as u64);
                }
                events += e.refs;
            }
        }
    }
    std::hint::black_box(sink);
    (events, start.elapsed().as_secs_f64())
}

/// Draw as many uniform line numbers over the footprint as the program has references, from
/// the simulator's generator: the cost of the random numbers alone. Returns (draws, seconds).
pub fn rng_limit(p: &Program) -> (u64, f64) {
    use rand::Rng;
    let lines = (p.total_pages * p.lines_per_page).max(1);
    let draws = p.total_refs();
    let mut rng = numalab_core::rng::stream(1, "bench.rng", 0);
    let start = Instant::now();
    let mut sink = 0u64;
    for _ in 0..draws {
        sink = sink.wrapping_add(rng.random_range(0..lines));
    }
    std::hint::black_box(sink);
    (draws, start.elapsed().as_secs_f64())
}

/// Run one scenario (simulator once, bare loop once).
pub fn measure(b: &BenchScenario) -> Result<BenchResult, SimError> {
    let start = Instant::now();
    let r = run_one(&b.scenario, 1)?;
    let seconds = start.elapsed().as_secs_f64();
    let (bare_events, bare_s) = bare_loop(&b.scenario.program, b.scenario.machine.node_count());
    let events_per_s = r.accesses as f64 / seconds;
    let bare = bare_events as f64 / bare_s;
    let rng_limit_events_per_s = b.name.starts_with("random").then(|| {
        let (draws, s) = rng_limit(&b.scenario.program);
        draws as f64 / s
    });
    Ok(BenchResult {
        name: b.name.to_string(),
        policy: b.policy.to_string(),
        events: r.accesses,
        seconds,
        events_per_s,
        bare_loop_events_per_s: bare,
        ratio_to_bare: events_per_s / bare,
        rng_limit_events_per_s,
        simulated_pages: b.scenario.program.total_pages,
    })
}
