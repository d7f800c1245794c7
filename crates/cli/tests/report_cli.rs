//! `numalab report`: from the CLI's own JSON to an HTML file, SVG files, and a one-line error
//! with exit status 2 for input the user has to fix.

use assert_cmd::Command;
use predicates::prelude::*;

fn numalab() -> Command {
    Command::cargo_bin("numalab").unwrap()
}

/// The report crate's checked-in results (made by the real CLI, crates/report/tests/data/regen.sh).
fn fixture(name: &str) -> String {
    format!("{}/../report/tests/data/{name}", env!("CARGO_MANIFEST_DIR"))
}

#[test]
fn compare_json_to_an_html_report() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("compare.json");
    // A small compare, straight from the simulator.
    numalab()
        .args(["compare", "--machine", "server-a-2n", "--workload", "master-slave", "--scale", "0.005", "--runs", "3", "--jobs", "1"])
        .args(["--policies", "first-touch,round-4k", "--out"])
        .arg(&json)
        .assert()
        .success();
    let html = dir.path().join("report.html");
    let svg = dir.path().join("svg");
    numalab()
        .arg("report")
        .arg(&json)
        .arg("-o")
        .arg(&html)
        .arg("--svg")
        .arg(&svg)
        .assert()
        .success()
        .stderr(predicate::str::contains("report.html: ").and(predicate::str::contains("chart(s) from 1 input(s)")));
    let text = std::fs::read_to_string(&html).unwrap();
    assert!(text.starts_with("<!DOCTYPE html>"));
    assert!(text.contains("Execution time per policy — server-a-2n"));
    let mut files: Vec<String> = std::fs::read_dir(&svg).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    files.sort();
    assert!(files.contains(&"exec-time-server-a-2n.svg".to_string()), "{files:?}");
    assert_eq!(files.len(), text.matches("<svg").count(), "one SVG file per chart in the report");
    // A standalone SVG keeps its namespace; the inline copies do not need it.
    let one = std::fs::read_to_string(svg.join("exec-time-server-a-2n.svg")).unwrap();
    assert!(one.starts_with("<svg") && one.contains("xmlns=\"http://www.w3.org/2000/svg\""));
}

#[test]
fn several_inputs_to_standard_output() {
    let out = numalab()
        .args(["report", &fixture("study.json"), &fixture("roofline.json"), &fixture("mva.json")])
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let html = String::from_utf8(out).unwrap();
    assert!(html.contains("Roofline — knl-7250-flat") && html.contains("MVA: time between references against tau"));
    assert!(!html.contains("http://") && !html.contains("https://"));
}

#[test]
fn bad_input_is_one_sentence_and_exit_status_2() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing.json");
    numalab()
        .arg("report")
        .arg(&missing)
        .assert()
        .code(2)
        .stderr(predicate::str::starts_with(format!("error: cannot read {}: No such file or directory", missing.display())));
    let not_numalab = dir.path().join("other.json");
    std::fs::write(&not_numalab, r#"{"hello": "world"}"#).unwrap();
    numalab()
        .arg("report")
        .arg(&not_numalab)
        .assert()
        .code(2)
        .stderr(format!("error: {}: not a numalab result (no \"schema\" naming a numalab document)\n", not_numalab.display()));
    let future = dir.path().join("future.json");
    std::fs::write(&future, r#"{"schema": "numalab.compare/3"}"#).unwrap();
    numalab()
        .arg("report")
        .arg(&future)
        .assert()
        .code(2)
        .stderr(predicate::str::contains("schema numalab.compare/3 is not one numalab report reads"));
    numalab().args(["report", &fixture("compare.json"), "--format", "json"]).assert().code(2);
    numalab().arg("report").assert().code(2).stderr(predicate::str::contains("RESULT.json"));
}

#[test]
fn compare_report_is_the_report_of_its_own_result() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("r.json");
    let direct = dir.path().join("direct.html");
    numalab()
        .args(["compare", "--machine", "server-a-2n", "--workload", "master-slave", "--scale", "0.005", "--runs", "2", "--jobs", "1"])
        .args(["--policies", "first-touch,round-4k", "--out"])
        .arg(&json)
        .arg("--report")
        .arg(&direct)
        .assert()
        .success()
        .stderr(predicate::str::contains("direct.html: "));
    let later = dir.path().join("later.html");
    numalab().arg("report").arg(&json).arg("-o").arg(&later).assert().success();
    assert_eq!(std::fs::read(&direct).unwrap(), std::fs::read(&later).unwrap(), "compare --report draws what report draws from --out");
}

/// `--png DIR`: one PNG and one SVG per chart. It needs a font; CI (NUMALAB_BROWSER_TESTS=1,
/// which installs Chromium and its fonts) requires one, elsewhere a machine without any must
/// get the one-sentence error instead.
#[test]
fn png_files_for_every_chart() {
    let dir = tempfile::tempdir().unwrap();
    let png_dir = dir.path().join("png");
    let out = numalab()
        .args(["report", &fixture("compare.json"), &fixture("tiering.json"), &fixture("profile-imc.json"), "-o"])
        .arg(dir.path().join("r.html"))
        .arg("--png")
        .arg(&png_dir)
        .output()
        .unwrap();
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(std::env::var_os("NUMALAB_BROWSER_TESTS").is_none(), "CI has fonts: {err}");
        assert_eq!(out.status.code(), Some(2));
        assert!(err.starts_with("error: PNG output needs a TrueType or OpenType font"), "{err}");
        return;
    }
    let html = std::fs::read_to_string(dir.path().join("r.html")).unwrap();
    let ids: Vec<&str> = html
        .match_indices("<section id=\"")
        .map(|(i, m)| html[i + m.len()..].split('"').next().unwrap())
        // The inputs' own sections (input1, …) are tables, not charts.
        .filter(|id| !id.strip_prefix("input").is_some_and(|n| n.chars().all(|c| c.is_ascii_digit())))
        .collect();
    assert!(ids.len() >= 5, "{ids:?}");
    for id in ["pages-over-time-knl-7250-flat", "tier-pages-over-time-knl-7250-flat", "app-roofline-knl-7250-flat", "input3-imc-share"] {
        assert!(ids.contains(&id), "no {id} in {ids:?}");
    }
    for id in ids {
        let png = std::fs::read(png_dir.join(format!("{id}.png"))).unwrap_or_else(|e| panic!("{id}.png: {e}"));
        assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n", "{id}");
        let (w, h) = (u32::from_be_bytes(png[16..20].try_into().unwrap()), u32::from_be_bytes(png[20..24].try_into().unwrap()));
        assert!(w >= 400 && h >= 200, "{id}: {w}x{h}");
        assert!(png_dir.join(format!("{id}.svg")).exists(), "{id}.svg");
    }
}
