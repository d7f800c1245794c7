//! round-1g by moving pages (docs/live.md, "round-1g by moving pages"): the agent reads the
//! program's `/proc/PID/maps`, asks the kernel where the pages of its private anonymous
//! mappings are (`move_pages` with no target), and moves every resident page that is not on
//! its range's node — [`numalab_policy::statics::range_node`], the map the simulator's layout
//! and the preload library share — through the paced [`move_batched`].
//!
//! It sees what the preload library cannot (glibc's `malloc` maps its large blocks through its
//! internal `__mmap`; the `brk` heap; `mremap`; statically linked programs; processes it did
//! not launch), at the price of a page being first allocated elsewhere and then copied.
//!
//! `numalab attach` makes one pass over every page ([`plan_ranges`]). `numalab run` makes one
//! pass per period while the program runs ([`RangeMover`]), each over at most
//! [`SCAN_BYTES_PER_PASS`] of the address space, resuming where the previous pass stopped.

use super::attach::AttachPlan;
use super::pages::{locate, move_batched, MoveError, MoveOptions, MoveStats, PageMove, PageMover, PageOutcome};
use crate::procfs::maps::MapsEntry;
use numalab_core::NodeId;
use numalab_policy::statics::range_node;
use serde::Serialize;
use std::collections::BTreeMap;

/// Address space one periodic pass asks about at most. [A] Linux's NUMA-balancing scanner
/// takes the same bound per scan (`numa_balancing_scan_size_mb`, default 256): a pass then
/// asks the kernel about 65,536 pages, four `move_pages` status calls.
pub const SCAN_BYTES_PER_PASS: u64 = 256 << 20;

/// Pages per `move_pages` status call (as `numalab attach` asks).
pub const LOCATE_BATCH_PAGES: usize = 16384;

/// The smallest range the agent moves pages for: a transparent huge page (2 MiB, aligned) then
/// lies inside one range, so all its base pages want one node. Below it a huge page spanning
/// two ranges would be moved back and forth every pass.
pub const MIN_RANGE_BYTES: u64 = 2 << 20;

/// Range `k` of the address space goes to `home[k mod N]` (policy node ids), a kernel node
/// `kernel_ids[policy node]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RangeMap {
    pub home: Vec<NodeId>,
    pub kernel_ids: Vec<u32>,
    pub range_bytes: u64,
}

impl RangeMap {
    /// The kernel node the page at `addr` belongs on.
    pub fn kernel_node(&self, addr: u64) -> Option<u32> {
        range_node(&self.home, addr, self.range_bytes).and_then(|n| self.kernel_ids.get(n as usize).copied())
    }
}

/// Where the pages `pages` are (`status`, from `move_pages`) against where the map wants
/// them: the plan of an attach, with a base-page move for each resident page on another node.
pub fn plan_from_status(pages: &[u64], status: &[i32], map: &RangeMap) -> AttachPlan {
    let mut plan = AttachPlan { scanned_pages: pages.len() as u64, ..Default::default() };
    for (&addr, &here) in pages.iter().zip(status) {
        if here < 0 {
            continue;
        }
        plan.resident_pages += 1;
        *plan.before.entry(here as u32).or_insert(0) += 1;
        match map.kernel_node(addr) {
            Some(to) if to as i32 == here => plan.in_place_pages += 1,
            Some(to) => plan.moves.push(PageMove::base(addr, to as i32)),
            None => plan.unplaceable_pages += 1,
        }
    }
    plan
}

/// Locate `pages` and plan their moves; `None`: the process exited.
pub fn plan_pages(mover: &mut dyn PageMover, pid: i32, pages: &[u64], map: &RangeMap) -> Result<Option<AttachPlan>, MoveError> {
    let Some(status) = locate(mover, pid, pages, LOCATE_BATCH_PAGES)? else {
        return Ok(None);
    };
    Ok(Some(plan_from_status(pages, &status, map)))
}

/// `numalab attach --policy round-1g`: every page of the private anonymous mappings.
pub fn plan_ranges(
    mover: &mut dyn PageMover,
    pid: i32,
    maps: &[MapsEntry],
    map: &RangeMap,
    page_bytes: u64,
) -> Result<Option<AttachPlan>, MoveError> {
    plan_pages(mover, pid, &super::attach::anon_pages(maps, page_bytes), map)
}

/// The pages of the private anonymous mappings from address `cursor` on, in address order,
/// wrapping to the lowest once past the highest, at most `budget_pages` and each at most once;
/// and the cursor for the next pass (the address after the last page taken).
pub fn pages_from(maps: &[MapsEntry], cursor: u64, budget_pages: usize, page_bytes: u64) -> (Vec<u64>, u64) {
    let mut anon: Vec<&MapsEntry> = maps.iter().filter(|m| m.is_private_anon()).collect();
    anon.sort_by_key(|m| m.start);
    let mut out = Vec::new();
    // Above the cursor, then below it.
    for upper in [true, false] {
        for m in &anon {
            let (lo, hi) = if upper { (m.start.max(cursor), m.end) } else { (m.start, m.end.min(cursor)) };
            let mut a = lo.div_ceil(page_bytes) * page_bytes;
            while a < hi && out.len() < budget_pages {
                out.push(a);
                a += page_bytes;
            }
        }
    }
    let next = out.last().map_or(0, |&a| a + page_bytes);
    (out, next)
}

/// Totals of the agent's passes while a program runs (`numalab.run/1`'s `range_moves`).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct RangeTotals {
    pub passes: u64,
    /// Pages asked about, over all passes (a page counts once per pass that asked).
    pub scanned_pages: u64,
    /// Of those, resident, and resident on another node than their range's.
    pub resident_pages: u64,
    pub misplaced_pages: u64,
    /// Outcomes of the moves, in base pages.
    pub outcomes: BTreeMap<PageOutcome, u64>,
    pub locate_calls: u64,
    pub move_pages_calls: u64,
    /// Wall time spent in passes (status queries and moves), seconds.
    pub busy_s: f64,
    /// The program exited during a pass.
    pub process_gone: bool,
}

impl RangeTotals {
    pub fn count(&self, o: PageOutcome) -> u64 {
        self.outcomes.get(&o).copied().unwrap_or(0)
    }
}

/// The agent's round-1g while a program runs: one pass per period over the next
/// `budget_pages` pages.
#[derive(Debug)]
pub struct RangeMover {
    map: RangeMap,
    cursor: u64,
    budget_pages: usize,
    page_bytes: u64,
    pub totals: RangeTotals,
}

impl RangeMover {
    pub fn new(map: RangeMap, page_bytes: u64) -> RangeMover {
        RangeMover { map, cursor: 0, budget_pages: (SCAN_BYTES_PER_PASS / page_bytes) as usize, page_bytes, totals: RangeTotals::default() }
    }

    pub fn with_budget_pages(mut self, pages: usize) -> RangeMover {
        self.budget_pages = pages.max(1);
        self
    }

    /// One pass: the next pages of `maps`, located, and the misplaced ones moved (`on_page`
    /// hears every outcome). `Ok(false)`: the process exited.
    pub fn pass(
        &mut self,
        mover: &mut dyn PageMover,
        pid: i32,
        maps: &[MapsEntry],
        opts: &MoveOptions,
        on_page: &mut dyn FnMut(&PageMove, PageOutcome),
    ) -> Result<bool, MoveError> {
        let t = std::time::Instant::now();
        let (pages, next) = pages_from(maps, self.cursor, self.budget_pages, self.page_bytes);
        self.cursor = next;
        self.totals.passes += 1;
        self.totals.locate_calls += pages.len().div_ceil(LOCATE_BATCH_PAGES) as u64;
        let alive = match plan_pages(mover, pid, &pages, &self.map)? {
            None => false,
            Some(plan) => {
                self.totals.scanned_pages += plan.scanned_pages;
                self.totals.resident_pages += plan.resident_pages;
                self.totals.misplaced_pages += plan.moves.len() as u64;
                let stats =
                    if plan.moves.is_empty() { MoveStats::default() } else { move_batched(mover, pid, &plan.moves, opts, on_page)? };
                for (o, n) in &stats.outcomes {
                    *self.totals.outcomes.entry(*o).or_insert(0) += n;
                }
                self.totals.move_pages_calls += stats.calls;
                !stats.process_gone
            }
        };
        self.totals.process_gone |= !alive;
        self.totals.busy_s += t.elapsed().as_secs_f64();
        Ok(alive)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::act::pages::FakePageMover;
    use crate::procfs::maps::parse_maps;
    use std::path::Path;

    const MIB2: u64 = 2 << 20;

    /// Verbatim `/proc/self/maps` of a glibc program after three `malloc(4 MiB)` (Linux
    /// 6.18, the development host; anonymous lines keep their trailing space): malloc's
    /// blocks are one merged anonymous mapping below libc, 3 × (4 MiB + 8 KiB) = 0xc06000
    /// bytes, not 2 MiB-aligned; the heap, the stack and two small anonymous mappings
    /// (libc's and the loader's) are private anonymous too; file mappings, `[vvar]`, `[vdso]`
    /// and `[vsyscall]` are not.
    const MAPS: &str = "55a76759b000-55a76759c000 r--p 00000000 fe:00 9978066                    /tmp/a13_maps
55a76759c000-55a76759d000 r-xp 00001000 fe:00 9978066                    /tmp/a13_maps
55a76759d000-55a76759e000 r--p 00002000 fe:00 9978066                    /tmp/a13_maps
55a76759e000-55a76759f000 r--p 00002000 fe:00 9978066                    /tmp/a13_maps
55a76759f000-55a7675a0000 rw-p 00003000 fe:00 9978066                    /tmp/a13_maps
55a77e7aa000-55a77e7cb000 rw-p 00000000 00:00 0                          [heap]
7f1c8f0a8000-7f1c8fcae000 rw-p 00000000 00:00 0 
7f1c8fcae000-7f1c8fcd4000 r--p 00000000 fe:00 326269                     /usr/lib/x86_64-linux-gnu/libc.so.6
7f1c8fcd4000-7f1c8fe2a000 r-xp 00026000 fe:00 326269                     /usr/lib/x86_64-linux-gnu/libc.so.6
7f1c8fe2a000-7f1c8fe7d000 r--p 0017c000 fe:00 326269                     /usr/lib/x86_64-linux-gnu/libc.so.6
7f1c8fe7d000-7f1c8fe81000 r--p 001cf000 fe:00 326269                     /usr/lib/x86_64-linux-gnu/libc.so.6
7f1c8fe81000-7f1c8fe83000 rw-p 001d3000 fe:00 326269                     /usr/lib/x86_64-linux-gnu/libc.so.6
7f1c8fe83000-7f1c8fe90000 rw-p 00000000 00:00 0 
7f1c8fe9c000-7f1c8fe9e000 rw-p 00000000 00:00 0 
7f1c8fe9e000-7f1c8fea2000 r--p 00000000 00:00 0                          [vvar]
7f1c8fea2000-7f1c8fea4000 r--p 00000000 00:00 0                          [vvar_vclock]
7f1c8fea4000-7f1c8fea6000 r-xp 00000000 00:00 0                          [vdso]
7f1c8fea6000-7f1c8fea7000 r--p 00000000 fe:00 325835                     /usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2
7f1c8fea7000-7f1c8fecd000 r-xp 00001000 fe:00 325835                     /usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2
7f1c8fecd000-7f1c8fed7000 r--p 00027000 fe:00 325835                     /usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2
7f1c8fed7000-7f1c8fed9000 r--p 00031000 fe:00 325835                     /usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2
7f1c8fed9000-7f1c8fedb000 rw-p 00033000 fe:00 325835                     /usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2
7fff0c8fe000-7fff0c91f000 rw-p 00000000 00:00 0                          [stack]
ffffffffff600000-ffffffffff601000 --xp 00000000 00:00 0                  [vsyscall]
";

    fn map2() -> RangeMap {
        RangeMap { home: vec![0, 1], kernel_ids: vec![0, 1], range_bytes: MIB2 }
    }

    #[test]
    fn the_map_is_the_simulators_range_node_in_kernel_ids() {
        let m = RangeMap { home: vec![1, 0], kernel_ids: vec![4, 7], range_bytes: MIB2 };
        assert_eq!(m.kernel_node(0), Some(7));
        assert_eq!(m.kernel_node(MIB2), Some(4));
        assert_eq!(m.kernel_node(3 * MIB2 + 5), Some(4));
        assert_eq!(RangeMap { home: vec![], kernel_ids: vec![0], range_bytes: MIB2 }.kernel_node(0), None);
    }

    /// A maps text and a status vector (the process-wide interleave put the pages
    /// alternately on nodes 0 and 1, four were never touched) → exactly these move_pages
    /// calls: one status query of every private anonymous page, then one move of each
    /// resident page not on node (address / 2 MiB) mod 2.
    #[test]
    fn misplaced_pages_move_to_their_ranges_node_in_these_calls() {
        let maps = parse_maps(Path::new("maps"), MAPS).unwrap();
        let pages = crate::act::attach::anon_pages(&maps, 4096);
        assert_eq!(pages.len(), 0x21 + 0xc06 + 0xd + 0x2 + 0x21);
        let mut f = FakePageMover::default();
        for (i, &p) in pages.iter().enumerate().skip(4) {
            f.location.insert(p, (i % 2) as i32);
        }
        let map = map2();
        let plan = plan_ranges(&mut f, 9, &maps, &map, 4096).unwrap().unwrap();
        assert_eq!((plan.scanned_pages, plan.resident_pages), (pages.len() as u64, pages.len() as u64 - 4));
        let want: Vec<PageMove> = pages
            .iter()
            .enumerate()
            .skip(4)
            .filter(|&(i, &p)| (p / MIB2) % 2 != (i % 2) as u64)
            .map(|(_, &p)| PageMove::base(p, ((p / MIB2) % 2) as i32))
            .collect();
        assert_eq!(plan.moves, want);
        assert_eq!(plan.in_place_pages + want.len() as u64, plan.resident_pages);
        assert_eq!(f.calls.len(), 1, "one status call of {} pages", pages.len());
        assert_eq!((f.calls[0].0, &f.calls[0].1, &f.calls[0].2), (9, &pages, &None));
        // The file mapping's pages were never asked about.
        assert!(
            !f.calls[0].1.contains(&0x55a76759f000) && !f.calls[0].1.contains(&0x7f1c8fe81000) && !f.calls[0].1.contains(&0x7f1c8fe9e000)
        );

        // The periodic mover makes the same calls, then the moves in one batch.
        let mut f2 = FakePageMover { location: f.location.clone(), ..Default::default() };
        let mut r = RangeMover::new(map.clone(), 4096);
        let opts = MoveOptions { first_batch_pages: 1 << 14, ..Default::default() };
        let mut heard = Vec::new();
        assert!(r.pass(&mut f2, 9, &maps, &opts, &mut |m, o| heard.push((*m, o))).unwrap());
        assert_eq!(f2.calls.len(), 2);
        assert_eq!(f2.calls[0].1, pages);
        assert_eq!(f2.calls[1].1, want.iter().map(|m| m.addr).collect::<Vec<_>>());
        assert_eq!(f2.calls[1].2, Some(want.iter().map(|m| m.node).collect::<Vec<_>>()));
        assert_eq!(heard.len(), want.len());
        assert_eq!(r.totals.count(PageOutcome::Moved), want.len() as u64);
        assert_eq!((r.totals.passes, r.totals.locate_calls, r.totals.move_pages_calls), (1, 1, 1));
        for (&p, &n) in &f2.location {
            assert_eq!(n as u64, (p / MIB2) % 2, "page {p:#x}");
        }
        // A second pass finds everything in place and moves nothing.
        assert!(r.pass(&mut f2, 9, &maps, &opts, &mut |_, _| {}).unwrap());
        assert_eq!(f2.calls.len(), 3);
        assert_eq!(r.totals.misplaced_pages, want.len() as u64);
    }

    /// Busy pages are retried, shared ones skipped, and a process that exits ends the pass.
    #[test]
    fn refusals_are_counted_and_an_exit_ends_the_pass() {
        let maps = parse_maps(Path::new("maps"), "7f0000000000-7f0000400000 rw-p 00000000 00:00 0 \n").unwrap();
        let pages = crate::act::attach::anon_pages(&maps, 4096);
        let mut f = FakePageMover { location: pages.iter().map(|&p| (p, 0)).collect(), ..Default::default() };
        // 0x7f0000000000 / 2 MiB is even: the second 2 MiB belong on node 1.
        let (busy, shared) = (pages[512], pages[513]);
        f.busy.insert(busy, 1);
        f.shared.push(shared);
        let mut r = RangeMover::new(map2(), 4096);
        assert!(r.pass(&mut f, 3, &maps, &MoveOptions::default(), &mut |_, _| {}).unwrap());
        assert_eq!(r.totals.count(PageOutcome::Moved), 511);
        assert_eq!(r.totals.count(PageOutcome::Shared), 1);
        assert_eq!(f.location[&busy], 1, "moved on its retry");
        let mut gone = FakePageMover { location: f.location.clone(), exits_after_calls: Some(0), ..Default::default() };
        assert!(!r.pass(&mut gone, 3, &maps, &MoveOptions::default(), &mut |_, _| {}).unwrap());
        assert!(r.totals.process_gone);
        let mut denied = FakePageMover { fail_with: Some(libc::EPERM), ..Default::default() };
        let e = r.pass(&mut denied, 3, &maps, &MoveOptions::default(), &mut |_, _| {}).unwrap_err();
        assert_eq!(e, MoveError::Permission { pid: 3 });
    }

    /// Passes resume where the last stopped and wrap around: 3 mappings of 4 pages, 5 pages a
    /// pass.
    #[test]
    fn passes_walk_the_address_space_in_turns() {
        let text = "1000-5000 rw-p 00000000 00:00 0 \n9000-d000 r--p 00000000 fe:00 7 /lib/x\n20000-24000 rw-p 00000000 00:00 0 [heap]\n30000-34000 rw-p 00000000 00:00 0 [stack]\n";
        let maps = parse_maps(Path::new("maps"), text).unwrap();
        let (p, c) = pages_from(&maps, 0, 5, 4096);
        assert_eq!(p, vec![0x1000, 0x2000, 0x3000, 0x4000, 0x20000]);
        let (p, c) = pages_from(&maps, c, 5, 4096);
        assert_eq!(p, vec![0x21000, 0x22000, 0x23000, 0x30000, 0x31000]);
        let (p, c) = pages_from(&maps, c, 5, 4096);
        assert_eq!(p, vec![0x32000, 0x33000, 0x1000, 0x2000, 0x3000]);
        assert_eq!(c, 0x4000);
        // A budget above the mappings takes every page once.
        assert_eq!(pages_from(&maps, 0x22000, 100, 4096).0.len(), 12);
        // A mapping that shrank below the cursor is simply past.
        assert_eq!(pages_from(&maps, 0x40000, 2, 4096).0, vec![0x1000, 0x2000]);
        assert_eq!(pages_from(&[], 0x40000, 2, 4096), (vec![], 0));
    }

    #[test]
    fn the_periodic_budget_follows_the_kernels_scan_size() {
        let r = RangeMover::new(map2(), 4096);
        assert_eq!(r.budget_pages, 65536);
    }
}
