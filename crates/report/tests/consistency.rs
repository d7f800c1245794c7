//! The chart data against numalab's own summaries: the report recomputes quartiles, CV, NMMD
//! and means from the runs, and they must agree with the `summary` the simulator wrote
//! (docs/metrics.md, "Across runs"). Two independent computations of the same numbers.

mod common;

use numalab_report::charts::Kind;
use numalab_report::Report;
use serde_json::Value;

fn close(a: f64, b: f64, what: &str) {
    assert!((a - b).abs() <= 1e-9 * b.abs().max(1e-12), "{what}: report {a} vs summary {b}");
}

#[test]
fn compare_charts_agree_with_the_documents_summaries() {
    let doc: Value = serde_json::from_str(&common::read("compare.json")).unwrap();
    let report = Report::from_files(&[common::data("compare.json")]).unwrap();
    let chart = |prefix: &str| report.charts.iter().find(|c| c.id.starts_with(prefix)).unwrap_or_else(|| panic!("no {prefix} chart"));
    let results = doc["results"].as_array().unwrap();
    let base = results[0]["summary"]["exec_time_s"]["mean"].as_f64().unwrap();

    let Kind::Boxes(panels) = &chart("exec-time").kind else { panic!("exec-time is a box chart") };
    assert_eq!(panels.len(), 1);
    for (b, r) in panels[0].boxes.iter().zip(results) {
        let s = &r["summary"]["exec_time_s"];
        assert_eq!(b.label, r["config"]["policy"]["name"].as_str().unwrap());
        for (v, k) in [(b.min, "min"), (b.q1, "q1"), (b.median, "median"), (b.q3, "q3"), (b.max, "max"), (b.mean, "mean")] {
            close(v * base, s[k].as_f64().unwrap(), k);
        }
    }
    // The first box's mean is the baseline: exactly 1 up to rounding.
    close(panels[0].boxes[0].mean, 1.0, "baseline");
    let normalised = doc["normalised_exec_time"].as_array().unwrap();
    for (b, n) in panels[0].boxes.iter().zip(normalised) {
        close(b.mean, n.as_f64().unwrap(), "normalised_exec_time");
    }

    let Kind::Bars { panels, .. } = &chart("cv-nmmd").kind else { panic!() };
    for (vals, r) in panels[0].values.iter().zip(results) {
        close(vals[0].unwrap() / 100.0, r["summary"]["exec_time_s"]["cv"].as_f64().unwrap(), "cv");
        close(vals[1].unwrap() / 100.0, r["summary"]["exec_time_s"]["nmmd"].as_f64().unwrap(), "nmmd");
    }

    let Kind::Bars { panels, .. } = &chart("local-ratio").kind else { panic!() };
    for (vals, r) in panels[0].values.iter().zip(results) {
        close(vals[0].unwrap(), r["summary"]["local_access_ratio"].as_f64().unwrap(), "local_access_ratio");
    }

    let Kind::Bars { panels, stacked } = &chart("thread-migrations").kind else { panic!() };
    assert!(stacked);
    for (vals, r) in panels[0].values.iter().zip(results) {
        let height: f64 = vals.iter().flatten().sum();
        close(height, r["summary"]["thread_migrations_per_s"].as_f64().unwrap(), "stack height = thread_migrations_per_s");
    }

    let Kind::Bars { panels, .. } = &chart("faults-migrations").kind else { panic!() };
    for (vals, r) in panels[0].values.iter().zip(results) {
        close(vals[0].unwrap(), r["summary"]["hint_faults_per_s"].as_f64().unwrap(), "hint_faults_per_s");
        close(vals[1].unwrap(), r["summary"]["page_migrations_per_s"].as_f64().unwrap(), "page_migrations_per_s");
    }

    // Node shares add up to 1 per policy, and the uniform line is 1/4 on a 4-node machine.
    let Kind::Bars { panels, .. } = &chart("node-share").kind else { panic!() };
    assert_eq!(panels[0].reference.as_ref().unwrap().1, 0.25);
    for policy in 0..results.len() {
        let total: f64 = panels[0].values.iter().map(|row| row[policy].unwrap()).sum();
        close(total, 1.0, "shares add up to 1");
    }
}

#[test]
fn study_panels_follow_the_cells() {
    let doc: Value = serde_json::from_str(&common::read("study.json")).unwrap();
    let report = Report::from_files(&[common::data("study.json")]).unwrap();
    let Kind::Boxes(panels) = &report.charts[0].kind else { panic!("the first chart is execution time") };
    // Machine-major, then workload: one panel per workload, policies in study order.
    let workloads: Vec<&str> = doc["study"]["study"]["workloads"].as_array().unwrap().iter().map(|w| w.as_str().unwrap()).collect();
    assert_eq!(panels.len(), workloads.len());
    for (p, w) in panels.iter().zip(&workloads) {
        assert!(p.title.starts_with(w), "{} is not {w}", p.title);
        let labels: Vec<&str> = p.boxes.iter().map(|b| b.label.as_str()).collect();
        assert_eq!(labels, ["linux", "autonuma"]);
        assert!(p.boxes.iter().all(|b| b.runs == 3));
    }
    for cell in doc["cells"].as_array().unwrap() {
        let p = panels.iter().find(|p| p.title.starts_with(cell["workload"].as_str().unwrap())).unwrap();
        let b = p.boxes.iter().find(|b| b.label == cell["policy"].as_str().unwrap()).unwrap();
        close(b.mean_s, cell["summary"]["exec_time_s"]["mean"].as_f64().unwrap(), "cell mean");
    }
}

/// The tiering charts against the documents: the roofline's ceilings are those of
/// `numalab model roofline` for the same machine (roofline.json), every application point is
/// its interval's flops / bytes and GFLOP/s, and the pages per tier add up to the nodes' pages.
#[test]
fn tiering_charts_agree_with_the_timeline_and_the_model() {
    let doc: Value = serde_json::from_str(&common::read("tiering.json")).unwrap();
    let model: Value = serde_json::from_str(&common::read("roofline.json")).unwrap();
    let report = Report::from_files(&[common::data("tiering.json")]).unwrap();
    let chart = |prefix: &str| report.charts.iter().find(|c| c.id.starts_with(prefix)).unwrap_or_else(|| panic!("no {prefix} chart"));
    let results = doc["results"].as_array().unwrap();

    let Kind::Lines { panels, .. } = &chart("app-roofline").kind else { panic!("app-roofline is a line chart") };
    assert_eq!(panels.len(), results.len(), "one panel per policy");
    let peak = model["peak_gflops"].as_f64().unwrap();
    for (p, r) in panels.iter().zip(results) {
        let ceilings: Vec<_> = p.series.iter().filter(|s| s.reference).collect();
        assert_eq!(ceilings.len(), model["tiers"].as_array().unwrap().len());
        for (s, t) in ceilings.iter().zip(model["tiers"].as_array().unwrap()) {
            let bw = t["bw_gbps"].as_f64().unwrap();
            assert!(s.name.starts_with(t["tier"].as_str().unwrap()), "{}", s.name);
            for &(x, y) in &s.points {
                close(y, peak.min(bw * x), &s.name);
            }
        }
        let timeline = r["runs"][0]["timeline"].as_array().unwrap();
        let mut drawn = 0;
        for s in p.series.iter().filter(|s| !s.reference) {
            assert_eq!(s.points.len(), s.times.len());
            for (&(ai, gflops), t) in s.points.iter().zip(&s.times) {
                let q = timeline.iter().find(|q| q["t_s"].as_f64() == Some(*t)).unwrap();
                let a = q["apps"].as_array().unwrap().iter().find(|a| a["app"] == s.name.as_str()).unwrap();
                close(ai, a["flops"].as_f64().unwrap() / a["bytes"].as_f64().unwrap(), "intensity");
                close(gflops, a["flops"].as_f64().unwrap() / q["interval_s"].as_f64().unwrap() / 1e9, "GFLOP/s");
                drawn += 1;
            }
        }
        // Every interval with references and flops is a point.
        let expected = timeline
            .iter()
            .flat_map(|q| q["apps"].as_array().unwrap())
            .filter(|a| a["ai_flop_per_byte"].as_f64().is_some_and(|x| x > 0.0) && a["gflops"].as_f64().unwrap() > 0.0)
            .count();
        assert_eq!(drawn, expected);
    }

    let Kind::Lines { panels: tiers, .. } = &chart("tier-pages-over-time").kind else { panic!() };
    let Kind::Lines { panels: nodes, .. } = &chart("pages-over-time").kind else { panic!() };
    for (t, n) in tiers.iter().zip(nodes) {
        assert_eq!(t.series.iter().map(|s| s.name.as_str()).collect::<Vec<_>>(), ["dram", "mcdram"]);
        assert_eq!(n.series.iter().map(|s| s.name.as_str()).collect::<Vec<_>>(), ["node 0 (dram)", "node 1 (mcdram)"]);
        assert_eq!(t.series[0].points, n.series[0].points, "one node per tier on this machine");
    }
}

/// The per-controller shares against the profiler's own derived `imc.share_pct[c]` and
/// `imc.uniform_pct` (numalab_core's share metrics): two computations of the same numbers.
#[test]
fn controller_shares_agree_with_the_profiles_derived_metrics() {
    let doc: Value = serde_json::from_str(&common::read("profile-imc.json")).unwrap();
    let report = Report::from_files(&[common::data("profile-imc.json")]).unwrap();
    let chart = report.charts.iter().find(|c| c.id.ends_with("imc-share")).expect("an imc-share chart");
    let Kind::Bars { panels, .. } = &chart.kind else { panic!("imc-share is a bar chart") };
    let derived = |name: &str| doc["derived"].as_array().unwrap().iter().find(|d| d["name"] == name).unwrap()["value"].as_f64().unwrap();
    assert_eq!(panels[0].values.len(), 6);
    for (c, v) in panels[0].values.iter().enumerate() {
        close(100.0 * v[0].unwrap(), derived(&format!("imc.share_pct[{c}]")), "share");
    }
    close(100.0 * panels[0].reference.as_ref().unwrap().1, derived("imc.uniform_pct"), "uniform");
}

/// Pages per tier sum the nodes of each tier, and need two tiers: tiering.json changed to a
/// third node (a second MCDRAM node holding 100 pages at every point), then to one tier only.
#[test]
fn tier_pages_sum_the_nodes_of_each_tier() {
    let mut v: Value = serde_json::from_str(&common::read("tiering.json")).unwrap();
    for r in v["results"].as_array_mut().unwrap() {
        let nodes = r["config"]["machine"]["nodes"].as_array_mut().unwrap();
        let extra = nodes[1].clone();
        nodes.push(extra);
        for p in r["runs"][0]["timeline"].as_array_mut().unwrap() {
            p["pages_per_node"].as_array_mut().unwrap().push(100.into());
        }
    }
    let three = numalab_report::input::parse("three.json", &v.to_string()).unwrap();
    let report = Report::new(vec![three]).unwrap();
    let lines = |id: &str| match &report.charts.iter().find(|c| c.id.starts_with(id)).unwrap().kind {
        Kind::Lines { panels, .. } => panels.clone(),
        _ => panic!("{id} is a line chart"),
    };
    let (tiers, nodes) = (lines("tier-pages-over-time"), lines("pages-over-time"));
    for (t, n) in tiers.iter().zip(&nodes) {
        assert_eq!(n.series.iter().map(|s| s.name.as_str()).collect::<Vec<_>>(), ["node 0 (dram)", "node 1 (mcdram)", "node 2 (mcdram)"]);
        assert_eq!(t.series[0].points, n.series[0].points);
        for ((tq, q1), q2) in t.series[1].points.iter().zip(&n.series[1].points).zip(&n.series[2].points) {
            assert_eq!(*tq, (q1.0, q1.1 + q2.1));
            assert_eq!(q2.1, 100.0);
        }
    }

    // One tier: no per-tier chart; the per-node chart stays.
    let mut v: Value = serde_json::from_str(&common::read("tiering.json")).unwrap();
    for r in v["results"].as_array_mut().unwrap() {
        r["config"]["machine"]["nodes"][1]["tier"] = "dram".into();
    }
    let report = Report::new(vec![numalab_report::input::parse("one.json", &v.to_string()).unwrap()]).unwrap();
    assert!(report.charts.iter().all(|c| !c.id.starts_with("tier-pages-over-time")));
    assert!(report.charts.iter().any(|c| c.id.starts_with("pages-over-time")));
}
