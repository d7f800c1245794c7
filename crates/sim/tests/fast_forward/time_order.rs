//! Windows that see hinting and mapping faults (docs/simulator.md, "Fast-forward", "In the
//! order of time"): in the order of time, in lockstep, or thread after thread (the witness),
//! on the fast engine and the exact one. Part of `fast_forward.rs`'s tests, on its set-up.

use super::fault_clock;
use super::{close, scenario, Setup};
use numalab_sim::config::EngineKind;
use numalab_sim::{RunMetrics, Scenario, SimConfig};

/// stream-like with 8 threads on server-a-4n at scale 0.05, noise off: the run the fault-order
/// tests arm page by page with the fault-clock policy.
fn faulting_stream(iterations: u32) -> Setup {
    Setup {
        machine: "server-a-4n",
        workload: "stream-like",
        threads: 8,
        scale: 0.05,
        policy: "first-touch",
        iterations: Some(iterations),
        policy_config: &[],
        noise: false,
    }
}

/// Run `sc` under the fault-clock policy (which arms every page at each tick and notes each
/// hinting fault's time) and return the largest step back in time from one fault the policy
/// saw to the next, with the run's metrics.
fn largest_step_back(sc: &Scenario, migrate_next: bool) -> (u64, RunMetrics) {
    largest_step_back_with(sc, fault_clock::Config { migrate_next, mappings: false })
}

/// [`largest_step_back`] under any configuration of the fault-clock policy.
fn largest_step_back_with(sc: &Scenario, config: fault_clock::Config) -> (u64, RunMetrics) {
    use numalab_policy::{Policy, PolicyEnv};
    let p = fault_clock::FaultClock::new(config, &PolicyEnv::new(sc.machine.clone())).unwrap();
    let seen = p.seen_ns.clone();
    let r = numalab_sim::run_with_policy(sc, Box::new(p), 1, None).unwrap();
    let seen = seen.lock().unwrap();
    assert!(seen.len() > 1000, "the run must fault for the test to mean anything: {} faults", seen.len());
    let (mut latest, mut back) = (0u64, 0u64);
    for &t in seen.iter() {
        back = back.max(latest.saturating_sub(t));
        latest = latest.max(t);
    }
    (back, r)
}

/// While pages are armed, a window runs its threads in the order of time (docs/simulator.md,
/// "Fast-forward", "In the order of time"): the policy sees every hinting fault at or after the
/// one before it. With that off, in lockstep, one epoch at a time: in the order of time up to
/// about an epoch. With both off (as the mechanisms' witness), thread after thread: the first
/// thread's faults of a whole window before the second thread's. Checked on the largest step
/// back in time from one fault to the next, and on the calls of the charging loop it takes.
#[test]
fn windows_with_armed_pages_run_in_time_order_and_faults_come_in_time_order() {
    let s = faulting_stream(3);
    let epoch_ns = SimConfig::default().epoch_us as u64 * 1000;
    // The largest step back, the loop steps per epoch, the faults and the run's time.
    let run = |time_order: bool, lockstep: bool, migrate_next: bool| {
        let mut sc = scenario(&s, EngineKind::Fast, 2000.0, 0.01);
        sc.sim.tick_ms = 5.0;
        sc.sim.fast_forward_time_order = time_order;
        sc.sim.fast_forward_lockstep = lockstep;
        let (back, r) = largest_step_back(&sc, migrate_next);
        (back, r.engine.loop_steps as f64 / (r.exec_time_s * 1e9 / epoch_ns as f64), r.hint_faults, r.exec_time_s)
    };
    let (ordered_back, ordered_steps, ordered_faults, ordered_s) = run(true, true, false);
    let (lockstep_back, lockstep_steps, lockstep_faults, lockstep_s) = run(false, true, false);
    let (apart_back, _, _, _) = run(false, false, false);
    // A decision beyond the faulting page ends the order of time for the rest of its window,
    // which runs in lockstep.
    let (broken_back, _, _, _) = run(true, true, true);
    assert!(broken_back > 0 && broken_back <= 2 * epoch_ns, "broken windows in lockstep: {broken_back} ns back at most");
    assert!(
        ordered_steps < 0.5 && lockstep_steps < 0.5,
        "both keep the windows: {ordered_steps} and {lockstep_steps} loop steps per epoch"
    );
    assert_eq!(ordered_back, 0, "in the order of time: a fault came {ordered_back} ns before one already seen");
    assert!(lockstep_back > 0 && lockstep_back <= 2 * epoch_ns, "lockstep: a fault came {lockstep_back} ns before one already seen");
    assert!(apart_back > 10 * epoch_ns, "thread after thread over whole windows: {apart_back} ns back at most");
    // The same run in another order: the faults and the time agree closely.
    close("hint faults", lockstep_faults as f64, ordered_faults as f64, 0.02);
    close("time", lockstep_s, ordered_s, 0.01);
}

/// While the run keeps per-node mappings, whose faults the policy decides (DUnX), a window runs
/// its threads in lockstep too (docs/simulator.md, "Fast-forward"): the policy sees a mapping
/// fault at most about an epoch before one already seen. Thread after thread over whole
/// windows (lockstep off, the witness, and what the fast engine did before issue 9's stop
/// 57), the first thread took the fault of every page it shares with the others a whole
/// window ahead.
#[test]
fn windows_with_mappings_run_in_lockstep() {
    let s = faulting_stream(3);
    let epoch_ns = SimConfig::default().epoch_us as u64 * 1000;
    let run = |lockstep: bool| {
        let mut sc = scenario(&s, EngineKind::Fast, 2000.0, 0.01);
        sc.sim.fast_forward_lockstep = lockstep;
        let (back, r) = largest_step_back_with(&sc, fault_clock::Config { migrate_next: false, mappings: true });
        (back, r.engine.loop_steps as f64 / (r.exec_time_s * 1e9 / epoch_ns as f64))
    };
    let (lockstep_back, lockstep_steps) = run(true);
    let (apart_back, _) = run(false);
    assert!(lockstep_steps < 0.5, "the windows stay: {lockstep_steps} loop steps per epoch");
    assert!(lockstep_back <= 2 * epoch_ns, "lockstep: a mapping fault came {lockstep_back} ns before one already seen");
    assert!(apart_back > 10 * epoch_ns, "thread after thread over whole windows: {apart_back} ns back at most");
}

/// The exact engine takes an epoch with armed pages in the order of time too (docs/simulator.md,
/// "Fast-forward", "The exact engine in the order of time too"): its policy sees every hinting
/// fault at or after the one before it. With `exact_time_order = false` it runs the epoch thread
/// after thread, and a later thread's faults come up to about an epoch before faults already
/// seen; the references charged are the same either way, and the run's faults and time agree.
#[test]
fn the_exact_engine_takes_faults_in_the_order_of_time() {
    let s = faulting_stream(2);
    let epoch_ns = SimConfig::default().epoch_us as u64 * 1000;
    let run = |time_order: bool| {
        let mut sc = scenario(&s, EngineKind::Exact, 2000.0, 0.01);
        sc.sim.tick_ms = 5.0;
        sc.sim.exact_time_order = time_order;
        let (back, r) = largest_step_back(&sc, false);
        (back, r.accesses, r.hint_faults, r.exec_time_s)
    };
    let (ordered_back, ordered_refs, ordered_faults, ordered_s) = run(true);
    let (apart_back, apart_refs, apart_faults, apart_s) = run(false);
    assert_eq!(ordered_back, 0, "in the order of time: a fault came {ordered_back} ns before one already seen");
    assert!(apart_back > 0 && apart_back <= 2 * epoch_ns, "thread after thread in an epoch: {apart_back} ns back at most");
    assert_eq!(ordered_refs, apart_refs, "the same references either way");
    close("hint faults", apart_faults as f64, ordered_faults as f64, 0.02);
    close("time", apart_s, ordered_s, 0.01);
}
