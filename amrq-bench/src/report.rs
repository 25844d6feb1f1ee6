//! What one benchmark run produces, and how it is printed.
//!
//! An [`Outcome`] holds named figures (a median with its spread) and series of data
//! points (x, median, spread), plus the set-up it ran on. It prints as text (tables,
//! notes, then the summary line `NAME: key=value …` last)
//! or as one JSON object with `--json`, which is what `amrq-bench all` reads back.

use crate::summary::plain;
use serde::{Deserialize, Deserializer, Serialize};

/// JSON has no NaN: serde_json writes it as `null`, which reads back as NaN here (a
/// fit with no answer, a ratio of a missing figure).
fn nan_if_null<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    Ok(Option::<f64>::deserialize(d)?.unwrap_or(f64::NAN))
}

/// A figure: its name, the median of repeated runs, and their spread.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Figure {
    /// What it is (`round_trip_ns`, …): the unit ends the name.
    pub key: String,
    /// Median over the repetitions.
    #[serde(deserialize_with = "nan_if_null")]
    pub median: f64,
    /// Smallest repetition.
    #[serde(deserialize_with = "nan_if_null")]
    pub min: f64,
    /// Largest repetition.
    #[serde(deserialize_with = "nan_if_null")]
    pub max: f64,
}

impl Figure {
    /// The median and spread of `samples` (sorted in place); NaN-free input expected.
    ///
    /// ```
    /// let f = amrq_bench::report::Figure::of("x_ns", &mut [3.0, 1.0, 2.0]);
    /// assert_eq!((f.median, f.min, f.max), (2.0, 1.0, 3.0));
    /// ```
    pub fn of(key: impl Into<String>, samples: &mut [f64]) -> Self {
        let median = crate::reference::median(samples);
        Self {
            key: key.into(),
            median,
            min: samples.first().copied().unwrap_or(0.0),
            max: samples.last().copied().unwrap_or(0.0),
        }
    }

    /// A derived figure with no spread of its own (a ratio of medians, a fit).
    ///
    /// ```
    /// let f = amrq_bench::report::Figure::single("ratio", 1.5);
    /// assert_eq!((f.median, f.min, f.max), (1.5, 1.5, 1.5));
    /// ```
    pub fn single(key: impl Into<String>, value: f64) -> Self {
        Self {
            key: key.into(),
            median: value,
            min: value,
            max: value,
        }
    }
}

/// One point of a series: x and the figure measured there.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Point {
    /// Where (bytes, interval, step, …).
    #[serde(deserialize_with = "nan_if_null")]
    pub x: f64,
    /// Median over the repetitions.
    #[serde(deserialize_with = "nan_if_null")]
    pub median: f64,
    /// Smallest repetition.
    #[serde(deserialize_with = "nan_if_null")]
    pub min: f64,
    /// Largest repetition.
    #[serde(deserialize_with = "nan_if_null")]
    pub max: f64,
}

impl Point {
    /// The median and spread of `samples` at `x` (sorted in place).
    ///
    /// ```
    /// let p = amrq_bench::report::Point::of(8.0, &mut [5.0, 4.0, 9.0]);
    /// assert_eq!((p.x, p.median, p.min, p.max), (8.0, 5.0, 4.0, 9.0));
    /// ```
    pub fn of(x: f64, samples: &mut [f64]) -> Self {
        Self::at(x, &Figure::of("", samples))
    }

    /// Figure `f`'s median and spread at `x` (a bar of a chart).
    ///
    /// ```
    /// use amrq_bench::report::{Figure, Point};
    /// let p = Point::at(2.0, &Figure::of("k", &mut [3.0, 1.0, 2.0]));
    /// assert_eq!((p.x, p.median, p.min, p.max), (2.0, 2.0, 1.0, 3.0));
    /// ```
    pub fn at(x: f64, f: &Figure) -> Self {
        Self {
            x,
            median: f.median,
            min: f.min,
            max: f.max,
        }
    }
}

impl Point {
    /// The point with `f(x, value)` applied to its median and spread (`f` monotone in
    /// the value: a time turned into a bandwidth swaps min and max).
    ///
    /// ```
    /// let p = amrq_bench::report::Point::of(1000.0, &mut [10.0, 20.0, 40.0]);
    /// let bw = p.map(|x, ns| x / ns);
    /// assert_eq!((bw.median, bw.min, bw.max), (50.0, 25.0, 100.0));
    /// ```
    pub fn map(&self, f: impl Fn(f64, f64) -> f64) -> Point {
        let (a, b) = (f(self.x, self.min), f(self.x, self.max));
        Point {
            x: self.x,
            median: f(self.x, self.median),
            min: a.min(b),
            max: a.max(b),
        }
    }
}

/// A named curve: what x and y are, and its points in x order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Series {
    /// The curve (`one-to-one blocking, word`, …).
    pub name: String,
    /// What x is, with its unit.
    pub x: String,
    /// What y is, with its unit.
    pub y: String,
    /// The points.
    pub points: Vec<Point>,
}

/// Everything one benchmark run measured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Outcome {
    /// The benchmark (`round-trip`, …).
    pub name: String,
    /// Ranks of the job.
    pub ranks: usize,
    /// Cores this job may run on.
    pub cores: usize,
    /// Cost of one clock reading, ns, subtracted from every timed interval.
    #[serde(deserialize_with = "nan_if_null")]
    pub timer_ns: f64,
    /// The figures, in the order printed.
    pub figures: Vec<Figure>,
    /// The data points.
    pub series: Vec<Series>,
    /// What the reader must know (oversubscription, what a figure includes).
    pub notes: Vec<String>,
}

impl Outcome {
    /// An empty outcome of `name` on `ranks` ranks; says so in a note when the ranks
    /// outnumber the cores (they then run unpinned and share cores).
    ///
    /// ```
    /// let o = amrq_bench::report::Outcome::new("ring", 64, 1.0);
    /// assert!(o.notes[0].contains("outnumber"));
    /// ```
    pub fn new(name: &str, ranks: usize, timer_ns: f64) -> Self {
        let cores = amrq::util::affinity::host_cores().max(1);
        let mut notes = Vec::new();
        if ranks > cores {
            notes.push(format!(
                "{ranks} ranks outnumber the {cores} cores: ranks are not pinned and share cores (waits spin a bounded time, then sleep)"
            ));
        }
        Self {
            name: name.into(),
            ranks,
            cores,
            timer_ns,
            figures: Vec::new(),
            series: Vec::new(),
            notes,
        }
    }

    /// True if its run failed (a note says so, and why).
    ///
    /// ```
    /// let mut o = amrq_bench::report::Outcome::new("ring", 2, 1.0);
    /// assert!(!o.failed());
    /// o.notes.push("failed: no result printed".into());
    /// assert!(o.failed());
    /// ```
    pub fn failed(&self) -> bool {
        self.notes.iter().any(|n| n.starts_with("failed"))
    }

    /// The figure named `key`, if any.
    pub fn get(&self, key: &str) -> Option<&Figure> {
        self.figures.iter().find(|f| f.key == key)
    }

    /// The summary line: `NAME: key=median …`.
    ///
    /// ```
    /// use amrq_bench::report::{Figure, Outcome};
    /// let mut o = Outcome::new("round-trip", 2, 20.0);
    /// o.figures.push(Figure::single("rt_ns", 150.25));
    /// assert_eq!(o.line(), "round-trip: rt_ns=150.25");
    /// ```
    pub fn line(&self) -> String {
        let kv: Vec<(&str, f64)> = self
            .figures
            .iter()
            .map(|f| (&f.key[..], f.median))
            .collect();
        crate::summary::line(&self.name, false, &kv)
    }

    /// The text report: each series as a table, the notes, the summary line last.
    pub fn text(&self) -> String {
        let mut out = String::new();
        for s in &self.series {
            out += &format!("{} ({} → {}):\n", s.name, s.x, s.y);
            for p in &s.points {
                out += &format!(
                    "  {:>10}  {:>12}  [{} … {}]\n",
                    plain(p.x),
                    plain(p.median),
                    plain(p.min),
                    plain(p.max)
                );
            }
        }
        for n in &self.notes {
            out += &format!("note: {n}\n");
        }
        out + &self.line()
    }

    /// One line of JSON.
    ///
    /// ```
    /// use amrq_bench::report::Outcome;
    /// let o = Outcome::new("x", 2, 20.0);
    /// let back: Outcome = serde_json::from_str(&o.json()).unwrap();
    /// assert_eq!(back, o);
    /// ```
    pub fn json(&self) -> String {
        serde_json::to_string(self).expect("plain data serializes")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_nan_figure_survives_the_json_round_trip() {
        let mut o = Outcome::new("x", 2, 1.0);
        o.figures.push(Figure::single("fit_mb_s", f64::NAN));
        let back: Outcome = serde_json::from_str(&o.json()).expect("reads back");
        assert!(back.figures[0].median.is_nan());
    }
}
