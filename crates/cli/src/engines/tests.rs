//! Tests of `numalab study engines` (docs/study.md, "Comparing the engines"): moments, verdicts,
//! the band, and the CV's standard error.

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
fn an_outside_check_is_band_when_the_fast_mean_is_within_the_limit_of_the_exact_band() {
    let t = Tolerances::default();
    // The exact engine took 1.00 at the default epoch and 1.03 and 1.05 under the band,
    // each with tight runs (standard error 0.001): shown to reach 1.048.
    let exact = m(&[0.999, 1.001]);
    let band = [m(&[1.049, 1.051]), m(&[1.029, 1.031])];
    let [lo, hi] = band_span(&exact, &band, &t).unwrap();
    assert!((lo - 1.0).abs() < 1e-12 && (hi - 1.048).abs() < 1e-12, "{lo} {hi}");
    // A band cell whose mean is off by its noise alone (1.1, standard error 0.1) shows no
    // band; a single run counts as it is; below the reference the band reaches down.
    let [lo, hi] = band_span(&exact, &[m(&[1.0, 1.2])], &t).unwrap();
    assert_eq!([lo, hi], [1.0, 1.0]);
    assert_eq!(band_span(&exact, &[m(&[1.1])], &t), Some([1.0, 1.1]));
    let [lo, _] = band_span(&exact, &[m(&[0.899, 0.901])], &t).unwrap();
    assert!((lo - 0.902).abs() < 1e-12, "{lo}");
    let outside_then = |fast: &Moments| with_band(judge(&exact, fast, 0.02, &t), &exact, fast, &band, 0.02, &t);
    // Fast 1.06 is 6 % from the default reference but within 2 % of 1.048.
    assert_eq!(outside_then(&m(&[1.059, 1.061])), Verdict::Band);
    // 1.08 is 3 % beyond the band cell's 1.05, and 0.97 below the band: still outside.
    assert_eq!(outside_then(&m(&[1.079, 1.081])), Verdict::Outside);
    assert_eq!(outside_then(&m(&[0.969, 0.971])), Verdict::Outside);
    // The edges are inside, as the tolerance's own edge is.
    assert_eq!(with_band(Verdict::Outside, &exact, &m(&[0.98, 0.98]), &band, 0.02, &t), Verdict::Band);
    // Beyond the band, but within the noise of a band cell whose runs are spread.
    let spread = [m(&[0.95, 1.15])];
    assert_eq!(with_band(Verdict::Outside, &exact, &m(&[1.079, 1.081]), &spread, 0.02, &t), Verdict::Band);
    // Without band cells nothing changes, and a verdict better than outside stays.
    assert_eq!(with_band(Verdict::Outside, &exact, &m(&[1.06, 1.06]), &[], 0.02, &t), Verdict::Outside);
    assert_eq!(band_span(&exact, &[], &t), None);
    assert_eq!(with_band(Verdict::Noise, &exact, &m(&[1.06, 1.06]), &band, 0.02, &t), Verdict::Noise);
    assert_eq!(span(std::iter::empty()), None);
}

fn cell(grid: &[(&str, toml::Value)], config: serde_json::Value) -> CellDoc {
    CellDoc {
        machine: "m".into(),
        workload: "w".into(),
        policy: "p".into(),
        grid: grid.iter().map(|(k, v)| (k.to_string(), v.clone())).collect(),
        key: String::new(),
        config,
        runs: Vec::new(),
        summary: None,
    }
}

#[test]
fn a_band_cell_is_the_exact_cell_but_for_its_own_grid() {
    use serde_json::json;
    let config = |epoch: f64, engine: &str, mem: u64| json!({"sim": {"epoch_us": epoch, "engine": engine}, "machine": {"nodes": [{"mem_bytes": mem}]}});
    let exact = cell(&[("sim.engine", "exact".into())], config(50.0, "exact", 4096));
    let grid = [("sim.engine", toml::Value::from("exact")), ("sim.epoch_us", 25.0.into()), ("fast_tier_fraction", 0.5.into())];
    assert!(is_band_of(&cell(&grid, config(25.0, "exact", 4096)), &exact));
    // What a key outside the config (the fast tier's fraction) set must be equal.
    assert!(!is_band_of(&cell(&grid, config(25.0, "exact", 8192)), &exact));
    // A fast cell is no reference, and other settings than the grid's make another cell.
    let fast_grid = [("sim.engine", toml::Value::from("fast")), ("sim.epoch_us", 25.0.into())];
    assert!(!is_band_of(&cell(&fast_grid, config(25.0, "fast", 4096)), &exact));
    let mut other = config(25.0, "exact", 4096);
    other["sim"]["tick_ms"] = json!(1.0);
    assert!(!is_band_of(&cell(&grid, other), &exact));
    // A grid key that is a path in one config only.
    let odd = [("sim.engine", toml::Value::from("exact")), ("sim.no_such_key", 1.into())];
    let mut with_key = config(50.0, "exact", 4096);
    with_key["sim"]["no_such_key"] = json!(1);
    assert!(!is_band_of(&cell(&odd, with_key), &exact));
    let mut elsewhere = cell(&grid, config(25.0, "exact", 4096));
    elsewhere.machine = "n".into();
    assert!(!is_band_of(&elsewhere, &exact));
}

#[test]
fn the_cv_of_two_runs_is_known_to_about_seventy_per_cent() {
    let times = [0.9, 1.1];
    let cv = cv_moments(&times).unwrap();
    assert!((cv.mean - m(&times).sd).abs() < 1e-12, "mean 1: cv = sd");
    assert!((cv.se / cv.mean - 1.0 / 2f64.sqrt()).abs() < 1e-12);
    assert!(cv_moments(&[1.0]).unwrap().se.is_nan());
    assert!(cv_moments(&[]).is_none());
    assert_eq!(cv_moments(&[2.0, 2.0, 2.0]).unwrap().se, 0.0);
}

#[test]
fn a_cv_that_rests_on_a_few_outlying_runs_is_known_less_well() {
    // 32 runs: 29 near 1.0, 3 at 1.3 (a thread pulled to another node in 3 runs).
    let mut times: Vec<f64> = (0..29).map(|i| 1.0 + 0.002 * f64::from(i % 5)).collect();
    times.extend([1.3, 1.3, 1.3]);
    let cv = cv_moments(&times).unwrap();
    let normal = cv.mean / 62f64.sqrt();
    // κ of these runs: m4/m2² by hand.
    let mean = times.iter().sum::<f64>() / 32.0;
    let central = |k: i32| times.iter().map(|x| (x - mean).powi(k)).sum::<f64>() / 32.0;
    let kurtosis = central(4) / central(2).powi(2);
    assert!(kurtosis > 8.5 && kurtosis < 9.0, "{kurtosis}");
    let expected = cv.mean * ((kurtosis - 29.0 / 31.0) / 128.0).sqrt();
    assert!((cv.se - expected).abs() < 1e-15, "{} {expected}", cv.se);
    assert!(cv.se > 1.8 * normal, "{} against {normal}", cv.se);
    // Runs spread evenly (κ about 1.8) keep the normal value: the floor only widens.
    let even: Vec<f64> = (0..32).map(|i| 1.0 + 0.01 * f64::from(i)).collect();
    let cv = cv_moments(&even).unwrap();
    assert!((cv.se - cv.mean / 62f64.sqrt()).abs() < 1e-15);
}
