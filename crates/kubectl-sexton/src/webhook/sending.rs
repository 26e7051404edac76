//! An answer's way back to its client: room for it in the answers' budget and in its
//! client's share (`limits::ANSWER_BUDGET`), taken once it is built and before its turn is
//! given back; its bytes handed to the connection a piece at a time
//! (`limits::ANSWER_PIECE`), each piece a copy that carries the answer's room, so that what
//! the client has not read stays counted wherever it waits (the answer, hyper's and h2's
//! buffers); and a deadline (`limits::SEND_DEADLINE`) after which a connection that still
//! holds a piece of the answer is closed, which gives the room back.
//!
//! Before, a whole answer went to the connection at once: a client that read nothing kept
//! it, outside any budget, for as long as its connection stayed open. (And pieces cut from
//! the answer's buffer without a copy kept the whole buffer alive in the last one.)

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use axum::body::{Body, Bytes};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use http_body::{Frame, SizeHint};
use tokio::sync::{Semaphore, watch};

use super::limits::{
    ANSWER_PIECE, ClientShare, Kind, MAX_ANSWER_BYTES, Room, SEND_DEADLINE, answer_room,
};
use tracing::debug;

/// The connection a request came on: set when one of its answers was not taken within
/// [`SEND_DEADLINE`], and `server.rs` then closes it. (`server.rs` puts it in each
/// request's extensions, with the client's share.)
#[derive(Clone)]
pub struct Overdue(pub Arc<watch::Sender<bool>>);

/// Where a request's answer goes: the kind of review, whose budgets it takes; its client's
/// share of them (none for the API server's connections: `clients.rs`); and its connection.
pub struct Reply {
    kind: Kind,
    client: Option<Arc<Semaphore>>,
    overdue: Option<Overdue>,
}

impl Reply {
    /// The client's share, when it counts.
    pub fn client(&self) -> Option<&Arc<Semaphore>> {
        self.client.as_ref()
    }

    /// From a request's extensions, for a review of `kind`.
    pub fn of(extensions: &axum::http::Extensions, kind: Kind) -> Reply {
        Reply {
            kind,
            client: extensions
                .get::<ClientShare>()
                .map(|share| share.of(kind).clone()),
            overdue: extensions.get::<Overdue>().cloned(),
        }
    }

    /// The answer that refuses the review.
    pub fn refusal(&self, refused: &super::limits::Refused) -> Response {
        refused
            .answer(self.kind, self.client.is_some())
            .into_response()
    }

    /// `response`, counted in `budget` (and the client's share, where the room of the
    /// review's body, `carried`, is carried over: `limits::answer_room`) until the connection has written it,
    /// and paced; a 503 when there is no room for it, a 500 for one longer than
    /// [`MAX_ANSWER_BYTES`] (a Pod's answer never is, `answer.rs`; a stamp's from a forged
    /// review may be). To be called before the review's turn is given back: the answers
    /// that wait for room are then as many as the turns.
    pub async fn send(
        self,
        response: Response,
        budget: &Arc<Semaphore>,
        carried: Room,
    ) -> Response {
        let (parts, body) = response.into_parts();
        // (every answer is built whole: this takes no time)
        let whole = match axum::body::to_bytes(body, MAX_ANSWER_BYTES).await {
            Ok(whole) => whole,
            Err(_) => {
                let why = format!(
                    "the answer is longer than the webhook sends ({MAX_ANSWER_BYTES} bytes)\n"
                );
                return (StatusCode::INTERNAL_SERVER_ERROR, why).into_response();
            }
        };
        // (a copy of its exact length: the buffer it was built in may have up to twice
        // that, which the room would not count)
        let answer = Bytes::copy_from_slice(&whole);
        drop(whole);
        let room = match answer_room(answer.len(), budget, carried, self.client.as_ref()).await {
            Ok(room) => room,
            Err(refused) => {
                debug!(bytes = answer.len(), "no room for the answer");
                return self.refusal(&refused);
            }
        };
        let deadline = self.overdue.map(|Overdue(overdue)| {
            tokio::spawn(async move {
                tokio::time::sleep(SEND_DEADLINE).await;
                overdue.send_replace(true);
            })
            .abort_handle()
        });
        let held = Arc::new(Held {
            _room: room,
            deadline,
        });
        Response::from_parts(parts, Body::new(Paced { answer, held }))
    }
}

/// What an answer holds until the connection has dropped its last piece: its room, and its
/// deadline (aborted when dropped).
struct Held {
    _room: Room,
    deadline: Option<tokio::task::AbortHandle>,
}

impl Drop for Held {
    fn drop(&mut self) {
        if let Some(deadline) = &self.deadline {
            deadline.abort();
        }
    }
}

/// An answer given to the connection in pieces of at most [`ANSWER_PIECE`] bytes, each a
/// copy that holds the answer's [`Held`]: the room is given back, and the deadline called
/// off, once the connection has dropped every piece (written them to TLS), wherever one
/// waits. (A stream whose window the client keeps shut keeps its piece, and the room.)
struct Paced {
    /// What is left to give.
    answer: Bytes,
    held: Arc<Held>,
}

/// One piece: its bytes, and the answer's [`Held`].
struct Piece {
    bytes: Vec<u8>,
    _held: Arc<Held>,
}

impl AsRef<[u8]> for Piece {
    fn as_ref(&self) -> &[u8] {
        &self.bytes
    }
}

impl http_body::Body for Paced {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        if self.answer.is_empty() {
            return Poll::Ready(None);
        }
        let n = self.answer.len().min(ANSWER_PIECE);
        let piece = Piece {
            bytes: self.answer.split_to(n).to_vec(),
            _held: self.held.clone(),
        };
        if self.answer.is_empty() {
            // (the answer's own buffer goes now, not with the body)
            self.answer = Bytes::new();
        }
        Poll::Ready(Some(Ok(Frame::data(Bytes::from_owner(piece)))))
    }

    fn is_end_stream(&self) -> bool {
        self.answer.is_empty()
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::with_exact(self.answer.len() as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body::Body as _;
    use http_body_util::BodyExt;

    #[tokio::test]
    async fn an_answer_is_given_in_pieces_that_hold_its_room() {
        let budget = Arc::new(Semaphore::new(4096));
        let answer = vec![7u8; 2 * ANSWER_PIECE + 5];
        let response = (
            [(axum::http::header::CONTENT_TYPE, "application/json")],
            answer.clone(),
        )
            .into_response();
        let reply = Reply {
            kind: Kind::Pods,
            client: None,
            overdue: None,
        };
        let no_body = Room::none(&budget);
        let mut body = reply.send(response, &budget, no_body).await.into_body();
        assert_eq!(body.size_hint().exact(), Some(answer.len() as u64));
        let mut pieces = vec![];
        while let Some(frame) = body.frame().await {
            pieces.push(frame.unwrap().into_data().unwrap());
        }
        let lengths: Vec<usize> = pieces.iter().map(Bytes::len).collect();
        assert_eq!(lengths, [ANSWER_PIECE, ANSWER_PIECE, 5]);
        drop(body);
        // (the connection still holds the last piece: the room too)
        let last = pieces.pop().unwrap();
        drop(pieces);
        assert!(
            budget.available_permits() < 4096,
            "room given back with a piece still held"
        );
        drop(last);
        assert_eq!(budget.available_permits(), 4096);
    }

    #[tokio::test]
    async fn an_answer_too_long_is_not_sent() {
        let budget = Arc::new(Semaphore::new(4096));
        let response = vec![b' '; MAX_ANSWER_BYTES + 1].into_response();
        let reply = Reply {
            kind: Kind::Pods,
            client: None,
            overdue: None,
        };
        let sent = reply.send(response, &budget, Room::none(&budget)).await;
        assert_eq!(sent.status(), StatusCode::INTERNAL_SERVER_ERROR);
        assert_eq!(budget.available_permits(), 4096);
    }
}
