//! Lines on standard error written whole: one `write(2)` per line, so that the lines
//! of ranks sharing a terminal or a launcher's pipe never interleave mid-line
//! (`eprintln!` writes each piece of its format separately).

use std::io::Write;

/// Writes `line` and a newline to standard error in one `write(2)`; an error writing is
/// dropped, as `eprintln!`'s would panic on a closed stderr for no gain.
///
/// ```
/// amrq::util::say("amrq: rank 0: a line on its own");
/// ```
pub fn say(line: &str) {
    let mut whole = String::with_capacity(line.len() + 1);
    whole.push_str(line);
    whole.push('\n');
    let _ = std::io::stderr().lock().write_all(whole.as_bytes());
}
