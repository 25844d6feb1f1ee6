//! One measured figure, and how it is printed: a summary line per benchmark
//! (`NAME: key=value …`, DESIGN.md "Conventions"), or JSON with `--json`.

/// A figure: its name, the median of repeated runs, and their spread.
#[derive(Debug, Clone, PartialEq)]
pub struct Figure {
    /// What it is (`round_trip_ns`, …).
    pub key: &'static str,
    /// Median over the repetitions.
    pub median: f64,
    /// Smallest and largest repetition.
    pub spread: (f64, f64),
}

impl Figure {
    /// The median and spread of `samples` (sorted in place); NaN-free input expected.
    ///
    /// ```
    /// let f = amrq_bench::report::Figure::of("x_ns", &mut [3.0, 1.0, 2.0]);
    /// assert_eq!((f.median, f.spread), (2.0, (1.0, 3.0)));
    /// ```
    pub fn of(key: &'static str, samples: &mut [f64]) -> Self {
        let median = amrq::reference::median(samples);
        let spread = (
            samples.first().copied().unwrap_or(0.0),
            samples.last().copied().unwrap_or(0.0),
        );
        Self {
            key,
            median,
            spread,
        }
    }
}

/// The summary line of benchmark `name`, or its JSON object.
///
/// ```
/// use amrq_bench::report::{line, Figure};
/// let f = Figure { key: "rt_ns", median: 150.25, spread: (140.0, 170.0) };
/// assert_eq!(line("round-trip", &[f.clone()], false), "round-trip: rt_ns=150.25");
/// assert_eq!(
///     line("round-trip", &[f], true),
///     r#"{"name":"round-trip","rt_ns":{"median":150.25,"min":140,"max":170}}"#
/// );
/// ```
pub fn line(name: &str, figures: &[Figure], json: bool) -> String {
    if json {
        let body: Vec<String> = figures
            .iter()
            .map(|f| {
                format!(
                    "\"{}\":{{\"median\":{},\"min\":{},\"max\":{}}}",
                    f.key,
                    plain(f.median),
                    plain(f.spread.0),
                    plain(f.spread.1)
                )
            })
            .collect();
        format!("{{\"name\":\"{name}\",{}}}", body.join(","))
    } else {
        let body: Vec<String> = figures
            .iter()
            .map(|f| format!("{}={}", f.key, plain(f.median)))
            .collect();
        format!("{name}: {}", body.join(" "))
    }
}

/// A plain decimal: at most three decimals, no exponent, no trailing zeros.
fn plain(v: f64) -> String {
    if !v.is_finite() {
        return "0".into();
    }
    let s = format!("{v:.3}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    if s.is_empty() || s == "-0" {
        "0".into()
    } else {
        s.to_string()
    }
}
