//! The DUnX `synth` schedule: the `runs` pattern (docs/workloads.md, "The runs pattern"; after
//! the DUnX generator, docs/workloads.md "The runs pattern", and the counting rules of docs/model.md §3.2).
//!
//! A phase made of `runs` entries is expanded into `K` synth phases, one [`crate::Step`] each.
//! In synth phase `k` every page of a shared class gets its run `k` (if it has one), made by one
//! of the page's sharers; each process also makes its share of private (PR) references,
//! interleaved among its run references by the floor rule. Everything is integer arithmetic, so
//! the per-class, per-thread counts are exact and reported by [`crate::Program::synth_counts`].

use crate::program::{Program, ThreadWork};
use crate::schema::{Access, Pattern, Region, Sharing, Who};
use crate::stream::{AccessKind, Compute, Cursor, Entry};
use serde::Serialize;

/// The five DUnX page classes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub enum DunxClass {
    /// Private data and code, one set of pages per process.
    PR,
    /// Shared, never written.
    RO,
    /// Shared, rarely written.
    RM,
    /// Read-write shared in long single-process runs.
    SS,
    /// Read-write shared with fine interleaving.
    SP,
}

impl DunxClass {
    pub fn parse(s: &str) -> Option<DunxClass> {
        Some(match s {
            "PR" => DunxClass::PR,
            "RO" => DunxClass::RO,
            "RM" => DunxClass::RM,
            "SS" => DunxClass::SS,
            "SP" => DunxClass::SP,
            _ => return None,
        })
    }
    pub fn as_str(self) -> &'static str {
        match self {
            DunxClass::PR => "PR",
            DunxClass::RO => "RO",
            DunxClass::RM => "RM",
            DunxClass::SS => "SS",
            DunxClass::SP => "SP",
        }
    }
}

/// Where one DUnX class's pages lie and the per-class parameters a class-aware policy needs
/// (docs/model.md §3.1 and §3.3): what the simulator hands the oracle policies
/// (docs/policies/oracle.md) as their class knowledge.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ClassPages {
    pub class: DunxClass,
    /// The region holding the class's pages.
    pub region: String,
    /// First page of the region in the program's page numbering.
    pub first_page: u64,
    /// Pages of the region (for PR: every thread's pages together).
    pub pages: u64,
    /// `M_c`: threads that use each page (1 for PR).
    pub sharers: u64,
    /// `r̂_c`: references of one run.
    pub run_refs: u64,
    /// `ŵ_c = min(w_c, T_c)`: references between two writes by others, at most a pair's whole
    /// count (docs/model.md §3.3).
    pub write_run_refs: f64,
    /// `W_c > 0`: the class is written.
    pub written: bool,
}

/// Exact reference counts of one class in one pass of a synth phase (all `K` synth phases).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ClassCounts {
    pub class: DunxClass,
    /// The region holding the class's pages.
    pub region: String,
    /// Pages of the class (for PR: per thread).
    pub pages: u64,
    /// Per thread.
    pub reads: Vec<u64>,
    /// Per thread.
    pub writes: Vec<u64>,
}

impl ClassCounts {
    /// Reads plus writes of thread `t`.
    pub fn refs(&self, t: usize) -> u64 {
        self.reads[t] + self.writes[t]
    }
}

/// Exact counts of one `runs` phase of a compiled program.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct SynthCounts {
    /// The workload phase.
    pub phase: String,
    /// `K`: synth phases (steps) per pass.
    pub synth_phases: u64,
    /// How many passes the run makes over the phase (`repeat`, times `iterations` unless `once`).
    /// The counts below are per pass.
    pub passes: u64,
    /// In class order PR, RO, RM, SS, SP (only the classes the phase uses).
    pub classes: Vec<ClassCounts>,
}

/// One shared class, ready to generate.
#[derive(Clone, Debug)]
pub(crate) struct SharedClass {
    class: DunxClass,
    name: String,
    first_line: u64,
    /// `P_c`.
    pages: u64,
    /// `M_c`.
    m: u64,
    /// `T_c = R_c + W_c`.
    t: u64,
    /// `W_c`.
    w: u64,
    /// `r̂_c = min(r_c, T_c)`.
    rhat: u64,
    /// `ŵ_c = min(w_c, T_c)`.
    what: f64,
    /// `ρ_c = ceil(T_c / r̂_c)`.
    rho: u64,
    /// `m_c = ceil(w_c / r̂_c)`; `None` when `w_c = ∞`.
    mw: Option<u64>,
    /// `n_w = ceil(ρ_c / m_c)` write-carrying runs per pair (0 when `w_c = ∞`).
    nw: u64,
    /// `n / gcd(M_c, n)`, the divisor of the rotation `o_g`.
    rot_div: u64,
}

impl SharedClass {
    /// Runs per page, `M_c · ρ_c`.
    fn runs_per_page(&self) -> u64 {
        self.m * self.rho
    }
    /// The sharer making run `k` of page `g`: `S_g[(k + o_g) mod M]`.
    fn sharer(&self, g: u64, k: u64, n: u64) -> u64 {
        let o = (g / self.rot_div) % self.m;
        (g * self.m + (k + o) % self.m) % n
    }
    /// Length and writes of the runs in round `q` (`q < ρ`).
    fn run(&self, q: u64) -> (u64, u64) {
        let len = self.rhat.min(self.t - q * self.rhat);
        let writes = match self.mw {
            Some(m) if q.is_multiple_of(m) && self.nw > 0 => {
                let i = q / m;
                self.w / self.nw + u64::from(i < self.w % self.nw)
            }
            _ => 0,
        };
        (len, writes)
    }
}

/// The private (PR) class.
#[derive(Clone, Debug)]
pub(crate) struct PrivateClass {
    name: String,
    first_line: u64,
    /// `P_PR`, pages per thread.
    pages: u64,
    /// `R_PR + W_PR`.
    t: u64,
    w: u64,
}

impl PrivateClass {
    /// `N_PR`, PR references per process and pass.
    fn total(&self) -> u64 {
        self.pages * self.t
    }
    /// Is the process's PR reference `j` (from 0 in the pass) a write?
    fn is_write(&self, j: u64) -> bool {
        floor_step(j, self.w, self.t)
    }
}

/// `floor((i+1)·x/l) > floor(i·x/l)`: the spec's rule for spreading `x` marks over `l` slots.
#[inline]
fn floor_step(i: u64, x: u64, l: u64) -> bool {
    let (i, x, l) = (i as u128, x as u128, l as u128);
    (i + 1) * x / l > i * x / l
}

/// A compiled `runs` phase.
#[derive(Clone, Debug)]
pub(crate) struct Synth {
    n: u64,
    lpp: u64,
    /// `K`.
    pub(crate) k: u64,
    /// Shared classes in the spec's order RO, RM, SS, SP.
    shared: Vec<SharedClass>,
    pr: Option<PrivateClass>,
}

/// A `runs` region as the compiler sees it.
pub(crate) struct RunsRegion<'a> {
    pub region: &'a Region,
    pub first_line: u64,
    /// Pages of the laid-out region (for PR: all threads' pages together).
    pub pages: u64,
}

fn whole(v: f64, what: &str, name: &str) -> Result<u64, String> {
    if v.is_finite() && v >= 0.0 && v.fract() == 0.0 && v <= u32::MAX as f64 * 1e3 {
        Ok(v as u64)
    } else {
        Err(format!("region '{name}': {what} = {v} must be a non-negative whole number"))
    }
}

impl Synth {
    /// Validate the `runs` entries of a phase and build the schedule. `regions` are the entries'
    /// regions, in entry order.
    pub(crate) fn build(
        accesses: &[Access],
        patterns: &[Pattern],
        regions: &[RunsRegion],
        threads: u32,
        lpp: u64,
    ) -> Result<Synth, String> {
        let n = threads as u64;
        let mut shared: Vec<SharedClass> = Vec::new();
        let mut pr: Option<PrivateClass> = None;
        for ((a, p), rr) in accesses.iter().zip(patterns).zip(regions) {
            debug_assert_eq!(*p, Pattern::Runs);
            let r = rr.region;
            let name = &r.name;
            if a.who != Who::Sharers {
                return Err(format!("access to '{name}': pattern \"runs\" needs who = \"sharers\""));
            }
            let missing: Vec<&str> = [
                ("sharers", r.sharers.is_none()),
                ("run_granularity", r.run_granularity.is_none()),
                ("write_granularity", r.write_granularity.is_none()),
                ("reads", r.reads.is_none()),
                ("writes", r.writes.is_none()),
            ]
            .iter()
            .filter(|x| x.1)
            .map(|x| x.0)
            .collect();
            if !missing.is_empty() {
                return Err(format!("region '{name}': pattern \"runs\" needs all five of sharers, run_granularity, write_granularity, reads and writes; missing {}", missing.join(", ")));
            }
            let class = DunxClass::parse(&r.dunx_class).ok_or_else(|| {
                format!(
                    "region '{name}': pattern \"runs\" needs dunx_class = \"PR\", \"RO\", \"RM\", \"SS\" or \"SP\" (got '{}')",
                    r.dunx_class
                )
            })?;
            if r.sharing == Sharing::Replicated {
                return Err(format!("region '{name}': pattern \"runs\" does not work on a replicated region"));
            }
            let m = r.sharers.unwrap_or(0) as u64;
            let rg = r.run_granularity.unwrap_or(0.0);
            let wg = r.write_granularity.unwrap_or(0.0);
            let reads = whole(r.reads.unwrap_or(0.0), "reads", name)?;
            let writes = whole(r.writes.unwrap_or(0.0), "writes", name)?;
            if m < 1 || m > n {
                return Err(format!("region '{name}': sharers = {m} must lie in 1..={n} (the thread count): M_c ≤ n"));
            }
            let t = reads + writes;
            if t == 0 {
                return Err(format!("region '{name}': reads + writes must be at least 1"));
            }
            let rgw = whole(rg, "run_granularity", name)?;
            if rgw < 1 {
                return Err(format!("region '{name}': run_granularity must be at least 1"));
            }
            if wg.is_nan() || wg < rg {
                return Err(format!("region '{name}': write_granularity = {wg} must be at least run_granularity = {rg} (another process's write is also its reference)"));
            }
            let w_inf = wg == f64::INFINITY;
            if !w_inf {
                whole(wg, "write_granularity", name)?;
            }
            if class == DunxClass::RO && (writes != 0 || !w_inf) {
                return Err(format!("region '{name}': an RO class needs writes = 0 and write_granularity = inf"));
            }
            if writes > 0 && w_inf {
                return Err(format!("region '{name}': writes = {writes} needs a finite write_granularity"));
            }
            if writes > 0 && r.sharing == Sharing::SharedRo {
                return Err(format!("region '{name}': writes to a shared_ro region outside a once phase"));
            }
            let dup = if class == DunxClass::PR { pr.is_some() } else { shared.iter().any(|c| c.class == class) };
            if dup {
                return Err(format!("region '{name}': the phase names class {} twice", class.as_str()));
            }
            if class == DunxClass::PR {
                if m != 1 {
                    return Err(format!("region '{name}': the PR class is per process and needs sharers = 1"));
                }
                pr = Some(PrivateClass { name: name.clone(), first_line: rr.first_line, pages: rr.pages / n, t, w: writes });
                continue;
            }
            let rhat = rgw.min(t);
            let rho = t.div_ceil(rhat);
            let mw = (!w_inf).then(|| (wg as u64).div_ceil(rhat));
            let nw = mw.map_or(0, |mw| rho.div_ceil(mw));
            let c = SharedClass {
                class,
                name: name.clone(),
                first_line: rr.first_line,
                pages: rr.pages,
                m,
                t,
                w: writes,
                rhat,
                what: wg.min(t as f64),
                rho,
                mw,
                nw,
                rot_div: n / gcd(m, n),
            };
            if let Some(mw) = mw {
                // Writes per write-carrying run never grow with its index and only the last run
                // can be shorter than `r̂`, so the first and the last run are the ones to check
                // (checking every run took minutes for a fuzzed `reads = 1e12`).
                for i in [0, nw.saturating_sub(1)] {
                    let (len, w) = c.run(i * mw);
                    if w > len {
                        return Err(format!("region '{name}': writes = {writes} over {nw} write-carrying runs puts {w} writes in a run of {len} references (too many writes for a run)"));
                    }
                }
            }
            shared.push(c);
        }
        shared.sort_by_key(|c| c.class);
        let k = shared.iter().filter(|c| c.pages > 0).map(|c| c.runs_per_page()).max().unwrap_or(1).max(1);
        Ok(Synth { n, lpp, k, shared, pr })
    }

    /// PR references of synth phase `k`, and the pass-wide index of the first one.
    fn pr_span(&self, k: u64) -> (u64, u64) {
        match &self.pr {
            Some(p) => {
                let total = p.total() as u128;
                let lo = (k as u128 * total / self.k as u128) as u64;
                let hi = ((k as u128 + 1) * total / self.k as u128) as u64;
                (lo, hi - lo)
            }
            None => (0, 0),
        }
    }

    /// The runs thread `t` makes in synth phase `k`, in order: `(line, length, writes)`.
    fn runs_of(&self, k: u64, t: u64) -> Vec<(u64, u64, u64)> {
        let mut out = Vec::new();
        for c in &self.shared {
            if k >= c.runs_per_page() {
                continue;
            }
            let (len, writes) = c.run(k / c.m);
            for g in 0..c.pages {
                if c.sharer(g, k, self.n) == t {
                    out.push((c.first_line + g * self.lpp, len, writes));
                }
            }
        }
        out
    }

    /// Thread `t`'s work in synth phase `k`: one entry whose cursor replays, in the spec's order,
    /// the runs (each reference to the first line of its page) with the PR references
    /// interleaved by the floor rule. Consecutive references to one line that are all reads or
    /// all writes share one `Cursor::Runs` item, so the write positions are exact.
    pub(crate) fn work(&self, k: u64, t: u32, compute: Option<Compute>) -> ThreadWork {
        let t = t as u64;
        let runs = self.runs_of(k, t);
        let (pr_lo, x) = self.pr_span(k);
        let run_refs: u64 = runs.iter().map(|r| r.1).sum();
        let total = run_refs + x;
        let mut items: Vec<(u64, u32, u32)> = Vec::new();
        let mut push = |line: u64, write: bool| {
            if let Some(last) = items.last_mut() {
                let same_kind = if write { last.2 == last.1 } else { last.2 == 0 };
                if last.0 == line && same_kind && last.1 < u32::MAX {
                    last.1 += 1;
                    last.2 += u32::from(write);
                    return;
                }
            }
            items.push((line, 1, u32::from(write)));
        };
        let (mut run, mut pos, mut j) = (0usize, 0u64, pr_lo);
        for i in 0..total {
            if x > 0 && floor_step(i, x, total) {
                let p = self.pr.as_ref().expect("x > 0 only with a PR class");
                let page = t * p.pages + j % p.pages;
                push(p.first_line + page * self.lpp, p.is_write(j));
                j += 1;
            } else {
                let (line, len, writes) = runs[run];
                push(line, floor_step(pos, writes, len));
                pos += 1;
                if pos == len {
                    pos = 0;
                    run += 1;
                }
            }
        }
        if total == 0 {
            return ThreadWork { entries: vec![], epilogue: vec![], compute };
        }
        let e = Entry::new(Cursor::Runs { runs: items, idx: 0, pos: 0 }, total, 0.0, AccessKind::Dependent, None);
        ThreadWork { entries: vec![e], epilogue: vec![], compute }
    }

    /// References of one pass over all classes and threads, in closed form: a PR class makes
    /// `P·T` per thread; each page of a shared class gets `M` rounds of runs summing to `T`.
    /// Equal to the sum of [`Synth::counts`], in O(classes) instead of O(pages × runs), so the
    /// work estimate stays instant on a huge class (a fuzzed 2^32-page region took 26 s).
    pub(crate) fn total_refs(&self) -> u64 {
        let pr = self.pr.as_ref().map_or(0, |p| p.total().saturating_mul(self.n));
        self.shared.iter().fold(pr, |a, c| a.saturating_add(c.pages.saturating_mul(c.m).saturating_mul(c.t)))
    }

    /// Exact per-class, per-thread counts of one pass.
    pub(crate) fn counts(&self, phase: &str, passes: u64) -> SynthCounts {
        let n = self.n as usize;
        let mut classes = Vec::new();
        if let Some(p) = &self.pr {
            let total = p.total();
            let writes = (total as u128 * p.w as u128 / p.t as u128) as u64;
            classes.push(ClassCounts {
                class: DunxClass::PR,
                region: p.name.clone(),
                pages: p.pages,
                reads: vec![total - writes; n],
                writes: vec![writes; n],
            });
        }
        for c in &self.shared {
            let (mut reads, mut writes) = (vec![0u64; n], vec![0u64; n]);
            for k in 0..c.runs_per_page() {
                let (len, w) = c.run(k / c.m);
                for g in 0..c.pages {
                    let s = c.sharer(g, k, self.n) as usize;
                    reads[s] += len - w;
                    writes[s] += w;
                }
            }
            classes.push(ClassCounts { class: c.class, region: c.name.clone(), pages: c.pages, reads, writes });
        }
        SynthCounts { phase: phase.to_string(), synth_phases: self.k, passes, classes }
    }

    /// The classes' pages and parameters, in class order PR, RO, RM, SS, SP.
    pub(crate) fn class_pages(&self) -> Vec<ClassPages> {
        let mut out = Vec::new();
        if let Some(p) = &self.pr {
            out.push(ClassPages {
                class: DunxClass::PR,
                region: p.name.clone(),
                first_page: p.first_line / self.lpp,
                pages: p.pages * self.n,
                sharers: 1,
                run_refs: p.t,
                write_run_refs: if p.w > 0 { p.t as f64 } else { f64::INFINITY },
                written: p.w > 0,
            });
        }
        for c in &self.shared {
            out.push(ClassPages {
                class: c.class,
                region: c.name.clone(),
                first_page: c.first_line / self.lpp,
                pages: c.pages,
                sharers: c.m,
                run_refs: c.rhat,
                write_run_refs: c.what,
                written: c.w > 0,
            });
        }
        out
    }

    /// Per-pair run plan of a shared class: `(length, writes)` for rounds `0..ρ` (for tests and
    /// reports).
    pub(crate) fn pair_runs(&self, class: DunxClass) -> Option<Vec<(u64, u64)>> {
        let c = self.shared.iter().find(|c| c.class == class)?;
        Some((0..c.rho).map(|q| c.run(q)).collect())
    }

    /// The thread making run `k` of page `g` of a shared class.
    pub(crate) fn sharer_of(&self, class: DunxClass, g: u64, k: u64) -> Option<u32> {
        let c = self.shared.iter().find(|c| c.class == class)?;
        (g < c.pages && k < c.runs_per_page()).then(|| c.sharer(g, k, self.n) as u32)
    }
}

fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

impl Program {
    /// For a step of a `runs` phase, its synth phase `k` (`0..K`); `None` for other steps.
    pub fn synth_phase(&self, step: usize) -> Option<u64> {
        self.internals.synth_k.get(step).copied().flatten()
    }

    /// Exact reference counts per class, thread and access type of every `runs` phase (empty
    /// when the workload has none), per pass over the phase.
    pub fn synth_counts(&self) -> Vec<SynthCounts> {
        self.phases.iter().filter_map(|p| p.synth.as_ref().map(|s| s.counts(&p.name, p.passes))).collect()
    }

    /// Every DUnX class's pages and parameters over the program's `runs` phases (empty when it
    /// has none); a region named by several phases is listed once, from its first phase.
    pub fn synth_class_pages(&self) -> Vec<ClassPages> {
        let mut out: Vec<ClassPages> = Vec::new();
        for s in self.phases.iter().filter_map(|p| p.synth.as_ref()) {
            for c in s.class_pages() {
                if !out.iter().any(|o| o.first_page == c.first_page) {
                    out.push(c);
                }
            }
        }
        out
    }

    /// Per (page, sharer) pair of a shared class of the first `runs` phase: `(length, writes)` of
    /// its runs, round by round.
    pub fn synth_pair_runs(&self, class: DunxClass) -> Option<Vec<(u64, u64)>> {
        self.phases.iter().find_map(|p| p.synth.as_ref()).and_then(|s| s.pair_runs(class))
    }

    /// The thread making run `k` of page `g` (numbered within its class) of a shared class of the
    /// first `runs` phase; `None` if there is no such run.
    pub fn synth_sharer(&self, class: DunxClass, g: u64, k: u64) -> Option<u32> {
        self.phases.iter().find_map(|p| p.synth.as_ref()).and_then(|s| s.sharer_of(class, g, k))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn class(t: u64, w: u64, rg: u64, wg: u64) -> SharedClass {
        let rhat = rg.min(t);
        let rho = t.div_ceil(rhat);
        let mw = wg.div_ceil(rhat);
        SharedClass {
            class: DunxClass::SP,
            name: "c".into(),
            first_line: 0,
            pages: 1,
            m: 1,
            t,
            w,
            rhat,
            what: (wg as f64).min(t as f64),
            rho,
            mw: Some(mw),
            nw: rho.div_ceil(mw),
            rot_div: 1,
        }
    }

    proptest::proptest! {
        /// `build` checks only the first and the last write-carrying run; no run in between can
        /// hold more writes than references when those two do not.
        #[test]
        fn first_and_last_write_runs_bound_all(t in 1u64..400, w_share in 0u64..=100, rg in 1u64..50, extra in 0u64..60) {
            let w = t * w_share / 100;
            let c = class(t, w, rg, rg + extra);
            let over = |i: u64| { let (len, writes) = c.run(i * c.mw.unwrap()); writes > len };
            let any = (0..c.nw).any(over);
            let ends = over(0) || over(c.nw.saturating_sub(1));
            proptest::prop_assert_eq!(any, ends);
        }
    }
}
