//! Workloads run inside VMs in the epoch simulator (docs/vm.md, "A workload inside VMs").

use numalab_core::machine::presets;
use numalab_core::Machine;
use numalab_policy::vm::{Host, StaticKind};
use numalab_sim::vmrun::{plan, run_many_vm, run_one_vm, static_kind, VmSetup, VmSetupError};
use numalab_sim::{run_one, RunMetrics, Scenario, SimConfig};
use numalab_workload::{compile, compile_spec, presets as wp, CompileOptions, WorkloadSpec};
use std::sync::Arc;

mod common;

fn scenario(machine: &str, workload: &str, threads: u32, scale: f64) -> Scenario {
    let m = Arc::new(presets::load(machine).unwrap());
    let file = wp::load(workload).unwrap();
    let program = compile(&file, workload, &m, &CompileOptions { threads: Some(threads), scale }).unwrap();
    common::quiet_first_touch(m, program, SimConfig::default())
}

fn setup(text: &str) -> VmSetup {
    VmSetup::from_toml_str(text).unwrap()
}

const MIB: u64 = 1 << 20;

/// Every page on exactly one node (none freed: one program), no node over capacity, and only
/// home nodes hold pages and issue accesses.
fn check_vm_run(r: &RunMetrics, m: &Machine, pages: u64, home: &[u16]) {
    assert_eq!(r.pages_per_node.iter().sum::<u64>() + r.pages_freed_at_exit, pages);
    for (n, &used) in r.pages_per_node.iter().enumerate() {
        assert!(used <= m.nodes[n].mem_bytes / 4096, "node {n} over capacity");
        if !home.contains(&(n as u16)) {
            assert_eq!(used, 0, "node {n} is not a home node but holds pages: {:?}", r.pages_per_node);
            assert_eq!(r.access_matrix[n].iter().sum::<u64>(), 0, "a CPU of node {n} ran a vCPU: {:?}", r.access_matrix);
        }
    }
    assert_eq!(r.thread_migrations, 0, "vCPUs are pinned");
}

/// server-a-4n: 4 nodes of 8 cores (CPUs 0–7 on node 0, 8–15 on node 1, …), 48 GiB each.
/// A 12-vCPU VM needs two nodes: home {0, 1}, vCPU v on CPU v (the v-th pCPU of the set in
/// (node, cpu) order). 12 threads run on vCPUs 0..12, so thread t runs on CPU t.
#[test]
fn vcpus_run_exactly_on_the_pcpus_of_the_home_node_selection() {
    let s = scenario("server-a-4n", "stream-like", 12, 0.002);
    let text = format!("[[vm]]\nvcpus = 12\nmem_bytes = {}\nstatic_policy = \"first-touch\"\n", 256 * MIB);
    let vms = setup(&text);
    let p = plan(&s.machine, &s.program, &vms).unwrap();
    assert_eq!(p.home_nodes, vec![vec![0, 1]]);
    assert_eq!(p.pins, vec![(0..12).collect::<Vec<u32>>()]);
    // The same answer as the host's own selection.
    let mut host = Host::new(s.machine.clone(), Default::default()).unwrap();
    let id = host.create_vm(vms.vm[0].clone()).unwrap();
    assert_eq!((0..12).map(|v| host.vm(id).unwrap().pin(v).unwrap()).collect::<Vec<_>>(), p.pins[0]);
    let q = p.pinned_program(&s.program);
    assert!(q.pinned);
    assert_eq!(q.initial_cpus, (0..12).collect::<Vec<u32>>());
    // Pages are the VM's first frames, in order.
    assert_eq!(p.frame_of_page, (0..s.program.total_pages).collect::<Vec<u64>>());

    let r = run_one_vm(&s, &vms, 3).unwrap();
    check_vm_run(&r, &s.machine, s.program.total_pages, &[0, 1]);
    assert_eq!(r.first_touch_faults, s.program.total_pages);
    // Threads 0–7 run on node 0, 8–11 on node 1: first-touch keeps the streams local.
    let from: Vec<u64> = r.access_matrix.iter().map(|row| row.iter().sum()).collect();
    assert!(from[0] > 0 && from[1] > 0 && from[2] == 0 && from[3] == 0, "{from:?}");
    assert!(r.local_access_ratio.unwrap() > 0.99, "{:?}", r.local_access_ratio);
}

/// Fewer vCPUs than threads: threads share vCPUs round robin (thread t on vCPU t mod 4).
/// A second VM would pack on node 1, but a single program goes in one VM.
#[test]
fn threads_share_vcpus_round_robin() {
    let s = scenario("server-a-4n", "stream-like", 6, 0.002);
    let vms = setup(&format!("[[vm]]\nvcpus = 4\nmem_bytes = {}\n", 64 * MIB));
    let p = plan(&s.machine, &s.program, &vms).unwrap();
    assert_eq!(p.home_nodes, vec![vec![0]]);
    assert_eq!(p.thread_vcpu, vec![(0, 0), (0, 1), (0, 2), (0, 3), (0, 0), (0, 1)]);
    assert_eq!(p.pinned_program(&s.program).initial_cpus, vec![0, 1, 2, 3, 0, 1]);
}

/// Round-4k interleaves guest frames over the home nodes at creation: page p of a VM on
/// {0, 1} lives on node p mod 2, so half the accesses of pinned streams are remote. Round-1g
/// puts the first GiB in 2 MiB extents rotating over {0, 1} (the first GiB is never one
/// 1 GiB extent), so a small workload's pages are spread in 512-page runs.
#[test]
fn eager_vm_layouts_back_pages_where_the_host_put_their_frames() {
    let s = scenario("server-a-4n", "stream-like", 12, 0.002);
    let base = format!("[[vm]]\nvcpus = 12\nmem_bytes = {}\n", 256 * MIB);
    let r4 = run_one_vm(&s, &setup(&format!("{base}static_policy = \"round-4k\"\n")), 1).unwrap();
    check_vm_run(&r4, &s.machine, s.program.total_pages, &[0, 1]);
    // Every page's first touch is a guest page fault (docs/vm.md, "A workload inside VMs"),
    // but no access placed a frame: the host backed them all at creation.
    assert_eq!(r4.first_touch_faults, s.program.total_pages);
    assert_eq!(r4.policy_counters["vm_access_placements"], 0, "every frame was backed at creation");
    let pages = s.program.total_pages;
    assert_eq!(r4.pages_per_node[..2], [pages.div_ceil(2), pages / 2]);
    assert!((r4.local_access_ratio.unwrap() - 0.5).abs() < 0.02, "{:?}", r4.local_access_ratio);

    let r1 = run_one_vm(&s, &setup(&format!("{base}static_policy = \"round-1g\"\n")), 1).unwrap();
    check_vm_run(&r1, &s.machine, pages, &[0, 1]);
    assert_eq!(r1.first_touch_faults, s.program.total_pages);
    assert_eq!(r1.policy_counters["vm_access_placements"], 0);
    assert!(pages > 512 && pages < 1024, "{pages}");
    assert_eq!(r1.pages_per_node[..2], [512, pages - 512], "frames 0–511 are the first 2 MiB extent, on node 0");
    // Same seed, same bytes.
    assert_eq!(r4, run_one_vm(&s, &setup(&format!("{base}static_policy = \"round-4k\"\n")), 1).unwrap());
}

/// A native run may use every node; the VM run of the same workload is confined to its
/// home nodes.
#[test]
fn a_vm_confines_a_workload_that_natively_spreads() {
    let s = scenario("server-a-4n", "stream-like", 8, 0.002);
    let native = run_one(&s, 1).unwrap();
    let vms = setup(&format!("[[vm]]\nvcpus = 8\nmem_bytes = {}\nstatic_policy = \"round-4k\"\n", 128 * MIB));
    let v = run_one_vm(&s, &vms, 1).unwrap();
    check_vm_run(&v, &s.machine, s.program.total_pages, &[0]);
    assert_eq!(v.local_access_ratio, Some(1.0), "one home node: round-4k over {{0}} is local");
    assert_eq!(native.pages_per_node.iter().filter(|&&x| x > 0).count(), 4, "scatter: thread t on node t mod 4");
}

/// Two VMs, one per process of a two-program mix: each packs on its own nodes, and each
/// program's pages and accesses stay on its VM's nodes.
#[test]
fn two_vms_one_per_process_of_a_mix() {
    let m = Arc::new(presets::load("server-a-4n").unwrap());
    let text = "mix = { name = \"two\", placement = \"compact\" }\nmember = [{ preset = \"stream-like\", copies = 2, threads = 8 }]\n";
    let spec = WorkloadSpec::parse(text, "test").unwrap();
    let program = compile_spec(&spec, "test", &m, &CompileOptions { threads: None, scale: 0.002 }).unwrap();
    let s = common::quiet_first_touch(m.clone(), program, SimConfig::default());
    let one = format!("[[vm]]\nvcpus = 8\nmem_bytes = {}\nstatic_policy = \"first-touch\"\n", 128 * MIB);
    let vms = setup(&format!("{one}{one}"));
    let p = plan(&m, &s.program, &vms).unwrap();
    assert_eq!(p.home_nodes, vec![vec![0], vec![1]]);
    assert_eq!(p.pins, vec![(0..8).collect::<Vec<u32>>(), (8..16).collect::<Vec<u32>>()]);
    assert_eq!(p.space_vm, vec![0, 1]);
    // Each VM's pages start at its guest frame 0.
    let second = s.program.members[1].first_page as usize;
    assert_eq!((p.frame_of_page[0], p.frame_of_page[second]), (0, 0));
    let runs = run_many_vm(&s, &vms, 5, 2, &|| ()).unwrap();
    for r in &runs {
        check_vm_run(r, &m, s.program.total_pages, &[0, 1]);
        assert!(r.local_access_ratio.unwrap() > 0.99);
    }
    assert_ne!(runs[0].seed, runs[1].seed);
}

#[test]
fn impossible_setups_are_typed_errors() {
    let s = scenario("server-a-4n", "stream-like", 12, 0.002);
    let key = |r: Result<_, VmSetupError>| match r {
        Err(VmSetupError::Config { key, message }) => (key, message),
        Ok(_) => panic!("expected an error"),
        Err(e) => panic!("expected a config error, got {e:?}"),
    };
    // Larger than the machine (4 × 48 GiB).
    let (k, msg) = key(plan(&s.machine, &s.program, &setup("[[vm]]\nvcpus = 4\nmem_bytes = 207232172032\n")));
    assert_eq!(k, "vm[0].mem_bytes");
    assert_eq!(msg, "207232172032 bytes of guest memory exceed the machine's 206158430208 bytes");
    // Smaller than the machine but larger than what the host may use (a reserve of 12,000,000
    // of each node's 12,582,912 frames leaves 4 × 582,912): the host refuses it.
    let text = format!(
        "[hypervisor]\nnode_reserve_frames = 12000000\n[[vm]]\nvcpus = 4\nmem_bytes = {}\nstatic_policy = \"first-touch\"\n",
        10u64 << 30
    );
    let (k, msg) = key(plan(&s.machine, &s.program, &setup(&text)));
    assert_eq!(k, "vm[0]");
    assert_eq!(msg, "vm needs 2621440 pages of 4096 bytes but the machine has only 2331648 free pages on its memory nodes");
    // More vCPUs than pCPUs: no packing, refused.
    let (k, msg) = key(plan(&s.machine, &s.program, &setup(&format!("[[vm]]\nvcpus = 40\nmem_bytes = {}\n", 256 * MIB))));
    assert_eq!(k, "vm[0]");
    assert!(msg.contains("40 vCPUs") && msg.contains("vcpu_scheduler = \"credit\""), "{msg}");
    // Too little guest memory for the workload.
    let (k, msg) = key(plan(&s.machine, &s.program, &setup(&format!("[[vm]]\nvcpus = 12\nmem_bytes = {}\n", MIB))));
    assert_eq!(k, "vm[0].mem_bytes");
    assert!(msg.contains("has 256 pages of RAM"), "{msg}");
    // Two VMs for one program.
    let one = format!("[[vm]]\nvcpus = 2\nmem_bytes = {}\n", 256 * MIB);
    let (k, msg) = key(plan(&s.machine, &s.program, &setup(&format!("{one}{one}"))));
    assert_eq!(k, "vm");
    assert!(msg.contains("2 [[vm]] tables for a workload of 1 process(es)"), "{msg}");
    // No VM.
    assert_eq!(key(plan(&s.machine, &s.program, &VmSetup::default())).0, "vm");
    // Unknown keys and policies.
    let e = VmSetup::from_toml_str("[[vm]]\nvcpu = 2\n").unwrap_err();
    assert!(e.to_string().contains("unknown field `vcpu`"), "{e}");
    let e = VmSetup::from_toml_str("[[vm]]\nstatic_policy = \"linux\"\n").unwrap_err();
    assert!(e.to_string().contains("unknown variant `linux`"), "{e}");
    assert_eq!(static_kind("round-1g").unwrap(), StaticKind::Round1G);
    let e = static_kind("autonuma").unwrap_err();
    assert_eq!(e.to_string(), "vm setup 'policy': unknown vm policy 'autonuma': a vm runs first-touch, first-touch+queue, first-touch-no-queue, round-4k or round-1g, each optionally with +carrefour");
    // A workload region with an explicit home node (`home = 1` in a workload file).
    let mut program = (*s.program).clone();
    program.regions[0].home = Some(numalab_workload::program::HomeRule::Node(1));
    let (k, msg) = key(plan(&s.machine, &program, &setup(&format!("[[vm]]\nvcpus = 12\nmem_bytes = {}\n", 256 * MIB))));
    assert_eq!(k, "vm");
    assert!(msg.contains("explicit home node"), "{msg}");
}

/// A guest that ran 64 processes of 1 MiB (12 at a time, on random vCPUs) before a 12-thread
/// stream-like run on server-a-4n (home nodes {0, 1}).
fn churned(queue: &str) -> (Scenario, VmSetup) {
    let s = scenario("server-a-4n", "stream-like", 12, 0.002);
    let text = format!(
        "[[vm]]\nvcpus = 12\nmem_bytes = {}\nstatic_policy = \"first-touch\"\n[vm.guest]\nprocesses = 64\nprocess_bytes = {}\n[vm.queue]\n{queue}\n",
        256 * MIB,
        MIB
    );
    (s, setup(&text))
}

/// The frame of each workload page before the guest allocates it, and the node the page gets
/// when a vCPU on node 1 (thread 11, CPU 11) touches it.
fn placements(queue: &str) -> Vec<(numalab_policy::vm::FrameState, u16)> {
    use numalab_policy::{decision::PlaceRequest, DynPolicy};
    let (s, vms) = churned(queue);
    let (s2, p) = numalab_sim::vmrun::vm_scenario(&s, &vms).unwrap();
    let mut vp = numalab_sim::vmrun::VmPlacement::new(&s2.machine, &s2.program, &vms, p, 7).unwrap();
    (0..s2.program.total_pages)
        .map(|page| {
            let pfn = vp.frame_of_page(page);
            let before = vp.host().vms().next().unwrap().frame(pfn).unwrap();
            let mem = vp.host().memory().clone();
            let req = PlaceRequest { space: 0, thread: 11, cpu: 11, cpu_node: 1, page };
            (before, vp.place(&req, &mem).unwrap())
        })
        .collect()
}

#[test]
fn a_reused_frame_is_placed_again_only_when_the_queue_reported_it() {
    use numalab_policy::vm::FrameState::{Backed, Unbacked};
    // Without the queue the hypervisor never hears of the frees: every reused frame keeps the
    // node of the vCPU that first touched it since boot, some of them node 0.
    let off = placements("enabled = false");
    let reused = off.iter().filter(|(b, _)| matches!(b, Backed(_))).count();
    assert!(reused > 0, "the workload reuses frames the guest's processes freed");
    for (before, node) in &off {
        match before {
            Backed(n) => assert_eq!(node, n, "a frame the queue did not report stays where it was"),
            _ => assert_eq!(*node, 1, "a frame never touched is placed at its first touch"),
        }
    }
    assert!(off.iter().any(|&(_, n)| n == 0), "some reused frames were first touched on node 0");
    // A queue of one entry delivers every free as it happens: every freed frame was unbacked,
    // so every page is placed again by its toucher (node 1).
    let each = placements("capacity = 1\npartitions = 1");
    assert!(each.iter().all(|&(b, n)| b == Unbacked && n == 1), "{:?}", &each[..4]);
    // A queue that never fills before the workload: the frees are still pending when the
    // workload allocates the frames, so the newest entry (the allocation) decides and the
    // frames keep their old nodes; a frame is placed again exactly when it was unbacked.
    let pending = placements("capacity = 1048576");
    assert_eq!(pending.iter().filter(|(b, _)| matches!(b, Backed(_))).count(), reused);
    for (before, node) in &pending {
        match before {
            Backed(n) => assert_eq!(node, n),
            _ => assert_eq!(*node, 1),
        }
    }
}

/// The workload starts after the guest history's last delivery. With one partition and a
/// delivery of 100.8 µs every 4 entries, each process start and exit holds the lock 6.45 ms,
/// so the history's lock falls behind its 10 ms process period, and the processes still alive
/// at its end exit together (12 exits: 77 ms more of deliveries). A run started one period
/// after those exits began would make the workload's first allocation wait out the backlog
/// (179 ms before the fix).
#[test]
fn the_workload_never_waits_for_the_history_s_deliveries() {
    use numalab_policy::{decision::PlaceRequest, DynPolicy};
    let (s, vms) = churned("partitions = 1\ncapacity = 4\ncall_cost_ns = 100000.0");
    let (s2, p) = numalab_sim::vmrun::vm_scenario(&s, &vms).unwrap();
    let mut vp = numalab_sim::vmrun::VmPlacement::new(&s2.machine, &s2.program, &vms, p, 7).unwrap();
    let history = vp.queue_time();
    assert!(history.history_wait_ns > 1e7, "the last exits contend for the lock: {history:?}");
    let mem = vp.host().memory().clone();
    for page in 0..s2.program.total_pages {
        let req = PlaceRequest { space: 0, thread: 11, cpu: 11, cpu_node: 1, page };
        vp.place(&req, &mem).unwrap();
        let cost_ns = vp.take_place_cost_ns();
        // 4 allocations fill the partition: the 4th pays one delivery, the others nothing.
        let expected_ns = if page % 4 == 3 { 100_000.0 + 4.0 * 200.0 } else { 0.0 };
        assert_eq!(cost_ns, expected_ns, "page {page}");
    }
    assert_eq!(vp.queue_time().charged_wait_ns, 0.0);
}

#[test]
fn timed_runs_show_stale_first_touch_without_the_queue_and_charge_it_with() {
    let (s, off) = churned("enabled = false");
    let r_off = run_one_vm(&s, &off, 3).unwrap();
    let (_, each) = churned("capacity = 1\npartitions = 1");
    let r_each = run_one_vm(&s, &each, 3).unwrap();
    let fresh = setup(&format!("[[vm]]\nvcpus = 12\nmem_bytes = {}\nstatic_policy = \"first-touch\"\n", 256 * MIB));
    let r_fresh = run_one_vm(&s, &fresh, 3).unwrap();
    let local = |r: &RunMetrics| r.local_access_ratio.unwrap();
    assert!(local(&r_off) < local(&r_fresh) - 0.05, "stale frames: {} vs fresh {}", local(&r_off), local(&r_fresh));
    assert!(local(&r_each) > 0.99, "every reused frame placed again: {}", local(&r_each));
    assert!(r_each.policy_counters["vm_frames_unbacked"] > 0);
    // Capacity 1: every append is delivered at once, in the history (not charged) and at
    // every first touch of the workload (charged to the toucher).
    let c = &r_each.policy_counters;
    assert!(c["vm_queue_history_delivery_ns"] > 0 && c["vm_queue_charged_delivery_ns"] > 0, "{c:?}");
    for k in ["vm_queue_history_wait_ns", "vm_queue_history_delivery_ns", "vm_queue_charged_wait_ns", "vm_queue_charged_delivery_ns"] {
        assert_eq!(r_off.policy_counters[k], 0, "{k}: no queue, no queue time");
    }
    // Same inputs and seed, same run.
    assert_eq!(run_one_vm(&s, &off, 3).unwrap().exec_time_s, r_off.exec_time_s);
}

#[test]
fn a_guest_history_larger_than_the_vm_is_refused() {
    let s = scenario("server-a-4n", "stream-like", 12, 0.002);
    let text =
        format!("[[vm]]\nvcpus = 12\nmem_bytes = {}\nstatic_policy = \"first-touch\"\n[vm.guest]\npreset = \"build-like\"\n", 256 * MIB);
    match plan(&s.machine, &s.program, &setup(&text)) {
        Err(VmSetupError::Config { key, message }) => {
            assert_eq!(key, "vm[0].guest");
            assert!(message.contains("do not fit"), "{message}");
        }
        other => panic!("expected a config error, got {other:?}"),
    }
}

#[test]
fn policy_names_force_the_queue_on_or_off() {
    let (_, vms) = churned("enabled = true");
    assert!(!vms.with_policy_name("first-touch-no-queue").unwrap().vm[0].queue.enabled);
    assert!(vms.with_policy_name("first-touch+queue").unwrap().vm[0].queue.enabled);
    assert_eq!(vms.with_policy_name("round-1g").unwrap().vm[0].static_policy, StaticKind::Round1G);
    let c = vms.with_policy_name("first-touch-no-queue+carrefour").unwrap();
    assert!(!c.vm[0].queue.enabled && c.hypervisor.carrefour.is_some(), "the queue setting and Carrefour together");
    assert!(vms.with_policy_name("first-touch+migrate").is_err());
}
