//! A connection's reads in its TLS handshake, which can be made to wait for a turn of its
//! client address (`server.rs`): after a HelloRetryRequest, the server signs the client's
//! second ClientHello, so that ClientHello must be processed in a turn, as the first one's
//! reply was. The turn is taken only once bytes of it are there to read, and given back with
//! the server's next write (its reply, signed), so that a client that stalls after the
//! HelloRetryRequest, or after the reply, holds no turn. (Before, the turn was kept for up
//! to 1 s after every reply, in case a second ClientHello came: a client at the API
//! server's address that stalled there made the API server's handshakes wait a second
//! each.)

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio::sync::{AcquireError, OwnedSemaphorePermit, Semaphore};

type Acquiring = Pin<Box<dyn Future<Output = Result<OwnedSemaphorePermit, AcquireError>> + Send>>;

/// A TCP connection whose next read can be made to wait for one of `turns`.
pub struct RetryTurn {
    io: TcpStream,
    /// The address's turns, when the next read needs one.
    turns: Option<Arc<Semaphore>>,
    acquiring: Option<Acquiring>,
    turn: Option<OwnedSemaphorePermit>,
}

impl RetryTurn {
    pub fn new(io: TcpStream) -> Self {
        RetryTurn {
            io,
            turns: None,
            acquiring: None,
            turn: None,
        }
    }

    /// The next read waits, once the client's bytes are there, for one of `turns`, held
    /// until the server's next write.
    pub fn next_read_in_turn(&mut self, turns: Arc<Semaphore>) {
        self.turns = Some(turns);
    }

    /// Before a write: the reply to what was read in the turn is signed, and the turn goes
    /// back.
    fn give_back(&mut self) {
        if self.turn.take().is_some() {
            self.turns = None;
        }
    }
}

impl AsyncRead for RetryTurn {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if let (Some(turns), None) = (&this.turns, &this.turn) {
            // (a client that sends nothing waits without a turn)
            ready!(this.io.poll_read_ready(cx))?;
            let acquiring = this
                .acquiring
                .get_or_insert_with(|| Box::pin(turns.clone().acquire_owned()));
            let turn = ready!(acquiring.as_mut().poll(cx)).map_err(io::Error::other)?;
            this.acquiring = None;
            this.turn = Some(turn);
        }
        let read = Pin::new(&mut this.io).poll_read(cx, buf);
        if read.is_pending() {
            // (the readiness was stale, or the rest of the ClientHello is still on its way:
            // no turn while waiting for it)
            this.turn = None;
        }
        read
    }
}

impl AsyncWrite for RetryTurn {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        this.give_back();
        Pin::new(&mut this.io).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        this.give_back();
        Pin::new(&mut this.io).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures_util::FutureExt;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    #[tokio::test]
    async fn the_turn_is_taken_for_a_read_that_gets_bytes_and_given_back_with_the_next_write() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let mut client = TcpStream::connect(listener.local_addr().unwrap())
            .await
            .unwrap();
        let mut conn = RetryTurn::new(listener.accept().await.unwrap().0);
        let turns = Arc::new(Semaphore::new(1));
        conn.next_read_in_turn(turns.clone());
        let mut buf = [0u8; 8];
        // nothing sent: the read waits without a turn
        assert!(conn.read(&mut buf).now_or_never().is_none());
        assert_eq!(turns.available_permits(), 1);
        // while another holds the turn, bytes that arrive wait for it
        let other = turns.clone().try_acquire_owned().unwrap();
        client.write_all(b"hello").await.unwrap();
        let mut read = std::pin::pin!(conn.read(&mut buf));
        for _ in 0..3 {
            assert!((&mut read).now_or_never().is_none());
            tokio::task::yield_now().await;
        }
        drop(other);
        assert_eq!(read.await.unwrap(), 5);
        assert_eq!(turns.available_permits(), 0, "read in the turn");
        conn.write_all(b"reply").await.unwrap();
        assert_eq!(turns.available_permits(), 1, "given back with the reply");
        // and the next read needs none
        client.write_all(b"more").await.unwrap();
        assert_eq!(conn.read(&mut buf).await.unwrap(), 4);
        assert_eq!(turns.available_permits(), 1);
    }
}
