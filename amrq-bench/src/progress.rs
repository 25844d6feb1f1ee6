//! A suite's progress on stderr, drawn by `indicatif`: the job running, how many are
//! done of how many, the time so far and an estimate of the time left. Nothing is drawn
//! when stderr is not a terminal (a CI log, a file), so that logs hold only results.

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::time::Duration;

/// The progress of `total` steps (or of steps not counted ahead, with `None`).
///
/// ```
/// let p = amrq_bench::progress::Progress::new(Some(2));
/// p.start("pingpong");
/// p.start("stream"); // the step before is done
/// p.finish();
/// ```
pub struct Progress {
    bar: ProgressBar,
}

impl Progress {
    /// A bar of `total` steps on stderr (a spinner without one), hidden when stderr is
    /// not a terminal.
    pub fn new(total: Option<usize>) -> Self {
        let target = ProgressDrawTarget::stderr();
        let (bar, template) = match total {
            Some(n) => (
                ProgressBar::with_draw_target(Some(n as u64), target),
                "[{bar:24}] {pos}/{len} {elapsed} elapsed, ~{eta} left · {msg}",
            ),
            None => (
                ProgressBar::with_draw_target(None, target),
                "{spinner} {elapsed} elapsed · {msg}",
            ),
        };
        if let Ok(style) = ProgressStyle::with_template(template) {
            bar.set_style(style.progress_chars("#>."));
        }
        // Redrawn while a step runs, so that the time moves on a long job.
        bar.enable_steady_tick(Duration::from_millis(250));
        Self { bar }
    }

    /// Starts the step `what`: the one before it is done.
    pub fn start(&self, what: impl Into<String>) {
        if !self.bar.message().is_empty() {
            self.bar.inc(1);
        }
        self.bar.set_message(what.into());
    }

    /// Says what the running step is doing, without ending it.
    pub fn note(&self, what: impl Into<String>) {
        self.bar.set_message(what.into());
    }

    /// Ends the last step and clears the bar.
    pub fn finish(self) {
        self.bar.finish_and_clear();
    }
}
