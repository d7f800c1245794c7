//! The measurement kernels and their memory: anonymous buffers bound to one node (huge pages
//! where available), the dependent pointer chase, the streaming read and the STREAM triad,
//! and the pinning of the calling thread (docs/calibration.md, "Measuring your own machine").
//!
//! Every kernel reads through volatile loads or hands its result to `std::hint::black_box`,
//! so the compiler can neither drop nor shorten it, and every time comes from
//! `std::time::Instant` around many iterations.

use crate::act::mempolicy::{KernelMempolicy, MPOL_BIND, MPOL_DEFAULT};
use crate::act::pages::{PageMover, SystemPageMover};
use crate::act::syscall::{cpu_mask, errno_text, SysCall};
use numalab_policy::MempolicyMode;
use std::hint::black_box;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

/// Bytes of one cache line: one chase element per line.
pub const LINE_BYTES: usize = 64;
const WORDS_PER_LINE: usize = LINE_BYTES / 8;
const HUGE_PAGE_BYTES: usize = 2 << 20;

/// What backs a buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Backing {
    /// `MAP_HUGETLB` (pages from the hugetlb pool, 2 MiB).
    HugeTlb,
    /// `madvise(MADV_HUGEPAGE)` accepted and transparent huge pages enabled: the kernel backs
    /// the range with 2 MiB pages where it can.
    Thp,
    /// Base pages only.
    Base,
}

impl Backing {
    pub fn as_str(self) -> &'static str {
        match self {
            Backing::HugeTlb => "hugetlb",
            Backing::Thp => "thp",
            Backing::Base => "base",
        }
    }
}

/// A failed system call of a measurement.
#[derive(Debug, thiserror::Error)]
#[error("{call} failed for {what}: {reason}")]
pub struct KernelCallError {
    pub call: &'static str,
    pub what: String,
    pub reason: String,
}

fn refused(call: &'static str, what: impl Into<String>, errno: i32) -> KernelCallError {
    KernelCallError { call, what: what.into(), reason: errno_text(errno) }
}

/// Pin the calling thread to one CPU (`sched_setaffinity`, the live crate's call).
pub fn pin_to_cpu(cpu: u32) -> Result<(), KernelCallError> {
    SysCall::SchedSetaffinity { tid: 0, mask: cpu_mask(&[cpu]) }.invoke().map_err(|e| refused("sched_setaffinity", format!("CPU {cpu}"), e))
}

/// Bind the calling thread's future allocations to one node (`set_mempolicy(MPOL_BIND)`),
/// or with `None` restore the default policy.
pub fn bind_memory(node: Option<u32>) -> Result<(), KernelCallError> {
    let call = match node {
        Some(n) => {
            let k = KernelMempolicy { mode: MempolicyMode::Bind, nodes: vec![n], caveat: None };
            let (nodemask, maxnode) = k.mask_and_maxnode();
            SysCall::SetMempolicy { mode: MPOL_BIND, nodemask, maxnode }
        }
        None => SysCall::SetMempolicy { mode: MPOL_DEFAULT, nodemask: vec![], maxnode: 0 },
    };
    call.invoke().map_err(|e| refused("set_mempolicy", node.map_or("the default policy".into(), |n| format!("node {n}")), e))
}

/// The CPU the calling thread runs on (`sched_getcpu`).
pub fn current_cpu() -> Option<u32> {
    // SAFETY: sched_getcpu takes no arguments.
    let c = unsafe { libc::sched_getcpu() };
    (c >= 0).then_some(c as u32)
}

/// The CPUs this process may run on (`sched_getaffinity`).
pub fn allowed_cpus() -> Vec<u32> {
    // SAFETY: a zeroed cpu_set_t of the size passed.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    if unsafe { libc::sched_getaffinity(0, std::mem::size_of_val(&set), &mut set) } != 0 {
        return Vec::new();
    }
    (0..libc::CPU_SETSIZE as u32).filter(|&c| unsafe { libc::CPU_ISSET(c as usize, &set) }).collect()
}

/// An anonymous private mapping, unmapped on drop.
pub struct Buffer {
    ptr: *mut u8,
    len: usize,
    pub backing: Backing,
}

// SAFETY: the mapping is plain memory owned by the Buffer; the kernels that share one across
// threads only read it.
unsafe impl Send for Buffer {}
unsafe impl Sync for Buffer {}

impl Buffer {
    /// Map `len` bytes (rounded up to 2 MiB). With `hugetlb`, `MAP_HUGETLB` is tried first
    /// (it fails when the pool is empty); then transparent huge pages are asked for with
    /// `madvise`. Pages are placed when first touched, under the calling thread's policy.
    pub fn map(len: usize, hugetlb: bool) -> Result<Buffer, KernelCallError> {
        let len = len.div_ceil(HUGE_PAGE_BYTES).max(1) * HUGE_PAGE_BYTES;
        let prot = libc::PROT_READ | libc::PROT_WRITE;
        let flags = libc::MAP_PRIVATE | libc::MAP_ANONYMOUS;
        if hugetlb {
            // SAFETY: a fresh anonymous mapping; no existing memory is touched.
            let p = unsafe { libc::mmap(std::ptr::null_mut(), len, prot, flags | libc::MAP_HUGETLB, -1, 0) };
            if p != libc::MAP_FAILED {
                return Ok(Buffer { ptr: p as *mut u8, len, backing: Backing::HugeTlb });
            }
        }
        // SAFETY: as above.
        let p = unsafe { libc::mmap(std::ptr::null_mut(), len, prot, flags, -1, 0) };
        if p == libc::MAP_FAILED {
            return Err(refused("mmap", format!("{} MiB", len >> 20), std::io::Error::last_os_error().raw_os_error().unwrap_or(0)));
        }
        // SAFETY: advice on the mapping just created.
        let thp = unsafe { libc::madvise(p, len, libc::MADV_HUGEPAGE) } == 0 && thp_enabled();
        Ok(Buffer { ptr: p as *mut u8, len, backing: if thp { Backing::Thp } else { Backing::Base } })
    }

    /// [`Buffer::map`], then the range bound to `node` with `mbind(MPOL_BIND)`: its pages
    /// are placed there when first touched and stay there (NUMA balancing does not move
    /// pages of a range bound without `MPOL_F_NUMA_BALANCING`), whichever thread touches them.
    pub fn map_on(len: usize, hugetlb: bool, node: u32) -> Result<Buffer, KernelCallError> {
        let b = Buffer::map(len, hugetlb)?;
        let k = KernelMempolicy { mode: MempolicyMode::Bind, nodes: vec![node], caveat: None };
        let (mask, maxnode) = k.mask_and_maxnode();
        // SAFETY: the range is the mapping just created; the mask outlives the call.
        let r = unsafe {
            libc::syscall(
                libc::SYS_mbind,
                b.ptr as libc::c_long,
                b.len as libc::c_ulong,
                MPOL_BIND as libc::c_long,
                mask.as_ptr(),
                maxnode as libc::c_ulong,
                0 as libc::c_uint,
            )
        };
        if r != 0 {
            return Err(refused("mbind", format!("node {node}"), std::io::Error::last_os_error().raw_os_error().unwrap_or(0)));
        }
        Ok(b)
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The buffer as 64-bit words.
    pub fn words(&self) -> &[u64] {
        // SAFETY: the mapping is len bytes, page aligned, readable, and lives as long as self.
        unsafe { std::slice::from_raw_parts(self.ptr as *const u64, self.len / 8) }
    }

    pub fn words_mut(&mut self) -> &mut [u64] {
        // SAFETY: as above, writable, and borrowed mutably through self.
        unsafe { std::slice::from_raw_parts_mut(self.ptr as *mut u64, self.len / 8) }
    }

    pub fn f64s(&self) -> &[f64] {
        // SAFETY: as `words`; every bit pattern is a valid f64.
        unsafe { std::slice::from_raw_parts(self.ptr as *const f64, self.len / 8) }
    }

    pub fn f64s_mut(&mut self) -> &mut [f64] {
        // SAFETY: as above; every bit pattern is a valid f64.
        unsafe { std::slice::from_raw_parts_mut(self.ptr as *mut f64, self.len / 8) }
    }

    /// Node of up to `samples` evenly spaced pages (`move_pages` query on this process);
    /// a negative entry is the errno the kernel gave for that page.
    pub fn page_nodes(&self, samples: usize) -> Result<Vec<i32>, KernelCallError> {
        let pages = self.len / 4096;
        let n = samples.min(pages).max(1);
        let addrs: Vec<u64> = (0..n).map(|k| self.ptr as u64 + (k * pages / n) as u64 * 4096).collect();
        let mut status = vec![0i32; n];
        SystemPageMover::default().move_pages(0, &addrs, None, &mut status).map_err(|e| refused("move_pages", "this process", e))?;
        Ok(status)
    }
}

impl Drop for Buffer {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly the mapping this Buffer owns.
        unsafe { libc::munmap(self.ptr as *mut libc::c_void, self.len) };
    }
}

/// Transparent huge pages are `always` or `madvise` (not `never`, and the file exists).
pub fn thp_enabled() -> bool {
    std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/enabled").map(|t| !t.contains("[never]")).unwrap_or(false)
}

/// A deterministic generator for the permutation (xorshift64*; no thread_rng).
pub struct XorShift(u64);

impl XorShift {
    pub fn new(seed: u64) -> XorShift {
        XorShift(seed.max(1))
    }

    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Uniform in `0..n` (n > 0), by rejection.
    pub fn below(&mut self, n: u64) -> u64 {
        let zone = u64::MAX - u64::MAX % n;
        loop {
            let v = self.next_u64();
            if v < zone {
                return v % n;
            }
        }
    }
}

/// Write a random cyclic permutation (Sattolo's algorithm) of the buffer's lines into the
/// first word of each line: following `next = words[line * 8]` from any line visits every
/// line once before coming back. Returns the line count.
pub fn build_chase(words: &mut [u64], seed: u64) -> usize {
    let lines = words.len() / WORDS_PER_LINE;
    for k in 0..lines {
        words[k * WORDS_PER_LINE] = k as u64;
    }
    let mut rng = XorShift::new(seed);
    for i in (1..lines).rev() {
        let j = rng.below(i as u64) as usize;
        words.swap(i * WORDS_PER_LINE, j * WORDS_PER_LINE);
    }
    lines
}

/// `loads` dependent loads along the permutation from line `start`; returns the line reached
/// (so the caller can continue) and the time taken. Each load's address is the previous
/// load's value, so no two loads overlap.
pub fn chase(words: &[u64], start: usize, loads: u64) -> (usize, Duration) {
    let base = words.as_ptr();
    let mut p = start;
    let t = Instant::now();
    for _ in 0..loads {
        // SAFETY: every stored index is a line of this buffer (build_chase), so p * 8 is in
        // bounds.
        p = unsafe { std::ptr::read_volatile(base.add(p * WORDS_PER_LINE)) } as usize;
    }
    let took = t.elapsed();
    (black_box(p), took)
}

/// Sum of the words (a streaming read); the caller times it. Every word is a volatile load
/// (four independent sums, so loads overlap): the compiler can neither drop nor merge them.
pub fn read(words: &[u64]) -> u64 {
    let p = words.as_ptr();
    let n = words.len();
    let mut s = [0u64; 4];
    let mut i = 0;
    // SAFETY: every index read is below `n`, the slice's length.
    unsafe {
        while i + 4 <= n {
            s[0] = s[0].wrapping_add(std::ptr::read_volatile(p.add(i)));
            s[1] = s[1].wrapping_add(std::ptr::read_volatile(p.add(i + 1)));
            s[2] = s[2].wrapping_add(std::ptr::read_volatile(p.add(i + 2)));
            s[3] = s[3].wrapping_add(std::ptr::read_volatile(p.add(i + 3)));
            i += 4;
        }
        while i < n {
            s[0] = s[0].wrapping_add(std::ptr::read_volatile(p.add(i)));
            i += 1;
        }
    }
    black_box(s[0].wrapping_add(s[1]).wrapping_add(s[2]).wrapping_add(s[3]))
}

/// `spins` rounds of an OpenMP runtime's barrier wait on a flag that never changes, as
/// libgomp's `do_spin` runs them: a relaxed load of the flag, then the spin-loop hint (PAUSE
/// on x86); returns the time taken (docs/calibration.md, "Measuring your own machine").
pub fn spin_wait(spins: u64) -> Duration {
    let flag = AtomicU32::new(0);
    let flag = black_box(&flag);
    let t = Instant::now();
    for _ in 0..spins {
        if flag.load(Ordering::Relaxed) != 0 {
            break;
        }
        std::hint::spin_loop();
    }
    t.elapsed()
}

/// STREAM triad `a[i] = b[i] + scalar * c[i]`.
pub fn triad(a: &mut [f64], b: &[f64], c: &[f64], scalar: f64) {
    for ((x, y), z) in a.iter_mut().zip(b).zip(c) {
        *x = y + scalar * z;
    }
    black_box(a.as_ptr());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_chase_visits_every_line_once_per_cycle() {
        let mut words = vec![0u64; 1000 * WORDS_PER_LINE];
        let lines = build_chase(&mut words, 7);
        assert_eq!(lines, 1000);
        let mut seen = vec![false; lines];
        let mut p = 0usize;
        for _ in 0..lines {
            assert!(!seen[p], "line {p} visited twice");
            seen[p] = true;
            p = words[p * WORDS_PER_LINE] as usize;
        }
        assert_eq!(p, 0, "one cycle through every line");
        assert!(seen.iter().all(|&s| s));
        // The chase kernel follows the same cycle.
        assert_eq!(chase(&words, 0, lines as u64).0, 0);
        assert_ne!(chase(&words, 0, 1).0, 0);
    }

    #[test]
    fn the_permutation_is_deterministic_per_seed() {
        let mut a = vec![0u64; 64 * WORDS_PER_LINE];
        let mut b = a.clone();
        build_chase(&mut a, 3);
        build_chase(&mut b, 3);
        assert_eq!(a, b);
        build_chase(&mut b, 4);
        assert_ne!(a, b);
    }

    #[test]
    fn read_and_triad_compute_what_they_say() {
        let w: Vec<u64> = (1..=10).collect();
        assert_eq!(read(&w), 55);
        let mut a = vec![0.0; 5];
        triad(&mut a, &[1.0; 5], &[2.0; 5], 3.0);
        assert_eq!(a, vec![7.0; 5]);
    }

    #[test]
    fn a_buffer_is_mapped_bound_and_located() {
        // On any Linux host: map 4 MiB under a bind to the node of CPU 0's memory (node 0
        // exists on every NUMA kernel), touch it, and find every sampled page on that node.
        std::thread::spawn(|| {
            bind_memory(Some(0)).unwrap();
            let mut b = Buffer::map(3 << 20, false).unwrap();
            assert_eq!(b.len(), 4 << 20, "rounded up to 2 MiB");
            b.words_mut().iter_mut().for_each(|w| *w = 1);
            bind_memory(None).unwrap();
            let nodes = b.page_nodes(16).unwrap();
            assert_eq!(nodes, vec![0; 16]);
            assert_eq!(read(b.words()), (4 << 20) / 8);
            // mbind on the range alone, the thread's policy left at its default.
            let mut b = Buffer::map_on(2 << 20, false, 0).unwrap();
            b.words_mut().fill(2);
            assert_eq!(b.page_nodes(8).unwrap(), vec![0; 8]);
        })
        .join()
        .unwrap();
    }
}
