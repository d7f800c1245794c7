//! Bad input gets one clear sentence naming the file and, where there is one, the field.

mod common;

use numalab_report::{input, Report, ReportError};
use serde_json::Value;

fn err_of(files: &[String]) -> String {
    match Report::from_files(files) {
        Ok(_) => panic!("{files:?} was accepted"),
        Err(e) => e.to_string(),
    }
}

/// The compare fixture, changed by `f`, parsed as "bad.json".
fn mutated(f: impl FnOnce(&mut Value)) -> Result<input::Input, ReportError> {
    let mut v: Value = serde_json::from_str(&common::read("compare.json")).unwrap();
    f(&mut v);
    input::parse("bad.json", &v.to_string())
}

fn msg(r: Result<input::Input, ReportError>) -> String {
    match r {
        Ok(_) => panic!("accepted"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn a_missing_file() {
    let e = err_of(&["/nonexistent/results.json".into()]);
    assert!(e.starts_with("cannot read /nonexistent/results.json: "), "{e}");
}

#[test]
fn no_files() {
    assert_eq!(err_of(&[]), "no result files given");
}

#[test]
fn not_json_and_not_numalab() {
    let e = msg(input::parse("x.json", "{not json"));
    assert!(e.starts_with("x.json: not a JSON document ("), "{e}");
    assert_eq!(msg(input::parse("x.json", r#"{"runs": []}"#)), "x.json: not a numalab result (no \"schema\" naming a numalab document)");
    assert_eq!(
        msg(input::parse("x.json", r#"{"schema": "other.thing/1"}"#)),
        "x.json: not a numalab result (no \"schema\" naming a numalab document)"
    );
    assert_eq!(msg(input::parse("x.json", "[1, 2]")), "x.json: not a numalab result (no \"schema\" naming a numalab document)");
}

#[test]
fn an_unknown_schema_version() {
    let e = msg(input::parse("x.json", r#"{"schema": "numalab.sim/9"}"#));
    assert!(e.starts_with("x.json: schema numalab.sim/9 is not one numalab report reads (numalab.sim/2, numalab.compare/2"), "{e}");
    // A numalab document the report does not chart (yet) is named as such, too.
    let e = msg(input::parse("x.json", r#"{"schema": "numalab.bench/1"}"#));
    assert!(e.starts_with("x.json: schema numalab.bench/1 is not one"), "{e}");
}

#[test]
fn a_missing_field_is_named_with_its_path() {
    let e = msg(mutated(|v| {
        v["results"][1]["runs"][3].as_object_mut().unwrap().remove("exec_time_s");
    }));
    assert_eq!(e, "bad.json: field results[1].runs[3].exec_time_s is missing");
    let e = msg(mutated(|v| {
        v["results"][0]["config"]["machine"].as_object_mut().unwrap().remove("name");
    }));
    assert_eq!(e, "bad.json: field results[0].config.machine.name is missing");
}

#[test]
fn a_field_of_the_wrong_type() {
    let e = msg(mutated(|v| v["results"][2]["runs"][0]["exec_time_s"] = Value::from("fast")));
    assert_eq!(e, "bad.json: field results[2].runs[0].exec_time_s is not a finite number");
    let e = msg(mutated(|v| v["results"][0]["runs"][1]["node_accesses"] = Value::from(3)));
    assert_eq!(e, "bad.json: field results[0].runs[1].node_accesses is not an array");
}

#[test]
fn empty_runs() {
    let e = msg(mutated(|v| v["results"][0]["runs"] = Value::Array(vec![])));
    assert_eq!(e, "bad.json: field results[0].runs is empty; there is nothing to chart");
    let e = msg(mutated(|v| v["results"] = Value::Array(vec![])));
    assert_eq!(e, "bad.json: field results is empty; there is nothing to chart");
    // A study whose cells hold no runs (a shard's document lists them all).
    let mut s: Value = serde_json::from_str(&common::read("study.json")).unwrap();
    for c in s["cells"].as_array_mut().unwrap() {
        c["runs"] = Value::Array(vec![]);
    }
    assert_eq!(msg(input::parse("s.json", &s.to_string())), "s.json: field cells is empty; there is nothing to chart");
}

#[test]
fn mixed_machines_in_one_chart() {
    let dir = tempfile::tempdir().unwrap();
    // Same machine name, other hardware, other policies (so no cell is duplicated).
    let mut v: Value = serde_json::from_str(&common::read("compare.json")).unwrap();
    for r in v["results"].as_array_mut().unwrap() {
        r["config"]["machine"]["link_bw_gbps"] = Value::from(10.0);
        let name = format!("{}-x", r["config"]["policy"]["name"].as_str().unwrap());
        r["config"]["policy"]["name"] = Value::from(name);
    }
    let other = dir.path().join("other.json");
    std::fs::write(&other, v.to_string()).unwrap();
    let e = err_of(&[common::data("compare.json"), other.display().to_string()]);
    assert!(e.contains("both name machine server-a-4n but with different settings; one chart would mix two machines"), "{e}");
    assert!(e.contains("compare.json (results[0]) and ") && e.contains("other.json (results[0])"), "{e}");
}

#[test]
fn the_same_cell_twice() {
    let f = common::data("compare.json");
    let e = err_of(&[f.clone(), f]);
    assert!(e.ends_with("both hold linux on master-slave / server-a-4n; report them separately"), "{e}");
}

/// The tiering fixture, changed by `f`, parsed as "bad.json".
fn tiering_mutated(f: impl FnOnce(&mut Value)) -> Result<input::Input, ReportError> {
    let mut v: Value = serde_json::from_str(&common::read("tiering.json")).unwrap();
    f(&mut v);
    input::parse("bad.json", &v.to_string())
}

#[test]
fn bad_application_points_and_machines_name_the_field() {
    assert_eq!(
        msg(tiering_mutated(|v| {
            v["results"][1]["runs"][0]["timeline"][2]["apps"][3].as_object_mut().unwrap().remove("gflops");
        })),
        "bad.json: field results[1].runs[0].timeline[2].apps[3].gflops is missing"
    );
    assert_eq!(
        msg(tiering_mutated(|v| v["results"][0]["runs"][0]["timeline"][0]["pages_per_node"][1] = "many".into())),
        "bad.json: field results[0].runs[0].timeline[0].pages_per_node[1] is not a finite number"
    );
    // The roofline needs the machine as numalab reads machines.
    let e = msg(tiering_mutated(|v| v["results"][0]["config"]["machine"]["nodes"][1]["tier"] = "tape".into()));
    assert!(e.starts_with("bad.json: field results[0].config.machine is not a numalab machine: unknown variant `tape`"), "{e}");
    // Without a compute ceiling there is no roofline, and no error: the other charts stay.
    let ok = tiering_mutated(|v| {
        for r in v["results"].as_array_mut().unwrap() {
            r["config"]["machine"].as_object_mut().unwrap().remove("peak_gflops_dp");
        }
    })
    .unwrap();
    let report = Report::new(vec![ok]).unwrap();
    assert!(report.charts.iter().all(|c| !c.id.starts_with("app-roofline")));
    assert!(report.charts.iter().any(|c| c.id.starts_with("tier-pages-over-time")));
}

#[test]
fn controller_events_that_are_not_all_counted_draw_no_share() {
    let mut v: Value = serde_json::from_str(&common::read("profile-imc.json")).unwrap();
    let e = v["events"].as_array_mut().unwrap().iter_mut().find(|e| e["name"] == "imc.write[3]").unwrap();
    e["status"] = "denied".into();
    e["value"] = Value::Null;
    let report = Report::new(vec![input::parse("p.json", &v.to_string()).unwrap()]).unwrap();
    assert!(report.charts.iter().all(|c| !c.id.ends_with("imc-share")), "a share over part of the controllers");
    v["events"][1]["name"] = "imc.read[x]".into();
    assert_eq!(msg(input::parse("p.json", &v.to_string())), "p.json: field events[1].name is not an event name such as imc.read[0]");
}
