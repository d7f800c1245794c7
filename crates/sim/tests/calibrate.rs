//! `numalab_sim::calibrate`: the probes measure what the simulator's documented models imply
//! (docs/calibration.md).

use numalab_core::machine::presets;
use numalab_sim::calibrate::{calibrate, chase_latency_ns, loaded_point, stream_triad_gbps, ProbeOptions};
use std::sync::Arc;

fn quick() -> ProbeOptions {
    ProbeOptions { refs_per_thread: 50_000, ..ProbeOptions::default() }
}

#[test]
fn idle_pointer_chase_reproduces_the_latency_matrix() {
    let m = Arc::new(presets::load("server-a-4n").unwrap());
    let cpus = m.cpu_table();
    for i in m.cpu_nodes() {
        for j in m.memory_nodes() {
            let ns = chase_latency_ns(&m, cpus.first_cpu_of_node[i as usize], j, &quick()).unwrap();
            let want = m.latency_ns[i as usize][j as usize];
            assert!((ns - want).abs() / want < 1e-3, "chase {i}->{j}: {ns} ns, preset {want} ns");
        }
    }
}

#[test]
fn stream_triad_never_exceeds_the_controllers_and_one_thread_is_latency_bound() {
    let m = Arc::new(presets::load("xeon-e5-2690-2s").unwrap());
    let all: Vec<u32> = (0..m.total_cores()).collect();
    let total_bw: f64 = m.nodes.iter().map(|n| n.mem_bw_gbps).sum();
    let gbps = stream_triad_gbps(&m, &all, None, &quick()).unwrap();
    assert!(gbps <= total_bw * 1.001, "{gbps} GB/s above the controllers' {total_bw}");
    assert!(gbps >= total_bw * 0.9, "{gbps} GB/s: 16 streaming threads should saturate {total_bw}");
    // One thread: MLP lines in flight per idle latency (docs/simulator.md, the core model).
    let one = stream_triad_gbps(&m, &[0], None, &quick()).unwrap();
    let bound = 8.0 * 64.0 / m.latency_ns[0][0];
    assert!(one <= bound * 1.001 && one >= bound * 0.9, "{one} GB/s, core-model bound {bound}");
}

#[test]
fn loaded_latency_rises_with_load_and_starts_at_the_idle_latency() {
    let m = Arc::new(presets::load("amd48").unwrap());
    let cpus: Vec<u32> = (0..6).collect();
    let light = loaded_point(&m, &cpus, 0, 640.0, &quick()).unwrap();
    let heavy = loaded_point(&m, &cpus, 0, 0.0, &quick()).unwrap();
    assert!((light.latency_ns - 70.9).abs() < 1.0, "light load: {} ns", light.latency_ns);
    assert!(heavy.latency_ns > 2.0 * light.latency_ns, "heavy load: {} ns", heavy.latency_ns);
    assert!(heavy.bandwidth_gbps <= m.nodes[0].mem_bw_gbps * 1.001);
    assert!(heavy.bandwidth_gbps > light.bandwidth_gbps);
}

#[test]
fn calibration_is_deterministic() {
    let m = presets::load("server-a-2n").unwrap();
    let a = serde_json::to_string(&calibrate(&m, &quick()).unwrap()).unwrap();
    let b = serde_json::to_string(&calibrate(&m, &quick()).unwrap()).unwrap();
    assert_eq!(a, b);
}
