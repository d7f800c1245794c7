//! Odd but well-formed input never panics: each case gives a report or an error.

mod common;

use numalab_report::{input, Report};
use serde_json::{json, Value};

fn outcome(f: impl FnOnce(&mut Value)) -> Result<usize, String> {
    let mut v: Value = serde_json::from_str(&common::read("compare.json")).unwrap();
    f(&mut v);
    let input = input::parse("odd.json", &v.to_string()).map_err(|e| e.to_string())?;
    let r = Report::new(vec![input]).map_err(|e| e.to_string())?;
    // The HTML is built too: every table and SVG.
    assert!(r.html().contains("</html>"));
    Ok(r.charts.len())
}

fn each_run(v: &mut Value, f: impl Fn(&mut Value)) {
    for r in v["results"].as_array_mut().unwrap() {
        for run in r["runs"].as_array_mut().unwrap() {
            f(run);
        }
    }
}

/// A change to the compare fixture.
type Edit = Box<dyn Fn(&mut Value)>;

#[test]
fn odd_values_give_a_report_or_an_error() {
    let cases: Vec<(&str, Edit)> = vec![
        ("zero times", Box::new(|v| each_run(v, |r| r["exec_time_s"] = json!(0.0)))),
        ("negative times", Box::new(|v| each_run(v, |r| r["exec_time_s"] = json!(-1.0)))),
        ("huge times", Box::new(|v| each_run(v, |r| r["exec_time_s"] = json!(1e300)))),
        ("rates that overflow when averaged", Box::new(|v| each_run(v, |r| r["hint_faults_per_s"] = json!(1.7e308)))),
        ("rates that overflow when padded", Box::new(|v| each_run(v, |r| r["page_migrations_per_s"] = json!(1e308)))),
        (
            "times that overflow when padded",
            Box::new(|v| {
                let runs = v["results"][1]["runs"].as_array_mut().unwrap();
                runs[0]["exec_time_s"] = json!(1e-300);
                runs[1]["exec_time_s"] = json!(1e300);
            }),
        ),
        ("no accesses", Box::new(|v| each_run(v, |r| r["node_accesses"] = json!([0, 0, 0, 0])))),
        ("a ragged matrix", Box::new(|v| each_run(v, |r| r["access_matrix"] = json!([[1, 2], [3]])))),
        ("an empty matrix", Box::new(|v| each_run(v, |r| r["access_matrix"] = json!([])))),
        (
            "null metrics",
            Box::new(|v| {
                each_run(v, |r| {
                    for k in [
                        "local_access_ratio",
                        "hint_faults_per_s",
                        "page_migrations_per_s",
                        "node_accesses",
                        "access_matrix",
                        "thread_migrations_by_cause",
                        "pingpong_intervals_s",
                        "sim_time_s",
                    ] {
                        r[k] = Value::Null;
                    }
                })
            }),
        ),
        (
            "absent metrics",
            Box::new(|v| {
                each_run(v, |r| {
                    let o = r.as_object_mut().unwrap();
                    o.retain(|k, _| k == "exec_time_s");
                })
            }),
        ),
        (
            "ping-pong on odd edges",
            Box::new(|v| each_run(v, |r| r["pingpong_intervals_s"] = json!({"edges_s": [-1.0, 0.0], "counts": [1, 2, 3]}))),
        ),
        (
            "an unknown cause",
            Box::new(|v| each_run(v, |r| r["thread_migrations_by_cause"]["teleport"] = json!({"in_node": 1, "cross_node": 2}))),
        ),
        (
            "one run",
            Box::new(|v| {
                for r in v["results"].as_array_mut().unwrap() {
                    r["runs"].as_array_mut().unwrap().truncate(1);
                }
            }),
        ),
        (
            "machine without nodes",
            Box::new(|v| {
                for r in v["results"].as_array_mut().unwrap() {
                    r["config"]["machine"].as_object_mut().unwrap().remove("nodes");
                }
            }),
        ),
    ];
    for (name, f) in cases {
        let got = outcome(f);
        eprintln!("{name}: {got:?}");
        match got {
            Ok(n) => assert!(n >= 1, "{name}: no chart"),
            Err(e) => assert!(e.starts_with("odd.json") || e.starts_with("cannot draw"), "{name}: {e}"),
        }
    }
}

#[test]
fn a_single_run_has_no_cv_bar_but_a_box() {
    let n = outcome(|v| {
        for r in v["results"].as_array_mut().unwrap() {
            r["runs"].as_array_mut().unwrap().truncate(1);
        }
    })
    .unwrap();
    // Without the CV/NMMD chart: one fewer than the 8 of the full fixture.
    assert_eq!(n, 7);
}

#[test]
fn chart_ids_stay_unique_when_machine_names_look_alike() {
    let dir = tempfile::tempdir().unwrap();
    let mut v: Value = serde_json::from_str(&common::read("compare.json")).unwrap();
    for r in v["results"].as_array_mut().unwrap() {
        r["config"]["machine"]["name"] = json!("server_a_4n");
    }
    let other = dir.path().join("other.json");
    std::fs::write(&other, v.to_string()).unwrap();
    let r = Report::from_files(&[common::data("compare.json"), other.display().to_string()]).unwrap();
    let mut ids: Vec<&str> = r.charts.iter().map(|c| c.id.as_str()).collect();
    assert!(ids.contains(&"exec-time-server-a-4n") && ids.contains(&"exec-time-server-a-4n-2"), "{ids:?}");
    let n = ids.len();
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), n, "ids repeat");
}
