//! Shared by the examples: a tiny command-line reader and the summary line of DESIGN.md.

#![allow(dead_code)]

/// Flags every example takes.
pub struct Opts {
    pub quick: bool,
    pub json: bool,
    /// Ranks as threads of one process instead of processes.
    pub threads: bool,
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
        threads: false,
        iters: None,
        extra: Vec::new(),
    };
    let mut args = argv.into_iter().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--quick" => o.quick = true,
            "--json" => o.json = true,
            "--threads" => o.threads = true,
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

/// Runs `rank_main` on `ranks` ranks: processes (self-launched, or joining `amrun`'s
/// job), or threads with `--threads`. Never returns; the exit status is the job's.
pub fn run_ranks<F>(o: &Opts, ranks: usize, cfg: &amrq::Config, usage: &str, rank_main: F) -> !
where
    F: Fn(amrq::conduit::mem::MemConduit) -> Result<(), String> + Sync,
{
    if o.threads {
        match amrq::threads::run(ranks, cfg, &rank_main) {
            Ok(results) => match results.into_iter().find_map(Result::err) {
                None => std::process::exit(0),
                Some(e) => fail(usage, &e),
            },
            Err(e) => fail(usage, &e.to_string()),
        }
    }
    amrq::launch::launch(ranks, cfg, rank_main)
}
