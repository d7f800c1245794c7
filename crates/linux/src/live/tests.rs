//! Worked examples of the live engine with the recording fakes: a scripted observation stream
//! in, exactly these system calls out (docs/live.md, "Tests").

use super::engine::{LiveConfig, LiveEngine, LiveHost, LiveIo, LiveSummary, RoundEnd};
use super::observe::{Observation, RegionAccess, ScriptedObserver};
use super::placer::{AffinityCall, FakeThreadPlacer};
use super::target::{FakeTarget, TaskInfo};
use crate::act::pages::FakePageMover;
use crate::export::{to_machine, ExportOptions};
use crate::Topology;
use numalab_policy::{
    Decision, DynPolicy, EventRef, MemoryState, MoveCause, NodeMask, OutOfMemory, Outcome, PlaceRequest, Policy, PolicyEnv, PolicyError,
    RegionHeat, SystemView, TaskTick, ThreadMigrated,
};
use std::sync::Arc;
use std::sync::Mutex;

const BASE: u64 = 0x7f00_0000_0000;
const PAGE: u64 = 4096;
const PID: i32 = 4242;

fn guest_2n() -> Topology {
    let root = crate::FsRoot::at(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/guest-2n"));
    Topology::read(&root).unwrap()
}

fn policy(name: &str, config: &str, topo: &Topology) -> Box<dyn DynPolicy> {
    let env = PolicyEnv::new(Arc::new(to_machine(topo, &ExportOptions::default()).unwrap().machine)).with_seed(1);
    numalab_policy::build(name, config.parse().unwrap(), &env).unwrap()
}

/// A process of 64 pages at `BASE`, all on `node`, with the given threads (tid, CPU) whose
/// CPU time grows 10 ms per round; every thread may run on all four CPUs.
struct World {
    target: FakeTarget,
    mover: FakePageMover,
    placer: FakeThreadPlacer,
    observer: ScriptedObserver,
    log: Vec<u8>,
}

fn world(threads: &[(i32, u32)], node: i32, rounds: usize) -> World {
    let target = FakeTarget {
        pid: PID,
        rounds: (1..=rounds as u64)
            .map(|r| threads.iter().map(|&(tid, cpu)| TaskInfo { tid, cpu, runtime_ns: r * 10_000_000 }).collect())
            .collect(),
        ranges: vec![(BASE, BASE + 64 * PAGE)],
        ..Default::default()
    };
    let mover = FakePageMover { location: (0..64).map(|p| (BASE + p * PAGE, node)).collect(), ..Default::default() };
    let placer = FakeThreadPlacer { affinity: threads.iter().map(|&(tid, _)| (tid, vec![0, 1, 2, 3])).collect(), ..Default::default() };
    World { target, mover, placer, observer: ScriptedObserver::default(), log: Vec::new() }
}

fn access(tid: i32, cpu: u32, page: u64, time_ns: u64) -> Observation {
    Observation { tid, cpu, cpu_node: cpu / 2, addr: BASE + page * PAGE + 8, page_node: None, write: false, time_ns }
}

/// Run rounds 10 ms apart until the script ends or the target is gone; then finish.
fn run(engine: LiveEngine, w: &mut World, rounds: usize) -> (LiveSummary, Vec<RoundEnd>) {
    let mut engine = engine;
    let mut ends = Vec::new();
    let mut io =
        LiveIo { target: &mut w.target, observer: &mut w.observer, mover: &mut w.mover, placer: &mut w.placer, log: Some(&mut w.log) };
    for r in 0..rounds {
        let end = engine.round(&mut io, r as u64 * 10_000_000).unwrap();
        ends.push(end);
        if end == RoundEnd::TargetGone {
            break;
        }
    }
    (engine.finish(&mut io).unwrap(), ends)
}

fn engine(name: &str, config: &str, cfg: LiveConfig) -> LiveEngine {
    let t = guest_2n();
    LiveEngine::new(policy(name, config, &t), LiveHost::from_topology(&t, PAGE), cfg, PID)
}

fn addrs(pages: impl IntoIterator<Item = u64>) -> Vec<u64> {
    pages.into_iter().map(|p| BASE + p * PAGE).collect()
}

fn log_lines(w: &World) -> Vec<String> {
    String::from_utf8(w.log.clone()).unwrap().lines().map(str::to_string).collect()
}

/// The calls the fake mover heard: (pages asked, target nodes if a move).
fn mover_calls(w: &World) -> Vec<(Vec<u64>, Option<Vec<i32>>)> {
    w.mover
        .calls
        .iter()
        .map(|c| {
            assert_eq!(c.0, PID);
            (c.1.clone(), c.2.clone())
        })
        .collect()
}

const AUTONUMA_FAST: &str = "scan_delay_ms = 1\nscan_period_min_ms = 1\nscan_size_mb = 1";

/// One thread on CPU 0 (node 0) whose 64 pages are all on node 1. autonuma's first scan step
/// (task tick at 10 ms: the scan delay of 1 ms has passed and the thread's CPU time its scan
/// period) locates the 64 pages and marks them all (none is on the single thread's node); the
/// step at 20 ms finds them all marked. The thread is then seen touching pages 0-3: four
/// hinting faults from node 0 on node-1 pages, each allowed by the early-window filter (no
/// previous fault, no preferred node), so four migrations to node 0, carried out in one
/// `move_pages` batch at the end of the round. The step at 40 ms finds pages 0-3 on the
/// thread's node (skipped) and the rest still marked.
#[test]
fn autonuma_moves_the_pages_a_node_0_thread_faults_on_in_one_batch() {
    let mut w = world(&[(100, 0)], 1, 5);
    w.observer = ScriptedObserver::new(vec![vec![], vec![], vec![], (0..4).map(|p| access(100, 0, p, 25_000_000)).collect()]);
    let (s, ends) = run(engine("autonuma", AUTONUMA_FAST, LiveConfig::default()), &mut w, 5);
    assert_eq!(ends, vec![RoundEnd::Continue; 5]);
    assert_eq!(
        mover_calls(&w),
        vec![
            (addrs(0..64), None),            // scan step at 10 ms: where are the pages?
            (addrs(0..64), None),            // scan step at 20 ms
            (addrs(0..4), None),             // the observed pages' nodes at 30 ms
            (addrs(0..4), Some(vec![0; 4])), // the round's batch
            (addrs(0..64), None),            // scan step at 40 ms
        ]
    );
    assert_eq!(w.placer.calls, vec![AffinityCall::Get { tid: 100 }], "only the pinned check of a new thread");
    assert!((0..4).all(|p| w.mover.location[&(BASE + p * PAGE)] == 0));
    assert!((4..64).all(|p| w.mover.location[&(BASE + p * PAGE)] == 1));
    assert_eq!((s.hint_faults, s.scan_steps, s.pages_marked, s.pages_moved, s.move_pages_calls), (4, 3, 64, 4, 1));
    let lines = log_lines(&w);
    assert_eq!(lines.len(), 7);
    assert_eq!(
        lines[2],
        r#"{"run":0,"time_ns":30000000,"cause":{"event":"hint_fault","space":0,"thread":0,"page":0,"page_node":1,"cpu_node":0},"decision":{"kind":"migrate_page","space":0,"page":0,"to":0},"outcome":"applied"}"#
    );
    assert!(lines[0].contains(r#""decision":{"kind":"scan_step","space":0,"thread":0,"pages":256},"outcome":"applied""#), "{}", lines[0]);
}

#[test]
fn a_dry_run_decides_and_logs_but_moves_nothing() {
    let mut w = world(&[(100, 0)], 1, 5);
    w.observer = ScriptedObserver::new(vec![vec![], vec![], vec![], (0..4).map(|p| access(100, 0, p, 25_000_000)).collect()]);
    let cfg = LiveConfig { dry_run: true, ..Default::default() };
    let (s, _) = run(engine("autonuma", AUTONUMA_FAST, cfg), &mut w, 5);
    assert!(mover_calls(&w).iter().all(|c| c.1.is_none()), "only location queries: {:?}", mover_calls(&w));
    assert!(w.mover.location.values().all(|&n| n == 1));
    assert_eq!((s.dry_run, s.pages_moved, s.move_pages_calls), (4, 0, 0));
    let lines = log_lines(&w);
    assert_eq!(lines.iter().filter(|l| l.ends_with(r#""outcome":"dry_run"}"#) && l.contains("migrate_page")).count(), 4);
}

/// stable-numa needs three faults of one thread on a page to place it (docs/policies/
/// stable-numa.md: U records the thread, P moves UN to in-transition, a second P makes it
/// stable-private and places it). Scan steps of the whole space (chunk 0) every 10 ms; the
/// thread touches pages 0-1 in three successive rounds, each after a scan step marked them.
/// The thread is pinned to CPU 0 (its affinity is that one CPU), so thread clustering cannot
/// move it to its memory and the pages come to it. The first task tick joins the thread to
/// its group and asks for a preferred node, which live Linux cannot set: refused as
/// unsupported, and counted.
#[test]
fn stable_numa_places_a_page_after_three_faults_of_one_thread() {
    let mut w = world(&[(100, 0)], 1, 6);
    w.placer.affinity.insert(100, vec![0]);
    let touch = |t| vec![access(100, 0, 0, t), access(100, 0, 1, t)];
    w.observer = ScriptedObserver::new(vec![vec![], vec![], touch(15_000_000), touch(25_000_000), touch(35_000_000)]);
    let e = engine("stable-numa", "scan_delay_ms = 1\nscan_interval_ms = 10\nscan_chunk_mb = 0", LiveConfig::default());
    let (s, _) = run(e, &mut w, 6);
    let moves: Vec<_> = mover_calls(&w).into_iter().filter(|c| c.1.is_some()).collect();
    assert_eq!(moves, vec![(addrs(0..2), Some(vec![0, 0]))]);
    assert_eq!(s.hint_faults, 6);
    assert_eq!(s.refused, [("set_preferred_node: unsupported".to_string(), 1)].into());
    let lines = log_lines(&w);
    let refused = lines.iter().find(|l| l.contains("set_preferred_node")).unwrap();
    assert_eq!(
        refused,
        r#"{"run":0,"time_ns":0,"cause":{"event":"task_tick","thread":0},"decision":{"kind":"set_preferred_node","thread":0,"node":0},"outcome":"refused","reason":"unsupported"}"#
    );
}

/// A policy that takes, at the task tick of thread 0 in round `k`, the decisions `script[k]`,
/// and records the thread moves it hears of and the outcomes it is told.
#[derive(Clone, Debug, Default, serde::Serialize, serde::Deserialize)]
struct NoConfig {}

struct Scripted {
    config: NoConfig,
    script: Vec<Vec<Decision>>,
    round: usize,
    heard: Arc<Mutex<Vec<String>>>,
}

impl Policy for Scripted {
    type Config = NoConfig;
    const NAME: &'static str = "scripted";
    const SUMMARY: &'static str = "test";
    fn new(config: NoConfig, _env: &PolicyEnv) -> Result<Self, PolicyError> {
        Ok(Scripted { config, script: Vec::new(), round: 0, heard: Arc::default() })
    }
    fn config(&self) -> &NoConfig {
        &self.config
    }
    fn place(&mut self, _req: &PlaceRequest, _mem: &dyn MemoryState) -> Result<u16, OutOfMemory> {
        Ok(0)
    }
    fn on_task_tick(&mut self, tick: &TaskTick, _view: &dyn SystemView, out: &mut Vec<Decision>) {
        if tick.thread == 0 {
            out.extend(self.script.get(self.round).cloned().unwrap_or_default());
            self.round += 1;
        }
    }
    fn on_thread_migrated(&mut self, m: &ThreadMigrated, _view: &dyn SystemView, _out: &mut Vec<Decision>) {
        self.heard.lock().unwrap().push(format!("migrated {} {}->{}", m.thread, m.from_node, m.to_node));
    }
    fn on_outcomes(&mut self, _cause: &EventRef, decisions: &[Decision], outcomes: &[Outcome]) {
        for (d, o) in decisions.iter().zip(outcomes) {
            self.heard.lock().unwrap().push(format!("{d:?} => {o:?}"));
        }
    }
    fn on_region_heat(&mut self, h: &RegionHeat) {
        self.heard.lock().unwrap().push(format!(
            "heat pages {}+{} accesses {}/{} age {} at {} ms",
            h.first_page,
            h.pages,
            h.nr_accesses,
            h.max_accesses,
            h.age,
            h.time_ns / 1_000_000
        ));
    }
}

fn scripted(script: Vec<Vec<Decision>>) -> (LiveEngine, Arc<Mutex<Vec<String>>>) {
    scripted_with(script, LiveConfig::default())
}

fn scripted_with(script: Vec<Vec<Decision>>, cfg: LiveConfig) -> (LiveEngine, Arc<Mutex<Vec<String>>>) {
    let t = guest_2n();
    let env = PolicyEnv::new(Arc::new(to_machine(&t, &ExportOptions::default()).unwrap().machine));
    let mut p = Scripted::new(NoConfig {}, &env).unwrap();
    p.script = script;
    let heard = p.heard.clone();
    (LiveEngine::new(Box::new(p), LiveHost::from_topology(&t, PAGE), cfg, PID), heard)
}

/// Thread moves are affinity calls to every CPU of the target node; the first move of a
/// thread saves its affinity, which `finish` restores. A swap exchanges the threads' nodes.
/// Replication and preferred nodes are refused as unsupported.
#[test]
fn thread_moves_are_affinity_calls_restored_at_the_end() {
    let mut w = world(&[(100, 0), (101, 1)], 0, 3);
    // In round 1 the kernel has moved thread 100 to CPU 3, as its new affinity asks.
    w.target.rounds[1][0].cpu = 3;
    w.target.rounds[2][0].cpu = 3;
    let (e, heard) = scripted(vec![
        vec![
            Decision::MoveThread { thread: 0, to: 1, cpu: Some(3), cause: MoveCause::NumaMove },
            Decision::Replicate { space: 0, page: 0, to: 1 },
            Decision::SetPreferredNode { thread: 0, node: Some(1) },
        ],
        vec![Decision::SwapThreads { a: 0, b: 1, cause: MoveCause::NumaSwap }],
    ]);
    let (s, _) = run(e, &mut w, 3);
    use AffinityCall::{Get, Set};
    assert_eq!(
        w.placer.calls,
        vec![
            Get { tid: 100 }, // round 0: the pinned checks of the new threads
            Get { tid: 101 },
            Get { tid: 100 }, // the move saves thread 0's affinity
            Set { tid: 100, cpus: vec![2, 3] },
            Set { tid: 100, cpus: vec![0, 1] }, // round 1: the swap, thread 0 to node 0
            Get { tid: 101 },                   // and thread 1 (saved first) to node 1
            Set { tid: 101, cpus: vec![2, 3] },
            Set { tid: 100, cpus: vec![0, 1, 2, 3] }, // finish: restored, in tid order
            Set { tid: 101, cpus: vec![0, 1, 2, 3] },
        ]
    );
    assert_eq!((s.thread_moves, s.affinities_restored, s.affinities_gone), (3, 2, 0));
    assert_eq!(s.refused, [("replicate: unsupported".to_string(), 1), ("set_preferred_node: unsupported".to_string(), 1)].into());
    assert_eq!(
        heard.lock().unwrap().clone(),
        vec![
            "MoveThread { thread: 0, to: 1, cpu: Some(3), cause: NumaMove } => Applied",
            "Replicate { space: 0, page: 0, to: 1 } => Refused(Unsupported)",
            "SetPreferredNode { thread: 0, node: Some(1) } => Refused(Unsupported)",
            "migrated 0 0->1",
            "SwapThreads { a: 0, b: 1, cause: NumaSwap } => Applied",
            "migrated 0 1->0",
            "migrated 1 0->1",
        ]
    );
}

/// The target exits while a batch is being moved: `move_pages` answers ESRCH, the round ends
/// with the target gone, the rest is refused as `space_exited`, and the restore of a thread
/// that is gone is counted, not an error.
#[test]
fn a_target_exiting_mid_period_ends_the_run_cleanly() {
    let mut w = world(&[(100, 0)], 1, 6);
    w.observer = ScriptedObserver::new(vec![vec![], vec![], vec![], (0..4).map(|p| access(100, 0, p, 25_000_000)).collect()]);
    // The two scan steps' location calls and the observed pages' are answered; the move is not.
    w.mover.exits_after_calls = Some(3);
    let (s, ends) = run(engine("autonuma", AUTONUMA_FAST, LiveConfig::default()), &mut w, 6);
    assert_eq!(ends, vec![RoundEnd::Continue, RoundEnd::Continue, RoundEnd::Continue, RoundEnd::TargetGone]);
    assert!(s.target_gone);
    assert_eq!(s.refused, [("migrate_page: space_exited".to_string(), 4)].into());
    assert_eq!(s.page_outcomes, [(crate::act::pages::PageOutcome::ProcessGone, 4)].into());
    // A thread moved before the exit: its restore finds it gone.
    let mut w = world(&[(100, 0)], 0, 2);
    w.target.gone_after = Some(1);
    let (e, _) = scripted(vec![vec![Decision::MoveThread { thread: 0, to: 1, cpu: None, cause: MoveCause::Policy }]]);
    w.placer.gone.clear();
    let mut engine = e;
    let mut io = LiveIo { target: &mut w.target, observer: &mut w.observer, mover: &mut w.mover, placer: &mut w.placer, log: None };
    assert_eq!(engine.round(&mut io, 0).unwrap(), RoundEnd::Continue);
    assert_eq!(engine.round(&mut io, 10_000_000).unwrap(), RoundEnd::TargetGone);
    w.placer.gone.push(100);
    let mut io = LiveIo { target: &mut w.target, observer: &mut w.observer, mover: &mut w.mover, placer: &mut w.placer, log: None };
    let s = engine.finish(&mut io).unwrap();
    assert_eq!((s.thread_moves, s.affinities_restored, s.affinities_gone, s.target_gone), (1, 0, 1, true));
}

/// Observations the engine cannot place are counted, not fed to the policy: an address
/// outside the anonymous mappings, a thread it never saw, a CPU of no node.
#[test]
fn unplaceable_observations_are_counted() {
    let mut w = world(&[(100, 0)], 1, 2);
    let mut far = access(100, 0, 0, 1);
    far.addr = 0x1000;
    let stranger = access(999, 0, 1, 1);
    let mut nowhere = access(100, 0, 2, 1);
    nowhere.cpu_node = 7;
    w.observer = ScriptedObserver::new(vec![vec![far, stranger, nowhere, access(100, 0, 3, 1)]]);
    let (s, _) = run(engine("autonuma", AUTONUMA_FAST, LiveConfig::default()), &mut w, 1);
    assert_eq!((s.observations, s.observations_unmapped), (4, 3));
}

/// The kernel refusing pages: page 0 stays busy past the 3 retries, page 1 is shared with
/// another process. Both are refused with the kernel's reason, counted, and their booked node
/// is undone, so the next scan step (40 ms) marks them again: 64 + 2 pages marked in all.
/// Page 0 is seen twice in the round; the second access is not a fault (the first unmarked
/// it) and does not overwrite the booking.
#[test]
fn pages_the_kernel_refuses_are_counted_with_its_reason_and_unbooked() {
    let mut w = world(&[(100, 0)], 1, 5);
    w.mover.busy.insert(BASE, 10);
    w.mover.shared.push(BASE + PAGE);
    let mut seen: Vec<Observation> = (0..4).map(|p| access(100, 0, p, 25_000_000)).collect();
    seen.push(access(100, 0, 0, 26_000_000));
    w.observer = ScriptedObserver::new(vec![vec![], vec![], vec![], seen]);
    let (s, _) = run(engine("autonuma", AUTONUMA_FAST, LiveConfig::default()), &mut w, 5);
    let moves: Vec<_> = mover_calls(&w).into_iter().filter(|c| c.1.is_some()).collect();
    assert_eq!(
        moves,
        vec![(addrs(0..4), Some(vec![0; 4])), (addrs(0..1), Some(vec![0])), (addrs(0..1), Some(vec![0])), (addrs(0..1), Some(vec![0]))]
    );
    assert_eq!(s.hint_faults, 4);
    assert_eq!((s.pages_moved, s.move_pages_calls, s.pages_marked), (2, 4, 66));
    assert_eq!(s.refused, [("migrate_page: busy".to_string(), 1), ("migrate_page: shared".to_string(), 1)].into());
    let lines = log_lines(&w);
    assert!(lines.iter().any(|l| l.contains(r#""page":0,"to":0},"outcome":"refused","reason":"busy"}"#)), "{lines:#?}");
    assert!(lines.iter().any(|l| l.contains(r#""page":1,"to":0},"outcome":"refused","reason":"shared"}"#)), "{lines:#?}");
}

/// An observer that watches the pages the engine chooses (the hinting-fault library) is
/// handed the marked pages whenever marks change, at most its capacity at a time, in
/// ascending address order, the sets taking turns over the marks (docs/live.md, "The agent
/// chooses the protected pages"). stable-numa's first scan step marks all 64 pages: the
/// observer, of capacity 40, is given pages 0-39. The thread then touches pages 0 and 1
/// (two hinting faults: their marks go); the next step marks them again, and the set after
/// pages 0-39 starts at page 40: pages 40-63, then 0-15 (wrapping).
#[test]
fn the_observer_is_asked_to_watch_the_marked_pages_in_turns() {
    let mut w = world(&[(100, 0)], 1, 4);
    w.placer.affinity.insert(100, vec![0]);
    let touch = |t| vec![access(100, 0, 0, t), access(100, 0, 1, t)];
    w.observer = ScriptedObserver::new(vec![vec![], vec![], touch(15_000_000)]);
    w.observer.arm_capacity = 40;
    let e = engine("stable-numa", "scan_delay_ms = 1\nscan_interval_ms = 10\nscan_chunk_mb = 0", LiveConfig::default());
    let (s, _) = run(e, &mut w, 4);
    assert_eq!(s.hint_faults, 2);
    let mut second: Vec<u64> = addrs(40..64);
    second.extend(addrs(0..16));
    second.sort_unstable();
    assert_eq!(w.observer.armed, vec![addrs(0..40), second]);
}

/// Pages in ranges the observer says it can never watch (the library's thread stacks) are
/// left out of the sets: with pages 8-15 and 30-31 unwatchable (two ranges overlapping and
/// one touching them), the first set of 40 is pages 0-7, 16-29 and 32-49.
#[test]
fn pages_the_observer_cannot_watch_are_not_handed_to_it() {
    let mut w = world(&[(100, 0)], 1, 2);
    w.placer.affinity.insert(100, vec![0]);
    w.observer.arm_capacity = 40;
    let page = |p: u64| addrs(p..p + 1)[0];
    w.observer.unwatchable = vec![(page(30), page(32)), (page(8), page(12)), (page(10), page(14)), (page(14), page(16))];
    let e = engine("stable-numa", "scan_delay_ms = 1\nscan_interval_ms = 10\nscan_chunk_mb = 0", LiveConfig::default());
    run(e, &mut w, 2);
    let mut want = addrs(0..8);
    want.extend(addrs(16..30));
    want.extend(addrs(32..50));
    assert_eq!(w.observer.armed, vec![want]);
}

/// Without an observer that takes requests (a perf or replay sampler), nothing is asked.
#[test]
fn an_observer_of_its_own_choosing_is_not_asked() {
    let mut w = world(&[(100, 0)], 1, 3);
    let e = engine("stable-numa", "scan_delay_ms = 1\nscan_interval_ms = 10\nscan_chunk_mb = 0", LiveConfig::default());
    let (s, _) = run(e, &mut w, 3);
    assert!(s.pages_marked > 0);
    assert!(w.observer.armed.is_empty());
}

/// A whole-process move (`MoveSpace`, a tiering policy's decision) is one `migrate_pages`
/// call from every other node to the target node, at the end of the round, after a location
/// pass over the numbered pages (so that the outcome counts what moved). Here: 64 pages on
/// node 0, moved to node 1: `migrate_pages(PID, [0], [1])`, applied, the books say node 1.
#[test]
fn a_whole_process_move_is_one_migrate_pages_call() {
    let mut w = world(&[(100, 0)], 0, 2);
    let (e, heard) = scripted(vec![vec![Decision::MoveSpace { space: 0, to: 1, from: None }]]);
    let (s, _) = run(e, &mut w, 2);
    assert_eq!(w.mover.whole_calls, vec![(PID, vec![0], vec![1])]);
    assert_eq!(mover_calls(&w), vec![(addrs(0..64), None)], "the location pass, no move_pages move");
    assert!(w.mover.location.values().all(|&n| n == 1));
    assert_eq!((s.space_moves, s.space_move_pages_left, s.applied), (1, 0, 1));
    assert_eq!(heard.lock().unwrap().clone(), vec!["MoveSpace { space: 0, to: 1, from: None } => Applied"]);
    let line = log_lines(&w).into_iter().find(|l| l.contains("move_space")).unwrap();
    assert!(line.contains(r#""outcome":"applied""#), "{line}");
}

/// A move with source nodes (`from`, HyDM's promotion from the slow tier) calls
/// `migrate_pages` with those nodes as `old_nodes`, less the target; a source that is only the
/// target leaves nothing to move: `already_there`, and no call. (On this 2-node guest the
/// sources besides the target are node 0 at most; the simulator's test moves from some nodes
/// of four, crates/sim/tests/space_windows.rs.)
#[test]
fn a_whole_process_move_from_source_nodes_names_them_as_old_nodes() {
    let mut w = world(&[(100, 0)], 0, 3);
    let (e, heard) = scripted(vec![vec![
        Decision::MoveSpace { space: 0, to: 1, from: NodeMask::of(&[1]) },
        Decision::MoveSpace { space: 0, to: 1, from: NodeMask::of(&[0, 1]) },
    ]]);
    run(e, &mut w, 3);
    assert_eq!(w.mover.whole_calls, vec![(PID, vec![0], vec![1])]);
    assert!(w.mover.location.values().all(|&n| n == 1));
    assert_eq!(
        heard.lock().unwrap().clone(),
        vec![
            "MoveSpace { space: 0, to: 1, from: Some(NodeMask(2)) } => Refused(AlreadyThere)",
            "MoveSpace { space: 0, to: 1, from: Some(NodeMask(3)) } => Applied",
        ]
    );
}

/// Pages the kernel could not move (shared or busy): the call's count, a partial outcome with
/// the pages that were elsewhere minus those left. A dry run makes no call; a target gone
/// (ESRCH) refuses the move as `space_exited`; a policy node that does not exist is refused.
#[test]
fn whole_process_moves_partial_dry_gone_and_refused() {
    let mut w = world(&[(100, 0)], 0, 2);
    w.mover.shared = addrs([3, 9]);
    let (e, heard) =
        scripted(vec![vec![Decision::MoveSpace { space: 0, to: 1, from: None }, Decision::MoveSpace { space: 0, to: 7, from: None }]]);
    let (s, _) = run(e, &mut w, 2);
    assert_eq!((s.space_moves, s.space_move_pages_left), (1, 2));
    assert_eq!(
        heard.lock().unwrap().clone(),
        vec![
            "MoveSpace { space: 0, to: 1, from: None } => Partial { moved_pages: 62, left_pages: 2 }",
            "MoveSpace { space: 0, to: 7, from: None } => Refused(NoSuchTarget)"
        ]
    );
    assert_eq!(w.mover.location[&(BASE + 3 * PAGE)], 0);

    let mut w = world(&[(100, 0)], 0, 2);
    let cfg = LiveConfig { dry_run: true, ..LiveConfig::default() };
    let (e, _) = scripted_with(vec![vec![Decision::MoveSpace { space: 0, to: 1, from: None }]], cfg);
    let (s, _) = run(e, &mut w, 2);
    assert!(w.mover.whole_calls.is_empty() && w.mover.calls.is_empty());
    assert_eq!(s.dry_run, 1);

    let mut w = world(&[(100, 0)], 0, 3);
    w.mover.exits_after_calls = Some(1);
    let (e, heard) = scripted(vec![vec![Decision::MoveSpace { space: 0, to: 1, from: None }]]);
    let (s, ends) = run(e, &mut w, 3);
    assert_eq!(w.mover.whole_calls, vec![(PID, vec![0], vec![1])]);
    assert!(s.target_gone && ends.last() == Some(&RoundEnd::TargetGone));
    assert_eq!(heard.lock().unwrap().clone(), vec!["MoveSpace { space: 0, to: 1, from: None } => Refused(SpaceExited)"]);
}

/// Region heat (docs/live.md, "Region heat"): the DAMON-like observer's regions of a round reach
/// the policy as runs of the target's numbered pages, the parts outside its mappings left out,
/// once per update; no observation, no sample, no fault, no move comes of them.
#[test]
fn regions_reach_the_policy_as_runs_of_numbered_pages() {
    let mut w = world(&[(100, 0)], 0, 3);
    let region = |start: u64, end: u64, nr_accesses| RegionAccess { start, end, nr_accesses, max_accesses: 20, age: 4 };
    // Round 0: a region from below the mapping into page 3 (hot), one from page 10 to far
    // beyond the mapping's 64 pages (cold), one wholly outside. Round 1: nothing new. Round 2:
    // page 5's last byte to page 6's first.
    w.observer.region_rounds = vec![
        vec![region(BASE - 16 * PAGE, BASE + 4 * PAGE, 18), region(BASE + 10 * PAGE, BASE + 1000 * PAGE, 0), region(0x1000, 0x9000, 20)],
        vec![],
        vec![region(BASE + 6 * PAGE - 1, BASE + 6 * PAGE + 1, 7)],
    ]
    .into();
    let (e, heard) = scripted(vec![]);
    let (s, _) = run(e, &mut w, 3);
    assert_eq!(
        *heard.lock().unwrap(),
        vec![
            "heat pages 0+4 accesses 18/20 age 4 at 0 ms".to_string(),
            "heat pages 10+54 accesses 0/20 age 4 at 0 ms".into(),
            "heat pages 5+2 accesses 7/20 age 4 at 20 ms".into(),
        ]
    );
    assert_eq!((s.region_heat_runs, s.observations, s.access_samples, s.hint_faults, s.pages_moved), (3, 0, 0, 0, 0));
}
