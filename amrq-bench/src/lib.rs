//! amrq's benchmark suite (issue 11, in progress): Liu & Culler's microbenchmarks as
//! the paper defines them, with the references of DESIGN.md "Conventions" measured in
//! the same run. The binary `amrq-bench` runs them; this library holds the benchmarks
//! and the analysis so that tests can run them in tiny configurations.

pub mod analysis;
pub mod report;
pub mod unloaded;
