//! HyDM's rules at their boundaries, the spec's worked vectors (docs/policies/hydm.md,
//! "Worked examples"), and scripted windows in, exact decisions out.

use super::state::{migration_possible, LoopState, Record, Step};
use super::*;
use crate::decision::{Outcome, Refusal, SpaceWindow};
use crate::testing::FakeSystem;
use numalab_core::machine::presets;

const GIB: u64 = 1 << 30;

/// A record with intensity `ai` at 64 B per reference (1000 references) and `pf` faults.
fn rec(ai: f64, pf: u64) -> Record {
    Record { fp: ai * 64.0 * 1000.0, pref: 1000, pf, rss_bytes: GIB, fast_bytes: 0 }
}

fn window(apps: &[(SpaceId, Record)]) -> BTreeMap<SpaceId, Record> {
    apps.iter().copied().collect()
}

const A: SpaceId = 0;
const B: SpaceId = 1;
const C: SpaceId = 2;
const D: SpaceId = 3;

/// Spec vector: predicted AI A=0.2, B=0.1, C=0.3, D=0.05; pf A=10, B=50, C=5, D=1; V={D}.
/// pf_avg 16.5; order D, B, A, C; D is in V, B is over the mean: A.
#[test]
fn selection_vector() {
    let mut s = LoopState::new(5);
    s.push_window(window(&[(A, rec(0.2, 10)), (B, rec(0.1, 50)), (C, rec(0.3, 5)), (D, rec(0.05, 1))]));
    s.mispredicted.insert(D);
    assert_eq!(s.pf_avg(), 16.5);
    assert_eq!(s.ranked(64).iter().map(|x| x.1).collect::<Vec<_>>(), vec![D, B, A, C]);
    assert_eq!(s.select(64, None), Some(A));
}

#[test]
fn selection_boundaries() {
    // pf equal to the mean passes (the filter drops only pf > mean).
    let mut s = LoopState::new(5);
    s.push_window(window(&[(A, rec(0.5, 10)), (B, rec(0.1, 10))]));
    assert_eq!(s.select(64, None), Some(B));
    // Equal predictions: the lower id first.
    let mut s = LoopState::new(5);
    s.push_window(window(&[(C, rec(0.25, 0)), (B, rec(0.25, 0))]));
    assert_eq!(s.select(64, None), Some(B));
    // An application already on the fast tier is not a candidate.
    s.fast.insert(B, 1);
    assert_eq!(s.select(64, None), Some(C));
    // No reference in any window: no finite intensity, never a candidate.
    let mut s = LoopState::new(5);
    s.push_window(window(&[(A, Record { fp: 5.0, pref: 0, pf: 0, rss_bytes: GIB, fast_bytes: 0 }), (B, rec(9.0, 0))]));
    assert_eq!(s.ranked(64).len(), 1);
    assert_eq!(s.select(64, None), Some(B));
    // require_memory_bound: the ridge point itself is compute-bound.
    let mut s = LoopState::new(5);
    s.push_window(window(&[(A, rec(2.0, 0)), (B, rec(4.0, 0))]));
    assert_eq!(s.select(64, Some(2.0)), None);
    assert_eq!(s.select(64, Some(2.0 + 1e-9)), Some(A));
}

/// The history regresses over retained windows only: the oldest drops beyond `H`.
#[test]
fn history_keeps_h_windows() {
    let mut s = LoopState::new(3);
    for ai in [9.0, 1.0, 0.9, 0.8] {
        s.push_window(window(&[(A, rec(ai, 0))]));
    }
    assert_eq!(s.windows.len(), 3);
    assert_eq!(s.g, 4);
    assert!(s.window(1).is_none() && s.window(2).is_some());
    let p = s.predicted_intensity(A, 64).unwrap();
    assert!((p - 0.7).abs() < 1e-9, "{p}");
}

/// Spec vector: 16 GiB fast tier, t = 0.9 (14.4 GiB), 12 GiB used: 2 GiB fits, 3 GiB does
/// not and takes the rollback path.
#[test]
fn capacity_vector() {
    assert!(migration_possible(12 * GIB, 2 * GIB, 16 * GIB, 0.9));
    assert!(!migration_possible(12 * GIB, 3 * GIB, 16 * GIB, 0.9));
    // Exactly at the threshold fits.
    assert!(migration_possible(12 * GIB, 4 * GIB, 16 * GIB, 1.0));

    let fits = |rss: u64| {
        let mut s = LoopState::new(5);
        s.push_window(window(&[(A, rec(1.0, 0))]));
        s.fast.insert(A, 0);
        s.push_window(window(&[(A, rec(1.0, 0)), (B, Record { rss_bytes: rss, ..rec(0.1, 0) })]));
        s.migrate_step(Some(B), 12 * GIB, 16 * GIB, 0.9, 0.0)
    };
    assert_eq!(fits(2 * GIB), Step::Migrate(B));
    assert_eq!(fits(3 * GIB), Step::Rollback { candidate: B, back: A });
}

/// F[a] = 10, g = 13, H = 5, fp for windows 9…13.
fn flops_history(fp: [f64; 5]) -> LoopState {
    let mut s = LoopState::new(5);
    for k in 1..=13u64 {
        let f = if k >= 9 { fp[(k - 9) as usize] } else { 100.0 };
        s.push_window(window(&[(A, Record { fp: f, ..rec(1.0, 0) })]));
    }
    s.fast.insert(A, 10);
    s
}

/// Spec vector: 100, 100, 95, 95, 90 rolls `a` back; with 120 in window 11 it stays.
#[test]
fn check_flops_vector() {
    assert_eq!(flops_history([100.0, 100.0, 95.0, 95.0, 90.0]).check_flops(0.0), Some(A));
    assert_eq!(flops_history([100.0, 100.0, 120.0, 95.0, 90.0]).check_flops(0.0), None);
}

#[test]
fn check_flops_boundaries() {
    // Equal flops are no improvement (strict >).
    assert_eq!(flops_history([100.0, 100.0, 100.0, 100.0, 100.0]).check_flops(0.0), Some(A));
    // The first window after the move counts against the last one before it.
    assert_eq!(flops_history([100.0, 100.0, 101.0, 90.0, 80.0]).check_flops(0.0), None);
    // With eps = 0.05, +1 % is no improvement; +6 % is.
    assert_eq!(flops_history([100.0, 100.0, 101.0, 90.0, 80.0]).check_flops(0.05), Some(A));
    assert_eq!(flops_history([100.0, 100.0, 106.0, 90.0, 80.0]).check_flops(0.05), None);
    // Improvement before the move does not count.
    assert_eq!(flops_history([50.0, 100.0, 95.0, 95.0, 90.0]).check_flops(0.0), Some(A));
    // Moved in the current window: not yet judgeable.
    let mut s = flops_history([100.0; 5]);
    s.fast.insert(A, 13);
    assert_eq!(s.check_flops(0.0), None);
}

/// The oldest move is judged first; at most one application is named.
#[test]
fn check_flops_oldest_first() {
    let mut s = LoopState::new(5);
    for _ in 0..5 {
        s.push_window(window(&[(A, rec(1.0, 0)), (B, rec(1.0, 0)), (C, rec(1.0, 0))]));
    }
    s.fast.insert(C, 2);
    s.fast.insert(A, 3);
    s.fast.insert(B, 2);
    assert_eq!(s.check_flops(0.0), Some(B), "window 2 before 3, then the lower id");
    let step = s.migrate_step(Some(D), 15 * GIB, 16 * GIB, 0.9, 0.0);
    assert_eq!(step, Step::Rollback { candidate: D, back: B });
    assert!(s.mispredicted.contains(&B) && !s.fast.contains_key(&B) && !s.fast.contains_key(&D));
    assert_eq!(s.check_flops(0.0), Some(C));
}

#[test]
fn blocked_when_nothing_to_roll_back_and_idle_without_candidate() {
    let mut s = LoopState::new(5);
    s.push_window(window(&[(A, Record { rss_bytes: 4 * GIB, ..rec(1.0, 0) })]));
    assert_eq!(s.migrate_step(Some(A), 12 * GIB, 16 * GIB, 0.9, 0.0), Step::Blocked { candidate: A });
    assert_eq!(s.migrate_step(None, 0, 16 * GIB, 0.9, 0.0), Step::Idle);
}

/// An application that left drops out of F and V: its id may come back as a new one.
#[test]
fn departed_applications_leave_f_and_v() {
    let mut s = LoopState::new(5);
    s.push_window(window(&[(A, rec(1.0, 0)), (B, rec(1.0, 0))]));
    s.fast.insert(A, 1);
    s.mispredicted.insert(B);
    s.push_window(window(&[(C, rec(1.0, 0))]));
    assert!(s.fast.is_empty() && s.mispredicted.is_empty());
}

// --- The policy, driven by scripted ticks ---------------------------------------------------

fn knl() -> PolicyEnv {
    PolicyEnv::new(Arc::new(presets::load("knl-7250-flat").unwrap()))
}

fn hydm(cfg: HydmConfig) -> Hydm {
    Hydm::new(cfg, &knl()).unwrap()
}

/// Three spaces of one thread each on a 2-node fake (node 1 stands for the MCDRAM, 1000
/// pages of capacity on each node).
fn system() -> FakeSystem {
    let mut s = FakeSystem::new(2, 4, 3, 100, 1000);
    s.space_of_thread = vec![0, 1, 2];
    s.space_pages = vec![100, 100, 100];
    s
}

/// A space that did `refs` references at `ai` flop/B with `pf` faults, `pages` on DDR and
/// `fast` on the MCDRAM.
fn sw(space: SpaceId, ai: f64, refs: u64, pf: u64, pages: u64, fast: u64) -> SpaceWindow {
    SpaceWindow { space, flops: ai * 64.0 * refs as f64, mem_refs: refs, page_faults: pf, pages_per_node: vec![pages, fast] }
}

fn tick(ms: u64, spaces: Vec<SpaceWindow>) -> Tick {
    Tick {
        time_ns: ms * 1_000_000,
        interval_ns: 50_000_000,
        access_matrix: vec![],
        write_matrix: vec![],
        cache_refills: None,
        ipc: None,
        spaces,
    }
}

/// On the KNL (fast tier node 1, slow tier node 0): a promotion moves a space's pages on the
/// DDR4 to the MCDRAM, a rollback its pages on the MCDRAM to the DDR4.
fn promote(space: SpaceId) -> Decision {
    Decision::MoveSpace { space, to: 1, from: NodeMask::of(&[0]) }
}

fn rollback(space: SpaceId) -> Decision {
    Decision::MoveSpace { space, to: 0, from: NodeMask::of(&[1]) }
}

fn on_tick(p: &mut Hydm, sys: &FakeSystem, t: &Tick) -> Vec<Decision> {
    let mut out = Vec::new();
    p.on_tick(t, sys, &mut out);
    out
}

#[test]
fn knl_fast_tier_is_the_mcdram_and_new_pages_go_to_ddr() {
    let mut p = hydm(HydmConfig::default());
    assert_eq!((p.fast.clone(), p.slow.clone()), (vec![1], vec![0]));
    let mut mem = crate::statics::testing::FixedMemory::uniform(2, 10);
    let req = PlaceRequest { space: 0, thread: 0, cpu: 0, cpu_node: 0, page: 0 };
    assert_eq!(p.place(&req, &mem), Ok(0));
    mem.fill(0);
    assert_eq!(p.place(&req, &mem), Ok(1), "the fast tier when DDR is full");
    mem.fill(1);
    assert!(p.place(&req, &mem).is_err());
}

/// Two 50 ms ticks make one 100 ms window; one space moves to node 1 per window, lowest
/// predicted intensity first, while it fits under the threshold (exactly at it included).
#[test]
fn scripted_windows_move_in_intensity_order() {
    let mut p = hydm(HydmConfig::default());
    let mut sys = system();
    let w = |a0: f64| vec![sw(0, a0, 1000, 2, 300, 0), sw(1, 0.1, 1000, 2, 300, 0), sw(2, 1.0, 1000, 2, 300, 0)];
    assert_eq!(on_tick(&mut p, &sys, &tick(50, w(0.5))), vec![], "half a window: nothing");
    assert_eq!(on_tick(&mut p, &sys, &tick(100, w(0.5))), vec![promote(1)]);
    assert_eq!(p.state().g, 1);
    // Window 2: space 1 is on the fast tier (300 of 1000 pages used), its flops unchanged.
    sys.mem.take(1, 300);
    let w2 = |a0: f64| vec![sw(0, a0, 1000, 2, 300, 0), sw(1, 0.1, 1000, 2, 0, 300), sw(2, 1.0, 1000, 2, 300, 0)];
    on_tick(&mut p, &sys, &tick(150, w2(0.5)));
    assert_eq!(on_tick(&mut p, &sys, &tick(200, w2(0.5))), vec![promote(0)]);
    // Window 3: 600 of 1000 pages used; space 2 (300 pages): 600 + 300 = 900 ≤ 0.9 × 1000,
    // it fits exactly.
    sys.mem.take(1, 300);
    let w3 = vec![sw(0, 0.5, 1000, 2, 0, 300), sw(1, 0.1, 1000, 2, 0, 300), sw(2, 1.0, 1000, 2, 300, 0)];
    on_tick(&mut p, &sys, &tick(250, w3.clone()));
    assert_eq!(on_tick(&mut p, &sys, &tick(300, w3)), vec![promote(2)]);
    // Window 4: every space is in F: no candidate, no decision.
    sys.mem.take(1, 350);
    let w4 = vec![sw(0, 0.5, 1000, 2, 0, 300), sw(1, 0.1, 1000, 2, 0, 300), sw(2, 1.0, 1000, 2, 0, 350)];
    on_tick(&mut p, &sys, &tick(350, w4.clone()));
    assert_eq!(on_tick(&mut p, &sys, &tick(400, w4)), vec![]);
    assert_eq!(p.steps().iter().map(|s| s.1).collect::<Vec<_>>(), vec![Step::Migrate(1), Step::Migrate(0), Step::Migrate(2)]);
}

/// When the candidate does not fit, the oldest fast-tier space whose flops never rose goes
/// back to the slow node of its thread, and it is never selected again.
#[test]
fn scripted_rollback_and_misprediction() {
    let cfg = HydmConfig { period_ms: 50, ..HydmConfig::default() };
    let mut p = hydm(cfg);
    let mut sys = system();
    // Window 1: space 1 (lowest AI) moves.
    let out = on_tick(&mut p, &sys, &tick(50, vec![sw(0, 0.5, 1000, 0, 500, 0), sw(1, 0.1, 1000, 0, 500, 0)]));
    assert_eq!(out, vec![promote(1)]);
    sys.mem.take(1, 500);
    // Window 2: space 0 (500 pages) does not fit (500 + 500 > 900); space 1's flops did not
    // grow (same references, same intensity): it rolls back to node 0 and joins V.
    let w = vec![sw(0, 0.5, 1000, 0, 500, 0), sw(1, 0.1, 1000, 0, 0, 500)];
    assert_eq!(on_tick(&mut p, &sys, &tick(100, w)), vec![rollback(1)]);
    assert!(p.state().mispredicted.contains(&1));
    sys.mem.free[1] += 500;
    // Window 3: the fast tier is empty; space 1 has the lowest AI but is in V: space 0 moves.
    let w = vec![sw(0, 0.5, 1000, 0, 500, 0), sw(1, 0.1, 1000, 0, 500, 0)];
    assert_eq!(on_tick(&mut p, &sys, &tick(150, w)), vec![promote(0)]);
}

/// A space whose flops rose after its move stays; the candidate waits.
#[test]
fn scripted_improvement_keeps_the_space() {
    let cfg = HydmConfig { period_ms: 50, ..HydmConfig::default() };
    let mut p = hydm(cfg);
    let mut sys = system();
    on_tick(&mut p, &sys, &tick(50, vec![sw(0, 0.5, 1000, 0, 500, 0), sw(1, 0.1, 1000, 0, 500, 0)]));
    sys.mem.take(1, 500);
    // Space 1 now does twice the references at the same intensity: twice the flops.
    let w = vec![sw(0, 0.5, 1000, 0, 500, 0), sw(1, 0.1, 2000, 0, 0, 500)];
    assert_eq!(on_tick(&mut p, &sys, &tick(100, w)), vec![]);
    assert_eq!(p.steps().last().unwrap().1, Step::Blocked { candidate: 0 });
}

/// The page-fault filter: a space with more faults than the mean is passed over.
#[test]
fn scripted_fault_filter() {
    let cfg = HydmConfig { period_ms: 50, ..HydmConfig::default() };
    let mut p = hydm(cfg);
    let sys = system();
    let w = vec![sw(0, 0.5, 1000, 1, 10, 0), sw(1, 0.1, 1000, 50, 10, 0), sw(2, 0.9, 1000, 3, 10, 0)];
    assert_eq!(on_tick(&mut p, &sys, &tick(50, w)), vec![promote(0)]);
}

/// Finished spaces are not monitored, so never selected, and leave F.
#[test]
fn scripted_finished_spaces_are_ignored() {
    let cfg = HydmConfig { period_ms: 50, ..HydmConfig::default() };
    let mut p = hydm(cfg);
    let mut sys = system();
    sys.alive[1] = false;
    let w = vec![sw(0, 0.5, 1000, 0, 10, 0), sw(1, 0.1, 1000, 0, 10, 0)];
    assert_eq!(on_tick(&mut p, &sys, &tick(50, w)), vec![promote(0)]);
    assert!(!p.state().windows[0].apps.contains_key(&1));
}

/// Without per-space counters (the live agent) or with a single tier, HyDM does nothing.
#[test]
fn idle_without_windows_or_tiers() {
    let mut p = hydm(HydmConfig { period_ms: 50, ..HydmConfig::default() });
    assert_eq!(on_tick(&mut p, &system(), &tick(50, vec![])), vec![]);
    let env = PolicyEnv::new(Arc::new(presets::load("server-a-4n").unwrap()));
    let mut q = Hydm::new(HydmConfig { period_ms: 50, ..HydmConfig::default() }, &env).unwrap();
    assert!(q.fast.len() == 4 && q.slow.is_empty());
    let sys = FakeSystem::new(4, 2, 2, 10, 100);
    assert_eq!(on_tick(&mut q, &sys, &tick(50, vec![sw(0, 0.1, 10, 0, 1, 0)])), vec![]);
}

#[test]
fn config_errors_name_the_key() {
    let env = knl();
    let err = |t: &str| crate::registry::build("hydm", toml::from_str(t).unwrap(), &env).err().unwrap().to_string();
    assert_eq!(err("threshold = 0.0"), "policy 'hydm': threshold must be in (0, 1], got 0");
    assert_eq!(err("threshold = 1.5"), "policy 'hydm': threshold must be in (0, 1], got 1.5");
    assert_eq!(err("history = 0"), "policy 'hydm': history must be in 1..=1000, got 0");
    assert_eq!(err("period_ms = 0"), "policy 'hydm': period_ms must be at least 1");
    assert_eq!(err("bytes_per_ref = 0"), "policy 'hydm': bytes_per_ref must be at least 1");
    assert_eq!(err("rollback_rel_eps = -0.1"), "policy 'hydm': rollback_rel_eps must be a finite number >= 0, got -0.1");
    assert_eq!(err("fast_nodes = [1]\nslow_nodes = [1]"), "policy 'hydm': node 1 is in both fast_nodes and slow_nodes");
    assert_eq!(err("fast_nodes = [5]"), "policy 'hydm' names node 5, but the machine has 2 nodes");
    assert!(err("windows = 5").contains("unknown field `windows`"), "{}", err("windows = 5"));
    // require_memory_bound on a machine without a compute peak needs one.
    let env4 = PolicyEnv::new(Arc::new(presets::load("server-a-4n").unwrap()));
    let e = crate::registry::build("hydm", toml::from_str("require_memory_bound = true").unwrap(), &env4).err().unwrap().to_string();
    assert!(e.contains("require_memory_bound needs peak_gflops"), "{e}");
}

/// The ridge point of the slow tier: knl DDR4 at its 100 GB/s peak and 3046.4 GFLOP/s.
#[test]
fn memory_bound_filter_uses_the_slow_ridge() {
    let p = hydm(HydmConfig { require_memory_bound: true, ..HydmConfig::default() });
    assert!((p.max_intensity.unwrap() - 30.464).abs() < 1e-9);
}

// --- Outcomes: F, V and the moved bytes follow what was actually moved ----------------------

const PAGE: u64 = 4096;

fn settle(p: &mut Hydm, out: &[Decision], outcome: Outcome) {
    p.on_outcomes(&EventRef::Tick, out, &vec![outcome; out.len()]);
}

/// A refused move leaves the space off `F`, HyDM's moved bytes unchanged, and the space is a
/// candidate again next window (before, it stayed in `F` and the next space moved instead).
#[test]
fn outcome_refused_move_leaves_the_space_off_f() {
    let cfg = HydmConfig { period_ms: 50, ..HydmConfig::default() };
    let mut p = hydm(cfg);
    let sys = system();
    let w = || vec![sw(0, 0.5, 1000, 0, 300, 0), sw(1, 0.1, 1000, 0, 300, 0)];
    let out = on_tick(&mut p, &sys, &tick(50, w()));
    assert_eq!(out, vec![promote(1)]);
    assert!(p.state().fast.contains_key(&1), "recorded when decided");
    settle(&mut p, &out, Outcome::Refused(Refusal::NodeFull));
    assert!(p.state().fast.is_empty());
    assert_eq!(p.state().believed_fast_bytes(), 0);
    assert_eq!(p.outcomes(), &[(1, Step::Migrate(1), Outcome::Refused(Refusal::NodeFull))]);
    // Nothing moved (the fast tier's use is unchanged): space 1 is still the best candidate.
    assert_eq!(on_tick(&mut p, &sys, &tick(100, w())), vec![promote(1)]);
}

/// A partial move counts only the pages that moved; a full one the resident bytes that were
/// not yet on the fast tier.
#[test]
fn outcome_partial_move_counts_only_moved_pages() {
    let cfg = HydmConfig { period_ms: 50, ..HydmConfig::default() };
    let mut p = hydm(cfg);
    let mut sys = system();
    // Space 1: 500 pages, 20 of them already on the fast tier.
    let out = on_tick(&mut p, &sys, &tick(50, vec![sw(0, 0.5, 1000, 0, 100, 0), sw(1, 0.1, 1000, 0, 480, 20)]));
    assert_eq!(out, vec![promote(1)]);
    settle(&mut p, &out, Outcome::Partial { moved_pages: 200, left_pages: 280 });
    assert_eq!(p.state().fast.get(&1), Some(&1), "partly on the fast tier: in F");
    assert_eq!(p.state().moved_bytes.get(&1), Some(&(200 * PAGE)));
    assert_eq!(p.state().believed_fast_bytes(), 200 * PAGE);
    // Window 2: space 0 (100 pages) fits (220 + 100 ≤ 900) and moves in full: 100 pages.
    sys.mem.take(1, 220);
    let out = on_tick(&mut p, &sys, &tick(100, vec![sw(0, 0.5, 1000, 0, 100, 0), sw(1, 0.1, 1000, 0, 280, 220)]));
    assert_eq!(out, vec![promote(0)]);
    settle(&mut p, &out, Outcome::Applied);
    assert_eq!(p.state().moved_bytes.get(&0), Some(&(100 * PAGE)));
    assert_eq!(p.state().believed_fast_bytes(), 300 * PAGE);
}

/// A rollback cut short leaves the space in `F` with its old window index and what did not
/// come back, so that a later rollback takes the rest; it stays in `V`. A refused rollback
/// (the slow tier full) does the same with nothing subtracted; an applied one stands.
#[test]
fn outcome_partial_and_refused_rollbacks_keep_the_space_in_f() {
    let cfg = HydmConfig { period_ms: 50, ..HydmConfig::default() };
    let mut p = hydm(cfg);
    let mut sys = system();
    let out = on_tick(&mut p, &sys, &tick(50, vec![sw(0, 0.5, 1000, 0, 800, 0), sw(1, 0.1, 1000, 0, 500, 0)]));
    assert_eq!(out, vec![promote(1)]);
    settle(&mut p, &out, Outcome::Applied);
    assert_eq!(p.state().moved_bytes.get(&1), Some(&(500 * PAGE)));
    sys.mem.take(1, 500);
    // Window 2: space 0 (800 pages) does not fit; space 1's flops did not grow: roll back.
    let w = || vec![sw(0, 0.5, 1000, 0, 800, 0), sw(1, 0.1, 1000, 0, 0, 500)];
    let out = on_tick(&mut p, &sys, &tick(100, w()));
    assert_eq!(out, vec![rollback(1)]);
    settle(&mut p, &out, Outcome::Partial { moved_pages: 150, left_pages: 350 });
    assert_eq!(p.state().fast.get(&1), Some(&1), "back in F with the window it moved in");
    assert!(p.state().mispredicted.contains(&1));
    assert_eq!(p.state().moved_bytes.get(&1), Some(&(350 * PAGE)));
    // Window 3: still no room; space 1 is named again; this time the slow tier is full.
    let out = on_tick(&mut p, &sys, &tick(150, w()));
    assert_eq!(out, vec![rollback(1)]);
    settle(&mut p, &out, Outcome::Refused(Refusal::NodeFull));
    assert_eq!(p.state().fast.get(&1), Some(&1));
    assert_eq!(p.state().moved_bytes.get(&1), Some(&(350 * PAGE)));
    // Window 4: the rollback goes through.
    let out = on_tick(&mut p, &sys, &tick(200, w()));
    assert_eq!(out, vec![rollback(1)]);
    settle(&mut p, &out, Outcome::Applied);
    assert!(!p.state().fast.contains_key(&1) && p.state().mispredicted.contains(&1));
    assert_eq!(p.state().believed_fast_bytes(), 0);
}

/// Every placed page already on the fast tier: the space counts as there, with nothing moved
/// (it is not picked again). A space that exited is out of `F` and `V`.
#[test]
fn outcome_already_there_and_exited() {
    let cfg = HydmConfig { period_ms: 50, ..HydmConfig::default() };
    let mut p = hydm(cfg);
    let sys = system();
    let w = vec![sw(0, 0.5, 1000, 0, 10, 0), sw(1, 0.1, 1000, 0, 0, 10)];
    let out = on_tick(&mut p, &sys, &tick(50, w.clone()));
    assert_eq!(out, vec![promote(1)]);
    settle(&mut p, &out, Outcome::Refused(Refusal::AlreadyThere));
    assert_eq!(p.state().moved_bytes.get(&1), Some(&0));
    assert_eq!(on_tick(&mut p, &sys, &tick(100, w.clone())), vec![promote(0)]);
    let out = vec![promote(0)];
    settle(&mut p, &out, Outcome::Refused(Refusal::SpaceExited));
    assert!(!p.state().fast.contains_key(&0) && !p.state().mispredicted.contains(&0));
    // Outcomes of other events (a hint fault's) are not HyDM's: nothing changes.
    let before = p.state().clone();
    p.on_outcomes(&EventRef::TaskTick { thread: 0 }, &out, &[Outcome::Applied]);
    assert_eq!(p.state(), &before);
}

/// An application whose promotion was refused `already_there` (first touch put all its pages
/// on the fast tier) stays in `F` but is never rolled back: HyDM moved none of its pages, and a
/// rollback would move first-touch pages to the slow tier. The rollback takes the oldest
/// application HyDM did move instead, or nothing.
#[test]
fn applications_hydm_never_moved_are_not_rolled_back() {
    // The state alone: with nothing moved for `A`, nothing is named; once `A`'s moved bytes
    // are unknown (not settled) or positive, it is judged as before.
    let mut s = flops_history([100.0, 100.0, 95.0, 95.0, 90.0]);
    s.moved_bytes.insert(A, 0);
    assert_eq!(s.check_flops(0.0), None);
    s.moved_bytes.insert(A, GIB);
    assert_eq!(s.check_flops(0.0), Some(A));
    // Scripted: space 1 is on the fast tier by first touch, space 0 is promoted a window
    // later; neither's flops rise. When space 2 does not fit, space 0 goes back, although
    // space 1 has been in `F` longer.
    let cfg = HydmConfig { period_ms: 50, ..HydmConfig::default() };
    let mut p = hydm(cfg);
    let mut sys = system();
    sys.mem.take(1, 300);
    let w1 = vec![sw(0, 0.5, 1000, 0, 300, 0), sw(1, 0.1, 1000, 0, 0, 300), sw(2, 1.0, 1000, 0, 400, 0)];
    let out = on_tick(&mut p, &sys, &tick(50, w1));
    assert_eq!(out, vec![promote(1)]);
    settle(&mut p, &out, Outcome::Refused(Refusal::AlreadyThere));
    let w2 = vec![sw(0, 0.5, 1000, 0, 300, 0), sw(1, 0.1, 1000, 0, 0, 300), sw(2, 1.0, 1000, 0, 400, 0)];
    let out = on_tick(&mut p, &sys, &tick(100, w2));
    assert_eq!(out, vec![promote(0)]);
    settle(&mut p, &out, Outcome::Applied);
    sys.mem.take(1, 300);
    // Window 3: 600 of 1000 pages used; space 2 (400 pages) does not fit under 900.
    let w3 = vec![sw(0, 0.5, 1000, 0, 0, 300), sw(1, 0.1, 1000, 0, 0, 300), sw(2, 1.0, 1000, 0, 400, 0)];
    let out = on_tick(&mut p, &sys, &tick(150, w3.clone()));
    assert_eq!(out, vec![rollback(0)]);
    settle(&mut p, &out, Outcome::Applied);
    sys.mem.free[1] += 300;
    assert!(p.state().fast.contains_key(&1) && !p.state().mispredicted.contains(&1));
    // Window 4: space 2 fits now (300 + 400 ≤ 900) and moves.
    let w4 = vec![sw(0, 0.5, 1000, 0, 300, 0), sw(1, 0.1, 1000, 0, 0, 300), sw(2, 1.0, 1000, 0, 400, 0)];
    assert_eq!(on_tick(&mut p, &sys, &tick(200, w4)), vec![promote(2)]);
    let steps: Vec<Step> = p.steps().iter().map(|s| s.1).collect();
    assert_eq!(steps, [Step::Migrate(1), Step::Migrate(0), Step::Rollback { candidate: 2, back: 0 }, Step::Migrate(2)]);
    // With only space 1 in `F` and a candidate that does not fit, the window is blocked.
    let mut s = LoopState::new(5);
    for _ in 0..3 {
        s.push_window(window(&[(A, rec(1.0, 0)), (B, Record { rss_bytes: 4 * GIB, ..rec(0.5, 0) })]));
    }
    s.fast.insert(A, 1);
    s.moved_bytes.insert(A, 0);
    assert_eq!(s.migrate_step(Some(B), 12 * GIB, 16 * GIB, 0.9, 0.0), Step::Blocked { candidate: B });
}

/// What a run reports (docs/policies/hydm.md, "What a run reports"): every move in order,
/// when, with the intensity it was chosen by and its outcome once settled; blocked windows
/// and windows counted.
#[test]
fn app_moves_report_order_intensity_and_outcome() {
    let cfg = HydmConfig { period_ms: 50, ..HydmConfig::default() };
    let mut p = hydm(cfg);
    let mut sys = system();
    assert!(p.app_moves().is_empty());
    // Window 1: space 1 (0.1 flop/B, 500 pages) moves, applied.
    let out = on_tick(&mut p, &sys, &tick(50, vec![sw(0, 0.5, 1000, 0, 500, 0), sw(1, 0.1, 1000, 0, 500, 0)]));
    assert_eq!(p.app_moves()[0].outcome, None, "no outcome before the driver reports one");
    settle(&mut p, &out, Outcome::Applied);
    sys.mem.take(1, 500);
    // Window 2: space 0 does not fit; space 1's flops did not grow: it rolls back, refused.
    let out = on_tick(&mut p, &sys, &tick(100, vec![sw(0, 0.5, 1000, 0, 500, 0), sw(1, 0.1, 1000, 0, 0, 500)]));
    settle(&mut p, &out, Outcome::Refused(Refusal::NodeFull));
    let moves = p.app_moves();
    assert_eq!(moves.len(), 2);
    let m0 = moves[0];
    assert_eq!(
        (m0.time_ns, m0.window, m0.space, m0.kind, m0.to, m0.resident_pages),
        (50_000_000, Some(1), 1, AppMoveKind::Promote, 1, 500)
    );
    assert!((m0.intensity_flop_per_byte.unwrap() - 0.1).abs() < 1e-12);
    assert_eq!(m0.outcome, Some(Outcome::Applied));
    let m1 = moves[1];
    assert_eq!(
        (m1.time_ns, m1.window, m1.space, m1.kind, m1.to, m1.resident_pages),
        (100_000_000, Some(2), 1, AppMoveKind::Rollback, 0, 500)
    );
    assert!((m1.intensity_flop_per_byte.unwrap() - 0.1).abs() < 1e-12, "the regression over two equal windows");
    assert_eq!(m1.outcome, Some(Outcome::Refused(Refusal::NodeFull)));
    // The refused rollback returns space 1 to F; window 3: space 0 still does not fit, and
    // space 1 is judged again (its flops still flat): another rollback.
    let out = on_tick(&mut p, &sys, &tick(150, vec![sw(0, 0.5, 1000, 0, 500, 0), sw(1, 0.1, 1000, 0, 0, 500)]));
    assert_eq!(out, vec![rollback(1)]);
    let c: BTreeMap<&str, u64> = p.counters().into_iter().collect();
    assert_eq!(c["hydm_windows"], 3);
    assert_eq!((c["hydm_promotions"], c["hydm_rollbacks"], c["hydm_blocked"]), (1, 2, 0));
}

/// A window whose candidate is blocked counts as blocked and reports no move.
#[test]
fn blocked_windows_are_counted_not_reported() {
    let cfg = HydmConfig { period_ms: 50, ..HydmConfig::default() };
    let mut p = hydm(cfg);
    let mut sys = system();
    let out = on_tick(&mut p, &sys, &tick(50, vec![sw(0, 0.5, 1000, 0, 500, 0), sw(1, 0.1, 1000, 0, 500, 0)]));
    settle(&mut p, &out, Outcome::Applied);
    sys.mem.take(1, 500);
    // Space 1's flops doubled: it stays; space 0 does not fit: blocked.
    assert_eq!(on_tick(&mut p, &sys, &tick(100, vec![sw(0, 0.5, 1000, 0, 500, 0), sw(1, 0.1, 2000, 0, 0, 500)])), vec![]);
    assert_eq!(p.app_moves().len(), 1);
    let c: BTreeMap<&str, u64> = p.counters().into_iter().collect();
    assert_eq!((c["hydm_windows"], c["hydm_promotions"], c["hydm_rollbacks"], c["hydm_blocked"]), (2, 1, 0, 1));
}

/// New pages on cxl-expander (DRAM nodes 0-1 are the fast tier, CXL nodes 2-3 the slow one):
/// by default as Linux with no policy set, the touching CPU's DRAM, then by distance (SLIT:
/// the other socket's DRAM at 17 before the local CXL at 23); `new_pages = "slow-first"`
/// puts them on the nearest CXL node first.
#[test]
fn new_pages_on_cxl_follow_linux_default_or_slow_first() {
    let env = PolicyEnv::new(Arc::new(presets::load("cxl-expander").unwrap()));
    let req = |cpu_node: NodeId| PlaceRequest { space: 0, thread: 0, cpu: 0, cpu_node, page: 0 };
    let mut p = Hydm::new(HydmConfig::default(), &env).unwrap();
    assert_eq!((p.fast.clone(), p.slow.clone()), (vec![0, 1], vec![2, 3]));
    let mut mem = crate::statics::testing::FixedMemory::uniform(4, 10);
    assert_eq!(p.place(&req(0), &mem), Ok(0));
    assert_eq!(p.place(&req(1), &mem), Ok(1));
    mem.fill(0);
    assert_eq!(p.place(&req(0), &mem), Ok(1), "the other socket's DRAM (SLIT 17) before the CXL (23)");
    mem.fill(1);
    assert_eq!(p.place(&req(0), &mem), Ok(2));
    assert_eq!(p.place(&req(1), &mem), Ok(3));
    let cfg: HydmConfig = toml::from_str("new_pages = \"slow-first\"").unwrap();
    let mut q = Hydm::new(cfg, &env).unwrap();
    let mut mem = crate::statics::testing::FixedMemory::uniform(4, 10);
    assert_eq!(q.place(&req(0), &mem), Ok(2));
    assert_eq!(q.place(&req(1), &mem), Ok(3));
    mem.fill(2);
    mem.fill(3);
    assert_eq!(q.place(&req(0), &mem), Ok(0), "the fast tier only when the slow one is full");
    let e = crate::registry::build("hydm", toml::from_str("new_pages = \"fast\"").unwrap(), &env).err().unwrap().to_string();
    assert!(e.contains("unknown variant `fast`"), "{e}");
}

/// With a fast node per socket (cxl-expander: DRAM nodes 0-1 fast, CXL nodes 2-3 slow), a
/// promotion moves only the pages on the slow tier and a rollback only those on the fast tier
/// (docs/policies/hydm.md, "Migration, threshold and rollback"): the pages first touch put on
/// the other socket's DRAM stay there.
#[test]
fn moves_name_the_other_tier_as_their_source_nodes() {
    let env = PolicyEnv::new(Arc::new(presets::load("cxl-expander").unwrap()));
    let cfg = HydmConfig { period_ms: 50, ..HydmConfig::default() };
    let mut p = Hydm::new(cfg, &env).unwrap();
    let mut sys = FakeSystem::new(4, 4, 2, 100, 1000);
    sys.space_of_thread = vec![0, 1];
    sys.space_pages = vec![2000, 2000];
    let space = |space: SpaceId, ai: f64, pages_per_node: Vec<u64>| SpaceWindow {
        space,
        flops: ai * 64.0 * 1000.0,
        mem_refs: 1000,
        page_faults: 0,
        pages_per_node,
    };
    // Window 1: space 1 (lowest intensity; 200 pages on each DRAM node, 100 on CXL) fits
    // under the threshold: its CXL pages move to the DRAM node with the most free pages.
    let out = on_tick(&mut p, &sys, &tick(50, vec![space(0, 0.5, vec![100, 0, 0, 0]), space(1, 0.1, vec![200, 200, 100, 0])]));
    assert_eq!(out, vec![Decision::MoveSpace { space: 1, to: 0, from: NodeMask::of(&[2, 3]) }]);
    settle(&mut p, &out, Outcome::Applied);
    // Window 2: space 0 (1 900 pages) no longer fits and space 1's flops did not grow: space 1
    // goes back to the CXL node nearest its thread's node (0), from both DRAM nodes.
    sys.mem.take(0, 900);
    sys.mem.take(1, 900);
    let out = on_tick(&mut p, &sys, &tick(100, vec![space(0, 0.5, vec![1900, 0, 0, 0]), space(1, 0.1, vec![300, 200, 0, 0])]));
    assert_eq!(out, vec![Decision::MoveSpace { space: 1, to: 2, from: NodeMask::of(&[0, 1]) }]);
}
