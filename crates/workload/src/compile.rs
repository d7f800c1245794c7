//! Compile a workload file for one machine into a [`Program`] (semantics: docs/workloads.md,
//! "Generator semantics").

use crate::error::WorkloadError;
use crate::layout::{first_touches, lay_out, Layout, RegionNames};
use crate::program::Program;
use crate::schedule::{self, Schedule};
use crate::schema::*;
use crate::stream::Compute;
use crate::synth::{RunsRegion, Synth};
use crate::work::Geo;
use numalab_core::{CpuId, Machine, NodeId};
use rand::seq::SliceRandom;

/// Bounds on what a workload may ask for (docs/workloads.md, "Limits"). They keep compile
/// time and memory bounded whatever the file says; the run-time work estimate
/// (`numalab_sim::estimate`) bounds the simulation itself.
pub mod limits {
    pub const MAX_THREADS: u32 = 4096;
    pub const MAX_COPIES: u32 = 256;
    pub const MAX_ITERATIONS: u32 = 100_000;
    pub const MAX_REPEAT: u32 = 100_000;
    /// Phases and regions of one file.
    pub const MAX_PHASES: usize = 256;
    pub const MAX_REGIONS: usize = 256;
    /// Accesses of one phase.
    pub const MAX_ACCESSES: usize = 64;
    /// Steps of a whole run (phases × repeats × iterations).
    pub const MAX_STEPS: u64 = 1_000_000;
    /// Chunks of a point-to-point barrier phase.
    pub const MAX_CHUNKS: u32 = 4096;
    /// Flops per access (compute between accesses).
    pub const MAX_FLOPS_PER_ACCESS: f64 = 1e5;
    /// Gap between accesses, µs.
    pub const MAX_GAP_US: f64 = 1e4;
    /// Largest `--scale`.
    pub const MAX_SCALE: f64 = 1e9;
}

/// How to adapt a workload to a machine.
#[derive(Clone, Debug)]
pub struct CompileOptions {
    /// Override the file's thread count.
    pub threads: Option<u32>,
    /// Multiplies the footprint and explicit reference counts (`--scale`).
    pub scale: f64,
}

impl Default for CompileOptions {
    fn default() -> Self {
        CompileOptions { threads: None, scale: 1.0 }
    }
}

#[derive(Clone, Debug)]
pub(crate) struct CompiledEntry {
    pub(crate) region: usize,
    pub(crate) who: Who,
    pub(crate) pattern: Pattern,
    /// References per repeat, all executing threads together.
    pub(crate) refs: u64,
    pub(crate) write_frac: f64,
    pub(crate) owner_share: f64,
}

#[derive(Clone, Debug)]
pub(crate) struct CompiledPhase {
    pub(crate) name: String,
    pub(crate) parallel: bool,
    pub(crate) entries: Vec<CompiledEntry>,
    pub(crate) compute: Option<Compute>,
    /// How many times the run executes the phase (`repeat`, times `iterations` unless `once`).
    pub(crate) passes: u64,
    /// A `runs` phase (DUnX synth): its schedule; `entries` is then empty.
    pub(crate) synth: Option<Synth>,
}

impl CompiledPhase {
    /// References of one repeat, all threads together (plain phases).
    pub(crate) fn entry_refs(&self) -> u64 {
        self.entries.iter().fold(0u64, |a, e| a.saturating_add(e.refs))
    }
}

/// Internal: everything `Program::work` needs besides the public fields.
#[derive(Clone, Debug, Default)]
pub(crate) struct Internals {
    pub(crate) geos: Vec<Geo>,
    /// Per step: repartition offset of every region (empty when no phase repartitions).
    pub(crate) offsets: Vec<Vec<u64>>,
    /// Per step: the synth phase `k` of a `runs` phase's step.
    pub(crate) synth_k: Vec<Option<u64>>,
}

pub(crate) fn split_even(total: u64, k: u64, i: u64) -> u64 {
    total / k + u64::from(i < total % k)
}

/// Largest-remainder apportionment of `total` by `shares`.
fn apportion(total: u64, shares: &[f64]) -> Vec<u64> {
    let raw: Vec<f64> = shares.iter().map(|s| s * total as f64).collect();
    let mut out: Vec<u64> = raw.iter().map(|r| r.floor() as u64).collect();
    let mut left = total.saturating_sub(out.iter().sum());
    let mut order: Vec<usize> = (0..shares.len()).collect();
    order.sort_by(|&a, &b| (raw[b] - raw[b].floor()).total_cmp(&(raw[a] - raw[a].floor())).then(a.cmp(&b)));
    for &i in order.iter().cycle().take(shares.len() * 2) {
        if left == 0 {
            break;
        }
        out[i] += 1;
        left -= 1;
    }
    out
}

/// Initial CPU of every thread (docs/workloads.md, "Threads").
pub(crate) fn place_threads(machine: &Machine, threads: u32, placement: ThreadPlacement, seed: u64) -> Vec<CpuId> {
    let cpus = machine.cpu_table();
    let cpu_nodes = machine.cpu_nodes();
    let cores = |n: NodeId| machine.nodes[n as usize].cores;
    let cpu_of = |n: NodeId, sib: u32, c: u32| cpus.first_cpu_of_node[n as usize] + sib * cores(n) + c;
    let max_cores = cpu_nodes.iter().map(|&n| cores(n)).max().unwrap_or(0);
    let mut slots: Vec<CpuId> = Vec::new();
    for sib in 0..machine.smt {
        let mut level: Vec<CpuId> = Vec::new();
        match placement {
            ThreadPlacement::Scatter => {
                for c in 0..max_cores {
                    for &n in &cpu_nodes {
                        if c < cores(n) {
                            level.push(cpu_of(n, sib, c));
                        }
                    }
                }
            }
            ThreadPlacement::Compact | ThreadPlacement::Random => {
                for &n in &cpu_nodes {
                    for c in 0..cores(n) {
                        level.push(cpu_of(n, sib, c));
                    }
                }
                if placement == ThreadPlacement::Random {
                    let mut rng = numalab_core::rng::stream(seed, "workload.placement", sib as u64);
                    level.shuffle(&mut rng);
                }
            }
        }
        slots.extend(level);
    }
    (0..threads as usize).map(|t| slots[t % slots.len()]).collect()
}

/// Range checks that need no machine: every count bounded, every float finite and in range.
pub(crate) fn check_limits(file: &WorkloadFile, opts: &CompileOptions) -> Result<(), String> {
    use limits::*;
    let h = &file.workload;
    if let Threads::Count(t) = h.threads {
        if t > MAX_THREADS {
            return Err(format!("workload.threads = {t}: at most {MAX_THREADS}"));
        }
    }
    if let Some(t) = opts.threads {
        if t > MAX_THREADS {
            return Err(format!("--threads {t}: at most {MAX_THREADS}"));
        }
    }
    if h.copies == 0 || h.copies > MAX_COPIES {
        return Err(format!("workload.copies = {}: must lie in 1..={MAX_COPIES}", h.copies));
    }
    if h.run.iterations > MAX_ITERATIONS {
        return Err(format!("workload.run.iterations = {}: at most {MAX_ITERATIONS}", h.run.iterations));
    }
    if !h.run.est_seconds.is_finite() || h.run.est_seconds < 0.0 {
        return Err(format!("workload.run.est_seconds = {}: must be a finite number, 0 or more", h.run.est_seconds));
    }
    if file.phase.len() > MAX_PHASES {
        return Err(format!("{} phases: at most {MAX_PHASES}", file.phase.len()));
    }
    if file.region.len() > MAX_REGIONS {
        return Err(format!("{} regions: at most {MAX_REGIONS}", file.region.len()));
    }
    for r in &file.region {
        let rb = |m: String| format!("region '{}': {m}", r.name);
        if r.bytes == Some(0) {
            return Err(rb("bytes = 0: a region needs at least one byte".into()));
        }
        if r.pages == Some(0) {
            return Err(rb("pages = 0: a region needs at least one page".into()));
        }
        if let Some(f) = r.frac {
            if !(f > 0.0 && f <= 1.0) {
                return Err(rb(format!("frac = {f} must lie in (0, 1]")));
            }
        }
        if !(0.0..=1.0).contains(&r.owner_share) {
            return Err(rb(format!("owner_share = {} must lie in [0, 1]", r.owner_share)));
        }
        for (k, v) in [("run_granularity", r.run_granularity), ("reads", r.reads), ("writes", r.writes)] {
            if let Some(v) = v {
                if !v.is_finite() || v < 0.0 {
                    return Err(rb(format!("{k} = {v} must be a finite number, 0 or more")));
                }
            }
        }
        // `inf` means "never written by others" (an RO class).
        if let Some(v) = r.write_granularity {
            if v.is_nan() || v < 0.0 {
                return Err(rb(format!("write_granularity = {v} must be 0 or more (inf allowed)")));
            }
        }
    }
    let mut steps: u64 = 0;
    for ph in &file.phase {
        let pb = |m: String| format!("phase '{}': {m}", ph.name);
        if ph.repeat > MAX_REPEAT {
            return Err(pb(format!("repeat = {}: at most {MAX_REPEAT}", ph.repeat)));
        }
        if ph.accesses.len() > MAX_ACCESSES {
            return Err(pb(format!("{} accesses: at most {MAX_ACCESSES}", ph.accesses.len())));
        }
        if ph.chunks == 0 || ph.chunks > MAX_CHUNKS {
            return Err(pb(format!("chunks = {}: must lie in 1..={MAX_CHUNKS}", ph.chunks)));
        }
        if !(ph.flops_per_access.is_finite() && (0.0..=MAX_FLOPS_PER_ACCESS).contains(&ph.flops_per_access)) {
            return Err(pb(format!(
                "flops_per_access = {}: must be a finite number in [0, {MAX_FLOPS_PER_ACCESS}]",
                numalab_core::machine::validate_short(ph.flops_per_access)
            )));
        }
        if let Some(g) = &ph.gap {
            if !(g.us.is_finite() && (0.0..=MAX_GAP_US).contains(&g.us)) {
                return Err(pb(format!("gap.us = {} µs: must be a finite number in [0, {MAX_GAP_US}]", g.us)));
            }
        }
        if let Some(r) = &ph.repartition {
            if r.every == 0 {
                return Err(pb("repartition.every = 0: must be at least 1 (remove [repartition] to disable it)".into()));
            }
            if !(r.frac.is_finite() && r.frac > 0.0 && r.frac < 1.0) {
                return Err(pb(format!("repartition.frac = {}: must lie in (0, 1)", r.frac)));
            }
        }
        for a in &ph.accesses {
            if !(a.share.is_finite() && (0.0..=1.0).contains(&a.share)) {
                return Err(pb(format!("access to '{}': share = {} must lie in [0, 1]", a.region, a.share)));
            }
            if !(0.0..=1.0).contains(&a.read_frac) {
                return Err(pb(format!("access to '{}': read_frac = {} must lie in [0, 1]", a.region, a.read_frac)));
            }
        }
        let passes = ph.repeat as u64 * if ph.once { 1 } else { h.run.iterations as u64 };
        steps = steps.saturating_add(passes);
    }
    if steps > MAX_STEPS {
        return Err(format!("the run has {steps} steps (phases × repeat × iterations): at most {MAX_STEPS}"));
    }
    Ok(())
}

/// Compile `file` (named `origin` in errors) for `machine`.
pub fn compile(file: &WorkloadFile, origin: &str, machine: &Machine, opts: &CompileOptions) -> Result<Program, WorkloadError> {
    let bad = |m: String| WorkloadError::invalid(origin, m);
    let h = &file.workload;
    if !(opts.scale > 0.0 && opts.scale.is_finite()) {
        return Err(bad(format!("--scale {} must be a positive number", opts.scale)));
    }
    if opts.scale > limits::MAX_SCALE {
        return Err(bad(format!("--scale {}: at most {}", opts.scale, limits::MAX_SCALE)));
    }
    check_limits(file, opts).map_err(bad)?;
    if h.copies != 1 {
        return Err(bad(format!("copies = {}: compile the file with `compile_spec`, which makes a mix of the copies", h.copies)));
    }
    let sys = &h.sys;
    for (k, v) in [
        ("disk_mbps", sys.disk_mbps),
        ("ctx_switch_kps", sys.ctx_switch_kps),
        ("page_free_interval_us", sys.page_free_interval_us),
        ("alloc_mb_per_iter", sys.alloc_mb_per_iter),
    ] {
        if v != 0.0 {
            return Err(bad(format!("sys.{k} = {v}: OS activity is not simulated yet; remove it or set it to 0")));
        }
    }
    let threads = match (opts.threads, &h.threads) {
        (Some(t), _) => t,
        (None, Threads::Count(t)) => *t,
        (None, Threads::Named(s)) if s == "cores" => machine.total_cores(),
        (None, Threads::Named(s)) => return Err(bad(format!("workload.threads = '{s}': expected a number or \"cores\""))),
    };
    if threads == 0 {
        return Err(bad("threads must be at least 1 (got 0)".into()));
    }
    if threads > limits::MAX_THREADS {
        return Err(bad(format!("threads = {threads}: at most {}", limits::MAX_THREADS)));
    }
    let page_bytes = machine.base_page_bytes();
    let ab = h.access_bytes;
    if !(ab.is_power_of_two() && (8..=page_bytes).contains(&ab)) {
        return Err(bad(format!("access_bytes = {ab}: must be a power of two between 8 and the page size {page_bytes}")));
    }
    let lpp = page_bytes / ab;
    if file.region.is_empty() {
        return Err(bad("the workload has no [[region]]".into()));
    }
    if file.phase.is_empty() {
        return Err(bad("the workload has no [[phase]]".into()));
    }

    let Layout { regions, geos, init_by, total_pages } = lay_out(file, origin, machine, opts, threads, lpp)?;
    let names = RegionNames::new(file, machine);
    let init = first_touches(&geos, &init_by, threads, lpp);
    let phases = compile_phases(file, origin, opts, &geos, &names, threads, lpp)?;
    schedule::check_size(file, origin, &phases, geos.len())?;
    let Schedule { steps, offsets, synth_k } = schedule::schedule(file, origin, &phases, &geos, &names, threads)?;
    let initial_cpus = place_threads(machine, threads, h.placement, h.seed);
    Ok(Program {
        name: h.name.clone(),
        threads,
        access_bytes: ab,
        page_bytes,
        lines_per_page: lpp,
        total_pages,
        regions,
        initial_cpus,
        pinned: h.pinned,
        steps,
        init,
        phases,
        internals: Internals { geos, offsets, synth_k },
        members: Vec::new(),
    })
}

/// Compile the file's phases: each access's entry and references per repeat, or a `runs`
/// phase's synthesis; errors name the phase and the access.
fn compile_phases(
    file: &WorkloadFile,
    origin: &str,
    opts: &CompileOptions,
    geos: &[Geo],
    names: &RegionNames,
    threads: u32,
    lpp: u64,
) -> Result<Vec<CompiledPhase>, WorkloadError> {
    let bad = |m: String| WorkloadError::invalid(origin, m);
    let h = &file.workload;
    let mut phases = Vec::new();
    for ph in &file.phase {
        let pb = |m: String| bad(format!("phase '{}': {m}", ph.name));
        if ph.accesses.is_empty() {
            return Err(pb("has no accesses".into()));
        }
        if ph.repeat == 0 {
            return Err(pb("repeat must be at least 1".into()));
        }
        let has_gap = ph.gap.as_ref().is_some_and(|g| g.us != 0.0);
        if ph.flops_per_access != 0.0 && has_gap {
            return Err(pb("sets both flops_per_access and gap; choose one".into()));
        }
        if ph.flops_per_access < 0.0 || ph.gap.as_ref().is_some_and(|g| g.us < 0.0) {
            return Err(pb("compute per access must not be negative".into()));
        }
        let patterns: Vec<Pattern> = ph.accesses.iter().map(|a| Pattern::parse(&a.pattern).map_err(&pb)).collect::<Result<_, _>>()?;
        let runs = patterns.iter().filter(|p| **p == Pattern::Runs).count();
        if runs > 0 && runs < patterns.len() {
            return Err(pb("mixes `runs` with other patterns".into()));
        }
        let compute = if ph.flops_per_access > 0.0 {
            Some(Compute::Flops(ph.flops_per_access))
        } else {
            match &ph.gap {
                Some(g) if g.us > 0.0 => Some(match g.dist {
                    GapDist::Const => Compute::GapConst(g.us * 1e3),
                    GapDist::Exp => Compute::GapExp(g.us * 1e3),
                }),
                _ => None,
            }
        };
        let passes = ph.repeat as u64 * if ph.once { 1 } else { h.run.iterations as u64 };
        if runs > 0 {
            if !ph.parallel {
                return Err(pb("the `runs` pattern needs parallel = true".into()));
            }
            if matches!(ph.barrier, Barrier::P2pNeighbours | Barrier::P2pNeighboursRev) {
                return Err(pb(
                    "the `runs` pattern takes barrier = \"each_run\", \"none\", \"end\" or \"each_repeat\", not a p2p barrier".into()
                ));
            }
            if ph.repartition.as_ref().is_some_and(|r| r.every > 0) {
                return Err(pb("repartition does not apply to a `runs` phase".into()));
            }
            let mut rrs = Vec::new();
            for (i, a) in ph.accesses.iter().enumerate() {
                if ph.accesses[..i].iter().any(|o| o.region == a.region) {
                    return Err(pb(format!("access to '{}': the region is named twice", a.region)));
                }
                let fr = names.region(&a.region).ok_or_else(|| pb(format!("access to '{}': no region has this name", a.region)))?;
                let li = names.index(&a.region).expect("found above");
                rrs.push(RunsRegion { region: fr, first_line: geos[li].first_line, pages: geos[li].pages });
            }
            let synth = Synth::build(&ph.accesses, &patterns, &rrs, threads, lpp).map_err(&pb)?;
            phases.push(CompiledPhase { name: ph.name.clone(), parallel: true, entries: Vec::new(), compute, passes, synth: Some(synth) });
            continue;
        }
        if matches!(ph.barrier, Barrier::EachRun) {
            return Err(pb("barrier = \"each_run\" goes with the `runs` pattern".into()));
        }
        let share_sum: f64 = ph.accesses.iter().map(|a| a.share).sum();
        if (share_sum - 1.0).abs() > 1e-6 {
            return Err(pb(format!("shares sum to {share_sum}, not 1")));
        }
        // Volume of one repeat.
        let refs = if ph.refs > 0 {
            ((ph.refs as f64 * opts.scale).round() as u64).max(1)
        } else {
            let mut named: Vec<&str> = ph.accesses.iter().map(|a| a.region.as_str()).collect();
            named.sort_unstable();
            named.dedup();
            named.iter().filter_map(|n| names.index(n)).map(|li| geos[li].lines()).sum()
        };
        let counts = apportion(refs, &ph.accesses.iter().map(|a| a.share).collect::<Vec<_>>());
        let mut entries = Vec::new();
        for ((a, pat), count) in ph.accesses.iter().zip(&patterns).zip(counts) {
            let eb = |m: String| pb(format!("access to '{}': {m}", a.region));
            let fr = names.region(&a.region).ok_or_else(|| eb("no region has this name".into()))?;
            let li = names.index(&a.region).expect("found above");
            if !(0.0..=1.0).contains(&a.read_frac) {
                return Err(eb(format!("read_frac = {} must lie in [0, 1]", a.read_frac)));
            }
            if a.share < 0.0 {
                return Err(eb("share must not be negative".into()));
            }
            let writes = a.read_frac < 1.0 && !matches!(pat, Pattern::Gather | Pattern::Chase);
            if writes && matches!(fr.sharing, Sharing::SharedRo | Sharing::Replicated) && !ph.once {
                return Err(eb(format!("writes to a {} region outside a once phase", fr.sharing.as_str())));
            }
            let partition = geos[li].partition;
            if matches!(a.who, Who::Owner | Who::Neighbours) && partition == Partition::None {
                return Err(eb(format!("who = \"{:?}\" needs a partitioned region", a.who).to_lowercase()));
            }
            if a.who == Who::Sharers {
                return Err(eb("who = \"sharers\" goes with the `runs` pattern".into()));
            }
            if let Pattern::Stencil { .. } = pat {
                if fr.plane_bytes == 0 {
                    return Err(eb("stencil needs plane_bytes on the region".into()));
                }
                if partition != Partition::Block {
                    return Err(eb("stencil needs a block partition".into()));
                }
            }
            if matches!(pat, Pattern::Transpose) && partition != Partition::Block {
                return Err(eb("transpose needs a block partition".into()));
            }
            let owner_share = if fr.sharing == Sharing::Private { 1.0 } else { fr.owner_share };
            entries.push(CompiledEntry {
                region: li,
                who: a.who,
                pattern: *pat,
                refs: count,
                write_frac: if writes { 1.0 - a.read_frac } else { 0.0 },
                owner_share,
            });
        }
        phases.push(CompiledPhase { name: ph.name.clone(), parallel: ph.parallel, entries, compute, passes, synth: None });
    }
    Ok(phases)
}
