//! `numalab attach --pid PID --policy P`: a static policy applied to a running process by
//! moving its resident pages (docs/live.md, "numalab attach").
//!
//! The agent cannot change another process's memory policy (`set_mempolicy` acts on the
//! caller only), so attach places what is resident now: it walks the process's private
//! anonymous mappings (`/proc/PID/maps`), asks the kernel where each page is (`move_pages`
//! with no target), asks the policy where the page belongs, and moves the pages that are
//! elsewhere. The question put to the policy is the one the simulator puts at a placement
//! event, with the page's current node standing for the accessing CPU's node (the agent does
//! not know which thread touched the page first): `first-touch` so keeps every page where it
//! is, `bind` moves a page to the nearest node of its set, `preferred` to the preferred node,
//! `round-4k` to `virtual page number mod nodes`, as the kernel's interleave would have.
//!
//! Transparent huge pages: `move_pages` migrates a THP whole when any of its base pages is
//! asked for (seen on Linux 6.1: asking for the odd base pages of a THP-backed range moved
//! every page). So the planner works in the kernel's units: in a mapping that smaps says has
//! `AnonHugePages`, a 2 MiB-aligned block whose 512 base pages are all resident on one node
//! is taken as one huge page, asked about as page `address / 2 MiB` (the index the kernel's
//! interleave uses for huge pages) and moved by its first base page. Such a block of 512
//! base pages that happen to share a node is then moved as a unit too, which is harmless.

use super::pages::{locate, PageMove, PageMover};
use crate::procfs::maps::MapsEntry;
use crate::topology::Topology;
use numalab_policy::{DynPolicy, MemoryState, PlaceRequest};
use serde::Serialize;
use std::collections::BTreeMap;

/// Free memory per node as the policy sees it while a move is planned: the host's free pages
/// at the start, minus what the plan moves in, plus what it moves out (so no node is
/// planned beyond its free memory).
pub struct PlannedMemory {
    free_pages: Vec<u64>,
    capacity_pages: Vec<u64>,
}

impl PlannedMemory {
    pub fn from_topology(topo: &Topology, page_bytes: u64) -> PlannedMemory {
        PlannedMemory {
            free_pages: topo.nodes.iter().map(|n| n.mem_free_bytes / page_bytes).collect(),
            capacity_pages: topo.nodes.iter().map(|n| n.mem_total_bytes / page_bytes).collect(),
        }
    }

    fn moved(&mut self, from: usize, to: usize, pages: u64) {
        self.free_pages[to] = self.free_pages[to].saturating_sub(pages);
        self.free_pages[from] += pages;
    }
}

impl MemoryState for PlannedMemory {
    fn free_pages(&self, node: u16) -> u64 {
        self.free_pages.get(node as usize).copied().unwrap_or(0)
    }
    fn capacity_pages(&self, node: u16) -> u64 {
        self.capacity_pages.get(node as usize).copied().unwrap_or(0)
    }
}

/// What the policy wants done with the resident pages.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct AttachPlan {
    /// Pages of the private anonymous mappings.
    pub scanned_pages: u64,
    /// Of those, resident (a node answered).
    pub resident_pages: u64,
    /// Resident pages already where the policy wants them.
    pub in_place_pages: u64,
    /// Resident pages the policy could not place (every allowed node full).
    pub unplaceable_pages: u64,
    /// Resident base pages taken as parts of transparent huge pages.
    pub huge_unit_pages: u64,
    /// Units to move (kernel node ids).
    #[serde(skip)]
    pub moves: Vec<PageMove>,
    /// Resident pages per kernel node before the move.
    pub before: std::collections::BTreeMap<u32, u64>,
}

/// Every page address of the private anonymous mappings.
pub fn anon_pages(maps: &[MapsEntry], page_bytes: u64) -> Vec<u64> {
    maps.iter().filter(|m| m.is_private_anon()).flat_map(|m| (m.start..m.end).step_by(page_bytes as usize)).collect()
}

/// Bytes of a PMD-sized transparent huge page on x86-64.
pub const HUGE_BYTES: u64 = 2 << 20;

/// Locate the pages of the private anonymous mappings and plan the moves; `anon_huge` is
/// smaps' `AnonHugePages` by mapping start. `None`: the process exited meanwhile.
pub fn plan_attach(
    mover: &mut dyn PageMover,
    pid: i32,
    maps: &[MapsEntry],
    anon_huge: &BTreeMap<u64, u64>,
    policy: &mut dyn DynPolicy,
    topo: &Topology,
    page_bytes: u64,
) -> Result<Option<AttachPlan>, super::pages::MoveError> {
    let pages = anon_pages(maps, page_bytes);
    let Some(status) = locate(mover, pid, &pages, 16384)? else {
        return Ok(None);
    };
    let kernel_ids: Vec<u32> = topo.nodes.iter().map(|n| n.id).collect();
    let index_of = |kernel: i32| kernel_ids.iter().position(|&k| k as i32 == kernel);
    let mut mem = PlannedMemory::from_topology(topo, page_bytes);
    let mut plan = AttachPlan { scanned_pages: pages.len() as u64, ..Default::default() };
    let per_huge = (HUGE_BYTES / page_bytes) as usize;
    // `pages` lists each mapping's pages in order: walk mapping by mapping.
    let mut first = 0usize;
    for m in maps.iter().filter(|m| m.is_private_anon()) {
        let count = ((m.end - m.start) / page_bytes) as usize;
        let (addrs, st) = (&pages[first..first + count], &status[first..first + count]);
        first += count;
        let has_huge = anon_huge.get(&m.start).is_some_and(|&b| b > 0);
        let mut k = 0;
        while k < count {
            let addr = addrs[k];
            let huge = has_huge
                && addr % HUGE_BYTES == 0
                && k + per_huge <= count
                && st[k] >= 0
                && st[k..k + per_huge].iter().all(|&x| x == st[k]);
            let (unit_pages, index) = if huge { (per_huge, addr / HUGE_BYTES) } else { (1, addr / page_bytes) };
            let here = st[k];
            k += unit_pages;
            let Some(from) = (here >= 0).then(|| index_of(here)).flatten() else {
                continue;
            };
            plan.resident_pages += unit_pages as u64;
            if huge {
                plan.huge_unit_pages += unit_pages as u64;
            }
            *plan.before.entry(here as u32).or_insert(0) += unit_pages as u64;
            let req = PlaceRequest { space: 0, thread: 0, cpu: 0, cpu_node: from as u16, page: index };
            match policy.place(&req, &mem) {
                Ok(to) if to as usize == from => plan.in_place_pages += unit_pages as u64,
                Ok(to) => {
                    mem.moved(from, to as usize, unit_pages as u64);
                    plan.moves.push(PageMove { addr, node: kernel_ids[to as usize] as i32, pages: unit_pages as u32 });
                }
                Err(_) => plan.unplaceable_pages += unit_pages as u64,
            }
        }
    }
    Ok(Some(plan))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::act::pages::{move_batched, FakePageMover, MoveOptions, PageOutcome};
    use crate::export::{to_machine, ExportOptions};
    use crate::procfs::maps::parse_maps;
    use crate::procfs::maps::MapsEntry;
    use numalab_policy::PolicyEnv;
    use std::path::Path;
    use std::sync::Arc;

    fn guest_2n() -> Topology {
        let root = crate::FsRoot::at(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/guest-2n"));
        Topology::read(&root).unwrap()
    }

    fn policy(name: &str, config: &str, topo: &Topology) -> Box<dyn DynPolicy> {
        let env = PolicyEnv::new(Arc::new(to_machine(topo, &ExportOptions::default()).unwrap().machine));
        numalab_policy::build(name, config.parse().unwrap(), &env).unwrap()
    }

    /// A process with one 16-page anonymous mapping, all first-touched on node 0, and a file
    /// mapping attach must leave alone.
    fn process() -> (Vec<MapsEntry>, Vec<u64>, FakePageMover) {
        let maps = "7f0000000000-7f0000010000 rw-p 00000000 00:00 0 \n7f1000000000-7f1000002000 r--p 00000000 fe:00 7 /usr/lib/libc.so.6\n";
        let maps = parse_maps(Path::new("maps"), maps).unwrap();
        let pages = anon_pages(&maps, 4096);
        let mut f = FakePageMover::default();
        for &p in &pages[..12] {
            f.location.insert(p, 0); // the last 4 pages were never touched
        }
        f.location.insert(0x7f1000000000, 0);
        (maps, pages, f)
    }

    fn no_huge() -> BTreeMap<u64, u64> {
        BTreeMap::new()
    }

    #[test]
    fn round_4k_interleaves_the_resident_pages_by_virtual_page_number() {
        let (maps, pages, mut f) = process();
        assert_eq!(pages.len(), 16);
        let t = guest_2n();
        let mut p = policy("round-4k", "", &t);
        let plan = plan_attach(&mut f, 7, &maps, &no_huge(), p.as_mut(), &t, 4096).unwrap().unwrap();
        assert_eq!((plan.scanned_pages, plan.resident_pages, plan.in_place_pages), (16, 12, 6));
        // VPN 0x7f0000000 is even: the odd pages go to node 1.
        let want: Vec<PageMove> = pages[..12].iter().filter(|&&a| (a / 4096) % 2 == 1).map(|&a| PageMove::base(a, 1)).collect();
        assert_eq!(plan.moves, want);
        assert_eq!(plan.before, [(0, 12)].into());
        let s = move_batched(&mut f, 7, &plan.moves, &MoveOptions::default(), &mut |_, _| {}).unwrap();
        assert_eq!(s.count(PageOutcome::Moved), 6);
        // The file page was never asked about or moved.
        assert!(f.calls.iter().all(|c| !c.1.contains(&0x7f1000000000)));
    }

    #[test]
    fn first_touch_keeps_pages_and_bind_moves_them_into_its_set() {
        let (maps, pages, mut f) = process();
        let t = guest_2n();
        let plan = plan_attach(&mut f, 7, &maps, &no_huge(), policy("first-touch", "", &t).as_mut(), &t, 4096).unwrap().unwrap();
        assert!(plan.moves.is_empty());
        assert_eq!(plan.in_place_pages, 12);
        let plan = plan_attach(&mut f, 7, &maps, &no_huge(), policy("bind", "nodes = [1]", &t).as_mut(), &t, 4096).unwrap().unwrap();
        assert_eq!(plan.moves, pages[..12].iter().map(|&a| PageMove::base(a, 1)).collect::<Vec<_>>());
    }

    #[test]
    fn a_process_gone_before_the_plan_is_none() {
        let (maps, _, mut f) = process();
        f.exits_after_calls = Some(0);
        let t = guest_2n();
        assert_eq!(plan_attach(&mut f, 7, &maps, &no_huge(), policy("round-4k", "", &t).as_mut(), &t, 4096).unwrap(), None);
    }

    /// An 8 MiB mapping backed by huge pages (smaps AnonHugePages > 0), resident on node 0 but
    /// for the last 2 MiB block, whose pages are split between nodes (not a huge page).
    #[test]
    fn huge_pages_are_placed_and_moved_whole_by_their_huge_index() {
        let maps = parse_maps(Path::new("maps"), "7f0000000000-7f0000800000 rw-p 00000000 00:00 0 \n").unwrap();
        let pages = anon_pages(&maps, 4096);
        let mut f = FakePageMover::default();
        for (k, &p) in pages.iter().enumerate() {
            f.location.insert(p, if k >= 3 * 512 && k % 2 == 1 { 1 } else { 0 });
        }
        let huge = BTreeMap::from([(0x7f0000000000, 6u64 << 20)]);
        let t = guest_2n();
        let plan = plan_attach(&mut f, 7, &maps, &huge, policy("round-4k", "", &t).as_mut(), &t, 4096).unwrap().unwrap();
        assert_eq!(plan.huge_unit_pages, 3 * 512);
        // Huge index 0x7f0000000000 / 2 MiB = 0x3f8000 is even: blocks 0 and 2 stay, block 1
        // moves whole; the last block's base pages interleave by virtual page number, and are
        // all in place already.
        assert_eq!(plan.moves, vec![PageMove { addr: 0x7f0000200000, node: 1, pages: 512 }]);
        assert_eq!(plan.in_place_pages, 2 * 512 + 512);
        let s = move_batched(&mut f, 7, &plan.moves, &MoveOptions::default(), &mut |_, _| {}).unwrap();
        assert_eq!(s.count(PageOutcome::Moved), 512);
        assert_eq!(f.calls.last().unwrap().1, vec![0x7f0000200000]);
    }

    #[test]
    fn planned_memory_never_plans_a_node_beyond_its_free_pages() {
        let t = guest_2n();
        let mut m = PlannedMemory::from_topology(&t, 4096);
        let free1 = m.free_pages(1);
        m.moved(0, 1, 1);
        assert_eq!(m.free_pages(1), free1 - 1);
        m.free_pages[1] = 0;
        m.moved(0, 1, 1);
        assert_eq!(m.free_pages(1), 0);
    }
}
