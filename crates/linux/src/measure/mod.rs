//! `numalab machine measure`: idle latency, bandwidth and loaded latency of this host's node
//! pairs, measured with threads pinned by `sched_setaffinity` and memory bound by
//! `set_mempolicy` and `mbind` (docs/calibration.md, "Measuring your own machine").
//!
//! * [`kernels`]: buffers, the pointer chase, the streaming read, the triad, pinning.
//! * [`build`]: the pure part: raw measurements and the imported topology into a machine file.
//!
//! [`plan`] and [`sizes`] are pure; [`run`] makes the measurements, one [`Step`] at a time.

pub mod build;
pub mod kernels;
pub mod spin;

use kernels::{Backing, Buffer, KernelCallError};
use numalab_core::machine::{LoadedPoint, PinCheck};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Barrier, Mutex};
use std::time::{Duration, Instant};

const MIB: u64 = 1 << 20;
/// Pages sampled per buffer by the placement check.
const PAGE_SAMPLES: usize = 32;
/// Seed of the chase permutation: the same buffer size gives the same walk.
const CHASE_SEED: u64 = 0x006e_756d_616c_6162;

#[derive(Debug, thiserror::Error)]
pub enum MeasureError {
    #[error(transparent)]
    Kernel(#[from] KernelCallError),
    #[error("{0}")]
    Setup(String),
}

/// One node as the measurement sees it (Linux ids).
#[derive(Clone, Debug, PartialEq)]
pub struct NodeSpec {
    pub kernel_id: u32,
    pub socket: u32,
    /// CPUs that measure: the first hardware thread of each core, allowed to this process.
    pub cpus: Vec<u32>,
    /// SMT siblings of `cpus[0]` (the chase CPU), which the loaded-latency curve leaves idle.
    pub chase_siblings: Vec<u32>,
    pub mem_bytes: u64,
}

impl NodeSpec {
    fn has_cpus(&self) -> bool {
        !self.cpus.is_empty()
    }

    fn has_memory(&self) -> bool {
        self.mem_bytes > 0
    }

    /// CPUs that load the node in the loaded-latency curve: every allowed CPU of one core
    /// each, except the chase CPU's core.
    fn load_cpus(&self) -> Vec<u32> {
        self.cpus.iter().copied().filter(|c| Some(c) != self.cpus.first() && !self.chase_siblings.contains(c)).collect()
    }
}

/// Buffer sizes, repetitions and load levels.
#[derive(Clone, Debug, PartialEq)]
pub struct Sizes {
    pub quick: bool,
    pub llc_bytes: u64,
    /// Bytes of the pointer-chase buffer.
    pub chase_bytes: u64,
    /// Dependent loads per timed chase.
    pub chase_loads: u64,
    /// Timed chases per pair (the median is kept).
    pub chase_trials: usize,
    /// Bytes of each bandwidth array summed over a team's threads.
    pub array_bytes: u64,
    /// Timed passes per bandwidth kernel (the best is kept, as STREAM does).
    pub bw_trials: usize,
    /// Load intensities of the loaded-latency curve.
    pub load_levels: Vec<f64>,
    /// Try `MAP_HUGETLB` before transparent huge pages.
    pub hugetlb: bool,
}

fn clamp_round(v: u64, lo: u64, hi: u64, cap: u64) -> u64 {
    let v = v.clamp(lo, hi).min(cap);
    (v / (2 * MIB)).max(1) * 2 * MIB
}

/// Sizes for an LLC of `llc_bytes` when the smallest measured node has `smallest_node_bytes`
/// of memory: the chase buffer 8× the LLC (64 MiB..1 GiB; `--quick` 2×, 8..64 MiB), each
/// bandwidth array 4× the LLC over the team (64..512 MiB; quick 2×, 8..64 MiB), no buffer
/// set above a sixth of the smallest node.
pub fn sizes(llc_bytes: u64, smallest_node_bytes: u64, quick: bool, hugetlb: bool) -> Sizes {
    let cap = (smallest_node_bytes / 6).max(2 * MIB);
    let levels = vec![0.0, 0.25, 0.5, 0.75, 1.0];
    if quick {
        Sizes {
            quick,
            llc_bytes,
            chase_bytes: clamp_round(2 * llc_bytes, 8 * MIB, 64 * MIB, cap),
            chase_loads: 200_000,
            chase_trials: 1,
            array_bytes: clamp_round(2 * llc_bytes, 8 * MIB, 64 * MIB, cap / 3),
            bw_trials: 2,
            load_levels: levels,
            hugetlb,
        }
    } else {
        Sizes {
            quick,
            llc_bytes,
            chase_bytes: clamp_round(8 * llc_bytes, 64 * MIB, 1024 * MIB, cap),
            chase_loads: 2_000_000,
            chase_trials: 3,
            array_bytes: clamp_round(4 * llc_bytes, 64 * MIB, 512 * MIB, cap / 3),
            bw_trials: 5,
            load_levels: levels,
            hugetlb,
        }
    }
}

/// One unit of the measurement (and of its progress bar). Indices are positions in the
/// node list (the file's node numbers).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Step {
    /// Build a chase buffer on node `mem` and chase it from every CPU node.
    Chase { mem: usize },
    /// The loaded-latency curve of CPU node `node` (on its own memory).
    Loaded { node: usize },
    /// Streaming read and triad, every measuring CPU of `cpu` on memory of `mem`.
    Bandwidth { cpu: usize, mem: usize },
    /// Triad with every measuring CPU of the machine, each on its own node.
    TriadAll,
    /// Triad with the CPUs of the first CPU node's socket, each on its own node (only when
    /// the socket has several CPU nodes: otherwise it is `Bandwidth` of that node).
    TriadSocket,
    /// Triad with one thread of the first CPU node on its own memory.
    TriadThread,
}

impl Step {
    pub fn label(&self) -> String {
        match self {
            Step::Chase { mem } => format!("idle latency to node {mem}"),
            Step::Loaded { node } => format!("loaded latency of node {node}"),
            Step::Bandwidth { cpu, mem } => format!("bandwidth {cpu} -> {mem}"),
            Step::TriadAll => "triad, every core".into(),
            Step::TriadSocket => "triad, one socket".into(),
            Step::TriadThread => "triad, one thread".into(),
        }
    }
}

/// The steps for these nodes, in the order [`run`] makes them.
pub fn plan(nodes: &[NodeSpec]) -> Vec<Step> {
    let cpu_nodes: Vec<usize> = (0..nodes.len()).filter(|&i| nodes[i].has_cpus()).collect();
    let mut steps = Vec::new();
    for (j, node) in nodes.iter().enumerate() {
        if !node.has_memory() {
            continue;
        }
        steps.push(Step::Chase { mem: j });
        if node.has_cpus() && !node.load_cpus().is_empty() {
            steps.push(Step::Loaded { node: j });
        }
    }
    for &i in &cpu_nodes {
        for (j, node) in nodes.iter().enumerate() {
            if node.has_memory() {
                steps.push(Step::Bandwidth { cpu: i, mem: j });
            }
        }
    }
    let own: Vec<usize> = cpu_nodes.iter().copied().filter(|&i| nodes[i].has_memory()).collect();
    if own.len() > 1 {
        steps.push(Step::TriadAll);
    }
    if let Some(&first) = own.first() {
        if own.iter().filter(|&&i| nodes[i].socket == nodes[first].socket).count() > 1 {
            steps.push(Step::TriadSocket);
        }
        if nodes[first].cpus.len() > 1 {
            steps.push(Step::TriadThread);
        }
    }
    steps
}

/// Everything measured, in the file's node numbers; 0.0 where a pair was not measured.
#[derive(Clone, Debug, PartialEq)]
pub struct Raw {
    /// The weakest backing any buffer got.
    pub backing: Backing,
    pub chase_ns: Vec<Vec<f64>>,
    pub read_gbps: Vec<Vec<f64>>,
    pub triad_gbps: Vec<Vec<f64>>,
    pub triad_all_gbps: Option<f64>,
    pub triad_socket_gbps: Option<f64>,
    pub triad_thread_gbps: Option<f64>,
    pub loaded: Vec<LoadedPoint>,
    pub pinning: Vec<PinCheck>,
    /// One round of an OpenMP runtime's barrier spin (a load and a PAUSE), ns: the median
    /// of `spin::TRIALS` timed runs on the first CPU node's first CPU (`spin::ns_per_round`).
    pub spin_ns: Option<f64>,
}

impl Raw {
    pub fn empty(n: usize) -> Raw {
        Raw {
            backing: Backing::HugeTlb,
            chase_ns: vec![vec![0.0; n]; n],
            read_gbps: vec![vec![0.0; n]; n],
            triad_gbps: vec![vec![0.0; n]; n],
            triad_all_gbps: None,
            triad_socket_gbps: None,
            triad_thread_gbps: None,
            loaded: Vec::new(),
            pinning: Vec::new(),
            spin_ns: None,
        }
    }
}

/// Median of a non-empty sample.
pub fn median(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    let m = s.len() / 2;
    if s.len() % 2 == 1 {
        s[m]
    } else {
        (s[m - 1] + s[m]) / 2.0
    }
}

/// GB/s (10^9 bytes per second).
pub fn gbps(bytes: u64, took: Duration) -> f64 {
    bytes as f64 / took.as_secs_f64().max(1e-9) / 1e9
}

/// Make every step, calling `progress(k, step)` before step `k`.
pub fn run(nodes: &[NodeSpec], sizes: &Sizes, progress: &mut dyn FnMut(usize, &Step)) -> Result<Raw, MeasureError> {
    let steps = plan(nodes);
    let mut raw = Raw::empty(nodes.len());
    let mut chase_buffer: Option<(usize, Buffer)> = None;
    let ids: Vec<u32> = nodes.iter().map(|n| n.kernel_id).collect();
    for (k, step) in steps.iter().enumerate() {
        progress(k, step);
        match *step {
            Step::Chase { mem } => {
                drop(chase_buffer.take()); // unmap the previous node's buffer first
                let buf = build_chase_buffer(ids[mem], sizes)?;
                raw.backing = raw.backing.max(buf.backing);
                let mut chased = Vec::new();
                for (i, node) in nodes.iter().enumerate().filter(|(_, n)| n.has_cpus()) {
                    let (ns, seen) = chase_from(node.cpus[0], &buf, sizes)?;
                    raw.chase_ns[i][mem] = ns;
                    chased.push((i, node.cpus[0], seen));
                }
                // Where the pages are after every node chased them.
                let on = count_on(&buf.page_nodes(PAGE_SAMPLES)?, ids[mem]);
                for (i, cpu, seen) in chased {
                    raw.pinning.push(PinCheck {
                        what: format!("chase {i}->{mem}"),
                        cpus_pinned: vec![cpu],
                        cpus_seen: seen,
                        mem_node: ids[mem],
                        pages_checked: on.0,
                        pages_on_node: on.1,
                        pages_elsewhere: on.2.clone(),
                    });
                }
                chase_buffer = Some((mem, buf));
            }
            Step::Loaded { node } => {
                let Some((m, buf)) = &chase_buffer else {
                    return Err(MeasureError::Setup("loaded latency without a chase buffer".into()));
                };
                debug_assert_eq!(*m, node);
                let (points, check) = loaded_curve(node, &nodes[node], buf, sizes)?;
                raw.loaded.extend(points);
                raw.pinning.push(check);
            }
            Step::Bandwidth { cpu, mem } => {
                let team: Vec<(u32, u32)> = nodes[cpu].cpus.iter().map(|&c| (c, ids[mem])).collect();
                let r = run_team(&team, sizes, true)?;
                raw.backing = raw.backing.max(r.backing);
                raw.read_gbps[cpu][mem] = r.read_gbps;
                raw.triad_gbps[cpu][mem] = r.triad_gbps;
                raw.pinning.push(r.check(format!("bandwidth {cpu}->{mem}"), &team, ids[mem]));
            }
            Step::TriadAll | Step::TriadSocket | Step::TriadThread => {
                let own: Vec<usize> = (0..nodes.len()).filter(|&i| nodes[i].has_cpus() && nodes[i].has_memory()).collect();
                let first = own[0];
                let chosen: Vec<usize> = match step {
                    Step::TriadAll => own.clone(),
                    Step::TriadSocket => own.iter().copied().filter(|&i| nodes[i].socket == nodes[first].socket).collect(),
                    _ => vec![first],
                };
                let mut team: Vec<(u32, u32)> =
                    chosen.iter().flat_map(|&i| nodes[i].cpus.iter().map(move |&c| (c, nodes[i].kernel_id))).collect();
                if *step == Step::TriadThread {
                    team.truncate(1);
                }
                let r = run_team(&team, sizes, false)?;
                raw.backing = raw.backing.max(r.backing);
                let v = Some(r.triad_gbps);
                match step {
                    Step::TriadAll => raw.triad_all_gbps = v,
                    Step::TriadSocket => raw.triad_socket_gbps = v,
                    _ => raw.triad_thread_gbps = v,
                }
                let mut check = r.check(step.label(), &team, team[0].1);
                // Threads on several nodes: count pages on each thread's own node.
                check.mem_node = team[0].1;
                raw.pinning.push(check);
            }
        }
    }
    if let Some(node) = nodes.iter().find(|n| n.has_cpus()) {
        raw.spin_ns = Some(spin::ns_per_round(node.cpus[0], sizes)?);
    }
    Ok(raw)
}

/// (pages checked, pages on `node`, the status of the others).
fn count_on(status: &[i32], node: u32) -> (u64, u64, Vec<i32>) {
    let elsewhere: Vec<i32> = status.iter().copied().filter(|&s| s != node as i32).collect();
    (status.len() as u64, (status.len() - elsewhere.len()) as u64, elsewhere)
}

/// A chase buffer whose pages are all on `node`: mapped and first touched by a thread bound
/// there.
fn build_chase_buffer(node: u32, sizes: &Sizes) -> Result<Buffer, MeasureError> {
    let bytes = sizes.chase_bytes as usize;
    let hugetlb = sizes.hugetlb;
    std::thread::spawn(move || -> Result<Buffer, MeasureError> {
        kernels::bind_memory(Some(node))?;
        let mut buf = Buffer::map_on(bytes, hugetlb, node)?;
        kernels::build_chase(buf.words_mut(), CHASE_SEED);
        Ok(buf)
    })
    .join()
    .map_err(|_| MeasureError::Setup("the chase builder thread panicked".into()))?
}

/// Median ns per dependent load from `cpu` over `buf`, and the CPUs the thread ran on.
fn chase_from(cpu: u32, buf: &Buffer, sizes: &Sizes) -> Result<(f64, Vec<u32>), MeasureError> {
    std::thread::scope(|s| {
        s.spawn(|| -> Result<(f64, Vec<u32>), MeasureError> {
            kernels::pin_to_cpu(cpu)?;
            let words = buf.words();
            let lines = (words.len() / 8) as u64;
            // Warm the TLB and the walk itself.
            let (mut p, _) = kernels::chase(words, 0, sizes.chase_loads.min(lines));
            let mut ns = Vec::with_capacity(sizes.chase_trials);
            let mut seen = Vec::new();
            for _ in 0..sizes.chase_trials {
                let (q, took) = kernels::chase(words, p, sizes.chase_loads);
                p = q;
                ns.push(took.as_nanos() as f64 / sizes.chase_loads as f64);
                seen.extend(kernels::current_cpu());
            }
            seen.sort_unstable();
            seen.dedup();
            Ok((median(&ns), seen))
        })
        .join()
        .map_err(|_| MeasureError::Setup("a chase thread panicked".into()))?
    })
}

/// What a team's threads report: the weakest backing, the CPUs they ran on, pages checked,
/// pages on their node, the status of the others.
type Placed = (Backing, Vec<u32>, u64, u64, Vec<i32>);

/// Result of one team of bandwidth threads.
struct TeamResult {
    read_gbps: f64,
    triad_gbps: f64,
    backing: Backing,
    cpus_seen: Vec<u32>,
    pages_checked: u64,
    pages_on_node: u64,
    pages_elsewhere: Vec<i32>,
}

impl TeamResult {
    fn check(&self, what: String, team: &[(u32, u32)], mem_node: u32) -> PinCheck {
        PinCheck {
            what,
            cpus_pinned: team.iter().map(|t| t.0).collect(),
            cpus_seen: self.cpus_seen.clone(),
            mem_node,
            pages_checked: self.pages_checked,
            pages_on_node: self.pages_on_node,
            pages_elsewhere: self.pages_elsewhere.clone(),
        }
    }
}

/// Streaming read (when `with_read`) and triad: thread `k` pinned to `team[k].0` with its
/// three arrays on node `team[k].1`, `sizes.array_bytes / team.len()` bytes each. Every
/// timed pass starts and ends at a barrier of all threads; a pass lasts from the first
/// thread's start to the last thread's end, and bandwidth is the team's bytes over the best
/// pass.
fn run_team(team: &[(u32, u32)], sizes: &Sizes, with_read: bool) -> Result<TeamResult, MeasureError> {
    let n = team.len();
    let per_thread = ((sizes.array_bytes as usize / n) / 4096).max(1) * 4096;
    let barrier = Barrier::new(n + 1);
    let abort = AtomicBool::new(false);
    let failure: Mutex<Option<MeasureError>> = Mutex::new(None);
    let placed: Mutex<Placed> = Mutex::new((Backing::HugeTlb, Vec::new(), 0, 0, Vec::new()));
    let phases = if with_read { 2 } else { 1 };
    let mut best = [Duration::MAX; 2];
    // (trial, phase, start, end) of every thread's timed pass.
    let times: Mutex<Vec<(usize, usize, Instant, Instant)>> = Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for &(cpu, node) in team {
            let (barrier, abort, failure, placed, times) = (&barrier, &abort, &failure, &placed, &times);
            s.spawn(move || {
                let setup = (|| -> Result<[Buffer; 3], MeasureError> {
                    kernels::pin_to_cpu(cpu)?;
                    kernels::bind_memory(Some(node))?;
                    let mut arrays = [
                        Buffer::map_on(per_thread, sizes.hugetlb, node)?,
                        Buffer::map_on(per_thread, sizes.hugetlb, node)?,
                        Buffer::map_on(per_thread, sizes.hugetlb, node)?,
                    ];
                    for (k, a) in arrays.iter_mut().enumerate() {
                        a.f64s_mut().fill([0.0, 1.0, 2.0][k]);
                    }
                    Ok(arrays)
                })();
                let arrays = match setup {
                    Ok(a) => Some(a),
                    Err(e) => {
                        abort.store(true, Ordering::SeqCst);
                        *failure.lock().unwrap_or_else(|e| e.into_inner()) = Some(e);
                        None
                    }
                };
                barrier.wait();
                let Some(mut arrays) = arrays else { return };
                if abort.load(Ordering::SeqCst) {
                    return;
                }
                let [a, b, c] = &mut arrays;
                let mut mine = Vec::with_capacity(sizes.bw_trials * phases);
                for trial in 0..sizes.bw_trials {
                    if with_read {
                        barrier.wait();
                        let t = Instant::now();
                        kernels::read(b.words());
                        mine.push((trial, 0, t, Instant::now()));
                        barrier.wait();
                    }
                    barrier.wait();
                    let t = Instant::now();
                    kernels::triad(a.f64s_mut(), b.f64s(), c.f64s(), 3.0);
                    mine.push((trial, phases - 1, t, Instant::now()));
                    barrier.wait();
                }
                times.lock().unwrap_or_else(|e| e.into_inner()).extend(mine);
                // Where the pages are after the passes.
                let mut p = placed.lock().unwrap_or_else(|e| e.into_inner());
                p.1.extend(kernels::current_cpu());
                for a in &arrays {
                    match a.page_nodes(PAGE_SAMPLES / 3 + 1) {
                        Ok(status) => {
                            let (checked, on, elsewhere) = count_on(&status, node);
                            p.0 = p.0.max(a.backing);
                            p.2 += checked;
                            p.3 += on;
                            p.4.extend(elsewhere);
                        }
                        Err(e) => *failure.lock().unwrap_or_else(|e| e.into_inner()) = Some(e.into()),
                    }
                }
            });
        }
        barrier.wait();
        if abort.load(Ordering::SeqCst) {
            return;
        }
        // The threads time themselves: this thread may not run between two barriers when
        // the team has every CPU.
        for _ in 0..sizes.bw_trials * phases {
            barrier.wait();
            barrier.wait();
        }
    });
    let times = times.into_inner().unwrap_or_else(|e| e.into_inner());
    for trial in 0..sizes.bw_trials {
        for (phase, slot) in best.iter_mut().enumerate().take(phases) {
            let pass = times.iter().filter(|t| t.0 == trial && t.1 == phase);
            let (Some(first), Some(last)) = (pass.clone().map(|t| t.2).min(), pass.map(|t| t.3).max()) else { continue };
            *slot = (*slot).min(last - first);
        }
    }
    if let Some(e) = failure.into_inner().unwrap_or_else(|e| e.into_inner()) {
        return Err(e);
    }
    let (backing, mut seen, checked, on, elsewhere) = placed.into_inner().unwrap_or_else(|e| e.into_inner());
    seen.sort_unstable();
    seen.dedup();
    let bytes = (per_thread * n) as u64;
    let (read_gbps, triad_gbps) =
        if with_read { (gbps(bytes, best[0]), gbps(3 * bytes, best[1])) } else { (0.0, gbps(3 * bytes, best[0])) };
    Ok(TeamResult {
        read_gbps,
        triad_gbps,
        backing,
        cpus_seen: seen,
        pages_checked: checked,
        pages_on_node: on,
        pages_elsewhere: elsewhere,
    })
}

const STOP: u32 = u32::MAX;
const LOAD_BLOCK_BYTES: usize = 256 << 10;

/// The loaded-latency curve of node `index`: the chase on the node's first CPU over `buf`
/// (on the node's memory) while every other core's first CPU streams reads from its own
/// buffer on the node, each reading `intensity` of the time (after each 256 KiB block it
/// waits `block time × (1 − intensity) / intensity`).
fn loaded_curve(index: usize, node: &NodeSpec, buf: &Buffer, sizes: &Sizes) -> Result<(Vec<LoadedPoint>, PinCheck), MeasureError> {
    let load_cpus = node.load_cpus();
    let level = AtomicU32::new(0);
    let bytes = AtomicU64::new(0);
    let ready = Barrier::new(load_cpus.len() + 1);
    let failure: Mutex<Option<MeasureError>> = Mutex::new(None);
    let seen: Mutex<Vec<u32>> = Mutex::new(Vec::new());
    let per_thread = ((sizes.array_bytes as usize / load_cpus.len().max(1)) / 4096).max(LOAD_BLOCK_BYTES / 4096) * 4096;
    let mut points = Vec::new();
    std::thread::scope(|s| -> Result<(), MeasureError> {
        for &cpu in &load_cpus {
            let (level, bytes, ready, failure, seen) = (&level, &bytes, &ready, &failure, &seen);
            let kernel_node = node.kernel_id;
            s.spawn(move || {
                let setup = (|| -> Result<Buffer, MeasureError> {
                    kernels::pin_to_cpu(cpu)?;
                    kernels::bind_memory(Some(kernel_node))?;
                    let mut b = Buffer::map_on(per_thread, sizes.hugetlb, kernel_node)?;
                    b.words_mut().fill(1);
                    Ok(b)
                })();
                ready.wait();
                let b = match setup {
                    Ok(b) => b,
                    Err(e) => {
                        *failure.lock().unwrap_or_else(|e| e.into_inner()) = Some(e);
                        level.store(STOP, Ordering::SeqCst);
                        return;
                    }
                };
                let words = b.words();
                let block = LOAD_BLOCK_BYTES / 8;
                let mut at = 0usize;
                loop {
                    let l = level.load(Ordering::Relaxed);
                    if l == STOP {
                        break;
                    }
                    if l == 0 {
                        std::thread::sleep(Duration::from_micros(200));
                        continue;
                    }
                    let t = Instant::now();
                    kernels::read(&words[at..at + block]);
                    at = if at + 2 * block > words.len() { 0 } else { at + block };
                    bytes.fetch_add(LOAD_BLOCK_BYTES as u64, Ordering::Relaxed);
                    if l < 1000 {
                        let wait = t.elapsed().mul_f64((1000 - l) as f64 / l as f64);
                        let w = Instant::now();
                        while w.elapsed() < wait {
                            std::hint::spin_loop();
                        }
                    }
                }
                seen.lock().unwrap_or_else(|e| e.into_inner()).extend(kernels::current_cpu());
            });
        }
        ready.wait();
        let chased = s
            .spawn(|| -> Result<(), MeasureError> {
                kernels::pin_to_cpu(node.cpus[0])?;
                let words = buf.words();
                let settle = Duration::from_millis(if sizes.quick { 5 } else { 20 });
                let mut p = 0usize;
                for &intensity in &sizes.load_levels {
                    if level.load(Ordering::SeqCst) == STOP {
                        break;
                    }
                    level.store((intensity * 1000.0).round() as u32, Ordering::SeqCst);
                    let w = Instant::now();
                    while w.elapsed() < settle {
                        p = kernels::chase(words, p, 1000).0;
                    }
                    let b0 = bytes.load(Ordering::SeqCst);
                    let (q, took) = kernels::chase(words, p, sizes.chase_loads);
                    let b1 = bytes.load(Ordering::SeqCst);
                    p = q;
                    points.push(LoadedPoint {
                        node: index as u32,
                        load_threads: if intensity > 0.0 { load_cpus.len() as u32 } else { 0 },
                        intensity,
                        bandwidth_gbps: gbps(b1 - b0, took),
                        latency_ns: took.as_nanos() as f64 / sizes.chase_loads as f64,
                    });
                }
                seen.lock().unwrap_or_else(|e| e.into_inner()).extend(kernels::current_cpu());
                Ok(())
            })
            .join();
        level.store(STOP, Ordering::SeqCst);
        chased.map_err(|_| MeasureError::Setup("the loaded-latency chase thread panicked".into()))?
    })?;
    if let Some(e) = failure.into_inner().unwrap_or_else(|e| e.into_inner()) {
        return Err(e);
    }
    let mut seen = seen.into_inner().unwrap_or_else(|e| e.into_inner());
    seen.sort_unstable();
    seen.dedup();
    let (checked, on, elsewhere) = count_on(&buf.page_nodes(PAGE_SAMPLES)?, node.kernel_id);
    let mut pinned = vec![node.cpus[0]];
    pinned.extend(&load_cpus);
    let check = PinCheck {
        what: format!("loaded {index}"),
        cpus_pinned: pinned,
        cpus_seen: seen,
        mem_node: node.kernel_id,
        pages_checked: checked,
        pages_on_node: on,
        pages_elsewhere: elsewhere,
    };
    Ok((points, check))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(id: u32, socket: u32, cpus: &[u32], mem: u64) -> NodeSpec {
        NodeSpec { kernel_id: id, socket, cpus: cpus.to_vec(), chase_siblings: vec![], mem_bytes: mem }
    }

    #[test]
    fn sizes_follow_the_llc_and_the_smallest_node() {
        let s = sizes(32 * MIB, 16 << 30, false, true);
        assert_eq!((s.chase_bytes, s.array_bytes, s.chase_trials, s.bw_trials), (256 * MIB, 128 * MIB, 3, 5));
        let q = sizes(32 * MIB, 16 << 30, true, true);
        assert_eq!((q.chase_bytes, q.array_bytes, q.chase_trials), (64 * MIB, 64 * MIB, 1));
        // A 512 MiB guest node: no buffer set above a sixth of it, 2 MiB multiples.
        let g = sizes(16 * MIB, 512 * MIB, false, false);
        assert_eq!(g.chase_bytes, 84 * MIB);
        assert_eq!(g.array_bytes, 28 * MIB);
        assert_eq!(g.load_levels, vec![0.0, 0.25, 0.5, 0.75, 1.0]);
    }

    #[test]
    fn the_plan_covers_every_pair_and_the_machine_figures() {
        // Two sockets, one node each, plus a CPU-less node on socket 0.
        let nodes = [node(0, 0, &[0, 1], 1 << 30), node(1, 1, &[2, 3], 1 << 30), node(2, 0, &[], 1 << 30)];
        let p = plan(&nodes);
        assert_eq!(
            p,
            vec![
                Step::Chase { mem: 0 },
                Step::Loaded { node: 0 },
                Step::Chase { mem: 1 },
                Step::Loaded { node: 1 },
                Step::Chase { mem: 2 },
                Step::Bandwidth { cpu: 0, mem: 0 },
                Step::Bandwidth { cpu: 0, mem: 1 },
                Step::Bandwidth { cpu: 0, mem: 2 },
                Step::Bandwidth { cpu: 1, mem: 0 },
                Step::Bandwidth { cpu: 1, mem: 1 },
                Step::Bandwidth { cpu: 1, mem: 2 },
                Step::TriadAll,
                Step::TriadThread,
            ]
        );
        // One node of one CPU: no loaded curve, no single-thread triad (it is the node's).
        assert_eq!(plan(&[node(0, 0, &[0], 1 << 30)]), vec![Step::Chase { mem: 0 }, Step::Bandwidth { cpu: 0, mem: 0 }]);
    }

    #[test]
    fn median_and_gbps() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), 2.5);
        assert_eq!(gbps(2_000_000_000, Duration::from_secs(1)), 2.0);
    }

    #[test]
    fn one_node_of_this_host_measures_with_real_pinning() {
        // The smallest real run: node 0, its first CPU (this host's CPU 0 may be outside a
        // container's affinity, so the first allowed CPU of node 0).
        let allowed = kernels::allowed_cpus();
        let Ok(cpulist) = std::fs::read_to_string("/sys/devices/system/node/node0/cpulist") else { return };
        let first: u32 = cpulist.trim().split([',', '-']).next().unwrap().parse().unwrap();
        let cpu = if allowed.contains(&first) { first } else { allowed[0] };
        let spec = [node(0, 0, &[cpu], 1 << 30)];
        let mut s = sizes(MIB, 1 << 30, true, false);
        s.chase_loads = 20_000;
        let mut seen_steps = Vec::new();
        let raw = run(&spec, &s, &mut |k, step| seen_steps.push((k, step.clone()))).unwrap();
        assert_eq!(seen_steps.len(), 2);
        assert!(raw.chase_ns[0][0] > 0.0 && raw.read_gbps[0][0] > 0.0 && raw.triad_gbps[0][0] > 0.0, "{raw:?}");
        assert!(raw.pinning.iter().all(|c| c.ok()), "{:?}", raw.pinning);
    }
}
