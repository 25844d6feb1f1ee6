//! The plots of a report, as SVG, drawn by plotters from crates alone: its SVG backend,
//! and the DejaVu Sans font bundled by the `dejavu` crate (plotters' default font
//! support needs system libraries).
//!
//! Logarithmic axes are drawn by plotting log10 of the values on a linear axis and
//! labelling the ticks with the values, so that every chart has one coordinate type.

use crate::report::Point;
use plotters::coord::Shift;
use plotters::prelude::*;
use std::path::Path;

/// One chart.
pub struct Chart<'a> {
    /// File name without extension.
    pub file: &'a str,
    /// Title.
    pub title: &'a str,
    /// Axis labels.
    pub x_label: &'a str,
    /// Axis labels.
    pub y_label: &'a str,
    /// Logarithmic axes.
    pub log_x: bool,
    /// Logarithmic axes.
    pub log_y: bool,
    /// (name, points) per curve; each point's spread is drawn as an error bar.
    pub curves: Vec<(String, Vec<Point>)>,
    /// Empty: lines. Otherwise grouped bars, one group per category at x = its index,
    /// one bar per curve.
    pub categories: &'a [&'a str],
    /// A line at y = 1 (parity, for ratios).
    pub parity: bool,
}

fn register_font() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        // A bundled TrueType font parses; if it ever did not, text would be missing
        // from the plots, not the numbers from the report.
        let _ = plotters::style::register_font(
            "sans-serif",
            FontStyle::Normal,
            dejavu::sans::regular(),
        );
    });
}

const COLORS: [RGBColor; 10] = [
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

impl Chart<'_> {
    fn map(log: bool, v: f64) -> Option<f64> {
        match log {
            true if v > 0.0 => Some(v.log10()),
            true => None,
            false => v.is_finite().then_some(v),
        }
    }

    /// The curves in plot coordinates, without points a log axis cannot show.
    fn mapped(&self) -> Vec<(String, Vec<Point>)> {
        let y = |v: f64| Self::map(self.log_y, v);
        self.curves
            .iter()
            .map(|(n, pts)| {
                let p = pts
                    .iter()
                    .filter_map(|p| {
                        let median = y(p.median)?;
                        Some(Point {
                            x: Self::map(self.log_x, p.x)?,
                            median,
                            min: y(p.min).unwrap_or(median),
                            max: y(p.max).unwrap_or(median),
                        })
                    })
                    .collect();
                (n.clone(), p)
            })
            .collect()
    }

    fn draw<DB: DrawingBackend>(&self, root: DrawingArea<DB, Shift>) -> Result<(), String>
    where
        DB::ErrorType: 'static,
    {
        let err = |e: DrawingAreaErrorKind<DB::ErrorType>| e.to_string();
        root.fill(&WHITE).map_err(err)?;
        let curves = self.mapped();
        let all: Vec<&Point> = curves.iter().flat_map(|(_, p)| p.iter()).collect();
        if all.is_empty() {
            return Err(format!("{}: no points", self.file));
        }
        let span = |v: Vec<f64>, log: bool| {
            let lo = v.iter().copied().fold(f64::INFINITY, f64::min);
            let hi = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            let pad = if hi > lo { (hi - lo) * 0.05 } else { 1.0 };
            let lo = if log || lo < 0.0 {
                lo - pad
            } else {
                (lo - pad).max(0.0)
            };
            lo..hi + pad
        };
        let bars = !self.categories.is_empty();
        let (xs, ys) = if bars {
            let top = all.iter().map(|p| p.max).fold(1.0, f64::max) * 1.1;
            (-0.5..self.categories.len() as f64 - 0.5, 0.0..top)
        } else {
            (
                span(all.iter().map(|p| p.x).collect(), self.log_x),
                span(
                    all.iter().flat_map(|p| [p.min, p.max]).collect(),
                    self.log_y,
                ),
            )
        };
        let mut chart = ChartBuilder::on(&root)
            .caption(self.title, ("sans-serif", 22))
            .margin(12)
            .x_label_area_size(44)
            .y_label_area_size(70)
            .build_cartesian_2d(xs, ys)
            .map_err(err)?;
        // Log axes label the powers of ten only (below 0.001 as 1e-4, …).
        let tick = |log: bool| {
            move |v: &f64| match log {
                true if (v - v.round()).abs() < 1e-6 => match 10f64.powf(v.round()) {
                    p if p < 1e-3 => format!("{p:e}"),
                    p => crate::summary::plain(p),
                },
                true => String::new(),
                false => crate::summary::plain(*v),
            }
        };
        let (fx, fy) = (tick(self.log_x), tick(self.log_y));
        let category = |v: &f64| {
            let i = v.round();
            match self.categories.get(i as usize) {
                Some(c) if (v - i).abs() < 1e-6 && i >= 0.0 => c.to_string(),
                _ => String::new(),
            }
        };
        let fx: &dyn Fn(&f64) -> String = if bars { &category } else { &fx };
        chart
            .configure_mesh()
            .x_labels(if bars { self.categories.len() } else { 10 })
            .x_desc(self.x_label)
            .y_desc(self.y_label)
            .x_label_formatter(&fx)
            .y_label_formatter(&fy)
            .label_style(("sans-serif", 14))
            .draw()
            .map_err(err)?;
        let groups = curves.len().max(1) as f64;
        for (i, (name, pts)) in curves.into_iter().enumerate() {
            let color = COLORS[i % COLORS.len()];
            if bars {
                let w = 0.8 / groups;
                let x0 = |x: f64| x - 0.4 + i as f64 * w;
                chart
                    .draw_series(pts.iter().map(|p| {
                        Rectangle::new(
                            [(x0(p.x), 0.0), (x0(p.x) + w * 0.9, p.median)],
                            color.filled(),
                        )
                    }))
                    .map_err(err)?
                    .label(name)
                    .legend(move |(x, y)| {
                        Rectangle::new([(x, y - 5), (x + 12, y + 5)], color.filled())
                    });
                continue;
            }
            let line: Vec<(f64, f64)> = pts.iter().map(|p| (p.x, p.median)).collect();
            chart
                .draw_series(LineSeries::new(line.clone(), color.stroke_width(2)))
                .map_err(err)?
                .label(name)
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 18, y)], color.stroke_width(2))
                });
            chart
                .draw_series(line.into_iter().map(|p| Circle::new(p, 3, color.filled())))
                .map_err(err)?;
            // The spread of the repetitions: min to max.
            chart
                .draw_series(pts.iter().filter(|p| p.max > p.min).map(|p| {
                    PathElement::new(vec![(p.x, p.min), (p.x, p.max)], color.stroke_width(1))
                }))
                .map_err(err)?;
        }
        if self.parity {
            let n = self.categories.len().max(1) as f64;
            chart
                .draw_series(LineSeries::new(
                    vec![(-0.5, 1.0), (n - 0.5, 1.0)],
                    BLACK.stroke_width(1),
                ))
                .map_err(err)?
                .label("parity (1×)")
                .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], BLACK));
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperLeft)
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .label_font(("sans-serif", 14))
            .draw()
            .map_err(err)?;
        root.present().map_err(err)
    }

    /// Writes `dir/<file>.svg`.
    pub fn write(&self, dir: &Path) -> Result<(), String> {
        register_font();
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let svg = dir.join(format!("{}.svg", self.file));
        self.draw(SVGBackend::new(&svg, (900, 560)).into_drawing_area())
    }
}
