//! Tests of the DAMON sampler on sysfs trees in `tests/fixtures/damon` and a recording fake.

use super::*;
use std::path::PathBuf;

fn fixture(name: &str) -> FsRoot {
    FsRoot::at(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/damon").join(name))
}

#[test]
fn the_development_hosts_own_kdamond_makes_it_busy() {
    // Verbatim from this project's development host (kernel 6.18): a paddr kdamond with
    // a pageout scheme, running since boot.
    let e = check_damon(&fixture("host-busy")).unwrap_err();
    assert!(e.starts_with("busy: kdamond 0 (pid 77, operations paddr) is on, started by someone else"), "{e}");
    let mut ctl = RecordingDamon::default();
    let Err(ObserveError::Unavailable { sampler: "damon", reason }) =
        DamonObserver::start(fixture("host-busy"), &mut ctl, 42, &DamonConfig::for_period_ms(100)).map(|_| ())
    else {
        panic!("started on a busy DAMON")
    };
    assert!(reason.starts_with("busy:"), "{reason}");
    assert!(ctl.writes.is_empty(), "wrote to a busy DAMON: {:?}", ctl.writes);
}

#[test]
fn absent_and_configured_but_off_are_refused() {
    let e = check_damon(&fixture("absent")).unwrap_err();
    assert!(e.starts_with("absent: /sys/kernel/mm/damon/admin does not exist"), "{e}");
    let e = check_damon(&fixture("configured-off")).unwrap_err();
    assert!(e.starts_with("in use: 1 kdamond is configured by someone else (off)"), "{e}");
    check_damon(&fixture("free")).unwrap();
}

#[test]
fn start_writes_the_documented_sequence_and_drop_removes_the_kdamond() {
    let mut ctl = RecordingDamon::default();
    let cfg = DamonConfig::for_period_ms(100);
    {
        let o = DamonObserver::start(fixture("free"), &mut ctl, 4242, &cfg).unwrap();
        drop(o);
    }
    let w: Vec<String> = ctl.writes.iter().map(|(f, v)| format!("{f}={v}")).collect();
    let c = "kdamonds/0/contexts/0";
    let want = [
        "kdamonds/nr_kdamonds=1".to_string(),
        "kdamonds/0/contexts/nr_contexts=1".into(),
        format!("{c}/operations=vaddr"),
        format!("{c}/monitoring_attrs/intervals/sample_us=5000"),
        format!("{c}/monitoring_attrs/intervals/aggr_us=100000"),
        format!("{c}/monitoring_attrs/intervals/update_us=1000000"),
        format!("{c}/monitoring_attrs/nr_regions/min=10"),
        format!("{c}/monitoring_attrs/nr_regions/max=1000"),
        format!("{c}/targets/nr_targets=1"),
        format!("{c}/targets/0/pid_target=4242"),
        format!("{c}/schemes/nr_schemes=1"),
        format!("{c}/schemes/0/action=stat"),
        format!("{c}/schemes/0/access_pattern/sz/min=0"),
        format!("{c}/schemes/0/access_pattern/sz/max=18446744073709551615"),
        format!("{c}/schemes/0/access_pattern/nr_accesses/min=0"),
        format!("{c}/schemes/0/access_pattern/nr_accesses/max=4294967295"),
        format!("{c}/schemes/0/access_pattern/age/min=0"),
        format!("{c}/schemes/0/access_pattern/age/max=4294967295"),
        "kdamonds/0/state=on".into(),
        "kdamonds/0/state=off".into(),
        "kdamonds/nr_kdamonds=0".into(),
    ];
    assert_eq!(w, want);
}

#[test]
fn a_failed_setup_removes_what_it_made_and_names_the_file() {
    let mut ctl = RecordingDamon {
        fail: vec![("kdamonds/0/contexts/0/operations".into(), "writing \"vaddr\": Invalid argument (os error 22)".into())],
        ..Default::default()
    };
    let r = DamonObserver::start(fixture("free"), &mut ctl, 7, &DamonConfig::for_period_ms(100)).map(|_| ());
    let Err(ObserveError::Unavailable { reason, .. }) = r else { panic!("{r:?}") };
    assert!(reason.contains("Invalid argument") && reason.contains("CONFIG_DAMON_VADDR"), "{reason}");
    let tail: Vec<&str> =
        ctl.writes.iter().rev().take(2).map(|(f, v)| if f.ends_with("state") { v.as_str() } else { f.as_str() }).collect();
    assert_eq!(tail, ["kdamonds/nr_kdamonds", "off"]);
    assert_eq!(ctl.writes.last().unwrap().1, "0");
    // Failing at the very first write: nothing was created, nothing to remove.
    let mut ctl = RecordingDamon { fail: vec![("kdamonds/nr_kdamonds".into(), "EBUSY".into())], ..Default::default() };
    assert!(DamonObserver::start(fixture("free"), &mut ctl, 7, &DamonConfig::for_period_ms(100)).is_err());
    assert_eq!(ctl.writes.len(), 1);
}

#[test]
fn a_kernel_without_vaddr_operations_is_refused_after_the_context_is_made() {
    // The development host's 6.18 (seen 2026-12-01): DAMON free, and a new context lists
    // `paddr` alone in `avail_operations`; the kernel took "vaddr" and answered EINVAL
    // only to `on`. The fixture is a free DAMON with that context's file in place.
    let mut ctl = RecordingDamon::default();
    let r = DamonObserver::start(fixture("free-paddr-only"), &mut ctl, 7, &DamonConfig::for_period_ms(100)).map(|_| ());
    let Err(ObserveError::Unavailable { sampler: "damon", reason }) = r else { panic!("{r:?}") };
    assert!(reason.starts_with("no vaddr: this kernel's DAMON monitors no process's address space"), "{reason}");
    assert!(reason.contains("lists \"paddr\"") && reason.contains("CONFIG_DAMON_VADDR"), "{reason}");
    let w: Vec<String> = ctl.writes.iter().map(|(f, v)| format!("{f}={v}")).collect();
    assert_eq!(w, ["kdamonds/nr_kdamonds=1", "kdamonds/0/contexts/nr_contexts=1", "kdamonds/0/state=off", "kdamonds/nr_kdamonds=0"]);
}

#[test]
fn poll_reads_the_tried_regions_and_counts_them() {
    let mut ctl = RecordingDamon::default();
    // "running" is a tree where kdamond 0 is ours (start is checked on "free").
    let mut o = DamonObserver::start(fixture("free"), &mut ctl, 9, &DamonConfig::for_period_ms(100)).unwrap();
    o.root = fixture("running");
    let mut out = Vec::new();
    o.poll(&mut out).unwrap();
    assert!(out.is_empty(), "DAMON names no thread: no observation");
    let r = o.regions();
    assert_eq!(r.len(), 3);
    assert_eq!(r[0], DamonRegion { start: 0x5555_5555_4000, end: 0x5555_5557_5000, nr_accesses: 0, age: 12 });
    assert_eq!(r[1], DamonRegion { start: 0x7f00_0000_0000, end: 0x7f00_0400_0000, nr_accesses: 20, age: 3 });
    let c: std::collections::BTreeMap<_, _> = o.counters().into_iter().collect();
    assert_eq!(c["updates"], 1);
    assert_eq!(c["regions"], 3);
    assert_eq!(c["regions_accessed"], 2);
    assert_eq!(c["bytes_accessed"], 0x400_0000 + 0x21000);
    assert_eq!(c["max_nr_accesses"], 20);
    drop(o);
    assert!(ctl.writes.iter().any(|(f, v)| f == "kdamonds/0/state" && v == "update_schemes_tried_regions"));
    assert_eq!(ctl.writes.last().unwrap(), &("kdamonds/nr_kdamonds".to_string(), "0".to_string()));
}

#[test]
fn a_kdamond_the_kernel_stopped_ends_quietly_a_failed_update_does_not() {
    let mut ctl = RecordingDamon::default();
    let mut o = DamonObserver::start(fixture("free"), &mut ctl, 9, &DamonConfig::for_period_ms(100)).unwrap();
    // Target exited: the kernel turned the kdamond off; the update write fails.
    o.root = fixture("stopped");
    o.ctl.fail.push(("kdamonds/0/state".into(), "Invalid argument (os error 22)".into()));
    o.poll(&mut Vec::new()).unwrap();
    assert_eq!(o.counters().iter().find(|c| c.0 == "stopped_by_kernel").unwrap().1, 1);
    // Still running, update refused: an error naming the kernel's answer.
    let mut ctl2 = RecordingDamon::default();
    let mut o2 = DamonObserver::start(fixture("free"), &mut ctl2, 9, &DamonConfig::for_period_ms(100)).unwrap();
    o2.root = fixture("running");
    o2.ctl.fail.push(("kdamonds/0/state".into(), "Device or resource busy (os error 16)".into()));
    let e = o2.poll(&mut Vec::new()).unwrap_err();
    assert_eq!(e.to_string(), "damon: Device or resource busy (os error 16)");
}

/// Trees copied verbatim from a real Linux 6.12 kdamond (Debian bookworm's
/// 6.12.107+deb12-amd64 in the 2-node qemu guest; docs/live.md, "The DAMON sampler").
#[test]
fn a_real_6_12_kdamond_on_a_hot_and_cold_program() {
    // guest/src/hot_cold.c with 64 MiB areas (hot at 0x7fa683f61000, cold one page after
    // it; proc/166/maps), monitored as numalab sets it up, `update_schemes_tried_regions`
    // written by hand 4 s after `on`.
    let root = fixture("guest-6.12-running");
    let r = read_tried_regions(&root, 0).unwrap();
    assert_eq!(r.len(), 12);
    let (hot, cold, len) = (0x7fa6_83f6_1000_u64, 0x7fa6_87f6_2000_u64, 64 << 20);
    // The hot area but its last 17 pages is one region, found accessed at every check
    // (20 = aggr_us / sample_us).
    assert_eq!(r[9], DamonRegion { start: hot, end: hot + len - 17 * 4096, nr_accesses: 20, age: 2 });
    // The cold area, written once 4 s before, is in the next region, never found accessed
    // for 29 aggregation intervals; so are the hot area's last 17 pages, the gap page and
    // the libraries' data after it: a region is checked at one sampled page, so a small
    // hot part of a mostly cold region reads as cold.
    assert_eq!((r[10].start, r[10].nr_accesses, r[10].age), (hot + len - 17 * 4096, 0, 29));
    assert!(r[10].end >= cold + len, "{:?}", r[10]);
    // The first nine regions cover the program's image, the gap up to its heap and the
    // heap: vaddr monitors everything but the two largest unmapped gaps.
    let total: u64 = r.iter().map(DamonRegion::bytes).sum();
    let said: u64 =
        root.read(&format!("{ADMIN}/kdamonds/0/contexts/0/schemes/0/tried_regions/total_bytes")).unwrap().1.trim().parse().unwrap();
    assert_eq!(total, said);
    assert!(total > 12 * len, "{total}");
}

#[test]
fn real_6_12_trees_of_a_busy_and_a_stopped_kdamond_are_refused() {
    // Someone else's paddr kdamond, on.
    let e = check_damon(&fixture("guest-6.12-busy")).unwrap_err();
    assert!(e.starts_with("busy: kdamond 0 (pid 332, operations paddr) is on"), "{e}");
    // A vaddr kdamond whose target exited: the kernel turned it off (pid -1) and left it
    // configured, so it is another user's configuration.
    let e = check_damon(&fixture("guest-6.12-stopped")).unwrap_err();
    assert!(e.starts_with("in use: 1 kdamond is configured by someone else (off)"), "{e}");
}

#[test]
fn an_update_with_no_region_keeps_the_last_view() {
    let mut ctl = RecordingDamon::default();
    let mut o = DamonObserver::start(fixture("free"), &mut ctl, 166, &DamonConfig::for_period_ms(100)).unwrap();
    o.root = fixture("guest-6.12-running");
    o.poll(&mut Vec::new()).unwrap();
    assert_eq!(o.regions().len(), 12);
    // The update's regions go to the engine once (region heat), with 100 ms / 5 ms checks.
    let mut heat = Vec::new();
    o.take_regions(&mut heat);
    assert_eq!(heat.len(), 12);
    assert_eq!(
        heat[9],
        RegionAccess { start: 0x7fa6_83f6_1000, end: 0x7fa6_83f6_1000 + (64 << 20) - 17 * 4096, nr_accesses: 20, max_accesses: 20, age: 2 }
    );
    heat.clear();
    o.take_regions(&mut heat);
    assert!(heat.is_empty(), "handed out twice");
    // The real tree of a stopped kdamond whose last update found nothing: `tried_regions/`
    // holds only `total_bytes` (0).
    o.root = fixture("guest-6.12-stopped");
    o.poll(&mut Vec::new()).unwrap();
    assert_eq!(o.regions().len(), 12, "the regions of the run were dropped");
    o.take_regions(&mut heat);
    assert!(heat.is_empty(), "an empty update is no new heat");
    let c: std::collections::BTreeMap<_, _> = o.counters().into_iter().collect();
    assert_eq!((c["updates"], c["empty_updates"], c["regions"]), (2, 1, 12));
}

#[test]
fn an_update_read_after_the_target_exited_keeps_the_last_view() {
    let mut ctl = RecordingDamon::default();
    let mut o = DamonObserver::start(fixture("free"), &mut ctl, 166, &DamonConfig::for_period_ms(100)).unwrap();
    o.root = fixture("guest-6.12-running");
    o.poll(&mut Vec::new()).unwrap();
    let before = o.regions().to_vec();
    let mut heat = Vec::new();
    o.take_regions(&mut heat);
    heat.clear();
    // The same non-empty tree, read once the target is gone: not taken.
    o.ctl.exited = true;
    o.poll(&mut Vec::new()).unwrap();
    assert_eq!(o.regions(), &before[..]);
    o.take_regions(&mut heat);
    assert!(heat.is_empty(), "an update at exit is no new heat");
    let c: std::collections::BTreeMap<_, _> = o.counters().into_iter().collect();
    assert_eq!((c["updates"], c["empty_updates"], c["exit_updates"]), (2, 0, 1));
}

#[test]
fn a_target_is_exited_when_its_stat_is_gone_or_a_zombie() {
    let dir = tempfile::tempdir().unwrap();
    let root = FsRoot::at(dir.path());
    std::fs::create_dir_all(dir.path().join("proc/10")).unwrap();
    std::fs::write(dir.path().join("proc/10/stat"), "10 (a (b) c) S 1 10 10 0 -1\n").unwrap();
    std::fs::create_dir_all(dir.path().join("proc/11")).unwrap();
    std::fs::write(dir.path().join("proc/11/stat"), "11 (hot_cold) Z 1 11 11 0 -1\n").unwrap();
    let ctl = SysfsDamon { root };
    assert!(!ctl.target_exited(10), "running, with parentheses in its name");
    assert!(ctl.target_exited(11), "a zombie");
    assert!(ctl.target_exited(12), "gone");
}

#[test]
fn a_malformed_region_is_an_error_naming_the_file() {
    let e = read_tried_regions(&fixture("malformed"), 0).unwrap_err();
    assert!(e.contains("tried_regions/1/end") && e.contains("not a number"), "{e}");
}
