//! `numalab study engines DOC.json`: the fast engine against the exact one, cell by cell, over
//! a study whose grid runs both (docs/study.md, "Comparing the engines"). The tolerances are
//! those the fast engine is held to (docs/results/fast-vs-exact.md): mean run time within 2 %,
//! local ratio within 0.01, hint faults, page migrations and cross-node thread migrations per
//! second within 5 %, and the run-to-run variation (CV) within 20 % relative or 0.005
//! absolute.
//!
//! A difference outside a tolerance may still be one that the runs cannot tell from zero:
//! with a few runs of a cell whose runs differ by 10 %, the exact engine's own mean is known
//! only to several per cent. Each check therefore also says whether the difference is within
//! twice its standard error (the two engines' standard errors of the mean combined), and a
//! pair is `within`, `within noise` or `outside`.

use crate::study::{CellDoc, StudyDoc};
use anyhow::{bail, Result};
use serde::Serialize;
use std::collections::BTreeMap;

pub const SCHEMA: &str = "numalab.engine-check/1";

/// What the fast engine is held to against the exact one.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct Tolerances {
    pub time_rel: f64,
    pub local_abs: f64,
    pub rate_rel: f64,
    pub cv_rel: f64,
    pub cv_abs: f64,
    /// A difference within this many standard errors is one the runs cannot resolve.
    pub noise_se: f64,
}

impl Default for Tolerances {
    fn default() -> Self {
        Tolerances { time_rel: 0.02, local_abs: 0.01, rate_rel: 0.05, cv_rel: 0.20, cv_abs: 0.005, noise_se: 2.0 }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    Within,
    /// Outside the tolerance, but within `noise_se` standard errors.
    Noise,
    Outside,
}

impl Verdict {
    fn word(self) -> &'static str {
        match self {
            Verdict::Within => "ok",
            Verdict::Noise => "noise",
            Verdict::Outside => "OUT",
        }
    }
}

/// Mean, sample standard deviation and standard error of the mean of a metric over a cell's
/// runs (`sd` and `se` are NaN with fewer than two runs).
#[derive(Clone, Copy, Debug, Serialize)]
pub struct Moments {
    pub mean: f64,
    pub sd: f64,
    pub se: f64,
}

impl Moments {
    fn of(xs: &[f64]) -> Option<Moments> {
        if xs.is_empty() {
            return None;
        }
        let n = xs.len() as f64;
        let mean = xs.iter().sum::<f64>() / n;
        let sd = if xs.len() < 2 { f64::NAN } else { (xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0)).sqrt() };
        Some(Moments { mean, sd, se: sd / n.sqrt() })
    }
}

/// One metric of a pair: both engines' values, the difference and the verdict.
#[derive(Clone, Debug, Serialize)]
pub struct Check {
    pub metric: &'static str,
    pub exact: f64,
    pub fast: f64,
    /// fast − exact, relative to exact for `time_s` (a fraction), absolute otherwise.
    pub diff: f64,
    pub verdict: Verdict,
}

/// A cell run by both engines.
#[derive(Clone, Debug, Serialize)]
pub struct Pair {
    pub machine: String,
    pub workload: String,
    pub policy: String,
    /// The cell's grid point without `sim.engine`.
    pub grid: BTreeMap<String, toml::Value>,
    pub runs_exact: usize,
    pub runs_fast: usize,
    pub checks: Vec<Check>,
    /// Cross-node thread migrations per simulated second, exact and fast, as in the
    /// `thread_migrations_per_s` check: what decides most differences (a thread pulled to
    /// another node or not).
    pub thread_migrations_per_s: [f64; 2],
    pub verdict: Verdict,
}

#[derive(Clone, Debug, Serialize)]
pub struct EngineCheck {
    pub schema: &'static str,
    pub numalab_version: String,
    pub study: String,
    pub tolerances: Tolerances,
    pub pairs_total: usize,
    pub within: usize,
    pub within_noise: usize,
    pub outside: usize,
    /// Cells run by one engine only (machine/workload/policy and engine).
    pub unpaired: Vec<String>,
    pub pairs: Vec<Pair>,
}

/// A metric of one run.
type Metric = fn(&numalab_sim::RunMetrics) -> f64;

fn engine_of(c: &CellDoc) -> Option<String> {
    let from_grid = c.grid.get("sim.engine").and_then(|v| v.as_str().map(str::to_string));
    from_grid.or_else(|| c.config.get("sim")?.get("engine")?.as_str().map(str::to_string))
}

fn series(c: &CellDoc, f: impl Fn(&numalab_sim::RunMetrics) -> Option<f64>) -> Vec<f64> {
    c.runs.iter().filter_map(|r| f(&r.metrics)).collect()
}

/// Whether `|fast − exact|` (both means) is within `limit`, else within the noise.
fn judge(exact: &Moments, fast: &Moments, limit: f64, t: &Tolerances) -> Verdict {
    let diff = (fast.mean - exact.mean).abs();
    if diff <= limit {
        return Verdict::Within;
    }
    let se = (exact.se.powi(2) + fast.se.powi(2)).sqrt();
    // NaN (a single run) compares false: no noise to hide in.
    if diff <= t.noise_se * se {
        Verdict::Noise
    } else {
        Verdict::Outside
    }
}

/// The coefficient of variation over runs and its standard error, cv/sqrt(2(n-1)) (the usual
/// large-sample approximation; with two runs it is about 70 % of the CV itself).
fn cv_moments(times: &Moments, runs: usize) -> Moments {
    let cv = times.sd / times.mean;
    let se = if runs < 2 { f64::NAN } else { cv / (2.0 * (runs as f64 - 1.0)).sqrt() };
    Moments { mean: cv, sd: f64::NAN, se }
}

fn pair(exact: &CellDoc, fast: &CellDoc, t: &Tolerances) -> Result<Pair> {
    let what = |c: &CellDoc| format!("{}/{}/{}", c.machine, c.workload, c.policy);
    let moments = |c: &CellDoc, f: &dyn Fn(&numalab_sim::RunMetrics) -> Option<f64>| Moments::of(&series(c, f));
    let (Some(te), Some(tf)) = (moments(exact, &|m| Some(m.exec_time_s)), moments(fast, &|m| Some(m.exec_time_s))) else {
        bail!("cell {} has no runs in one of the engines", what(exact));
    };
    let mut checks = Vec::new();
    let time_verdict = judge(&te, &tf, t.time_rel * te.mean.abs(), t);
    checks.push(Check { metric: "time_s", exact: te.mean, fast: tf.mean, diff: tf.mean / te.mean - 1.0, verdict: time_verdict });
    if let (Some(le), Some(lf)) = (moments(exact, &|m| m.local_access_ratio), moments(fast, &|m| m.local_access_ratio)) {
        checks.push(Check {
            metric: "local_ratio",
            exact: le.mean,
            fast: lf.mean,
            diff: lf.mean - le.mean,
            verdict: judge(&le, &lf, t.local_abs, t),
        });
    }
    let rates: [(&'static str, Metric); 3] = [
        ("hint_faults_per_s", |m| m.hint_faults_per_s),
        ("page_migrations_per_s", |m| m.page_migrations_per_s),
        ("thread_migrations_per_s", |m| m.thread_migrations_per_s),
    ];
    for (metric, f) in rates {
        let (Some(e), Some(fm)) = (moments(exact, &|m| Some(f(m))), moments(fast, &|m| Some(f(m)))) else { continue };
        let limit = t.rate_rel * e.mean.abs().max(fm.mean.abs());
        checks.push(Check { metric, exact: e.mean, fast: fm.mean, diff: fm.mean - e.mean, verdict: judge(&e, &fm, limit, t) });
    }
    let (ce, cf) = (cv_moments(&te, exact.runs.len()), cv_moments(&tf, fast.runs.len()));
    if !ce.mean.is_nan() && !cf.mean.is_nan() {
        let limit = (t.cv_rel * ce.mean).max(t.cv_abs);
        checks.push(Check { metric: "cv", exact: ce.mean, fast: cf.mean, diff: cf.mean - ce.mean, verdict: judge(&ce, &cf, limit, t) });
    }
    let verdict = if checks.iter().all(|c| c.verdict == Verdict::Within) {
        Verdict::Within
    } else if checks.iter().all(|c| c.verdict != Verdict::Outside) {
        Verdict::Noise
    } else {
        Verdict::Outside
    };
    let tmig = checks.iter().find(|c| c.metric == "thread_migrations_per_s").map_or([f64::NAN; 2], |c| [c.exact, c.fast]);
    let mut grid = exact.grid.clone();
    grid.remove("sim.engine");
    Ok(Pair {
        machine: exact.machine.clone(),
        workload: exact.workload.clone(),
        policy: exact.policy.clone(),
        grid,
        runs_exact: exact.runs.len(),
        runs_fast: fast.runs.len(),
        checks,
        thread_migrations_per_s: tmig,
        verdict,
    })
}

/// Pair the study's exact and fast cells (same machine, workload, policy and grid point but
/// for `sim.engine`) and check each pair. Errors when no cell has both engines.
pub fn check(doc: &StudyDoc, t: &Tolerances) -> Result<EngineCheck> {
    // Cells keyed by everything but the engine, in the document's order.
    type Key = (String, String, String, String);
    let key = |c: &CellDoc| -> Key {
        let grid: Vec<String> = c.grid.iter().filter(|(k, _)| *k != "sim.engine").map(|(k, v)| format!("{k}={v}")).collect();
        (c.machine.clone(), c.workload.clone(), c.policy.clone(), grid.join(" "))
    };
    let mut order: Vec<Key> = Vec::new();
    let mut by_key: BTreeMap<Key, [Option<&CellDoc>; 2]> = BTreeMap::new();
    for c in &doc.cells {
        let slot = match engine_of(c).as_deref() {
            Some("exact") => 0,
            Some("fast") => 1,
            other => bail!("cell {}/{}/{} names no engine the check knows ({other:?})", c.machine, c.workload, c.policy),
        };
        let k = key(c);
        let entry = by_key.entry(k.clone()).or_insert_with(|| {
            order.push(k);
            [None, None]
        });
        entry[slot] = Some(c);
    }
    let mut pairs = Vec::new();
    let mut unpaired = Vec::new();
    for k in &order {
        match by_key[k] {
            [Some(e), Some(f)] => pairs.push(pair(e, f, t)?),
            [Some(c), None] | [None, Some(c)] => {
                unpaired.push(format!("{}/{}/{} {} ({})", c.machine, c.workload, c.policy, k.3, engine_of(c).unwrap_or_default()))
            }
            [None, None] => {}
        }
    }
    if pairs.is_empty() {
        bail!(
            "no cell of study {} was run by both engines: give the study a grid over \"sim.engine\" = [\"exact\", \"fast\"]",
            doc.study.study.name
        );
    }
    let count = |v: Verdict| pairs.iter().filter(|p| p.verdict == v).count();
    Ok(EngineCheck {
        schema: SCHEMA,
        numalab_version: env!("CARGO_PKG_VERSION").into(),
        study: doc.study.study.name.clone(),
        tolerances: *t,
        pairs_total: pairs.len(),
        within: count(Verdict::Within),
        within_noise: count(Verdict::Noise),
        outside: count(Verdict::Outside),
        unpaired,
        pairs,
    })
}

/// One row per pair: each metric's two values and verdict.
pub fn table(c: &EngineCheck) -> crate::output::Table {
    let mut t = crate::output::Table::new([
        "machine",
        "workload",
        "policy",
        "grid",
        "runs",
        "time_exact_s",
        "time_fast_s",
        "time_diff_pct",
        "time",
        "local_exact",
        "local_fast",
        "local",
        "hint_per_s",
        "hint",
        "pmig_per_s",
        "pmig",
        "cv_pct",
        "cv",
        "xnode_tmig_per_s",
        "tmig",
        "verdict",
    ]);
    for p in &c.pairs {
        let get = |m: &str| p.checks.iter().find(|c| c.metric == m);
        let pair_of = |m: &str, prec: usize| get(m).map_or("-".to_string(), |c| format!("{:.prec$} / {:.prec$}", c.exact, c.fast));
        let word = |m: &str| get(m).map_or("-", |c| c.verdict.word());
        let time = get("time_s").expect("every pair has a time check");
        let (le, lf) = get("local_ratio").map_or(("-".into(), "-".into()), |c| (format!("{:.4}", c.exact), format!("{:.4}", c.fast)));
        let cv = get("cv").map_or("-".to_string(), |c| format!("{:.2} / {:.2}", 100.0 * c.exact, 100.0 * c.fast));
        let grid: Vec<String> = p.grid.iter().map(|(k, v)| format!("{k}={v}")).collect();
        t.row([
            p.machine.clone(),
            p.workload.clone(),
            p.policy.clone(),
            grid.join(" "),
            format!("{}/{}", p.runs_exact, p.runs_fast),
            format!("{:.4}", time.exact),
            format!("{:.4}", time.fast),
            format!("{:+.2}", 100.0 * time.diff),
            time.verdict.word().to_string(),
            le,
            lf,
            word("local_ratio").to_string(),
            pair_of("hint_faults_per_s", 0),
            word("hint_faults_per_s").to_string(),
            pair_of("page_migrations_per_s", 0),
            word("page_migrations_per_s").to_string(),
            cv,
            word("cv").to_string(),
            pair_of("thread_migrations_per_s", 2),
            word("thread_migrations_per_s").to_string(),
            match p.verdict {
                Verdict::Within => "within",
                Verdict::Noise => "within noise",
                Verdict::Outside => "outside",
            }
            .to_string(),
        ]);
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(xs: &[f64]) -> Moments {
        Moments::of(xs).unwrap()
    }

    #[test]
    fn moments_are_the_sample_ones() {
        let x = m(&[1.0, 2.0, 3.0, 4.0]);
        assert_eq!(x.mean, 2.5);
        assert!((x.sd - (5.0f64 / 3.0).sqrt()).abs() < 1e-12);
        assert!((x.se - x.sd / 2.0).abs() < 1e-12);
        assert!(m(&[7.0]).sd.is_nan());
        assert!(Moments::of(&[]).is_none());
    }

    #[test]
    fn a_difference_inside_the_limit_is_within_one_inside_the_noise_is_noise() {
        let t = Tolerances::default();
        // Means 1.00 and 1.01: inside a 2 % limit.
        assert_eq!(judge(&m(&[0.99, 1.01]), &m(&[1.0, 1.02]), 0.02, &t), Verdict::Within);
        // Means 1.0 and 1.1 with runs 0.8..1.2 and 0.9..1.3: se about 0.14, so 0.1 is noise.
        assert_eq!(judge(&m(&[0.8, 1.2]), &m(&[0.9, 1.3]), 0.02, &t), Verdict::Noise);
        // The same means with tight runs: outside.
        assert_eq!(judge(&m(&[0.999, 1.001]), &m(&[1.099, 1.101]), 0.02, &t), Verdict::Outside);
        // One run each: no standard error, so no noise to hide in.
        assert_eq!(judge(&m(&[1.0]), &m(&[1.1]), 0.02, &t), Verdict::Outside);
    }

    #[test]
    fn the_cv_of_two_runs_is_known_to_about_seventy_per_cent() {
        let times = m(&[0.9, 1.1]);
        let cv = cv_moments(&times, 2);
        assert!((cv.mean - times.sd).abs() < 1e-12, "mean 1: cv = sd");
        assert!((cv.se / cv.mean - 1.0 / 2f64.sqrt()).abs() < 1e-12);
    }
}
