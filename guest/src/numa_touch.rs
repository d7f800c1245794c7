//! numa_touch: a small multi-threaded workload for the qemu guest tests.
//!
//! Each `--touch NODE:MIB` starts one thread pinned to the CPUs of NODE that maps MIB MiB of
//! anonymous memory and writes one byte per page, so the default (first-touch) policy puts
//! every page on NODE. `--touch any:MIB` does the same without pinning the thread (it runs
//! wherever the process's affinity lets it). Optional regions exercise the other numa_maps field kinds: a
//! hugetlb region, regions under explicit `mbind` policies, and a mapped file.
//!
//! Built with plain `rustc` (std only, libc functions declared by hand) so the guest harness
//! does not need cargo: `rustc --edition 2021 -O guest/src/numa_touch.rs`. x86_64 Linux only.

use std::ffi::c_void;
use std::time::Duration;

extern "C" {
    fn sched_setaffinity(pid: i32, cpusetsize: usize, mask: *const u64) -> i32;
    fn mmap(addr: *mut c_void, len: usize, prot: i32, flags: i32, fd: i32, off: i64)
        -> *mut c_void;
    fn syscall(number: i64, ...) -> i64;
    fn getpid() -> i32;
}

const PROT_READ: i32 = 1;
const PROT_WRITE: i32 = 2;
const MAP_PRIVATE: i32 = 0x02;
const MAP_SHARED: i32 = 0x01;
const MAP_ANONYMOUS: i32 = 0x20;
const MAP_HUGETLB: i32 = 0x40000;
const SYS_MBIND: i64 = 237;
const MPOL_PREFERRED: i64 = 1;
const MPOL_BIND: i64 = 2;
const MPOL_INTERLEAVE: i64 = 3;
const PAGE_BYTES: usize = 4096;
const MIB: usize = 1 << 20;

struct Region {
    kind: &'static str,
    /// `None`: not tied to one node (an unpinned thread, an interleaved range).
    node: Option<u32>,
    bytes: usize,
}

fn cpus_of_node(node: u32) -> Vec<u32> {
    let path = format!("/sys/devices/system/node/node{node}/cpulist");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| die(&format!("{path}: {e}")));
    let mut cpus = Vec::new();
    for part in text.trim().split(',').filter(|p| !p.is_empty()) {
        let (lo, hi) = part.split_once('-').unwrap_or((part, part));
        let (lo, hi): (u32, u32) = (lo.parse().unwrap_or(0), hi.parse().unwrap_or(0));
        cpus.extend(lo..=hi);
    }
    cpus
}

fn pin_to_node(node: u32) {
    let cpus = cpus_of_node(node);
    if cpus.is_empty() {
        die(&format!(
            "node {node} has no CPUs: cannot first-touch from it"
        ));
    }
    let mut mask = [0u64; 16];
    for c in cpus {
        mask[(c / 64) as usize] |= 1 << (c % 64);
    }
    // SAFETY: mask is a valid buffer of the size passed; pid 0 is the calling thread.
    if unsafe { sched_setaffinity(0, std::mem::size_of_val(&mask), mask.as_ptr()) } != 0 {
        die(&format!("sched_setaffinity to node {node} failed"));
    }
}

fn map_anon(bytes: usize, extra_flags: i32) -> *mut u8 {
    // SAFETY: anonymous mapping, no file descriptor; the result is checked against MAP_FAILED.
    let p = unsafe {
        mmap(
            std::ptr::null_mut(),
            bytes,
            PROT_READ | PROT_WRITE,
            MAP_PRIVATE | MAP_ANONYMOUS | extra_flags,
            -1,
            0,
        )
    };
    if p as isize == -1 {
        die(&format!(
            "mmap of {bytes} bytes (flags {extra_flags:#x}) failed"
        ));
    }
    p as *mut u8
}

fn touch(p: *mut u8, bytes: usize, step: usize) {
    for off in (0..bytes).step_by(step) {
        // SAFETY: off < bytes, inside the mapping created for exactly `bytes`.
        unsafe { std::ptr::write_volatile(p.add(off), 1) };
    }
}

fn mbind(p: *mut u8, bytes: usize, mode: i64, nodes: u64) {
    let mask = [nodes];
    // SAFETY: raw mbind(2) on a mapping we own; the mask buffer outlives the call.
    let r = unsafe {
        syscall(
            SYS_MBIND,
            p as i64,
            bytes as i64,
            mode,
            mask.as_ptr() as i64,
            64i64,
            0i64,
        )
    };
    if r != 0 {
        die(&format!("mbind mode {mode} nodes {nodes:#x} failed"));
    }
}

fn parse_node_mib(s: &str) -> (u32, usize) {
    let (n, m) = s
        .split_once(':')
        .unwrap_or_else(|| die(&format!("expected NODE:MIB, got {s:?}")));
    let n = n
        .parse()
        .unwrap_or_else(|_| die(&format!("bad node in {s:?}")));
    let m = m
        .parse()
        .unwrap_or_else(|_| die(&format!("bad MiB in {s:?}")));
    (n, m)
}

fn die(msg: &str) -> ! {
    eprintln!("numa_touch: {msg}");
    std::process::exit(2)
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut touches = Vec::new();
    let mut hold_ms = 1000u64;
    let mut hugetlb: Option<(u32, usize)> = None;
    let mut policies: Vec<(&'static str, i64, u64, usize)> = Vec::new();
    let mut file: Option<String> = None;
    let mut busy = false;
    let mut i = 0;
    while i < args.len() {
        let val = || {
            args.get(i + 1)
                .cloned()
                .unwrap_or_else(|| die(&format!("{} needs a value", args[i])))
        };
        match args[i].as_str() {
            "--touch" => {
                let v = val();
                touches.push(match v.strip_prefix("any:") {
                    Some(m) => (None, m.parse().unwrap_or_else(|_| die(&format!("bad MiB in {v:?}")))),
                    None => {
                        let (n, m) = parse_node_mib(&v);
                        (Some(n), m)
                    }
                });
            }
            "--hold-ms" => hold_ms = val().parse().unwrap_or_else(|_| die("bad --hold-ms")),
            // NODE:COUNT of 2 MiB huge pages (needs vm.nr_hugepages reserved).
            "--hugetlb" => hugetlb = Some(parse_node_mib(&val())),
            "--bind" => {
                let (n, m) = parse_node_mib(&val());
                policies.push(("bind", MPOL_BIND, 1 << n, m));
            }
            "--prefer" => {
                let (n, m) = parse_node_mib(&val());
                policies.push(("prefer", MPOL_PREFERRED, 1 << n, m));
            }
            // MASK:MIB, MASK a hexadecimal node mask such as 3 for nodes 0 and 1.
            "--interleave" => {
                let v = val();
                let (mask, m) = v
                    .split_once(':')
                    .unwrap_or_else(|| die("--interleave needs MASK:MIB"));
                let mask =
                    u64::from_str_radix(mask, 16).unwrap_or_else(|_| die("bad interleave mask"));
                policies.push((
                    "interleave",
                    MPOL_INTERLEAVE,
                    mask,
                    m.parse().unwrap_or_else(|_| die("bad MiB")),
                ));
            }
            "--file" => file = Some(val()),
            // Keep re-touching the regions while holding, so NUMA balancing scans the task
            // and /proc/PID/sched gets its numa_faults lines.
            "--busy" => {
                busy = true;
                i -= 1;
            }
            other => die(&format!("unknown argument {other:?}")),
        }
        i += 2;
    }

    let (done_tx, done_rx) = std::sync::mpsc::channel::<Region>();
    let release = std::sync::Arc::new(std::sync::Barrier::new(touches.len() + 1));
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let mut threads = Vec::new();
    for (node, mib) in touches {
        let tx = done_tx.clone();
        let release = release.clone();
        let stop = stop.clone();
        threads.push(std::thread::spawn(move || {
            if let Some(node) = node {
                pin_to_node(node);
            }
            let bytes = mib * MIB;
            let p = map_anon(bytes, 0);
            touch(p, bytes, PAGE_BYTES);
            tx.send(Region {
                kind: "anon",
                node,
                bytes,
            })
            .ok();
            // The main thread prints once every sender is gone.
            drop(tx);
            while busy && !stop.load(std::sync::atomic::Ordering::Relaxed) {
                touch(p, bytes, PAGE_BYTES);
            }
            // Stay alive until the main thread has held the memory long enough.
            release.wait();
        }));
    }
    if let Some((node, count)) = hugetlb {
        pin_to_node(node);
        let bytes = count * 2 * MIB;
        let p = map_anon(bytes, MAP_HUGETLB);
        touch(p, bytes, 2 * MIB);
        done_tx
            .send(Region {
                kind: "hugetlb",
                node: Some(node),
                bytes,
            })
            .ok();
    }
    for (kind, mode, mask, mib) in policies {
        let bytes = mib * MIB;
        let p = map_anon(bytes, 0);
        mbind(p, bytes, mode, mask);
        touch(p, bytes, PAGE_BYTES);
        let node = if mask.count_ones() == 1 {
            Some(mask.trailing_zeros())
        } else {
            None
        };
        done_tx.send(Region { kind, node, bytes }).ok();
    }
    let mut _file_keepalive = None;
    if let Some(path) = file {
        use std::os::fd::AsRawFd;
        let f = std::fs::File::open(&path).unwrap_or_else(|e| die(&format!("{path}: {e}")));
        let len = f
            .metadata()
            .map(|m| m.len() as usize)
            .unwrap_or(0)
            .max(PAGE_BYTES);
        // SAFETY: read-only shared mapping of an open file; checked against MAP_FAILED.
        let p = unsafe {
            mmap(
                std::ptr::null_mut(),
                len,
                PROT_READ,
                MAP_SHARED,
                f.as_raw_fd(),
                0,
            )
        };
        if p as isize == -1 {
            die(&format!("mmap of {path} failed"));
        }
        let mut sum = 0u64;
        for off in (0..len).step_by(PAGE_BYTES) {
            // SAFETY: off < len, inside the file mapping.
            sum += unsafe { std::ptr::read_volatile((p as *const u8).add(off)) } as u64;
        }
        std::hint::black_box(sum);
        done_tx
            .send(Region {
                kind: "file",
                node: None,
                bytes: len,
            })
            .ok();
        _file_keepalive = Some(f);
    }
    drop(done_tx);
    for r in done_rx {
        let node = r.node.map(|n| n.to_string()).unwrap_or_else(|| "-".into());
        println!(
            "numa_touch: placed kind={} node={} bytes={}",
            r.kind, node, r.bytes
        );
    }
    // SAFETY: getpid has no preconditions.
    println!("numa_touch: ready pid={}", unsafe { getpid() });
    std::thread::sleep(Duration::from_millis(hold_ms));
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    release.wait();
    for t in threads {
        t.join().ok();
    }
}
