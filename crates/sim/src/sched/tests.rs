//! Edge tests of the scheduler model: each mechanism of docs/scheduler.md at its boundary.

use super::balance::{MC, NUMA};
use super::noise::NoiseTask;
use super::*;
use crate::config::SchedConfig;
use TaskState::{Runnable, Sleeping, Spinning};

fn quiet() -> SchedConfig {
    SchedConfig { noise_rate_per_cpu_hz: 0.0, ..SchedConfig::default() }
}

/// `nodes` nodes of `per_node` CPUs; thread t starts on `initial[t]`.
fn sched(cfg: SchedConfig, nodes: usize, per_node: usize, initial: Vec<CpuId>, pinned: bool) -> Scheduler {
    let node_of_cpu = (0..nodes * per_node).map(|c| (c / per_node) as NodeId).collect();
    let core_of_cpu = (0..(nodes * per_node) as u32).collect();
    Scheduler::new(cfg, node_of_cpu, core_of_cpu, initial, pinned, numalab_core::rng::stream(1, "t", 0))
}

const MS: f64 = 1e6;

fn run_epochs(s: &mut Scheduler, states: &[TaskState], from_ms: f64, epochs: usize) -> Vec<Move> {
    let mut all = Vec::new();
    let mut share = vec![0.0; states.len()];
    let mut moves = Vec::new();
    for e in 0..epochs {
        let start = from_ms * MS + e as f64 * 50e3;
        s.epoch(start, start + 50e3, 50e3, states, &[], &mut share, &mut moves);
        all.extend(moves.iter().copied());
    }
    all
}

#[test]
fn a_pinned_thread_never_moves_and_shares_its_cpu() {
    let mut s = sched(SchedConfig { noise_rate_per_cpu_hz: 2000.0, ..SchedConfig::default() }, 2, 2, vec![0, 0], true);
    assert!(run_epochs(&mut s, &[Runnable; 2], 0.0, 400).is_empty());
    let mut share = vec![0.0; 2];
    let mut moves = Vec::new();
    s.epoch(30.0 * MS, 30.05 * MS, 50e3, &[Runnable; 2], &[], &mut share, &mut moves);
    assert!(share[0] <= 0.5 && share[0] > 0.3, "{share:?}");
    let mut woke = Vec::new();
    s.wake(0, 31.0 * MS, &[Runnable; 2], &mut woke);
    assert!(woke.is_empty());
    assert_eq!(s.move_thread(0, 1, None, Cause::Policy, &[Runnable; 2], 0.0), Err(Refusal::Pinned));
}

#[test]
fn a_cache_hot_task_is_not_pulled_by_newidle_balancing() {
    // Threads 0 and 1 share CPU 0 in 3 ms slices (6 ms latency / 2); CPU 1 goes idle.
    // At 3.2 ms thread 1 runs and thread 0 stopped 0.2 ms ago: cache-hot, stays.
    let mut s = sched(quiet(), 2, 2, vec![0, 0, 2, 3], false);
    let m = run_epochs(&mut s, &[Runnable; 4], 3.2, 1);
    assert!(m.is_empty(), "{m:?}");
    // At 5.9 ms thread 0 stopped 2.9 ms ago: not hot, CPU 1 pulls it.
    let mut s = sched(quiet(), 2, 2, vec![0, 0, 2, 3], false);
    let m = run_epochs(&mut s, &[Runnable; 4], 5.9, 1);
    assert_eq!(m.len(), 1);
    assert_eq!((m[0].thread, m[0].to, m[0].cause, m[0].cross_node), (0, 1, Cause::IdleBalance, false));
}

#[test]
fn newidle_balancing_needs_a_long_enough_average_idle_time() {
    let mut s = sched(quiet(), 2, 2, vec![0, 0, 2, 3], false);
    s.avg_idle_ns[1] = 0.4e6; // below sysctl_sched_migration_cost
    let m = run_epochs(&mut s, &[Runnable; 4], 5.9, 1);
    assert!(m.iter().all(|m| m.cause != Cause::IdleBalance), "{m:?}");
    // (The periodic balance of CPU 1's node-level domain, due since 2 ms, pulls instead.)
    assert_eq!(m.iter().map(|m| m.cause).collect::<Vec<_>>(), vec![Cause::LoadBalance]);
}

#[test]
fn a_running_task_is_never_pulled_but_active_balancing_pushes_it_after_failures() {
    // Two nodes of 8 CPUs, six threads alone on six CPUs of node 0: node 1 sees an imbalance
    // of (8 - 2) / 2 = 3 idle CPUs, more than the NUMA allowance, but every candidate runs.
    let mut s = sched(quiet(), 2, 8, (0..6).collect(), false);
    let states = [Runnable; 6];
    s.recount(&states);
    let mut moves = Vec::new();
    for k in 1..=4 {
        assert_eq!(s.load_balance(8, NUMA, Cause::LoadBalance, 10.0 * MS, &states, &mut moves), balance::Outcome::Failed);
        assert_eq!(s.domain(8, NUMA).failed, k);
    }
    // cache_nice_tries (2) + 2 failures exceeded: the running task is pushed over.
    assert_eq!(s.load_balance(8, NUMA, Cause::LoadBalance, 10.0 * MS, &states, &mut moves), balance::Outcome::Moved);
    assert_eq!(moves.len(), 1);
    assert!(moves[0].cross_node);
}

#[test]
fn a_small_numa_imbalance_is_tolerated() {
    // Two nodes of 8 CPUs (imb_numa_nr = 1): two threads on node 0 and an empty node 1 differ
    // by (8 - 6) / 2 = 1 idle CPU, within NUMA_IMBALANCE_MIN while node 1 runs nothing.
    let mut s = sched(quiet(), 2, 8, vec![0, 1], false);
    assert!(run_epochs(&mut s, &[Runnable; 2], 0.0, 2000).is_empty(), "100 ms of balancing");
    // Four threads: (8 - 4) / 2 = 2, still tolerated.
    let mut s = sched(quiet(), 2, 8, vec![0, 1, 2, 3], false);
    assert!(run_epochs(&mut s, &[Runnable; 4], 0.0, 2000).is_empty());
    // Six: 3, not tolerated; the balancer eventually moves one across (active balancing).
    let mut s = sched(quiet(), 2, 8, (0..6).collect(), false);
    let m = run_epochs(&mut s, &[Runnable; 6], 0.0, 4000);
    assert!(m.iter().any(|m| m.cross_node && m.cause == Cause::LoadBalance), "{m:?}");
}

#[test]
fn a_background_task_makes_a_node_overloaded_only_when_it_counts() {
    // Two nodes of 2 CPUs. Threads 0 and 1 on node 0 (CPUs 0, 1), thread 2 on CPU 2; CPU 3 is
    // idle. A daemon runs on CPU 0 from 1 ms to 20 ms, so thread 0 waits there, cold after
    // 0.5 ms. Node 0 runs three tasks on two CPUs.
    let daemon = NoiseTask { cpu: 0, start_ns: 1.0 * MS, end_ns: 20.0 * MS };
    let states = [Runnable; 3];
    // Counting workload threads only, node 0 is fully busy, not overloaded, and the idle CPUs
    // differ by (1 - 0) / 2 = 0: nothing crosses.
    let mut s = sched(quiet(), 2, 2, vec![0, 1, 2], false);
    s.noise.tasks.push(daemon);
    let m = run_epochs(&mut s, &states, 2.0, 200);
    assert!(m.iter().all(|m| !m.cross_node), "{m:?}");
    // With background tasks in the count (Linux's sum_nr_running), node 0 is overloaded and
    // CPU 3, going idle, pulls the waiting thread across (newidle balancing at the NUMA level).
    let cfg = SchedConfig { background_in_nr_running: true, ..quiet() };
    let mut s = sched(cfg, 2, 2, vec![0, 1, 2], false);
    s.noise.tasks.push(daemon);
    let m = run_epochs(&mut s, &states, 2.0, 200);
    assert_eq!(m.iter().map(|m| (m.thread, m.to, m.cause, m.cross_node)).collect::<Vec<_>>(), vec![(0, 3, Cause::IdleBalance, true)]);
}

#[test]
fn a_spinning_waiter_holds_its_cpu() {
    // Thread 0 spins on CPU 1; threads 1 and 2 share CPU 0. CPU 1 is not idle, so nothing is
    // pulled onto it, and the spinner itself is never moved.
    let mut s = sched(quiet(), 2, 2, vec![1, 0, 0, 2], false);
    let states = [Spinning, Runnable, Runnable, Runnable];
    let m = run_epochs(&mut s, &states, 5.9, 200);
    assert!(m.iter().all(|m| m.thread != 0 && m.to != 1), "{m:?}");
    assert!(!s.cpu_idle(1, 6.0 * MS));
    // Asleep instead, it frees the CPU: the waiting thread is pulled there.
    let mut s = sched(quiet(), 2, 2, vec![1, 0, 0, 2], false);
    let m = run_epochs(&mut s, &[Sleeping, Runnable, Runnable, Runnable], 5.9, 1);
    assert_eq!(m.iter().map(|m| (m.to, m.cause)).collect::<Vec<_>>(), vec![(1, Cause::IdleBalance)]);
}

#[test]
fn a_woken_thread_takes_an_idle_sibling_of_its_node() {
    // Thread 0 slept on CPU 0, where thread 1 now runs; CPU 1 (same node) is idle.
    let mut s = sched(quiet(), 2, 2, vec![0, 0, 2], false);
    let states = [Runnable, Runnable, Runnable];
    let mut moves = Vec::new();
    s.wake(0, 1.0 * MS, &states, &mut moves);
    assert_eq!(moves.iter().map(|m| (m.thread, m.to, m.cause, m.cross_node)).collect::<Vec<_>>(), vec![(0, 1, Cause::Wakeup, false)]);
    // No idle CPU in the node: it stays, even with node 1 idle (no cross-node wake-up).
    let mut s = sched(quiet(), 2, 2, vec![0, 0, 1], false);
    let mut moves = Vec::new();
    s.wake(0, 1.0 * MS, &states, &mut moves);
    assert!(moves.is_empty());
    // Its own CPU idle: it stays there.
    let mut s = sched(quiet(), 2, 2, vec![0, 1], false);
    s.wake(0, 1.0 * MS, &[Runnable, Runnable], &mut moves);
    assert!(moves.is_empty());
}

#[test]
fn a_kernel_thread_preempting_in_place_leaves_nothing_to_move() {
    // A bound kworker runs on CPU 0 from 4.8 ms: thread 0 was running there until then and
    // is cache-hot while it waits; CPU 1 goes idle and finds nothing it may pull.
    let mut s = sched(quiet(), 1, 2, vec![0], false);
    s.noise.tasks.push(NoiseTask { cpu: 0, start_ns: 4.8 * MS, end_ns: 5.1 * MS });
    let m = run_epochs(&mut s, &[Runnable], 5.0, 1);
    assert!(m.is_empty(), "{m:?}");
    assert_eq!(s.running_thread(0, 5.0 * MS, &[Runnable]), None, "the kworker runs");
}

#[test]
fn balance_intervals_grow_while_balanced_and_stretch_on_busy_cpus() {
    // One thread per CPU: balanced everywhere, every CPU busy.
    let mut s = sched(quiet(), 2, 2, vec![0, 1, 2, 3], false);
    let d = s.domain(0, MC);
    assert_eq!((d.weight, d.interval_ms), (2, 2.0), "the interval starts at the span in ms");
    run_epochs(&mut s, &[Runnable; 4], 2.0, 1);
    let d = s.domain(0, MC);
    assert_eq!(d.interval_ms, 4.0, "doubled, at most twice the span");
    assert_eq!(d.next_ns, 2.0 * MS + 4.0 * 16.0 * MS, "a busy CPU waits busy_factor times longer");
    let numa = s.domain(0, NUMA);
    assert_eq!((numa.weight, numa.interval_ms), (4, 4.0));
}

#[test]
fn the_preferred_node_vetoes_a_pull_until_balancing_failed_often_enough() {
    // Node 0: threads 0 and 1 share CPU 0, thread 2 on CPU 1 (overloaded: 3 tasks, 2 CPUs);
    // node 1 is empty. At 5.9 ms thread 0 waits and is not hot.
    let states = [Runnable; 3];
    let mut s = sched(quiet(), 2, 2, vec![0, 0, 1], false);
    s.set_preferred(0, Some(0));
    s.recount(&states);
    let mut moves = Vec::new();
    for _ in 0..3 {
        assert_eq!(s.load_balance(2, NUMA, Cause::LoadBalance, 5.9 * MS, &states, &mut moves), balance::Outcome::Failed);
    }
    // More than cache_nice_tries (2) failures: the veto is overridden.
    assert_eq!(s.load_balance(2, NUMA, Cause::LoadBalance, 5.9 * MS, &states, &mut moves), balance::Outcome::Moved);
    assert_eq!((moves[0].thread, moves[0].cross_node), (0, true));
    // Without a preferred node the first attempt moves it.
    let mut s = sched(quiet(), 2, 2, vec![0, 0, 1], false);
    s.recount(&states);
    let mut moves = Vec::new();
    assert_eq!(s.load_balance(2, NUMA, Cause::LoadBalance, 5.9 * MS, &states, &mut moves), balance::Outcome::Moved);
}

#[test]
fn noise_is_seeded_takes_cpu_time_and_the_run_repeats() {
    let cfg = SchedConfig { noise_rate_per_cpu_hz: 2e4, noise_mean_us: 50.0, ..SchedConfig::default() };
    let run = || {
        let mut s = sched(cfg.clone(), 2, 2, vec![0, 1, 2], false);
        let mut share = vec![0.0; 3];
        let mut moves = Vec::new();
        let mut total = 0.0;
        let mut all = Vec::new();
        for e in 0..400 {
            s.epoch(e as f64 * 5e4, (e + 1) as f64 * 5e4, 5e4, &[Runnable; 3], &[], &mut share, &mut moves);
            total += share.iter().sum::<f64>();
            all.extend(moves.iter().copied());
        }
        (total, all)
    };
    let a = run();
    assert_eq!(a, run());
    assert!(a.0 < 1200.0 * 0.99, "noise must steal time: {}", a.0);
}

#[test]
fn newidle_failures_do_not_wear_down_the_vetoes() {
    // Thread 0 waits, cache-hot, on CPU 0 (thread 1 runs): newidle attempts from CPU 1 fail
    // without counting, so the veto holds however often CPU 1 goes idle.
    let states = [Runnable; 3];
    let mut s = sched(quiet(), 2, 2, vec![0, 0, 2], false);
    s.recount(&states);
    let mut moves = Vec::new();
    for _ in 0..10 {
        assert_eq!(s.load_balance(1, MC, Cause::IdleBalance, 3.2 * MS, &states, &mut moves), balance::Outcome::Failed);
    }
    assert_eq!(s.domain(1, MC).failed, 0);
    // Periodic failures count, and after cache_nice_tries (1) of them the hot task moves.
    assert_eq!(s.load_balance(1, MC, Cause::LoadBalance, 3.2 * MS, &states, &mut moves), balance::Outcome::Failed);
    assert_eq!(s.domain(1, MC).failed, 1);
    assert_eq!(s.load_balance(1, MC, Cause::LoadBalance, 3.2 * MS, &states, &mut moves), balance::Outcome::Failed);
    assert_eq!(s.load_balance(1, MC, Cause::LoadBalance, 3.2 * MS, &states, &mut moves), balance::Outcome::Moved);
}

#[test]
fn daemon_work_takes_an_idle_cpu_of_its_node_else_shares_and_queues() {
    // Node 0: CPUs 0, 1; thread 0 on CPU 0, CPU 1 idle. Node 1: CPUs 2, 3 both busy.
    let mut s = sched(quiet(), 2, 2, vec![0, 2, 3], true);
    let states = [Runnable; 3];
    let mut share = vec![0.0; 3];
    let mut moves = Vec::new();
    s.epoch(0.0, 50e3, 50e3, &states, &[], &mut share, &mut moves);
    s.run_daemon(0, 50e3, 100e3);
    s.epoch(50e3, 100e3, 50e3, &states, &[], &mut share, &mut moves);
    assert_eq!(share[0], 1.0, "the daemon ran on idle CPU 1: thread 0 keeps its CPU");
    assert!(!s.cpu_idle(1, 60e3), "CPU 1 runs the daemon");
    // Woken on CPU 2 with no idle CPU on node 1: it shares CPU 2 with thread 1, after the
    // daemon's earlier work (until 150 µs) is done.
    s.run_daemon(2, 100e3, 50e3);
    s.epoch(100e3, 150e3, 50e3, &states, &[], &mut share, &mut moves);
    assert_eq!(share[1], 1.0, "queued behind the first piece of work");
    s.epoch(150e3, 200e3, 50e3, &states, &[], &mut share, &mut moves);
    assert_eq!(share[1], 0.5, "time-sliced with the daemon");
    assert_eq!(share[2], 1.0);
    s.run_daemon(0, 500e3, 0.0);
    s.epoch(500e3, 550e3, 50e3, &states, &[], &mut share, &mut moves);
    assert_eq!(share[0], 1.0, "no work, no task");
}

#[test]
fn a_share_over_part_of_a_window_counts_only_the_tasks_in_that_part() {
    // Thread 0 alone on CPU 0, thread 1 and 2 time-slice CPU 2 (node 1, no idle CPU there).
    // A daemon's 100 µs on CPU 2 from 250 µs: over the window [0, 400 µs) it takes a quarter
    // of the time, over [0, 200 µs) nothing, over [200, 400 µs) half.
    let mut s = sched(quiet(), 2, 2, vec![0, 2, 2], true);
    s.noise.tasks.push(NoiseTask { cpu: 2, start_ns: 250e3, end_ns: 350e3 });
    let states = [Runnable; 3];
    let mut share = vec![0.0; 3];
    let mut moves = Vec::new();
    s.epoch(0.0, 400e3, 50e3, &states, &[], &mut share, &mut moves);
    assert_eq!(share[0], 1.0);
    // Two threads and, for a quarter of the window, the task: 3/4 · 1/2 + 1/4 · 1/3.
    assert_eq!(share[1], 0.75 / 2.0 + 0.25 / 3.0);
    assert_eq!((s.noise_ns_on(1, 0.0, 400e3), s.noise_ns_on(1, 0.0, 200e3), s.noise_ns_on(1, 200e3, 400e3)), (100e3, 0.0, 100e3));
    assert_eq!(s.noise_ns_on(0, 0.0, 400e3), 0.0, "the task is on another CPU");
    assert_eq!(s.share_with(1, 0.0), 0.5);
    assert_eq!(s.share_with(1, 0.5), 0.25 + 0.5 / 3.0);
    // The share over the whole window is `share_with` at the window's fraction, to the bit.
    assert_eq!(s.share_with(1, s.noise_ns_on(1, 0.0, 400e3) / 400e3), share[1]);
    // More than the whole time (overlapping tasks) is the whole time.
    assert_eq!(s.share_with(2, 1.7), 1.0 / 3.0);
}

/// What a window must leave as the epoch-by-epoch loop leaves it at the same epoch start `at`
/// (`epoch_ns` after the last one it ran): the threads' CPUs and moves, the idle bookkeeping,
/// the background tasks still running and the next one's arrival, and what runs on each CPU
/// (threads and tasks, as of the last epoch start).
#[allow(clippy::type_complexity)]
fn seen(
    s: &Scheduler,
    at: f64,
    epoch_ns: f64,
) -> (Vec<CpuId>, Vec<f64>, Vec<Option<f64>>, Vec<(usize, f64, f64)>, f64, Vec<u32>, Vec<u32>) {
    let tasks = s.noise.tasks.iter().filter(|t| t.end_ns > at - epoch_ns).map(|t| (t.cpu, t.start_ns, t.end_ns)).collect();
    (s.cpu_of.clone(), s.avg_idle_ns.clone(), s.idle_since.clone(), tasks, s.noise.next_arrival_ns(), s.noise_now.clone(), s.load.clone())
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig { cases: 48, ..Default::default() })]

    /// A fast-forward window runs the scheduler as the epochs it spans, one by one, would
    /// (docs/simulator.md, "Fast-forward"): background tasks that start and end on CPUs
    /// without a thread pass inside it and so do the naps of waiting threads, their idle
    /// transitions are folded at the epoch starts where the loop sees them, and the window
    /// ends early exactly where a newidle balance moves a thread or a nap would change
    /// another thread's share. Two nodes of four CPUs; five threads, some sharing a CPU (so
    /// newidle balancing has something to pull), each running, asleep, or spinning until it
    /// falls asleep at `sleep_ms`.
    #[test]
    fn a_window_runs_as_its_epochs_one_by_one(
        seed in 0u64..1_000_000,
        cpus in proptest::collection::vec(0u32..8, 5),
        kinds in proptest::collection::vec(0u8..3, 5),
        sleep_ms in proptest::collection::vec(0.0f64..40.0, 5),
        rate_hz in 1e3f64..2e4,
        mean_us in 20.0f64..200.0,
        bound_share in 0.0f64..1.0,
    ) {
        let cfg = SchedConfig { noise_rate_per_cpu_hz: rate_hz, noise_mean_us: mean_us, noise_bound_share: bound_share, migration_cost_us: 100.0, ..SchedConfig::default() };
        let state_at = |t: usize, at: f64| match kinds[t] {
            0 => Runnable,
            1 => Sleeping,
            _ if at < sleep_ms[t] * MS => Spinning,
            _ => Sleeping,
        };
        let make = || {
            let node_of_cpu = (0..8).map(|c| (c / 4) as NodeId).collect();
            Scheduler::new(cfg.clone(), node_of_cpu, (0..8).collect(), cpus.clone(), false, numalab_core::rng::stream(seed, "t", 0))
        };
        let (mut epochs, mut windows) = (make(), make());
        let epoch_ns = 50e3;
        let (mut share, mut moves) = (vec![0.0; 5], Vec::new());
        let (mut by_epoch, mut by_window) = (Vec::new(), Vec::new());
        let (mut now, mut long) = (0.0, 0);
        let mut looped = 0.0;
        while now < 40.0 * MS {
            // The window fast-forwarding would take: up to 40 epochs, to the next balance due,
            // passing the naps of the threads spinning now.
            let due = windows.next_event();
            let n = ((due - now) / epoch_ns).ceil().clamp(1.0, 40.0);
            let planned = now + n * epoch_ns;
            let states: Vec<TaskState> = (0..5).map(|t| state_at(t, now)).collect();
            let naps: Vec<(usize, f64)> =
                (0..5).filter(|&t| states[t] == Spinning && sleep_ms[t] * MS < planned).map(|t| (t, sleep_ms[t] * MS)).collect();
            let end = windows.epoch(now, planned, epoch_ns, &states, &naps, &mut share, &mut moves);
            by_window.extend(moves.iter().copied());
            proptest::prop_assert!(end > now && end <= planned);
            long += usize::from(end - now > epoch_ns);
            while looped < end {
                let states: Vec<TaskState> = (0..5).map(|t| state_at(t, looped)).collect();
                epochs.epoch(looped, looped + epoch_ns, epoch_ns, &states, &[], &mut share, &mut moves);
                by_epoch.extend(moves.iter().copied());
                looped += epoch_ns;
            }
            proptest::prop_assert_eq!(looped, end);
            proptest::prop_assert_eq!(seen(&windows, end, epoch_ns), seen(&epochs, end, epoch_ns), "at {} ns", end);
            now = end;
        }
        proptest::prop_assert_eq!(by_window, by_epoch);
        proptest::prop_assert!(long > 0);
    }
}

/// A window ends early where a newidle balance would pull a thread, and the pull is made at
/// the next window's start: threads 0 and 1 share CPU 0 and CPUs 1 to 3 of its node idle
/// between background tasks; once thread 1 has waited past the migration cost, the first of
/// them to go idle again pulls it.
#[test]
fn a_window_ends_where_a_newidle_balance_pulls() {
    let cfg = SchedConfig {
        noise_rate_per_cpu_hz: 2e3,
        noise_mean_us: 100.0,
        noise_bound_share: 1.0,
        migration_cost_us: 100.0,
        ..SchedConfig::default()
    };
    let states = [Runnable, Runnable, Runnable];
    let mut s = sched(cfg, 2, 4, vec![0, 0, 4], false);
    let (mut share, mut moves) = (vec![0.0; 3], Vec::new());
    let (mut now, mut cut_at) = (0.0, None);
    while now < 4.0 * MS {
        let planned = now + ((s.next_event() - now) / 50e3).ceil().clamp(1.0, 40.0) * 50e3;
        let end = s.epoch(now, planned, 50e3, &states, &[], &mut share, &mut moves);
        if let Some(m) = moves.iter().find(|m| m.cause == Cause::IdleBalance) {
            assert_eq!((m.thread, m.at_ns), (1, now));
            assert_eq!(cut_at, Some(now), "the window before ended where the pull is made");
            return;
        }
        cut_at = (end < planned).then_some(end);
        now = end;
    }
    panic!("no newidle pull before the periodic balance at 4 ms");
}
