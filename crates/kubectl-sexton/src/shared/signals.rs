//! SIGTERM and SIGINT, the signals that stop a long-running subcommand gracefully.

use tracing::{error, info};

/// A shutdown signal that can be awaited from several places.
#[derive(Clone)]
pub struct Shutdown(tokio::sync::watch::Receiver<bool>);

impl Shutdown {
    /// SIGTERM or SIGINT, from now on (inside the runtime).
    pub fn on_signals() -> Shutdown {
        let (tx, rx) = tokio::sync::watch::channel(false);
        tokio::spawn(async move {
            let Ok(signal) = first_signal().await else {
                error!("cannot handle SIGTERM and SIGINT: running until killed");
                // (the sender lives on: never stopped)
                return std::future::pending().await;
            };
            info!("{signal}: shutting down");
            let _ = tx.send(true);
        });
        Shutdown(rx)
    }

    pub async fn stopped(&self) {
        let mut rx = self.0.clone();
        let _ = rx.wait_for(|v| *v).await;
    }
}

/// The first of SIGTERM and SIGINT, by name; an error if they cannot be handled.
#[cfg(unix)]
async fn first_signal() -> std::io::Result<&'static str> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate())?;
    let mut int = signal(SignalKind::interrupt())?;
    Ok(tokio::select! {
        _ = term.recv() => "SIGTERM",
        _ = int.recv() => "SIGINT",
    })
}

/// Ctrl-C, the one signal of a Windows console (the plugin's build for the desktop: the
/// server commands run in the cluster, on Linux).
#[cfg(not(unix))]
async fn first_signal() -> std::io::Result<&'static str> {
    tokio::signal::ctrl_c().await.map(|()| "Ctrl-C")
}
