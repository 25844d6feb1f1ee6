//! The committed `include/amrq.h` is what cbindgen generates from the crate now: a
//! change to the C interface that did not regenerate it fails here.

#[test]
fn the_committed_header_is_the_generated_one() {
    let generated = std::fs::read_to_string(concat!(env!("OUT_DIR"), "/amrq.h"))
        .expect("build.rs wrote amrq.h");
    let committed = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/include/amrq.h"))
        .expect("amrq-c/include/amrq.h");
    assert!(
        generated == committed,
        "amrq-c/include/amrq.h is out of date: copy {}/amrq.h over it",
        env!("OUT_DIR")
    );
}
