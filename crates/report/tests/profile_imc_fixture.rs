//! `tests/data/profile-imc.json` is hand-made, not measured: no machine this project runs on has
//! an uncore IMC PMU (docs/report.md, "Models and profiles"). It is built here as numalab's own
//! profile type, with the derived metrics computed by the profiler's code, and written as
//! `numalab profile --format json` writes documents, so it has exactly the profiler's schema.
//! `NUMALAB_UPDATE_GOLDEN=1 cargo test -p numalab-report --test profile_imc_fixture` rewrites
//! it; otherwise the file must be what this code builds.
//!
//! The made-up host: two sockets of three IMC channels each (controllers 0, 2, 4 on node 0's
//! CPU 0, 1, 3, 5 on node 1's CPU 28, as tests/fixtures/intel-2s-imc of numalab-linux reads
//! them), a program whose memory is mostly on node 0, sampled three times 100 ms apart.

mod common;

use numalab_core::profile::{Backend, EventReading, ImcController, ProfileReport, Scope, Target, TimelineSample};
use std::collections::BTreeMap;

fn build() -> ProfileReport {
    let target = Target {
        command: vec!["stream-like".into(), "--threads".into(), "16".into()],
        pid: Some(4242),
        exit_code: Some(0),
        duration_ms: 300,
        threads_seen: 16,
        labels: BTreeMap::new(),
        openmp: None,
    };
    let mut r = ProfileReport::new(Backend::Linux, target);
    r.environment.kernel = Some("6.1.0-hand-made".into());
    r.environment.cpu_model = Some("hand-made two-socket Intel Xeon (fixture, not a measurement)".into());
    r.environment.nodes = Some(2);
    r.environment.numa_balancing = Some(0);
    r.environment.perf_event_paranoid = Some(0);
    r.environment.interval_ms = 100;
    r.environment.imc = (0..6)
        .map(|c| ImcController {
            controller: c,
            pmu: format!("uncore_imc_{}", c / 2),
            cpu: if c.is_multiple_of(2) { 0 } else { 28 },
            node: Some(c % 2),
            bytes_per_count: Some(64.0),
        })
        .collect();
    // CAS counts per 100 ms interval: node 0's channels carry most of the traffic.
    let reads = |c: u32, k: u64| -> u64 {
        if c.is_multiple_of(2) {
            3_000_000 + 10_000 * c as u64 + 1_000 * k
        } else {
            600_000 + 5_000 * c as u64
        }
    };
    let writes = |c: u32, k: u64| -> u64 { reads(c, k) / 3 };
    let mut totals: BTreeMap<String, u64> = BTreeMap::new();
    for k in 0..3u64 {
        let mut events = BTreeMap::new();
        events.insert("sw.task_clock".to_string(), 1_580_000_000 + k * 1_000_000);
        for c in 0..6 {
            events.insert(format!("imc.read[{c}]"), reads(c, k));
            events.insert(format!("imc.write[{c}]"), writes(c, k));
        }
        for (n, v) in &events {
            *totals.entry(n.clone()).or_insert(0) += v;
        }
        r.timeline.push(TimelineSample { t_ms: 100 * (k + 1), enabled: true, events, ..Default::default() });
    }
    let ns = 300_000_000;
    r.events.push(EventReading::ok("sw.task_clock", Scope::Thread, totals["sw.task_clock"], ns, ns));
    for c in 0..6 {
        for what in ["read", "write"] {
            let name = format!("imc.{what}[{c}]");
            r.events.push(EventReading::ok(&name, Scope::System, totals[&name], ns, ns));
        }
    }
    r.runs = vec![numalab_core::profile::RunPlan { run: 0, groups: vec![vec!["sw.task_clock".into()]] }];
    r.notes.push("hand-made fixture for the report's per-controller chart; not a measurement".into());
    r.finish();
    r
}

#[test]
fn the_hand_made_imc_profile_is_what_the_profiler_type_writes() {
    let text = format!("{}\n", serde_json::to_string_pretty(&serde_json::to_value(build()).unwrap()).unwrap());
    let path = common::data("profile-imc.json");
    if std::env::var_os("NUMALAB_UPDATE_GOLDEN").is_some() {
        std::fs::write(&path, &text).unwrap();
        return;
    }
    assert_eq!(std::fs::read_to_string(&path).unwrap(), text, "{path} differs from what this test builds");
    // And it reads back as a profile.
    let back: ProfileReport = serde_json::from_str(&text).unwrap();
    assert_eq!(back, build());
}
