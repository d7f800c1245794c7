//! The DAMON sampler (docs/live.md, "The DAMON sampler"): the kernel's Data Access MONitor,
//! driven through its sysfs interface under `/sys/kernel/mm/damon/admin`, watches the target's
//! virtual address space (`operations = vaddr`) and reports, per address region, how many of
//! its sampling checks in the last aggregation interval found the region accessed
//! (`nr_accesses`) and for how many aggregation intervals that count has held (`age`).
//!
//! The kernel's interface, as this module uses it (the kernel's
//! `Documentation/admin-guide/mm/damon/usage.rst`):
//!
//! * `kdamonds/nr_kdamonds`: writing N rebuilds the `kdamonds/0..N-1` directories, erasing
//!   whatever was configured there, and the kernel refuses it (EBUSY) while any kdamond runs.
//! * `kdamonds/K/state`: `on`, `off`, `update_schemes_tried_regions` (fills each scheme's
//!   `tried_regions/` with the regions the scheme was tried on at its next application);
//!   reading it says `on` or `off`.
//! * `kdamonds/K/contexts/nr_contexts`, `contexts/0/operations` (`vaddr`),
//!   `contexts/0/monitoring_attrs/intervals/{sample_us,aggr_us,update_us}`,
//!   `contexts/0/monitoring_attrs/nr_regions/{min,max}`, `contexts/0/targets/nr_targets`,
//!   `contexts/0/targets/0/pid_target`.
//! * `contexts/0/schemes/nr_schemes`, `schemes/0/action` (`stat`: count, do nothing),
//!   `schemes/0/access_pattern/{sz,nr_accesses,age}/{min,max}` (created as 0..0: opened to
//!   every region here), and `schemes/0/tried_regions/R/{start,end,nr_accesses,age}`.
//!
//! Reads go through an [`FsRoot`] (tested on sysfs trees in `tests/fixtures`); writes go
//! through [`DamonControl`] (the kernel's files, or [`RecordingDamon`] in tests).

use super::observe::{AccessObserver, Observation, ObserveError, RegionAccess};
use crate::FsRoot;

/// The DAMON sysfs interface's directory.
pub const ADMIN: &str = "/sys/kernel/mm/damon/admin";

const NAME: &str = "damon";

/// What DAMON cannot see (the summary and docs/live.md).
pub const LIMITS: &str = "access frequency per address region only: not which thread or CPU accessed \
     (so not the accessor's node), not reads from writes, not single pages (regions are merged and split \
     between 10 and 1000 regions; the monitored ranges include unmapped address space, all but the two largest gaps); \
     it feeds no hinting fault or access sample to the policy";

/// One region as DAMON last reported it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DamonRegion {
    pub start: u64,
    /// Exclusive.
    pub end: u64,
    /// Sampling checks of the last aggregation interval that found the region accessed
    /// (0 ..= aggr_us / sample_us).
    pub nr_accesses: u32,
    /// Aggregation intervals for which the region kept about this access count.
    pub age: u32,
}

impl DamonRegion {
    pub fn bytes(&self) -> u64 {
        self.end.saturating_sub(self.start)
    }
}

/// DAMON's monitoring attributes (docs/live.md, "The DAMON sampler").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DamonConfig {
    /// Interval between two access checks of a region.
    pub sample_us: u64,
    /// Interval over which the checks are summed into `nr_accesses`.
    pub aggr_us: u64,
    /// Interval between two updates of the monitored address ranges (new mappings).
    pub update_us: u64,
    pub min_regions: u64,
    pub max_regions: u64,
}

impl DamonConfig {
    /// The kernel's sampling interval (5 ms) and region bounds (10 to 1000), the aggregation
    /// interval set to the agent's period, and an update interval of 1 s: numalab's choice, so
    /// that a mapping made after the start is monitored within a second (the sysfs interface's
    /// own default is 60 s, as a real 6.12 kdamond showed: `tests/fixtures/damon/guest-6.12-busy`).
    pub fn for_period_ms(period_ms: u64) -> DamonConfig {
        let aggr_us = period_ms.max(1) * 1000;
        DamonConfig { sample_us: 5000.min(aggr_us), aggr_us, update_us: 1_000_000, min_regions: 10, max_regions: 1000 }
    }
}

/// Whether the sysfs interface is there and free, read-only. `Err`: the sentence saying why
/// numalab will not use it.
pub fn check_damon(root: &FsRoot) -> Result<(), String> {
    let nr_path = format!("{ADMIN}/kdamonds/nr_kdamonds");
    if !root.exists(ADMIN) {
        return Err(format!("absent: {ADMIN} does not exist (a kernel without CONFIG_DAMON_SYSFS)"));
    }
    let nr: u32 = match root.read(&nr_path) {
        Ok((_, t)) => t.trim().parse().map_err(|_| format!("{nr_path}: not a number: {:?}", t.trim()))?,
        Err(e) => return Err(format!("cannot read {nr_path}: {e}")),
    };
    if nr == 0 {
        return Ok(());
    }
    let mut on = Vec::new();
    for k in 0..nr {
        let dir = format!("{ADMIN}/kdamonds/{k}");
        let state = root.read(&format!("{dir}/state")).map(|(_, t)| t.trim().to_string()).unwrap_or_default();
        if state == "on" {
            let pid = root.read(&format!("{dir}/pid")).map(|(_, t)| t.trim().to_string()).unwrap_or_else(|_| "?".into());
            let ops = root.read(&format!("{dir}/contexts/0/operations")).map(|(_, t)| t.trim().to_string()).unwrap_or_else(|_| "?".into());
            on.push(format!("kdamond {k} (pid {pid}, operations {ops})"));
        }
    }
    if !on.is_empty() {
        return Err(format!(
            "busy: {} {} on, started by someone else; the kernel refuses a new kdamond while any runs (writing nr_kdamonds answers EBUSY), and numalab does not touch another user's kdamond",
            on.join(", "),
            if on.len() == 1 { "is" } else { "are" }
        ));
    }
    Err(format!(
        "in use: {nr} kdamond{} configured by someone else (off); adding one rewrites nr_kdamonds, which erases that configuration, so numalab leaves DAMON alone (`echo 0 > {nr_path}` frees it, if nobody needs it)",
        if nr == 1 { " is" } else { "s are" }
    ))
}

/// The regions of `tried_regions/` of scheme 0 of kdamond `k`, in address order.
pub fn read_tried_regions(root: &FsRoot, k: u32) -> Result<Vec<DamonRegion>, String> {
    let dir = format!("{ADMIN}/kdamonds/{k}/contexts/0/schemes/0/tried_regions");
    let names = root.list(&dir).map_err(|e| e.to_string())?;
    let mut idx: Vec<u32> = names.iter().filter_map(|n| n.parse().ok()).collect();
    idx.sort_unstable();
    let mut out = Vec::with_capacity(idx.len());
    for r in idx {
        let num = |f: &str| -> Result<u64, String> {
            let p = format!("{dir}/{r}/{f}");
            match root.read(&p) {
                Ok((_, t)) => t.trim().parse().map_err(|_| format!("{p}: not a number: {:?}", t.trim())),
                // A region directory can vanish while it is read (the next update rebuilds them).
                Err(e) => Err(e.to_string()),
            }
        };
        let (start, end) = (num("start")?, num("end")?);
        if end < start {
            return Err(format!("{dir}/{r}: end {end:#x} before start {start:#x}"));
        }
        out.push(DamonRegion {
            start,
            end,
            nr_accesses: u32::try_from(num("nr_accesses")?).unwrap_or(u32::MAX),
            age: u32::try_from(num("age")?).unwrap_or(u32::MAX),
        });
    }
    out.sort_by_key(|r| r.start);
    Ok(out)
}

/// Writes to the DAMON sysfs files, paths relative to [`ADMIN`].
pub trait DamonControl {
    /// Write `value` to the file; `Err` is the kernel's answer, as a sentence.
    fn write(&mut self, rel: &str, value: &str) -> Result<(), String>;
    /// Whether the monitored process has exited (gone, or a zombie whose memory is torn
    /// down): an update read then may cover the exit, when no page can be found accessed.
    fn target_exited(&self, _pid: u32) -> bool {
        false
    }
}

impl<T: DamonControl + ?Sized> DamonControl for &mut T {
    fn write(&mut self, rel: &str, value: &str) -> Result<(), String> {
        (**self).write(rel, value)
    }
    fn target_exited(&self, pid: u32) -> bool {
        (**self).target_exited(pid)
    }
}

/// The kernel's files under a root.
pub struct SysfsDamon {
    pub root: FsRoot,
}

impl DamonControl for SysfsDamon {
    fn write(&mut self, rel: &str, value: &str) -> Result<(), String> {
        let p = self.root.path(&format!("{ADMIN}/{rel}"));
        std::fs::write(&p, value).map_err(|e| format!("writing {value:?} to {}: {e}", p.display()))
    }
    /// `/proc/PID/stat` gone, or its state (the field after the command's closing
    /// parenthesis) `Z` or `X`.
    fn target_exited(&self, pid: u32) -> bool {
        match self.root.read(&format!("/proc/{pid}/stat")) {
            Ok((_, stat)) => matches!(stat.rsplit_once(')').and_then(|(_, rest)| rest.trim_start().chars().next()), Some('Z' | 'X')),
            Err(_) => true,
        }
    }
}

/// Records every write; fails the writes whose file is in `fail` (once each, with the given
/// sentence) — the fake of the tests.
#[derive(Clone, Debug, Default)]
pub struct RecordingDamon {
    pub writes: Vec<(String, String)>,
    pub fail: Vec<(String, String)>,
    /// What `target_exited` answers.
    pub exited: bool,
}

impl DamonControl for RecordingDamon {
    fn write(&mut self, rel: &str, value: &str) -> Result<(), String> {
        self.writes.push((rel.to_string(), value.to_string()));
        if let Some(i) = self.fail.iter().position(|(f, _)| f == rel) {
            return Err(self.fail.remove(i).1);
        }
        Ok(())
    }
    fn target_exited(&self, _pid: u32) -> bool {
        self.exited
    }
}

/// Why a context of this kernel's DAMON cannot monitor a process, read from the context that
/// `setup_writes` made: its `avail_operations` does not list `vaddr`. `None` when it does, or
/// when the file cannot be read (a kernel before 5.18; the writes then tell).
fn no_vaddr(root: &FsRoot) -> Option<String> {
    let path = format!("{ADMIN}/kdamonds/0/contexts/0/avail_operations");
    let (_, avail) = root.read(&path).ok()?;
    (!avail.split_whitespace().any(|ops| ops == "vaddr")).then(|| {
        format!(
            "no vaddr: this kernel's DAMON monitors no process's address space ({path} lists {:?}; it is built without CONFIG_DAMON_VADDR)",
            avail.trim()
        )
    })
}

/// The writes that set up kdamond 0 to monitor `pid`, in order (state `on` last).
pub fn setup_writes(pid: u32, cfg: &DamonConfig) -> Vec<(String, String)> {
    let c = "kdamonds/0/contexts/0";
    let mut w: Vec<(String, String)> = vec![
        ("kdamonds/nr_kdamonds".into(), "1".into()),
        ("kdamonds/0/contexts/nr_contexts".into(), "1".into()),
        (format!("{c}/operations"), "vaddr".into()),
        (format!("{c}/monitoring_attrs/intervals/sample_us"), cfg.sample_us.to_string()),
        (format!("{c}/monitoring_attrs/intervals/aggr_us"), cfg.aggr_us.to_string()),
        (format!("{c}/monitoring_attrs/intervals/update_us"), cfg.update_us.to_string()),
        (format!("{c}/monitoring_attrs/nr_regions/min"), cfg.min_regions.to_string()),
        (format!("{c}/monitoring_attrs/nr_regions/max"), cfg.max_regions.to_string()),
        (format!("{c}/targets/nr_targets"), "1".into()),
        (format!("{c}/targets/0/pid_target"), pid.to_string()),
        (format!("{c}/schemes/nr_schemes"), "1".into()),
        (format!("{c}/schemes/0/action"), "stat".into()),
    ];
    // The access pattern is created as 0..0 for each bound: open it to every region.
    for (what, max) in [("sz", u64::MAX), ("nr_accesses", u64::from(u32::MAX)), ("age", u64::from(u32::MAX))] {
        w.push((format!("{c}/schemes/0/access_pattern/{what}/min"), "0".into()));
        w.push((format!("{c}/schemes/0/access_pattern/{what}/max"), max.to_string()));
    }
    w.push(("kdamonds/0/state".into(), "on".into()));
    w
}

/// The DAMON sampler on one process: owns kdamond 0 from [`DamonObserver::start`] until it
/// is dropped, which turns it off and removes it (`nr_kdamonds = 0`).
pub struct DamonObserver<C: DamonControl> {
    root: FsRoot,
    ctl: C,
    /// kdamond 0 exists (ours): remove it when done.
    created: bool,
    updates: u64,
    update_failures: u64,
    /// Updates that returned no region (kept out of `regions`).
    empty_updates: u64,
    /// Updates read after the target had exited (kept out of `regions`).
    exit_updates: u64,
    pid: u32,
    regions: Vec<DamonRegion>,
    /// `regions` came from this period's update and were not handed out yet.
    fresh: bool,
    /// Checks per aggregation interval (`aggr_us / sample_us`).
    max_accesses: u32,
    stopped_by_kernel: bool,
}

impl DamonObserver<SysfsDamon> {
    /// Monitor `pid` with the kernel's DAMON.
    pub fn start_host(root: FsRoot, pid: u32, cfg: &DamonConfig) -> Result<Self, ObserveError> {
        let ctl = SysfsDamon { root: root.clone() };
        DamonObserver::start(root, ctl, pid, cfg)
    }
}

impl<C: DamonControl> DamonObserver<C> {
    /// Check that DAMON is free, set up kdamond 0 on `pid` and turn it on. On any failure
    /// what was set up is removed again and the error names the file and the kernel's answer.
    pub fn start(root: FsRoot, ctl: C, pid: u32, cfg: &DamonConfig) -> Result<Self, ObserveError> {
        check_damon(&root).map_err(|reason| ObserveError::Unavailable { sampler: NAME, reason })?;
        let mut me = DamonObserver {
            root,
            ctl,
            created: false,
            updates: 0,
            update_failures: 0,
            empty_updates: 0,
            exit_updates: 0,
            pid,
            regions: Vec::new(),
            fresh: false,
            max_accesses: u32::try_from(cfg.aggr_us / cfg.sample_us.max(1)).unwrap_or(u32::MAX),
            stopped_by_kernel: false,
        };
        for (i, (file, value)) in setup_writes(pid, cfg).into_iter().enumerate() {
            if let Err(reason) = me.ctl.write(&file, &value) {
                let reason =
                    if file.ends_with("/operations") { format!("{reason} (a kernel without CONFIG_DAMON_VADDR?)") } else { reason };
                me.teardown();
                return Err(ObserveError::Unavailable { sampler: NAME, reason });
            }
            if i == 0 {
                me.created = true;
            }
            if file == "kdamonds/0/contexts/nr_contexts" {
                // A kernel without CONFIG_DAMON_VADDR takes "vaddr" as the context's operations
                // and refuses only `on`, with EINVAL (seen on the development host's 6.18);
                // the context lists what it offers (kernels before 5.18 have no such file).
                if let Some(reason) = no_vaddr(&me.root) {
                    me.teardown();
                    return Err(ObserveError::Unavailable { sampler: NAME, reason });
                }
            }
        }
        Ok(me)
    }

    /// The regions of the last update that returned any, in address order.
    pub fn regions(&self) -> &[DamonRegion] {
        &self.regions
    }

    /// Turn kdamond 0 off and remove it; errors are written to standard error (this runs
    /// from `Drop`), the kdamond then left as it is named.
    fn teardown(&mut self) {
        if !self.created {
            return;
        }
        // `off` fails when the kdamond already stopped (its target exited): not an error.
        let _ = self.ctl.write("kdamonds/0/state", "off");
        match self.ctl.write("kdamonds/nr_kdamonds", "0") {
            Ok(()) => self.created = false,
            Err(e) => eprintln!(
                "numalab: warning: could not remove the DAMON kdamond it started ({e}); `echo off > {ADMIN}/kdamonds/0/state; echo 0 > {ADMIN}/kdamonds/nr_kdamonds` does"
            ),
        }
    }
}

impl<C: DamonControl> Drop for DamonObserver<C> {
    fn drop(&mut self) {
        self.teardown();
    }
}

impl<C: DamonControl> AccessObserver for DamonObserver<C> {
    fn name(&self) -> &'static str {
        NAME
    }
    fn limits(&self) -> &'static str {
        LIMITS
    }
    /// Asks for the tried regions (the write returns once the kdamond has filled them, at its
    /// next aggregation) and keeps them; appends no observation (DAMON names no thread).
    ///
    /// An update that returns no region keeps the previous ones and is counted
    /// (`empty_updates`): a live vaddr target always has regions, and the stat scheme is tried
    /// on every one, so an empty answer means the kdamond did not apply its scheme in that
    /// interval. Seen on a real 6.12 kdamond when the target exited during the update (the
    /// write succeeded, `tried_regions/` was empty, and the regions of the run were lost).
    fn poll(&mut self, _out: &mut Vec<Observation>) -> Result<(), ObserveError> {
        if self.stopped_by_kernel {
            return Ok(());
        }
        if let Err(reason) = self.ctl.write("kdamonds/0/state", "update_schemes_tried_regions") {
            // The kdamond stops by itself when its target exits; the engine sees the exit.
            let state = self.root.read(&format!("{ADMIN}/kdamonds/0/state")).map(|(_, t)| t.trim().to_string()).unwrap_or_default();
            if state == "off" {
                self.stopped_by_kernel = true;
                return Ok(());
            }
            self.update_failures += 1;
            return Err(ObserveError::Failed { sampler: NAME, reason });
        }
        self.updates += 1;
        let regions = read_tried_regions(&self.root, 0).map_err(|reason| ObserveError::Failed { sampler: NAME, reason })?;
        if regions.is_empty() {
            self.empty_updates += 1;
        } else if self.ctl.target_exited(self.pid) {
            // Its last aggregation may have run while the target's memory was torn down, when
            // no page is found accessed: seen on a real 6.12 kdamond as a last view with every
            // region at 0 accesses, the hot ones included. Kept out like an empty update.
            self.exit_updates += 1;
        } else {
            self.regions = regions;
            self.fresh = true;
        }
        Ok(())
    }
    /// The regions of this period's update, once (docs/live.md, "Region heat").
    fn take_regions(&mut self, out: &mut Vec<RegionAccess>) {
        if std::mem::take(&mut self.fresh) {
            let max_accesses = self.max_accesses;
            out.extend(self.regions.iter().map(|r| RegionAccess {
                start: r.start,
                end: r.end,
                nr_accesses: r.nr_accesses,
                max_accesses,
                age: r.age,
            }));
        }
    }
    fn counters(&self) -> Vec<(&'static str, u64)> {
        let accessed = self.regions.iter().filter(|r| r.nr_accesses > 0);
        vec![
            ("updates", self.updates),
            ("empty_updates", self.empty_updates),
            ("exit_updates", self.exit_updates),
            ("regions", self.regions.len() as u64),
            ("regions_accessed", accessed.clone().count() as u64),
            ("bytes_monitored", self.regions.iter().map(DamonRegion::bytes).sum()),
            ("bytes_accessed", accessed.map(DamonRegion::bytes).sum()),
            ("max_nr_accesses", self.regions.iter().map(|r| u64::from(r.nr_accesses)).max().unwrap_or(0)),
            ("stopped_by_kernel", u64::from(self.stopped_by_kernel)),
        ]
    }
    /// The regions of the last update: `[start, end, nr_accesses, age]` each, in address order.
    fn report(&self) -> Option<serde_json::Value> {
        let r: Vec<[u64; 4]> = self.regions.iter().map(|r| [r.start, r.end, u64::from(r.nr_accesses), u64::from(r.age)]).collect();
        Some(serde_json::json!({ "regions": r }))
    }
}

#[cfg(test)]
mod tests;
