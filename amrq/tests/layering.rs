//! Each layer uses only the layers below it. This test reads the
//! sources and fails on any path that reaches a layer above the file's own, so the
//! folders keep telling the truth. A path counts wherever it is written, code or doc
//! link: `crate::rq::…`, `crate::{conduit, rq}`, `$crate::…`, a crate-root name
//! (`crate::Config` is the `config` module's), and `super::super::…` climbing to the
//! crate root. A root name the test cannot place fails too, so nothing slips through.

#![cfg(not(amrq_loom))]

use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// Bottom to top. `util` and `sync` are helpers any layer may use (they use none);
/// everything not listed (`job`, `config`, `error`, `launch`, `reference`, `summary`,
/// `bin`) is the top.
const LAYERS: &[&str] = &[
    "util",
    "sync",
    "bootstrap",
    "conduit",
    "rq",
    "am",
    "rma",
    "coll",
    "splitc",
];

/// The layer of a crate-root module: its index in [`LAYERS`], or the top.
fn layer_of(module: &str) -> usize {
    match module {
        "util" | "sync" => 0,
        _ => LAYERS
            .iter()
            .position(|l| *l == module)
            .unwrap_or(LAYERS.len()),
    }
}

/// The crate root's names: each module declared in `lib.rs`, each name it re-exports
/// (`pub use config::Config;` makes `Config` the `config` module's), and each exported
/// macro (the module of the file that defines it).
fn root_names(src: &Path) -> HashMap<String, String> {
    let lib = std::fs::read_to_string(src.join("lib.rs")).expect("lib.rs");
    let mut names = HashMap::new();
    for line in lib.lines().map(str::trim) {
        let decl = match line.strip_prefix("pub") {
            Some(r) if r.starts_with('(') => r.split_once(") ").map_or(line, |(_, d)| d),
            Some(r) => r.trim_start(),
            None => line,
        };
        if let Some(m) = decl.strip_prefix("mod ") {
            let m = m.trim_end_matches([';', '{', ' ']);
            names.insert(m.to_string(), m.to_string());
        } else if let Some(path) = decl
            .strip_prefix("use ")
            .filter(|p| !p.starts_with("crate::"))
        {
            let path = path.trim_end_matches(';');
            let module = path.split("::").next().unwrap_or_default().to_string();
            let last = path.rsplit("::").next().unwrap_or_default();
            for name in last.trim_matches(['{', '}']).split(',').map(str::trim) {
                let name = name.rsplit(" as ").next().unwrap_or(name);
                if !name.is_empty() {
                    names.insert(name.to_string(), module.clone());
                }
            }
        }
    }
    // A `#[macro_export]` macro is a root name too: the module of the file it is in.
    for file in rust_files(src) {
        let text = std::fs::read_to_string(&file).expect("a source file");
        let module = module_path(src, &file)
            .into_iter()
            .next()
            .unwrap_or_default();
        let mut exported = false;
        for line in text.lines().map(str::trim) {
            if let Some(name) = line.strip_prefix("macro_rules! ").filter(|_| exported) {
                let name = name.trim_end_matches([' ', '{']);
                names.insert(name.to_string(), module.clone());
            }
            exported = line == "#[macro_export]";
        }
    }
    names
}

/// The module path of a source file below `src` (`conduit/mem/region.rs` is
/// `[conduit, mem, region]`; a `mod.rs` is its folder's module).
fn module_path(src: &Path, file: &Path) -> Vec<String> {
    let rel = file.strip_prefix(src).expect("under src");
    let mut parts: Vec<String> = rel
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    let last = parts.pop().unwrap_or_default();
    if last != "mod.rs" {
        parts.push(last.trim_end_matches(".rs").to_string());
    }
    parts
}

/// The identifiers a path names first after the crate root: one, or each of a `{…}`
/// group's top-level entries.
fn first_names(rest: &str) -> Vec<String> {
    let ident = |s: &str| -> String {
        s.trim_start()
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect()
    };
    if !rest.starts_with('{') {
        return vec![ident(rest)];
    }
    let (mut depth, mut names, mut start) = (0, Vec::new(), 1);
    for (i, c) in rest.char_indices() {
        match c {
            '{' => depth += 1,
            '}' | ',' if depth == 1 => {
                names.push(ident(&rest[start..i]));
                start = i + 1;
                if c == '}' {
                    break;
                }
            }
            '}' => depth -= 1,
            _ => {}
        }
    }
    names.into_iter().filter(|n| !n.is_empty()).collect()
}

/// Every place under `src` where a file of a layer names something of a higher layer
/// (or a root name the test cannot place).
fn upward_paths(src: &Path) -> Vec<String> {
    let roots = root_names(src);
    let mut bad = Vec::new();
    for layer in LAYERS {
        let dir = src.join(layer);
        let files = if dir.is_dir() {
            rust_files(&dir)
        } else {
            vec![src.join(format!("{layer}.rs"))]
        };
        for file in files.into_iter().filter(|f| f.exists()) {
            check_file(src, &file, &roots, &mut bad);
        }
    }
    bad
}

fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).expect("source dir") {
        let path = entry.expect("entry").path();
        if path.is_dir() {
            out.extend(rust_files(&path));
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
    out
}

fn check_file(src: &Path, file: &Path, roots: &HashMap<String, String>, bad: &mut Vec<String>) {
    let text = std::fs::read_to_string(file).expect("source file");
    let module = module_path(src, file);
    let mine = layer_of(&module[0]);
    let line_of = |at: usize| text[..at].matches('\n').count() + 1;
    let mut report = |at: usize, name: &str, what: &str| {
        bad.push(format!(
            "{}:{}: layer `{}` {what} `{name}`",
            file.display(),
            line_of(at),
            module[0]
        ))
    };
    for (at, rest) in root_paths(&text, module.len()) {
        for name in first_names(rest) {
            match roots.get(&name) {
                Some(m) if layer_of(m) > mine => report(at, &name, "uses"),
                Some(_) => {}
                None => report(at, &name, "names a crate-root item the test cannot place:"),
            }
        }
    }
}

/// The spans of the inline modules (`mod name { … }`) of `text`.
fn inline_modules(text: &str) -> Vec<std::ops::Range<usize>> {
    let mut spans = Vec::new();
    for (i, _) in text.match_indices("mod ") {
        let after = &text[i + 4..];
        let name_len = after
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .count();
        if name_len == 0 || !after[name_len..].trim_start().starts_with('{') {
            continue;
        }
        let open = i + 4 + name_len + after[name_len..].find('{').unwrap_or(0);
        let mut depth = 0;
        for (j, c) in text[open..].char_indices() {
            match c {
                '{' => depth += 1,
                '}' => depth -= 1,
                _ => continue,
            }
            if depth == 0 {
                spans.push(open..open + j);
                break;
            }
        }
    }
    spans
}

/// Each path in `text` that starts at the crate root (`crate::`, `$crate::`, or enough
/// `super::` to climb the file's `depth` modules and the inline modules around it): its
/// offset, and the text after the root.
fn root_paths(text: &str, depth: usize) -> Vec<(usize, &str)> {
    let inline = inline_modules(text);
    let bytes = text.as_bytes();
    let word_before =
        |i: usize| i > 0 && (bytes[i - 1].is_ascii_alphanumeric() || bytes[i - 1] == b'_');
    let mut out = Vec::new();
    for (i, _) in text.match_indices("crate::") {
        if !word_before(i) {
            out.push((i, &text[i + 7..]));
        }
    }
    for (i, _) in text.match_indices("super::") {
        if word_before(i) || text[..i].ends_with("super::") {
            continue; // not a path's first `super`
        }
        let mut rest = &text[i..];
        let mut ups = 0;
        while let Some(r) = rest.strip_prefix("super::") {
            rest = r;
            ups += 1;
        }
        if ups >= depth + inline.iter().filter(|m| m.contains(&i)).count() {
            out.push((i, rest));
        }
    }
    out.sort_by_key(|p| p.0);
    out
}

#[test]
fn layers_only_use_layers_below() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let bad = upward_paths(&src);
    assert!(bad.is_empty(), "upward paths:\n{}", bad.join("\n"));
}

/// The test of the test: a made-up crate whose lower layers reach upward in every form
/// the check knows, beside paths that are allowed.
#[test]
fn the_check_catches_every_form_of_upward_path() {
    let src = std::env::temp_dir().join(format!("amrq-layering-{}", std::process::id()));
    let write = |rel: &str, text: &str| {
        let p = src.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    };
    write(
        "lib.rs",
        concat!(
            "pub(crate) mod util;\npub mod bootstrap;\npub mod conduit;\npub mod rq;\npub mod am;\n",
            "pub mod config;\npub use config::Config;\npub use rq::{QueueId, Rq as Queues};\n",
        ),
    );
    write(
        "conduit/mem/region.rs",
        concat!(
            "use crate::util::Backoff; use super::Ring; use crate::bootstrap::Boot;\n", // allowed
            "use crate::Config;\n",
            "use crate::{\n    util::x,\n    rq::QueueId,\n};\n",
            "fn f() -> super::super::super::am::Am { todo!() } mod t { use super::super::super::X; }\n",
            "/// [`Queues`](crate::Queues)\n",
            "macro_rules! m { () => { $crate::config::X } }\n",
            "use crate::Mystery;\n",
        ),
    );
    write(
        "rq/mod.rs",
        "use crate::conduit::Conduit; use crate::QueueId;\n",
    ); // allowed
    let bad = upward_paths(&src);
    std::fs::remove_dir_all(&src).unwrap();
    let lines: Vec<String> = bad
        .iter()
        .map(|b| {
            b.split(": layer")
                .next()
                .unwrap()
                .rsplit(':')
                .next()
                .unwrap()
                .to_string()
        })
        .collect();
    assert_eq!(lines, ["2", "3", "7", "8", "9", "10"], "{bad:#?}");
    assert!(bad[0].contains("uses `Config`"), "{}", bad[0]);
    assert!(bad[5].contains("cannot place"), "{}", bad[5]);
}
