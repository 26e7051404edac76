//! Logs through `tracing` on stderr: human-readable by default, JSON on request. Every
//! line carries the container name (a span field). The level applies to sexton's own
//! events; libraries (the Kubernetes client, HTTP) are silent unless the level is debug or
//! trace: sexton reports their failures itself, once, with the address and the cause.
//!
//! Writing a log line must never stop the supervisor: stderr is a pipe shared with the
//! child, and a pipe nobody drains (or a closed one) would block or fail the single
//! event loop, and with it signal forwarding. Lines therefore go through a bounded queue
//! to a writer thread; when the queue is full, lines are dropped and counted. A crate
//! (tracing-appender) would do this with a channel library and a time library the in-pod
//! binary does not otherwise need.

use std::io::{self, Write};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, TrySendError, sync_channel};
use std::time::Duration;

use tracing_subscriber::filter::{LevelFilter, Targets};
use tracing_subscriber::fmt::MakeWriter;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;

use sexton_core::config::{LogFormat, LogLevel};

/// Lines waiting for the writer thread, at most.
const QUEUE: usize = 512;
/// How long the last lines may take to reach stderr when sexton exits.
const FLUSH_WAIT: Duration = Duration::from_millis(500);

enum Msg {
    Line(Vec<u8>),
    Flush(SyncSender<()>),
}

static SENDER: Mutex<Option<SyncSender<Msg>>> = Mutex::new(None);
static DROPPED: AtomicU64 = AtomicU64::new(0);

/// `libraries`: the level for other crates' events (the in-pod binary passes
/// `in_pod_libraries(level)`).
pub fn init(format: LogFormat, level: LogLevel, libraries: LevelFilter) {
    let filter = Targets::new()
        .with_target("sexton", tracing_level(level))
        .with_default(libraries);
    let writer = match start_writer() {
        Some(w) => w,
        None => return, // no thread: log nothing rather than risk blocking
    };
    let layer = tracing_subscriber::fmt::layer()
        .with_writer(writer)
        .with_target(false)
        .log_internal_errors(false);
    let registry = tracing_subscriber::registry().with(filter);
    let _ = match format {
        LogFormat::Text => registry.with(layer.with_ansi(false)).try_init(),
        LogFormat::Json => registry
            .with(layer.json().with_current_span(true).with_span_list(false))
            .try_init(),
    };
}

/// The in-pod binary's level for library events: none unless debugging.
pub fn in_pod_libraries(level: LogLevel) -> LevelFilter {
    if level >= LogLevel::Debug {
        LevelFilter::from_level(tracing_level(level))
    } else {
        LevelFilter::OFF
    }
}

fn tracing_level(level: LogLevel) -> tracing::Level {
    match level {
        LogLevel::Error => tracing::Level::ERROR,
        LogLevel::Warn => tracing::Level::WARN,
        LogLevel::Info => tracing::Level::INFO,
        LogLevel::Debug => tracing::Level::DEBUG,
        LogLevel::Trace => tracing::Level::TRACE,
    }
}

/// Starts the writer thread with every signal blocked (it inherits the mask at creation),
/// so that no process-directed signal, the child's SIGCHLD above all, is ever delivered
/// to it instead of to the supervisor's signalfd.
fn start_writer() -> Option<QueueWriter> {
    use nix::sys::signal::{SigSet, SigmaskHow, pthread_sigmask};
    let (tx, rx) = sync_channel::<Msg>(QUEUE);
    let mut old = SigSet::empty();
    pthread_sigmask(SigmaskHow::SIG_BLOCK, Some(&SigSet::all()), Some(&mut old)).ok()?;
    let spawned = std::thread::Builder::new()
        .name("log-writer".into())
        .stack_size(64 * 1024)
        .spawn(move || write_lines(rx));
    let _ = pthread_sigmask(SigmaskHow::SIG_SETMASK, Some(&old), None);
    spawned.ok()?;
    *SENDER.lock().unwrap_or_else(|e| e.into_inner()) = Some(tx.clone());
    Some(QueueWriter { tx })
}

fn write_lines(rx: Receiver<Msg>) {
    let mut stderr = io::stderr();
    while let Ok(msg) = rx.recv() {
        match msg {
            Msg::Line(line) => {
                let dropped = DROPPED.swap(0, Ordering::Relaxed);
                if dropped > 0 {
                    let note =
                        format!("sexton: {dropped} log lines dropped (stderr was not drained)\n");
                    let _ = stderr.write_all(note.as_bytes());
                }
                // a closed stderr is not sexton's problem: the line is lost, nothing else
                let _ = stderr.write_all(&line);
            }
            Msg::Flush(done) => {
                let _ = done.send(());
            }
        }
    }
}

/// Waits a bounded time for queued lines to be written (before exiting).
pub fn flush() {
    let Some(tx) = SENDER.lock().unwrap_or_else(|e| e.into_inner()).clone() else {
        return;
    };
    let (done_tx, done_rx) = sync_channel(1);
    if tx.try_send(Msg::Flush(done_tx)).is_ok() {
        let _ = done_rx.recv_timeout(FLUSH_WAIT);
    }
}

/// Writes one line to stderr directly, ignoring failure (a closed pipe must not turn a
/// configuration error into an abort). For messages before logging is set up.
pub fn stderr_line(line: &str) {
    let _ = writeln!(io::stderr(), "{line}");
}

/// Writes one line to stdout, ignoring failure.
pub fn stdout_line(line: &str) {
    let _ = writeln!(io::stdout(), "{line}");
}

#[derive(Clone)]
pub struct QueueWriter {
    tx: SyncSender<Msg>,
}

/// One event's bytes, queued as one line when dropped.
pub struct LineBuf {
    tx: SyncSender<Msg>,
    buf: Vec<u8>,
}

impl Write for LineBuf {
    fn write(&mut self, b: &[u8]) -> io::Result<usize> {
        self.buf.extend_from_slice(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Drop for LineBuf {
    fn drop(&mut self) {
        if self.buf.is_empty() {
            return;
        }
        let line = std::mem::take(&mut self.buf);
        if let Err(TrySendError::Full(_)) = self.tx.try_send(Msg::Line(line)) {
            DROPPED.fetch_add(1, Ordering::Relaxed);
        }
    }
}

impl<'a> MakeWriter<'a> for QueueWriter {
    type Writer = LineBuf;
    fn make_writer(&'a self) -> LineBuf {
        LineBuf {
            tx: self.tx.clone(),
            buf: Vec::with_capacity(256),
        }
    }
}
