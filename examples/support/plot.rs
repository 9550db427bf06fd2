//! Shared plotting code for the examples: a log-log line plot of several named series, written to
//! an SVG file with `plotters` (SVG backend only: text is emitted as SVG `<text>`, so no font
//! library is needed).
//!
//! Include it from an example with
//!
//! ```ignore
//! #[path = "support/plot.rs"]
//! mod plot;
//! ```
//!
//! then build [`Series`] and call [`loglog_svg`]. Points that a log axis cannot show (x or y not
//! finite, or ≤ 0) are skipped and break the line there, so a missing value is visible as a gap
//! instead of being bridged.

// Each example uses only part of this module.
#![allow(dead_code)]

use plotters::prelude::*;
use std::error::Error;
use std::path::Path;

/// One named series of (x, y) points, drawn as a line with a marker at every point.
#[derive(Debug, Clone)]
pub struct Series {
    /// The legend entry.
    pub name: String,
    /// The points, in drawing order.
    pub points: Vec<(f64, f64)>,
    /// Draw the line dashed and without markers (e.g. a reference slope).
    pub dashed: bool,
}

impl Series {
    /// A solid line with markers.
    pub fn new(name: impl Into<String>, points: Vec<(f64, f64)>) -> Self {
        Series { name: name.into(), points, dashed: false }
    }

    /// A dashed line without markers (for reference lines).
    pub fn dashed(name: impl Into<String>, points: Vec<(f64, f64)>) -> Self {
        Series { name: name.into(), points, dashed: true }
    }
}

/// Line colours, used in order (cycled if there are more series).
const PALETTE: [RGBColor; 8] = [
    RGBColor(0, 114, 178),
    RGBColor(213, 94, 0),
    RGBColor(0, 158, 115),
    RGBColor(204, 121, 167),
    RGBColor(86, 180, 233),
    RGBColor(230, 159, 0),
    RGBColor(0, 0, 0),
    RGBColor(240, 228, 66),
];

fn drawable(p: &(f64, f64)) -> bool {
    p.0.is_finite() && p.1.is_finite() && p.0 > 0.0 && p.1 > 0.0
}

/// The maximal runs of consecutive drawable points.
fn segments(points: &[(f64, f64)]) -> Vec<Vec<(f64, f64)>> {
    let mut out: Vec<Vec<(f64, f64)>> = Vec::new();
    let mut current = Vec::new();
    for p in points {
        if drawable(p) {
            current.push(*p);
        } else if !current.is_empty() {
            out.push(std::mem::take(&mut current));
        }
    }
    if !current.is_empty() {
        out.push(current);
    }
    out
}

/// `[lo, hi]` widened by `pad` decades on each side (and to one decade if degenerate).
fn log_range(lo: f64, hi: f64, pad: f64) -> (f64, f64) {
    let (mut a, mut b) = (lo.log10(), hi.log10());
    if b - a < 1e-9 {
        a -= 0.5;
        b += 0.5;
    }
    let w = (b - a) * pad;
    (10f64.powf(a - w), 10f64.powf(b + w))
}

/// Tick labels for a log axis spanning `decades`: `1e3` for powers of ten; on an axis of a
/// decade or more, `2e3` and `5e3` too and no label elsewhere (so that labels do not overlap);
/// on a shorter axis, three significant digits.
fn tick(decades: f64) -> impl Fn(&f64) -> String {
    move |v: &f64| {
        let e = v.log10().floor();
        let mantissa = v / 10f64.powf(e);
        let near = |m: f64| (mantissa - m).abs() < 1e-6 * m;
        if near(1.0) || near(10.0) {
            format!("1e{}", v.log10().round() as i32)
        } else if decades < 1.0 {
            format!("{v:.2e}")
        } else if near(2.0) || near(5.0) {
            format!("{}e{}", mantissa.round() as i32, e as i32)
        } else {
            String::new()
        }
    }
}

/// The legend corner that covers the fewest data: points and interpolated line points are
/// counted, in log coordinates scaled to the unit square, inside a box of the legend's rough size
/// at each corner (ties go to the first of upper right, upper left, lower left, lower right).
fn legend_corner(series: &[Series], x: (f64, f64), y: (f64, f64)) -> SeriesLabelPosition {
    let to_unit = |p: (f64, f64)| {
        (
            (p.0.log10() - x.0.log10()) / (x.1.log10() - x.0.log10()),
            (p.1.log10() - y.0.log10()) / (y.1.log10() - y.0.log10()),
        )
    };
    let mut pts = Vec::new();
    for s in series {
        for seg in segments(&s.points) {
            let seg: Vec<(f64, f64)> = seg.into_iter().map(to_unit).collect();
            pts.extend(seg.iter().copied());
            for w in seg.windows(2) {
                pts.extend((1..20).map(|k| {
                    let t = f64::from(k) / 20.0;
                    (w[0].0 + t * (w[1].0 - w[0].0), w[0].1 + t * (w[1].1 - w[0].1))
                }));
            }
        }
    }
    let (w, h) = (0.35, (0.06 * series.len() as f64 + 0.04).min(0.6));
    let corners = [
        (SeriesLabelPosition::UpperRight, (1.0 - w, 1.0 - h)),
        (SeriesLabelPosition::UpperLeft, (0.0, 1.0 - h)),
        (SeriesLabelPosition::LowerLeft, (0.0, 0.0)),
        (SeriesLabelPosition::LowerRight, (1.0 - w, 0.0)),
    ];
    let count =
        |(x0, y0): (f64, f64)| pts.iter().filter(|p| p.0 >= x0 && p.0 <= x0 + w && p.1 >= y0 && p.1 <= y0 + h).count();
    let mut best = (usize::MAX, SeriesLabelPosition::UpperRight);
    for (pos, origin) in corners {
        let c = count(origin);
        if c < best.0 {
            best = (c, pos);
        }
    }
    best.1
}

/// Writes a log-log plot of `series` to the SVG file `path` (its directory is created if
/// needed), with a title and axis labels; the axes span the drawable points of all series, and
/// the legend goes in the corner that hides the fewest of them.
///
/// Errors: no drawable point at all; the directory or file cannot be written.
pub fn loglog_svg(
    path: impl AsRef<Path>,
    title: &str,
    x_label: &str,
    y_label: &str,
    series: &[Series],
) -> Result<(), Box<dyn Error>> {
    let path = path.as_ref();
    let all: Vec<(f64, f64)> = series.iter().flat_map(|s| s.points.iter().copied()).filter(drawable).collect();
    if all.is_empty() {
        return Err(format!("plot {}: no positive finite point to draw", path.display()).into());
    }
    let fold = |f: fn(f64, f64) -> f64, init: f64, pick: fn(&(f64, f64)) -> f64| all.iter().map(pick).fold(init, f);
    let (x_lo, x_hi) = log_range(fold(f64::min, f64::INFINITY, |p| p.0), fold(f64::max, 0.0, |p| p.0), 0.04);
    let (y_lo, y_hi) = log_range(fold(f64::min, f64::INFINITY, |p| p.1), fold(f64::max, 0.0, |p| p.1), 0.08);
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }

    let root = SVGBackend::new(path, (900, 640)).into_drawing_area();
    root.fill(&WHITE)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 22))
        .margin(15)
        .x_label_area_size(50)
        .y_label_area_size(80)
        .build_cartesian_2d((x_lo..x_hi).log_scale(), (y_lo..y_hi).log_scale())?;
    chart
        .configure_mesh()
        .x_desc(x_label)
        .y_desc(y_label)
        .x_label_formatter(&tick((x_hi / x_lo).log10()))
        .y_label_formatter(&tick((y_hi / y_lo).log10()))
        .light_line_style(RGBColor(235, 235, 235))
        .draw()?;

    for (k, s) in series.iter().enumerate() {
        let color = PALETTE[k % PALETTE.len()];
        let line = ShapeStyle::from(&color).stroke_width(2);
        for seg in segments(&s.points) {
            if s.dashed {
                chart.draw_series(DashedLineSeries::new(seg, 8, 5, line))?;
            } else {
                chart.draw_series(LineSeries::new(seg, line))?;
            }
        }
        let markers = if s.dashed { Vec::new() } else { s.points.iter().copied().filter(drawable).collect() };
        chart
            .draw_series(markers.into_iter().map(|p| Circle::new(p, 4, color.filled())))?
            .label(s.name.as_str())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 24, y)], line));
    }
    chart
        .configure_series_labels()
        .position(legend_corner(series, (x_lo, x_hi), (y_lo, y_hi)))
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .label_font(("sans-serif", 15))
        .draw()?;
    root.present()?;
    Ok(())
}

/// Writes a plot with linear axes over `x_range` × `y_range` (points outside are skipped) to
/// the SVG file `path`: each series a line with markers, dashed ones without. For reliability
/// diagrams (accuracy against confidence, with the diagonal as a dashed series).
///
/// Errors: the directory or file cannot be written.
pub fn linear_svg(
    path: impl AsRef<Path>,
    title: &str,
    x_label: &str,
    y_label: &str,
    x_range: (f64, f64),
    y_range: (f64, f64),
    series: &[Series],
) -> Result<(), Box<dyn Error>> {
    let path = path.as_ref();
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let inside = |p: &(f64, f64)| {
        p.0.is_finite()
            && p.1.is_finite()
            && (x_range.0..=x_range.1).contains(&p.0)
            && (y_range.0..=y_range.1).contains(&p.1)
    };
    let root = SVGBackend::new(path, (900, 640)).into_drawing_area();
    root.fill(&WHITE)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 22))
        .margin(15)
        .x_label_area_size(50)
        .y_label_area_size(80)
        .build_cartesian_2d(x_range.0..x_range.1, y_range.0..y_range.1)?;
    chart.configure_mesh().x_desc(x_label).y_desc(y_label).light_line_style(RGBColor(235, 235, 235)).draw()?;
    for (k, s) in series.iter().enumerate() {
        let color = PALETTE[k % PALETTE.len()];
        let line = ShapeStyle::from(&color).stroke_width(2);
        let pts: Vec<(f64, f64)> = s.points.iter().copied().filter(inside).collect();
        if s.dashed {
            chart.draw_series(DashedLineSeries::new(pts.clone(), 8, 5, line))?;
        } else {
            chart.draw_series(LineSeries::new(pts.clone(), line))?;
        }
        let markers = if s.dashed { Vec::new() } else { pts };
        chart
            .draw_series(markers.into_iter().map(|p| Circle::new(p, 4, color.filled())))?
            .label(s.name.as_str())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 24, y)], line));
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .label_font(("sans-serif", 15))
        .draw()?;
    root.present()?;
    Ok(())
}
