//! Model side of the validation against the simulator (docs/model.md §6): calibrate `tau` from a
//! 1-node run, predict the `n`-node run of a policy, and summarise simulated samples with a
//! Student-t confidence interval. Plain numbers in, plain numbers out; the caller runs the
//! simulations.

use crate::classes::ClassSet;
use crate::error::ModelError;
use crate::local_remote::{solve, Hardware, RefMix, Solution};
use crate::policy::{map, Placement, PolicyKind, PolicyParams};
use statrs::distribution::{ContinuousCDF, StudentsT};

/// A fault type measured in the calibration run: count per process and cost (us).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FaultCount {
    pub count: f64,
    pub cost_us: f64,
}

/// Result of the 1-node calibration.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Calibration {
    /// Compute time between references (us).
    pub tau_us: f64,
    /// Other faults per reference, `Σ F_f / N`, and their mean cost (us), to carry into the
    /// prediction as `q_o`, `C_o`.
    pub q_o: f64,
    pub c_o_us: f64,
}

/// `tau = T_1/N − t_l − Σ_f F_f·C_f/N` (§9 step 2). `mean_time_s` is the mean completion time
/// of the 1-node run, `refs` the reference count `N` of the process.
pub fn calibrate_tau(mean_time_s: f64, refs: f64, t_l_us: f64, faults: &[FaultCount]) -> Result<Calibration, ModelError> {
    if !(mean_time_s.is_finite() && mean_time_s > 0.0) {
        return Err(ModelError::param("mean_time_s", mean_time_s, "must be finite and > 0"));
    }
    if !(refs.is_finite() && refs > 0.0) {
        return Err(ModelError::param("refs", refs, "must be finite and > 0"));
    }
    let fault_us: f64 = faults.iter().map(|f| f.count * f.cost_us).sum();
    let count: f64 = faults.iter().map(|f| f.count).sum();
    let tau = mean_time_s * 1e6 / refs - t_l_us - fault_us / refs;
    if tau < -1e-9 {
        return Err(ModelError::param(
            "tau",
            tau,
            "calibration gives a negative compute time: the 1-node run is faster than t_l per reference",
        ));
    }
    Ok(Calibration { tau_us: tau.max(0.0), q_o: count / refs, c_o_us: if count > 0.0 { fault_us / count } else { 0.0 } })
}

/// A model prediction of one policy on `hw.nodes` nodes.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Prediction {
    pub placement: Placement,
    pub solution: Solution,
    /// `N·R`, seconds.
    pub time_s: f64,
}

/// Predict the completion time of one process (§9 step 3) for any policy.
pub fn predict(
    hw: &Hardware,
    classes: &ClassSet,
    kind: PolicyKind,
    params: &PolicyParams,
    cal: &Calibration,
) -> Result<Prediction, ModelError> {
    let placement = map(hw, classes, kind, params)?;
    let mix = RefMix {
        tau: cal.tau_us,
        p_l: placement.p_l,
        q_m: placement.q_m,
        q_r: placement.q_r,
        q_c: placement.q_c,
        q_o: cal.q_o,
        c_o: cal.c_o_us,
    };
    let solution = solve(hw, &mix)?;
    Ok(Prediction { placement, solution, time_s: placement.refs * solution.r * 1e-6 })
}

/// Predict the `n`-node static run (the validation case).
pub fn predict_static(hw: &Hardware, classes: &ClassSet, cal: &Calibration) -> Result<Prediction, ModelError> {
    predict(hw, classes, PolicyKind::Static, &PolicyParams::default(), cal)
}

/// Mean and two-sided confidence interval of a sample.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ConfidenceInterval {
    pub n: usize,
    pub mean: f64,
    /// Sample standard deviation (n − 1).
    pub stddev: f64,
    /// Student-t quantile used.
    pub t: f64,
    pub lo: f64,
    pub hi: f64,
}

/// 99% Student-t interval `mean ± t_{0.995, n−1}·s/√n` (§9 step 4: 3.250 for ten samples).
/// `None` for fewer than two samples.
pub fn ci99(samples: &[f64]) -> Option<ConfidenceInterval> {
    confidence_interval(samples, 0.99)
}

/// Two-sided Student-t interval at `level` (e.g. 0.99).
pub fn confidence_interval(samples: &[f64], level: f64) -> Option<ConfidenceInterval> {
    let n = samples.len();
    if n < 2 || !(level > 0.0 && level < 1.0) {
        return None;
    }
    let nf = n as f64;
    let mean = samples.iter().sum::<f64>() / nf;
    let var = samples.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (nf - 1.0);
    let stddev = var.sqrt();
    let t = student_t_quantile(0.5 + level / 2.0, nf - 1.0);
    let half = t * stddev / nf.sqrt();
    Some(ConfidenceInterval { n, mean, stddev, t, lo: mean - half, hi: mean + half })
}

/// Quantile of Student's t distribution with `df` degrees of freedom (`p` in (0, 1)).
pub fn student_t_quantile(p: f64, df: f64) -> f64 {
    assert!(p > 0.0 && p < 1.0 && df > 0.0, "student_t_quantile({p}, {df})");
    standard_t(df).inverse_cdf(p)
}

/// CDF of Student's t distribution.
pub fn student_t_cdf(t: f64, df: f64) -> f64 {
    assert!(df > 0.0, "student_t_cdf({t}, {df})");
    standard_t(df).cdf(t)
}

/// Student's t with location 0 and scale 1; `df > 0` is checked by the callers.
fn standard_t(df: f64) -> StudentsT {
    StudentsT::new(0.0, 1.0, df).expect("positive degrees of freedom")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::classes::preset;

    #[test]
    fn calibration_example_of_the_spec() {
        // T_1 = 3.0 s, N = 10^6, 20 faults at 1 ms: tau = 3.0 - 0.6 - 0.02 = 2.38 us.
        let c = calibrate_tau(3.0, 1e6, 0.6, &[FaultCount { count: 20.0, cost_us: 1000.0 }]).unwrap();
        assert!((c.tau_us - 2.38).abs() < 1e-12, "{}", c.tau_us);
        assert!((c.q_o - 2e-5).abs() < 1e-18);
        assert_eq!(c.c_o_us, 1000.0);
        let e = calibrate_tau(0.1, 1e6, 0.6, &[]).unwrap_err();
        assert!(e.to_string().contains("negative compute time"), "{e}");
    }

    #[test]
    fn calibration_round_trips_through_the_one_node_model() {
        // A 1-node prediction with the calibrated tau reproduces the measured time.
        let set = preset("dunx-synth-8c").unwrap();
        let hw1 = Hardware { nodes: 8, ..Hardware::gp1000() };
        let refs = crate::policy::map(&hw1, &set, PolicyKind::Static, &PolicyParams::default()).unwrap().refs;
        let cal = calibrate_tau(2.0, refs, 0.6, &[FaultCount { count: 100.0, cost_us: 50.0 }]).unwrap();
        // On one node every class has to be private to the process: use only PR.
        let mut pr_only = crate::classes::ClassParams::ABSENT;
        pr_only.pages = refs / 11_000.0;
        pr_only.reads = 10_000.0;
        pr_only.writes = 1_000.0;
        pr_only.run_granularity = 11_000.0;
        pr_only.write_granularity = 11_000.0;
        let mut arr = [crate::classes::ClassParams::ABSENT; 5];
        arr[0] = pr_only;
        let one = ClassSet::new("pr", "test", arr).unwrap();
        let p = predict_static(&Hardware { nodes: 1, ..Hardware::gp1000() }, &one, &cal).unwrap();
        assert!((p.placement.refs - refs).abs() < 1e-6);
        assert!((p.time_s - 2.0).abs() < 1e-9, "{}", p.time_s);
    }

    #[test]
    fn static_prediction_of_the_spec_workload() {
        let set = preset("dunx-synth-8c").unwrap();
        let cal = Calibration { tau_us: 2.0, q_o: 0.0, c_o_us: 0.0 };
        let p = predict_static(&Hardware::gp1000(), &set, &cal).unwrap();
        // R = 7.36023 us (§8(c)) times N = 594 400 references.
        assert!((p.solution.r - 7.36023).abs() < 5e-6);
        assert!((p.time_s - 594_400.0 * p.solution.r * 1e-6).abs() < 1e-12);
    }

    #[test]
    fn student_t_quantiles() {
        // Table values: t_{0.995} for 9, 1 and 29 d.o.f.; near the normal limit 2.5758 at 1e5
        // d.o.f. (statrs loses digits beyond about 1e6 d.o.f., where df / (df + t²) rounds
        // towards 1; the intervals here have n − 1 d.o.f. for n runs).
        assert!((student_t_quantile(0.995, 9.0) - 3.2498).abs() < 1e-4);
        assert!((student_t_quantile(0.995, 1.0) - 63.6567).abs() < 1e-3);
        assert!((student_t_quantile(0.995, 29.0) - 2.7564).abs() < 1e-4);
        assert!((student_t_quantile(0.995, 1e5) - 2.5758).abs() < 1e-4);
        assert!((student_t_quantile(0.975, 4.0) - 2.7764).abs() < 1e-4);
        assert!((student_t_quantile(0.005, 9.0) + 3.2498).abs() < 1e-4);
        assert!((student_t_cdf(0.0, 5.0) - 0.5).abs() < 1e-15);
    }

    #[test]
    fn ci99_of_ten_samples() {
        let s = [10.0, 11.0, 9.0, 10.5, 9.5, 10.2, 9.8, 10.1, 9.9, 10.0];
        let ci = ci99(&s).unwrap();
        let mean = s.iter().sum::<f64>() / 10.0;
        let sd = (s.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / 9.0).sqrt();
        assert!((ci.mean - mean).abs() < 1e-12);
        // The spec's 3.250 (three decimals).
        assert!((ci.t - 3.250).abs() < 5e-4);
        assert!((ci.hi - ci.lo - 2.0 * ci.t * sd / 10f64.sqrt()).abs() < 1e-12);
        assert!(ci99(&[1.0]).is_none());
        let same = ci99(&[2.0, 2.0, 2.0]).unwrap();
        assert_eq!((same.lo, same.hi), (2.0, 2.0));
    }
}
