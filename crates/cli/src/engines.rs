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
//!
//! The exact engine is itself a discretisation: its demand lags one epoch, and the epoch length
//! has no single right value. Documents given with `--band` hold the exact engine's runs of the
//! same cells under other such settings (the epoch length); where the fast engine is outside a
//! tolerance of the default reference but within it of the band the exact engine spans, the
//! check says `band` and the pair is `within band` (docs/study.md, "The reference's own band").

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
    /// Outside the tolerance of the default reference, within it of the band the exact engine
    /// spans under the `--band` documents' settings.
    Band,
    Outside,
}

impl Verdict {
    fn word(self) -> &'static str {
        match self {
            Verdict::Within => "ok",
            Verdict::Noise => "noise",
            Verdict::Band => "band",
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
    /// The standard error of `diff` (in its units), the two engines' combined: the noise a
    /// `noise` verdict is within `noise_se` of. Absent where an engine has a single run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub se: Option<f64>,
    /// The lowest and highest mean the exact engine is shown to take over the default reference
    /// and the band cells ([`band_span`]); absent without band cells.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub band: Option<[f64; 2]>,
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
    /// Cells of the `--band` documents that are this pair's exact cell under other settings.
    pub band_cells: usize,
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
    pub within_band: usize,
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

/// The coefficient of variation of the run times and its standard error (docs/study.md,
/// "Comparing the engines"). The standard error is the delta method's for the sample standard
/// deviation, which holds whatever the runs' distribution:
/// `SE(CV) = CV·√((κ − (n−3)/(n−1)) / (4n))`, with κ the runs' kurtosis (fourth central
/// moment over the squared variance). For normal runs (κ = 3) this is `CV/√(2(n−1))`. A spread
/// that comes from a few outlying runs (a thread pulled to another node in 3 of 32) has κ of
/// 10 to 30, and its CV is known two to three times less well than the normal value says. κ
/// is taken as at least 3: a sample's kurtosis is biased low (it cannot exceed about n, and
/// two runs always give κ = 1), so a low one is weak evidence of light tails, and the normal
/// value stays the least. `None` without runs; NaN CV and standard error with one run.
fn cv_moments(times: &[f64]) -> Option<Moments> {
    let moments = Moments::of(times)?;
    let cv = moments.sd / moments.mean;
    let n = times.len() as f64;
    let se = if times.len() < 2 {
        f64::NAN
    } else {
        let central = |k: i32| times.iter().map(|x| (x - moments.mean).powi(k)).sum::<f64>() / n;
        let (m2, m4) = (central(2), central(4));
        // All runs equal: a CV of 0, known exactly as far as the runs can say.
        let kurtosis = if m2 > 0.0 { (m4 / (m2 * m2)).max(3.0) } else { 3.0 };
        cv * ((kurtosis - (n - 3.0) / (n - 1.0)) / (4.0 * n)).sqrt()
    };
    Some(Moments { mean: cv, sd: f64::NAN, se })
}

/// A check outside its tolerance (and the noise) of the default reference is `band` when the
/// exact engine's band cells make it acceptable: the fast engine's mean is within the limit of
/// some value the exact engine is shown to take ([`band_span`]), `[lowest − limit, highest +
/// limit]`, or it passes against one of the band cells as it would against the default
/// reference (within the limit or within the noise of their runs).
fn with_band(verdict: Verdict, exact: &Moments, fast: &Moments, band: &[Moments], limit: f64, t: &Tolerances) -> Verdict {
    if verdict != Verdict::Outside {
        return verdict;
    }
    let Some([lo, hi]) = band_span(exact, band, t) else { return verdict };
    let between = fast.mean >= lo - limit && fast.mean <= hi + limit;
    if between || band.iter().any(|b| judge(b, fast, limit, t) != Verdict::Outside) {
        Verdict::Band
    } else {
        verdict
    }
}

/// The lowest and highest mean the exact engine is shown to take over the default reference and
/// the band cells; `None` without band cells.
fn band_span(exact: &Moments, band: &[Moments], t: &Tolerances) -> Option<[f64; 2]> {
    if band.is_empty() {
        return None;
    }
    // What the band cells are shown to reach: each mean moved towards the default reference by
    // `noise_se` standard errors, not past it, so that a band cell whose runs are spread (one
    // run with a thread pulled to another node) does not widen the band by its noise. A single
    // run has no standard error and counts as it is.
    let shown = |b: &Moments| {
        let margin = if b.se.is_nan() { 0.0 } else { t.noise_se * b.se };
        if b.mean > exact.mean {
            (b.mean - margin).max(exact.mean)
        } else {
            (b.mean + margin).min(exact.mean)
        }
    };
    span(std::iter::once(exact.mean).chain(band.iter().map(shown)))
}

/// The lowest and highest of `xs`; `None` when empty.
fn span(xs: impl IntoIterator<Item = f64>) -> Option<[f64; 2]> {
    xs.into_iter().fold(None, |acc, x| match acc {
        None => Some([x, x]),
        Some([lo, hi]) => Some([lo.min(x), hi.max(x)]),
    })
}

fn pair(exact: &CellDoc, fast: &CellDoc, band: &[&CellDoc], t: &Tolerances) -> Result<Pair> {
    let what = |c: &CellDoc| format!("{}/{}/{}", c.machine, c.workload, c.policy);
    let moments = |c: &CellDoc, f: &dyn Fn(&numalab_sim::RunMetrics) -> Option<f64>| Moments::of(&series(c, f));
    // A metric's moments in each band cell that has it.
    let band_of = |f: &dyn Fn(&CellDoc) -> Option<Moments>| -> Vec<Moments> { band.iter().filter_map(|c| f(c)).collect() };
    let (Some(te), Some(tf)) = (moments(exact, &|m| Some(m.exec_time_s)), moments(fast, &|m| Some(m.exec_time_s))) else {
        bail!("cell {} has no runs in one of the engines", what(exact));
    };
    let mut checks = Vec::new();
    let mut check = |metric: &'static str, e: &Moments, f: &Moments, diff: f64, limit: f64, band: Vec<Moments>| {
        let verdict = with_band(judge(e, f, limit, t), e, f, &band, limit, t);
        let se = (e.se.powi(2) + f.se.powi(2)).sqrt() / if metric == "time_s" { e.mean.abs() } else { 1.0 };
        let se = se.is_finite().then_some(se);
        checks.push(Check { metric, exact: e.mean, fast: f.mean, diff, se, band: band_span(e, &band, t), verdict });
    };
    let time = |m: &numalab_sim::RunMetrics| Some(m.exec_time_s);
    check("time_s", &te, &tf, tf.mean / te.mean - 1.0, t.time_rel * te.mean.abs(), band_of(&|c| moments(c, &time)));
    let local = |m: &numalab_sim::RunMetrics| m.local_access_ratio;
    if let (Some(le), Some(lf)) = (moments(exact, &local), moments(fast, &local)) {
        check("local_ratio", &le, &lf, lf.mean - le.mean, t.local_abs, band_of(&|c| moments(c, &local)));
    }
    let rates: [(&'static str, Metric); 3] = [
        ("hint_faults_per_s", |m| m.hint_faults_per_s),
        ("page_migrations_per_s", |m| m.page_migrations_per_s),
        ("thread_migrations_per_s", |m| m.thread_migrations_per_s),
    ];
    for (metric, f) in rates {
        let rate = |m: &numalab_sim::RunMetrics| Some(f(m));
        let (Some(e), Some(fm)) = (moments(exact, &rate), moments(fast, &rate)) else { continue };
        let limit = t.rate_rel * e.mean.abs().max(fm.mean.abs());
        check(metric, &e, &fm, fm.mean - e.mean, limit, band_of(&|c| moments(c, &rate)));
    }
    let cv_of = |c: &CellDoc| cv_moments(&series(c, time)).filter(|x| !x.mean.is_nan());
    if let (Some(ce), Some(cf)) = (cv_of(exact), cv_of(fast)) {
        let limit = (t.cv_rel * ce.mean).max(t.cv_abs);
        check("cv", &ce, &cf, cf.mean - ce.mean, limit, band_of(&cv_of));
    }
    let any = |v: Verdict| checks.iter().any(|c| c.verdict == v);
    let verdict = if any(Verdict::Outside) {
        Verdict::Outside
    } else if any(Verdict::Band) {
        Verdict::Band
    } else if any(Verdict::Noise) {
        Verdict::Noise
    } else {
        Verdict::Within
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
        band_cells: band.len(),
        checks,
        thread_migrations_per_s: tmig,
        verdict,
    })
}

/// The value at a dotted path (`sim.epoch_us`) of a resolved config.
fn at_path<'a>(config: &'a mut serde_json::Value, path: &str) -> Option<&'a mut serde_json::Value> {
    path.split('.').try_fold(config, |v, key| v.get_mut(key))
}

/// Whether band cell `c` is `exact` under other settings: the same machine, workload and policy,
/// and a resolved config that equals `exact`'s once the keys of `c`'s grid take `exact`'s
/// values. A grid key that is no path of the config (`fast_tier_fraction`, which sizes the
/// machine's nodes) is not replaced: what it set must then be equal.
fn is_band_of(c: &CellDoc, exact: &CellDoc) -> bool {
    if (&c.machine, &c.workload, &c.policy) != (&exact.machine, &exact.workload, &exact.policy) || engine_of(c).as_deref() != Some("exact")
    {
        return false;
    }
    let mut config = c.config.clone();
    let mut reference = exact.config.clone();
    for key in c.grid.keys() {
        match (at_path(&mut reference, key).map(|v| v.clone()), at_path(&mut config, key)) {
            (Some(theirs), Some(ours)) => *ours = theirs,
            (None, None) => {}
            _ => return false,
        }
    }
    config == exact.config
}

/// Pair the study's exact and fast cells (same machine, workload, policy and grid point but
/// for `sim.engine`) and check each pair, with the exact cells of the `band` documents that are
/// a pair's exact cell under other settings as its band. Errors when no cell has both engines,
/// or a band document has no cell of any pair.
pub fn check(doc: &StudyDoc, band: &[(String, StudyDoc)], t: &Tolerances) -> Result<EngineCheck> {
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
    let mut band_used = vec![false; band.len()];
    for k in &order {
        match by_key[k] {
            [Some(e), Some(f)] => {
                let mut cells = Vec::new();
                for (i, (_, b)) in band.iter().enumerate() {
                    let before = cells.len();
                    cells.extend(b.cells.iter().filter(|c| is_band_of(c, e)));
                    band_used[i] |= cells.len() > before;
                }
                pairs.push(pair(e, f, &cells, t)?)
            }
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
    if let Some(i) = band_used.iter().position(|used| !used) {
        bail!(
            "band document {} holds no exact cell of the pairs of study {}: its cells must be the same machines, workloads, policies and settings run by the exact engine, but for the keys of their own grid",
            band[i].0,
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
        within_band: count(Verdict::Band),
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
        "band_cells",
        "time_exact_s",
        "time_fast_s",
        "time_diff_pct",
        "time_band_pct",
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
            p.band_cells.to_string(),
            format!("{:.4}", time.exact),
            format!("{:.4}", time.fast),
            format!("{:+.2}", 100.0 * time.diff),
            // The exact engine's band of mean times, relative to its default reference.
            time.band.map_or("-".to_string(), |[lo, hi]| {
                format!("{:+.2}..{:+.2}", 100.0 * (lo / time.exact - 1.0), 100.0 * (hi / time.exact - 1.0))
            }),
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
                Verdict::Band => "within band",
                Verdict::Outside => "outside",
            }
            .to_string(),
        ]);
    }
    t
}

#[cfg(test)]
mod tests;
