//! `numalab study FILE.toml`, `numalab study merge` and `numalab study engines`: many cells,
//! cached runs, shards, and the fast engine checked against the exact one (docs/study.md).

use crate::output::{emit, write_text, OutputOpts};
use crate::scenario::pool;
use crate::study::{self, cache_path, cell_doc, read_cached, write_cached, IndexedRun, Shard, StudyDoc, StudyFile};
use anyhow::{anyhow, bail, Context, Result};
use numalab_core::rng::run_seed;
use numalab_sim::run_one;
use numalab_sim::vmrun::run_one_vm;
use rayon::prelude::*;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

#[derive(clap::Args, Debug)]
#[command(args_conflicts_with_subcommands = true)]
pub struct StudyArgs {
    #[command(subcommand)]
    pub merge: Option<StudyCommand>,
    /// The study file (TOML: [study] machines, workloads, policies, runs; optional [grid]).
    pub file: Option<PathBuf>,
    /// Cache of finished runs [default: FILE's name with .cache, beside it]. Re-running or
    /// extending a study computes only the runs the cache lacks.
    #[arg(long, value_name = "DIR")]
    pub cache: Option<PathBuf>,
    /// Run only the jobs whose index modulo N is I (e.g. one task of a SLURM array);
    /// `numalab study merge` joins the shards' documents.
    #[arg(long, value_name = "I/N")]
    pub shard: Option<Shard>,
    /// Parallel runs (default: all cores). Results do not depend on it.
    #[arg(long)]
    pub jobs: Option<usize>,
    /// Also write the table as CSV to this file.
    #[arg(long, value_name = "FILE")]
    pub csv: Option<PathBuf>,
    /// Expand the study and list its cells (machine, workload, policy, grid point, footprint
    /// and fast-tier pages, jobs, how many the cache lacks) without running anything.
    #[arg(long)]
    pub dry_run: bool,
    /// Override a configuration key in every cell, after the file's `set` list (repeatable,
    /// as `numalab sim --set`), e.g. `--set sim.sched.wait_policy=libgomp`. The document
    /// records it in the study's `set`, and its runs are cached apart from the file's own.
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub set: Vec<String>,
}

#[derive(clap::Subcommand, Debug)]
pub enum StudyCommand {
    /// Join the documents of a study's shards into the document of the whole study.
    Merge {
        /// numalab.study/1 documents of the same study.
        #[arg(required = true)]
        docs: Vec<PathBuf>,
        /// Also write the table as CSV to this file.
        #[arg(long, value_name = "FILE")]
        csv: Option<PathBuf>,
    },
    /// Check the fast engine against the exact one over a study run by both (a grid over
    /// "sim.engine"): per cell, mean time within 2 %, local ratio within 0.01, hint faults,
    /// page migrations and cross-node thread migrations per second within 5 %, CV within 20 %
    /// or 0.005; a difference outside a
    /// tolerance but within two standard errors is reported as noise. Exits non-zero when a
    /// cell is outside (docs/study.md, "Comparing the engines"). With --band, a difference
    /// within the tolerance of the band the exact engine spans under other settings (the epoch
    /// length) is reported as `band` (docs/study.md, "The reference's own band").
    Engines {
        /// A numalab.study/1 document (`numalab study FILE --format json --out DOC`).
        doc: PathBuf,
        /// A numalab.study/1 document of the same cells run by the exact engine under other
        /// settings, e.g. a grid over "sim.epoch_us" (repeat for several); only its exact cells
        /// are used.
        #[arg(long, value_name = "DOC")]
        band: Vec<PathBuf>,
        /// Also write the table as CSV to this file.
        #[arg(long, value_name = "FILE")]
        csv: Option<PathBuf>,
        /// Exit zero even when cells are outside the tolerances (to publish the table).
        #[arg(long)]
        report_only: bool,
    },
}

pub fn run(a: &StudyArgs, out: &OutputOpts) -> Result<()> {
    match &a.merge {
        Some(StudyCommand::Merge { docs, csv }) => {
            let docs = docs.iter().map(|p| read_doc(p)).collect::<Result<Vec<_>>>()?;
            let doc = study::merge(docs)?;
            return finish(&doc, csv.as_deref(), out);
        }
        Some(StudyCommand::Engines { doc, band, csv, report_only }) => return check_engines(doc, band, csv.as_deref(), *report_only, out),
        None => {}
    }
    let file = a.file.as_ref().ok_or_else(|| anyhow!("numalab study needs a study file (see docs/study.md), or `merge`"))?;
    let text = std::fs::read_to_string(file).with_context(|| format!("cannot read {}", file.display()))?;
    let mut spec = StudyFile::parse(&text, &file.display().to_string())?;
    spec.study.set.extend(a.set.iter().cloned());
    let cells = study::cells(&spec)?;
    let cache = a.cache.clone().unwrap_or_else(|| file.with_extension("cache"));
    let jobs = study::jobs(cells.len(), spec.study.runs, a.shard);
    let seed_of = |k: u32| run_seed(spec.study.seed, k as u64);
    let pending: Vec<(usize, u32)> =
        jobs.iter().copied().filter(|&(c, k)| read_cached(&cache_path(&cache, &cells[c], k, seed_of(k))).is_none()).collect();
    eprintln!(
        "study {}: {} cells, {} jobs{}, {} cached, {} to run (cache {})",
        file.display(),
        cells.len(),
        jobs.len(),
        a.shard.map_or(String::new(), |s| format!(" in shard {s}")),
        jobs.len() - pending.len(),
        pending.len(),
        cache.display()
    );
    if a.dry_run {
        return dry_run(&cells, &jobs, &pending, out);
    }
    let pb = crate::scenario::progress(pending.len() as u64, "study");
    let failure = Mutex::new(None);
    let started = std::time::Instant::now();
    let pool = pool(a.jobs)?;
    pool.install(|| {
        pending.par_iter().for_each(|&(c, k)| {
            let res = match &cells[c].vm {
                None => run_one(&cells[c].resolved.scenario, seed_of(k)),
                Some(setup) => run_one_vm(&cells[c].resolved.scenario, setup, seed_of(k)),
            }
            .map_err(anyhow::Error::from)
            .and_then(|r| write_cached(&cache_path(&cache, &cells[c], k, seed_of(k)), &r));
            if let Err(e) = res {
                let cell = &cells[c];
                failure
                    .lock()
                    .expect("no panics hold the lock")
                    .get_or_insert(e.context(format!("run {k} of {} / {} / {}", cell.machine, cell.workload, cell.policy)));
            }
            pb.inc(1);
        })
    });
    pb.finish_and_clear();
    if let Some(e) = failure.into_inner().expect("no panics hold the lock") {
        return Err(e);
    }
    // What the study cost, where the progress bar was (a study's time is what users plan
    // by; it stays out of the document, whose bytes depend only on the inputs).
    if !pending.is_empty() {
        eprintln!(
            "study {}: ran {} runs in {:.1} s wall, {} at a time",
            file.display(),
            pending.len(),
            started.elapsed().as_secs_f64(),
            pool.current_num_threads()
        );
    }
    // Every result is read back from the cache, so a resumed study and a merged one are built
    // from the same bytes.
    let mut runs: Vec<Vec<IndexedRun>> = vec![Vec::new(); cells.len()];
    for &(c, k) in &jobs {
        let path = cache_path(&cache, &cells[c], k, seed_of(k));
        let metrics = read_cached(&path).ok_or_else(|| anyhow!("the cached result {} vanished", path.display()))?;
        runs[c].push(IndexedRun { run: k, metrics });
    }
    let doc = StudyDoc {
        schema: study::SCHEMA.into(),
        numalab_version: env!("CARGO_PKG_VERSION").into(),
        study: spec,
        shard: a.shard.map(|s| s.to_string()),
        cells: cells.iter().zip(runs).map(|(c, r)| cell_doc(c, r)).collect(),
    };
    finish(&doc, a.csv.as_deref(), out)
}

/// `numalab study engines`: the check, its table, and a non-zero exit for cells outside.
fn check_engines(doc_path: &Path, band: &[PathBuf], csv: Option<&Path>, report_only: bool, out: &OutputOpts) -> Result<()> {
    let doc = read_doc(doc_path)?;
    let band = band.iter().map(|p| Ok((p.display().to_string(), read_doc(p)?))).collect::<Result<Vec<_>>>()?;
    let check =
        crate::engines::check(&doc, &band, &crate::engines::Tolerances::default()).with_context(|| doc_path.display().to_string())?;
    let t = crate::engines::table(&check);
    if let Some(path) = csv {
        write_text(Some(path), &t.render_csv())?;
    }
    emit(out, &serde_json::to_value(&check)?, &t)?;
    eprintln!(
        "{} pairs: {} within the tolerances, {} more within the noise of their runs,{} {} outside{}",
        check.pairs_total,
        check.within,
        check.within_noise,
        if band.is_empty() { String::new() } else { format!(" {} within the exact engine's own band,", check.within_band) },
        check.outside,
        if check.unpaired.is_empty() { String::new() } else { format!("; {} cells run by one engine only", check.unpaired.len()) }
    );
    if check.outside > 0 && !report_only {
        bail!("{} of {} cells are outside the fast engine's tolerances", check.outside, check.pairs_total);
    }
    Ok(())
}

fn read_doc(p: &Path) -> Result<StudyDoc> {
    let text = std::fs::read_to_string(p).with_context(|| format!("cannot read {}", p.display()))?;
    let doc: StudyDoc = serde_json::from_str(&text).map_err(|e| anyhow!("{}: not a {} document: {e}", p.display(), study::SCHEMA))?;
    if doc.schema != study::SCHEMA {
        bail!("{}: schema {} is not {}", p.display(), doc.schema, study::SCHEMA);
    }
    Ok(doc)
}

fn finish(doc: &StudyDoc, csv: Option<&Path>, out: &OutputOpts) -> Result<()> {
    let t = study::table(doc);
    if let Some(path) = csv {
        write_text(Some(path), &t.render_csv())?;
    }
    emit(out, &serde_json::to_value(doc)?, &t)
}

/// `--dry-run`: the expanded cells, one row each, and nothing run (`numalab.study-cells/1`).
fn dry_run(cells: &[study::Cell], jobs: &[(usize, u32)], pending: &[(usize, u32)], out: &OutputOpts) -> Result<()> {
    let mut table = crate::output::Table::new([
        "cell",
        "machine",
        "workload",
        "policy",
        "grid",
        "footprint_pages",
        "fast_tier_pages",
        "jobs",
        "to_run",
        "key",
    ]);
    let mut list = Vec::new();
    for (i, c) in cells.iter().enumerate() {
        let grid: Vec<String> = c.grid.iter().map(|(k, v)| format!("{k}={v}")).collect();
        let n_jobs = jobs.iter().filter(|j| j.0 == i).count();
        let n_pending = pending.iter().filter(|j| j.0 == i).count();
        let sc = &c.resolved.scenario;
        // The fastest tier's pages, as `fast_tier_fraction` sized them (docs/study.md).
        let fast_tier_pages: u64 =
            study::fast_tier_nodes(&sc.machine).iter().map(|&n| sc.machine.nodes[n].mem_bytes / sc.program.page_bytes).sum();
        table.row([
            i.to_string(),
            c.machine.clone(),
            c.workload.clone(),
            c.policy.clone(),
            grid.join(" "),
            sc.program.total_pages.to_string(),
            fast_tier_pages.to_string(),
            n_jobs.to_string(),
            n_pending.to_string(),
            c.key[..12].to_string(),
        ]);
        list.push(serde_json::json!({
            "machine": c.machine, "workload": c.workload, "policy": c.policy,
            "grid": c.grid, "footprint_pages": sc.program.total_pages, "fast_tier_pages": fast_tier_pages,
            "jobs": n_jobs, "to_run": n_pending, "key": c.key,
        }));
    }
    emit(out, &serde_json::json!({"schema": "numalab.study-cells/1", "cells": list}), &table)
}
