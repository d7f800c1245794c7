//! Drawing charts as SVG with plotters. Everything drawn comes from `charts::Chart`; nothing
//! here computes a statistic. Panels are laid out in a grid of up to three columns.

use crate::charts::{short as tick, BarPanel, BoxPanel, Chart, HeatPanel, Kind, LinePanel};
use crate::error::{ReportError, Result};
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

const PANEL_W: u32 = 440;
const PANEL_H: u32 = 320;
const MAX_COLUMNS: usize = 3;
/// Line panels with more series than this get their key beside the plot.
const SIDE_LEGEND_AFTER: usize = 6;
const SIDE_LEGEND_W: u32 = 170;
const LEGEND_LINE: i32 = 15;
const FONT: &str = "sans-serif";

/// Tableau's 10 colours: distinguishable, and the same policy keeps its colour in every panel
/// of a chart because series are in the same order.
const PALETTE: [RGBColor; 10] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
    RGBColor(188, 189, 34),
    RGBColor(23, 190, 207),
];

fn color(k: usize) -> RGBColor {
    PALETTE[k % PALETTE.len()]
}

/// The label of category `x` if `x` is (close to) its index, else nothing.
fn category_label(categories: &[String], x: f64) -> String {
    let i = x.round();
    if (x - i).abs() < 1e-6 && i >= 0.0 && (i as usize) < categories.len() {
        categories[i as usize].clone()
    } else {
        String::new()
    }
}

/// Draw a chart; the SVG text (with its own `xmlns`, so it also stands alone as a file).
pub fn svg(chart: &Chart) -> Result<String> {
    let n = match &chart.kind {
        Kind::Boxes(p) => p.len(),
        Kind::Bars { panels, .. } => panels.len(),
        Kind::Lines { panels, .. } => panels.len(),
        Kind::Heatmap(p) => p.len(),
    }
    .max(1);
    let cols = n.min(MAX_COLUMNS);
    let rows = n.div_ceil(cols);
    // A legend of many lines (a roofline's applications) goes beside the plot, in a wider
    // and, if need be, taller panel.
    let entries = match &chart.kind {
        Kind::Lines { panels, .. } => panels.iter().map(|p| p.series.len()).max().unwrap_or(0),
        _ => 0,
    };
    let (panel_w, panel_h) = if entries > SIDE_LEGEND_AFTER {
        (PANEL_W + SIDE_LEGEND_W, PANEL_H.max(60 + LEGEND_LINE as u32 * entries as u32))
    } else {
        (PANEL_W, PANEL_H)
    };
    // Bar panels of many categories (a two-socket host's memory controllers) widen so that
    // their labels do not run into each other.
    let categories = match &chart.kind {
        Kind::Bars { panels, .. } => panels.iter().map(|p| p.categories.len()).max().unwrap_or(0),
        _ => 0,
    };
    let panel_w = panel_w.max(80 + 62 * categories as u32);
    let size = (cols as u32 * panel_w, rows as u32 * panel_h);
    let err = |e: &dyn std::fmt::Display| ReportError::Draw { chart: chart.id.clone(), message: e.to_string() };
    // Finite inputs can still add up to infinity (1e308 + 1e308): no axis spans that.
    if !chart.table().rows.iter().flatten().all(|c| c.parse::<f64>().map_or(true, f64::is_finite)) {
        return Err(err(&"a value is too large to draw"));
    }
    let mut buf = String::new();
    {
        let root = SVGBackend::with_string(&mut buf, size).into_drawing_area();
        root.fill(&WHITE).map_err(|e| err(&e))?;
        let areas = root.split_evenly((rows, cols));
        let drawn = match &chart.kind {
            Kind::Boxes(panels) => panels.iter().zip(&areas).try_for_each(|(p, a)| box_panel(a, p, &chart.y_label)),
            Kind::Bars { panels, stacked } => panels.iter().zip(&areas).try_for_each(|(p, a)| bar_panel(a, p, &chart.y_label, *stacked)),
            Kind::Lines { panels, x_label, log_x, log_y } => {
                panels.iter().zip(&areas).try_for_each(|(p, a)| line_panel(a, p, x_label, &chart.y_label, *log_x, *log_y))
            }
            Kind::Heatmap(panels) => panels.iter().zip(&areas).try_for_each(|(p, a)| heat_panel(a, p)),
        };
        drawn.map_err(|e| err(&e))?;
        root.present().map_err(|e| err(&e))?;
    }
    Ok(buf)
}

type DrawResult = std::result::Result<(), Box<dyn std::error::Error>>;

/// Axis bounds must be finite: values near f64::MAX overflow once padded.
fn finite(bounds: &[f64]) -> DrawResult {
    if bounds.iter().all(|b| b.is_finite()) {
        Ok(())
    } else {
        Err("a value is too large to draw".into())
    }
}

fn box_panel(area: &DrawingArea<SVGBackend, Shift>, p: &BoxPanel, y_label: &str) -> DrawResult {
    let n = p.boxes.len();
    let lo = p.boxes.iter().map(|b| b.min).fold(1.0, f64::min);
    let hi = p.boxes.iter().map(|b| b.max).fold(1.0, f64::max);
    let pad = ((hi - lo) * 0.1).max(0.01);
    finite(&[lo - pad, hi + pad])?;
    let labels: Vec<String> = p.boxes.iter().map(|b| b.label.clone()).collect();
    let mut ch = ChartBuilder::on(area)
        .caption(&p.title, (FONT, 14))
        .margin(8)
        .x_label_area_size(30)
        .y_label_area_size(60)
        .build_cartesian_2d(-0.5f64..(n as f64 - 0.5), (lo - pad)..(hi + pad))?;
    ch.configure_mesh()
        .disable_x_mesh()
        .x_labels(n + 1)
        .x_label_formatter(&|x| category_label(&labels, *x))
        .y_label_formatter(&|y| tick(*y))
        .y_desc(y_label)
        .draw()?;
    ch.draw_series(std::iter::once(PathElement::new(vec![(-0.5, 1.0), (n as f64 - 0.5, 1.0)], BLACK.mix(0.4))))?;
    for (i, b) in p.boxes.iter().enumerate() {
        let c = color(i);
        let x = i as f64;
        let line = |pts: Vec<(f64, f64)>, w: u32| PathElement::new(pts, c.stroke_width(w));
        ch.draw_series([
            line(vec![(x, b.min), (x, b.q1)], 1),
            line(vec![(x, b.q3), (x, b.max)], 1),
            line(vec![(x - 0.12, b.min), (x + 0.12, b.min)], 1),
            line(vec![(x - 0.12, b.max), (x + 0.12, b.max)], 1),
        ])?;
        ch.draw_series([
            Rectangle::new([(x - 0.25, b.q1), (x + 0.25, b.q3)], c.mix(0.25).filled()),
            Rectangle::new([(x - 0.25, b.q1), (x + 0.25, b.q3)], c.stroke_width(1)),
        ])?;
        ch.draw_series(std::iter::once(line(vec![(x - 0.25, b.median), (x + 0.25, b.median)], 2)))?;
        ch.draw_series(std::iter::once(Circle::new((x, b.mean), 3, c.filled())))?;
    }
    Ok(())
}

fn bar_panel(area: &DrawingArea<SVGBackend, Shift>, p: &BarPanel, y_label: &str, stacked: bool) -> DrawResult {
    let n = p.categories.len();
    let k = p.series.len().max(1);
    let top = p
        .values
        .iter()
        .map(|row| if stacked { row.iter().flatten().sum::<f64>() } else { row.iter().flatten().copied().fold(0.0, f64::max) })
        .fold(0.0, f64::max)
        .max(p.reference.as_ref().map_or(0.0, |r| r.1));
    // Headroom above the bars for the legend in the upper right, one line per entry.
    let entries = p
        .series
        .iter()
        .enumerate()
        .filter(|(s, _)| p.values.iter().any(|row| row.get(*s).copied().flatten().is_some_and(|v| v != 0.0)))
        .count()
        + usize::from(p.reference.is_some());
    let room = if entries > 1 || p.reference.is_some() { (0.06 * (entries + 1) as f64).min(0.6) } else { 0.0 };
    let top = if top > 0.0 { top * 1.1 / (1.0 - room) } else { 1.0 };
    finite(&[top])?;
    let mut ch = ChartBuilder::on(area)
        .caption(&p.title, (FONT, 14))
        .margin(8)
        .x_label_area_size(30)
        .y_label_area_size(60)
        .build_cartesian_2d(-0.5f64..(n.max(1) as f64 - 0.5), 0f64..top)?;
    ch.configure_mesh()
        .disable_x_mesh()
        .x_labels(n + 1)
        .x_label_formatter(&|x| category_label(&p.categories, *x))
        .y_label_formatter(&|y| tick(*y))
        .y_desc(y_label)
        .draw()?;
    let width = 0.8 / if stacked { 1.0 } else { k as f64 };
    let mut legend = false;
    for (s, name) in p.series.iter().enumerate() {
        let c = color(s);
        let bars: Vec<Rectangle<(f64, f64)>> = p
            .values
            .iter()
            .enumerate()
            .filter_map(|(i, row)| {
                let v = row.get(s).copied().flatten()?;
                let (x0, y0) = if stacked {
                    (i as f64 - 0.4, row[..s].iter().flatten().sum::<f64>())
                } else {
                    (i as f64 - 0.4 + s as f64 * width, 0.0)
                };
                Some(Rectangle::new([(x0, y0), (x0 + width, y0 + v)], c.filled()))
            })
            .collect();
        let any = p.values.iter().any(|row| row.get(s).copied().flatten().is_some_and(|v| v != 0.0));
        let drawn = ch.draw_series(bars)?;
        // A series that is 0 everywhere only crowds the legend; the table still lists it.
        if k > 1 && any {
            legend = true;
            drawn.label(name.as_str()).legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 10, y + 5)], c.filled()));
        }
    }
    if let Some((name, y)) = &p.reference {
        legend = true;
        ch.draw_series(std::iter::once(PathElement::new(vec![(-0.5, *y), (n as f64 - 0.5, *y)], BLACK.stroke_width(1))))?
            .label(format!("{name} ({})", tick(*y)))
            .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 12, y)], BLACK));
    }
    if legend {
        ch.configure_series_labels()
            .label_font((FONT, 11))
            .position(SeriesLabelPosition::UpperRight)
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK.mix(0.3))
            .draw()?;
    }
    Ok(())
}

fn line_panel(area: &DrawingArea<SVGBackend, Shift>, p: &LinePanel, x_label: &str, y_label: &str, log_x: bool, log_y: bool) -> DrawResult {
    // Log axes are drawn as linear axes of log10 values with 10^v labels: one code path.
    let tx = |v: f64| if log_x { v.log10() } else { v };
    let ty = |v: f64| if log_y { v.log10() } else { v };
    let ok = |(x, y): &(f64, f64)| (!log_x || *x > 0.0) && (!log_y || *y > 0.0);
    let pts: Vec<(f64, f64)> = p.series.iter().flat_map(|s| s.points.iter().filter(|q| ok(q)).map(|&(x, y)| (tx(x), ty(y)))).collect();
    let (mut x0, mut x1, mut y0, mut y1) =
        pts.iter().fold((f64::INFINITY, f64::NEG_INFINITY, f64::INFINITY, f64::NEG_INFINITY), |(a, b, c, d), (x, y)| {
            (a.min(*x), b.max(*x), c.min(*y), d.max(*y))
        });
    if !x0.is_finite() {
        (x0, x1, y0, y1) = (0.0, 1.0, 0.0, 1.0);
    }
    if x1 <= x0 {
        x1 = x0 + 1.0;
    }
    // Linear y axes start at 0 for counts and rates, so a small change does not look large.
    if !log_y {
        y0 = y0.min(0.0);
    }
    if y1 <= y0 {
        y1 = y0 + 1.0;
    }
    let ypad = (y1 - y0) * 0.08;
    finite(&[x0, x1, y0, y1 + ypad])?;
    let (plot, legend) = if p.series.len() > SIDE_LEGEND_AFTER {
        let (a, b) = area.split_horizontally(area.dim_in_pixel().0.saturating_sub(SIDE_LEGEND_W) as i32);
        (a, Some(b))
    } else {
        (area.clone(), None)
    };
    let mut ch = ChartBuilder::on(&plot)
        .caption(&p.title, (FONT, 14))
        .margin(8)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d(x0..x1, y0..(y1 + ypad))?;
    let fx = |v: &f64| if log_x { tick(10f64.powf(*v)) } else { tick(*v) };
    let fy = |v: &f64| if log_y { tick(10f64.powf(*v)) } else { tick(*v) };
    ch.configure_mesh().x_label_formatter(&fx).y_label_formatter(&fy).x_desc(x_label).y_desc(y_label).draw()?;
    // Reference lines (roofline ceilings) in greys; the other series keep the palette in order.
    let mut refs = 0usize;
    let mut keys: Vec<(RGBColor, bool)> = Vec::new();
    for (k, s) in p.series.iter().enumerate() {
        let pts: Vec<(f64, f64)> = s.points.iter().filter(|q| ok(q)).map(|&(x, y)| (tx(x), ty(y))).collect();
        if s.reference {
            let grey = (refs as u8 % 3) * 60;
            let c = RGBColor(grey, grey, grey);
            refs += 1;
            keys.push((c, true));
            let drawn = ch.draw_series(std::iter::once(PathElement::new(pts, c.stroke_width(1))))?;
            if p.series.len() > 1 && legend.is_none() {
                drawn.label(s.name.as_str()).legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 12, y)], c.stroke_width(1)));
            }
            continue;
        }
        let c = color(k - refs);
        keys.push((c, false));
        let drawn = if s.markers {
            ch.draw_series(pts.iter().map(|&q| Circle::new(q, 4, c.filled())))?
        } else {
            ch.draw_series(std::iter::once(PathElement::new(pts.clone(), c.stroke_width(2))))?;
            ch.draw_series(pts.iter().map(|&q| Circle::new(q, 2, c.filled())))?
        };
        if p.series.len() > 1 && legend.is_none() {
            drawn.label(s.name.as_str()).legend(move |(x, y)| Rectangle::new([(x, y - 4), (x + 10, y + 4)], c.filled()));
        }
    }
    if let Some(side) = legend {
        // Many series: the key beside the plot, where it hides nothing.
        let style = TextStyle::from((FONT, 11).into_font()).pos(Pos::new(HPos::Left, VPos::Center));
        for (k, (s, (c, reference))) in p.series.iter().zip(&keys).enumerate() {
            let y = 40 + LEGEND_LINE * k as i32;
            if *reference {
                side.draw(&PathElement::new(vec![(4, y), (16, y)], c.stroke_width(1)))?;
            } else {
                side.draw(&Rectangle::new([(5, y - 4), (15, y + 4)], c.filled()))?;
            }
            side.draw(&Text::new(s.name.clone(), (22, y), style.clone()))?;
        }
    } else if p.series.len() > 1 {
        ch.configure_series_labels()
            .label_font((FONT, 11))
            .position(SeriesLabelPosition::LowerRight)
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK.mix(0.3))
            .draw()?;
    }
    Ok(())
}

fn heat_panel(area: &DrawingArea<SVGBackend, Shift>, p: &HeatPanel) -> DrawResult {
    let (nr, nc) = (p.rows.len(), p.cols.len());
    let max = p.values.iter().flatten().copied().fold(0.0, f64::max);
    let mut ch = ChartBuilder::on(area)
        .caption(&p.title, (FONT, 14))
        .margin(8)
        .x_label_area_size(30)
        .y_label_area_size(80)
        .build_cartesian_2d(-0.5f64..(nc.max(1) as f64 - 0.5), (nr.max(1) as f64 - 0.5)..-0.5f64)?;
    ch.configure_mesh()
        .disable_mesh()
        .x_labels(nc + 1)
        .y_labels(nr + 1)
        .x_label_formatter(&|x| category_label(&p.cols, *x))
        .y_label_formatter(&|y| category_label(&p.rows, *y))
        .draw()?;
    for (i, row) in p.values.iter().enumerate() {
        for (j, v) in row.iter().enumerate() {
            let share = if max > 0.0 { v / max } else { 0.0 };
            // White to the palette's blue, by the share of the largest cell.
            let mix = |a: u8| (255.0 - share * (255.0 - a as f64)).round() as u8;
            let fill = RGBColor(mix(31), mix(119), mix(180));
            let (x, y) = (j as f64, i as f64);
            ch.draw_series(std::iter::once(Rectangle::new([(x - 0.5, y - 0.5), (x + 0.5, y + 0.5)], fill.filled())))?;
            let ink = if share > 0.6 { WHITE } else { BLACK };
            let style = TextStyle::from((FONT, 12).into_font()).color(&ink).pos(Pos::new(HPos::Center, VPos::Center));
            ch.draw_series(std::iter::once(Text::new(format!("{:.1}%", 100.0 * v), (x, y), style)))?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn category_labels_only_at_whole_positions() {
        let c = vec!["a".to_string(), "b".to_string()];
        assert_eq!(category_label(&c, 1.0), "b");
        assert_eq!(category_label(&c, 0.5), "");
        assert_eq!(category_label(&c, 2.0), "");
    }
}
