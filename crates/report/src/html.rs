//! One self-contained HTML file: inline SVG charts, the numbers behind each, and the inputs'
//! provenance. No scripts, no external fonts, styles or images, no timestamps: the same inputs
//! give the same bytes, and the file works offline.

use crate::charts::Chart;
use crate::input::Input;

const STYLE: &str = "body{font-family:sans-serif;margin:1.5em auto;max-width:1400px;color:#222;padding:0 1em}\
h1{font-size:1.5em}h2{font-size:1.2em;margin-top:2em;border-bottom:1px solid #ccc}\
p.caption{max-width:60em}code,pre{font-family:monospace;font-size:0.9em}\
pre{background:#f6f6f6;padding:0.5em;overflow-x:auto;max-height:30em}\
table{border-collapse:collapse;font-size:0.85em;margin:0.5em 0}\
td,th{border:1px solid #ccc;padding:2px 6px}td.n{text-align:right;font-variant-numeric:tabular-nums}\
figure{margin:0.5em 0;overflow-x:auto}details{margin:0.5em 0}";

pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// An SVG for embedding in HTML: the HTML parser puts `<svg>` in the SVG namespace by itself,
/// so the `xmlns` attribute (a namespace name that looks like a link) is dropped.
pub fn inline_svg(svg: &str, label: &str) -> String {
    svg.replacen(" xmlns=\"http://www.w3.org/2000/svg\"", "", 1).replacen(
        "<svg ",
        &format!("<svg role=\"img\" aria-label=\"{}\" ", escape(label)),
        1,
    )
}

fn is_number(cell: &str) -> bool {
    cell == "n/a" || cell.parse::<f64>().is_ok()
}

/// The report. `svgs[k]` is the drawing of `charts[k]`.
pub fn render(inputs: &[Input], charts: &[Chart], svgs: &[String]) -> String {
    let mut h = String::new();
    h.push_str("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n");
    h.push_str("<title>numalab report</title>\n");
    h.push_str(&format!("<style>{STYLE}</style>\n</head>\n<body>\n"));
    h.push_str(&format!(
        "<h1>numalab report</h1>\n<p>Made by numalab report {} from {} input file(s): ",
        env!("CARGO_PKG_VERSION"),
        inputs.len()
    ));
    h.push_str(
        &inputs
            .iter()
            .enumerate()
            .map(|(i, x)| format!("<a href=\"#input{}\">{}</a>", i + 1, escape(&x.path)))
            .collect::<Vec<_>>()
            .join(", "),
    );
    h.push_str(".</p>\n");
    if charts.is_empty() {
        h.push_str("<p>The inputs hold no data any chart is drawn from.</p>\n");
    } else {
        h.push_str("<nav><ol>\n");
        for c in charts {
            h.push_str(&format!("<li><a href=\"#{}\">{}</a></li>\n", c.id, escape(&c.title)));
        }
        h.push_str("</ol></nav>\n");
    }
    for (c, svg) in charts.iter().zip(svgs) {
        h.push_str(&format!("<section id=\"{}\">\n<h2>{}</h2>\n", c.id, escape(&c.title)));
        h.push_str(&format!("<p class=\"caption\">{}</p>\n", escape(&c.caption)));
        h.push_str("<p>Reproduce:</p>\n");
        for r in &c.reproduce {
            h.push_str(&format!("<pre>{}</pre>\n", escape(r)));
        }
        h.push_str(&format!("<figure>\n{}</figure>\n", inline_svg(svg, &c.title)));
        let t = c.table();
        h.push_str(&format!("<details><summary>The numbers ({} rows)</summary>\n<table>\n<tr>", t.rows.len()));
        for head in &t.headers {
            h.push_str(&format!("<th>{}</th>", escape(head)));
        }
        h.push_str("</tr>\n");
        for row in &t.rows {
            h.push_str("<tr>");
            for cell in row {
                let class = if is_number(cell) { " class=\"n\"" } else { "" };
                h.push_str(&format!("<td{class}>{}</td>", escape(cell)));
            }
            h.push_str("</tr>\n");
        }
        h.push_str("</table>\n</details>\n</section>\n");
    }
    h.push_str("<h2>Inputs</h2>\n");
    for (i, x) in inputs.iter().enumerate() {
        h.push_str(&format!("<section id=\"input{}\">\n<h3>{}</h3>\n<table>\n", i + 1, escape(&x.path)));
        let row = |k: &str, v: &str| format!("<tr><th>{}</th><td>{}</td></tr>\n", escape(k), escape(v));
        h.push_str(&row("schema", &x.schema));
        h.push_str(&row("numalab version", x.numalab_version.as_deref().unwrap_or("not recorded")));
        h.push_str(&row("seed", x.seed.as_deref().unwrap_or("not recorded")));
        h.push_str(&row("reproduce", &x.reproduce));
        h.push_str("</table>\n");
        for (label, json) in &x.provenance {
            h.push_str(&format!("<details><summary>{}</summary>\n<pre>{}</pre>\n</details>\n", escape(label), escape(json)));
        }
        h.push_str("</section>\n");
    }
    h.push_str("</body>\n</html>\n");
    h
}
