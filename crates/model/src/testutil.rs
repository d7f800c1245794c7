//! Test helpers shared by the unit tests.

/// Assert that `x` rounds to the spec's printed value `printed` at the printed precision:
/// `|x − v| ≤ ½·10^(−decimals)` (scaled by the exponent for `1.23e-4` forms).
#[track_caller]
pub fn assert_printed(x: f64, printed: &str) {
    let (mant, exp) = match printed.split_once(['e', 'E']) {
        Some((m, e)) => (m, e.parse::<i32>().expect("exponent")),
        None => (printed, 0),
    };
    let decimals = mant.split_once('.').map(|(_, f)| f.len() as i32).unwrap_or(0);
    let v: f64 = printed.parse().expect("printed value");
    let half = 0.5 * 10f64.powi(exp - decimals);
    assert!((x - v).abs() <= half * (1.0 + 1e-9), "{x} does not round to the printed {printed} (allowed ±{half:e})");
}
