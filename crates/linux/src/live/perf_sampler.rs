//! Hardware sampling of memory accesses with `perf_event_open(2)` (docs/live.md, "The perf
//! sampler"): a memory-sampling PMU event per thread of the target, each with a ring buffer the
//! kernel fills with `PERF_RECORD_SAMPLE` records carrying the thread, the CPU, the time and
//! the data address (`PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_ADDR | PERF_SAMPLE_CPU
//! | PERF_SAMPLE_DATA_SRC`).
//!
//! Events, by what the host's PMU offers (found under `/sys/bus/event_source/devices/`):
//! * Intel PEBS load latency: the `mem-loads` event of the `cpu` (or hybrid `cpu_core`) PMU,
//!   e.g. `event=0xcd,umask=0x1,ldlat=3`, encoded through the PMU's `format/` files, opened
//!   with `precise_ip = 2` (PEBS).
//! * AMD IBS op: the `ibs_op` PMU (its own `type`), config 0.
//! * Arm SPE (`arm_spe_N`) writes its records to the AUX area in SPE's own packet format, not
//!   as `PERF_RECORD_SAMPLE`: detected, but not decoded here, so it is reported unavailable.
//!
//! Record layout: `include/uapi/linux/perf_event.h` (`struct perf_event_header`, the
//! `PERF_RECORD_SAMPLE` body in `sample_type` bit order, `struct perf_event_mmap_page` with
//! `data_head` at byte 1024 and `data_tail` at 1032, `union perf_mem_data_src`).

use super::observe::{AccessObserver, Observation, ObserveError};
use crate::perf::sys::{perf_event_open, PerfEventAttr, ATTR_SIZE, FLAG_DISABLED, FLAG_EXCLUDE_HV, FLAG_EXCLUDE_KERNEL};
use crate::root::FsRoot;
use std::collections::BTreeMap;
use std::os::fd::{AsRawFd, OwnedFd};

pub const PERF_SAMPLE_IP: u64 = 1 << 0;
pub const PERF_SAMPLE_TID: u64 = 1 << 1;
pub const PERF_SAMPLE_TIME: u64 = 1 << 2;
pub const PERF_SAMPLE_ADDR: u64 = 1 << 3;
pub const PERF_SAMPLE_READ: u64 = 1 << 4;
pub const PERF_SAMPLE_CALLCHAIN: u64 = 1 << 5;
pub const PERF_SAMPLE_ID: u64 = 1 << 6;
pub const PERF_SAMPLE_CPU: u64 = 1 << 7;
pub const PERF_SAMPLE_PERIOD: u64 = 1 << 8;
pub const PERF_SAMPLE_STREAM_ID: u64 = 1 << 9;
pub const PERF_SAMPLE_RAW: u64 = 1 << 10;
pub const PERF_SAMPLE_BRANCH_STACK: u64 = 1 << 11;
pub const PERF_SAMPLE_REGS_USER: u64 = 1 << 12;
pub const PERF_SAMPLE_STACK_USER: u64 = 1 << 13;
pub const PERF_SAMPLE_WEIGHT: u64 = 1 << 14;
pub const PERF_SAMPLE_DATA_SRC: u64 = 1 << 15;
pub const PERF_SAMPLE_IDENTIFIER: u64 = 1 << 16;

/// What numalab asks for.
pub const SAMPLE_TYPE: u64 = PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_ADDR | PERF_SAMPLE_CPU | PERF_SAMPLE_DATA_SRC;

pub const PERF_RECORD_LOST: u32 = 2;
pub const PERF_RECORD_SAMPLE: u32 = 9;

/// `perf_mem_data_src.mem_op` (bits 0-4): `PERF_MEM_OP_LOAD` = 2, `PERF_MEM_OP_STORE` = 4.
pub const PERF_MEM_OP_LOAD: u64 = 0x02;
pub const PERF_MEM_OP_STORE: u64 = 0x04;

/// `precise_ip` (bits 15-16 of the flag word), `use_clockid` (bit 25).
const FLAG_PRECISE_IP_2: u64 = 2 << 15;
const FLAG_USE_CLOCKID: u64 = 1 << 25;

/// One decoded sample.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PerfSample {
    pub pid: u32,
    pub tid: u32,
    pub time_ns: u64,
    pub addr: u64,
    pub cpu: u32,
    pub data_src: Option<u64>,
}

impl PerfSample {
    /// A store, as the data source says (`PERF_MEM_OP_STORE`); loads and unknowns are reads.
    pub fn is_store(&self) -> bool {
        self.data_src.is_some_and(|d| d & 0x1f & PERF_MEM_OP_STORE != 0)
    }
}

/// What a stretch of the ring held.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Parsed {
    pub samples: Vec<PerfSample>,
    /// Records the kernel dropped (`PERF_RECORD_LOST`'s count) because the ring was full.
    pub lost: u64,
    /// Records of other types, skipped by their size.
    pub other: u64,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ParseError {
    #[error("sample_type {0:#x} has fields this parser does not decode (read, callchain, raw, branch stack, user registers or stack)")]
    Unsupported(u64),
    #[error("record at byte {at}: {what}")]
    Bad { at: usize, what: String },
}

fn u64_at(b: &[u8], at: usize) -> Option<u64> {
    b.get(at..at + 8).map(|s| u64::from_ne_bytes(s.try_into().expect("8 bytes")))
}

fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    b.get(at..at + 4).map(|s| u32::from_ne_bytes(s.try_into().expect("4 bytes")))
}

/// Decode the records of `bytes` (whole records, as copied out of the ring), for events opened
/// with `sample_type`. The sample body holds, in this order and only when their bit is set:
/// identifier, ip, pid+tid, time, addr, id, stream_id, cpu+reserved, period, (read, callchain,
/// raw, branch stack, user registers, user stack: refused), weight, data_src.
pub fn parse_records(bytes: &[u8], sample_type: u64) -> Result<Parsed, ParseError> {
    let refused = PERF_SAMPLE_READ
        | PERF_SAMPLE_CALLCHAIN
        | PERF_SAMPLE_RAW
        | PERF_SAMPLE_BRANCH_STACK
        | PERF_SAMPLE_REGS_USER
        | PERF_SAMPLE_STACK_USER;
    if sample_type & refused != 0 {
        return Err(ParseError::Unsupported(sample_type));
    }
    let mut out = Parsed::default();
    let mut at = 0usize;
    while at < bytes.len() {
        let bad = |what: &str| ParseError::Bad { at, what: what.to_string() };
        let ty = u32_at(bytes, at).ok_or_else(|| bad("truncated header"))?;
        let size = bytes.get(at + 6..at + 8).map(|s| u16::from_ne_bytes([s[0], s[1]]) as usize).ok_or_else(|| bad("truncated header"))?;
        if size < 8 || at + size > bytes.len() {
            return Err(bad(&format!("size {size} does not fit the {} bytes left", bytes.len() - at)));
        }
        let rec = &bytes[at..at + size];
        match ty {
            PERF_RECORD_SAMPLE => {
                let mut p = 8usize;
                let mut next = |n: usize| -> Result<usize, ParseError> {
                    let here = p;
                    p += n;
                    if p > rec.len() {
                        return Err(ParseError::Bad { at, what: format!("sample of {} bytes too short for its sample_type", rec.len()) });
                    }
                    Ok(here)
                };
                let mut s = PerfSample::default();
                if sample_type & PERF_SAMPLE_IDENTIFIER != 0 {
                    next(8)?;
                }
                if sample_type & PERF_SAMPLE_IP != 0 {
                    next(8)?;
                }
                if sample_type & PERF_SAMPLE_TID != 0 {
                    let o = next(8)?;
                    s.pid = u32_at(rec, o).expect("in bounds");
                    s.tid = u32_at(rec, o + 4).expect("in bounds");
                }
                if sample_type & PERF_SAMPLE_TIME != 0 {
                    s.time_ns = u64_at(rec, next(8)?).expect("in bounds");
                }
                if sample_type & PERF_SAMPLE_ADDR != 0 {
                    s.addr = u64_at(rec, next(8)?).expect("in bounds");
                }
                if sample_type & PERF_SAMPLE_ID != 0 {
                    next(8)?;
                }
                if sample_type & PERF_SAMPLE_STREAM_ID != 0 {
                    next(8)?;
                }
                if sample_type & PERF_SAMPLE_CPU != 0 {
                    s.cpu = u32_at(rec, next(8)?).expect("in bounds");
                }
                if sample_type & PERF_SAMPLE_PERIOD != 0 {
                    next(8)?;
                }
                if sample_type & PERF_SAMPLE_WEIGHT != 0 {
                    next(8)?;
                }
                if sample_type & PERF_SAMPLE_DATA_SRC != 0 {
                    s.data_src = Some(u64_at(rec, next(8)?).expect("in bounds"));
                }
                out.samples.push(s);
            }
            PERF_RECORD_LOST => {
                // struct { header; u64 id; u64 lost; }
                out.lost += u64_at(rec, 16).ok_or_else(|| bad("truncated PERF_RECORD_LOST"))?;
            }
            _ => out.other += 1,
        }
        at += size;
    }
    Ok(out)
}

/// The bytes between `tail` and `head` of a ring of `data.len()` bytes (a power of two), in
/// order, unwrapped.
pub fn ring_bytes(data: &[u8], tail: u64, head: u64) -> Vec<u8> {
    let size = data.len() as u64;
    let len = head.saturating_sub(tail).min(size) as usize;
    let start = (tail % size.max(1)) as usize;
    let mut out = Vec::with_capacity(len);
    let first = len.min(data.len() - start);
    out.extend_from_slice(&data[start..start + first]);
    out.extend_from_slice(&data[..len - first]);
    out
}

/// A memory-sampling event this host's PMU offers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SamplingEvent {
    /// `pebs-mem-loads` or `ibs-op`.
    pub name: &'static str,
    pub type_: u32,
    pub config: u64,
    pub config1: u64,
    pub precise_ip_2: bool,
}

/// A sampler and whether it can run here.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SamplerCheck {
    pub sampler: &'static str,
    /// `Err(reason)`: exactly why it cannot.
    pub status: Result<(), String>,
}

const PMU_DIR: &str = "/sys/bus/event_source/devices";

/// Encode `event=0xcd,umask=0x1,ldlat=3` through the PMU's format files
/// (`format/event` = `config:0-7`, `format/ldlat` = `config1:0-15`, …).
pub fn encode_event(root: &FsRoot, pmu: &str, spec: &str) -> Result<(u64, u64), String> {
    let (mut config, mut config1) = (0u64, 0u64);
    for term in spec.trim().split(',').filter(|t| !t.is_empty()) {
        let (key, value) = term.split_once('=').unwrap_or((term, "1"));
        let value = match value.strip_prefix("0x") {
            Some(h) => u64::from_str_radix(h, 16),
            None => value.parse(),
        }
        .map_err(|_| format!("{pmu} event term {term:?}: not a number"))?;
        let (_, format) = root.read(&format!("{PMU_DIR}/{pmu}/format/{key}")).map_err(|e| format!("{pmu} event term {key}: {e}"))?;
        let (field, bits) = format.trim().split_once(':').ok_or_else(|| format!("{pmu} format/{key}: {format:?} is not FIELD:LO-HI"))?;
        let (lo, hi) = bits.split_once('-').unwrap_or((bits, bits));
        let (lo, hi): (u32, u32) = (
            lo.parse().map_err(|_| format!("{pmu} format/{key}: {bits:?}"))?,
            hi.parse().map_err(|_| format!("{pmu} format/{key}: {bits:?}"))?,
        );
        if hi < lo || hi > 63 {
            return Err(format!("{pmu} format/{key}: bits {lo}-{hi}"));
        }
        let width = hi - lo + 1;
        let mask = if width == 64 { u64::MAX } else { (1u64 << width) - 1 };
        let v = (value & mask) << lo;
        match field {
            "config" => config |= v,
            "config1" => config1 |= v,
            other => return Err(format!("{pmu} format/{key}: field {other} is not supported")),
        }
    }
    Ok((config, config1))
}

/// Which memory-sampling event this host's PMU offers, or why none.
pub fn find_event(root: &FsRoot) -> Result<SamplingEvent, String> {
    let devices = root.list(PMU_DIR).map_err(|e| format!("no perf event sources ({e})"))?;
    for pmu in ["cpu", "cpu_core"] {
        if !devices.iter().any(|d| d == pmu) {
            continue;
        }
        let Ok((_, spec)) = root.read(&format!("{PMU_DIR}/{pmu}/events/mem-loads")) else { continue };
        let (_, ty) = root.read(&format!("{PMU_DIR}/{pmu}/type")).map_err(|e| e.to_string())?;
        let type_ = ty.trim().parse().map_err(|_| format!("{PMU_DIR}/{pmu}/type: {ty:?}"))?;
        let (config, config1) = encode_event(root, pmu, &spec)?;
        return Ok(SamplingEvent { name: "pebs-mem-loads", type_, config, config1, precise_ip_2: true });
    }
    if devices.iter().any(|d| d == "ibs_op") {
        let (_, ty) = root.read(&format!("{PMU_DIR}/ibs_op/type")).map_err(|e| e.to_string())?;
        let type_ = ty.trim().parse().map_err(|_| format!("{PMU_DIR}/ibs_op/type: {ty:?}"))?;
        return Ok(SamplingEvent { name: "ibs-op", type_, config: 0, config1: 0, precise_ip_2: false });
    }
    if let Some(spe) = devices.iter().find(|d| d.starts_with("arm_spe")) {
        return Err(format!(
            "{spe} (Arm SPE) is present, but SPE writes its records to the AUX area in its own packet format, which numalab does not decode"
        ));
    }
    let mut names = devices.clone();
    names.sort();
    Err(format!(
        "no memory-sampling PMU: {PMU_DIR} has no PEBS `mem-loads` event (cpu/events/mem-loads), no ibs_op and no arm_spe device, only {} (a virtual machine without a virtual PMU, or TCG emulation)",
        names.join(", ")
    ))
}

/// `kernel.perf_event_paranoid`, if readable.
pub fn paranoid(root: &FsRoot) -> Option<i64> {
    root.read("/proc/sys/kernel/perf_event_paranoid").ok().and_then(|(_, t)| t.trim().parse().ok())
}

/// Can the perf sampler run on this host? Checks the PMU event, then the paranoia level
/// (sampling another process's user-space accesses needs `perf_event_paranoid <= 2`, or
/// CAP_PERFMON).
pub fn check_perf(root: &FsRoot) -> Result<SamplingEvent, String> {
    let ev = find_event(root)?;
    if let Some(p) = paranoid(root).filter(|&p| p > 2) {
        return Err(format!("kernel.perf_event_paranoid = {p}: sampling another process needs <= 2 (or CAP_PERFMON)"));
    }
    Ok(ev)
}

/// Every sampler of docs/live.md, "Observing accesses", and whether it can run here.
pub fn check_samplers(root: &FsRoot) -> Vec<SamplerCheck> {
    vec![
        SamplerCheck { sampler: "perf", status: check_perf(root).map(|_| ()) },
        SamplerCheck { sampler: "damon", status: super::damon_sampler::check_damon(root) },
        SamplerCheck { sampler: "hinting-faults", status: super::hint_sampler::check_hint() },
    ]
}

/// One sampling event on one thread, with its ring buffer.
struct Ring {
    fd: OwnedFd,
    base: *mut u8,
    map_bytes: usize,
    data_bytes: usize,
}

// SAFETY: the mapping is owned by the Ring and only touched through &mut self.
unsafe impl Send for Ring {}

impl Ring {
    fn open(ev: &SamplingEvent, tid: i32, period: u64, data_pages: usize) -> Result<Ring, i32> {
        let mut flags = FLAG_DISABLED | FLAG_EXCLUDE_KERNEL | FLAG_EXCLUDE_HV | FLAG_USE_CLOCKID;
        if ev.precise_ip_2 {
            flags |= FLAG_PRECISE_IP_2;
        }
        let attr = PerfEventAttr {
            type_: ev.type_,
            size: ATTR_SIZE,
            config: ev.config,
            config1: ev.config1,
            sample_period: period,
            sample_type: SAMPLE_TYPE,
            flags,
            clockid: libc::CLOCK_MONOTONIC,
            ..Default::default()
        };
        let fd = perf_event_open(&attr, tid, -1, -1)?;
        // SAFETY: sysconf has no preconditions.
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) } as usize;
        let map_bytes = page * (1 + data_pages);
        // SAFETY: mapping a perf fd with 1 + 2^n pages is the documented ring-buffer interface.
        let base =
            unsafe { libc::mmap(std::ptr::null_mut(), map_bytes, libc::PROT_READ | libc::PROT_WRITE, libc::MAP_SHARED, fd.as_raw_fd(), 0) };
        if base == libc::MAP_FAILED {
            return Err(std::io::Error::last_os_error().raw_os_error().unwrap_or(libc::EIO));
        }
        let ring = Ring { fd, base: base as *mut u8, map_bytes, data_bytes: page * data_pages };
        crate::perf::sys::enable_group(ring.fd.as_raw_fd())?;
        Ok(ring)
    }

    /// Copy out what the kernel wrote since the last read and hand the space back.
    fn drain(&mut self) -> Vec<u8> {
        // SAFETY: data_head (byte 1024) and data_tail (1032) are u64 fields of the mapped
        // control page; the data area follows the control page. data_head is read with
        // acquire ordering and data_tail written with release ordering, as perf_event.h asks.
        unsafe {
            let head_ptr = self.base.add(1024) as *const std::sync::atomic::AtomicU64;
            let tail_ptr = self.base.add(1032) as *const std::sync::atomic::AtomicU64;
            let head = (*head_ptr).load(std::sync::atomic::Ordering::Acquire);
            let tail = (*tail_ptr).load(std::sync::atomic::Ordering::Relaxed);
            let page = self.map_bytes - self.data_bytes;
            let data = std::slice::from_raw_parts(self.base.add(page), self.data_bytes);
            let bytes = ring_bytes(data, tail, head);
            (*tail_ptr).store(head, std::sync::atomic::Ordering::Release);
            bytes
        }
    }
}

impl Drop for Ring {
    fn drop(&mut self) {
        // SAFETY: unmapping the mapping this Ring made.
        unsafe { libc::munmap(self.base as *mut libc::c_void, self.map_bytes) };
    }
}

/// The perf sampler on one process: an event per thread, opened as threads appear.
pub struct PerfObserver {
    root: FsRoot,
    pid: u32,
    event: SamplingEvent,
    /// Events between two samples of a thread.
    pub period: u64,
    data_pages: usize,
    rings: BTreeMap<i32, Ring>,
    /// Kernel node of each CPU.
    cpu_node: Vec<Option<u32>>,
    /// CLOCK_MONOTONIC at the agent's start, nanoseconds.
    start_ns: u64,
    pub lost: u64,
}

/// CLOCK_MONOTONIC now, nanoseconds.
pub fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: ts is a valid timespec.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

impl PerfObserver {
    /// Check the host and open the events on the target's threads now.
    pub fn open(root: FsRoot, pid: u32, cpu_node: Vec<Option<u32>>, period: u64, start_ns: u64) -> Result<PerfObserver, ObserveError> {
        let event = check_perf(&root).map_err(|reason| ObserveError::Unavailable { sampler: "perf", reason })?;
        let mut o = PerfObserver { root, pid, event, period, data_pages: 8, rings: BTreeMap::new(), cpu_node, start_ns, lost: 0 };
        o.sync_threads()?;
        Ok(o)
    }

    fn sync_threads(&mut self) -> Result<(), ObserveError> {
        for tid in crate::sampler::threads(&self.root, self.pid) {
            if self.rings.contains_key(&tid) {
                continue;
            }
            match Ring::open(&self.event, tid, self.period, self.data_pages) {
                Ok(r) => {
                    self.rings.insert(tid, r);
                }
                // The thread exited between the listing and the open.
                Err(libc::ESRCH) => {}
                Err(e) => {
                    return Err(ObserveError::Unavailable {
                        sampler: "perf",
                        reason: format!(
                            "perf_event_open of {} on thread {tid} failed: {} ({})",
                            self.event.name,
                            crate::perf::sys::errno_name(e),
                            crate::act::syscall::errno_text(e)
                        ),
                    })
                }
            }
        }
        Ok(())
    }
}

impl AccessObserver for PerfObserver {
    fn name(&self) -> &'static str {
        "perf"
    }
    fn limits(&self) -> &'static str {
        "samples one access in `period` of the sampled event (loads only with PEBS mem-loads); no kernel accesses"
    }
    fn poll(&mut self, out: &mut Vec<Observation>) -> Result<(), ObserveError> {
        self.sync_threads()?;
        let mut samples = Vec::new();
        for ring in self.rings.values_mut() {
            let bytes = ring.drain();
            let parsed = parse_records(&bytes, SAMPLE_TYPE).map_err(|e| ObserveError::Failed { sampler: "perf", reason: e.to_string() })?;
            self.lost += parsed.lost;
            samples.extend(parsed.samples);
        }
        samples.sort_by_key(|s| s.time_ns);
        for s in samples {
            let Some(cpu_node) = self.cpu_node.get(s.cpu as usize).copied().flatten() else { continue };
            out.push(Observation {
                tid: s.tid as i32,
                cpu: s.cpu,
                cpu_node,
                addr: s.addr,
                page_node: None,
                write: s.is_store(),
                time_ns: s.time_ns.saturating_sub(self.start_ns),
            });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A `PERF_RECORD_SAMPLE` laid out as perf_event.h documents it for `SAMPLE_TYPE`:
    /// header (type u32, misc u16, size u16), pid u32, tid u32, time u64, addr u64, cpu u32,
    /// res u32, data_src u64.
    fn sample(pid: u32, tid: u32, time: u64, addr: u64, cpu: u32, data_src: u64) -> Vec<u8> {
        let mut b = Vec::new();
        b.extend_from_slice(&PERF_RECORD_SAMPLE.to_ne_bytes());
        b.extend_from_slice(&2u16.to_ne_bytes()); // misc: PERF_RECORD_MISC_USER
        b.extend_from_slice(&48u16.to_ne_bytes());
        b.extend_from_slice(&pid.to_ne_bytes());
        b.extend_from_slice(&tid.to_ne_bytes());
        b.extend_from_slice(&time.to_ne_bytes());
        b.extend_from_slice(&addr.to_ne_bytes());
        b.extend_from_slice(&cpu.to_ne_bytes());
        b.extend_from_slice(&0u32.to_ne_bytes());
        b.extend_from_slice(&data_src.to_ne_bytes());
        assert_eq!(b.len(), 48);
        b
    }

    fn lost(n: u64) -> Vec<u8> {
        let mut b = Vec::new();
        b.extend_from_slice(&PERF_RECORD_LOST.to_ne_bytes());
        b.extend_from_slice(&0u16.to_ne_bytes());
        b.extend_from_slice(&24u16.to_ne_bytes());
        b.extend_from_slice(&7u64.to_ne_bytes()); // id
        b.extend_from_slice(&n.to_ne_bytes());
        b
    }

    #[test]
    fn samples_and_lost_records_decode_as_perf_event_h_lays_them_out() {
        let mut bytes = sample(10, 11, 5_000, 0x7f00_0000_1008, 3, PERF_MEM_OP_LOAD);
        bytes.extend(lost(4));
        // A PERF_RECORD_MMAP2 (type 10) of 16 bytes is skipped by its size.
        bytes.extend_from_slice(&10u32.to_ne_bytes());
        bytes.extend_from_slice(&0u16.to_ne_bytes());
        bytes.extend_from_slice(&16u16.to_ne_bytes());
        bytes.extend_from_slice(&[0u8; 8]);
        bytes.extend(sample(10, 12, 6_000, 0x10, 1, PERF_MEM_OP_STORE));
        let p = parse_records(&bytes, SAMPLE_TYPE).unwrap();
        assert_eq!(p.lost, 4);
        assert_eq!(p.other, 1);
        assert_eq!(
            p.samples,
            vec![
                PerfSample { pid: 10, tid: 11, time_ns: 5_000, addr: 0x7f00_0000_1008, cpu: 3, data_src: Some(PERF_MEM_OP_LOAD) },
                PerfSample { pid: 10, tid: 12, time_ns: 6_000, addr: 0x10, cpu: 1, data_src: Some(PERF_MEM_OP_STORE) },
            ]
        );
        assert!(!p.samples[0].is_store());
        assert!(p.samples[1].is_store());
    }

    #[test]
    fn optional_fields_are_skipped_in_their_order() {
        // IDENTIFIER and IP before TID, PERIOD and WEIGHT between CPU and DATA_SRC.
        let ty = SAMPLE_TYPE | PERF_SAMPLE_IDENTIFIER | PERF_SAMPLE_IP | PERF_SAMPLE_PERIOD | PERF_SAMPLE_WEIGHT;
        let mut b = Vec::new();
        b.extend_from_slice(&PERF_RECORD_SAMPLE.to_ne_bytes());
        b.extend_from_slice(&0u16.to_ne_bytes());
        b.extend_from_slice(&80u16.to_ne_bytes());
        for v in [99u64, 0x401000] {
            b.extend_from_slice(&v.to_ne_bytes()); // identifier, ip
        }
        b.extend_from_slice(&1u32.to_ne_bytes());
        b.extend_from_slice(&2u32.to_ne_bytes());
        for v in [3u64, 0x5000] {
            b.extend_from_slice(&v.to_ne_bytes()); // time, addr
        }
        b.extend_from_slice(&6u32.to_ne_bytes());
        b.extend_from_slice(&0u32.to_ne_bytes());
        for v in [1000u64, 250, PERF_MEM_OP_LOAD] {
            b.extend_from_slice(&v.to_ne_bytes()); // period, weight, data_src
        }
        let p = parse_records(&b, ty).unwrap();
        assert_eq!(p.samples, vec![PerfSample { pid: 1, tid: 2, time_ns: 3, addr: 0x5000, cpu: 6, data_src: Some(PERF_MEM_OP_LOAD) }]);
    }

    #[test]
    fn malformed_records_and_undecoded_fields_are_errors() {
        let b = sample(1, 2, 3, 4, 5, 6);
        assert_eq!(
            parse_records(&b[..40], SAMPLE_TYPE),
            Err(ParseError::Bad { at: 0, what: "size 48 does not fit the 40 bytes left".into() })
        );
        let e = parse_records(&b, SAMPLE_TYPE | PERF_SAMPLE_WEIGHT).unwrap_err();
        assert!(e.to_string().contains("too short for its sample_type"), "{e}");
        assert_eq!(
            parse_records(&b, SAMPLE_TYPE | PERF_SAMPLE_CALLCHAIN),
            Err(ParseError::Unsupported(SAMPLE_TYPE | PERF_SAMPLE_CALLCHAIN))
        );
        let mut zero = b.clone();
        zero[6] = 0;
        zero[7] = 0;
        assert!(parse_records(&zero, SAMPLE_TYPE).unwrap_err().to_string().contains("size 0"));
    }

    #[test]
    fn the_ring_is_read_across_its_wrap() {
        let data: Vec<u8> = (0..16).collect();
        assert_eq!(ring_bytes(&data, 12, 20), vec![12, 13, 14, 15, 0, 1, 2, 3]);
        assert_eq!(ring_bytes(&data, 16 + 2, 16 + 5), vec![2, 3, 4]);
        assert_eq!(ring_bytes(&data, 5, 5), Vec::<u8>::new());
    }

    fn pmu_root(files: &[(&str, &str)]) -> (tempfile::TempDir, FsRoot) {
        let dir = tempfile::tempdir().unwrap();
        for (path, text) in files {
            let p = dir.path().join(path.trim_start_matches('/'));
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, text).unwrap();
        }
        let root = FsRoot::at(dir.path());
        (dir, root)
    }

    #[test]
    fn pebs_mem_loads_is_encoded_through_the_format_files() {
        let d = "/sys/bus/event_source/devices/cpu";
        let (_dir, root) = pmu_root(&[
            (&format!("{d}/type"), "4\n"),
            (&format!("{d}/events/mem-loads"), "event=0xcd,umask=0x1,ldlat=3\n"),
            (&format!("{d}/format/event"), "config:0-7\n"),
            (&format!("{d}/format/umask"), "config:8-15\n"),
            (&format!("{d}/format/ldlat"), "config1:0-15\n"),
            ("/proc/sys/kernel/perf_event_paranoid", "2\n"),
        ]);
        let ev = check_perf(&root).unwrap();
        assert_eq!(ev, SamplingEvent { name: "pebs-mem-loads", type_: 4, config: 0x1cd, config1: 3, precise_ip_2: true });
        std::fs::write(root.path("/proc/sys/kernel/perf_event_paranoid"), "3\n").unwrap();
        assert_eq!(check_perf(&root).unwrap_err(), "kernel.perf_event_paranoid = 3: sampling another process needs <= 2 (or CAP_PERFMON)");
    }

    #[test]
    fn ibs_op_spe_and_no_pmu_are_told_apart() {
        let (_d, root) = pmu_root(&[("/sys/bus/event_source/devices/ibs_op/type", "11\n")]);
        assert_eq!(find_event(&root).unwrap().type_, 11);
        let (_d, root) = pmu_root(&[("/sys/bus/event_source/devices/arm_spe_0/type", "8\n")]);
        assert!(find_event(&root).unwrap_err().contains("arm_spe_0 (Arm SPE) is present"));
        let (_d, root) =
            pmu_root(&[("/sys/bus/event_source/devices/software/type", "1\n"), ("/sys/bus/event_source/devices/breakpoint/type", "5\n")]);
        assert_eq!(
            find_event(&root).unwrap_err(),
            "no memory-sampling PMU: /sys/bus/event_source/devices has no PEBS `mem-loads` event (cpu/events/mem-loads), no ibs_op and no arm_spe device, only breakpoint, software (a virtual machine without a virtual PMU, or TCG emulation)"
        );
    }
}
