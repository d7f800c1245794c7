//! Arithmetic intensity of a window and its least-squares prediction for the next window
//! (docs/policies/hydm.md, "Selection"; Williams, Waterman and Patterson, "Roofline: an
//! insightful visual performance model", CACM 2009, for intensity and the ridge point).

/// Flops per byte moved to and from memory: `fp / (pref × bytes_per_ref)`; `+∞` when the
/// window counted no reference.
pub fn intensity(fp: f64, pref: u64, bytes_per_ref: u64) -> f64 {
    if pref == 0 {
        return f64::INFINITY;
    }
    fp / (pref as f64 * bytes_per_ref as f64)
}

/// The ridge point `P_peak / B`, flop/B (GFLOP/s over GB/s): below it a kernel is
/// memory-bound on that memory.
pub fn ridge_point(peak_gflops: f64, bw_gbps: f64) -> f64 {
    peak_gflops / bw_gbps
}

/// Ordinary least squares through `(x, y)` points, evaluated at `x = +1` (the next window
/// when the current one is `x = 0`). One point predicts itself; so do points that all share
/// one `x`. `None` for no point. Not clamped: the value is only a sort key.
pub fn predict(points: &[(f64, f64)]) -> Option<f64> {
    let n = points.len() as f64;
    if points.is_empty() {
        return None;
    }
    let xm = points.iter().map(|p| p.0).sum::<f64>() / n;
    let ym = points.iter().map(|p| p.1).sum::<f64>() / n;
    let sxx: f64 = points.iter().map(|p| (p.0 - xm) * (p.0 - xm)).sum();
    if sxx == 0.0 {
        return Some(ym);
    }
    let sxy: f64 = points.iter().map(|p| (p.0 - xm) * (p.1 - ym)).sum();
    Some(ym + sxy / sxx * (1.0 - xm))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Points for `W_{k−1} … W_0` given oldest first: `W_j` sits at `x = −j`.
    fn pts(oldest_first: &[f64]) -> Vec<(f64, f64)> {
        let k = oldest_first.len();
        oldest_first.iter().enumerate().map(|(i, &y)| (-((k - 1 - i) as f64), y)).collect()
    }

    /// Test vectors of the roofline selection (docs/policies/hydm.md): 1.0…0.6 → 0.5; 2, 4, 3 → 4.0; 0.3 → 0.3.
    #[test]
    fn regression_vectors() {
        assert!((predict(&pts(&[1.0, 0.9, 0.8, 0.7, 0.6])).unwrap() - 0.5).abs() < 1e-12);
        assert!((predict(&pts(&[2.0, 4.0, 3.0])).unwrap() - 4.0).abs() < 1e-12);
        assert_eq!(predict(&pts(&[0.3])), Some(0.3));
        assert_eq!(predict(&[]), None);
    }

    /// A prediction may leave the range of the points (and go negative): it is not clamped.
    #[test]
    fn prediction_is_not_clamped() {
        let p = predict(&pts(&[0.4, 0.2, 0.0])).unwrap();
        assert!((p - -0.2).abs() < 1e-12, "{p}");
    }

    #[test]
    fn intensity_and_ridge() {
        assert_eq!(intensity(640.0, 10, 64), 1.0);
        assert_eq!(intensity(5.0, 0, 64), f64::INFINITY);
        // knl-7250-flat: 3046.4 GFLOP/s over 100 GB/s of DDR4 and 400 GB/s of MCDRAM.
        assert!((ridge_point(3046.4, 100.0) - 30.464).abs() < 1e-9);
        assert!((ridge_point(3046.4, 400.0) - 7.616).abs() < 1e-9);
    }
}
