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

/// The agent's set (docs/live.md, "The agent chooses the protected pages"): once the agent
/// hands the library pages, the library protects exactly those of them that are eligible, in
/// runs of adjacent pages (one `mprotect` per run), and every fault it records is one of them.
/// The set asked for here: the first 256 pages of the program's 4 MiB buffer (eligible, one
/// run) and a page of its main stack (never eligible), asked again, six times, each time
/// after the library took the previous set and 40 ms later (the program uses a set in one
/// of its rounds: faults, or restores before its system calls on the buffer); then no more, and
/// the program must still finish. (A page in both the released and the protected set once
/// made its thread retry its access until the next set: the handler took the released slot
/// for it. This test catches that only when the last set lands in the second slot table.)
#[test]
fn the_library_protects_the_pages_the_agent_asks_for_and_no_others() {
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
    let pid = child.pid();
    obs.close_child_fds();
    // The buffer: the top 4 MiB of the anonymous rw-p mapping holding it (the program's own
    // page, mapped after it, may join the mapping from below); a page of its main stack.
    let (mut buf, mut stack) = (None, None);
    let mut seen = Vec::new();
    while (buf.is_none() || stack.is_none()) && !child.exited() {
        std::thread::sleep(std::time::Duration::from_millis(5));
        let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).unwrap_or_default();
        for line in maps.lines() {
            let f: Vec<&str> = line.split_whitespace().collect();
            let (lo, hi) = f[0].split_once('-').unwrap();
            let (lo, hi) = (u64::from_str_radix(lo, 16).unwrap(), u64::from_str_radix(hi, 16).unwrap());
            if f[1] == "rw-p" && f.len() == 5 && (4 << 20..(4 << 20) + (64 << 10)).contains(&(hi - lo)) {
                buf = Some(hi - (4 << 20));
            }
            if f.len() == 6 && f[5] == "[stack]" {
                stack = Some(hi - 4096);
            }
        }
    }
    let (buf, stack) = (buf.expect("the 4 MiB buffer in the program's maps"), stack.unwrap());
    // The library publishes the ranges it never protects: its helper thread's stack (the
    // stack pointer /proc shows while it sleeps) is one, the buffer is in none.
    let mut unwatchable = Vec::new();
    obs.unwatchable(&mut unwatchable);
    assert!(unwatchable.len() >= 2 && unwatchable.iter().all(|&(lo, hi)| lo < hi && lo % 4096 == 0), "{unwatchable:x?}");
    assert!(unwatchable.iter().all(|&(lo, hi)| hi <= buf || lo >= buf + (4 << 20)), "{unwatchable:x?}");
    // The helper publishes its thread id once it runs, which on a loaded machine can come
    // after the program's buffer is mapped: wait for it (up to 5 s).
    let mut helper = obs.helper_tid();
    for _ in 0..500 {
        if helper.is_some() || child.exited() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
        helper = obs.helper_tid();
    }
    let helper = helper.expect("the library's helper started");
    match std::fs::read_to_string(format!("/proc/{pid}/task/{helper}/syscall")) {
        Ok(text) if text.split_whitespace().count() >= 9 => {
            let sp = u64::from_str_radix(text.split_whitespace().nth(7).unwrap().trim_start_matches("0x"), 16).unwrap();
            assert!(unwatchable.iter().any(|&(lo, hi)| (lo..hi).contains(&sp)), "helper sp {sp:#x} in {unwatchable:x?}");
        }
        other => eprintln!("not checked: the helper's stack pointer ({other:?})"),
    }
    let mut set: Vec<u64> = (0..256).map(|p| buf + p * 4096).collect();
    set.push(stack);
    let counter = |o: &HintObserver, name: &str| o.counters().into_iter().find(|c| c.0 == name).unwrap().1;
    assert!(obs.arm(&set));
    // Records from before the library took the set (its own rotation) are left out.
    while counter(&obs, "pages_protected_for_the_agent") == 0 && !child.exited() {
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
    obs.poll(&mut seen).unwrap();
    seen.clear();
    let mut asked = 1;
    let mut asked_at = std::time::Instant::now();
    let give_up = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while !child.exited() {
        if std::time::Instant::now() > give_up {
            // SAFETY: killing the child this test started.
            unsafe { libc::kill(pid as i32, libc::SIGKILL) };
            panic!("the program did not finish: {:?}", obs.counters());
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
        obs.poll(&mut seen).unwrap();
        if asked < 6
            && counter(&obs, "sets_taken_from_the_agent") == asked
            && asked_at.elapsed() >= std::time::Duration::from_millis(40)
            && obs.arm(&set)
        {
            asked += 1;
            asked_at = std::time::Instant::now();
        }
    }
    obs.poll(&mut seen).unwrap();
    let exit = child.wait().unwrap();
    let counters: std::collections::BTreeMap<_, _> = obs.counters().into_iter().collect();
    assert_eq!(exit.code, Some(0), "counters {counters:?}");
    let runs = counters["mprotect_runs_for_the_agent"];
    assert!(runs >= 3 && runs <= asked, "{asked} sets asked: {counters:?}");
    assert_eq!(counters["pages_protected_for_the_agent"], 256 * runs, "one run of 256 pages per set: {counters:?}");
    assert_eq!(counters["agent_pages_not_eligible"], runs, "the stack page, once per set: {counters:?}");
    assert!(!seen.is_empty(), "the touch loop faults on the set: {counters:?}");
    let outside: Vec<_> = seen.iter().filter(|o| !(buf..buf + (256 << 12)).contains(&o.addr)).collect();
    assert!(outside.is_empty(), "faults outside the agent's set: {outside:?}");
}
