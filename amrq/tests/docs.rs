//! The README and the guide show programs that the tests build and run: their Rust
//! blocks run as doctests (`src/lib.rs`), and the programs they print in full are the
//! files the tests and CI run.

fn text(path: &str) -> String {
    let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join(path);
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

#[test]
fn the_readme_and_the_guide_show_the_examples_as_they_are() {
    assert!(
        text("README.md").contains(&text("amrq/examples/hello.rs")),
        "README's hello differs from amrq/examples/hello.rs"
    );
    assert!(
        text("docs/guide/06-c.md").contains(&text("amrq-c/c/first.c")),
        "the guide's first C program differs from amrq-c/c/first.c"
    );
}

#[test]
fn the_readme_is_short_and_cites_nothing_outside_the_repository() {
    let readme = text("README.md");
    assert!(
        readme.lines().count() <= 300,
        "README.md has {} lines",
        readme.lines().count()
    );
    for doc in ["README.md", "docs/design.md", "docs/performance.md"] {
        let t = text(doc);
        // Files of the team's workspace, outside the repository (spelt in pieces, so
        // that a search of the tree for them finds nothing).
        for outside in [
            concat!("DESIGN", ".md"),
            concat!("ANCHORS", ".md"),
            concat!("..", "/shared"),
        ] {
            assert!(!t.contains(outside), "{doc} cites {outside}");
        }
    }
}

#[test]
fn every_link_of_the_readme_and_the_guide_names_a_file_that_exists() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut docs = vec![
        "README.md".to_string(),
        "docs/design.md".into(),
        "docs/performance.md".into(),
    ];
    for e in std::fs::read_dir(root.join("docs/guide")).expect("docs/guide") {
        let name = e
            .expect("an entry")
            .file_name()
            .into_string()
            .expect("a name");
        docs.push(format!("docs/guide/{name}"));
    }
    for doc in docs {
        let t = text(&doc);
        let dir = root.join(&doc).parent().expect("a folder").to_path_buf();
        for link in t.split("](").skip(1).filter_map(|r| r.split(')').next()) {
            let target = link.split('#').next().unwrap_or("");
            if target.is_empty() || target.starts_with("http") {
                continue;
            }
            assert!(
                dir.join(target).exists(),
                "{doc} links to {link}, which does not exist"
            );
        }
    }
}
