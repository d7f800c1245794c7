//! Moving another process's pages with `move_pages(2)` in bounded batches (docs/live.md,
//! "numalab attach").
//!
//! * A batch is sized so that one call takes about `batch_target` (20 ms by default): the
//!   kernel holds the target's mmap lock for the whole call, so one huge call would stall the
//!   program's page faults that long.
//! * An optional rate limit in bytes per second sleeps between batches.
//! * Per-page results (`status[i]`): the node, or a negative errno: `-EBUSY` (page locked or
//!   under writeback: retried up to `busy_retries` times), `-EACCES` (shared with another
//!   process: skipped and counted, moving it would need `MPOL_MF_MOVE_ALL`), `-ENOENT` /
//!   `-EFAULT` (not present / not mapped any more), `-ENOMEM` (target node full).
//! * The whole call failing with `ESRCH` means the process exited: the move stops and reports
//!   what it did, which is normal and not an error. `EPERM` is a permission error.

use super::syscall::errno_text;
use serde::Serialize;
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// `MPOL_MF_MOVE`: move pages mapped only by this process (`include/uapi/linux/mempolicy.h`).
pub const MPOL_MF_MOVE: i32 = 1 << 1;

/// `move_pages(2)` on a process: the real system call, or a recording fake.
pub trait PageMover {
    /// With `nodes`, move `pages[i]` to `nodes[i]`; without, only report where they are.
    /// `status[i]` gets the page's node or a negative errno; `Err(errno)` if the call failed.
    fn move_pages(&mut self, pid: i32, pages: &[u64], nodes: Option<&[i32]>, status: &mut [i32]) -> Result<(), i32>;

    /// `migrate_pages(2)`: move every page of the process on a node of `from` to `to` (kernel
    /// node ids; the kernel pairs `from`'s nodes with `to`'s by position, cycling `to`, so a
    /// single `to` node takes them all). `Ok(n)`: `n` pages could not be moved;
    /// `Err(errno)` if the call failed. Unsupported (`ENOSYS`) unless implemented.
    fn migrate_pages(&mut self, _pid: i32, _from: &[u32], _to: &[u32]) -> Result<u64, i32> {
        Err(libc::ENOSYS)
    }
}

/// A node set as `migrate_pages(2)` and `set_mempolicy(2)` take it: the mask words and
/// `maxnode` (the mask's bits + 1: the kernel's `get_nodes()` reads `maxnode - 1` bits;
/// docs/live.md, "Whole-process moves").
pub fn node_mask(nodes: &[u32]) -> (Vec<u64>, u64) {
    let words = nodes.iter().max().map_or(1, |&m| m as usize / 64 + 1);
    let mut mask = vec![0u64; words];
    for &n in nodes {
        mask[n as usize / 64] |= 1 << (n % 64);
    }
    (mask, words as u64 * 64 + 1)
}

/// The kernel's `move_pages(2)`.
///
/// With `expect_start`, every call first checks that the pid still names the process that
/// started at that time (`/proc/PID/stat` field 22) and answers `ESRCH` when not: a pid the
/// kernel reused for another process after the target exited is never touched.
#[derive(Debug, Default)]
pub struct SystemPageMover {
    pub expect_start: Option<u64>,
}

impl SystemPageMover {
    /// A mover for `pid` that refuses to act on a later process reusing the pid.
    pub fn for_process(pid: u32) -> Result<SystemPageMover, crate::LinuxError> {
        Ok(SystemPageMover { expect_start: Some(crate::procfs::stat::start_time(&crate::FsRoot::host(), pid)?) })
    }
}

impl PageMover for SystemPageMover {
    fn move_pages(&mut self, pid: i32, pages: &[u64], nodes: Option<&[i32]>, status: &mut [i32]) -> Result<(), i32> {
        if let Some(start) = self.expect_start {
            match crate::procfs::stat::start_time(&crate::FsRoot::host(), pid as u32) {
                Ok(t) if t == start => {}
                _ => return Err(libc::ESRCH),
            }
        }
        assert_eq!(pages.len(), status.len(), "one status per page");
        if let Some(n) = nodes {
            assert_eq!(n.len(), pages.len(), "one node per page");
        }
        let nodes_ptr = nodes.map_or(std::ptr::null(), |n| n.as_ptr());
        // SAFETY: pages, nodes and status are valid arrays of `pages.len()` elements for the
        // duration of the call (checked above).
        let r = unsafe {
            libc::syscall(
                libc::SYS_move_pages,
                pid as libc::c_long,
                pages.len() as libc::c_ulong,
                pages.as_ptr(),
                nodes_ptr,
                status.as_mut_ptr(),
                MPOL_MF_MOVE as libc::c_long,
            )
        };
        // A positive return is the number of pages not migrated; their status says why.
        if r >= 0 {
            return Ok(());
        }
        let errno = std::io::Error::last_os_error().raw_os_error().unwrap_or(libc::EIO);
        // A process that is exiting has no memory left, and the kernel answers EINVAL (its
        // find_mm_struct finds no mm) rather than ESRCH: seen when a target exited during a
        // move in the guest test. Such a process is gone.
        if errno == libc::EINVAL {
            if let Some(start) = self.expect_start {
                if crate::procfs::stat::process_gone(&crate::FsRoot::host(), pid as u32, start) {
                    return Err(libc::ESRCH);
                }
            }
        }
        Err(errno)
    }

    fn migrate_pages(&mut self, pid: i32, from: &[u32], to: &[u32]) -> Result<u64, i32> {
        if let Some(start) = self.expect_start {
            match crate::procfs::stat::start_time(&crate::FsRoot::host(), pid as u32) {
                Ok(t) if t == start => {}
                _ => return Err(libc::ESRCH),
            }
        }
        let bits = from.iter().chain(to).copied().collect::<Vec<_>>();
        let (_, maxnode) = node_mask(&bits);
        let words = (maxnode as usize - 1) / 64;
        let (mut old, mut new) = (node_mask(from).0, node_mask(to).0);
        old.resize(words, 0);
        new.resize(words, 0);
        // SAFETY: both masks hold `maxnode - 1` bits, as the call reads.
        let r =
            unsafe { libc::syscall(libc::SYS_migrate_pages, pid as libc::c_long, maxnode as libc::c_ulong, old.as_ptr(), new.as_ptr()) };
        if r >= 0 {
            return Ok(r as u64);
        }
        Err(std::io::Error::last_os_error().raw_os_error().unwrap_or(libc::EIO))
    }
}

/// Records every call and plays a process whose pages are where `location` says.
#[derive(Debug, Default)]
pub struct FakePageMover {
    /// Calls made: (pid, pages, target nodes).
    pub calls: Vec<(i32, Vec<u64>, Option<Vec<i32>>)>,
    /// Where each present page is.
    pub location: BTreeMap<u64, i32>,
    /// Pages that answer `-EBUSY` this many more times.
    pub busy: BTreeMap<u64, u32>,
    /// Pages shared with another process (`-EACCES`).
    pub shared: Vec<u64>,
    /// The process exits after this many calls (`ESRCH` from then on).
    pub exits_after_calls: Option<usize>,
    /// Every call fails with this errno (`EPERM`, …).
    pub fail_with: Option<i32>,
    /// `migrate_pages` calls made: (pid, from nodes, to nodes).
    pub whole_calls: Vec<(i32, Vec<u32>, Vec<u32>)>,
}

impl PageMover for FakePageMover {
    fn move_pages(&mut self, pid: i32, pages: &[u64], nodes: Option<&[i32]>, status: &mut [i32]) -> Result<(), i32> {
        self.calls.push((pid, pages.to_vec(), nodes.map(<[i32]>::to_vec)));
        if let Some(e) = self.fail_with {
            return Err(e);
        }
        if self.exits_after_calls.is_some_and(|n| self.calls.len() > n) {
            return Err(libc::ESRCH);
        }
        for (i, &page) in pages.iter().enumerate() {
            let Some(&at) = self.location.get(&page) else {
                status[i] = -libc::ENOENT;
                continue;
            };
            status[i] = match nodes {
                None => at,
                Some(_) if self.shared.contains(&page) => -libc::EACCES,
                Some(_) if self.busy.get(&page).is_some_and(|&n| n > 0) => {
                    *self.busy.get_mut(&page).unwrap() -= 1;
                    -libc::EBUSY
                }
                Some(n) => {
                    self.location.insert(page, n[i]);
                    n[i]
                }
            };
        }
        Ok(())
    }

    /// Moves every page on a `from` node to `to`'s node of the same position (cycling), as
    /// the kernel does; busy and shared pages stay and are counted as not moved.
    fn migrate_pages(&mut self, pid: i32, from: &[u32], to: &[u32]) -> Result<u64, i32> {
        self.whole_calls.push((pid, from.to_vec(), to.to_vec()));
        if let Some(e) = self.fail_with {
            return Err(e);
        }
        if self.exits_after_calls.is_some_and(|n| self.calls.len() + self.whole_calls.len() > n) {
            return Err(libc::ESRCH);
        }
        if to.is_empty() {
            return Err(libc::EINVAL);
        }
        let mut left = 0;
        for (page, at) in self.location.iter_mut() {
            let Some(k) = from.iter().position(|&f| f as i32 == *at) else { continue };
            if self.shared.contains(page) || self.busy.get(page).is_some_and(|&n| n > 0) {
                left += 1;
                continue;
            }
            *at = to[k % to.len()] as i32;
        }
        Ok(left)
    }
}

/// One unit the kernel migrates: a base page, or a transparent huge page (asked for by its
/// first base page; the kernel moves the whole huge page).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PageMove {
    pub addr: u64,
    /// Kernel node id.
    pub node: i32,
    /// Base pages in the unit (1, or 512 for a 2 MiB huge page).
    pub pages: u32,
}

impl PageMove {
    pub fn base(addr: u64, node: i32) -> PageMove {
        PageMove { addr, node, pages: 1 }
    }
}

/// How moves are paced.
#[derive(Clone, Debug, PartialEq)]
pub struct MoveOptions {
    /// Wall time one `move_pages` call should take at most (about).
    pub batch_target: Duration,
    pub first_batch_pages: usize,
    pub max_batch_pages: usize,
    /// Bytes moved per second at most; `None`: no limit.
    pub rate_limit_bytes_per_s: Option<u64>,
    /// Extra attempts for a page that answered `-EBUSY`.
    pub busy_retries: u32,
    pub page_bytes: u64,
}

impl Default for MoveOptions {
    fn default() -> Self {
        MoveOptions {
            batch_target: Duration::from_millis(20),
            first_batch_pages: 256,
            max_batch_pages: 16384,
            rate_limit_bytes_per_s: None,
            busy_retries: 3,
            page_bytes: 4096,
        }
    }
}

/// Grows or shrinks the batch so one call takes about the target time: double while a call
/// takes under half the target, halve when it takes over the target.
#[derive(Clone, Debug, PartialEq)]
pub struct BatchSizer {
    pub pages: usize,
    max: usize,
    target: Duration,
}

impl BatchSizer {
    pub fn new(opts: &MoveOptions) -> BatchSizer {
        BatchSizer {
            pages: opts.first_batch_pages.clamp(1, opts.max_batch_pages.max(1)),
            max: opts.max_batch_pages.max(1),
            target: opts.batch_target,
        }
    }

    /// The last call moved `pages` pages in `took`.
    pub fn observe(&mut self, pages: usize, took: Duration) {
        if took > self.target {
            // Scale down to what would have fit, at least by half.
            let fit = (pages as f64 * self.target.as_secs_f64() / took.as_secs_f64()) as usize;
            self.pages = fit.min(self.pages / 2).max(1);
        } else if took < self.target / 2 && pages >= self.pages {
            self.pages = (self.pages * 2).min(self.max);
        }
    }
}

/// How long to sleep so that `bytes` moved since `elapsed` ago stay under `limit` bytes/s.
pub fn rate_limit_pause(bytes: u64, elapsed: Duration, limit_bytes_per_s: Option<u64>) -> Duration {
    match limit_bytes_per_s {
        Some(limit) if limit > 0 => Duration::from_secs_f64(bytes as f64 / limit as f64).saturating_sub(elapsed),
        _ => Duration::ZERO,
    }
}

/// What became of one page.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum PageOutcome {
    Moved,
    /// Still `-EBUSY` after the retries.
    Busy,
    /// Mapped by another process too (`-EACCES`).
    Shared,
    /// Not present or not mapped any more (`-ENOENT`, `-EFAULT`).
    NotPresent,
    /// The target node had no free page (`-ENOMEM`).
    NoMemory,
    /// The process exited before the page's batch.
    ProcessGone,
    /// Any other per-page errno.
    Failed,
}

impl PageOutcome {
    fn of_status(status: i32) -> PageOutcome {
        match -status {
            libc::EBUSY => PageOutcome::Busy,
            libc::EACCES => PageOutcome::Shared,
            libc::ENOENT | libc::EFAULT => PageOutcome::NotPresent,
            libc::ENOMEM => PageOutcome::NoMemory,
            _ => PageOutcome::Failed,
        }
    }
}

/// Totals of a move, in base pages.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct MoveStats {
    pub requested_pages: u64,
    /// Pages per outcome.
    pub outcomes: BTreeMap<PageOutcome, u64>,
    pub calls: u64,
    pub largest_batch_pages: u64,
    pub process_gone: bool,
    pub elapsed_s: f64,
}

impl MoveStats {
    pub fn count(&self, o: PageOutcome) -> u64 {
        self.outcomes.get(&o).copied().unwrap_or(0)
    }
}

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum MoveError {
    #[error("move_pages on process {pid}: permission denied (the kernel wants the right to read the process as a debugger would: the same user, or CAP_SYS_PTRACE; before Linux 4.13, the same user or CAP_SYS_NICE)")]
    Permission { pid: i32 },
    #[error("move_pages on process {pid} failed: {reason}")]
    Call { pid: i32, errno: i32, reason: String },
}

fn call_error(pid: i32, errno: i32) -> MoveError {
    match errno {
        libc::EPERM => MoveError::Permission { pid },
        _ => MoveError::Call { pid, errno, reason: errno_text(errno) },
    }
}

/// Where each page is: its node, or a negative errno (`-ENOENT`: not present). `None` if the
/// process exited.
pub fn locate(mover: &mut dyn PageMover, pid: i32, pages: &[u64], batch_pages: usize) -> Result<Option<Vec<i32>>, MoveError> {
    let mut status = vec![0i32; pages.len()];
    for (chunk, st) in pages.chunks(batch_pages.max(1)).zip(status.chunks_mut(batch_pages.max(1))) {
        match mover.move_pages(pid, chunk, None, st) {
            Ok(()) => {}
            Err(libc::ESRCH) => return Ok(None),
            Err(e) => return Err(call_error(pid, e)),
        }
    }
    Ok(Some(status))
}

/// Move `moves` in paced batches; `on_page` hears every unit's outcome (the decision log).
/// Units already on their node should be left out by the caller.
pub fn move_batched(
    mover: &mut dyn PageMover,
    pid: i32,
    moves: &[PageMove],
    opts: &MoveOptions,
    on_page: &mut dyn FnMut(&PageMove, PageOutcome),
) -> Result<MoveStats, MoveError> {
    let start = Instant::now();
    let mut stats = MoveStats { requested_pages: moves.iter().map(|m| m.pages as u64).sum(), ..Default::default() };
    let mut sizer = BatchSizer::new(opts);
    let mut pending: Vec<PageMove> = moves.to_vec();
    let mut moved_bytes = 0u64;
    let mut record = |stats: &mut MoveStats, m: &PageMove, o: PageOutcome| {
        *stats.outcomes.entry(o).or_insert(0) += m.pages as u64;
        on_page(m, o);
    };
    for attempt in 0..=opts.busy_retries {
        let mut busy = Vec::new();
        let mut i = 0;
        while i < pending.len() {
            let n = sizer.pages.min(pending.len() - i);
            let batch = &pending[i..i + n];
            let pages: Vec<u64> = batch.iter().map(|m| m.addr).collect();
            let nodes: Vec<i32> = batch.iter().map(|m| m.node).collect();
            let mut status = vec![0i32; n];
            let t = Instant::now();
            let r = mover.move_pages(pid, &pages, Some(&nodes), &mut status);
            sizer.observe(n, t.elapsed());
            stats.calls += 1;
            stats.largest_batch_pages = stats.largest_batch_pages.max(n as u64);
            match r {
                Ok(()) => {}
                Err(libc::ESRCH) => {
                    stats.process_gone = true;
                    for m in pending[i..].iter().chain(&busy) {
                        record(&mut stats, m, PageOutcome::ProcessGone);
                    }
                    stats.elapsed_s = start.elapsed().as_secs_f64();
                    return Ok(stats);
                }
                Err(e) => return Err(call_error(pid, e)),
            }
            for (k, m) in batch.iter().enumerate() {
                if status[k] == m.node {
                    moved_bytes += opts.page_bytes * m.pages as u64;
                    record(&mut stats, m, PageOutcome::Moved);
                } else if status[k] == -libc::EBUSY && attempt < opts.busy_retries {
                    busy.push(*m);
                } else if status[k] >= 0 {
                    // Landed elsewhere (the kernel fell back): count it as failed to place.
                    record(&mut stats, m, PageOutcome::Failed);
                } else {
                    record(&mut stats, m, PageOutcome::of_status(status[k]));
                }
            }
            i += n;
            std::thread::sleep(rate_limit_pause(moved_bytes, start.elapsed(), opts.rate_limit_bytes_per_s));
        }
        if busy.is_empty() {
            break;
        }
        pending = busy;
    }
    stats.elapsed_s = start.elapsed().as_secs_f64();
    Ok(stats)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fake(pages: u64, node: i32) -> FakePageMover {
        FakePageMover { location: (0..pages).map(|p| (p * 4096, node)).collect(), ..Default::default() }
    }

    fn moves(pages: u64, to: i32) -> Vec<PageMove> {
        (0..pages).map(|p| PageMove::base(p * 4096, to)).collect()
    }

    #[test]
    fn pages_move_in_batches_and_every_outcome_is_heard() {
        let mut f = fake(1000, 0);
        let opts = MoveOptions { first_batch_pages: 100, max_batch_pages: 400, ..Default::default() };
        let mut heard = Vec::new();
        let s = move_batched(&mut f, 42, &moves(1000, 1), &opts, &mut |m, o| heard.push((m.addr, m.node, o))).unwrap();
        assert_eq!(s.count(PageOutcome::Moved), 1000);
        assert!(f.location.values().all(|&n| n == 1));
        // A fake call takes no time: the batch doubles up to the cap, 100, 200, 400, 300.
        let sizes: Vec<usize> = f.calls.iter().map(|c| c.1.len()).collect();
        assert_eq!(sizes, vec![100, 200, 400, 300]);
        assert!(f.calls.iter().all(|c| c.0 == 42 && c.2.as_ref().unwrap().iter().all(|&n| n == 1)));
        assert_eq!(heard.len(), 1000);
        assert_eq!(s.largest_batch_pages, 400);
    }

    #[test]
    fn busy_pages_are_retried_then_given_up_shared_ones_skipped() {
        let mut f = fake(10, 0);
        f.busy.insert(0, 2); // free on the third try
        f.busy.insert(4096, 99); // never
        f.shared.push(2 * 4096);
        f.location.remove(&(3 * 4096)); // unmapped meanwhile
        let s = move_batched(&mut f, 1, &moves(10, 1), &MoveOptions::default(), &mut |_, _| {}).unwrap();
        assert_eq!(s.count(PageOutcome::Moved), 7);
        assert_eq!(s.count(PageOutcome::Busy), 1);
        assert_eq!(s.count(PageOutcome::Shared), 1);
        assert_eq!(s.count(PageOutcome::NotPresent), 1);
        assert_eq!(f.location[&0], 1);
        // One call, then three retries: both busy pages twice, then the one that stays busy.
        assert_eq!(f.calls.iter().map(|c| c.1.len()).collect::<Vec<_>>(), vec![10, 2, 2, 1]);
    }

    #[test]
    fn a_huge_page_unit_counts_all_its_base_pages() {
        let mut f = fake(1, 0);
        let s = move_batched(&mut f, 1, &[PageMove { addr: 0, node: 1, pages: 512 }], &MoveOptions::default(), &mut |_, _| {}).unwrap();
        assert_eq!((s.requested_pages, s.count(PageOutcome::Moved)), (512, 512));
        assert_eq!(f.calls[0].1, vec![0], "one address asks for the whole huge page");
    }

    #[test]
    fn a_process_that_exits_midway_ends_the_move_without_error() {
        let mut f = fake(1000, 0);
        f.exits_after_calls = Some(1);
        let opts = MoveOptions { first_batch_pages: 100, ..Default::default() };
        let s = move_batched(&mut f, 1, &moves(1000, 1), &opts, &mut |_, _| {}).unwrap();
        assert!(s.process_gone);
        assert_eq!(s.count(PageOutcome::Moved), 100);
        assert_eq!(s.count(PageOutcome::ProcessGone), 900);
        assert_eq!(locate(&mut f, 1, &[0], 10).unwrap(), None);
    }

    #[test]
    fn permission_and_other_call_errors_are_errors() {
        let mut f = fake(4, 0);
        f.fail_with = Some(libc::EPERM);
        let e = move_batched(&mut f, 9, &moves(4, 1), &MoveOptions::default(), &mut |_, _| {}).unwrap_err();
        assert_eq!(e, MoveError::Permission { pid: 9 });
        f.fail_with = Some(libc::ENODEV);
        let e = locate(&mut f, 9, &[0], 10).unwrap_err().to_string();
        assert_eq!(e, "move_pages on process 9 failed: No such device");
    }

    #[test]
    fn locate_reports_nodes_and_absent_pages() {
        let mut f = fake(3, 1);
        f.location.insert(4096, 0);
        let st = locate(&mut f, 5, &[0, 4096, 8192, 99 * 4096], 2).unwrap().unwrap();
        assert_eq!(st, vec![1, 0, 1, -libc::ENOENT]);
        assert_eq!(f.calls.len(), 2);
        assert!(f.calls.iter().all(|c| c.2.is_none()));
    }

    #[test]
    fn batch_sizer_holds_a_call_near_the_target_time() {
        let opts = MoveOptions { first_batch_pages: 1000, max_batch_pages: 8000, ..Default::default() };
        let mut b = BatchSizer::new(&opts);
        b.observe(1000, Duration::from_millis(5));
        assert_eq!(b.pages, 2000);
        b.observe(2000, Duration::from_millis(80)); // 4x over: scale to what fits
        assert_eq!(b.pages, 500);
        b.observe(500, Duration::from_millis(15)); // within target: keep
        assert_eq!(b.pages, 500);
        b.observe(100, Duration::from_millis(1)); // a short tail batch says nothing
        assert_eq!(b.pages, 500);
        b.observe(500, Duration::from_secs(10));
        assert_eq!(b.pages, 1);
    }

    #[test]
    fn rate_limit_pause_keeps_bytes_per_second_under_the_limit() {
        assert_eq!(rate_limit_pause(100 << 20, Duration::from_millis(500), Some(100 << 20)), Duration::from_millis(500));
        assert_eq!(rate_limit_pause(10 << 20, Duration::from_secs(1), Some(100 << 20)), Duration::ZERO);
        assert_eq!(rate_limit_pause(u64::MAX, Duration::ZERO, None), Duration::ZERO);
    }

    /// The real call on this host: where this test's own pages are (node 0 on a one-node
    /// host), and an unmapped address.
    #[test]
    fn the_system_call_locates_this_processes_pages() {
        let buf = vec![1u8; 8192];
        let page = (buf.as_ptr() as u64) & !4095;
        // SAFETY: getpid has no preconditions.
        let pid = unsafe { libc::getpid() };
        let st = locate(&mut SystemPageMover::for_process(pid as u32).unwrap(), pid, &[page, 4096], 16).unwrap().unwrap();
        assert!(st[0] >= 0, "a touched heap page has a node: {st:?}");
        assert!(st[1] < 0, "address 4096 is not mapped: {st:?}");
        std::hint::black_box(&buf);
        // A mover bound to another start time treats the pid as gone.
        let mut stale = SystemPageMover { expect_start: Some(u64::MAX) };
        assert_eq!(locate(&mut stale, pid, &[page], 16).unwrap(), None);
    }
}
