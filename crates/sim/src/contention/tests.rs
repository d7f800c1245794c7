//! Tests of the contention model (docs/simulator.md, "Contention: a closed queueing network").

use super::*;
use numalab_core::machine::presets;

#[test]
fn half_load_waits_about_one_service_time() {
    // Two streaming threads on one server-a-2n node, each alone would use 60% of the
    // controller: together the controller is the bottleneck and latency rises.
    let m = presets::load("server-a-2n").unwrap();
    let mut d = chase_demands(&m, 1, 0);
    d[0].inv_mlp = 1.0 / 8.0;
    d[0].svc_mult = 1.0;
    let alone = solved(&m, &d, 200);
    let x1 = alone.rate(0);
    d.push(d[0].clone());
    let two = solved(&m, &d, 200);
    assert!(two.latency(0)[0] > alone.latency(0)[0]);
    assert!(two.rate(0) < x1 && 2.0 * two.rate(0) > x1, "sharing a controller: each slower, together faster");
}

/// Single class, single controller: Schweitzer against exact MVA (Reiser–Lavenberg) from
/// one miss in flight (exact) through half load to saturation.
#[test]
fn one_class_tracks_exact_mva_from_idle_to_saturation() {
    let m = presets::load("server-a-2n").unwrap();
    let s = 64.0 / 100.0; // server-a-2n controller: 100 GB/s
    for n in [1usize, 2, 4, 8, 16, 64, 256] {
        let mut d = chase_demands(&m, 1, 0);
        d[0].inv_mlp = 1.0 / n as f64;
        d[0].svc_mult = 1.0;
        d[0].compute_ns = 0.5;
        let c = solved(&m, &d, 2000);
        // Exact MVA with think time Z = n*compute + (L0 - S) and one queue of service S.
        let z = n as f64 * 0.5 + (85.0 - s);
        let (mut q, mut x) = (0.0, 0.0);
        for k in 1..=n {
            let r = s * (1.0 + q);
            x = k as f64 / (z + r);
            q = x * r;
        }
        let err = (c.rate(0) - x).abs() / x;
        assert!(err < 0.05, "n = {n}: Schweitzer {} vs exact {x} ({:.1}%)", c.rate(0), 100.0 * err);
        assert!(c.rate(0) * s <= 1.0 + 1e-9, "utilisation above 1 at n = {n}");
        if n == 1 {
            assert!((c.latency(0)[0] - 85.0).abs() < 1e-9);
        }
    }
}

fn solved(m: &Machine, d: &[Demand], iters: u32) -> Contention {
    let mut c = Contention::new(m, &m.interconnect(), 64, d.len());
    c.solve(d, iters, 0.0, None, false);
    c
}

fn chase_demands(m: &Machine, threads: usize, target: usize) -> Vec<Demand> {
    let cpus = m.cpu_table();
    (0..threads)
        .map(|t| {
            let mut frac = vec![0.0; m.node_count()];
            frac[target] = 1.0;
            Demand {
                node: cpus.node_of_cpu[t] as usize,
                share: 1.0,
                compute_ns: 0.0,
                inv_mlp: 1.0,
                svc_mult: 1.0 / crate::config::MemoryConfig::default().random_efficiency,
                frac,
                write_frac: 0.0,
            }
        })
        .collect()
}

#[test]
fn demands_are_close_within_the_tolerance_and_never_across_nodes_or_shares() {
    let m = presets::load("server-a-4n").unwrap();
    let a = chase_demands(&m, 1, 0).remove(0);
    let mut b = a.clone();
    b.frac[0] -= 0.0009;
    b.frac[1] += 0.0009;
    b.compute_ns = 1.0;
    assert!(!a.close_to(&b, 1e-3), "compute 0 -> 1 ns is not a 0.1 % change");
    b.compute_ns = 0.0;
    assert!(a.close_to(&b, 1e-3) && !a.close_to(&b, 1e-4));
    b.svc_mult *= 1.0009;
    assert!(a.close_to(&b, 1e-3) && !a.close_to(&b, 5e-4));
    for change in [|d: &mut Demand| d.node = 1, |d: &mut Demand| d.share = 0.999_999, |d: &mut Demand| d.write_frac = 0.01] {
        let mut c = a.clone();
        change(&mut c);
        assert!(!a.close_to(&c, 1e-3), "{c:?}");
    }
    assert!(a.close_to(&a.clone(), 0.0), "a demand is close to itself at tolerance 0");
}

#[test]
fn idle_machine_has_idle_latency() {
    let m = presets::load("amd48").unwrap();
    let mut idle = chase_demands(&m, 2, 0);
    idle[1].share = 0.0;
    idle[0].share = 0.0;
    let c = solved(&m, &idle, 10);
    assert_eq!(c.latency(0)[0], 70.9);
    let c = solved(&m, &chase_demands(&m, 1, 0), 50);
    assert!((c.latency(0)[0] - 70.9).abs() < 1e-9, "a lone thread waits for nobody: {}", c.latency(0)[0]);
    assert!((c.rate(0) - 1.0 / 70.9).abs() < 1e-9);
}

/// docs/machines.md (amd48): 48 threads hitting one node see about 316.8 ns locally, 336.4 ns at
/// one hop and 392.3 ns at two hops (a calibration target, not an exact law).
#[test]
fn amd48_contended_latency_lands_near_the_measured_figures() {
    let m = presets::load("amd48").unwrap();
    let d = chase_demands(&m, 48, 0);
    let c = solved(&m, &d, 500);
    // The mean over the 48 loading threads lands at the measured figure (the calibration
    // of random_efficiency); per source, the arrival theorem gives a local thread (whose
    // own requests are a larger share of the queue) a shorter wait than a remote one, a
    // wider spread than measured (docs/simulator.md).
    let mean: f64 = (0..48).map(|t| c.latency(t)[0]).sum::<f64>() / 48.0;
    assert!((mean - 316.8).abs() / 316.8 < 0.05, "mean contended latency {mean}");
    let local = c.latency(0)[0]; // a thread of node 0
    assert!(local > 3.0 * 70.9, "saturation raises even local latency: {local}");
    let one_hop = c.latency(6)[0]; // a thread of node 1 -> memory node 0
    let two_hop = c.latency(18)[0]; // a thread of node 3 -> memory node 0
    assert!(one_hop > local && two_hop > one_hop, "{local} {one_hop} {two_hop}");
    // Throughput never exceeds the controller's random-line bandwidth.
    let x: f64 = (0..48).map(|t| c.rate(t)).sum();
    let random_gbps = m.nodes[0].mem_bw_gbps * crate::config::MemoryConfig::default().random_efficiency;
    assert!(x * 64.0 <= random_gbps * 1.0001, "{} GB/s", x * 64.0);
    assert!(c.utilisation(0) <= 1.0 + 1e-9);
}

#[test]
fn streaming_saturates_at_the_controller_bandwidth() {
    let m = presets::load("server-a-4n").unwrap();
    let mut d = chase_demands(&m, 32, 0);
    for x in &mut d {
        x.inv_mlp = 1.0 / 8.0;
        x.svc_mult = 1.0;
    }
    let c = solved(&m, &d, 500);
    let gbps: f64 = (0..32).map(|t| c.rate(t)).sum::<f64>() * 64.0;
    assert!(gbps <= 50.0 && gbps > 45.0, "{gbps} GB/s against a 50 GB/s controller");
    assert!(c.utilisation(0) <= 1.0 + 1e-9);
    // Half the threads are on the other socket: their reads load the shared UPI link,
    // which is not the bottleneck here (41.6 GB/s for at most 25 GB/s).
    let link = c.utilisation(m.node_count());
    assert!(link < 1.0);
}
/// Threads of the same node chasing the same memory are one class, and merging them is
/// exact: the merged solve gives every thread the throughput and latencies of the solve
/// with one class per thread (docs/simulator.md, "Contention").
#[test]
fn identical_demands_merge_into_one_class_per_node_without_changing_the_solution() {
    let m = presets::load("amd48").unwrap();
    let d = chase_demands(&m, 48, 0);
    let apart = solved(&m, &d, 2000);
    assert_eq!(apart.classes(), 48);
    let mut merged = Contention::new(&m, &m.interconnect(), 64, d.len());
    merged.solve(&d, 2000, 0.0, Some(0.0), false);
    assert_eq!(merged.classes(), 8, "48 threads on 8 nodes, one class per node");
    for t in 0..48 {
        let (a, b) = (apart.rate(t), merged.rate(t));
        assert!((a - b).abs() <= 1e-9 * a, "thread {t}: rate {a} apart, {b} merged");
        for j in 0..8 {
            let (a, b) = (apart.latency(t)[j], merged.latency(t)[j]);
            assert!((a - b).abs() <= 1e-9 * a, "thread {t} to node {j}: latency {a} apart, {b} merged");
        }
    }
    for s in 0..8 {
        let (a, b) = (apart.utilisation(s), merged.utilisation(s));
        assert!((a - b).abs() <= 1e-9, "controller {s}: utilisation {a} apart, {b} merged");
    }
}

/// Extrapolating along the slowest mode reaches the same fixed point as the plain damped
/// steps, in fewer steps: from a cold start on a saturated controller, and warm-started
/// after a small change of demand (the fast engine's usual case).
#[test]
fn extrapolated_solves_reach_the_same_fixed_point_in_fewer_steps() {
    let m = presets::load("amd48").unwrap();
    let mut d = chase_demands(&m, 48, 0);
    for (t, x) in d.iter_mut().enumerate() {
        x.inv_mlp = 1.0 / 4.0;
        x.frac = vec![0.0; 8];
        x.frac[t % 8] = 0.7;
        x.frac[(t + 1) % 8] = 0.3;
    }
    let solve = |extrapolate: bool| {
        let mut c = Contention::new(&m, &m.interconnect(), 64, d.len());
        let cold = c.solve(&d, 10_000, 1e-9, Some(0.0), extrapolate);
        let mut e = d.clone();
        for x in &mut e {
            x.frac[x.node] += 0.01;
            x.frac[(x.node + 1) % 8] -= 0.01;
        }
        let warm = c.solve(&e, 10_000, 1e-9, Some(0.0), extrapolate);
        (c, cold, warm)
    };
    let (plain, plain_cold, plain_warm) = solve(false);
    let (fast, fast_cold, fast_warm) = solve(true);
    assert!(fast_cold < plain_cold && fast_warm < plain_warm, "steps: cold {fast_cold} vs {plain_cold}, warm {fast_warm} vs {plain_warm}");
    for t in 0..48 {
        let (a, b) = (plain.rate(t), fast.rate(t));
        assert!((a - b).abs() <= 1e-6 * a, "thread {t}: rate {a} plain, {b} extrapolated");
        for j in 0..8 {
            let (a, b) = (plain.latency(t)[j], fast.latency(t)[j]);
            assert!((a - b).abs() <= 1e-6 * a, "thread {t} to node {j}: latency {a} plain, {b} extrapolated");
        }
    }
}

/// Demands that differ by less than the tolerance share a class and take the first
/// thread's demand: the solution moves by about the tolerance, no more; demands further
/// apart, or of other nodes or CPU shares, stay apart.
#[test]
fn close_demands_merge_within_the_tolerance_and_distant_ones_do_not() {
    let m = presets::load("amd48").unwrap();
    let mut d = chase_demands(&m, 12, 0); // nodes 0 and 1, six threads each
    for (t, dm) in d.iter_mut().enumerate() {
        let nudge = 4e-4 * (t % 3) as f64; // within 1e-3 of the first thread of its node
        dm.frac = vec![0.0; 8];
        dm.frac[0] = 0.5 - nudge;
        dm.frac[1] = 0.5 + nudge;
    }
    let apart = solved(&m, &d, 2000);
    let mut merged = Contention::new(&m, &m.interconnect(), 64, d.len());
    merged.solve(&d, 2000, 0.0, Some(1e-3), false);
    assert_eq!(merged.classes(), 2, "one class per node");
    for t in 0..12 {
        let (a, b) = (apart.rate(t), merged.rate(t));
        assert!((a - b).abs() <= 2e-3 * a, "thread {t}: rate {a} apart, {b} merged");
    }
    // Past the tolerance, another CPU share, no merging: classes split.
    d[1].frac[0] = 0.49;
    d[1].frac[1] = 0.51;
    d[2].share = 0.5;
    merged.solve(&d, 2000, 0.0, Some(1e-3), false);
    assert_eq!(merged.classes(), 4, "threads 1 and 2 lead classes of their own");
    merged.solve(&d, 2000, 0.0, None, false);
    assert_eq!(merged.classes(), 12);
}

/// A thread alone waits only behind its own queues: what they add to its latency is all of
/// its latency above the idle one, on the node it reads (controller and links), and nothing
/// on a node it does not read. Beside a second thread with the same demand, each holds half
/// of every queue: of the wait above idle, `Q_t(1 − 1/N)` is its own and `Q_t` the other's.
#[test]
fn a_thread_alone_waits_only_behind_its_own_queues() {
    // amd48: 12.5 GB/s controllers and links of its own, where one streaming thread queues.
    let m = presets::load("amd48").unwrap();
    let mut d = chase_demands(&m, 1, 1);
    d[0].inv_mlp = 1.0 / 8.0;
    d[0].svc_mult = 1.0;
    let c = solved(&m, &d, 500);
    let cpu_node = d[0].node;
    let idle = m.latency_ns[cpu_node][1];
    let own = c.own_wait_ns(0, cpu_node, 1);
    assert!(own > 1.0, "a streaming thread queues behind itself: {own} ns");
    assert!((own - (c.latency(0)[1] - idle)).abs() < 1e-6 * idle, "own {own} against {} above idle", c.latency(0)[1] - idle);
    assert_eq!(c.own_wait_ns(0, cpu_node, 0), 0.0, "no queue of its own where it does not read");
    d.push(d[0].clone());
    let two = solved(&m, &d, 500);
    let (own_2, above_2) = (two.own_wait_ns(0, cpu_node, 1), two.latency(0)[1] - idle);
    let n = 8.0; // misses in flight: 1 / inv_mlp
    assert!((own_2 - above_2 * (1.0 - 1.0 / n) / (2.0 - 1.0 / n)).abs() < 1e-6 * idle, "own {own_2} of {above_2} above idle");
}
