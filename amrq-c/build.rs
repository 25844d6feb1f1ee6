//! Generates `amrq.h` from the crate's `extern "C"` items (cbindgen) into `OUT_DIR`;
//! `tests/header.rs` checks that the committed `include/amrq.h` is the same.

fn main() {
    let dir = std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR");
    let out = std::env::var("OUT_DIR").expect("cargo sets OUT_DIR");
    println!("cargo:rerun-if-changed=src");
    println!("cargo:rerun-if-changed=cbindgen.toml");
    let config = cbindgen::Config::from_file(format!("{dir}/cbindgen.toml"))
        .expect("amrq-c/cbindgen.toml reads");
    match cbindgen::generate_with_config(&dir, config) {
        Ok(h) => {
            h.write_to_file(format!("{out}/amrq.h"));
        }
        Err(e) => panic!("cbindgen could not generate amrq.h: {e}"),
    }
}
