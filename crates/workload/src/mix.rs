//! Multi-program mixes (docs/workloads.md, "Mixes"; the HyDM runs): independent processes, each
//! an instance of a workload preset with its own threads, pages and schedule, started together.
//! A workload with `copies = N` is a mix of N instances of itself.

use crate::compile::{compile, place_threads, CompileOptions};
use crate::error::WorkloadError;
use crate::program::{Member, Program};
use crate::schema::{ThreadPlacement, WorkloadFile};
use numalab_core::Machine;
use serde::{Deserialize, Serialize};

/// A mix file: a `mix` table and `member` entries, no workload, region or phase tables.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MixFile {
    pub mix: MixHeader,
    pub member: Vec<MixMember>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MixHeader {
    pub name: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub description: String,
    /// `random`: distinct cores for every thread of every instance, pinned (the HyDM setup).
    #[serde(default)]
    pub placement: ThreadPlacement,
    #[serde(default = "one")]
    pub seed: u64,
}

fn one() -> u64 {
    1
}
fn one_u32() -> u32 {
    1
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MixMember {
    /// A built-in workload preset (`numalab list workloads`).
    pub preset: String,
    #[serde(default = "one_u32")]
    pub copies: u32,
    /// Overrides the preset's thread count.
    pub threads: Option<u32>,
    /// Overrides the preset's main-loop iteration count (`run.iterations`), so that members
    /// of different lengths can be made to run side by side (docs/workloads.md, "Mixes").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub iterations: Option<u32>,
}

/// A workload file of either kind.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(untagged)]
pub enum WorkloadSpec {
    Single(WorkloadFile),
    Mix(MixFile),
}

impl WorkloadSpec {
    /// Parse TOML text: a file with a `mix` table is a mix, anything else a single workload.
    pub fn parse(text: &str, origin: &str) -> Result<WorkloadSpec, WorkloadError> {
        let is_mix = text.parse::<toml::Table>().map(|t| t.contains_key("mix")).unwrap_or(false);
        if is_mix {
            toml::from_str(text).map(WorkloadSpec::Mix).map_err(|e| WorkloadError::parse(origin, text, e))
        } else {
            crate::presets::parse(text, origin).map(WorkloadSpec::Single)
        }
    }

    /// Rebuild from a TOML tree (after `--set` overrides); errors name `origin`.
    pub fn from_value(value: toml::Value, origin: &str) -> Result<WorkloadSpec, WorkloadError> {
        let bad = |message: String| WorkloadError::Parse { origin: origin.to_string(), line: None, message };
        if value.get("mix").is_some() {
            numalab_core::from_toml_tree(value).map(WorkloadSpec::Mix).map_err(bad)
        } else {
            numalab_core::from_toml_tree(value).map(WorkloadSpec::Single).map_err(bad)
        }
    }

    /// Parse `text` and apply the range checks that need no machine
    /// (docs/workloads.md, "Limits"); an error names `origin` and, when the file writes the
    /// key, its line (`my-app.toml:14: phase 'solve': chunks = 0: …`).
    pub fn parse_checked(text: &str, origin: &str) -> Result<WorkloadSpec, WorkloadError> {
        let spec = WorkloadSpec::parse(text, origin)?;
        if let WorkloadSpec::Single(f) = &spec {
            if let Err(problem) = crate::compile::check_limits(f, &crate::CompileOptions::default()) {
                let origin = match numalab_core::locate_line(text, &problem) {
                    Some(l) => format!("{origin}:{l}"),
                    None => origin.to_string(),
                };
                return Err(WorkloadError::invalid(&origin, problem));
            }
        }
        Ok(spec)
    }

    pub fn name(&self) -> &str {
        match self {
            WorkloadSpec::Single(f) => &f.workload.name,
            WorkloadSpec::Mix(m) => &m.mix.name,
        }
    }
}

/// Compile a workload of either kind; `copies > 1` makes a mix of identical instances.
pub fn compile_spec(spec: &WorkloadSpec, origin: &str, machine: &Machine, opts: &CompileOptions) -> Result<Program, WorkloadError> {
    match spec {
        WorkloadSpec::Single(f) if f.workload.copies > crate::compile::limits::MAX_COPIES => Err(WorkloadError::invalid(
            origin,
            format!("workload.copies = {}: at most {}", f.workload.copies, crate::compile::limits::MAX_COPIES),
        )),
        WorkloadSpec::Single(f) if f.workload.copies > 1 => {
            let mut one = f.clone();
            one.workload.copies = 1;
            let instances = (0..f.workload.copies).map(|k| (format!("{}.{k}", f.workload.name), one.clone(), None)).collect();
            assemble(&f.workload.name, instances, f.workload.placement, f.workload.seed, f.workload.pinned, origin, machine, opts)
        }
        WorkloadSpec::Single(f) => compile(f, origin, machine, opts),
        WorkloadSpec::Mix(m) => {
            if m.member.is_empty() {
                return Err(WorkloadError::invalid(origin, "the mix has no member"));
            }
            let mut instances = Vec::new();
            for mem in &m.member {
                if mem.copies == 0 || mem.copies > crate::compile::limits::MAX_COPIES {
                    return Err(WorkloadError::invalid(
                        origin,
                        format!("member '{}': copies = {} must lie in 1..={}", mem.preset, mem.copies, crate::compile::limits::MAX_COPIES),
                    ));
                }
                if m.member.len() > 256 || instances.len() as u64 + mem.copies as u64 > crate::compile::limits::MAX_COPIES as u64 {
                    return Err(WorkloadError::invalid(
                        origin,
                        format!("the mix has more than {} instances in all", crate::compile::limits::MAX_COPIES),
                    ));
                }
                let mut file = crate::presets::load(&mem.preset).map_err(|e| WorkloadError::invalid(origin, format!("member: {e}")))?;
                if let Some(n) = mem.iterations {
                    if n == 0 {
                        return Err(WorkloadError::invalid(origin, format!("member '{}': iterations must be at least 1", mem.preset)));
                    }
                    file.workload.run.iterations = n;
                }
                if file.workload.copies != 1 {
                    return Err(WorkloadError::invalid(
                        origin,
                        format!("member '{}' itself has copies = {}", mem.preset, file.workload.copies),
                    ));
                }
                for k in 0..mem.copies {
                    instances.push((format!("{}.{k}", mem.preset), file.clone(), mem.threads));
                }
            }
            let pinned = m.mix.placement == ThreadPlacement::Random;
            assemble(&m.mix.name, instances, m.mix.placement, m.mix.seed, pinned, origin, machine, opts)
        }
    }
}

#[allow(clippy::too_many_arguments)]
fn assemble(
    name: &str,
    instances: Vec<(String, WorkloadFile, Option<u32>)>,
    placement: ThreadPlacement,
    seed: u64,
    pinned: bool,
    origin: &str,
    machine: &Machine,
    opts: &CompileOptions,
) -> Result<Program, WorkloadError> {
    let mut members: Vec<Member> = Vec::new();
    let (mut threads, mut pages) = (0u32, 0u64);
    let mut regions = Vec::new();
    for (iname, file, member_threads) in instances {
        let o = CompileOptions { threads: member_threads.or(opts.threads), scale: opts.scale };
        let p = compile(&file, &format!("{origin} ({iname})"), machine, &o)?;
        if let Some(first) = members.first() {
            if first.program.access_bytes != p.access_bytes {
                return Err(WorkloadError::invalid(
                    origin,
                    format!(
                        "{iname} uses access_bytes = {} but {} uses {}; a mix needs one",
                        p.access_bytes, first.name, first.program.access_bytes
                    ),
                ));
            }
        }
        for r in &p.regions {
            let mut r = r.clone();
            r.name = format!("{iname}:{}", r.name);
            r.first_page += pages;
            r.thread_base = threads;
            regions.push(r);
        }
        let (t, pg) = (p.threads, p.total_pages);
        members.push(Member { name: iname, program: p, first_thread: threads, first_page: pages });
        threads = threads.saturating_add(t);
        pages += pg;
        if threads > crate::compile::limits::MAX_THREADS {
            return Err(WorkloadError::invalid(
                origin,
                format!("the instances have more than {} threads in all", crate::compile::limits::MAX_THREADS),
            ));
        }
    }
    let first = &members[0].program;
    let need = pages * first.page_bytes;
    let have = machine.total_mem_bytes();
    if need > have {
        return Err(WorkloadError::too_large(origin, need, have, opts.scale));
    }
    let pinned = pinned || members.iter().any(|m| m.program.pinned);
    Ok(Program {
        name: name.to_string(),
        threads,
        access_bytes: first.access_bytes,
        page_bytes: first.page_bytes,
        lines_per_page: first.lines_per_page,
        total_pages: pages,
        regions,
        initial_cpus: place_threads(machine, threads, placement, seed),
        pinned,
        steps: Vec::new(),
        init: Vec::new(),
        phases: Vec::new(),
        internals: Default::default(),
        members,
    })
}
