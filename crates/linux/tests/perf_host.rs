//! perf_event_open on this machine: software events count; hardware events are reported
//! unsupported (never 0) where no core PMU exists, as on the project's VMs.

use numalab_core::profile::EventStatus;
use numalab_linux::perf::classify::Privilege;
use numalab_linux::perf::counters::{probe, CounterSet, Group, OpenOpts, Place, SetReading};
use numalab_linux::perf::encoding::encode;
use std::path::Path;

fn ids(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

/// A core PMU is registered under one of these names when the CPU has counters.
fn has_core_pmu() -> bool {
    ["cpu", "cpu_core", "armv8_pmuv3_0"].iter().any(|p| Path::new("/sys/bus/event_source/devices").join(p).exists())
}

#[test]
fn software_events_probe_ok() {
    let p = probe(
        &ids(&[
            "sw.task_clock",
            "sw.page_faults",
            "sw.page_faults.minor",
            "sw.page_faults.major",
            "sw.context_switches",
            "sw.cpu_migrations",
        ]),
        Place::Thread(0),
        Privilege::default(),
    );
    for e in &p {
        assert!(e.problem.is_none(), "{}: {:?}", e.id, e.problem);
    }
}

#[test]
fn hardware_events_without_a_pmu_are_unsupported_with_a_reason() {
    let p = probe(
        &ids(&["cpu.cycles", "cpu.instructions", "llc.read.miss", "node.read.remote", "node.write.remote"]),
        Place::Thread(0),
        Privilege::default(),
    );
    for e in &p {
        if has_core_pmu() {
            // With a PMU the event opens, or the model table lacks it, or privilege is missing.
            if let Some(c) = &e.problem {
                assert!(matches!(c.status, EventStatus::Unsupported | EventStatus::Denied), "{}: {c:?}", e.id);
            }
        } else {
            let c = e.problem.as_ref().unwrap_or_else(|| panic!("{} opened without a core PMU", e.id));
            assert_eq!(c.status, EventStatus::Unsupported, "{}: {c:?}", e.id);
            assert!(c.reason.starts_with("ENOENT") || c.reason.starts_with("EOPNOTSUPP") || c.reason.starts_with("EINVAL"), "{}", c.reason);
        }
    }
}

#[test]
fn unknown_ids_are_unsupported_not_zero() {
    let p = probe(&ids(&["imc.read[0]"]), Place::Thread(0), Privilege::default());
    assert_eq!(p[0].problem.as_ref().unwrap().status, EventStatus::Unsupported);
    assert!(p[0].problem.as_ref().unwrap().reason.contains("uncore"));
}

#[test]
fn a_software_group_counts_this_threads_page_faults() {
    let events = ids(&["sw.page_faults", "sw.task_clock", "sw.context_switches"]);
    let encs = events.iter().map(|e| encode(e).unwrap()).collect();
    let mut set = CounterSet::new(events, encs, OpenOpts::default());
    set.add(Place::Thread(0)).unwrap();
    set.enable();
    const PAGES: usize = 2000;
    let mut v: Vec<u8> = Vec::with_capacity(PAGES * 4096);
    // SAFETY: writing within capacity of a u8 buffer, then setting the length to what was written.
    unsafe {
        for i in 0..PAGES {
            std::ptr::write_volatile(v.as_mut_ptr().add(i * 4096), 1);
        }
        v.set_len(PAGES * 4096);
    }
    set.disable();
    let SetReading::Values(t) = set.read() else { panic!("group not readable") };
    assert!(t[0].value >= PAGES as u64, "page faults {} < {PAGES}", t[0].value);
    assert!(t[0].value < PAGES as u64 * 3, "page faults {} implausibly high", t[0].value);
    assert!(t[1].value > 0, "task clock counted nothing");
    assert_eq!(t[0].enabled_ns, t[0].running_ns, "a software group is never multiplexed");
    assert!(t[0].enabled_ns > 0);
    drop(v);
}

#[test]
fn group_reads_map_values_by_id() {
    let encs = vec![encode("sw.context_switches").unwrap(), encode("sw.task_clock").unwrap()];
    let g = Group::open(&encs, Place::Thread(0), OpenOpts::default()).unwrap();
    g.enable().unwrap();
    std::thread::sleep(std::time::Duration::from_millis(20));
    g.disable().unwrap();
    let r = g.read().unwrap().unwrap();
    let vals = g.values(&r);
    assert_eq!(r.values.len(), 2);
    assert!(vals[0].unwrap() >= 1, "sleeping switches context");
    assert!(vals[1].unwrap() < 20_000_000, "task clock counts CPU time, not the 20 ms sleep");
    g.reset().unwrap();
    let r = g.read().unwrap().unwrap();
    assert_eq!(g.values(&r)[0], Some(0));
}
