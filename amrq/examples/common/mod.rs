//! Shared by the examples: a tiny command-line reader and the summary line of DESIGN.md.

#![allow(dead_code)]

/// Flags every example takes.
pub struct Opts {
    pub quick: bool,
    pub json: bool,
    pub iters: Option<u64>,
    pub extra: Vec<(String, String)>,
}

/// Reads `--quick`, `--json`, `--iters N` and any `--key value` pairs.
pub fn opts(usage: &str) -> Opts {
    opts_from(std::env::args().collect(), usage)
}

/// [`opts`] over given arguments (the first is the program name).
pub fn opts_from(argv: Vec<String>, usage: &str) -> Opts {
    let mut o = Opts {
        quick: false,
        json: false,
        iters: None,
        extra: Vec::new(),
    };
    let mut args = argv.into_iter().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--quick" => o.quick = true,
            "--json" => o.json = true,
            "--help" | "-h" => {
                println!("{usage}");
                std::process::exit(0);
            }
            k if k.starts_with("--") => {
                let Some(v) = args.next() else {
                    fail(usage, &format!("{k} needs a value"))
                };
                if k == "--iters" {
                    o.iters = Some(
                        v.parse()
                            .unwrap_or_else(|_| fail(usage, "--iters takes a number")),
                    );
                } else {
                    o.extra.push((k[2..].to_string(), v));
                }
            }
            other => fail(usage, &format!("unknown argument {other}")),
        }
    }
    o
}

impl Opts {
    /// A `--key value` as a number, or `default`.
    pub fn num(&self, key: &str, default: u64, usage: &str) -> u64 {
        match self.extra.iter().find(|(k, _)| k == key) {
            Some((_, v)) => v
                .parse()
                .unwrap_or_else(|_| fail(usage, &format!("--{key} takes a number"))),
            None => default,
        }
    }
}

pub fn fail(usage: &str, why: &str) -> ! {
    eprintln!("error: {why}\n{usage}");
    std::process::exit(2)
}

/// Prints the summary line: `NAME: k=v …`, or one JSON object with `--json`.
pub fn summary(name: &str, json: bool, kv: &[(&str, f64)]) {
    if json {
        let body: Vec<String> = kv
            .iter()
            .map(|(k, v)| format!("\"{k}\":{}", plain(*v)))
            .collect();
        println!("{{\"name\":\"{name}\",{}}}", body.join(","));
    } else {
        let body: Vec<String> = kv
            .iter()
            .map(|(k, v)| format!("{k}={}", plain(*v)))
            .collect();
        println!("{name}: {}", body.join(" "));
    }
}

/// A plain decimal: digits and at most one point, no exponent.
pub fn plain(v: f64) -> String {
    if !v.is_finite() {
        return "0".into();
    }
    let s = format!("{v:.3}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    if s.is_empty() || s == "-" {
        "0".into()
    } else {
        s.to_string()
    }
}
