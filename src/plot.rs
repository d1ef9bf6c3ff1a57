//! SVG plots (plotters' SVG backend: no system libraries, no font files): stacked
//! time-breakdown bars for `compare`, the Pareto front and top plans for `sweep`, and busbw
//! against message size for `collective`. Each function returns the SVG text; the caller
//! writes it where `--plot` says ([`write_svg`]).

use crate::error::{Error, Result};
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use std::path::Path;

const W: u32 = 900;
const H: u32 = 520;

/// Series colours, colour-blind-safe (Okabe & Ito 2008 palette).
const PALETTE: [RGBColor; 8] = [
    RGBColor(0, 114, 178),
    RGBColor(230, 159, 0),
    RGBColor(0, 158, 115),
    RGBColor(213, 94, 0),
    RGBColor(86, 180, 233),
    RGBColor(204, 121, 167),
    RGBColor(240, 228, 66),
    RGBColor(0, 0, 0),
];

fn colour(i: usize) -> RGBColor {
    PALETTE[i % PALETTE.len()]
}

fn draw_err<E: std::fmt::Debug>(e: E) -> Error {
    Error::Internal(format!("plot: {e:?}"))
}

fn finite_max(vals: impl Iterator<Item = f64>) -> f64 {
    vals.filter(|v| v.is_finite()).fold(0.0, f64::max)
}

/// Stacked bars: one bar per category (a variant, a plan), one stacked segment per series
/// (forward, backward, TP communication, …), the total printed above each bar and the
/// legend beside the chart (never over a bar). `series[i].1[j]` is series i's value in
/// category j, in `unit`.
pub fn stacked_bars(
    title: &str,
    unit: &str,
    categories: &[String],
    series: &[(String, Vec<f64>)],
) -> Result<String> {
    if categories.is_empty() {
        return Err(Error::input("--plot", "nothing to plot"));
    }
    let n = categories.len();
    let value = |s: &(String, Vec<f64>), j: usize| s.1.get(j).copied().unwrap_or(0.0).max(0.0);
    let totals: Vec<f64> = (0..n)
        .map(|j| series.iter().map(|s| value(s, j)).sum())
        .collect();
    let ymax = finite_max(totals.iter().copied()).max(f64::MIN_POSITIVE) * 1.12;
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (W, H)).into_drawing_area();
        root.fill(&WHITE).map_err(draw_err)?;
        let root = root.titled(title, ("sans-serif", 20)).map_err(draw_err)?;
        let (left, right) = root.split_horizontally(W - 170);
        let mut chart = ChartBuilder::on(&left)
            .margin(12)
            .x_label_area_size(44)
            .y_label_area_size(70)
            .build_cartesian_2d(0f64..n as f64, 0f64..ymax)
            .map_err(draw_err)?;
        chart
            .configure_mesh()
            .disable_x_mesh()
            .light_line_style(WHITE)
            .y_desc(unit)
            .x_labels(0)
            .draw()
            .map_err(draw_err)?;
        let label = |s: &str, x: f64, y: f64, v: VPos| {
            let style =
                TextStyle::from(("sans-serif", 13).into_font()).pos(Pos::new(HPos::Center, v));
            Text::new(s.to_string(), (x, y), style)
        };
        let mut base = vec![0.0; n];
        for (k, s) in series.iter().enumerate() {
            let c = colour(k);
            let rects: Vec<_> = (0..n)
                .map(|j| {
                    let v = value(s, j);
                    let x = j as f64;
                    let r =
                        Rectangle::new([(x + 0.15, base[j]), (x + 0.85, base[j] + v)], c.filled());
                    base[j] += v;
                    r
                })
                .collect();
            chart.draw_series(rects).map_err(draw_err)?;
        }
        let tops = (0..n).map(|j| {
            let t = totals[j];
            label(
                &crate::units::sig(t),
                j as f64 + 0.5,
                t + ymax * 0.01,
                VPos::Bottom,
            )
        });
        chart.draw_series(tops).map_err(draw_err)?;
        // Category names under the bars, wrapped onto two lines when wider than a bar slot
        // (about 7 px per character at 13 px).
        let slot_chars = ((W - 170 - 100) as usize / n / 7).max(6);
        let style =
            TextStyle::from(("sans-serif", 13).into_font()).pos(Pos::new(HPos::Center, VPos::Top));
        let names = (0..n).map(|j| {
            let mut lines = wrap(&categories[j], slot_chars).into_iter();
            let first = lines.next().unwrap_or_default();
            let second = lines.next().unwrap_or_default();
            EmptyElement::at((j as f64 + 0.5, 0.0))
                + Text::new(first, (0, 6), style.clone())
                + Text::new(second, (0, 21), style.clone())
        });
        chart.draw_series(names).map_err(draw_err)?;
        legend(&right, series)?;
        root.present().map_err(draw_err)?;
    }
    Ok(svg)
}

/// Splits `s` at the space nearest its middle when it is longer than `max` characters.
fn wrap(s: &str, max: usize) -> Vec<String> {
    if s.chars().count() <= max {
        return vec![s.to_string()];
    }
    let mid = s.len() / 2;
    let cut = s
        .char_indices()
        .filter(|(_, c)| *c == ' ')
        .map(|(i, _)| i)
        .min_by_key(|i| i.abs_diff(mid));
    match cut {
        Some(i) => vec![s[..i].to_string(), s[i + 1..].to_string()],
        None => vec![s.to_string()],
    }
}

/// A legend in its own drawing area: one filled square and name per series, listed top
/// down in the order the segments stack bottom up (so the list reads like the bars).
fn legend(
    area: &DrawingArea<SVGBackend<'_>, plotters::coord::Shift>,
    series: &[(String, Vec<f64>)],
) -> Result<()> {
    let n = series.len();
    for (k, (name, _)) in series.iter().enumerate().rev() {
        let y = 40 + 22 * (n - 1 - k) as i32;
        let c = colour(k);
        area.draw(&Rectangle::new([(8, y), (22, y + 14)], c.filled()))
            .map_err(draw_err)?;
        area.draw(&Text::new(name.clone(), (30, y), ("sans-serif", 14)))
            .map_err(draw_err)?;
    }
    Ok(())
}

/// A scatter of evaluated points (grey), the Pareto front (joined, coloured) and the
/// labelled top points. Both objectives are drawn as given (the caller decides which way
/// is better and says so in the axis labels).
pub fn pareto(
    title: &str,
    x_label: &str,
    y_label: &str,
    cloud: &[(f64, f64)],
    front: &[(f64, f64)],
    top: &[(String, f64, f64)],
) -> Result<String> {
    let all = cloud
        .iter()
        .chain(front)
        .copied()
        .chain(top.iter().map(|t| (t.1, t.2)));
    let (mut x0, mut x1, mut y0, mut y1) = (f64::MAX, f64::MIN, f64::MAX, f64::MIN);
    for (x, y) in all.filter(|p| p.0.is_finite() && p.1.is_finite()) {
        x0 = x0.min(x);
        x1 = x1.max(x);
        y0 = y0.min(y);
        y1 = y1.max(y);
    }
    if x0 > x1 {
        return Err(Error::input("--plot", "nothing to plot"));
    }
    let pad = |a: f64, b: f64| ((b - a).abs() * 0.08).max(b.abs() * 0.01).max(1e-12);
    let (px, py) = (pad(x0, x1), pad(y0, y1));
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (W, H)).into_drawing_area();
        root.fill(&WHITE).map_err(draw_err)?;
        let mut chart = ChartBuilder::on(&root)
            .caption(title, ("sans-serif", 20))
            .margin(12)
            .x_label_area_size(50)
            .y_label_area_size(70)
            .build_cartesian_2d((x0 - px)..(x1 + px), (y0 - py)..(y1 + py))
            .map_err(draw_err)?;
        chart
            .configure_mesh()
            .x_desc(x_label)
            .y_desc(y_label)
            .draw()
            .map_err(draw_err)?;
        chart
            .draw_series(
                cloud
                    .iter()
                    .map(|&p| Circle::new(p, 2, RGBColor(170, 170, 170).filled())),
            )
            .map_err(draw_err)?
            .label("ranked plans")
            .legend(|(x, y)| Circle::new((x + 5, y), 3, RGBColor(170, 170, 170).filled()));
        let c = colour(0);
        chart
            .draw_series(LineSeries::new(front.iter().copied(), c.stroke_width(2)))
            .map_err(draw_err)?
            .label("Pareto front")
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], c.stroke_width(2)));
        chart
            .draw_series(front.iter().map(|&p| Circle::new(p, 4, c.filled())))
            .map_err(draw_err)?;
        // Top points get a short tag ("#1") beside them and their full label in a list
        // at the upper right, so clustered points stay readable.
        let t = colour(3);
        chart
            .draw_series(top.iter().enumerate().map(|(i, (name, x, y))| {
                let tag = name.split_whitespace().next().unwrap_or("").to_string();
                EmptyElement::at((*x, *y))
                    + Cross::new((0, 0), 5, t.stroke_width(2))
                    + Text::new(tag, (6 + 22 * i as i32, -14), ("sans-serif", 11))
            }))
            .map_err(draw_err)?;
        for (i, (name, _, _)) in top.iter().enumerate() {
            root.draw(&Text::new(
                name.clone(),
                (W as i32 - 330, 60 + 16 * i as i32),
                ("sans-serif", 12).into_font().color(&t),
            ))
            .map_err(draw_err)?;
        }
        chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .draw()
            .map_err(draw_err)?;
        root.present().map_err(draw_err)?;
    }
    Ok(svg)
}

/// Lines of y against x; `log_x` draws x on a log-2 axis (message sizes).
pub fn lines(
    title: &str,
    x_label: &str,
    y_label: &str,
    series: &[(String, Vec<(f64, f64)>)],
    log_x: bool,
) -> Result<String> {
    let pts = || series.iter().flat_map(|s| s.1.iter().copied());
    let x0 = pts()
        .map(|p| p.0)
        .filter(|v| v.is_finite())
        .fold(f64::MAX, f64::min);
    let x1 = finite_max(pts().map(|p| p.0));
    let y1 = finite_max(pts().map(|p| p.1)).max(f64::MIN_POSITIVE) * 1.1;
    if x0 > x1 || (log_x && x0 <= 0.0) {
        return Err(Error::input("--plot", "nothing to plot"));
    }
    let x1 = if x1 > x0 { x1 } else { x0 * 2.0 };
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (W, H)).into_drawing_area();
        root.fill(&WHITE).map_err(draw_err)?;
        let mut b = ChartBuilder::on(&root);
        b.caption(title, ("sans-serif", 20))
            .margin(12)
            .x_label_area_size(50)
            .y_label_area_size(70);
        if log_x {
            let mut chart = b
                .build_cartesian_2d((x0..x1).log_scale().base(2.0), 0f64..y1)
                .map_err(draw_err)?;
            chart
                .configure_mesh()
                .x_desc(x_label)
                .y_desc(y_label)
                .x_label_formatter(&|v| crate::units::Bytes::new(*v).to_string())
                .draw()
                .map_err(draw_err)?;
            draw_lines(&mut chart, series)?;
        } else {
            let mut chart = b.build_cartesian_2d(x0..x1, 0f64..y1).map_err(draw_err)?;
            chart
                .configure_mesh()
                .x_desc(x_label)
                .y_desc(y_label)
                .draw()
                .map_err(draw_err)?;
            draw_lines(&mut chart, series)?;
        }
        root.present().map_err(draw_err)?;
    }
    Ok(svg)
}

fn draw_lines<'a, X, Y>(
    chart: &mut ChartContext<'a, SVGBackend<'a>, Cartesian2d<X, Y>>,
    series: &[(String, Vec<(f64, f64)>)],
) -> Result<()>
where
    X: Ranged<ValueType = f64>,
    Y: Ranged<ValueType = f64>,
{
    for (k, (name, pts)) in series.iter().enumerate() {
        let c = colour(k);
        chart
            .draw_series(LineSeries::new(pts.iter().copied(), c.stroke_width(2)))
            .map_err(draw_err)?
            .label(name.as_str())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], c.stroke_width(2)));
        chart
            .draw_series(pts.iter().map(|&p| Circle::new(p, 3, c.filled())))
            .map_err(draw_err)?;
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()
        .map_err(draw_err)?;
    Ok(())
}

/// Writes an SVG to `path`; the extension must be `.svg`.
pub fn write_svg(path: &Path, svg: &str) -> Result<()> {
    if path.extension().and_then(|e| e.to_str()) != Some("svg") {
        return Err(Error::input(
            "--plot",
            format!(
                "'{}': only SVG output is supported; use a .svg file name",
                path.display()
            ),
        ));
    }
    std::fs::write(path, svg).map_err(|source| Error::Io {
        path: path.to_path_buf(),
        source,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stacked_bars_draw_one_rect_per_segment() {
        let cats = vec!["a".to_string(), "b".to_string()];
        let series = vec![
            ("compute".to_string(), vec![1.0, 2.0]),
            ("comm".to_string(), vec![0.5, 0.25]),
        ];
        let svg = stacked_bars("t", "s", &cats, &series).unwrap();
        assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
        assert!(svg.contains("\ncompute\n") && svg.contains("\ncomm\n"));
    }

    #[test]
    fn empty_input_is_an_error_not_a_panic() {
        assert!(stacked_bars("t", "s", &[], &[]).is_err());
        assert!(pareto("t", "x", "y", &[], &[], &[]).is_err());
        assert!(lines("t", "x", "y", &[], true).is_err());
    }

    #[test]
    fn rejects_non_svg_path() {
        assert!(write_svg(Path::new("out.png"), "<svg/>").is_err());
    }
}
