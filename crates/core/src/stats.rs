//! Statistics shared by the simulator, the profiler and the reports.

use serde::{Deserialize, Serialize};

/// Distribution of one metric across runs.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    pub mean: f64,
    pub median: f64,
    pub min: f64,
    pub max: f64,
    /// Sample standard deviation (divides by n - 1; 0 for a single run).
    pub stddev: f64,
    /// Coefficient of variation, stddev / mean (0 when the mean is 0).
    pub cv: f64,
    /// Normalised max-min difference, (max - min) / mean (0 when the mean is 0).
    pub nmmd: f64,
    /// First and third quartiles, linear interpolation between order statistics (type 7).
    pub q1: f64,
    pub q3: f64,
}

impl Summary {
    /// Summarise `values`; `None` for an empty slice.
    pub fn of(values: &[f64]) -> Option<Summary> {
        if values.is_empty() {
            return None;
        }
        let mut v = values.to_vec();
        v.sort_by(f64::total_cmp);
        let n = v.len() as f64;
        let mean = v.iter().sum::<f64>() / n;
        let var = if v.len() > 1 { v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0) } else { 0.0 };
        let stddev = var.sqrt();
        let ratio = |x: f64| if mean != 0.0 { x / mean } else { 0.0 };
        Some(Summary {
            mean,
            median: quantile_sorted(&v, 0.5),
            min: v[0],
            max: v[v.len() - 1],
            stddev,
            cv: ratio(stddev),
            nmmd: ratio(v[v.len() - 1] - v[0]),
            q1: quantile_sorted(&v, 0.25),
            q3: quantile_sorted(&v, 0.75),
        })
    }
}

/// Quantile of sorted data by linear interpolation (R type 7).
pub fn quantile_sorted(sorted: &[f64], q: f64) -> f64 {
    let h = (sorted.len() - 1) as f64 * q;
    let lo = h.floor() as usize;
    let hi = h.ceil() as usize;
    sorted[lo] + (h - lo as f64) * (sorted[hi] - sorted[lo])
}

/// Which standard-deviation estimator a relative standard deviation uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum RsdEstimator {
    #[default]
    Sample,
    Population,
}

/// Relative standard deviation in percent (docs/metrics.md, "Imbalance classes"). `None` when the mean is 0
/// (undefined, never reported as 0); 0 for a single value.
pub fn rsd_percent(x: &[f64], estimator: RsdEstimator) -> Option<f64> {
    let n = x.len();
    if n == 0 {
        return None;
    }
    let mean = x.iter().sum::<f64>() / n as f64;
    if mean == 0.0 {
        return None;
    }
    if n == 1 {
        return Some(0.0);
    }
    let ss: f64 = x.iter().map(|v| (v - mean).powi(2)).sum();
    let denom = match estimator {
        RsdEstimator::Sample => (n - 1) as f64,
        RsdEstimator::Population => n as f64,
    };
    Some(100.0 * (ss / denom).sqrt() / mean)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn imbalance_vectors_of_static_policies_spec() {
        // docs/metrics.md, "Imbalance classes": four nodes, all accesses on one.
        let s = rsd_percent(&[400.0, 0.0, 0.0, 0.0], RsdEstimator::Sample).unwrap();
        assert!((s - 200.0).abs() < 1e-9, "{s}");
        let p = rsd_percent(&[400.0, 0.0, 0.0, 0.0], RsdEstimator::Population).unwrap();
        assert!((p - 173.205).abs() < 1e-3, "{p}");
        assert_eq!(rsd_percent(&[100.0; 4], RsdEstimator::Sample), Some(0.0));
        assert_eq!(rsd_percent(&[0.0; 4], RsdEstimator::Sample), None);
    }

    #[test]
    fn summary_of_known_values() {
        let s = Summary::of(&[1.0, 2.0, 3.0, 4.0]).unwrap();
        assert_eq!(s.mean, 2.5);
        assert_eq!(s.median, 2.5);
        assert_eq!((s.min, s.max), (1.0, 4.0));
        assert_eq!(s.q1, 1.75);
        assert_eq!(s.q3, 3.25);
        assert!((s.stddev - 1.2909944487358056).abs() < 1e-12);
        assert!((s.nmmd - 1.2).abs() < 1e-12);
        assert!(Summary::of(&[]).is_none());
        assert_eq!(Summary::of(&[5.0]).unwrap().stddev, 0.0);
    }
}
