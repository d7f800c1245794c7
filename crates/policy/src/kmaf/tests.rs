//! Worked examples of kMAF driven through the policy hooks with a `FakeSystem`
//! (docs/policies/kmaf.md, "Tests").

use super::*;
use crate::decision::{PlaceRequest, ScanStepDone, TaskTick, Tick};
use crate::testing::{FakeSystem, FixedMemory};
use numalab_core::machine::presets;
use std::sync::Arc;

fn env() -> PolicyEnv {
    PolicyEnv::new(Arc::new(presets::load("server-a-2n").unwrap()))
}

fn policy(config: KmafConfig) -> Kmaf {
    Kmaf::new(config, &env()).unwrap()
}

fn tick(p: &mut Kmaf, s: &FakeSystem, ms: u64) -> Vec<Decision> {
    let mut out = Vec::new();
    p.on_tick(
        &Tick {
            time_ns: ms * 1_000_000,
            interval_ns: 1_000_000_000,
            access_matrix: vec![],
            write_matrix: vec![],
            cache_refills: None,
            ipc: None,
            spaces: vec![],
        },
        s,
        &mut out,
    );
    out
}

/// A page first touched on N0 by thread 0, then used by thread 2 on N1: after two induced
/// faults by thread 2 it holds 2 of 3 recorded faults on N1's threads, a majority, and moves.
#[test]
fn worked_example_page_follows_its_users() {
    let mut s = FakeSystem::new(2, 2, 4, 64, 100); // threads 0, 1 on N0; 2, 3 on N1
    let mut p = policy(KmafConfig::default());
    let node = p.place(&PlaceRequest { space: 0, thread: 0, cpu: 0, cpu_node: 0, page: 9 }, &s.mem).unwrap();
    assert_eq!(node, 0);
    s.pages.insert((0, 9), node);
    assert_eq!(p.sharers(0, 9), vec![(0, 1)], "the demand fault is recorded");
    assert_eq!(s.hit(&mut p, 2, 9), vec![], "1 of 2 faults from N1: no majority");
    assert_eq!(s.hit(&mut p, 2, 9), vec![Decision::MigratePage { space: 0, page: 9, to: 1 }]);
    assert_eq!(p.sharers(0, 9), vec![(0, 1), (2, 2)]);
    assert_eq!(p.thread_faults(2), vec![1, 1], "each fault counted where the page lives after it");
    // Thread 2 again: the page is home; nothing. A full target blocks a migration.
    assert_eq!(s.hit(&mut p, 2, 9), vec![]);
    s.mem.fill(0);
    for _ in 0..4 {
        assert_eq!(s.hit(&mut p, 0, 9), vec![], "N0 is full");
    }
    assert_eq!(p.stats().page_migrations, 1);
}

/// A thread whose faulted pages are mostly on another node moves to an idle CPU there; when no
/// CPU is idle it swaps with a thread that wants the opposite move.
#[test]
fn worked_example_thread_placement() {
    // Threads 0 and 1 on N0 (CPUs 0, 1); N1's CPUs 2, 3 idle.
    let mut s = FakeSystem::new(2, 2, 2, 64, 100);
    let mut p = policy(KmafConfig::default());
    assert_eq!(tick(&mut p, &s, 0), vec![], "the first tick starts the clock");
    for page in 0..16 {
        s.pages.insert((0, page), 1);
        s.hit(&mut p, 0, page); // one fault per page: no page migrates
    }
    assert_eq!(p.thread_faults(0), vec![0, 16]);
    assert_eq!(tick(&mut p, &s, 999), vec![], "not yet a period");
    assert_eq!(tick(&mut p, &s, 1000), vec![Decision::MoveThread { thread: 0, to: 1, cpu: Some(2), cause: MoveCause::Policy }]);
    assert_eq!(p.thread_faults(0), vec![0, 0], "the window restarts");

    // Every CPU busy: 4 threads, 0 on N0 wants N1 and 2 on N1 wants N0.
    let mut s = FakeSystem::new(2, 2, 4, 64, 100);
    let mut p = policy(KmafConfig::default());
    tick(&mut p, &s, 0);
    for page in 0..16 {
        s.pages.insert((0, page), 1);
        s.hit(&mut p, 0, page);
        s.pages.insert((0, 100 + page), 0);
        s.hit(&mut p, 2, 100 + page);
    }
    assert_eq!(tick(&mut p, &s, 1000), vec![Decision::SwapThreads { a: 0, b: 2, cause: MoveCause::Policy }]);
    // Without swaps, nothing.
    let mut p = policy(KmafConfig { thread_swap: false, ..KmafConfig::default() });
    tick(&mut p, &s, 0);
    for page in 0..16 {
        s.hit(&mut p, 0, page);
        s.hit(&mut p, 2, 100 + page);
    }
    assert_eq!(tick(&mut p, &s, 1000), vec![]);
    // Pinned threads never move.
    let mut p = policy(KmafConfig::default());
    s.pinned = vec![true; 4];
    tick(&mut p, &s, 0);
    for page in 0..16 {
        s.hit(&mut p, 0, page);
    }
    assert_eq!(tick(&mut p, &s, 1000), vec![]);
}

/// Induced faults: a whole-space scan step after the delay and then every period; the page
/// table ages at the end of each pass.
#[test]
fn induced_fault_passes_and_ageing() {
    let mut s = FakeSystem::new(2, 2, 2, 64, 100);
    let mut p = policy(KmafConfig::default());
    let mut steps = Vec::new();
    for ms in [0, 500, 1000, 1500, 2000] {
        let mut out = Vec::new();
        p.on_task_tick(&TaskTick { space: 0, thread: 1, cpu: 1, runtime_ns: 0, time_ns: ms * 1_000_000 }, &s, &mut out);
        if !out.is_empty() {
            assert_eq!(out, vec![Decision::ScanStep { space: 0, thread: 1, pages: 64 }]);
            steps.push(ms);
        }
    }
    assert_eq!(steps, [1000, 2000]);
    s.pages.insert((0, 0), 0);
    for _ in 0..2 {
        s.hit(&mut p, 1, 0);
    }
    let mut out = Vec::new();
    p.on_scan_step(
        &ScanStepDone { space: 0, thread: 1, pte_updates: 64, cpu_ns: 0, sequence: 1, pass_completed: true, time_ns: 0 },
        &s,
        &mut out,
    );
    assert_eq!(out, vec![]);
    assert_eq!(p.sharers(0, 0), vec![(1, 1)], "2 faults halve to 1");
    p.on_scan_step(
        &ScanStepDone { space: 0, thread: 1, pte_updates: 64, cpu_ns: 0, sequence: 2, pass_completed: true, time_ns: 0 },
        &s,
        &mut out,
    );
    assert_eq!(p.sharers(0, 0), vec![(1, 1)], "a count of 1 survives ageing");
}

#[test]
fn placement_is_first_touch_with_distance_fallback() {
    let mut p = policy(KmafConfig::default());
    let mut mem = FixedMemory::uniform(2, 10);
    mem.fill(1);
    assert_eq!(p.place(&PlaceRequest { space: 0, thread: 3, cpu: 20, cpu_node: 1, page: 0 }, &mem), Ok(0));
    assert_eq!(p.thread_faults(3), vec![1, 0]);
    mem.fill(0);
    assert!(p.place(&PlaceRequest { space: 0, thread: 3, cpu: 20, cpu_node: 1, page: 1 }, &mem).is_err());
}

#[test]
fn config_defaults_and_errors() {
    let c: KmafConfig = toml::from_str("").unwrap();
    assert_eq!(c, KmafConfig::default());
    let e = toml::from_str::<KmafConfig>("bogus = 1").unwrap_err().to_string();
    assert!(e.contains("unknown field `bogus`"), "{e}");
    let d = KmafConfig::default;
    let cases: Vec<(KmafConfig, &str)> = vec![
        (KmafConfig { fault_period_ms: 0, ..d() }, "policy 'kmaf': fault_period_ms must be at least 1"),
        (KmafConfig { thread_period_ms: 0, ..d() }, "policy 'kmaf': thread_period_ms must be at least 1"),
        (KmafConfig { sharers: 0, ..d() }, "policy 'kmaf': sharers must be in 1..=16, got 0"),
        (KmafConfig { sharers: 17, ..d() }, "policy 'kmaf': sharers must be in 1..=16, got 17"),
        (KmafConfig { page_min_faults: 0, ..d() }, "policy 'kmaf': page_min_faults must be at least 1"),
        (KmafConfig { page_majority: 1.0, ..d() }, "policy 'kmaf': page_majority must be in [0, 1), got 1"),
        (KmafConfig { thread_majority: -0.1, ..d() }, "policy 'kmaf': thread_majority must be in [0, 1), got -0.1"),
    ];
    for (c, msg) in cases {
        match Kmaf::new(c, &env()) {
            Err(e) => assert_eq!(e.to_string(), msg),
            Ok(_) => panic!("accepted: {msg}"),
        }
    }
    for c in [KmafConfig { sharers: 1, ..d() }, KmafConfig { sharers: 16, ..d() }, KmafConfig { page_majority: 0.0, ..d() }] {
        assert!(Kmaf::new(c, &env()).is_ok());
    }
}
