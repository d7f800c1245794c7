//! The hinting-fault library (docs/live.md, "The hinting-fault sampler") on the running
//! kernel: a C program (tests/fixtures/hint_target.c) doing file I/O on a buffer whose pages
//! the library keeps protecting gets no EFAULT, keeps its own SIGSEGV handler, and the agent
//! reads its first-access records. Needs a C compiler (skipped, saying so, without one).

use numalab_linux::act;
use numalab_linux::live::hint_sampler::{check_hint, HintConfig, HintObserver};
use numalab_linux::live::perf_sampler::monotonic_ns;
use numalab_linux::live::AccessObserver;
use std::path::Path;
use std::process::Command;

#[test]
fn a_program_under_the_library_keeps_its_system_calls_and_its_own_handler() {
    if let Err(why) = check_hint() {
        eprintln!("SKIPPED: the hinting-fault library: {why}");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let exe = dir.path().join("hint_target");
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/hint_target.c");
    match Command::new(std::env::var("CC").unwrap_or_else(|_| "cc".into())).args(["-O2", "-o"]).arg(&exe).arg(&src).status() {
        Ok(s) if s.success() => {}
        other => {
            eprintln!("SKIPPED: cannot compile {}: {other:?}", src.display());
            return;
        }
    }
    let cfg = HintConfig { period_ns: 20_000_000, max_pages: 256, min_mapping_bytes: 1 << 20, capacity: 1 << 14 };
    let ncpu = std::thread::available_parallelism().map_or(64, |n| n.get()).max(64);
    let (mut obs, env) = HintObserver::prepare(cfg, vec![Some(0); ncpu], monotonic_ns()).unwrap();
    let argv = [exe.clone().into_os_string(), dir.path().join("data").into_os_string()];
    let child = act::spawn(&argv, &[], &env).unwrap();
    let pid = child.pid() as i32;
    obs.close_child_fds();
    let mut seen = Vec::new();
    while !child.exited() {
        std::thread::sleep(std::time::Duration::from_millis(50));
        obs.poll(&mut seen).unwrap();
    }
    obs.poll(&mut seen).unwrap();
    let exit = child.wait().unwrap();
    let counters: std::collections::BTreeMap<_, _> = obs.counters().into_iter().collect();
    assert_eq!(exit.code, Some(0), "3 = a system call failed, 4 = its handler did not run; counters {counters:?}");
    assert!(counters["protect_rounds"] >= 10, "{counters:?}");
    assert!(counters["faults"] >= 100, "{counters:?}");
    assert!(counters["restored_for_system_calls"] >= 1, "the I/O met protected pages: {counters:?}");
    assert_eq!(counters["faults_passed_to_the_program"], 1, "its own fault, once: {counters:?}");
    assert_eq!(counters["dropped_ring_full"], 0);
    assert!(!seen.is_empty() && seen.iter().all(|o| o.tid == pid && o.addr % 4096 == 0), "records of its main thread");
    assert!(seen.iter().any(|o| o.write), "the touch loop writes");
}
