//! A workload's regions laid out for one machine: their pages, homes, owners and geometry,
//! and each thread's first touches (semantics: docs/workloads.md, "Generator semantics").

use crate::compile::CompileOptions;
use crate::error::WorkloadError;
use crate::program::{HomeRule, OwnerMap, RegionLayout};
use crate::schema::*;
use crate::stream::Seg;
use crate::work::Geo;
use numalab_core::Machine;

/// A file's regions laid out for one machine, one after the other from page 0: their pages,
/// home rules, owners and geometry, and who first-touches each.
pub(crate) struct Layout {
    pub(crate) regions: Vec<RegionLayout>,
    pub(crate) geos: Vec<Geo>,
    /// Per laid-out region: who first-touches it (`None`: each owner its part; a thread;
    /// `u32::MAX`: nobody, a replicated region's copies, which are homed instead).
    pub(crate) init_by: Vec<Option<u32>>,
    pub(crate) total_pages: u64,
}

/// Lay out the file's regions (sizes, layout, ownership); errors name the region. A file that
/// needs more memory than the machine has is refused here.
pub(crate) fn lay_out(
    file: &WorkloadFile,
    origin: &str,
    machine: &Machine,
    opts: &CompileOptions,
    threads: u32,
    lpp: u64,
) -> Result<Layout, WorkloadError> {
    let bad = |m: String| WorkloadError::invalid(origin, m);
    let h = &file.workload;
    let page_bytes = machine.base_page_bytes();
    let ab = h.access_bytes;
    let mut regions = Vec::new();
    let mut geos = Vec::new();
    let mut init_by = Vec::new();
    let mut next_page = 0u64;
    let cpu_nodes = machine.cpu_nodes();
    for (i, r) in file.region.iter().enumerate() {
        let rb = |m: String| bad(format!("region '{}': {m}", r.name));
        if file.region[..i].iter().any(|o| o.name == r.name) {
            return Err(rb("the name is used twice".into()));
        }
        let given = [r.bytes.is_some(), r.frac.is_some(), r.pages.is_some()].iter().filter(|&&g| g).count();
        if given != 1 {
            return Err(rb(format!("give exactly one of bytes, frac and pages (got {given})")));
        }
        let per_thread = r.dunx_class == "PR";
        let mut pages = if let Some(b) = r.bytes {
            ((b as f64 * opts.scale) / page_bytes as f64).ceil() as u64
        } else if let Some(f) = r.frac {
            if h.footprint == 0 {
                return Err(rb("frac needs workload.footprint".into()));
            }
            if !(f > 0.0 && f <= 1.0) {
                return Err(rb(format!("frac = {f} must lie in (0, 1]")));
            }
            ((h.footprint as f64 * f * opts.scale) / page_bytes as f64).ceil() as u64
        } else {
            (r.pages.unwrap_or(0) as f64 * opts.scale).ceil() as u64
        };
        pages = pages.max(1);
        if per_thread {
            pages *= threads as u64;
        }
        let partition = r.partition.unwrap_or(match r.sharing {
            Sharing::Private | Sharing::Partitioned => Partition::Block,
            _ => Partition::None,
        });
        if !(0.0..=1.0).contains(&r.owner_share) {
            return Err(rb(format!("owner_share = {} must lie in [0, 1]", r.owner_share)));
        }
        let default_init = match h.init {
            InitStyle::ParallelFt => "owner",
            InitStyle::Master => "master",
            InitStyle::OwnerExplicit | InitStyle::Interleave => "none",
        };
        let ib = parse_init_by(r.init_by.as_deref().unwrap_or(default_init), threads).map_err(rb)?;
        if ib.is_none() && partition == Partition::None {
            return Err(rb("init_by = \"owner\" needs a partition (block or cyclic)".into()));
        }
        let home = match (&r.home, h.init) {
            (Some(Home::Node(n)), _) => {
                if *n as usize >= machine.node_count() || machine.nodes[*n as usize].mem_bytes == 0 {
                    return Err(rb(format!("home = {n} is not a node with memory")));
                }
                Some(HomeRule::Node(*n))
            }
            (Some(Home::Named(s)), _) if s == "owner" => {
                if partition == Partition::None {
                    return Err(rb("home = \"owner\" needs a partition".into()));
                }
                Some(HomeRule::Owner)
            }
            (Some(Home::Named(s)), _) if s == "interleave" => Some(HomeRule::Interleave),
            (Some(Home::Named(s)), _) => return Err(rb(format!("home = '{s}': expected a node id, \"owner\" or \"interleave\""))),
            (None, InitStyle::Interleave) => Some(HomeRule::Interleave),
            (None, InitStyle::OwnerExplicit) => return Err(rb("workload.init = \"owner_explicit\" needs a home on every region".into())),
            (None, _) => None,
        };
        let owner_of = match partition {
            Partition::Block => OwnerMap::Block { threads },
            Partition::Cyclic => OwnerMap::Cyclic { threads },
            Partition::None => OwnerMap::None,
        };
        if r.sharing == Sharing::Replicated {
            // One copy per CPU node, each homed on its node; threads read their node's copy.
            for &n in &cpu_nodes {
                regions.push(RegionLayout {
                    thread_base: 0,
                    name: format!("{}@{n}", r.name),
                    first_page: next_page,
                    pages,
                    home: Some(HomeRule::Node(n)),
                    owner_of,
                });
                geos.push(Geo {
                    first_line: next_page * lpp,
                    pages,
                    lpp,
                    partition,
                    plane_lines: plane_lines(r.plane_bytes, opts.scale, ab),
                });
                init_by.push(Some(u32::MAX));
                next_page += pages;
            }
            continue;
        }
        regions.push(RegionLayout { name: r.name.clone(), thread_base: 0, first_page: next_page, pages, home, owner_of });
        geos.push(Geo { first_line: next_page * lpp, pages, lpp, partition, plane_lines: plane_lines(r.plane_bytes, opts.scale, ab) });
        init_by.push(ib);
        next_page += pages;
    }
    let total_pages = next_page;
    let need = total_pages * page_bytes;
    let have = machine.total_mem_bytes();
    if need > have {
        return Err(WorkloadError::too_large(origin, need, have, opts.scale));
    }
    Ok(Layout { regions, geos, init_by, total_pages })
}

/// Where the regions a file names were laid out: a replicated region is laid out as one
/// region per CPU node, and its name stands for the first of them.
pub(crate) struct RegionNames<'f> {
    file: &'f WorkloadFile,
    copies: usize,
}

impl<'f> RegionNames<'f> {
    pub(crate) fn new(file: &'f WorkloadFile, machine: &Machine) -> RegionNames<'f> {
        RegionNames { file, copies: machine.cpu_nodes().len() }
    }

    /// The laid-out index of the region named `name`.
    pub(crate) fn index(&self, name: &str) -> Option<usize> {
        let mut li = 0;
        for r in &self.file.region {
            if r.name == name {
                return Some(li);
            }
            li += if r.sharing == Sharing::Replicated { self.copies } else { 1 };
        }
        None
    }

    /// The file's region named `name`.
    pub(crate) fn region(&self, name: &str) -> Option<&'f Region> {
        self.file.region.iter().find(|r| r.name == name)
    }
}

/// Each thread's first touches: in parallel, ascending page order, regions in file order.
pub(crate) fn first_touches(geos: &[Geo], init_by: &[Option<u32>], threads: u32, lpp: u64) -> Vec<Vec<Seg>> {
    let mut init: Vec<Vec<Seg>> = vec![Vec::new(); threads as usize];
    for (li, g) in geos.iter().enumerate() {
        let touch = |pages_lo: u64, count: u64, step_pages: u64| Seg {
            start: g.first_line + pages_lo * lpp,
            chunk: 1,
            step: step_pages * lpp,
            chunks: count,
        };
        match init_by[li] {
            Some(u32::MAX) => {}
            Some(k) => init[k as usize].push(touch(0, g.pages, 1)),
            None => {
                for t in 0..threads {
                    match g.partition {
                        Partition::Cyclic => {
                            let count = (g.pages + threads as u64 - 1 - t as u64) / threads as u64;
                            if count > 0 {
                                init[t as usize].push(touch(t as u64, count, threads as u64));
                            }
                        }
                        _ => {
                            let (lo, hi) = g.block_pages(t, threads);
                            if hi > lo {
                                init[t as usize].push(touch(lo, hi - lo, 1));
                            }
                        }
                    }
                }
            }
        }
    }
    init
}

/// Lines of one plane at this scale: a grid scaled by `s` in volume has planes scaled by
/// `s^(2/3)` (at least one line when the region has planes at all).
fn plane_lines(plane_bytes: u64, scale: f64, ab: u64) -> u64 {
    if plane_bytes == 0 {
        return 0;
    }
    ((plane_bytes as f64 * scale.powf(2.0 / 3.0) / ab as f64).ceil() as u64).max(1)
}

fn parse_init_by(s: &str, threads: u32) -> Result<Option<u32>, String> {
    match s {
        "owner" => Ok(None),
        "master" => Ok(Some(0)),
        "none" => Ok(Some(u32::MAX)),
        _ => match s.strip_prefix("thread:").and_then(|k| k.parse::<u32>().ok()) {
            Some(k) if k < threads => Ok(Some(k)),
            Some(k) => Err(format!("init_by = 'thread:{k}' but the workload has {threads} threads")),
            None => Err(format!("init_by = '{s}': expected owner, master, thread:K or none")),
        },
    }
}
