//! Worked examples of Stable-NUMA driven through the policy hooks with a `FakeSystem`
//! (docs/policies/stable-numa.md, "Tests").

use super::cluster::tests::worked_example;
use super::*;
use crate::decision::{PlaceRequest, ScanStepDone, TaskTick};
use crate::testing::FakeSystem;
use numalab_core::machine::presets;
use std::sync::Arc;

const A: ThreadId = 0;
const B: ThreadId = 1;
const C: ThreadId = 2;
const D: ThreadId = 3;

fn env() -> PolicyEnv {
    PolicyEnv::new(Arc::new(presets::load("server-a-2n").unwrap()))
}

fn policy(config: StableNumaConfig) -> StableNuma {
    StableNuma::new(config, &env()).unwrap()
}

/// 2 nodes of 2 CPUs (CPUs 0–1 on N0, 2–3 on N1), `threads` threads on CPUs 0, 2, 1, 3 in
/// that order (A on N0, B on N1, C on N0, D on N1), 64 pages, 100 free pages per node.
fn system(threads: usize) -> FakeSystem {
    let mut s = FakeSystem::new(2, 2, threads, 64, 100);
    for (t, cpu) in [0, 2, 1, 3].into_iter().enumerate().take(threads) {
        s.put(t as ThreadId, cpu);
    }
    s
}

fn join_all(p: &mut StableNuma, s: &FakeSystem) {
    let mut out = Vec::new();
    for t in 0..s.cpu_of_thread.len() as ThreadId {
        p.on_task_tick(&TaskTick { space: 0, thread: t, cpu: s.cpu_of_thread[t as usize], runtime_ns: 0, time_ns: 0 }, s, &mut out);
    }
    assert!(out.iter().all(|d| matches!(d, Decision::SetPreferredNode { .. })), "{out:?}");
}

fn seq_end(p: &mut StableNuma, s: &FakeSystem, sequence: u64) -> Vec<Decision> {
    let mut out = Vec::new();
    let step = ScanStepDone { space: 0, thread: 0, pte_updates: 0, cpu_ns: 0, sequence, pass_completed: true, time_ns: s.now_ns };
    p.on_scan_step(&step, s, &mut out);
    out
}

fn meta(state: State, e: u8, prev: Option<Kind>) -> Meta {
    Meta::new(state, e, prev)
}

/// The page trace (docs/policies/stable-numa.md, "Test vectors"; 2 nodes): rows 1–6 with state, `e`, `last`, the tables and the
/// one migration (row 6, SS balancing from N0 to N1).
#[test]
fn page_trace() {
    let mut s = system(2);
    let mut p = policy(StableNumaConfig::default());
    s.pages.insert((0, 0), 0); // row 0: allocated by A on N0
    let rows: [(ThreadId, Vec<Decision>, Meta); 6] = [
        (A, vec![Decision::SetPreferredNode { thread: A, node: Some(0) }], Meta::FRESH),
        (A, vec![], meta(State::TP_IT, 0, None)),
        (A, vec![], meta(State::TP, 0, None)),
        (A, vec![], meta(State::TP, 1, None)),
        (B, vec![Decision::SetPreferredNode { thread: B, node: Some(1) }], meta(State::SS_IT, 1, Some(Kind::Tp))),
        (A, vec![Decision::MigratePage { space: 0, page: 0, to: 1 }], meta(State::SS, 0, None)),
    ];
    for (i, (t, decisions, m)) in rows.into_iter().enumerate() {
        assert_eq!(s.hit(&mut p, t, 0), decisions, "row {}", i + 1);
        assert_eq!(p.page_meta(0, 0), m, "row {}", i + 1);
        assert_eq!(p.page_last(0, 0), Some((t, s.cpu_of_thread[t as usize])), "row {}", i + 1);
    }
    assert_eq!(p.ss_count(0), vec![0, 1]);
    assert_eq!(s.pages[&(0, 0)], 1);
    assert_eq!(p.stats().faults_by_type, [1, 3, 0, 2], "U, P, SL, SR");
    let t = p.tables(0).unwrap();
    assert_eq!((t.w_tn(A, 0), t.w_tn(A, 1), t.w_tn(B, 0), t.w_tn(B, 1)), (5, 0, 1, 0), "TN uses the home before migration");
    assert_eq!((t.w_tt(B, A), t.w_tt(A, B), t.w_tt(A, A)), (1, 1, 0));
}

/// Test vector 9.6 (docs/policies/stable-numa.md, "Test vectors"), first two bullets, through the hook.
#[test]
fn vector_9_6_tables_through_faults() {
    let mut s = system(2);
    let mut p = policy(StableNumaConfig::default());
    join_all(&mut p, &s);
    s.pages.insert((0, 5), 0);
    p.set_last(0, 5, (A, 0));
    s.hit(&mut p, B, 5);
    assert_eq!(p.stats().faults_by_type[FaultType::Sr as usize], 1);
    let t = p.tables(0).unwrap();
    assert_eq!((t.w_tn(B, 0), t.w_tt(B, A), t.w_tt(A, B)), (1, 1, 0), "row B, column A");

    s.pages.insert((0, 6), 0);
    p.set_last(0, 6, (A, 1));
    s.hit(&mut p, A, 6);
    assert_eq!(p.stats().faults_by_type[FaultType::P as usize], 1);
    let t = p.tables(0).unwrap();
    assert_eq!((t.w_tn(A, 0), t.w_tt(A, B), t.w_tt(B, A)), (1, 0, 1), "TT unchanged by a private fault");
}

/// Test vector 9.5 (docs/policies/stable-numa.md, "Test vectors"), last row and last sentence, through the hook.
#[test]
fn vector_9_5_back_and_forth_and_leaving_ss() {
    let mut s = system(2);
    let mut p = policy(StableNumaConfig::default());
    join_all(&mut p, &s);
    for (page, home) in [(0, 0), (1, 0), (2, 1)] {
        s.pages.insert((0, page), home);
        p.set_page(0, page, meta(State::SS, 2, None), home);
        p.set_last(0, page, (B, 2));
    }
    assert_eq!(p.ss_count(0), vec![2, 1]);
    // An SS loop (SR fault by A on N0) on page 0 at N0, a max node: to N1.
    assert_eq!(s.hit(&mut p, A, 0), vec![Decision::MigratePage { space: 0, page: 0, to: 1 }]);
    assert_eq!(p.ss_count(0), vec![1, 2]);
    assert_eq!(p.page_meta(0, 0), meta(State::SS, 3, None), "loop: e + 1");
    // An SS fault next on page 2, at N1 (now the max): back to N0.
    assert_eq!(s.hit(&mut p, A, 2), vec![Decision::MigratePage { space: 0, page: 2, to: 0 }]);
    assert_eq!(p.ss_count(0), vec![2, 1]);
    // A P fault on page 1 (its previous fault was by A): it leaves SS for TP~[SS].
    p.set_last(0, 1, (A, 0));
    assert_eq!(s.hit(&mut p, A, 1), vec![], "P fault: TP~[SS], no balancing");
    assert_eq!(p.page_meta(0, 1), meta(State::TP_IT, 2, Some(Kind::Ss)));
    assert_eq!(p.ss_count(0), vec![1, 1]);
}

/// SS pages never move toward the faulting thread; balanced counts stay.
#[test]
fn ss_pages_do_not_follow_threads() {
    let mut s = system(2);
    let mut p = policy(StableNumaConfig::default());
    join_all(&mut p, &s);
    for (page, home) in [(0, 1), (1, 0)] {
        s.pages.insert((0, page), home);
        p.set_page(0, page, meta(State::SS, 0, None), home);
        p.set_last(0, page, (B, 2));
    }
    assert_eq!(s.hit(&mut p, A, 0), vec![], "A on N0, page on N1, counts [1, 1]");
    assert_eq!(s.pages[&(0, 0)], 1);
}

/// A TP confirmation migrates to the faulting node; a full node makes it wait for the next
/// fault that applies the rule (a loop), which retries.
#[test]
fn private_placement_and_retry_after_a_full_node() {
    let mut s = system(3);
    let mut p = policy(StableNumaConfig::default());
    join_all(&mut p, &s);
    s.pages.insert((0, 3), 1);
    p.set_page(0, 3, meta(State::TP_IT, 4, None), 1);
    p.set_last(0, 3, (A, 0));
    s.mem.fill(0);
    assert_eq!(s.hit(&mut p, A, 3), vec![], "N0 is full");
    assert_eq!(p.page_meta(0, 3), meta(State::TP, 0, None), "the transition stands");
    s.mem.free[0] = 1;
    assert_eq!(s.hit(&mut p, A, 3), vec![Decision::MigratePage { space: 0, page: 3, to: 0 }]);
    assert_eq!(p.page_meta(0, 3), meta(State::TP, 1, None));
    assert_eq!(s.pages[&(0, 3)], 0, "invariant 7: home = node of the faulting CPU");
    // NP placement: an SL confirmation by C (N0) after A (N0) on a page at N1.
    s.pages.insert((0, 4), 1);
    p.set_page(0, 4, meta(State::NP_IT, 0, Some(Kind::Ss)), 1);
    p.set_last(0, 4, (A, 0));
    assert_eq!(s.hit(&mut p, C, 4), vec![Decision::MigratePage { space: 0, page: 4, to: 0 }]);
    assert_eq!(p.page_meta(0, 4), meta(State::NP, 0, None));
}

/// TP/NP placement does nothing when the faulting CPU's node has no memory.
#[test]
fn no_placement_on_a_memoryless_node() {
    let mut e = env();
    e.allowed = vec![1];
    let mut p = StableNuma::new(StableNumaConfig::default(), &e).unwrap();
    let mut s = system(2);
    join_all(&mut p, &s);
    s.pages.insert((0, 0), 1);
    p.set_page(0, 0, meta(State::TP_IT, 0, None), 1);
    p.set_last(0, 0, (A, 0));
    assert_eq!(s.hit(&mut p, A, 0), vec![]);
    assert_eq!(p.page_meta(0, 0).state, State::TP);
}

/// Selective profiling through `should_unmap`: the sequence comes from the scan steps.
#[test]
fn bypass_follows_the_sequence_in_progress() {
    let s = system(2);
    let mut p = policy(StableNumaConfig::default());
    p.set_page(0, 0, meta(State::NP, 2, None), 0);
    p.set_page(0, 1, meta(State::SS_IT, 7, Some(Kind::Np)), 0);
    let mut due = Vec::new();
    for seq in 0..9 {
        let mut out = Vec::new();
        let step = ScanStepDone { space: 0, thread: 0, pte_updates: 0, cpu_ns: 0, sequence: seq, pass_completed: false, time_ns: 0 };
        p.on_scan_step(&step, &s, &mut out);
        assert_eq!(p.sequence(0), seq);
        due.push(p.should_unmap(0, 0, 0));
        assert!(p.should_unmap(0, 1, 0), "an IT page is always unmapped");
        assert!(p.should_unmap(0, 2, 0), "a fresh (UN) page is always unmapped");
    }
    assert_eq!(due, [true, false, false, false, true, false, false, false, true]);
    assert_eq!(p.stats().bypasses, 6);
}

/// The scan clock through `on_task_tick`: 1 GiB, 256 MB chunks, first step after 1 s, then
/// every 250 ms.
#[test]
fn scan_steps_from_task_ticks() {
    let mut s = system(2);
    s.space_pages = vec![(1 << 30) / 4096];
    let mut p = policy(StableNumaConfig::default());
    let tick = |t_ms: u64| TaskTick { space: 0, thread: B, cpu: 2, runtime_ns: 0, time_ns: t_ms * 1_000_000 };
    let step = vec![Decision::ScanStep { space: 0, thread: B, pages: 65536 }];
    let mut steps = Vec::new();
    for t in [0, 999, 1000, 1100, 1249, 1250, 1500] {
        let mut out = Vec::new();
        p.on_task_tick(&tick(t), &s, &mut out);
        out.retain(|d| !matches!(d, Decision::SetPreferredNode { .. }));
        if out == step {
            steps.push(t);
        } else {
            assert!(out.is_empty(), "{out:?}");
        }
    }
    assert_eq!(steps, [1000, 1250, 1500]);
}

/// The worked example of thread clustering (docs/policies/stable-numa.md) through `on_scan_step`: B and C swap.
#[test]
fn worked_example_clustering_swap() {
    let s = system(4);
    let mut p = policy(StableNumaConfig::default());
    join_all(&mut p, &s);
    assert_eq!((p.sub_group(0, A), p.sub_group(0, B), p.sub_group(0, C), p.sub_group(0, D)), (Some(0), Some(1), Some(0), Some(1)));
    *p.tables_mut(0).unwrap() = worked_example((22, 18));
    assert_eq!(
        seq_end(&mut p, &s, 1),
        vec![
            Decision::SwapThreads { a: B, b: C, cause: MoveCause::ClusterSwap },
            Decision::SetPreferredNode { thread: B, node: Some(0) },
            Decision::SetPreferredNode { thread: C, node: Some(1) },
        ]
    );
    assert_eq!((p.sub_group(0, B), p.sub_group(0, C)), (Some(0), Some(1)));
    assert_eq!(p.tables(0).unwrap().s_tn(B, 0), 60.0, "decided on S(k)");
    assert_eq!(p.stats().cluster_swaps, 1);

    // Counter-case: w(A,B) = 8 < 9, nothing happens this sequence.
    let mut p = policy(StableNumaConfig::default());
    join_all(&mut p, &s);
    *p.tables_mut(0).unwrap() = worked_example((8, 0));
    assert_eq!(seq_end(&mut p, &s, 1), vec![]);
}

/// A plain move (C1 holds: 2 runnable threads on N0, 1 on N1) and, with
/// `eager_private_follow`, the moved thread's TP pages follow at once.
#[test]
fn plain_move_and_eager_private_follow() {
    for eager in [false, true] {
        let mut s = system(3); // A, C on N0; B on N1
        let mut p = policy(StableNumaConfig { eager_private_follow: eager, ..StableNumaConfig::default() });
        join_all(&mut p, &s);
        s.pages.insert((0, 7), 0);
        p.set_page(0, 7, meta(State::TP, 3, None), 0);
        p.set_last(0, 7, (A, 0));
        s.pages.insert((0, 8), 0);
        p.set_page(0, 8, meta(State::NP, 0, None), 0);
        p.set_last(0, 8, (A, 0));
        let t = p.tables_mut(0).unwrap();
        let i = t.row(A).unwrap() * t.nodes + 1;
        t.w_tn[i] = 20; // S_TN[A][N1] = 10 after smoothing
        let mut want = vec![
            Decision::MoveThread { thread: A, to: 1, cpu: None, cause: MoveCause::ClusterMove },
            Decision::SetPreferredNode { thread: A, node: Some(1) },
        ];
        if eager {
            want.push(Decision::MigratePage { space: 0, page: 7, to: 1 });
        }
        assert_eq!(seq_end(&mut p, &s, 1), want, "eager = {eager}");
        assert_eq!(p.sub_group(0, A), Some(1));
    }
}

/// `decisions_per_sequence = 0` turns clustering off; pinned threads never move.
#[test]
fn clustering_off_and_pinned_threads() {
    let mut s = system(3);
    let mut p = policy(StableNumaConfig { decisions_per_sequence: 0, ..StableNumaConfig::default() });
    join_all(&mut p, &s);
    let t = p.tables_mut(0).unwrap();
    let i = t.row(A).unwrap() * t.nodes + 1;
    t.w_tn[i] = 20;
    assert_eq!(seq_end(&mut p, &s, 1), vec![]);
    let mut p = policy(StableNumaConfig::default());
    s.pinned[A as usize] = true;
    join_all(&mut p, &s);
    let t = p.tables_mut(0).unwrap();
    let i = t.row(A).unwrap() * t.nodes + 1;
    t.w_tn[i] = 20;
    assert_eq!(seq_end(&mut p, &s, 1), vec![]);
}

/// An exited thread leaves its sub-group and the tables at the next sequence end.
#[test]
fn exited_threads_leave_the_group() {
    let mut s = system(3);
    let mut p = policy(StableNumaConfig::default());
    join_all(&mut p, &s);
    let t = p.tables_mut(0).unwrap();
    let i = t.row(A).unwrap() * t.nodes + 1;
    t.w_tn[i] = 20;
    s.alive[A as usize] = false;
    assert_eq!(seq_end(&mut p, &s, 1), vec![]);
    assert_eq!(p.sub_group(0, A), None);
    assert_eq!(p.tables(0).unwrap().s_tn(A, 1), 0.0);
}

/// `pid_bits = 8`: classification compares low bits and TT credits the lowest matching tid.
#[test]
fn truncated_pids_credit_the_lowest_matching_thread() {
    let mut s = FakeSystem::new(2, 150, 300, 64, 100);
    let mut p = policy(StableNumaConfig { pid_bits: 8, ..StableNumaConfig::default() });
    s.pages.insert((0, 0), 0);
    p.set_last(0, 0, (261, 1)); // 261 = 5 in 8 bits
    s.hit(&mut p, 200, 0); // thread 200 on CPU 200 (N1)
    let t = p.tables(0).unwrap();
    assert_eq!((t.w_tt(200, 5), t.w_tt(200, 261)), (1, 0));
    assert_eq!(p.stats().faults_by_type[FaultType::Sr as usize], 1);
    p.set_last(0, 0, (261, 1));
    s.hit(&mut p, 5, 0);
    assert_eq!(p.stats().faults_by_type[FaultType::P as usize], 1, "5 and 261 look alike");
}

/// Invariants 1, 2, 6, 7, 8, 9 and 15 over a pseudo-random stream of faults by 4 threads on
/// 16 pages, with the decisions carried out on the fake: the same stream twice gives the same
/// decisions, and the SS counts always equal the SS pages per home.
#[test]
fn invariants_over_a_fault_stream() {
    let run = || {
        let mut s = system(4);
        let mut p = policy(StableNumaConfig::default());
        for page in 0..16 {
            s.pages.insert((0, page), (page % 2) as NodeId);
        }
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut log = Vec::new();
        for _ in 0..2000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let (t, page) = ((x % 4) as ThreadId, (x >> 8) % 16);
            let before = (p.page_meta(0, page), s.pages[&(0, page)]);
            let out = s.hit(&mut p, t, page);
            let after = p.page_meta(0, page);
            assert!(Meta::unpack(after.pack()).is_some(), "invariant 1");
            assert!(after.e == before.0.e || after.e == 0 || after.e == (before.0.e + 1).min(7), "invariant 2");
            for d in out.iter().filter(|d| matches!(d, Decision::MigratePage { .. })) {
                match after.state {
                    State::TP | State::NP => assert_eq!(s.pages[&(0, page)], s.node_of_thread(t), "invariant 7"),
                    State::SS => {
                        let c = p.ss_count(0);
                        let (from, to) = (before.1 as usize, s.pages[&(0, page)] as usize);
                        let mut pre = c.clone();
                        pre[from] += 1;
                        pre[to] -= 1;
                        let spread = |v: &[u64]| v.iter().max().unwrap() - v.iter().min().unwrap();
                        assert!(
                            pre[from] == *pre.iter().max().unwrap() && pre[to] == *pre.iter().min().unwrap(),
                            "invariant 9: {d:?} {pre:?}"
                        );
                        assert!(4 * pre[to] < 3 * pre[from] && spread(&c) <= spread(&pre), "invariant 9: {d:?} {pre:?} -> {c:?}");
                    }
                    _ => panic!("invariant 6: migration on a fault ending in {:?}", after.state),
                }
            }
            let mut counts = vec![0u64; 2];
            for pg in 0..16 {
                if p.page_meta(0, pg).state == State::SS {
                    counts[s.pages[&(0, pg)] as usize] += 1;
                }
            }
            assert_eq!(p.ss_count(0), counts, "invariant 8");
            log.extend(out);
            // Threads wander between nodes now and then.
            if x.is_multiple_of(97) {
                let cpu = s.cpu_of_thread[t as usize];
                s.put(t, (cpu + 2) % 4);
            }
        }
        log
    };
    let a = run();
    assert!(a.iter().any(|d| matches!(d, Decision::MigratePage { .. })));
    assert_eq!(a, run(), "invariant 15");
}

#[test]
fn config_defaults_and_errors() {
    let c: StableNumaConfig = toml::from_str("").unwrap();
    assert_eq!(c, StableNumaConfig::default());
    assert_eq!((c.scan_interval_ms, c.scan_chunk_mb, c.scan_delay_ms, c.e_max, c.numa_imbalance_pct), (1000, 256, 1000, 7, 125));
    assert_eq!((c.ss_balance_ratio, c.ema_alpha, c.min_gain, c.swap_threshold), (0.75, 0.5, 0.0, 1.5));
    assert!(c.it_memory && !c.eager_private_follow && c.pid_bits == 32 && c.decisions_per_sequence == 1);
    let e = toml::from_str::<StableNumaConfig>("bogus = 1").unwrap_err().to_string();
    assert!(e.contains("unknown field `bogus`"), "{e}");
    let e = toml::from_str::<StableNumaConfig>("ss_count_scope = \"node\"").unwrap_err().to_string();
    assert!(e.contains("unknown variant `node`, expected `global` or `space`"), "{e}");
    let bad = |c: StableNumaConfig| match StableNuma::new(c, &env()) {
        Err(e) => e.to_string(),
        Ok(_) => panic!("accepted"),
    };
    let d = StableNumaConfig::default;
    let cases: Vec<(StableNumaConfig, &str)> = vec![
        (StableNumaConfig { scan_interval_ms: 0, ..d() }, "policy 'stable-numa': scan_interval_ms must be at least 1"),
        (
            StableNumaConfig { scan_chunk_mb: 2561, ..d() },
            "policy 'stable-numa': scan_chunk_mb must be at most 2560 (0 = whole space), got 2561",
        ),
        (StableNumaConfig { e_max: 8, ..d() }, "policy 'stable-numa': e_max must be at most 7 (a 3-bit exponent), got 8"),
        (StableNumaConfig { ss_balance_ratio: 0.0, ..d() }, "policy 'stable-numa': ss_balance_ratio must be in (0, 1], got 0"),
        (StableNumaConfig { ss_balance_ratio: 1.5, ..d() }, "policy 'stable-numa': ss_balance_ratio must be in (0, 1], got 1.5"),
        (StableNumaConfig { ema_alpha: 0.0, ..d() }, "policy 'stable-numa': ema_alpha must be in (0, 1], got 0"),
        (StableNumaConfig { min_gain: -1.0, ..d() }, "policy 'stable-numa': min_gain must be a finite number >= 0, got -1"),
        (StableNumaConfig { numa_imbalance_pct: 99, ..d() }, "policy 'stable-numa': numa_imbalance_pct must be at least 100, got 99"),
        (
            StableNumaConfig { swap_threshold: f64::NAN, ..d() },
            "policy 'stable-numa': swap_threshold must be a finite number >= 0, got NaN",
        ),
        (StableNumaConfig { pid_bits: 0, ..d() }, "policy 'stable-numa': pid_bits must be in 1..=32 (32 = full thread ids), got 0"),
        (StableNumaConfig { pid_bits: 33, ..d() }, "policy 'stable-numa': pid_bits must be in 1..=32 (32 = full thread ids), got 33"),
    ];
    for (c, msg) in cases {
        assert_eq!(bad(c), msg);
    }
    // Boundaries that are accepted.
    for c in [
        StableNumaConfig { scan_chunk_mb: 0, ..d() },
        StableNumaConfig { scan_chunk_mb: 2560, ..d() },
        StableNumaConfig { e_max: 0, ..d() },
        StableNumaConfig { ss_balance_ratio: 1.0, ..d() },
        StableNumaConfig { ema_alpha: 1.0, ..d() },
        StableNumaConfig { numa_imbalance_pct: 100, ..d() },
        StableNumaConfig { pid_bits: 1, ..d() },
    ] {
        assert!(StableNuma::new(c, &env()).is_ok());
    }
}

/// `it_memory = false` through the hook: a return takes two faults and resets `e`.
#[test]
fn strict_mode_through_faults() {
    let mut s = system(2);
    let mut p = policy(StableNumaConfig { it_memory: false, ..StableNumaConfig::default() });
    join_all(&mut p, &s);
    s.pages.insert((0, 0), 0);
    p.set_page(0, 0, meta(State::TP, 3, None), 0);
    p.set_last(0, 0, (C, 1));
    s.hit(&mut p, A, 0); // SL (C and A on N0)
    assert_eq!(p.page_meta(0, 0), meta(State::NP_IT, 3, None), "no memory in strict mode");
    s.hit(&mut p, A, 0);
    assert_eq!(p.page_meta(0, 0), meta(State::TP_IT, 3, None));
    s.hit(&mut p, A, 0);
    assert_eq!(p.page_meta(0, 0), meta(State::TP, 0, None));
}

/// `ss_count_scope = "space"`: each address space balances its own SS pages; "global" shares
/// one count.
#[test]
fn ss_count_scope_per_space() {
    for (scope, expect_space1) in [(SsCountScope::Global, vec![2, 0]), (SsCountScope::Space, vec![1, 0])] {
        let mut p = policy(StableNumaConfig { ss_count_scope: scope, ..StableNumaConfig::default() });
        p.set_page(0, 0, meta(State::SS, 0, None), 0);
        p.set_page(1, 0, meta(State::SS, 0, None), 0);
        assert_eq!(p.ss_count(1), expect_space1, "{scope:?}");
    }
}

/// The counts follow a page that lives elsewhere than where it was counted (a refused
/// migration, say): the next fault corrects them before balancing.
#[test]
fn ss_counts_follow_the_real_home() {
    let mut s = system(2);
    let mut p = policy(StableNumaConfig::default());
    join_all(&mut p, &s);
    for page in [0, 1] {
        s.pages.insert((0, page), 0);
        p.set_page(0, page, meta(State::SS, 0, None), 0);
        p.set_last(0, page, (B, 2));
    }
    assert_eq!(p.ss_count(0), vec![2, 0]);
    s.pages.insert((0, 0), 1); // page 0 actually lives on N1
                               // The SS loop on page 0 first moves its count to N1: [1, 1], balanced, so no migration
                               // (uncorrected, [2, 0] would have sent page 0 "from N0" to N1).
    assert_eq!(s.hit(&mut p, A, 0), vec![]);
    assert_eq!(p.ss_count(0), vec![1, 1]);
    assert_eq!(s.hit(&mut p, A, 1), vec![]);
}

/// `decisions_per_sequence = 2`: two moves in one sequence end, each recomputed.
#[test]
fn two_decisions_per_sequence() {
    let s = FakeSystem::new(2, 4, 4, 64, 100); // threads 0–3 all on N0 (CPUs 0–3)
    let mut p = policy(StableNumaConfig { decisions_per_sequence: 2, ..StableNumaConfig::default() });
    join_all(&mut p, &s);
    let t = p.tables_mut(0).unwrap();
    for (thread, w) in [(0, 20), (1, 10)] {
        let i = t.row(thread).unwrap() * t.nodes + 1;
        t.w_tn[i] = w;
    }
    // Loads 4/0: thread 0 moves (C1); then 3/1: thread 1 moves (C1 300 > 125).
    assert_eq!(
        seq_end(&mut p, &s, 1),
        vec![
            Decision::MoveThread { thread: 0, to: 1, cpu: None, cause: MoveCause::ClusterMove },
            Decision::SetPreferredNode { thread: 0, node: Some(1) },
            Decision::MoveThread { thread: 1, to: 1, cpu: None, cause: MoveCause::ClusterMove },
            Decision::SetPreferredNode { thread: 1, node: Some(1) },
        ]
    );
    assert_eq!(p.stats().cluster_moves, 2);
}

/// Placing a page (a reallocation) starts it afresh: UN, `e = 0`, no `last`, out of the SS counts.
#[test]
fn placement_resets_the_page_record() {
    let mut p = policy(StableNumaConfig::default());
    p.set_page(0, 3, meta(State::SS, 4, None), 1);
    p.set_last(0, 3, (A, 0));
    let mem = crate::testing::FixedMemory::uniform(2, 10);
    assert_eq!(p.place(&PlaceRequest { space: 0, thread: B, cpu: 20, cpu_node: 1, page: 3 }, &mem), Ok(1), "first touch");
    assert_eq!((p.page_meta(0, 3), p.page_last(0, 3), p.ss_count(0)), (Meta::FRESH, None, vec![0, 0]));
}
