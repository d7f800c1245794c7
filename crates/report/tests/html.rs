//! The HTML report: one inline SVG per chart, self-contained (nothing fetched from anywhere),
//! the same bytes for the same inputs, and every input's provenance.

mod common;

use common::data;
use numalab_report::Report;

fn report(files: &[&str]) -> Report {
    Report::from_files(&files.iter().map(|f| data(f)).collect::<Vec<_>>()).unwrap()
}

#[test]
fn one_svg_per_chart_and_nothing_external() {
    let r = report(&["compare.json", "roofline.json", "mva.json", "profile.json"]);
    let html = r.html();
    // compare: 8 charts (time, CV/NMMD, local ratio, faults, thread migrations, node share,
    // access matrix, ping-pong); roofline 1; MVA 1; profile: events and resident memory at least.
    assert!(r.charts.len() >= 12, "{} charts", r.charts.len());
    assert_eq!(html.matches("<svg").count(), r.charts.len());
    assert_eq!(html.matches("</svg>").count(), r.charts.len());
    for c in &r.charts {
        assert!(html.contains(&format!("<section id=\"{}\">", c.id)), "{} has no section", c.id);
    }
    // Nothing to fetch: no links, scripts, external styles or fonts.
    for bad in ["http://", "https://", "<script", "<link", "@import", "url(", "<img", "<iframe"] {
        assert!(!html.contains(bad), "the report contains {bad}");
    }
    // Every chart drew something: shapes beyond the axes, and text.
    for (c, svg) in r.charts.iter().zip(&r.svgs) {
        assert!(svg.matches("<rect").count() + svg.matches("<polyline").count() + svg.matches("<circle").count() > 5, "{} is empty", c.id);
        assert!(svg.contains("<text"), "{} has no labels", c.id);
    }
}

#[test]
fn the_same_inputs_give_the_same_bytes() {
    let a = report(&["study.json"]).html();
    let b = report(&["study.json"]).html();
    assert_eq!(a, b);
}

#[test]
fn provenance_of_every_input() {
    let html = report(&["compare.json", "roofline.json"]).html();
    assert!(html.contains("numalab.compare/2") && html.contains("numalab.model-roofline/1"));
    assert!(html.contains("<th>numalab version</th><td>0.1.0</td>"));
    assert!(html.contains("<th>seed</th><td>1</td>"));
    // The resolved config of each policy, and the command lines.
    assert!(html.contains("results[2].config (round-4k)"));
    assert!(
        html.contains("numalab compare --policies linux,autonuma,round-4k --machine server-a-4n --workload master-slave --scale 0.02 --iterations 600 --set sim.engine=fast --runs 4 --seed 1")
    );
    assert!(html.contains("numalab model roofline --machine knl-7250-flat --bandwidth peak --peak-gflops 3046.4 --ai 0.1,1,10,100"));
}

#[test]
fn charts_are_drawn_only_with_their_data() {
    // A model document has no simulated runs: no box plot, no node shares.
    let r = report(&["roofline.json"]);
    let ids: Vec<&str> = r.charts.iter().map(|c| c.id.as_str()).collect();
    assert_eq!(ids, ["input1-roofline"]);
}

#[test]
fn a_study_report_carries_its_study_file() {
    // Rebuilt from the document; `numalab study` on it runs the same cells (docs/report.md).
    let html = report(&["study.json"]).html();
    assert!(html.contains("numalab study report-fixture.toml --out study.json"));
    assert!(html.contains("[study]\niterations = { cg-like = 20, master-slave = 600 }\nmachines = [&quot;server-a-4n&quot;]\n"));
}
