//! The simulator's side of `numalab.profile/1`: one run's counters under the names the live
//! profiler uses (docs/profile.md), so a simulated and a measured profile can be diffed.
//!
//! Every simulated access is a memory-level access, i.e. an LLC miss, so LLC misses and
//! node-local/remote loads and stores are counted exactly; what the simulator does not model
//! (instructions, cycles, cache hits, context switches, major faults, allocation outcomes) is
//! reported as unsupported with the reason, never as zero.

use crate::metrics::RunMetrics;
use numalab_core::profile::{Backend, Counter, EventReading, EventStatus, NodePages, ProfileReport, Scope, Target};
use std::collections::BTreeMap;

/// Build the profile of one run. `labels` name the machine, workload and policy.
pub fn profile_of(run: &RunMetrics, threads: u32, page_bytes: u64, labels: BTreeMap<String, String>) -> ProfileReport {
    let exec_ns = (run.exec_time_s * 1e9) as u64;
    let target = Target {
        command: vec![],
        pid: None,
        exit_code: None,
        duration_ms: exec_ns / 1_000_000,
        threads_seen: threads,
        openmp: None,
        labels,
    };
    let mut p = ProfileReport::new(Backend::Sim, target);
    let n = run.access_matrix.len();
    let (mut rl, mut rr, mut wl, mut wrm) = (0u64, 0u64, 0u64, 0u64);
    for i in 0..n {
        for j in 0..n {
            let (a, w) = (run.access_matrix[i][j], run.write_matrix[i][j]);
            if i == j {
                rl += a - w;
                wl += w;
            } else {
                rr += a - w;
                wrm += w;
            }
        }
    }
    let ok = |name: &str, v: u64| EventReading::ok(name, Scope::Thread, v, exec_ns, exec_ns);
    let no = |name: &str, why: &str| EventReading::not_ok(name, Scope::Thread, EventStatus::Unsupported, why);
    let busy_ns = (run.thread_busy_s.mean * threads as f64 * 1e9) as u64;
    p.events = vec![
        ok("sw.task_clock", busy_ns),
        ok("sw.page_faults", run.first_touch_faults + run.hint_faults),
        ok("sw.page_faults.minor", run.first_touch_faults + run.hint_faults),
        no("sw.page_faults.major", "the simulator has no storage, so no major faults"),
        no("sw.context_switches", "the simulator does not count context switches"),
        ok("sw.cpu_migrations", run.thread_migrations),
        no("cpu.cycles", "the simulator has no instruction or cycle model"),
        no("cpu.instructions", "the simulator has no instruction or cycle model"),
        no("cpu.ref_cycles", "the simulator has no instruction or cycle model"),
        no("llc.read.access", "the simulator has no cache model: it sees only accesses that missed the caches"),
        ok("llc.read.miss", rl + rr),
        no("llc.write.access", "the simulator has no cache model: it sees only accesses that missed the caches"),
        ok("llc.write.miss", wl + wrm),
        ok("node.read.local", rl),
        ok("node.read.remote", rr),
        ok("node.write.local", wl),
        ok("node.write.remote", wrm),
    ];
    p.numa.pages = run
        .pages_per_node
        .iter()
        .enumerate()
        .map(|(node, &pages)| {
            let bytes = pages * page_bytes;
            NodePages { node: node as u32, anon_bytes: bytes, file_bytes: 0, huge_bytes: 0, total_bytes: bytes }
        })
        .collect();
    let unsupported = |why: &str| Counter::unsupported(why);
    p.numa.vmstat = BTreeMap::from([
        ("numa_hint_faults".to_string(), Counter::ok(run.numa.numa_hint_faults as i64)),
        ("numa_hint_faults_local".to_string(), Counter::ok(run.numa.numa_hint_faults_local as i64)),
        ("numa_pte_updates".to_string(), Counter::ok(run.numa.numa_pte_updates as i64)),
        ("numa_huge_pte_updates".to_string(), unsupported("the simulator maps base pages only")),
        ("numa_pages_migrated".to_string(), Counter::ok(run.numa.numa_pages_migrated as i64)),
        ("pgmigrate_success".to_string(), Counter::ok(run.page_migrations as i64)),
        ("pgmigrate_fail".to_string(), Counter::ok(run.numa.pgmigrate_fail as i64)),
    ]);
    p.numa.notes.push("numastat allocation outcomes and per-task sched state are not recorded by the simulator".into());
    p.notes.push("simulated profile of one run; no timeline is recorded".into());
    p.finish();
    p
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::{BusySummary, NumaCounters};
    use crate::sched::MigrationCounts;

    #[test]
    fn local_and_remote_loads_and_stores_come_from_the_matrices() {
        let run = RunMetrics {
            seed: 1,
            exec_time_s: 0.5,
            local_access_ratio: Some(0.5),
            node_imbalance: None,
            interconnect_load: None,
            first_touch_faults: 7,
            hint_faults: 3,
            page_migrations: 2,
            thread_migrations: 4,
            tlb_shootdowns: 2,
            accesses: 100,
            node_accesses: vec![60, 40],
            access_matrix: vec![vec![30, 20], vec![30, 20]],
            write_matrix: vec![vec![10, 5], vec![0, 5]],
            controller_utilisation: vec![0.0, 0.0],
            thread_migrations_by_cause: MigrationCounts::default(),
            sim_time_s: 0.5,
            pingpong_returns: 0,
            pingpong_intervals_s: crate::pingpong::PingPong::new(1).histogram(),
            hint_faults_per_s: 6.0,
            page_migrations_per_s: 4.0,
            thread_migrations_per_s: 0.0,
            numa: NumaCounters { numa_hint_faults: 3, numa_hint_faults_local: 1, numa_pte_updates: 9, ..NumaCounters::default() },
            placed_pages: 11,
            replica_pages: 0,
            unplaced_pages: 0,
            pages_freed_at_exit: 0,
            thread_busy_s: BusySummary { mean: 0.25, min: 0.2, max: 0.3 },
            pages_per_node: vec![5, 6],
            replications: 0,
            replica_collapses: 0,
            access_samples: 0,
            policy_counters: Default::default(),
            engine: Default::default(),
            segment_slots: 0,
            apps: Vec::new(),
            app_moves: Vec::new(),
            timeline: Vec::new(),
            refused_decisions: 0,
        };
        let p = profile_of(&run, 2, 4096, BTreeMap::new());
        let v = |n: &str| p.event(n).unwrap().value;
        assert_eq!(v("node.read.local"), Some(20 + 15));
        assert_eq!(v("node.read.remote"), Some(15 + 30));
        assert_eq!(v("node.write.local"), Some(15));
        assert_eq!(v("node.write.remote"), Some(5));
        assert_eq!(v("llc.read.miss"), Some(80));
        assert_eq!(v("sw.page_faults"), Some(10));
        assert_eq!(v("cpu.cycles"), None, "never a fake zero");
        assert_eq!(p.numa.vmstat["numa_hint_faults_local"], Counter::ok(1));
        assert_eq!(p.numa.vmstat["numa_pte_updates"], Counter::ok(9));
        assert!(p.numa.vmstat["numa_huge_pte_updates"].value.is_none(), "unsupported, not zero");
        assert_eq!(p.event("cpu.cycles").unwrap().status, EventStatus::Unsupported);
        assert_eq!(p.numa.pages[1].total_bytes, 6 * 4096);
        let share = p.derived.iter().find(|d| d.name == "node.read.remote_share_pct").unwrap();
        assert!((share.value.unwrap() - 100.0 * 45.0 / 80.0).abs() < 1e-9);
    }
}
