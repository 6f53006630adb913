//! The progress bar of `add` and `filter-new` on stderr: lines, new keys,
//! rate, and for file inputs the fraction done. Drawn only when stderr is a
//! terminal; a pipe or a file gets nothing.

use std::cell::Cell;
use std::io::{self, IsTerminal};
use std::rc::Rc;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// A progress bar, or nothing when stderr is not a terminal.
pub struct Progress {
    bar: Option<ProgressBar>,
    /// Stdout is a terminal too (most likely the bar's): printed lines
    /// take the bar off it first ([`Progress::suspend`]).
    shared: bool,
    bytes: Rc<Cell<u64>>,
    start: Instant,
}

impl Progress {
    /// A bar for `command`; `total` bytes of input when known, with
    /// `bytes` counting what has been read.
    pub fn new(command: &str, total: Option<u64>, bytes: Rc<Cell<u64>>) -> Progress {
        let start = Instant::now();
        if !io::stderr().is_terminal() {
            return Progress {
                bar: None,
                shared: false,
                bytes,
                start,
            };
        }
        let bar = match total {
            Some(t) if t > 0 => {
                let bar = ProgressBar::with_draw_target(Some(t), ProgressDrawTarget::stderr());
                let style = ProgressStyle::with_template(&format!(
                    "{command} [{{bar:30}}] {{percent:>3}}% {{msg}} {{elapsed}}<{{eta}}"
                ))
                .unwrap_or_else(|_| ProgressStyle::default_bar())
                .progress_chars("=> ");
                bar.set_style(style);
                bar
            }
            _ => {
                let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr());
                let style = ProgressStyle::with_template(&format!(
                    "{command} {{spinner}} {{msg}} {{elapsed}}"
                ))
                .unwrap_or_else(|_| ProgressStyle::default_spinner());
                bar.set_style(style);
                bar
            }
        };
        bar.enable_steady_tick(Duration::from_millis(200));
        Progress {
            bar: Some(bar),
            shared: io::stdout().is_terminal(),
            bytes,
            start,
        }
    }

    /// Shows `lines` read and `new` keys so far.
    pub fn update(&self, lines: u64, new: u64) {
        if let Some(bar) = &self.bar {
            bar.set_position(self.bytes.get());
            bar.set_message(summary(lines, new, self.start.elapsed()));
        }
    }

    /// Runs `f` with the bar taken off the terminal, then draws it again
    /// below what `f` printed. Output printed beside the bar (stdout on
    /// the same terminal) would otherwise share its row, and the bar's next
    /// redraw would clear the rows above it that it took for its own.
    /// Stdout elsewhere (a pipe, a file) runs `f` with the bar left as it
    /// is: no clearing and drawing again at every batch.
    pub fn suspend<R>(&self, f: impl FnOnce() -> R) -> R {
        match &self.bar {
            Some(bar) if self.shared => bar.suspend(f),
            _ => f(),
        }
    }

    /// Removes the bar from the terminal.
    pub fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}

/// `1200000 lines, 350000 new, 812000 lines/s`.
pub fn summary(lines: u64, new: u64, elapsed: Duration) -> String {
    let secs = elapsed.as_secs_f64();
    let rate = if secs > 0.0 {
        (lines as f64 / secs).round() as u64
    } else {
        0
    };
    format!("{lines} lines, {new} new, {rate} lines/s")
}
