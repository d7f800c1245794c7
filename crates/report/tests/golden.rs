//! Golden chart data: the numbers each chart is drawn from (not its pixels), extracted from the
//! checked-in results, compared with files under tests/golden/CASE/. A change that moves them on
//! purpose regenerates them with
//! `NUMALAB_UPDATE_GOLDEN=1 cargo test -p numalab-report --test golden` and says why.

mod common;

use common::{data, golden_dir};
use numalab_report::Report;

/// Compare every chart's table with its golden file, and the list of charts with `charts.txt`.
fn check_case(case: &str, files: &[&str]) {
    let report = Report::from_files(&files.iter().map(|f| data(f)).collect::<Vec<_>>()).unwrap();
    let dir = golden_dir().join(case);
    let mut actual: Vec<(String, String)> = report.charts.iter().map(|c| (format!("{}.tsv", c.id), c.table().to_tsv())).collect();
    let list: String = report.charts.iter().map(|c| format!("{}\t{}\n", c.id, c.title)).collect();
    actual.push(("charts.txt".into(), list));
    // Paths in titles would differ between checkouts; the fixture's own name stays.
    let root = data("x");
    let root = &root[..root.len() - 1];
    let actual: Vec<(String, String)> = actual.into_iter().map(|(n, t)| (n, t.replace(root, ""))).collect();
    if std::env::var_os("NUMALAB_UPDATE_GOLDEN").is_some() {
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        for (name, text) in &actual {
            std::fs::write(dir.join(name), text).unwrap();
        }
        return;
    }
    let mut expected: Vec<String> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e} (create it with NUMALAB_UPDATE_GOLDEN=1)", dir.display()))
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    expected.sort();
    let mut names: Vec<String> = actual.iter().map(|(n, _)| n.clone()).collect();
    names.sort();
    assert_eq!(names, expected, "{case}: the charts drawn changed");
    for (name, text) in &actual {
        let path = dir.join(name);
        let want = std::fs::read_to_string(&path).unwrap();
        if &want != text {
            let line = want.lines().zip(text.lines()).position(|(a, b)| a != b).map_or_else(
                || format!("lengths differ ({} vs {} lines)", want.lines().count(), text.lines().count()),
                |i| {
                    format!(
                        "first difference at line {}:\n  golden: {}\n  actual: {}",
                        i + 1,
                        want.lines().nth(i).unwrap(),
                        text.lines().nth(i).unwrap()
                    )
                },
            );
            panic!("{} changed: {line}", path.display());
        }
    }
}

#[test]
fn compare_charts() {
    check_case("compare", &["compare.json"]);
}

#[test]
fn study_charts() {
    check_case("study", &["study.json"]);
}

#[test]
fn model_charts() {
    check_case("model", &["roofline.json", "mva.json"]);
}

#[test]
fn profile_charts() {
    check_case("profile", &["profile.json"]);
}

#[test]
fn timeline_charts() {
    check_case("timeline", &["timeline.json"]);
}

#[test]
fn tiering_charts() {
    // A two-tier machine with a 16-program mix: pages per node and per tier over time, and the
    // roofline with every application's points per interval.
    check_case("tiering", &["tiering.json"]);
}

#[test]
fn profile_imc_charts() {
    // Hand-made profile with memory-controller counts (tests/profile_imc_fixture.rs builds it).
    check_case("profile-imc", &["profile-imc.json"]);
}
