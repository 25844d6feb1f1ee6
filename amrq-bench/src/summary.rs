//! The summary line every example and benchmark ends with:
//! `NAME: key=value …`, or one JSON object with the same keys, values as plain
//! decimals.

/// A plain decimal: digits, an optional minus and at most one point with at most three
/// decimals; no exponent, no trailing zeros, no `-0`; `0` for NaN and infinities.
///
/// ```
/// use amrq_bench::summary::plain;
/// assert_eq!(plain(1.5000), "1.5");
/// assert_eq!(plain(2.0), "2");
/// assert_eq!(plain(1e21), "1000000000000000000000");
/// assert_eq!(plain(-0.0001), "0");
/// assert_eq!(plain(-2.25), "-2.25");
/// assert_eq!(plain(f64::NAN), "0");
/// ```
pub fn plain(v: f64) -> String {
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

/// The summary line `NAME: k=v …`, or with `json` one JSON object with the name and the
/// same keys.
///
/// ```
/// use amrq_bench::summary::line;
/// assert_eq!(line("pingpong", false, &[("rtt_ns", 91.25), ("ratio", 1.9)]), "pingpong: rtt_ns=91.25 ratio=1.9");
/// assert_eq!(line("stream", true, &[("msgs_per_s", 3e7)]), r#"{"name":"stream","msgs_per_s":30000000}"#);
/// ```
pub fn line(name: &str, json: bool, kv: &[(&str, f64)]) -> String {
    if json {
        let body: Vec<String> = kv
            .iter()
            .map(|(k, v)| format!("\"{k}\":{}", plain(*v)))
            .collect();
        format!("{{\"name\":\"{name}\",{}}}", body.join(","))
    } else {
        let body: Vec<String> = kv
            .iter()
            .map(|(k, v)| format!("{k}={}", plain(*v)))
            .collect();
        format!("{name}: {}", body.join(" "))
    }
}
