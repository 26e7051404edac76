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
            use tokio::signal::unix::{SignalKind, signal};
            let (Ok(mut term), Ok(mut int)) = (
                signal(SignalKind::terminate()),
                signal(SignalKind::interrupt()),
            ) else {
                error!("cannot handle SIGTERM and SIGINT: running until killed");
                // (the sender lives on: never stopped)
                return std::future::pending().await;
            };
            tokio::select! {
                _ = term.recv() => info!("SIGTERM: shutting down"),
                _ = int.recv() => info!("SIGINT: shutting down"),
            }
            let _ = tx.send(true);
        });
        Shutdown(rx)
    }

    pub async fn stopped(&self) {
        let mut rx = self.0.clone();
        let _ = rx.wait_for(|v| *v).await;
    }
}
