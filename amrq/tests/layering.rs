//! Each layer uses only the layers below it (DESIGN.md, "Layers"). This test reads the
//! sources and fails on an upward `crate::` path, so the folders keep telling the truth.

#![cfg(not(amrq_loom))]

use std::path::Path;

/// Bottom to top. `util`, `sync` and `reference` are helpers any layer may use;
/// `threads` (the job runner) and `config` sit at the top.
const LAYERS: &[&str] = &["bootstrap", "conduit", "rq", "am", "rma", "coll"];
const TOP: &[&str] = &["threads", "config"];

fn layer_of(module: &str) -> Option<usize> {
    LAYERS
        .iter()
        .position(|l| *l == module)
        .or_else(|| TOP.contains(&module).then_some(LAYERS.len()))
}

fn check(dir: &Path, layer: usize, name: &str, bad: &mut Vec<String>) {
    for entry in std::fs::read_dir(dir).expect("source dir") {
        let path = entry.expect("entry").path();
        if path.is_dir() {
            check(&path, layer, name, bad);
            continue;
        }
        let text = std::fs::read_to_string(&path).expect("source file");
        for (n, line) in text.lines().enumerate() {
            let mut rest = line;
            while let Some(i) = rest.find("crate::") {
                let used: String = rest[i + 7..]
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect();
                // Config is data every layer may read.
                if let Some(l) = layer_of(&used) {
                    if l > layer && used != "config" {
                        bad.push(format!(
                            "{}:{}: layer `{name}` uses `crate::{used}`",
                            path.display(),
                            n + 1
                        ));
                    }
                }
                rest = &rest[i + 7..];
            }
        }
    }
}

#[test]
fn layers_only_use_layers_below() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut bad = Vec::new();
    for (layer, name) in LAYERS.iter().enumerate() {
        check(&src.join(name), layer, name, &mut bad);
    }
    assert!(bad.is_empty(), "upward imports:\n{}", bad.join("\n"));
}
