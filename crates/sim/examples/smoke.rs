use numalab_core::machine::presets;
use numalab_sim::{run_one, Scenario, SimConfig};
use numalab_workload::{compile, presets as wp, CompileOptions};
use std::sync::Arc;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let machine = Arc::new(presets::load(args.get(1).map(String::as_str).unwrap_or("server-a-4n")).unwrap());
    let wl = args.get(2).map(String::as_str).unwrap_or("stream-like");
    let scale: f64 = args.get(3).map(|s| s.parse().unwrap()).unwrap_or(0.01);
    let file = wp::load(wl).unwrap();
    let program = Arc::new(compile(&file, wl, &machine, &CompileOptions { threads: None, scale }).unwrap());
    for pol in ["first-touch", "round-4k", "round-1g"] {
        let s = Scenario {
            machine: machine.clone(),
            program: program.clone(),
            policy: numalab_policy::find(pol).unwrap(),
            policy_config: Default::default(),
            sim: SimConfig::default(),
        };
        let t = std::time::Instant::now();
        let r = run_one(&s, 1).unwrap();
        let el = t.elapsed().as_secs_f64();
        println!("{:?}", r.node_accesses);
        println!(
            "{pol:12} exec {:.6}s lar {:.3} imb {:?} icl {:?} acc {} ({:.1} M/s) ftf {} mig {:?}",
            r.exec_time_s,
            r.local_access_ratio.unwrap_or(0.0),
            r.node_imbalance.map(|x| x.round()),
            r.interconnect_load.map(|x| x.round()),
            r.accesses,
            r.accesses as f64 / el / 1e6,
            r.first_touch_faults,
            r.thread_migrations_by_cause
        );
    }
}
