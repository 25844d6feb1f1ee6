//! amrq's benchmark suite: Liu & Culler's microbenchmarks as the paper defines them,
//! the LogP signature of Begel et al. §6.1, the hardware references (a raw cache-line
//! round trip, a raw stream, a single-core copy) measured in the same run, and the peers (Open MPI, UCX, GASNet-EX) side by side.
//! The binary `amrq-bench` runs them; this library holds the benchmarks, the analysis
//! and the report so that tests can run them in tiny configurations.
//!
//! | module | benchmarks |
//! |---|---|
//! | [`unloaded`] | round-trip (and per destination), one-to-one, one-to-two, two-to-one |
//! | [`loaded`] | ring, traverse (messages and arrays) |
//! | [`mod@array`] | array transfer: blocking, non-blocking, two-to-one, swap, put vs memcpy |
//! | [`polling`] | unsuccessful polls per variant, successful poll by intersection |
//! | [`interrupts`] | hold/release toggle, overhead per message vs arrival interval |
//! | [`calls`] | calls with pending answers against the same exchange written by hand: round trip and a window in flight |
//! | [`mechanisms`] | StarT-Voyager's Express, Basic, Tag-On and DMA: overhead, latency, bandwidth; Remote Queues' Figure 4 and Table 2 |
//! | [`signature`] | bursts of k sends with Δ of computation: LogP's o_s, o_r, g, L |
//! | [`stream`] | one-way time and streaming per size; the peers' bandwidths; the barrier |
//! | [`threads`] | T threads of one rank sending to a peer against T single-threaded ranks: rate and per-send time against T |
//! | [`budget`] | instructions per message of the fast paths under callgrind, by task (AM paper Table 2), and the CI guard |
//! | [`c_layer`] | the C `pingpong` beside the Rust one, alternating: is the C interface a thin layer |
//! | [`peers`] | Open MPI, `ucx_perftest` and GASNet-EX's tests, as a table |
//! | [`child`] | a child process with a deadline (every program the suite starts) |
//! | [`suite`] | `all`: every benchmark, then the peers; [`results`] what it produced, [`files`] the report and plots written from it |
//! | [`programs`] | the commands outside the report: barrier, dispatch, exchange, kinds, rma, rq-loop |
//! | [`mod@reference`] | the hardware references: a raw cache-line round trip, a raw stream, memcpy |
//! | [`summary`] | the summary line every command ends with |

pub mod analysis;
pub mod array;
pub mod budget;
pub mod c_layer;
pub mod calls;
pub mod child;
pub mod clock;
pub mod collectives;
pub mod contact;
pub mod files;
pub mod fixture;
pub mod hosts;
pub mod interrupts;
pub mod loaded;
pub mod matmul;
pub mod mechanisms;
pub mod model;
pub mod peers;
pub mod plots;
pub mod polling;
pub mod programs;
pub mod progress;
pub mod reference;
pub mod report;
pub mod results;
pub mod shapes;
pub mod signature;
pub mod splitc;
pub mod startup;
pub mod stream;
pub mod suite;
pub mod summary;
pub mod threads;
pub mod unloaded;

/// How much to measure, and the clock to measure with.
#[derive(Debug, Clone, Copy)]
pub struct Params {
    /// Timed batches (each a sample of the median); one more runs first as a warm-up.
    pub batches: usize,
    /// The short configuration (CI, tests).
    pub quick: bool,
    /// The calibrated clock.
    pub clock: clock::Clock,
}

impl Params {
    /// `quick` or `full`, as configured.
    ///
    /// ```
    /// let p = amrq_bench::Params { batches: 3, quick: true, clock: amrq_bench::clock::Clock::calibrate() };
    /// assert_eq!(p.pick(1, 10), 1);
    /// ```
    pub fn pick(&self, quick: u64, full: u64) -> u64 {
        if self.quick {
            quick
        } else {
            full
        }
    }
}
