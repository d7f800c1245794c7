//! The hinting scanner's walk, shared by every driver that carries out a
//! [`Decision::ScanStep`](crate::Decision::ScanStep): the simulator (over its page table) and
//! the live agent (over a real process's pages, located with `move_pages`). One step, as
//! Linux's `task_numa_work` does it (docs/simulator.md, "The hinting scanner"; docs/live.md,
//! "Hinting faults from samples"): from the space's resume offset, 2 MiB range by range, mark
//! every placed, unmarked page the policy agrees to; a range counts against the page budget
//! only if it changed a mark, and every range against the 8× virtual budget. Reaching the end
//! of the space completes a pass and ends the step.

use crate::decision::SpaceId;
use numalab_core::{NodeId, PageIdx};

/// Where a space's scanner resumes (Linux's `mm->numa_scan_offset`) and how many passes it
/// completed (`mm->numa_scan_seq`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ScanCursor {
    pub offset: PageIdx,
    pub sequence: u64,
}

/// The pages a scan step walks over, as the driver keeps them.
pub trait ScanPages {
    /// The walk is about to look at pages `start..end` (one 2 MiB range at most): a driver
    /// that must ask the kernel where they are does it here, once per range.
    fn visit_range(&mut self, _start: PageIdx, _end: PageIdx) {}
    /// The node of a page the scanner may mark: placed and not marked yet; `None` otherwise.
    fn markable(&self, page: PageIdx) -> Option<NodeId>;
    /// Make the page inaccessible: its next access is a hinting fault.
    fn mark(&mut self, page: PageIdx);
}

/// What one step did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ScanWalk {
    /// Pages marked (Linux's `numa_pte_updates`).
    pub updates: u64,
    /// The step reached the end of the space and started a new pass.
    pub pass_completed: bool,
}

/// One scan step over a space of `space_pages` pages, marking up to `pages` pages in ranges of
/// `range_pages`. `skip_node`: a space with a single thread skips pages already on that
/// thread's node (Linux skips them when the mm has one user). `should_unmap` is the policy's
/// selective-profiling hook.
#[allow(clippy::too_many_arguments)]
pub fn scan_walk(
    cursor: &mut ScanCursor,
    space: SpaceId,
    space_pages: u64,
    range_pages: u64,
    pages: u64,
    skip_node: Option<NodeId>,
    target: &mut dyn ScanPages,
    should_unmap: &mut dyn FnMut(SpaceId, PageIdx, NodeId) -> bool,
) -> ScanWalk {
    let range_pages = range_pages.max(1);
    let mut page_budget = pages as i128;
    let mut virt_budget = 8 * pages as i128;
    let mut walk = ScanWalk::default();
    if cursor.offset >= space_pages {
        cursor.offset = 0;
    }
    loop {
        let start = cursor.offset;
        let end = ((start / range_pages + 1) * range_pages).min(space_pages);
        target.visit_range(start, end);
        let mut changed = 0u64;
        for page in start..end {
            let Some(node) = target.markable(page) else { continue };
            if skip_node == Some(node) {
                continue;
            }
            if should_unmap(space, page, node) {
                target.mark(page);
                changed += 1;
            }
        }
        walk.updates += changed;
        virt_budget -= (end - start) as i128;
        if changed > 0 {
            page_budget -= (end - start) as i128;
        }
        cursor.offset = end;
        if end == space_pages {
            cursor.offset = 0;
            cursor.sequence += 1;
            walk.pass_completed = true;
            break;
        }
        if virt_budget <= 0 || page_budget <= 0 {
            break;
        }
    }
    walk
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    /// Pages `0..n`, placed on the node the map says; marks recorded.
    struct Pages {
        node: BTreeMap<PageIdx, NodeId>,
        marked: Vec<PageIdx>,
        ranges: Vec<(PageIdx, PageIdx)>,
    }

    impl ScanPages for Pages {
        fn visit_range(&mut self, start: PageIdx, end: PageIdx) {
            self.ranges.push((start, end));
        }
        fn markable(&self, page: PageIdx) -> Option<NodeId> {
            self.node.get(&page).copied().filter(|_| !self.marked.contains(&page))
        }
        fn mark(&mut self, page: PageIdx) {
            self.marked.push(page);
        }
    }

    #[test]
    fn a_step_marks_range_by_range_within_its_budgets_and_wraps() {
        // 10 pages in ranges of 4; pages 0..4 unplaced, 4..10 on node 1, page 6 on node 0.
        let mut p = Pages { node: (4..10).map(|k| (k, if k == 6 { 0 } else { 1 })).collect(), marked: vec![], ranges: vec![] };
        let mut c = ScanCursor::default();
        // Budget 2 pages: range 0..4 changes nothing (virtual budget only), range 4..8 marks
        // its 4 pages and uses the page budget up.
        let w = scan_walk(&mut c, 0, 10, 4, 2, None, &mut p, &mut |_, _, _| true);
        assert_eq!(w, ScanWalk { updates: 4, pass_completed: false });
        assert_eq!(p.marked, vec![4, 5, 6, 7]);
        assert_eq!(p.ranges, vec![(0, 4), (4, 8)]);
        assert_eq!(c, ScanCursor { offset: 8, sequence: 0 });
        // The next step reaches the end: a pass completes, the cursor wraps. The single user
        // is on node 1: its own pages are skipped; the policy declines page 9 anyway.
        let w = scan_walk(&mut c, 0, 10, 4, 2, Some(1), &mut p, &mut |_, page, _| page != 9);
        assert_eq!(w, ScanWalk { updates: 0, pass_completed: true });
        assert_eq!(c, ScanCursor { offset: 0, sequence: 1 });
    }

    #[test]
    fn an_empty_space_completes_a_pass_at_once() {
        let mut p = Pages { node: BTreeMap::new(), marked: vec![], ranges: vec![] };
        let mut c = ScanCursor { offset: 5, sequence: 2 };
        let w = scan_walk(&mut c, 0, 0, 512, 10, None, &mut p, &mut |_, _, _| true);
        assert!(w.pass_completed);
        assert_eq!(c, ScanCursor { offset: 0, sequence: 3 });
    }
}
