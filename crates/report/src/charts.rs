//! The data each chart is drawn from, extracted from the inputs as plain values. Golden tests
//! pin these (through `Chart::table`), not pixels; the drawing code only maps them to shapes.

use crate::error::{ReportError, Result};
use crate::input::{Body, Cell, Input, Mva, Profile, Roofline};
use std::collections::BTreeSet;

/// One chart: one SVG in the report, made of one or more panels.
#[derive(Clone, Debug, PartialEq)]
pub struct Chart {
    /// File stem for `--svg DIR` and the HTML anchor: lower case, digits and '-'.
    pub id: String,
    pub title: String,
    /// What the chart shows and from which fields.
    pub caption: String,
    /// The commands that reproduce the inputs it is drawn from.
    pub reproduce: Vec<String>,
    pub y_label: String,
    pub kind: Kind,
}

#[derive(Clone, Debug, PartialEq)]
pub enum Kind {
    Boxes(Vec<BoxPanel>),
    Bars { panels: Vec<BarPanel>, stacked: bool },
    Lines { panels: Vec<LinePanel>, x_label: String, log_x: bool, log_y: bool },
    Heatmap(Vec<HeatPanel>),
}

#[derive(Clone, Debug, PartialEq)]
pub struct BoxPanel {
    pub title: String,
    pub boxes: Vec<BoxStat>,
}

/// A box over runs, every value divided by the panel's first policy's mean time.
#[derive(Clone, Debug, PartialEq)]
pub struct BoxStat {
    pub label: String,
    pub runs: usize,
    pub min: f64,
    pub q1: f64,
    pub median: f64,
    pub q3: f64,
    pub max: f64,
    pub mean: f64,
    /// The mean execution time itself, seconds (not normalised).
    pub mean_s: f64,
}

#[derive(Clone, Debug, PartialEq)]
pub struct BarPanel {
    pub title: String,
    /// Groups along x.
    pub categories: Vec<String>,
    /// Bars within a group (or segments of a stack).
    pub series: Vec<String>,
    /// `values[category][series]`; `None` where the value is undefined (drawn as no bar).
    pub values: Vec<Vec<Option<f64>>>,
    /// A horizontal reference line and its name (the uniform share).
    pub reference: Option<(String, f64)>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct LinePanel {
    pub title: String,
    pub series: Vec<Series>,
}

#[derive(Clone, Debug, Default, PartialEq)]
pub struct Series {
    pub name: String,
    pub points: Vec<(f64, f64)>,
    /// Points only, no line between them.
    pub markers: bool,
    /// The time of each point, for a trajectory whose x is not time (the roofline's
    /// application points); empty otherwise. The table gets a `t_s` column when a series has them.
    pub times: Vec<f64>,
    /// A reference line (a roofline ceiling): drawn thin and grey-black, without point marks.
    pub reference: bool,
}

#[derive(Clone, Debug, PartialEq)]
pub struct HeatPanel {
    pub title: String,
    pub rows: Vec<String>,
    pub cols: Vec<String>,
    pub values: Vec<Vec<f64>>,
}

/// The numbers behind a chart, as text cells: the report's data tables and the golden files.
#[derive(Clone, Debug, PartialEq)]
pub struct Table {
    pub headers: Vec<String>,
    pub rows: Vec<Vec<String>>,
}

impl Table {
    /// Tab-separated text, one row a line (golden files).
    pub fn to_tsv(&self) -> String {
        let mut s = self.headers.join("\t");
        s.push('\n');
        for r in &self.rows {
            s.push_str(&r.join("\t"));
            s.push('\n');
        }
        s
    }
}

/// A number for tables: six decimals, or six significant digits in scientific notation where
/// decimals would hide it (tiny rates, huge counts). Deterministic: the same f64, the same text.
pub fn fmt_num(x: f64) -> String {
    let a = x.abs();
    if x == 0.0 {
        "0".into()
    } else if !(1e-3..1e7).contains(&a) {
        format!("{x:.5e}")
    } else {
        format!("{x:.6}")
    }
}

/// A short number for labels and names (axis ticks, "100 GB/s"): at most three decimals.
pub fn short(v: f64) -> String {
    let a = v.abs();
    if v == 0.0 {
        "0".into()
    } else if !(1e-3..1e5).contains(&a) {
        format!("{v:.1e}")
    } else if a >= 100.0 {
        format!("{v:.0}")
    } else {
        let s = format!("{v:.3}");
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    }
}

fn fmt_opt(x: Option<f64>) -> String {
    x.map_or_else(|| "n/a".into(), fmt_num)
}

impl Chart {
    pub fn table(&self) -> Table {
        let s = |v: &str| v.to_string();
        match &self.kind {
            Kind::Boxes(panels) => Table {
                headers: ["panel", "policy", "runs", "min", "q1", "median", "q3", "max", "mean", "mean_s"].map(s).to_vec(),
                rows: panels
                    .iter()
                    .flat_map(|p| {
                        p.boxes.iter().map(|b| {
                            vec![
                                p.title.clone(),
                                b.label.clone(),
                                b.runs.to_string(),
                                fmt_num(b.min),
                                fmt_num(b.q1),
                                fmt_num(b.median),
                                fmt_num(b.q3),
                                fmt_num(b.max),
                                fmt_num(b.mean),
                                fmt_num(b.mean_s),
                            ]
                        })
                    })
                    .collect(),
            },
            Kind::Bars { panels, .. } => {
                let reference = panels.iter().any(|p| p.reference.is_some());
                let mut headers = ["panel", "x", "series", "value"].map(s).to_vec();
                if reference {
                    headers.push("reference".into());
                }
                let mut rows = Vec::new();
                for p in panels {
                    for (c, cat) in p.categories.iter().enumerate() {
                        for (k, ser) in p.series.iter().enumerate() {
                            let mut row = vec![p.title.clone(), cat.clone(), ser.clone(), fmt_opt(p.values[c][k])];
                            if reference {
                                row.push(p.reference.as_ref().map_or_else(|| "n/a".into(), |r| fmt_num(r.1)));
                            }
                            rows.push(row);
                        }
                    }
                }
                Table { headers, rows }
            }
            Kind::Lines { panels, x_label, .. } => {
                // Trajectories (x is not time) carry their times in a column of their own.
                let timed = panels.iter().flat_map(|p| &p.series).any(|s| !s.times.is_empty());
                let mut headers = vec!["panel".to_string(), "series".to_string()];
                if timed {
                    headers.push("t_s".into());
                }
                headers.extend([x_label.clone(), self.y_label.clone()]);
                let mut rows = Vec::new();
                for p in panels {
                    for ser in &p.series {
                        for (k, (x, y)) in ser.points.iter().enumerate() {
                            let mut row = vec![p.title.clone(), ser.name.clone()];
                            if timed {
                                row.push(ser.times.get(k).map_or_else(|| "n/a".into(), |t| fmt_num(*t)));
                            }
                            row.extend([fmt_num(*x), fmt_num(*y)]);
                            rows.push(row);
                        }
                    }
                }
                Table { headers, rows }
            }
            Kind::Heatmap(panels) => Table {
                headers: ["panel", "row", "column", "value"].map(s).to_vec(),
                rows: panels
                    .iter()
                    .flat_map(|p| {
                        p.rows.iter().enumerate().flat_map(move |(i, r)| {
                            p.cols
                                .iter()
                                .enumerate()
                                .map(move |(j, c)| vec![p.title.clone(), r.clone(), c.clone(), fmt_num(p.values[i][j])])
                        })
                    })
                    .collect(),
            },
        }
    }
}

/// Quantile by linear interpolation between order statistics (R's type 7), as numalab's own
/// summaries (docs/metrics.md) compute q1 and q3. `sorted` is non-empty and ascending.
pub fn quantile(sorted: &[f64], p: f64) -> f64 {
    let h = (sorted.len() - 1) as f64 * p;
    let lo = h.floor() as usize;
    let hi = (lo + 1).min(sorted.len() - 1);
    sorted[lo] + (h - lo as f64) * (sorted[hi] - sorted[lo])
}

fn mean(xs: &[f64]) -> Option<f64> {
    if xs.is_empty() {
        None
    } else {
        Some(xs.iter().sum::<f64>() / xs.len() as f64)
    }
}

/// Mean over the runs where a field is defined (docs/metrics.md, "Across runs").
fn mean_defined(xs: impl Iterator<Item = Option<f64>>) -> Option<f64> {
    mean(&xs.flatten().collect::<Vec<_>>())
}

/// Every chart the inputs have data for, in a fixed order: simulated results per machine,
/// then profiles, MVA sweeps and rooflines in input order.
pub fn charts(inputs: &[Input]) -> Result<Vec<Chart>> {
    let mut out = Vec::new();
    // Cells of every simulated input, with the index of the input they came from.
    let mut cells: Vec<(usize, &Cell)> = Vec::new();
    for (i, input) in inputs.iter().enumerate() {
        if let Body::Cells(cs) = &input.body {
            cells.extend(cs.iter().map(|c| (i, c)));
        }
    }
    check_cells(inputs, &cells)?;
    let mut machines: Vec<&str> = Vec::new();
    for (_, c) in &cells {
        if !machines.contains(&c.machine.as_str()) {
            machines.push(&c.machine);
        }
    }
    for m in machines {
        let of_machine: Vec<(usize, &Cell)> = cells.iter().copied().filter(|(_, c)| c.machine == m).collect();
        out.extend(machine_charts(inputs, m, &of_machine));
    }
    for (i, input) in inputs.iter().enumerate() {
        let stem = format!("input{}", i + 1);
        match &input.body {
            Body::Cells(_) => {}
            Body::Profile(p) => out.extend(profile_charts(input, p, &stem)),
            Body::Mva(m) => out.extend(mva_chart(input, m, &stem)),
            Body::Roofline(r) => out.push(roofline_chart(input, r, &stem)),
        }
    }
    // Ids name files and anchors: two machine names with the same slug ("a_b", "a-b") must
    // not share one.
    let mut seen: BTreeSet<String> = BTreeSet::new();
    for c in &mut out {
        let mut id = c.id.clone();
        let mut k = 2;
        while seen.contains(&id) {
            id = format!("{}-{k}", c.id);
            k += 1;
        }
        seen.insert(id.clone());
        c.id = id;
    }
    Ok(out)
}

/// Refuse inputs one chart cannot show honestly: one machine name for two different
/// machines, and the same cell twice.
fn check_cells(inputs: &[Input], cells: &[(usize, &Cell)]) -> Result<()> {
    let name = |i: usize, c: &Cell| {
        if c.at == "(document)" {
            inputs[i].path.clone()
        } else {
            format!("{} ({})", inputs[i].path, c.at)
        }
    };
    for (k, (i, a)) in cells.iter().enumerate() {
        for (j, b) in &cells[..k] {
            if a.machine != b.machine {
                continue;
            }
            if let (Some(x), Some(y)) = (&a.machine_config, &b.machine_config) {
                if x != y {
                    return Err(ReportError::MixedMachines { machine: a.machine.clone(), first: name(*j, b), second: name(*i, a) });
                }
            }
            if a.workload == b.workload && a.grid == b.grid && a.policy == b.policy {
                let grid = if a.grid.is_empty() { String::new() } else { format!(" ({})", a.grid) };
                return Err(ReportError::Duplicate {
                    cell: format!("{} on {} / {}{grid}", a.policy, a.workload, a.machine),
                    first: name(*j, b),
                    second: name(*i, a),
                });
            }
        }
    }
    Ok(())
}

/// A panel: one workload (and grid point) on one machine, its policies in order of appearance.
struct Panel<'a> {
    title: String,
    cells: Vec<&'a Cell>,
}

fn panels<'a>(cells: &[(usize, &'a Cell)]) -> Vec<Panel<'a>> {
    let mut out: Vec<(String, String, Panel)> = Vec::new();
    for (_, c) in cells {
        match out.iter_mut().find(|(w, g, _)| *w == c.workload && *g == c.grid) {
            Some((_, _, p)) => p.cells.push(c),
            None => {
                let title = if c.grid.is_empty() { c.workload.clone() } else { format!("{} ({})", c.workload, c.grid) };
                out.push((c.workload.clone(), c.grid.clone(), Panel { title, cells: vec![c] }));
            }
        }
    }
    out.into_iter().map(|(_, _, p)| p).collect()
}

fn slug(s: &str) -> String {
    let mut out = String::new();
    for ch in s.chars() {
        if ch.is_ascii_alphanumeric() {
            out.push(ch.to_ascii_lowercase());
        } else if !out.ends_with('-') {
            out.push('-');
        }
    }
    out.trim_matches('-').to_string()
}

fn machine_charts(inputs: &[Input], machine: &str, cells: &[(usize, &Cell)]) -> Vec<Chart> {
    let mut used: BTreeSet<usize> = BTreeSet::new();
    used.extend(cells.iter().map(|(i, _)| *i));
    let reproduce: Vec<String> = used.iter().map(|&i| inputs[i].reproduce.clone()).collect();
    let panels = panels(cells);
    let m = slug(machine);
    let chart = |id: &str, title: &str, caption: String, y_label: &str, kind: Kind| Chart {
        id: format!("{id}-{m}"),
        title: format!("{title} — {machine}"),
        caption,
        reproduce: reproduce.clone(),
        y_label: y_label.into(),
        kind,
    };
    let mut out = Vec::new();

    // Execution time: the distribution over runs, normalised to the panel's first policy.
    let boxes: Vec<BoxPanel> = panels
        .iter()
        .map(|p| {
            let base = mean(&p.cells[0].runs.iter().map(|r| r.exec_time_s).collect::<Vec<_>>()).unwrap_or(1.0);
            let base = if base > 0.0 { base } else { 1.0 };
            BoxPanel {
                title: format!("{} (1 = {} {})", p.title, p.cells[0].policy, fmt_seconds(base)),
                boxes: p
                    .cells
                    .iter()
                    .map(|c| {
                        let mut t: Vec<f64> = c.runs.iter().map(|r| r.exec_time_s / base).collect();
                        t.sort_by(f64::total_cmp);
                        let mean_n = t.iter().sum::<f64>() / t.len() as f64;
                        BoxStat {
                            label: c.policy.clone(),
                            runs: t.len(),
                            min: t[0],
                            q1: quantile(&t, 0.25),
                            median: quantile(&t, 0.5),
                            q3: quantile(&t, 0.75),
                            max: t[t.len() - 1],
                            mean: mean_n,
                            mean_s: mean_n * base,
                        }
                    })
                    .collect(),
            }
        })
        .collect();
    out.push(chart(
        "exec-time",
        "Execution time per policy",
        "Box per policy over the runs: whiskers at min and max, box from q1 to q3 (R type 7), line at the median, dot at the \
mean; every run's exec_time_s divided by the mean of the panel's first policy, so that policy's mean is 1. \
Fields: runs[].exec_time_s."
            .into(),
        "time / first policy's mean",
        Kind::Boxes(boxes),
    ));

    // Run-to-run instability: needs two runs for a standard deviation.
    if cells.iter().any(|(_, c)| c.runs.len() >= 2) {
        let bar_panels = panels
            .iter()
            .map(|p| BarPanel {
                title: p.title.clone(),
                categories: p.cells.iter().map(|c| c.policy.clone()).collect(),
                series: vec!["CV %".into(), "NMMD %".into()],
                values: p
                    .cells
                    .iter()
                    .map(|c| {
                        let t: Vec<f64> = c.runs.iter().map(|r| r.exec_time_s).collect();
                        let (cv, nmmd) = cv_nmmd(&t);
                        vec![cv.map(|x| 100.0 * x), nmmd.map(|x| 100.0 * x)]
                    })
                    .collect(),
                reference: None,
            })
            .collect();
        out.push(chart(
            "cv-nmmd",
            "Run-to-run variation",
            "CV = sample standard deviation / mean of runs[].exec_time_s; NMMD = (max − min) / mean (docs/metrics.md). \
No CV bar for a single run."
                .into(),
            "%",
            Kind::Bars { panels: bar_panels, stacked: false },
        ));
    }

    let per_policy = |f: &dyn Fn(&Cell) -> Option<f64>, series: &str| -> Option<Vec<BarPanel>> {
        let ps: Vec<BarPanel> = panels
            .iter()
            .map(|p| BarPanel {
                title: p.title.clone(),
                categories: p.cells.iter().map(|c| c.policy.clone()).collect(),
                series: vec![series.into()],
                values: p.cells.iter().map(|c| vec![f(c)]).collect(),
                reference: None,
            })
            .collect();
        ps.iter().any(|p| p.values.iter().flatten().any(Option::is_some)).then_some(ps)
    };

    if let Some(ps) = per_policy(&|c| mean_defined(c.runs.iter().map(|r| r.local_access_ratio)), "local access ratio") {
        out.push(chart(
            "local-ratio",
            "Local access ratio",
            "Mean over runs of runs[].local_access_ratio: accesses served by the accessing CPU's own node / all accesses.".into(),
            "local / all accesses",
            Kind::Bars { panels: ps, stacked: false },
        ));
    }

    // Hint faults and page migrations share a unit (per simulated second).
    let fault_panels: Vec<BarPanel> = panels
        .iter()
        .map(|p| BarPanel {
            title: p.title.clone(),
            categories: p.cells.iter().map(|c| c.policy.clone()).collect(),
            series: vec!["hint faults/s".into(), "page migrations/s".into()],
            values: p
                .cells
                .iter()
                .map(|c| {
                    vec![
                        mean_defined(c.runs.iter().map(|r| r.hint_faults_per_s)),
                        mean_defined(c.runs.iter().map(|r| r.page_migrations_per_s)),
                    ]
                })
                .collect(),
            reference: None,
        })
        .collect();
    if fault_panels.iter().any(|p| p.values.iter().flatten().any(Option::is_some)) {
        out.push(chart(
            "faults-migrations",
            "Hint faults and page migrations per second",
            "Means over runs of runs[].hint_faults_per_s and runs[].page_migrations_per_s (per simulated second).".into(),
            "per simulated second",
            Kind::Bars { panels: fault_panels, stacked: false },
        ));
    }

    if let Some(ps) = thread_migration_panels(&panels) {
        out.push(chart(
            "thread-migrations",
            "Cross-node thread migrations per second, by cause",
            "Stacked by cause: mean over runs of runs[].thread_migrations_by_cause[cause].cross_node / runs[].sim_time_s; \
the stack's height is thread_migrations_per_s. Migrations within a node are not drawn."
                .into(),
            "cross-node migrations per simulated second",
            Kind::Bars { panels: ps, stacked: true },
        ));
    }

    if let Some(ps) = node_share_panels(&panels) {
        out.push(chart(
            "node-share",
            "Share of accesses served per node",
            "Mean over runs of runs[].node_accesses[node] / Σ node_accesses; the line is the uniform share, \
1 / (nodes with memory in config.machine.nodes)."
                .into(),
            "share of accesses",
            Kind::Bars { panels: ps, stacked: false },
        ));
    }

    let heat: Vec<HeatPanel> = panels
        .iter()
        .flat_map(|p| p.cells.iter().map(move |c| (p, c)))
        .filter_map(|(p, c)| access_matrix(c).map(|values| (p, c, values)))
        .map(|(p, c, values)| HeatPanel {
            title: format!("{} / {}", p.title, c.policy),
            rows: (0..values.len()).map(|i| format!("cpu node {i}")).collect(),
            cols: (0..values.first().map_or(0, Vec::len)).map(|j| format!("mem node {j}")).collect(),
            values,
        })
        .collect();
    if !heat.is_empty() {
        out.push(chart(
            "access-matrix",
            "Node-to-node accesses",
            "Row i, column j: accesses from CPUs of node i served by memory of node j, as a share of all accesses; mean \
over runs of runs[].access_matrix[i][j] / Σ access_matrix."
                .into(),
            "share of all accesses",
            Kind::Heatmap(heat),
        ));
    }

    // Over simulated time: the first run of every cell.
    let line = |f: &dyn Fn(&crate::input::TimePoint) -> Option<f64>| timeline_panels(&panels, f);
    if let Some(ps) = line(&|p| p.local_access_ratio) {
        out.push(chart(
            "local-over-time",
            "Local access ratio over time",
            "Share of each interval's memory accesses served by the accessing CPU's own node, run 0 of every policy, \
from runs[0].timeline[].local_access_ratio (the simulator closes an interval every sim.metrics_interval_ms); x is \
the interval's end."
                .into(),
            "local share",
            Kind::Lines { panels: ps, x_label: "simulated time, s".into(), log_x: false, log_y: false },
        ));
    }
    let moves = |p: &crate::input::TimePoint| (p.interval_s > 0.0).then(|| (p.page_migrations + p.replications) / p.interval_s);
    if let Some(ps) = line(&moves).filter(|ps| ps.iter().flat_map(|p| &p.series).any(|s| s.points.iter().any(|q| q.1 > 0.0))) {
        out.push(chart(
            "moves-over-time",
            "Page moves over time",
            "Page migrations plus replicas made per second of each interval, run 0 of every policy, from \
runs[0].timeline[]: (page_migrations + replications) / interval_s."
                .into(),
            "pages per s",
            Kind::Lines { panels: ps, x_label: "simulated time, s".into(), log_x: false, log_y: false },
        ));
    }

    if let Some(ps) = pages_panels(&panels, false) {
        out.push(chart(
            "pages-over-time",
            "Resident pages per node over time",
            "Pages resident on each node with memory (homes and replicas) at the end of each interval, run 0 of every \
policy, one panel per workload and policy, from runs[0].timeline[].pages_per_node; the node's tier from \
config.machine.nodes[].tier."
                .into(),
            "pages",
            Kind::Lines { panels: ps, x_label: "simulated time, s".into(), log_x: false, log_y: false },
        ));
    }
    if let Some(ps) = pages_panels(&panels, true) {
        out.push(chart(
            "tier-pages-over-time",
            "Resident pages per memory tier over time",
            "Per tier, the sum over its nodes (config.machine.nodes[].tier) of runs[0].timeline[].pages_per_node at the \
end of each interval, run 0 of every policy, one panel per workload and policy. Drawn for machines with two tiers \
or more."
                .into(),
            "pages",
            Kind::Lines { panels: ps, x_label: "simulated time, s".into(), log_x: false, log_y: false },
        ));
    }
    if let Some(ps) = app_roofline_panels(&panels) {
        out.push(chart(
            "app-roofline",
            "Roofline with application points over time",
            "Ceilings min(peak_gflops_dp, tier bandwidth × I) per tier of config.machine (peak bandwidths, as numalab model \
roofline computes them); per application of run 0, one point per interval at (timeline[].apps[].ai_flop_per_byte, \
timeline[].apps[].gflops), joined in time order. Intervals without references or flops are not drawn (no point on a \
log axis). One panel per workload and policy."
                .into(),
            "GFLOP/s",
            Kind::Lines { panels: ps, x_label: "arithmetic intensity, flop/byte".into(), log_x: true, log_y: true },
        ));
    }

    if let Some(ps) = pingpong_panels(&panels) {
        out.push(chart(
            "pingpong-cdf",
            "Ping-pong round trips",
            "Cumulative share of ping-pong returns (a thread's cross-node migration back to the node it had left) whose \
round trip was shorter than x, from runs[].pingpong_intervals_s summed over runs; the histogram's edges are the \
only points known. Trips of 100 s or more are off the axis: a curve ending below 1 has them."
                .into(),
            "share of round trips",
            Kind::Lines { panels: ps, x_label: "round trip, s".into(), log_x: true, log_y: false },
        ));
    }
    out
}

fn fmt_seconds(s: f64) -> String {
    if s >= 1.0 {
        format!("{s:.3} s")
    } else if s >= 1e-3 {
        format!("{:.3} ms", s * 1e3)
    } else {
        format!("{:.3} us", s * 1e6)
    }
}

/// (CV, NMMD) of run times; CV needs two runs (the sample standard deviation divides by N−1).
pub fn cv_nmmd(t: &[f64]) -> (Option<f64>, Option<f64>) {
    let Some(m) = mean(t) else { return (None, None) };
    if m <= 0.0 {
        return (None, None);
    }
    let min = t.iter().copied().fold(f64::INFINITY, f64::min);
    let max = t.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let nmmd = Some((max - min) / m);
    if t.len() < 2 {
        return (None, nmmd);
    }
    let var = t.iter().map(|x| (x - m) * (x - m)).sum::<f64>() / (t.len() - 1) as f64;
    (Some(var.sqrt() / m), nmmd)
}

fn thread_migration_panels(panels: &[Panel]) -> Option<Vec<BarPanel>> {
    let mut any = false;
    let out = panels
        .iter()
        .map(|p| {
            // Causes in the order the runs list them (crate::input::CAUSES first).
            let mut causes: Vec<String> = Vec::new();
            for c in &p.cells {
                for r in &c.runs {
                    for (name, _, _) in r.thread_migrations_by_cause.iter().flatten() {
                        if !causes.contains(name) {
                            causes.push(name.clone());
                        }
                    }
                }
            }
            let values = p
                .cells
                .iter()
                .map(|c| {
                    causes
                        .iter()
                        .map(|cause| {
                            mean_defined(c.runs.iter().map(|r| {
                                let t = r.sim_time_s.unwrap_or(r.exec_time_s);
                                let (_, _, cross) = r.thread_migrations_by_cause.as_ref()?.iter().find(|(n, _, _)| n == cause)?;
                                (t > 0.0).then(|| cross / t)
                            }))
                        })
                        .collect::<Vec<_>>()
                })
                .collect::<Vec<_>>();
            any |= values.iter().flatten().any(Option::is_some);
            BarPanel {
                title: p.title.clone(),
                categories: p.cells.iter().map(|c| c.policy.clone()).collect(),
                series: causes,
                values,
                reference: None,
            }
        })
        .collect();
    any.then_some(out)
}

fn node_share_panels(panels: &[Panel]) -> Option<Vec<BarPanel>> {
    let mut any = false;
    let out = panels
        .iter()
        .map(|p| {
            let nodes =
                p.cells.iter().flat_map(|c| c.runs.iter()).filter_map(|r| r.node_accesses.as_ref().map(Vec::len)).max().unwrap_or(0);
            let mem_nodes = p.cells.iter().find_map(|c| c.mem_nodes.as_ref()).map(|m| m.iter().filter(|x| **x).count()).unwrap_or(nodes);
            let values = (0..nodes)
                .map(|j| {
                    p.cells
                        .iter()
                        .map(|c| {
                            mean_defined(c.runs.iter().map(|r| {
                                let a = r.node_accesses.as_ref()?;
                                let total: f64 = a.iter().sum();
                                (total > 0.0).then(|| a.get(j).copied().unwrap_or(0.0) / total)
                            }))
                        })
                        .collect::<Vec<_>>()
                })
                .collect::<Vec<_>>();
            any |= values.iter().flatten().any(Option::is_some);
            BarPanel {
                title: p.title.clone(),
                categories: (0..nodes).map(|j| format!("node {j}")).collect(),
                series: p.cells.iter().map(|c| c.policy.clone()).collect(),
                values,
                reference: (mem_nodes > 0).then(|| ("uniform".to_string(), 1.0 / mem_nodes as f64)),
            }
        })
        .collect();
    any.then_some(out)
}

/// Mean over runs of each run's matrix as a share of its total accesses.
fn access_matrix(c: &Cell) -> Option<Vec<Vec<f64>>> {
    let mut sum: Option<Vec<Vec<f64>>> = None;
    let mut n = 0usize;
    for r in &c.runs {
        let Some(m) = &r.access_matrix else { continue };
        let total: f64 = m.iter().flatten().sum();
        // Only a rectangular matrix with accesses has shares (a hand-edited file may be ragged).
        if !(total > 0.0 && total.is_finite()) || m.is_empty() || m.iter().any(|row| row.len() != m[0].len()) {
            continue;
        }
        let s = sum.get_or_insert_with(|| m.iter().map(|row| vec![0.0; row.len()]).collect());
        // A run whose matrix has another shape is from another machine; leave it out.
        if s.len() != m.len() || s.iter().zip(m).any(|(a, b)| a.len() != b.len()) {
            continue;
        }
        for (srow, row) in s.iter_mut().zip(m) {
            for (x, v) in srow.iter_mut().zip(row) {
                *x += v / total;
            }
        }
        n += 1;
    }
    let mut s = sum?;
    if n == 0 {
        return None;
    }
    for row in &mut s {
        for x in row.iter_mut() {
            *x /= n as f64;
        }
    }
    Some(s)
}

/// Line panels, one series per cell that `series_of` draws, panels without a series left
/// out; `None` when no panel has one.
fn line_panels(panels: &[Panel], series_of: impl Fn(&Cell) -> Option<Series>) -> Option<Vec<LinePanel>> {
    let out: Vec<LinePanel> = panels
        .iter()
        .map(|p| LinePanel { title: p.title.clone(), series: p.cells.iter().filter_map(|c| series_of(c)).collect() })
        .filter(|p| !p.series.is_empty())
        .collect();
    (!out.is_empty()).then_some(out)
}

/// One line per policy (its first run's timeline) per panel; `None` when no run has a
/// timeline of at least two points.
fn timeline_panels(panels: &[Panel], value: &dyn Fn(&crate::input::TimePoint) -> Option<f64>) -> Option<Vec<LinePanel>> {
    line_panels(panels, |c| {
        let tl = c.runs.first()?.timeline.as_ref().filter(|t| t.len() >= 2)?;
        let points: Vec<(f64, f64)> = tl.iter().filter_map(|q| Some((q.t_s, value(q)?))).collect();
        (!points.is_empty()).then(|| Series { name: c.policy.clone(), points, markers: false, ..Default::default() })
    })
}

/// The first run's timeline of a cell, when it has two points or more.
fn first_timeline(c: &Cell) -> Option<&Vec<crate::input::TimePoint>> {
    c.runs.first()?.timeline.as_ref().filter(|t| t.len() >= 2)
}

/// Resident pages over time, one panel per workload and policy: one line per node with
/// memory, or (`per_tier`) one per memory tier, the sum of its nodes; per tier only for
/// machines of two tiers or more.
fn pages_panels(panels: &[Panel], per_tier: bool) -> Option<Vec<LinePanel>> {
    let mut out = Vec::new();
    for p in panels {
        for c in &p.cells {
            let Some(tl) = first_timeline(c) else { continue };
            let pts: Vec<(f64, &Vec<f64>)> = tl.iter().filter_map(|q| Some((q.t_s, q.pages_per_node.as_ref()?))).collect();
            let nodes = pts.iter().map(|(_, v)| v.len()).max().unwrap_or(0);
            if pts.len() < 2 || nodes == 0 {
                continue;
            }
            let has_mem = |j: usize| c.mem_nodes.as_ref().is_none_or(|m| m.get(j).copied().unwrap_or(true));
            let tier_of = |j: usize| c.node_tiers.as_ref().and_then(|t| t.get(j).cloned());
            // (name, nodes summed), in node order.
            let mut groups: Vec<(String, Vec<usize>)> = Vec::new();
            if per_tier {
                for j in (0..nodes).filter(|&j| has_mem(j)) {
                    let Some(t) = tier_of(j) else { continue };
                    match groups.iter_mut().find(|(n, _)| *n == t) {
                        Some((_, js)) => js.push(j),
                        None => groups.push((t, vec![j])),
                    }
                }
                if groups.len() < 2 {
                    continue;
                }
            } else {
                groups = (0..nodes)
                    .filter(|&j| has_mem(j))
                    .map(|j| (tier_of(j).map_or_else(|| format!("node {j}"), |t| format!("node {j} ({t})")), vec![j]))
                    .collect();
            }
            let series = groups
                .into_iter()
                .map(|(name, js)| Series {
                    name,
                    points: pts.iter().map(|(t, v)| (*t, js.iter().map(|&j| v.get(j).copied().unwrap_or(0.0)).sum())).collect(),
                    ..Default::default()
                })
                .collect();
            out.push(LinePanel { title: format!("{} / {}", p.title, c.policy), series });
        }
    }
    (!out.is_empty()).then_some(out)
}

/// The machine's ceilings as reference lines from `lo` to `hi` (with the ridge point in
/// between), one per tier.
fn ceiling_series(peak_gflops: f64, tiers: &[(String, f64)], lo: f64, hi: f64, reference: bool) -> Vec<Series> {
    tiers
        .iter()
        .map(|(tier, bw)| {
            let att = |i: f64| peak_gflops.min(bw * i);
            let mut xs = vec![lo];
            if *bw > 0.0 {
                let ridge = peak_gflops / bw;
                if ridge > lo && ridge < hi {
                    xs.push(ridge);
                }
            }
            xs.push(hi);
            Series {
                name: format!("{tier} ceiling ({} GB/s)", short(*bw)),
                points: xs.iter().map(|&i| (i, att(i))).collect(),
                reference,
                ..Default::default()
            }
        })
        .collect()
}

/// The x range of a roofline: the intensities shown and the ridge points, a factor 4 beyond.
fn roofline_range(peak_gflops: f64, tiers: &[(String, f64)], ai: impl Iterator<Item = f64>) -> (f64, f64) {
    let ridges = tiers.iter().filter(|(_, bw)| *bw > 0.0).map(|(_, bw)| peak_gflops / bw);
    let all: Vec<f64> = ai.chain(ridges).filter(|x| *x > 0.0 && x.is_finite()).collect();
    let lo = all.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = all.iter().copied().fold(0.0, f64::max);
    if lo.is_finite() && hi > 0.0 {
        (lo / 4.0, hi * 4.0)
    } else {
        (0.01, 100.0)
    }
}

/// The roofline of the machine with each application's (intensity, GFLOP/s) per interval of
/// run 0, one panel per workload and policy whose runs have per-application points.
fn app_roofline_panels(panels: &[Panel]) -> Option<Vec<LinePanel>> {
    let mut out = Vec::new();
    for p in panels {
        for c in &p.cells {
            let (Some(roof), Some(tl)) = (&c.roofline, c.runs.first().and_then(|r| r.timeline.as_ref())) else { continue };
            let mut apps: Vec<Series> = Vec::new();
            for q in tl {
                for a in &q.apps {
                    let k = match apps.iter().position(|s| s.name == a.app) {
                        Some(k) => k,
                        None => {
                            apps.push(Series { name: a.app.clone(), ..Default::default() });
                            apps.len() - 1
                        }
                    };
                    if let Some(ai) = a.ai_flop_per_byte.filter(|ai| *ai > 0.0 && a.gflops > 0.0) {
                        apps[k].points.push((ai, a.gflops));
                        apps[k].times.push(q.t_s);
                    }
                }
            }
            apps.retain(|s| !s.points.is_empty());
            if apps.is_empty() {
                continue;
            }
            let (lo, hi) = roofline_range(roof.peak_gflops, &roof.tiers, apps.iter().flat_map(|s| s.points.iter().map(|q| q.0)));
            let mut series = ceiling_series(roof.peak_gflops, &roof.tiers, lo, hi, true);
            series.extend(apps);
            out.push(LinePanel { title: format!("{} / {}", p.title, c.policy), series });
        }
    }
    (!out.is_empty()).then_some(out)
}

fn pingpong_panels(panels: &[Panel]) -> Option<Vec<LinePanel>> {
    line_panels(panels, |c| {
        let mut edges: Option<&Vec<f64>> = None;
        let mut counts: Vec<f64> = Vec::new();
        for r in &c.runs {
            let Some((e, k)) = &r.pingpong_intervals_s else { continue };
            match edges {
                None => {
                    edges = Some(e);
                    counts = k.clone();
                }
                Some(e0) if e0 == e => counts.iter_mut().zip(k).for_each(|(a, b)| *a += b),
                // Histograms with other edges cannot be added; keep the first kind.
                Some(_) => {}
            }
        }
        let edges = edges?;
        let total: f64 = counts.iter().sum();
        if total <= 0.0 {
            return None;
        }
        let mut cum = 0.0;
        let points = edges
            .iter()
            .zip(&counts)
            .map(|(e, k)| {
                cum += k;
                (*e, cum / total)
            })
            .collect();
        Some(Series { name: c.policy.clone(), points, markers: false, ..Default::default() })
    })
}

fn profile_charts(input: &Input, p: &Profile, stem: &str) -> Vec<Chart> {
    if p.samples.is_empty() {
        return Vec::new();
    }
    let t_s = |s: &crate::input::ProfileSample| s.t_ms / 1e3;
    // Each sample's deltas cover the time since the previous sample.
    let dt_s: Vec<f64> = p
        .samples
        .iter()
        .enumerate()
        .map(|(k, s)| if k == 0 { p.interval_ms.map_or(s.t_ms, |i| i.min(s.t_ms)) } else { s.t_ms - p.samples[k - 1].t_ms } / 1e3)
        .collect();
    let mut names: Vec<&str> = Vec::new();
    for s in &p.samples {
        for (n, _) in &s.events {
            if !names.contains(&n.as_str()) {
                names.push(n);
            }
        }
    }
    names.sort_unstable();
    let rate_panels = |get: &dyn Fn(&crate::input::ProfileSample, &str) -> Option<f64>, names: &[&str]| -> Vec<LinePanel> {
        names
            .iter()
            .map(|n| LinePanel {
                title: n.to_string(),
                series: vec![Series {
                    name: n.to_string(),
                    points: p
                        .samples
                        .iter()
                        .zip(&dt_s)
                        .filter(|(_, dt)| **dt > 0.0)
                        .filter_map(|(s, dt)| get(s, n).map(|v| (t_s(s), v / dt)))
                        .collect(),
                    markers: false,
                    ..Default::default()
                }],
            })
            .collect()
    };
    let mut out = Vec::new();
    let label = format!("{} — {}", p.label, input.path);
    if !names.is_empty() {
        out.push(Chart {
            id: format!("{stem}-profile-events"),
            title: format!("Profile events per second — {label}"),
            caption: "Per sample: timeline[].events[name] (the delta since the previous sample) / the interval, one panel per event."
                .into(),
            reproduce: vec![input.reproduce.clone()],
            y_label: "per second".into(),
            kind: Kind::Lines {
                panels: rate_panels(&|s, n| s.events.iter().find(|(k, _)| k == n).map(|(_, v)| *v), &names),
                x_label: "time, s".into(),
                log_x: false,
                log_y: false,
            },
        });
    }
    let mut nodes: Vec<u64> = p.samples.iter().flat_map(|s| s.node_bytes.iter().flatten().map(|(n, _)| *n)).collect();
    nodes.sort_unstable();
    nodes.dedup();
    if !nodes.is_empty() {
        out.push(Chart {
            id: format!("{stem}-profile-pages"),
            title: format!("Resident memory per node — {label}"),
            caption: "timeline[].pages[].total_bytes per node, in MiB.".into(),
            reproduce: vec![input.reproduce.clone()],
            y_label: "MiB".into(),
            kind: Kind::Lines {
                panels: vec![LinePanel {
                    title: "resident memory".into(),
                    series: nodes
                        .iter()
                        .map(|n| Series {
                            name: format!("node {n}"),
                            points: p
                                .samples
                                .iter()
                                .filter_map(|s| {
                                    let b = s.node_bytes.as_ref()?.iter().find(|(k, _)| k == n)?.1;
                                    Some((t_s(s), b / (1u64 << 20) as f64))
                                })
                                .collect(),
                            markers: false,
                            ..Default::default()
                        })
                        .collect(),
                }],
                x_label: "time, s".into(),
                log_x: false,
                log_y: false,
            },
        });
    }
    if let Some(imc) = &p.imc {
        let total: f64 = imc.iter().map(|c| c.reads + c.writes).sum();
        if total > 0.0 {
            out.push(Chart {
                id: format!("{stem}-imc-share"),
                title: format!("Share of memory-controller accesses — {label}"),
                caption: "Per memory controller c: (events[imc.read[c]] + events[imc.write[c]]) / the sum over all controllers \
(CAS reads and writes, system-wide); the line is the uniform share 1 / controllers. `imcC nN`: controller C on node N, \
environment.imc[].node, the node of the CPU in the PMU's cpumask."
                    .into(),
                reproduce: vec!["numalab profile --events imc --format json --out FILE.json -- COMMAND".into()],
                y_label: "share of accesses".into(),
                kind: Kind::Bars {
                    panels: vec![BarPanel {
                        title: "memory controllers".into(),
                        categories: imc
                            .iter()
                            .map(|c| match c.node {
                                Some(n) => format!("imc{} n{n}", c.controller),
                                None => format!("imc{}", c.controller),
                            })
                            .collect(),
                        series: vec!["reads + writes".into()],
                        values: imc.iter().map(|c| vec![Some((c.reads + c.writes) / total)]).collect(),
                        reference: Some(("uniform".into(), 1.0 / imc.len() as f64)),
                    }],
                    stacked: false,
                },
            });
        }
    }
    // NUMA counters that moved at all (most stay 0 on an idle or 1-node system).
    let mut vm: Vec<&str> = Vec::new();
    for s in &p.samples {
        for (n, v) in &s.vmstat {
            if *v != 0.0 && !vm.contains(&n.as_str()) {
                vm.push(n);
            }
        }
    }
    vm.sort_unstable();
    if !vm.is_empty() {
        out.push(Chart {
            id: format!("{stem}-profile-vmstat"),
            title: format!("System NUMA counters per second — {label}"),
            caption:
                "timeline[].vmstat[counter] / the interval, for the counters that are not 0 in every sample (system-wide, all processes)."
                    .into(),
            reproduce: vec![input.reproduce.clone()],
            y_label: "per second".into(),
            kind: Kind::Lines {
                panels: rate_panels(&|s, n| s.vmstat.iter().find(|(k, _)| k == n).map(|(_, v)| *v), &vm),
                x_label: "time, s".into(),
                log_x: false,
                log_y: false,
            },
        });
    }
    out
}

/// MVA sweep: the response time per reference against the swept input. The x axis is the input
/// that changes between consecutive points of the same policy (the fastest sweep axis); the
/// other swept inputs, the policy and the network name the curves.
fn mva_chart(input: &Input, m: &Mva, stem: &str) -> Option<Chart> {
    let first = &m.points[0];
    let varying: Vec<&str> = first
        .inputs
        .iter()
        .map(|(k, _)| k.as_str())
        .filter(|k| {
            m.points.iter().any(|p| {
                p.inputs.iter().find(|(n, _)| n == k).map(|(_, v)| *v) != first.inputs.iter().find(|(n, _)| n == k).map(|(_, v)| *v)
            })
        })
        .collect();
    let value = |p: &crate::input::MvaPoint, k: &str| p.inputs.iter().find(|(n, _)| n == k).map(|(_, v)| *v);
    // Points of one policy and network, in document order: the fastest sweep axis changes
    // between most consecutive ones.
    let mut groups: Vec<Vec<&crate::input::MvaPoint>> = Vec::new();
    for p in &m.points {
        match groups.iter_mut().find(|g| g[0].policy == p.policy && g[0].network == p.network) {
            Some(g) => g.push(p),
            None => groups.push(vec![p]),
        }
    }
    let changes = |k: &str| groups.iter().flat_map(|g| g.windows(2)).filter(|w| value(w[0], k) != value(w[1], k)).count();
    let mut x: Option<(&str, usize)> = None;
    for k in &varying {
        let c = changes(k);
        if c > 0 && x.is_none_or(|(_, best)| c > best) {
            x = Some((k, c));
        }
    }
    let (x, _) = x?;
    let mut series: Vec<Series> = Vec::new();
    for p in &m.points {
        let others: Vec<String> =
            varying.iter().filter(|k| **k != x).map(|k| format!("{k}={}", value(p, k).map_or("n/a".into(), short))).collect();
        let mut name = format!("{} ({})", p.policy, p.network);
        if !others.is_empty() {
            name = format!("{name} {}", others.join(" "));
        }
        let Some(xv) = value(p, x) else { continue };
        match series.iter_mut().find(|s| s.name == name) {
            Some(s) => s.points.push((xv, p.r_us)),
            None => series.push(Series { name, points: vec![(xv, p.r_us)], markers: false, ..Default::default() }),
        }
    }
    for s in &mut series {
        s.points.sort_by(|a, b| a.0.total_cmp(&b.0));
    }
    Some(Chart {
        id: format!("{stem}-mva"),
        title: format!("MVA: time between references against {x} — {} ({})", m.machine, input.path),
        caption: format!("points[].r_us (mean time between references of one processor, us) against the swept input points[].{x}; one curve per policy, network and other swept input."),
        reproduce: vec![input.reproduce.clone()],
        y_label: "R, us".into(),
        kind: Kind::Lines { panels: vec![LinePanel { title: m.machine.clone(), series }], x_label: x.to_string(), log_x: false, log_y: false },
    })
}

/// Roofline: each tier's ceiling min(peak, bandwidth × I) on log axes, and the attainable
/// performance at the intensities the document was computed for.
fn roofline_chart(input: &Input, r: &Roofline, stem: &str) -> Chart {
    let (lo, hi) = roofline_range(r.peak_gflops, &r.tiers, r.ai.iter().copied());
    let mut series = ceiling_series(r.peak_gflops, &r.tiers, lo, hi, false);
    for (tier, bw) in &r.tiers {
        let pts: Vec<(f64, f64)> = r.ai.iter().filter(|i| **i > 0.0).map(|&i| (i, r.peak_gflops.min(bw * i))).collect();
        if !pts.is_empty() {
            series.push(Series { name: format!("{tier} at --ai"), points: pts, markers: true, ..Default::default() });
        }
    }
    Chart {
        id: format!("{stem}-roofline"),
        title: format!("Roofline — {} ({} bandwidth, {})", r.machine, r.bandwidth, input.path),
        caption: "Ceilings min(peak_gflops, tiers[].bw_gbps × I) per tier on log axes; markers: the attainable GFLOP/s at each \
points[].ai. Application points measured over time are not in this document and not drawn."
            .into(),
        reproduce: vec![input.reproduce.clone()],
        y_label: "GFLOP/s".into(),
        kind: Kind::Lines {
            panels: vec![LinePanel { title: format!("peak {} GFLOP/s", short(r.peak_gflops)), series }],
            x_label: "arithmetic intensity, flop/byte".into(),
            log_x: true,
            log_y: true,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_are_r_type_7() {
        let xs = [1.0, 2.0, 3.0, 4.0];
        assert_eq!(quantile(&xs, 0.25), 1.75);
        assert_eq!(quantile(&xs, 0.5), 2.5);
        assert_eq!(quantile(&xs, 0.75), 3.25);
        assert_eq!(quantile(&[5.0], 0.25), 5.0);
    }

    #[test]
    fn cv_needs_two_runs_and_nmmd_is_range_over_mean() {
        assert_eq!(cv_nmmd(&[2.0]), (None, Some(0.0)));
        let (cv, nmmd) = cv_nmmd(&[1.0, 3.0]);
        assert!((cv.unwrap() - 2f64.sqrt() / 2.0).abs() < 1e-15);
        assert_eq!(nmmd, Some(1.0));
    }

    #[test]
    fn numbers_format_the_same_way_every_time() {
        assert_eq!(fmt_num(0.0), "0");
        assert_eq!(fmt_num(1.5), "1.500000");
        assert_eq!(fmt_num(123456789.0), "1.23457e8");
        assert_eq!(fmt_num(0.0000123), "1.23000e-5");
    }

    #[test]
    fn short_numbers_for_labels() {
        assert_eq!(short(0.5), "0.5");
        assert_eq!(short(1.0), "1");
        assert_eq!(short(250.0), "250");
        assert_eq!(short(3046.4), "3046");
        assert_eq!(short(2.5e6), "2.5e6");
        assert_eq!(short(0.0), "0");
    }

    #[test]
    fn slugs_are_file_names() {
        assert_eq!(slug("Server A/4n (x=1)"), "server-a-4n-x-1");
    }
}
