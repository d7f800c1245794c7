//! Worked examples of VM mode (docs/vm.md): guest events scripted in, exact placements and
//! counters out.

use super::*;
use crate::policy::MemoryState;
use crate::statics::{FtFallback, Hole};
use numalab_core::machine::presets;
use numalab_core::{Machine, NodeId};
use std::sync::Arc;

const PAGE: u64 = 4096;

/// server-a-4n cut down: 4 nodes of 2 CPUs (node n has CPUs 2n, 2n+1) and `pages` frames.
fn machine(pages: u64) -> Arc<Machine> {
    let mut m = presets::load("server-a-4n").unwrap();
    for n in &mut m.nodes {
        n.cores = 2;
        n.mem_bytes = pages * PAGE;
    }
    Arc::new(m)
}

fn host(pages: u64) -> Host {
    Host::new(machine(pages), HypervisorConfig::default()).unwrap()
}

fn vm(vcpus: u32, frames: u64, kind: StaticKind) -> VmConfig {
    VmConfig { vcpus, mem_bytes: frames * PAGE, static_policy: kind, ..Default::default() }
}

fn at(vcpu: u32, pcpu: u32, pfn: u64) -> Access {
    Access { vcpu, pcpu, pfn }
}

/// Machine frames are conserved: free + backed by every VM = capacity, per node.
fn assert_conserved(h: &Host) {
    let n = h.memory().capacity.len();
    let mut used = vec![0u64; n];
    for vm in h.vms() {
        for (u, b) in used.iter_mut().zip(vm.backed_per_node(n)) {
            *u += b;
        }
    }
    for (i, u) in used.iter().enumerate() {
        assert_eq!(h.memory().free[i] + u, h.memory().capacity[i], "node {i}");
    }
    assert_eq!(h.frames_unaccounted(), 0);
}

#[test]
fn every_static_kind_is_listed_once_in_order() {
    for (i, k) in StaticKind::ALL.into_iter().enumerate() {
        assert_eq!(k.index(), i, "{}", k.name());
    }
}

/// Two VMs on the 4-node machine: the first (4 vCPUs, 100 frames) needs two nodes and gets
/// {0, 1} with vCPUs pinned to CPUs 0..4; the second (2 vCPUs, 40 frames) fits on one of the
/// two empty nodes, node 2 (lowest id). Destroying the first frees its CPUs and frames.
#[test]
fn vms_get_home_nodes_and_pinned_vcpus() {
    let mut h = host(64);
    let a = h.create_vm(vm(4, 100, StaticKind::Round4K)).unwrap();
    let b = h.create_vm(vm(2, 40, StaticKind::FirstTouch)).unwrap();
    assert_eq!(h.vm(a).unwrap().home(), &HomeChoice::Packed { nodes: vec![0, 1], pins: vec![0, 1, 2, 3] });
    assert_eq!(h.vm(b).unwrap().home(), &HomeChoice::Packed { nodes: vec![2], pins: vec![4, 5] });
    assert_eq!(h.vm(b).unwrap().pin(1), Some(5));
    assert_eq!((h.cpu_owner(3), h.cpu_owner(4), h.cpu_owner(6)), (Some(a), Some(b), None));
    // Round-4K is eager: frame p of VM a is on A[p mod 2] = 0, 1, 0, ...
    let va = h.vm(a).unwrap();
    assert!((0..100).all(|p| va.frame(p) == Some(FrameState::Backed((p % 2) as NodeId))));
    assert_eq!(h.memory().free, vec![14, 14, 64, 64]);
    // First-touch is lazy: nothing of VM b is backed yet.
    assert_eq!(h.vm(b).unwrap().backed_per_node(4), vec![0; 4]);
    assert_conserved(&h);
    h.destroy_vm(a).unwrap();
    assert_eq!((h.cpu_owner(0), h.memory().free.clone()), (None, vec![64, 64, 64, 64]));
    assert_eq!(h.vm(a).err(), Some(VmError::NoSuchVm { vm: a }));
    // A third VM of 2 vCPUs now takes node 0 again (share 0, 64 frames free, lowest id).
    let c = h.create_vm(vm(2, 10, StaticKind::Round4K)).unwrap();
    assert_eq!(h.vm(c).unwrap().allowed(), &[0]);
}

/// A VM larger than every node set: no reservation, every memory node is home, vCPUs are not
/// pinned. A VM larger than the machine's free memory is refused and the host is unchanged.
#[test]
fn unpackable_and_too_large_vms() {
    let mut h = host(64);
    let v = h.create_vm(vm(9, 10, StaticKind::FirstTouch)).unwrap();
    assert_eq!(h.vm(v).unwrap().home(), &HomeChoice::Unpacked { nodes: vec![0, 1, 2, 3] });
    assert_eq!(h.vm(v).unwrap().pin(0), None);
    assert_eq!(h.cpu_owner(0), None);
    let before = h.memory().clone();
    let e = h.create_vm(vm(1, 257, StaticKind::Round4K)).unwrap_err();
    assert_eq!(e, VmError::MachineTooSmall { wanted_pages: 257, free_pages: 256, page_bytes: PAGE });
    assert_eq!(e.to_string(), "vm needs 257 pages of 4096 bytes but the machine has only 256 free pages on its memory nodes");
    assert_eq!(h.memory(), &before);
    assert_eq!(h.vms().count(), 1);
    // A guest span of 2^52 bytes (2^40 frames) is refused from its size alone: building its
    // frame table first would need terabytes.
    let huge = VmConfig { mem_bytes: 1 << 52, ..vm(1, 1, StaticKind::FirstTouch) };
    let e = h.create_vm(huge).unwrap_err();
    assert_eq!(e, VmError::MachineTooSmall { wanted_pages: 1 << 40, free_pages: 256, page_bytes: PAGE });
}

/// First-touch in a VM (§3): a frame goes to the node of the pCPU running the touching vCPU,
/// and keeps it; a full node falls back round-robin over the home nodes, counted.
#[test]
fn first_touch_places_on_the_running_pcpus_node() {
    let mut h = host(64);
    let v = h.create_vm(vm(4, 140, StaticKind::FirstTouch)).unwrap();
    assert_eq!(h.vm(v).unwrap().allowed(), &[0, 1, 2], "140 frames need three nodes");
    assert_eq!(h.touch(v, at(2, 2, 7)).unwrap(), Touch { node: 1, placed: true });
    assert_eq!(h.touch(v, at(0, 0, 7)).unwrap(), Touch { node: 1, placed: false });
    for p in 0..64 {
        h.touch(v, at(0, 0, 10 + p)).unwrap();
    }
    // Node 0 is full: the next frame touched from node 0 goes to node 1 (NextRoundRobin).
    assert_eq!(h.touch(v, at(0, 0, 100)).unwrap(), Touch { node: 1, placed: true });
    let c = h.vm(v).unwrap().counters();
    assert_eq!((c.placements_per_node.clone(), c.access_placements), (vec![64, 2, 0, 0], 66));
    assert_eq!(c.fallbacks.get(&(0, 1)), Some(&1));
    assert_conserved(&h);
}

/// The point of the queue (§3, §7): without it a frame freed by one guest process and
/// reused by another stays where its first owner put it; with it the free reaches the
/// hypervisor, the frame is unbacked and the new owner's touch places it again.
#[test]
fn a_reused_frame_is_placed_again_only_when_the_queue_reported_its_free() {
    for enabled in [false, true] {
        let mut h = host(64);
        let mut cfg = vm(4, 100, StaticKind::FirstTouch);
        cfg.queue.enabled = enabled;
        cfg.queue.capacity = 2;
        let v = h.create_vm(cfg).unwrap();
        // A process on vCPU 0 (CPU 0, node 0) allocates and touches frames 8 and 12.
        for pfn in [8, 12] {
            h.guest_alloc(v, pfn, 0.0).unwrap();
            assert_eq!(h.touch(v, at(0, 0, pfn)).unwrap().node, 0);
        }
        // (Both frames are in partition 0: the second Alloc filled it and it was delivered,
        // both frames kept.) The process exits: the guest frees both frames, filling the
        // partition again.
        h.guest_free(v, 8, 10_000.0).unwrap();
        let paid = h.guest_free(v, 12, 10_000.0).unwrap();
        // A process on vCPU 2 (CPU 2, node 1) gets frame 8.
        h.guest_alloc(v, 8, 20_000.0).unwrap();
        let t = h.touch(v, at(2, 2, 8)).unwrap();
        let c = h.vm(v).unwrap().counters().clone();
        if enabled {
            assert_eq!(paid, 1000.0 + 2.0 * 200.0, "the filling append delivers and pays");
            assert_eq!(t, Touch { node: 1, placed: true });
            assert_eq!((c.queue_deliveries, c.queue_entries_processed, c.frames_kept_on_alloc, c.frames_unbacked), (2, 4, 2, 2));
            assert_eq!(h.vm(v).unwrap().frame(12), Some(FrameState::Unbacked));
        } else {
            assert_eq!(paid, 0.0);
            assert_eq!(t, Touch { node: 0, placed: false }, "first touch since boot only");
            assert_eq!((c.queue_deliveries, c.frames_unbacked), (0, 0));
        }
        assert_conserved(&h);
    }
}

/// §11 vector 5 through the host: `[Free 8, Alloc 8]` in one delivery leaves frame 8 backed
/// (its new owner may already have written it); `[Alloc 8, Free 8]` unbacks it.
#[test]
fn spec_vector_5_on_a_vm() {
    let mut h = host(64);
    let mut cfg = vm(2, 50, StaticKind::FirstTouch);
    cfg.queue.capacity = 3;
    let v = h.create_vm(cfg).unwrap();
    h.guest_alloc(v, 8, 0.0).unwrap();
    h.touch(v, at(0, 0, 8)).unwrap();
    // Partition 0 holds [Alloc 8]; then Free 8, Alloc 8 fill it: newest is Alloc.
    h.guest_free(v, 8, 10.0).unwrap();
    h.guest_alloc(v, 8, 20.0).unwrap();
    assert_eq!(h.vm(v).unwrap().frame(8), Some(FrameState::Backed(0)));
    let c = h.vm(v).unwrap().counters();
    assert_eq!((c.queue_deliveries, c.frames_kept_on_alloc, c.frames_unbacked), (1, 1, 0));
    // Then [Free 8, Alloc 4, Free 4] (frame 4 is in partition 0 too): frame 8 is unbacked.
    h.guest_free(v, 8, 30.0).unwrap();
    h.guest_alloc(v, 4, 40.0).unwrap();
    h.guest_free(v, 4, 50.0).unwrap();
    assert_eq!(h.vm(v).unwrap().frame(8), Some(FrameState::Unbacked));
    let c = h.vm(v).unwrap().counters();
    assert_eq!((c.queue_deliveries, c.frames_unbacked), (2, 1), "frame 4 was never backed");
    // Frame 9 goes to partition 1, which is still empty... until three entries arrive.
    h.guest_alloc(v, 9, 60.0).unwrap();
    assert_eq!(h.vm(v).unwrap().queue_pending(), 1);
}

/// DMA targets (§3, [ours]): placed when registered, on the registering CPU's node, and a
/// reported free does not unback them while registered.
#[test]
fn dma_targets_are_placed_eagerly_and_never_unbacked() {
    let mut h = host(64);
    let mut cfg = vm(4, 100, StaticKind::FirstTouch);
    cfg.queue.capacity = 1;
    let v = h.create_vm(cfg).unwrap();
    assert_eq!(h.register_dma(v, 3, 3, 20).unwrap(), 1);
    assert!(h.vm(v).unwrap().is_dma_target(20));
    h.guest_alloc(v, 20, 0.0).unwrap();
    h.guest_free(v, 20, 10.0).unwrap();
    assert_eq!(h.vm(v).unwrap().frame(20), Some(FrameState::Backed(1)));
    assert_eq!(h.vm(v).unwrap().counters().dma_frames_kept, 1);
    h.unregister_dma(v, 20).unwrap();
    h.guest_alloc(v, 20, 20.0).unwrap();
    h.guest_free(v, 20, 30.0).unwrap();
    assert_eq!(h.vm(v).unwrap().frame(20), Some(FrameState::Unbacked));
}

/// §2.1: one policy per VM, switchable at run time. Round-4K → first-touch keeps the placed
/// frames and starts the queue; first-touch → round-4k delivers what is pending first and
/// stops the queue; round-1g is refused; a guest whose free pages hold data cannot use
/// first-touch.
#[test]
fn run_time_switching() {
    let mut h = host(64);
    let mut cfg = vm(4, 100, StaticKind::Round4K);
    cfg.queue.capacity = 4;
    let v = h.create_vm(cfg).unwrap();
    assert!(!h.vm(v).unwrap().queue_active());
    h.guest_alloc(v, 3, 0.0).unwrap();
    assert_eq!(h.guest_free(v, 3, 0.0).unwrap(), 0.0, "no queue under round-4k");
    assert_eq!(h.set_static(v, StaticKind::Round1G, 0.0), Err(VmError::Round1GOnlyAtCreation));
    assert_eq!(h.set_static(v, StaticKind::FirstTouch, 0.0).unwrap(), 0.0);
    let vm_ = h.vm(v).unwrap();
    assert!(vm_.queue_active() && vm_.static_kind() == StaticKind::FirstTouch);
    assert_eq!(vm_.frame(3), Some(FrameState::Backed(1)), "placed frames stay");
    // Frame 3 (on node 1) freed and reused from node 0: delivered at the switch back.
    h.guest_alloc(v, 3, 10.0).unwrap();
    h.guest_free(v, 3, 20.0).unwrap();
    assert_eq!(h.vm(v).unwrap().queue_pending(), 2);
    assert_eq!(h.set_static(v, StaticKind::Round4K, 30.0).unwrap(), 1000.0 + 2.0 * 200.0);
    let vm_ = h.vm(v).unwrap();
    assert_eq!((vm_.queue_active(), vm_.frame(3)), (false, Some(FrameState::Unbacked)));
    // Round-4K now places the unbacked frame at its next access, by address: A[3 mod 2] = 1.
    assert_eq!(h.touch(v, at(0, 0, 3)).unwrap(), Touch { node: 1, placed: true });
    assert_eq!(h.vm(v).unwrap().counters().policy_switches, 2);

    let mut cfg = vm(1, 10, StaticKind::Round4K);
    cfg.guest_free_pages_are_content_free = false;
    let w = h.create_vm(cfg.clone()).unwrap();
    assert_eq!(h.set_static(w, StaticKind::FirstTouch, 0.0), Err(VmError::FreePagesHoldContent));
    cfg.static_policy = StaticKind::FirstTouch;
    assert_eq!(h.create_vm(cfg).err(), Some(VmError::FreePagesHoldContent));
}

/// Round-1G VM with a hole: hole frames are never backed and cannot be touched; the rest is
/// laid out eagerly over the home nodes in 4 KiB extents (the VM is smaller than 2 MiB).
#[test]
fn round_1g_vm_with_a_hole() {
    let mut h = host(64);
    let mut cfg = vm(4, 100, StaticKind::Round1G);
    cfg.r1g_holes = vec![Hole { start_bytes: 10 * PAGE, end_bytes: 12 * PAGE }];
    let v = h.create_vm(cfg).unwrap();
    let vm_ = h.vm(v).unwrap();
    assert_eq!(vm_.allowed(), &[0, 1]);
    assert_eq!(vm_.frame(9), Some(FrameState::Backed(1)));
    assert_eq!((vm_.frame(10), vm_.frame(11)), (Some(FrameState::Hole), Some(FrameState::Hole)));
    assert_eq!(vm_.frame(12), Some(FrameState::Backed(0)), "the hole does not move the cursor");
    assert_eq!(vm_.backed_per_node(4), vec![49, 49, 0, 0]);
    assert_eq!(h.touch(v, at(0, 0, 10)), Err(VmError::HoleFrame { vm: v, pfn: 10 }));
    assert_eq!(h.guest_alloc(v, 11, 0.0), Err(VmError::HoleFrame { vm: v, pfn: 11 }));
    assert_conserved(&h);
}

#[test]
fn the_flush_timer_delivers_when_due() {
    let mut h = host(64);
    let mut cfg = vm(2, 40, StaticKind::FirstTouch);
    cfg.queue.flush_ms = Some(1.0);
    let v = h.create_vm(cfg).unwrap();
    h.guest_alloc(v, 5, 0.0).unwrap();
    h.touch(v, at(0, 0, 5)).unwrap();
    h.guest_free(v, 5, 100.0).unwrap();
    assert_eq!(h.timer(v, 999_999.0).unwrap(), 0.0, "not due yet");
    assert_eq!(h.timer(v, 2_500_000.0).unwrap(), 1000.0 + 2.0 * 200.0);
    assert_eq!(h.vm(v).unwrap().frame(5), Some(FrameState::Unbacked));
    assert_eq!(h.timer(v, 2_900_000.0).unwrap(), 0.0, "next due at 3 ms");
    h.guest_alloc(v, 5, 2_950_000.0).unwrap();
    assert_eq!(h.timer(v, 3_000_000.0).unwrap(), 1200.0);
}

#[test]
fn bad_events_are_typed_errors() {
    let mut h = host(64);
    let v = h.create_vm(vm(2, 40, StaticKind::FirstTouch)).unwrap();
    assert_eq!(h.touch(v, at(0, 0, 40)), Err(VmError::NoSuchFrame { vm: v, pfn: 40, frames: 40 }));
    assert_eq!(h.touch(v, at(2, 0, 1)), Err(VmError::NoSuchVcpu { vm: v, vcpu: 2, vcpus: 2 }));
    assert_eq!(h.touch(v, at(0, 8, 1)), Err(VmError::NoSuchCpu { vm: v, cpu: 8, cpus: 8 }));
    assert_eq!(h.touch(7, at(0, 0, 1)), Err(VmError::NoSuchVm { vm: 7 }));
    assert_eq!(h.guest_free(v, 1, 0.0), Err(VmError::GuestDoubleFree { vm: v, pfn: 1 }));
    h.guest_alloc(v, 1, 0.0).unwrap();
    assert_eq!(h.guest_alloc(v, 1, 0.0), Err(VmError::GuestDoubleAlloc { vm: v, pfn: 1 }));
    let bad = HypervisorConfig { r1g_exhaustive_max_nodes: 0, ..Default::default() };
    assert!(matches!(Host::new(machine(8), bad), Err(VmError::Config { key: "hypervisor.r1g_exhaustive_max_nodes", .. })));
}

/// `node_reserve_frames`: a node is full once placing would go below the reserve.
#[test]
fn the_node_reserve_is_never_used() {
    let mut h = Host::new(machine(16), HypervisorConfig { node_reserve_frames: 6, ..Default::default() }).unwrap();
    let mut cfg = vm(2, 30, StaticKind::FirstTouch);
    cfg.ft_fallback = FtFallback::Distance;
    let v = h.create_vm(cfg).unwrap();
    assert_eq!(h.vm(v).unwrap().allowed(), &[0, 1, 2], "10 usable frames per node");
    for p in 0..30 {
        h.touch(v, at(0, 0, p)).unwrap();
    }
    assert_eq!(h.vm(v).unwrap().backed_per_node(4), vec![10, 10, 10, 0]);
    assert_eq!(h.memory().free, vec![6, 6, 6, 16]);
}

proptest::proptest! {
    /// Conservation over several VMs under any sequence of guest events: free plus backed
    /// frames equal each node's capacity; a backed frame is on a node with memory; the
    /// queue's counters add up.
    #[test]
    fn frames_are_conserved_over_vms(ops in proptest::collection::vec((0u32..3, 0u8..5, 0u64..48, 0u32..8), 1..200)) {
        let mut h = host(40);
        let mut cfg = vm(2, 48, StaticKind::FirstTouch);
        cfg.queue.capacity = 3;
        let a = h.create_vm(cfg.clone()).unwrap();
        let b = h.create_vm(vm(2, 48, StaticKind::Round4K)).unwrap();
        cfg.queue.partitions = 2;
        let c = h.create_vm(cfg).unwrap();
        let ids = [a, b, c];
        for (i, (v, op, pfn, cpu)) in ops.into_iter().enumerate() {
            let (id, now) = (ids[v as usize], i as f64 * 100.0);
            let vcpu = cpu % 2;
            let _ = match op {
                0 => h.touch(id, at(vcpu, cpu, pfn)).map(|_| 0.0),
                1 => h.guest_alloc(id, pfn, now),
                2 => h.guest_free(id, pfn, now),
                3 => h.set_static(id, if pfn % 2 == 0 { StaticKind::FirstTouch } else { StaticKind::Round4K }, now),
                _ => h.timer(id, now),
            };
            assert_conserved(&h);
        }
        for vm_ in h.vms() {
            let k = vm_.counters();
            proptest::prop_assert!(k.frames_unbacked + k.frames_kept_on_alloc + k.dma_frames_kept <= k.queue_entries_processed);
            proptest::prop_assert!(k.queue_entries_processed + vm_.queue_pending() as u64 <= k.queue_appends);
        }
    }
}

/// Carrefour in the hypervisor moves the machine frame behind a guest frame: the frame stays
/// backed, now on the target; the old machine frame returns to the host; a free delivered by
/// the queue then unbacks it from its new node. A frame not backed, or a full target, is
/// refused with the host unchanged.
#[test]
fn a_migrated_frame_moves_its_machine_frame_and_is_freed_from_its_new_node() {
    let mut h = host(8);
    let mut cfg = vm(2, 12, StaticKind::FirstTouch);
    cfg.queue.capacity = 1;
    cfg.queue.partitions = 1;
    let v = h.create_vm(cfg).unwrap();
    assert_eq!(h.vm(v).unwrap().allowed(), &[0, 1]);
    h.guest_alloc(v, 3, 0.0).unwrap();
    assert_eq!(h.touch(v, at(0, 0, 3)).unwrap().node, 0);
    let before = h.memory().free.clone();
    assert_eq!(h.migrate_frame(v, 3, 1), Ok(0));
    assert_eq!(h.vm(v).unwrap().frame(3), Some(FrameState::Backed(1)));
    assert_eq!((h.memory().free[0], h.memory().free[1]), (before[0] + 1, before[1] - 1));
    assert_eq!(h.vm(v).unwrap().counters().frames_migrated, 1);
    assert_conserved(&h);
    assert_eq!(h.migrate_frame(v, 3, 1), Ok(1), "already there: nothing moves");
    assert_eq!(h.vm(v).unwrap().counters().frames_migrated, 1);
    assert_eq!(h.migrate_frame(v, 4, 1), Err(VmError::FrameNotBacked { vm: v, pfn: 4 }));
    let full = h.memory().free.clone();
    h.guest_free(v, 3, 1.0).unwrap();
    assert_eq!(h.vm(v).unwrap().frame(3), Some(FrameState::Unbacked), "the 1-entry queue delivered the free");
    assert_eq!(h.memory().free[1], full[1] + 1, "unbacked from node 1, where it lived");
    assert_conserved(&h);
}

#[test]
fn a_migration_to_a_full_node_is_refused_and_changes_nothing() {
    let mut h = Host::new(machine(8), HypervisorConfig { node_reserve_frames: 2, ..Default::default() }).unwrap();
    let v = h.create_vm(vm(2, 12, StaticKind::Round4K)).unwrap();
    // Round-4k over {0, 1}: six frames on each node, two left on each, both the reserve.
    assert_eq!(h.vm(v).unwrap().allowed(), &[0, 1]);
    assert_eq!(h.memory().free_pages(1), 0);
    let mem = h.memory().clone();
    assert_eq!(h.migrate_frame(v, 0, 1), Err(VmError::NodeFull { vm: v, pfn: 0, to: 1 }));
    assert_eq!(h.memory(), &mem);
    assert_eq!(h.vm(v).unwrap().frame(0), Some(FrameState::Backed(0)));
    assert_eq!(h.migrate_frame(v, 0, 2), Ok(0), "node 2 has free frames above its reserve");
    assert_conserved(&h);
}

#[test]
fn the_hypervisors_carrefour_settings_are_checked() {
    use crate::carrefour::{BaseKind, CarrefourConfig};
    let with = |c: CarrefourConfig| HypervisorConfig { carrefour: Some(c), ..Default::default() }.validate();
    assert_eq!(with(CarrefourConfig::default()), Ok(()));
    let e = with(CarrefourConfig { base: Some(BaseKind::FirstTouch), ..Default::default() }).unwrap_err();
    assert!(e.to_string().contains("the base of the hypervisor's Carrefour is each VM's own placement"), "{e}");
    let e = with(CarrefourConfig { min_vaddr: Some(0), ..Default::default() }).unwrap_err();
    assert!(e.to_string().contains("which a hypervisor does not see"), "{e}");
    let e = with(CarrefourConfig { dcmr_max: 120.0, ..Default::default() }).unwrap_err();
    assert!(matches!(&e, VmError::Config { key: "hypervisor.carrefour", message } if message.contains("dcmr_max is a percentage")), "{e}");
}
