//! Guest churn during a timed VM run (docs/vm.md, "Guest churn during the run"): processes of
//! the guest start and end while the workload runs, and a frame freed mid-run and taken by the
//! workload is placed again only when the queue reported its free.

use numalab_core::machine::presets;
use numalab_policy::decision::PlaceRequest;
use numalab_policy::testing::FakeSystem;
use numalab_policy::vm::FrameState;
use numalab_policy::DynPolicy;
use numalab_sim::vmrun::{run_one_vm, vm_scenario, VmPlacement, VmSetup, UNASSIGNED};
use numalab_sim::{Scenario, SimConfig};
use numalab_workload::{compile, presets as wp, CompileOptions};
use std::sync::Arc;

mod common;

const MIB: u64 = 1 << 20;

fn scenario(scale: f64) -> Scenario {
    let m = Arc::new(presets::load("server-a-4n").unwrap());
    let file = wp::load("stream-like").unwrap();
    let program = compile(&file, "stream-like", &m, &CompileOptions { threads: Some(12), scale }).unwrap();
    common::quiet_first_touch(m, program, SimConfig { tick_ms: 1.0, ..SimConfig::default() })
}

/// A freshly booted guest (no history) of 12 vCPUs on nodes {0, 1}, first-touch, whose
/// processes of 1 MiB (256 frames) start every 10 ms during the run, one alive at a time.
fn live(queue: &str) -> VmSetup {
    VmSetup::from_toml_str(&format!(
        "[[vm]]\nvcpus = 12\nmem_bytes = {}\nstatic_policy = \"first-touch\"\n[vm.guest]\nprocess_bytes = {MIB}\nconcurrency = 1\nduring_run = true\n[vm.queue]\n{queue}\n",
        256 * MIB
    ))
    .unwrap()
}

/// Per workload page: its frame's state before the allocation and the node it got; and the
/// policy's counters.
type Reuse = (Vec<(FrameState, u16)>, Vec<(&'static str, u64)>);

/// At run time 6 ms the first process (started at 0, on a random vCPU) has exited (at 5 ms):
/// its 256 frames are on top of the guest's free list. The workload then touches 256 pages
/// from thread 0 (CPU 0, node 0). For each: the frame's state before the allocation, and
/// the node the page gets.
fn reuse(queue: &str) -> Reuse {
    let s = scenario(0.002);
    let vms = live(queue);
    let (s2, p) = vm_scenario(&s, &vms).unwrap();
    let mut vp = VmPlacement::new(&s2.machine, &s2.program, &vms, p, 7).unwrap();
    assert_eq!(vp.frame_of_page(0), UNASSIGNED, "a live guest's pages get frames at their first touch");
    let mut view = FakeSystem::new(4, 8, 12, 1000, 1 << 20);
    for now_ms in [0, 6] {
        view.now_ns = now_ms * 1_000_000;
        vp.on_tick(&tick(view.now_ns), &view, &mut Vec::new());
    }
    let out = (0..256)
        .map(|page| {
            let pfn = vp.next_free_frame(0).unwrap();
            let before = vp.host().vms().next().unwrap().frame(pfn).unwrap();
            let mem = vp.host().memory().clone();
            let node = vp.place(&PlaceRequest { space: 0, thread: 0, cpu: 0, cpu_node: 0, page }, &mem).unwrap();
            assert_eq!(vp.frame_of_page(page), pfn, "the page took the top of the free list");
            (before, node)
        })
        .collect();
    (out, vp.counters())
}

fn tick(time_ns: u64) -> numalab_policy::decision::Tick {
    numalab_policy::decision::Tick {
        time_ns,
        interval_ns: 1_000_000,
        access_matrix: vec![vec![0; 4]; 4],
        write_matrix: vec![vec![0; 4]; 4],
        cache_refills: None,
        ipc: None,
        spaces: vec![],
    }
}

fn counter(c: &[(&'static str, u64)], k: &str) -> u64 {
    c.iter().find(|x| x.0 == k).map_or_else(|| panic!("no counter {k}: {c:?}"), |x| x.1)
}

#[test]
fn a_frame_freed_mid_run_is_placed_again_only_when_the_queue_reported_it() {
    use FrameState::{Backed, Unbacked};
    // Without the queue: every frame the process freed is still backed where its vCPU first
    // touched it, and the workload's page keeps that node.
    let (off, c) = reuse("enabled = false");
    assert_eq!((counter(&c, "vm_guest_starts"), counter(&c, "vm_guest_exits")), (1, 1), "one process started at 0 and exited at 5 ms");
    let stale = off[0].0;
    // The process drew a vCPU on node 1 (seed 7), so a stale frame is not where its toucher
    // (node 0) would place it.
    assert_eq!(stale, Backed(1), "reused frames were backed mid-run by the process");
    assert!(off.iter().all(|&(b, n)| b == stale && Backed(n) == b), "every reused frame keeps the process's node");
    // A queue of one entry delivers each free at once: every frame was unbacked and is placed
    // by its toucher, node 0.
    let (each, c) = reuse("capacity = 1\npartitions = 1");
    assert!(each.iter().all(|&(b, n)| b == Unbacked && n == 0), "{:?}", &each[..4]);
    assert!(counter(&c, "vm_guest_queue_delivery_ns") > 0, "the process's appends are delivered at once");
    // A queue that never fills: the frees are pending when the workload allocates, the newest
    // entry (the allocation) decides, and the frames keep their node.
    let (pending, _) = reuse("capacity = 1048576");
    assert_eq!(pending, off);
}

#[test]
fn timed_runs_with_churn_during_the_run_are_deterministic_and_count_the_processes() {
    // About 20 ms of run time at this scale: processes start at 0, 10 and 20 ms.
    let s = scenario(0.06);
    let r = run_one_vm(&s, &live("enabled = true"), 3).unwrap();
    let c = &r.policy_counters;
    assert!(c["vm_guest_starts"] >= 2 && c["vm_guest_exits"] >= 1, "{c:?}");
    assert_eq!(c["vm_guest_errors"], 0);
    assert_eq!(r.placed_pages + r.unplaced_pages + r.pages_freed_at_exit, s.program.total_pages);
    let again = run_one_vm(&s, &live("enabled = true"), 3).unwrap();
    assert_eq!((again.exec_time_s, &again.policy_counters), (r.exec_time_s, &r.policy_counters));
    // Without during_run no guest counters appear (the history-only runs are unchanged).
    let text = format!("[[vm]]\nvcpus = 12\nmem_bytes = {}\nstatic_policy = \"first-touch\"\n", 256 * MIB);
    let r0 = run_one_vm(&s, &VmSetup::from_toml_str(&text).unwrap(), 3).unwrap();
    assert!(!r0.policy_counters.contains_key("vm_guest_starts"));
}

#[test]
fn during_run_needs_processes_that_touch_memory() {
    let e = VmSetup::from_toml_str("[[vm]]\nvcpus = 2\nmem_bytes = 1048576\n[vm.guest]\nduring_run = true\n").unwrap();
    let s = scenario(0.002);
    let err = run_one_vm(&s, &e, 1).unwrap_err().to_string();
    assert!(err.contains("vm.guest.during_run"), "{err}");
}

/// A live process's queue operations run in time order with the workload's: at run start a
/// process of 256 frames begins its allocations on a queue of one partition of 4 entries,
/// each delivery holding the lock 100.8 µs (64 deliveries, 6.45 ms in all). The workload's
/// first allocation, at the same instant, waits for the one delivery under way, not for the
/// 63 the process has not begun (which a process run to its end at once would make it wait
/// out: 6.45 ms).
#[test]
fn a_workload_allocation_waits_only_for_the_delivery_under_way() {
    let s = scenario(0.002);
    // Two processes alive at once: the first lives 15 ms.
    let vms = VmSetup::from_toml_str(&format!(
        "[[vm]]\nvcpus = 12\nmem_bytes = {}\nstatic_policy = \"first-touch\"\n[vm.guest]\nprocess_bytes = {MIB}\nconcurrency = 2\nduring_run = true\n[vm.queue]\npartitions = 1\ncapacity = 4\ncall_cost_ns = 100000.0\n",
        256 * MIB
    ))
    .unwrap();
    let (s2, p) = vm_scenario(&s, &vms).unwrap();
    let mut vp = VmPlacement::new(&s2.machine, &s2.program, &vms, p, 7).unwrap();
    let view = FakeSystem::new(4, 8, 12, 1000, 1 << 20);
    vp.on_tick(&tick(0), &view, &mut Vec::new());
    let mem = vp.host().memory().clone();
    vp.place(&PlaceRequest { space: 0, thread: 0, cpu: 0, cpu_node: 0, page: 0 }, &mem).unwrap();
    assert_eq!(vp.take_place_cost_ns(), 100_800.0, "one delivery of 4 entries: 100 µs + 4 × 0.2 µs");
    assert_eq!(vp.queue_time().charged_wait_ns, 100_800.0);
    // By 9 ms the process's allocations are over: it holds its 256 frames (one start, no
    // skip), and its deliveries went on after the workload's append.
    let mut view = view;
    view.now_ns = 9_000_000;
    vp.on_tick(&tick(view.now_ns), &view, &mut Vec::new());
    let c = vp.counters();
    assert_eq!((counter(&c, "vm_guest_starts"), counter(&c, "vm_guest_starts_skipped")), (1, 0));
    let vm = vp.host().vms().next().unwrap();
    let backed = (0..(256 * MIB / 4096)).filter(|&pfn| matches!(vm.frame(pfn), Some(FrameState::Backed(_)))).count();
    assert_eq!(backed, 257, "the process's 256 frames and the workload's page");
}
