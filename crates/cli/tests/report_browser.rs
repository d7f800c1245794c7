//! The HTML report in a real browser: Debian's headless Chromium opens it and every chart must
//! be rendered (an SVG element with a non-empty bounding box and its shapes), with no console
//! message (the report has no scripts; a failed fetch of anything would log one). A screenshot
//! is left in the build's tmp directory (`target/tmp/report-browser/report.png`) as a CI
//! artefact.
//!
//! Needs `chromium` (Debian package `chromium`). Runs when NUMALAB_BROWSER_TESTS=1 (and then
//! fails if Chromium is missing); otherwise it is skipped with a printed reason.

use assert_cmd::Command as Cli;
use std::path::Path;
use std::process::Command;

fn fixture(name: &str) -> String {
    format!("{}/../report/tests/data/{name}", env!("CARGO_MANIFEST_DIR"))
}

/// Headless Chromium with what a sandboxed CI needs and nothing that reaches the network.
fn chromium(args: &[&str]) -> std::process::Output {
    Command::new("timeout")
        .arg("120")
        .args(["chromium", "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--no-first-run"])
        .args(["--disable-extensions", "--disable-sync", "--hide-scrollbars"])
        .arg(format!("--user-data-dir={}", Path::new(env!("CARGO_TARGET_TMPDIR")).join("report-browser").join("profile").display()))
        .args(args)
        .output()
        .expect("cannot run chromium (apt-get install chromium)")
}

/// Opens the report in an iframe and writes, per SVG, its namespace, size and shape count.
const HARNESS: &str = r#"<!DOCTYPE html>
<html><body><pre id="out">pending</pre>
<iframe id="f" src="report.html" width="1400" height="900"></iframe>
<script>
document.getElementById('f').addEventListener('load', function () {
  var out = [];
  try {
    var svgs = this.contentDocument.querySelectorAll('svg');
    out.push('svgs ' + svgs.length);
    for (var i = 0; i < svgs.length; i++) {
      var s = svgs[i], b = s.getBBox();
      out.push('svg ' + i + ' ns=' + (s.namespaceURI === 'http://www.w3.org/2000/svg') +
        ' w=' + Math.round(b.width) + ' h=' + Math.round(b.height) +
        ' shapes=' + s.querySelectorAll('rect,polyline,circle,path,line,polygon').length +
        ' texts=' + s.querySelectorAll('text').length);
    }
  } catch (e) { out.push('error ' + e); }
  document.getElementById('out').textContent = out.join('\n');
});
</script></body></html>
"#;

#[test]
fn every_chart_renders_in_headless_chromium() {
    if std::env::var("NUMALAB_BROWSER_TESTS").ok().as_deref() != Some("1") {
        use std::io::Write;
        let _ = writeln!(
            std::io::stderr(),
            "SKIPPED every_chart_renders_in_headless_chromium: set NUMALAB_BROWSER_TESTS=1 to open the report in headless Chromium (Debian package chromium)"
        );
        return;
    }
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("report-browser");
    std::fs::create_dir_all(&dir).unwrap();
    let html = dir.join("report.html");
    Cli::cargo_bin("numalab")
        .unwrap()
        .arg("report")
        // Every kind of chart: tiering.json adds the pages over time and the roofline with
        // application points (its key beside the plot), profile-imc.json the controller shares.
        .args([
            fixture("compare.json"),
            fixture("tiering.json"),
            fixture("roofline.json"),
            fixture("mva.json"),
            fixture("profile.json"),
            fixture("profile-imc.json"),
        ])
        .arg("-o")
        .arg(&html)
        .assert()
        .success();
    let report = std::fs::read_to_string(&html).unwrap();
    let charts = report.matches("<svg").count();
    assert!(charts >= 26, "{charts} charts");
    for id in ["pages-over-time-knl-7250-flat", "tier-pages-over-time-knl-7250-flat", "app-roofline-knl-7250-flat", "input6-imc-share"] {
        assert!(report.contains(&format!("id=\"{id}\"")), "no {id} chart");
    }
    std::fs::write(dir.join("check.html"), HARNESS).unwrap();

    // 1. Rendering, seen from inside the page.
    let check = format!("file://{}", dir.join("check.html").display());
    let out = chromium(&["--allow-file-access-from-files", "--virtual-time-budget=15000", "--dump-dom", &check]);
    let dom = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "chromium --dump-dom failed: {}", String::from_utf8_lossy(&out.stderr));
    let start = dom.find("<pre id=\"out\">").expect("the harness page") + "<pre id=\"out\">".len();
    let lines: Vec<&str> = dom[start..].split("</pre>").next().unwrap().lines().collect();
    assert_eq!(lines.first().copied(), Some(format!("svgs {charts}").as_str()), "{lines:?}");
    assert_eq!(lines.len(), charts + 1, "{lines:?}");
    for l in &lines[1..] {
        let field = |k: &str| -> u64 { l.split(' ').find_map(|w| w.strip_prefix(k)).and_then(|v| v.parse().ok()).unwrap_or(0) };
        assert!(l.contains("ns=true"), "an SVG outside the SVG namespace: {l}");
        assert!(field("w=") > 100 && field("h=") > 100, "an empty chart: {l}");
        assert!(field("shapes=") > 5 && field("texts=") > 2, "a chart without shapes or labels: {l}");
    }

    // 2. The report alone: no console message, and a screenshot for people.
    let shot = dir.join("report.png");
    let _ = std::fs::remove_file(&shot);
    let page = format!("file://{}", html.display());
    let out =
        chromium(&["--enable-logging=stderr", "--v=0", "--window-size=1400,3000", &format!("--screenshot={}", shot.display()), &page]);
    let log = String::from_utf8_lossy(&out.stderr);
    let console: Vec<&str> = log.lines().filter(|l| l.contains("CONSOLE")).collect();
    assert!(console.is_empty(), "console messages: {console:?}");
    let png = std::fs::metadata(&shot).unwrap_or_else(|e| panic!("no screenshot {}: {e}\n{log}", shot.display()));
    assert!(png.len() > 10_000, "a {}-byte screenshot is blank", png.len());
    eprintln!("screenshot: {}", shot.display());
}
