//! The summary line every benchmark and program of `amrq-bench` ends with:
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

/// The value of `key` in a line of `key=value` words (what [`line()`] writes), if it is
/// there and parses.
///
/// ```
/// use amrq_bench::summary::value;
/// let l = "rank=3 rss_kib=8800 cpu_s=1e-3,2e-3";
/// assert_eq!(value::<usize>(l, "rank"), Some(3));
/// assert_eq!(value::<String>(l, "cpu_s").as_deref(), Some("1e-3,2e-3"));
/// assert_eq!(value::<u64>(l, "rss"), None); // a whole key, not a prefix of one
/// ```
pub fn value<T: std::str::FromStr>(line: &str, key: &str) -> Option<T> {
    line.split_whitespace()
        .find_map(|w| w.strip_prefix(key)?.strip_prefix('=')?.parse().ok())
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

/// Appends a line of JSON to `DIR/NAME.json` (`--out`), making the directory.
///
/// ```
/// let dir = std::env::temp_dir().join(format!("amrq-summary-doc-{}", std::process::id()));
/// amrq_bench::summary::append(&dir, "x", r#"{"name":"x"}"#).unwrap();
/// amrq_bench::summary::append(&dir, "x", r#"{"name":"x"}"#).unwrap();
/// assert_eq!(std::fs::read_to_string(dir.join("x.json")).unwrap().lines().count(), 2);
/// std::fs::remove_dir_all(&dir).unwrap();
/// ```
pub fn append(dir: &std::path::Path, name: &str, json: &str) -> Result<(), String> {
    use std::io::Write;
    let path = dir.join(format!("{name}.json"));
    std::fs::create_dir_all(dir)
        .and_then(|()| {
            let mut f = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(&path)?;
            writeln!(f, "{json}")
        })
        .map_err(|e| format!("{}: {e}", path.display()))
}
