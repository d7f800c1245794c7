//! Readers on verbatim kernel text captured from 1-, 2- and 4-node qemu guests
//! (`guest/numalab-guest.sh capture`) and from a 1-node host running Linux 6.18.

use numalab_core::Machine;
use numalab_linux::export::{direct_links, hops_from_direct, to_machine, ExportOptions};
use numalab_linux::procfs::numa_maps::{pages_per_node, parse_numa_maps, PageKind};
use numalab_linux::procfs::sched::parse_sched_numa;
use numalab_linux::procfs::settings::{cpu_facts, numa_balancing, numa_stat, perf_event_paranoid};
use numalab_linux::procfs::vmstat::parse_vmstat;
use numalab_linux::sampler::{target_pages, target_sched, threads};
use numalab_linux::{FsRoot, LinuxError, Topology};
use std::path::{Path, PathBuf};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures").join(name)
}

fn root(name: &str) -> FsRoot {
    FsRoot::at(fixture(name))
}

/// The numa_touch pid recorded by the capture.
fn target_pid() -> u32 {
    std::fs::read_to_string(fixture("guest-2n/target_pid")).unwrap().trim().parse().unwrap()
}

const MIB: u64 = 1 << 20;

#[test]
fn one_node_guest_topology() {
    let t = Topology::read(&root("guest-1n")).unwrap();
    assert_eq!(t.lists.online, vec![0]);
    assert_eq!(t.nodes.len(), 1);
    let n = &t.nodes[0];
    assert_eq!(n.cpus, vec![0, 1]);
    assert_eq!(n.distances, vec![10]);
    assert_eq!(n.mem_total_bytes, 981_472 * 1024);
    assert_eq!(n.mem_free_bytes, 904_124 * 1024);
    assert_eq!(n.meminfo["MemUsed"], 77_348 * 1024);
    assert_eq!(t.tier_of(0), Some(4));
    assert!(t.cpu_less_nodes().is_empty());
    assert_eq!(t.cpus.len(), 2);
    assert_eq!(t.cpus[0].package, Some(0));
}

#[test]
fn two_node_guest_topology_and_numastat() {
    let t = Topology::read(&root("guest-2n")).unwrap();
    assert_eq!(t.lists.online, vec![0, 1]);
    assert_eq!(t.lists.has_cpu, vec![0, 1]);
    assert_eq!(t.nodes[0].cpus, vec![0, 1]);
    assert_eq!(t.nodes[1].cpus, vec![2, 3]);
    assert_eq!(t.nodes[0].distances, vec![10, 21]);
    assert_eq!(t.nodes[1].distances, vec![21, 10]);
    assert_eq!(t.nodes[0].mem_total_bytes, 1_030_480 * 1024);
    let ns = &t.nodes[0].numastat;
    assert_eq!(ns["numa_hit"], 5845);
    assert_eq!(ns["interleave_hit"], 219);
    assert_eq!(ns["other_node"], 322);
    assert_eq!(t.nodes[1].numastat["numa_hit"], 4137);
    assert_eq!(t.node_of_cpu(3), Some(1));
}

#[test]
fn four_node_guest_has_a_cpu_less_node() {
    let t = Topology::read(&root("guest-4n")).unwrap();
    assert_eq!(t.lists.online, vec![0, 1, 2, 3]);
    assert_eq!(t.lists.has_cpu, vec![0, 1, 2]);
    assert_eq!(t.cpu_less_nodes(), vec![3]);
    assert_eq!(t.nodes[1].cpus, vec![2]);
    assert_eq!(t.nodes[3].cpus, Vec::<u32>::new());
    assert_eq!(t.nodes[3].distances, vec![17, 28, 28, 10]);
    assert_eq!(t.nodes[3].mem_total_bytes, 513_720 * 1024);
    assert_eq!(t.cpus[3].llc_bytes, Some(16 * MIB));
}

#[test]
fn export_loads_as_a_machine_one_node() {
    let t = Topology::read(&root("guest-1n")).unwrap();
    let e = to_machine(&t, &ExportOptions { name: "g1".into(), ..Default::default() }).unwrap();
    let m = Machine::from_toml_str(&e.toml, "export").unwrap();
    assert_eq!(m.nodes.len(), 1);
    assert_eq!(m.nodes[0].cores, 2);
    assert_eq!(m.nodes[0].mem_bytes, 981_472 * 1024);
    assert_eq!(m.latency_ns, vec![vec![80.0]]);
    assert_eq!(m.nodes[0].llc_bytes, 16 * MIB);
    assert!(e.toml.contains("# estimate: latency_ns"), "{}", e.toml);
    assert!(e.toml.contains("# estimate: clock_ghz: cpufreq is not readable"));
}

#[test]
fn export_two_nodes_is_fully_connected() {
    let t = Topology::read(&root("guest-2n")).unwrap();
    let e = to_machine(&t, &ExportOptions::default()).unwrap();
    let m = Machine::from_toml_str(&e.toml, "export").unwrap();
    assert_eq!(m.slit, vec![vec![10, 21], vec![21, 10]]);
    assert_eq!(m.hops, vec![vec![0, 1], vec![1, 0]]);
    assert_eq!(m.latency_ns, vec![vec![80.0, 168.0], vec![168.0, 80.0]]);
    assert_eq!(m.sockets, 1, "qemu reports one package");
    assert_eq!(m.nodes.iter().map(|n| n.cores).collect::<Vec<_>>(), vec![2, 2]);
    assert_eq!(m, e.machine);
}

#[test]
fn export_four_nodes_derives_hops_and_cpu_less_rows() {
    let t = Topology::read(&root("guest-4n")).unwrap();
    let e = to_machine(&t, &ExportOptions::default()).unwrap();
    let m = Machine::from_toml_str(&e.toml, "export").unwrap();
    // 1-3 (28) and 2-3 (28) are relayed by node 0 (12+17-10 = 19, 20+17-10 = 27 <= 28).
    assert_eq!(m.hops, vec![vec![0, 1, 1, 1], vec![1, 0, 1, 2], vec![1, 1, 0, 2], vec![1, 2, 2, 0]]);
    assert_eq!(m.latency_ns[3], vec![0.0; 4]);
    assert_eq!(m.latency_ns[1][2], 160.0);
    assert_eq!(m.nodes[3].cores, 0);
    assert_eq!(m.nodes[3].socket, 0);
    assert!(e.toml.contains("# estimate: nodes[3].tier: CPU-less node"));
}

#[test]
fn hop_rule_on_textbook_matrices() {
    // 8-node ring-like 10/16/22: 22 pairs are two hops.
    let slit = vec![vec![10, 16, 22], vec![16, 10, 16], vec![22, 16, 10]];
    let hops = hops_from_direct(&direct_links(&slit)).unwrap();
    assert_eq!(hops, vec![vec![0, 1, 2], vec![1, 0, 1], vec![2, 1, 0]]);
    // SNC 10/11/21: all direct.
    let slit = vec![vec![10, 11, 21, 21], vec![11, 10, 21, 21], vec![21, 21, 10, 11], vec![21, 21, 11, 10]];
    assert!(hops_from_direct(&direct_links(&slit)).unwrap().iter().flatten().all(|&h| h <= 1));
}

#[test]
fn numa_maps_every_field_kind_from_the_guest() {
    let pid = target_pid();
    let path = fixture(&format!("guest-2n/proc/{pid}/numa_maps"));
    let text = std::fs::read_to_string(&path).unwrap();
    let entries = parse_numa_maps(&text, &path).unwrap();
    assert_eq!(entries.len(), 29);
    assert!(entries[0].heap);
    assert_eq!(entries[0].pages_per_node.get(&1), Some(&5));
    let inter = entries.iter().find(|e| e.policy == "interleave:0-1").unwrap();
    assert_eq!((inter.pages_per_node[&0], inter.pages_per_node[&1], inter.anon), (512, 512, Some(1024)));
    let bind = entries.iter().find(|e| e.policy == "bind:1").unwrap();
    assert_eq!(bind.pages_per_node[&1], 512);
    assert!(entries.iter().any(|e| e.policy == "prefer:0" && e.pages_per_node[&0] == 256));
    let huge = entries.iter().find(|e| e.huge).unwrap();
    assert_eq!(huge.kind(), PageKind::Huge);
    assert_eq!(huge.kernel_page_bytes, Some(2 * MIB));
    assert_eq!(huge.file.as_deref(), Some("/anon_hugepage\\040(deleted)"));
    let bb = entries.iter().find(|e| e.file.as_deref() == Some("/bin/busybox")).unwrap();
    assert_eq!((bb.dirty, bb.mapmax, bb.active), (Some(484), Some(7), Some(424)));
    assert!(entries.iter().any(|e| e.stack));
    // A mapping with no resident page prints only address and policy.
    let empty = entries.iter().find(|e| e.start == 0x7f8c1c021000).unwrap();
    assert!(empty.pages_per_node.is_empty() && empty.kernel_page_bytes.is_none());

    // Totals computed independently from the fixture text (awk-style sum per kind).
    let pages = pages_per_node(&entries);
    assert_eq!(pages.len(), 2);
    assert_eq!((pages[0].anon_bytes, pages[0].file_bytes, pages[0].huge_bytes), (11_550_720, 3_170_304, 0));
    assert_eq!((pages[1].anon_bytes, pages[1].file_bytes, pages[1].huge_bytes), (8_445_952, 45_056, 4 * MIB));
    assert_eq!(pages[1].total_bytes, 8_445_952 + 45_056 + 4 * MIB);
}

#[test]
fn numa_maps_mapped_field_from_the_host() {
    let path = fixture("host-6.18/proc/1000/numa_maps");
    let text = std::fs::read_to_string(&path).unwrap();
    let entries = parse_numa_maps(&text, &path).unwrap();
    assert_eq!(entries[0].file.as_deref(), Some("/usr/bin/cat"));
    assert_eq!(entries[0].mapped, Some(2));
    assert_eq!(entries[0].kind(), PageKind::File);
    let libc = entries.iter().find(|e| e.mapped == Some(206)).unwrap();
    assert_eq!(libc.mapmax, Some(12));
}

#[test]
fn numa_maps_policy_kinds_of_newer_kernels() {
    // Lines in the format of mpol_to_str()/show_numa_map() for policies the 6.1 guest could
    // not produce (prefer many, weighted interleave, static flag, local, swap/writeback).
    let text = "\
7f0000000000 prefer (many):0-1 anon=3 dirty=3 N0=1 N1=2 kernelpagesize_kB=4
7f0000100000 weighted interleave:0-1 anon=4 dirty=4 N0=2 N1=2 kernelpagesize_kB=4
7f0000200000 bind=static:1 anon=1 dirty=1 swapcache=1 writeback=1 N1=1 kernelpagesize_kB=4
7f0000300000 local anon=2 dirty=2 active=1 N0=2 kernelpagesize_kB=4 future_field=7
";
    let e = parse_numa_maps(text, Path::new("t")).unwrap();
    assert_eq!(e[0].policy, "prefer (many):0-1");
    assert_eq!(e[0].pages_per_node[&1], 2);
    assert_eq!(e[1].policy, "weighted interleave:0-1");
    assert_eq!(e[2].policy, "bind=static:1");
    assert_eq!((e[2].swapcache, e[2].writeback), (Some(1), Some(1)));
    assert_eq!(e[3].policy, "local");
    assert_eq!(e[3].other["future_field"], "7");
}

#[test]
fn numa_maps_errors_name_file_line_and_field() {
    let err = parse_numa_maps(
        "7f00 default N0=1 kernelpagesize_kB=4\n7f01 default anon=x N0=1 kernelpagesize_kB=4\n",
        Path::new("/proc/9/numa_maps"),
    )
    .unwrap_err();
    assert_eq!(err.to_string(), "/proc/9/numa_maps:2: field `anon`: `x` is not an unsigned integer");
    let err = parse_numa_maps("zz default\n", Path::new("m")).unwrap_err();
    assert!(err.to_string().starts_with("m:1: field `address`"), "{err}");
    let err = parse_numa_maps("7f00 default N0=1\n", Path::new("m")).unwrap_err();
    assert!(err.to_string().contains("kernelpagesize_kB"), "{err}");
}

#[test]
fn sched_numa_statistics() {
    let pid = target_pid();
    let r = root("guest-2n");
    let s = target_sched(&r, pid).unwrap().unwrap();
    assert_eq!(s.numa_scan_seq, Some(1));
    assert_eq!(s.numa_preferred_nid, Some(-1));
    assert_eq!(s.current_node, Some(1));
    assert_eq!(s.numa_group_id, Some(0));
    assert_eq!(s.nr_migrations, Some(0));
    assert_eq!(s.faults.len(), 2);
    assert_eq!(s.faults[1].node, 1);
    let tids = threads(&r, pid);
    assert_eq!(tids.len(), 3);
    // A worker thread saw one page migrated by NUMA balancing.
    let migrated: Vec<i64> = tids
        .iter()
        .map(|t| {
            let p = fixture(&format!("guest-2n/proc/{pid}/task/{t}/sched"));
            parse_sched_numa(&std::fs::read_to_string(&p).unwrap(), &p).unwrap().unwrap().numa_pages_migrated.unwrap()
        })
        .collect();
    assert_eq!(migrated.iter().sum::<i64>(), 1);
    // Text without NUMA lines (kernel without NUMA balancing): None, not zeros.
    assert_eq!(parse_sched_numa("cat (5, #threads: 1)\nse.nr_migrations : 3\n", Path::new("s")).unwrap(), None);
    let err = parse_sched_numa("numa_preferred_nid : x\n", Path::new("/proc/1/sched")).unwrap_err();
    assert_eq!(err.to_string(), "/proc/1/sched:1: field `numa_preferred_nid`: `x` is not an integer");
}

#[test]
fn target_pages_from_the_guest_capture() {
    let pages = target_pages(&root("guest-2n"), target_pid()).unwrap().unwrap();
    // numa_touch placed 8 MiB on node 0 and 4 MiB on node 1 by first touch.
    assert!(pages[0].anon_bytes >= 8 * MIB && pages[1].anon_bytes >= 4 * MIB);
    assert_eq!(target_pages(&root("guest-2n"), 999_999).unwrap(), None);
}

#[test]
fn vmstat_numa_counters() {
    let p = fixture("guest-2n/proc/vmstat");
    let v = parse_vmstat(&std::fs::read_to_string(&p).unwrap(), &p).unwrap();
    assert_eq!(v["numa_hit"], 11_036);
    assert_eq!(v["numa_pages_migrated"], 8);
    assert_eq!(v["pgmigrate_success"], 8);
    assert_eq!(v["pgpromote_success"], 0);
    let p = fixture("guest-1n/proc/vmstat");
    let v = parse_vmstat(&std::fs::read_to_string(&p).unwrap(), &p).unwrap();
    assert_eq!(v["numa_hint_faults"], 0);
    assert_eq!(v["numa_interleave"], 644);
    let err = parse_vmstat("nr_free_pages 10\nnuma_hit -3\n", Path::new("/proc/vmstat")).unwrap_err();
    assert_eq!(err.to_string(), "/proc/vmstat:2: field `numa_hit`: `-3` is not an unsigned integer");
}

#[test]
fn kernel_settings_and_virtualization() {
    let r = root("guest-2n");
    assert_eq!(numa_balancing(&r).unwrap(), Some(1));
    assert_eq!(numa_balancing(&root("guest-1n")).unwrap(), Some(0));
    assert_eq!(numa_stat(&r).unwrap(), Some(1));
    assert_eq!(perf_event_paranoid(&r).unwrap(), Some(3));
    let f = cpu_facts(&r);
    assert!(f.virtualized);
    assert_eq!(f.model_name.as_deref(), Some("QEMU TCG CPU version 2.5+"));
    // Missing file: None (unsupported), not 0.
    assert_eq!(numa_balancing(&root("host-6.18")).unwrap(), None);
}

#[test]
fn sysfs_errors_name_the_file() {
    let dir = std::env::temp_dir().join(format!("numalab-linux-bad-{}", std::process::id()));
    let node = dir.join("sys/devices/system/node/node0");
    std::fs::create_dir_all(&node).unwrap();
    std::fs::write(dir.join("sys/devices/system/node/online"), "0\n").unwrap();
    std::fs::write(node.join("cpulist"), "0-1\n").unwrap();
    std::fs::write(node.join("meminfo"), "Node 0 MemTotal:  100 kB\nNode 0 MemFree:  12 MB\n").unwrap();
    std::fs::write(node.join("distance"), "10\n").unwrap();
    let err = Topology::read(&FsRoot::at(&dir)).unwrap_err();
    assert!(matches!(err, LinuxError::Parse { line: 2, .. }), "{err}");
    assert!(err.to_string().ends_with("node0/meminfo:2: field `MemFree`: unknown unit `MB`"), "{err}");
    std::fs::write(node.join("meminfo"), "Node 0 MemTotal:  100 kB\nNode 0 MemFree:  12 kB\n").unwrap();
    std::fs::write(node.join("cpulist"), "3-1\n").unwrap();
    let err = Topology::read(&FsRoot::at(&dir)).unwrap_err();
    assert!(err.to_string().ends_with("node0/cpulist:1: field `cpulist`: range `3-1` is descending"), "{err}");
    std::fs::write(node.join("cpulist"), "0-1\n").unwrap();
    std::fs::write(node.join("distance"), "10 20\n").unwrap();
    let err = Topology::read(&FsRoot::at(&dir)).unwrap_err();
    assert!(err.to_string().contains("2 distances for 1 online nodes"), "{err}");
    std::fs::remove_dir_all(&dir).ok();
    let err = Topology::read(&FsRoot::at("/nonexistent-numalab")).unwrap_err();
    assert!(err.is_not_found());
}
