//! The user-space hinting-fault sampler for programs numalab launches (docs/live.md, "The
//! hinting-fault sampler"): the library `shim/numalab_hint.c`, built into numalab, is
//! preloaded into the program; it protects a bounded set of the program's private anonymous
//! pages — the pages the engine's scan marked, once the engine hands them over
//! ([`AccessObserver::arm`]), else a rotating set of its own — and writes one record per first
//! access to them into a ring shared with the agent (a memfd both map). This side creates the ring and the library's file, gives the
//! program the environment that loads it, and reads the records.
//!
//! Ring layout (must match the C file): a 4096-byte header of u64 words (`H_*` below; the
//! agent writes the settings at words 64..68), then the request area (4096 page addresses:
//! the set the agent asks the library to protect, [`AccessObserver::arm`]), then the excluded
//! area (1024 pairs `lo, hi` of u64: the ranges the library never protects, thread stacks and
//! its own data, each written before `H_EXCL_LEN` is raised past it, never changed after;
//! [`AccessObserver::unwatchable`]), then `capacity` records of 32 bytes:
//! `seq` (index + 1 once written), `addr`, `time_ns` (CLOCK_MONOTONIC), `tid` u32, `cpu` u16,
//! `write` u16. Writers reserve a slot with a compare-and-swap on `reserve` that never runs
//! more than `capacity` ahead of `tail` (a full ring drops and counts); the agent consumes in
//! index order and publishes `tail`. The request area is written by the agent only when the
//! library has copied the previous set (`H_ARM_SEEN == H_ARM_GEN`), then `H_ARM_LEN`, then
//! `H_ARM_GEN` is raised (release).

use super::observe::{AccessObserver, Observation, ObserveError};
use crate::act::preload::{handover, Handover, HandoverError};
use std::ffi::OsString;
use std::sync::atomic::{AtomicU64, Ordering};

/// The library, as built by build.rs (empty without a C compiler).
static LIBRARY: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/libnumalab_hint.so"));

const MAGIC: u64 = 0x3130_544e_4948_4c4e; // "NLHINT01"
const HEADER_BYTES: usize = 4096;
const RECORD_BYTES: usize = 32;
const H_MAGIC: usize = 0;
const H_CAPACITY: usize = 1;
const H_RESERVE: usize = 2;
const H_TAIL: usize = 3;
const H_DROPPED: usize = 4;
const H_PROTECT_ROUNDS: usize = 5;
const H_PAGES_PROTECTED: usize = 6;
const H_RESTORED_UNTOUCHED: usize = 7;
const H_MAP_LIMIT: usize = 8;
const H_SYSCALL_SAVES: usize = 9;
const H_CHAINED: usize = 10;
const H_STATUS: usize = 11;
const H_SKIPPED_INFLIGHT: usize = 12;
const H_HELPER_TID: usize = 13;
const H_FAULTS: usize = 14;
const H_ARMED_PAGES: usize = 15;
const H_ARM_REJECTED: usize = 16;
const H_ARM_SEEN: usize = 17;
const H_MPROTECT_RUNS: usize = 18;
const H_EXCL_LEN: usize = 19;
const H_PERIOD_NS: usize = 64;
const H_MAX_PAGES: usize = 65;
const H_MIN_MAPPING_BYTES: usize = 66;
const H_ARM_GEN: usize = 67;
const H_ARM_LEN: usize = 68;
/// Page addresses the request area holds (the library's `MAX_SLOTS`).
const REQUEST_PAGES: usize = 4096;
const REQUEST_BYTES: usize = REQUEST_PAGES * 8;
/// Excluded ranges the library publishes (its `MAX_EXCL`).
const EXCL_RANGES: usize = 1024;
const EXCL_BYTES: usize = EXCL_RANGES * 16;
/// Where the record ring starts.
const RING_OFF: usize = HEADER_BYTES + REQUEST_BYTES + EXCL_BYTES;
const REASON_OFF: usize = 1024;

/// Environment variables the program is started with.
pub type ChildEnv = Vec<(OsString, OsString)>;

/// The library's settings.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HintConfig {
    /// How often the protected set rotates.
    pub period_ns: u64,
    /// Pages protected at a time (at most 4096; fewer near `vm.max_map_count`).
    pub max_pages: u64,
    /// Only mappings at least this large are sampled.
    pub min_mapping_bytes: u64,
    /// Records the ring holds (a power of two).
    pub capacity: u64,
}

impl Default for HintConfig {
    fn default() -> Self {
        // [A] 512 pages: 1024 mappings at most beside the program's own, 2 MiB of memory
        // watched at a time; 1 MiB mappings and up: the data of a program, not its small
        // allocations; 65536 records (2 MiB): several periods of every page faulting.
        HintConfig { period_ns: 100_000_000, max_pages: 512, min_mapping_bytes: 1 << 20, capacity: 1 << 16 }
    }
}

/// Whether the sampler can run on this host (it is for launched programs only).
pub fn check_hint() -> Result<(), String> {
    if LIBRARY.is_empty() {
        return Err("not built (numalab was built without a C compiler for its hinting-fault library)".into());
    }
    if !cfg!(target_os = "linux") {
        return Err("Linux only".into());
    }
    Ok(())
}

/// The agent's side: the ring and the library's file, until the program has started.
pub struct HintObserver {
    handover: Handover,
    base: *mut u8,
    capacity: u64,
    max_pages: u64,
    cpu_node: Vec<Option<u32>>,
    start_ns: u64,
    polls: u64,
    started_at_poll: Option<u64>,
}

// SAFETY: the mapping is owned by the observer and only read through &mut self.
unsafe impl Send for HintObserver {}

impl HintObserver {
    /// Create the ring and the library's file; returns the observer and the environment the
    /// program must be started with. `cpu_node`: kernel node of each CPU.
    pub fn prepare(
        cfg: HintConfig,
        cpu_node: Vec<Option<u32>>,
        start_ns: u64,
    ) -> Result<(HintObserver, Vec<(OsString, OsString)>), ObserveError> {
        let fail = |reason: String| ObserveError::Unavailable { sampler: "hinting-faults", reason };
        check_hint().map_err(fail)?;
        if !cfg.capacity.is_power_of_two() || cfg.max_pages == 0 || cfg.period_ns == 0 {
            return Err(fail("capacity must be a power of two, pages and period > 0".into()));
        }
        let map_bytes = RING_OFF + cfg.capacity as usize * RECORD_BYTES;
        let handover = handover(LIBRARY, c"numalab-hint.so", c"numalab-hint-ring", map_bytes).map_err(|e| match e {
            HandoverError::Memfd(_) => fail(e.to_string()),
            HandoverError::Setup(e) => fail(format!("cannot set up the shared ring: {e}")),
        })?;
        let o = HintObserver {
            base: handover.base(),
            handover,
            capacity: cfg.capacity,
            max_pages: cfg.max_pages.min(REQUEST_PAGES as u64),
            cpu_node,
            start_ns,
            polls: 0,
            started_at_poll: None,
        };
        o.word(H_CAPACITY).store(cfg.capacity, Ordering::Relaxed);
        o.word(H_PERIOD_NS).store(cfg.period_ns, Ordering::Relaxed);
        o.word(H_MAX_PAGES).store(cfg.max_pages, Ordering::Relaxed);
        o.word(H_MIN_MAPPING_BYTES).store(cfg.min_mapping_bytes, Ordering::Relaxed);
        o.word(H_MAGIC).store(MAGIC, Ordering::Release);
        let env = vec![
            ("LD_PRELOAD".into(), o.handover.preload()),
            ("NUMALAB_HINT_FD".into(), o.handover.shared_fd().to_string().into()),
            ("NUMALAB_HINT_PPID".into(), std::process::id().to_string().into()),
        ];
        Ok((o, env))
    }

    /// After the program started: the agent's copies of the inherited fds are closed.
    pub fn close_child_fds(&mut self) {
        self.handover.close_child_fds();
    }

    fn word(&self, i: usize) -> &AtomicU64 {
        // SAFETY: i < 512, inside the 4096-byte header of the live mapping; u64-aligned.
        unsafe { &*(self.base.add(i * 8) as *const AtomicU64) }
    }

    fn reason(&self) -> String {
        // SAFETY: 256 bytes at REASON_OFF inside the header.
        let bytes = unsafe { std::slice::from_raw_parts(self.base.add(REASON_OFF), 256) };
        let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
        String::from_utf8_lossy(&bytes[..end]).into_owned()
    }

    /// The library's thread (it is the agent's, not the program's: the engine can leave it out).
    pub fn helper_tid(&self) -> Option<i32> {
        let t = self.word(H_HELPER_TID).load(Ordering::Acquire);
        (t != 0).then_some(t as i32)
    }
}

/// Polls before a program that has not loaded the library is reported: 2 s at 100 ms.
const LOAD_POLLS: u64 = 20;

impl AccessObserver for HintObserver {
    fn name(&self) -> &'static str {
        "hinting-faults"
    }
    fn limits(&self) -> &'static str {
        "the first access to each of a few hundred protected pages per period, in mappings of 1 MiB and more; no kernel accesses; launched, dynamically linked programs only"
    }
    fn poll(&mut self, out: &mut Vec<Observation>) -> Result<(), ObserveError> {
        self.polls += 1;
        match self.word(H_STATUS).load(Ordering::Acquire) {
            0 if self.polls > LOAD_POLLS => {
                return Err(ObserveError::Failed {
                    sampler: "hinting-faults",
                    reason: "the program did not load the hinting-fault library (statically linked, setuid, or it clears LD_PRELOAD)"
                        .into(),
                })
            }
            0 => return Ok(()),
            2 => return Err(ObserveError::Failed { sampler: "hinting-faults", reason: format!("the library refused: {}", self.reason()) }),
            _ => {
                self.started_at_poll.get_or_insert(self.polls);
            }
        }
        let tail_w = self.word(H_TAIL);
        let mut tail = tail_w.load(Ordering::Relaxed);
        loop {
            // SAFETY: the record of index `tail` inside the ring of `capacity` records.
            let rec = unsafe { self.base.add(RING_OFF + (tail & (self.capacity - 1)) as usize * RECORD_BYTES) };
            // SAFETY: u64-aligned words of the record; seq is read with acquire ordering
            // before the fields the writer stored before releasing it.
            let (addr, time_ns, tid, cpu, write) = unsafe {
                let seq = (*(rec as *const AtomicU64)).load(Ordering::Acquire);
                if seq != tail + 1 {
                    break;
                }
                (
                    std::ptr::read_volatile(rec.add(8) as *const u64),
                    std::ptr::read_volatile(rec.add(16) as *const u64),
                    std::ptr::read_volatile(rec.add(24) as *const u32),
                    std::ptr::read_volatile(rec.add(28) as *const u16),
                    std::ptr::read_volatile(rec.add(30) as *const u16),
                )
            };
            let cpu = u32::from(cpu);
            if let Some(Some(node)) = self.cpu_node.get(cpu as usize) {
                out.push(Observation {
                    tid: tid as i32,
                    cpu,
                    cpu_node: *node,
                    addr,
                    page_node: None,
                    write: write != 0,
                    time_ns: time_ns.saturating_sub(self.start_ns),
                });
            }
            tail += 1;
            tail_w.store(tail, Ordering::Release);
        }
        Ok(())
    }
    /// The library protects these pages (those of them in its eligible mappings, at most
    /// `max_pages`) at its next period, in place of its own rotation, until they fault or the
    /// next set comes; `false` while it has not yet taken the previous set.
    fn arm(&mut self, addrs: &[u64]) -> bool {
        let seen = self.word(H_ARM_SEEN).load(Ordering::Acquire);
        let gen = self.word(H_ARM_GEN).load(Ordering::Relaxed);
        if seen != gen {
            return false;
        }
        let n = addrs.len().min(REQUEST_PAGES);
        for (i, &a) in addrs[..n].iter().enumerate() {
            // SAFETY: word i < 4096 of the request area, inside the live mapping; the library
            // reads it only after the release store of H_ARM_GEN below.
            unsafe { std::ptr::write_volatile(self.base.add(HEADER_BYTES + i * 8) as *mut u64, a) };
        }
        self.word(H_ARM_LEN).store(n as u64, Ordering::Relaxed);
        self.word(H_ARM_GEN).store(gen + 1, Ordering::Release);
        true
    }
    fn arm_capacity(&self) -> usize {
        self.max_pages as usize
    }
    /// The library's excluded ranges: the stacks of the threads it saw created (guards
    /// included) and its own data. It refuses their pages, so a set holding them would be
    /// wasted (docs/live.md, "The agent chooses the protected pages").
    fn unwatchable(&mut self, out: &mut Vec<(u64, u64)>) {
        let n = (self.word(H_EXCL_LEN).load(Ordering::Acquire) as usize).min(EXCL_RANGES);
        for i in 0..n {
            // SAFETY: pair i < 1024 of the excluded area, inside the live mapping; written
            // before the release store of H_EXCL_LEN that covers it, never changed after.
            let (lo, hi) = unsafe {
                let at = self.base.add(HEADER_BYTES + REQUEST_BYTES + i * 16);
                (std::ptr::read_volatile(at as *const u64), std::ptr::read_volatile(at.add(8) as *const u64))
            };
            out.push((lo, hi));
        }
    }
    fn counters(&self) -> Vec<(&'static str, u64)> {
        let w = |i| self.word(i).load(Ordering::Relaxed);
        vec![
            ("records", w(H_RESERVE)),
            ("faults", w(H_FAULTS)),
            ("dropped_ring_full", w(H_DROPPED)),
            ("protect_rounds", w(H_PROTECT_ROUNDS)),
            ("pages_protected", w(H_PAGES_PROTECTED)),
            ("restored_untouched", w(H_RESTORED_UNTOUCHED)),
            ("restored_for_system_calls", w(H_SYSCALL_SAVES)),
            ("rounds_skipped_system_call_in_flight", w(H_SKIPPED_INFLIGHT)),
            ("map_count_limit_hits", w(H_MAP_LIMIT)),
            ("faults_passed_to_the_program", w(H_CHAINED)),
            ("sets_taken_from_the_agent", w(H_ARM_SEEN)),
            ("pages_protected_for_the_agent", w(H_ARMED_PAGES)),
            ("agent_pages_not_eligible", w(H_ARM_REJECTED)),
            ("mprotect_runs_for_the_agent", w(H_MPROTECT_RUNS)),
        ]
    }
}
