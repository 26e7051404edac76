//! An answer's way back to its client: room for it in the answers' budget and in its
//! client's share (`limits::ANSWER_BUDGET`), taken once it is built; its bytes handed to the
//! connection a piece at a time (`limits::ANSWER_PIECE`), so that what the client has not
//! read stays counted here; and a deadline (`limits::SEND_DEADLINE`) after which a
//! connection that has not taken the last piece is closed, which gives the room back.
//!
//! Before, a whole answer went to the connection at once: a client that read nothing kept
//! it, outside any budget, for as long as its connection stayed open.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};

use axum::body::{Body, Bytes};
use axum::response::{IntoResponse, Response};
use http_body::{Body as _, Frame, SizeHint};
use tokio::sync::{Semaphore, watch};

use super::limits::{
    ANSWER_PIECE, ClientShare, MAX_ANSWER_BYTES, Room, SEND_DEADLINE, answer_room,
};

/// The connection a request came on: set when one of its answers was not taken within
/// [`SEND_DEADLINE`], and `server.rs` then closes it. (`server.rs` puts it in each
/// request's extensions, with the client's share.)
#[derive(Clone)]
pub struct Overdue(pub Arc<watch::Sender<bool>>);

/// Where a request's answer goes: its client's share (when the pool counts shares) and its
/// connection.
pub struct Reply {
    client: Option<ClientShare>,
    overdue: Option<Overdue>,
}

impl Reply {
    /// From a request's extensions; `per_client`: whether the client's share counts.
    pub fn of(extensions: &axum::http::Extensions, per_client: bool) -> Reply {
        Reply {
            client: extensions
                .get::<ClientShare>()
                .filter(|_| per_client)
                .cloned(),
            overdue: extensions.get::<Overdue>().cloned(),
        }
    }

    /// `response`, paced and counted in `budget` (and the client's share) until it is
    /// taken; or, when there is no room for it within `limits::BUDGET_WAIT`, a 503.
    pub async fn send(self, response: Response, budget: &Arc<Semaphore>) -> Response {
        // (every answer is built whole, so its length is known; an unknown one counts as
        // the longest)
        let bytes = response
            .body()
            .size_hint()
            .exact()
            .map_or(MAX_ANSWER_BYTES, |n| n as usize);
        let room = match answer_room(bytes, budget, self.client.as_ref()).await {
            Ok(room) => room,
            Err(refused) => return refused.answer().into_response(),
        };
        let deadline = self.overdue.map(|Overdue(overdue)| {
            tokio::spawn(async move {
                tokio::time::sleep(SEND_DEADLINE).await;
                overdue.send_replace(true);
            })
            .abort_handle()
        });
        let held = Held {
            _room: room,
            deadline,
        };
        response.map(|body| {
            Body::new(Paced {
                body,
                piece: Bytes::new(),
                held: Some(held),
            })
        })
    }
}

/// What an answer holds until its last piece is taken: its room, and its deadline (aborted
/// when dropped).
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

/// A body given to the connection in pieces of at most [`ANSWER_PIECE`] bytes; what it
/// holds is given back when the connection drops it, which it does once it has put the last
/// piece in its buffers (HTTP/2: once the stream's window let it; a stream whose window
/// stays shut keeps its last piece in hand, and the body with it, until the deadline).
struct Paced {
    body: Body,
    /// What is left of the frame being given.
    piece: Bytes,
    held: Option<Held>,
}

impl http_body::Body for Paced {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        loop {
            if !self.piece.is_empty() {
                let n = self.piece.len().min(ANSWER_PIECE);
                return Poll::Ready(Some(Ok(Frame::data(self.piece.split_to(n)))));
            }
            match ready!(Pin::new(&mut self.body).poll_frame(cx)) {
                Some(Ok(frame)) => match frame.into_data() {
                    Ok(data) => self.piece = data,
                    Err(other) => return Poll::Ready(Some(Ok(other))),
                },
                Some(Err(e)) => return Poll::Ready(Some(Err(e))),
                None => {
                    self.held = None;
                    return Poll::Ready(None);
                }
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.piece.is_empty() && self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        let body = self.body.size_hint();
        let mut hint = SizeHint::new();
        hint.set_lower(body.lower() + self.piece.len() as u64);
        if let Some(upper) = body.upper() {
            hint.set_upper(upper + self.piece.len() as u64);
        }
        hint
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::BodyExt;

    #[tokio::test]
    async fn an_answer_is_given_in_pieces_and_its_room_back_once_dropped() {
        let budget = Arc::new(Semaphore::new(4096));
        let answer = vec![7u8; 2 * ANSWER_PIECE + 5];
        let response = (
            [(axum::http::header::CONTENT_TYPE, "application/json")],
            answer.clone(),
        )
            .into_response();
        let reply = Reply {
            client: None,
            overdue: None,
        };
        let mut body = reply.send(response, &budget).await.into_body();
        assert_eq!(body.size_hint().exact(), Some(answer.len() as u64));
        let mut pieces = vec![];
        while !body.is_end_stream() {
            let data = body.frame().await.unwrap().unwrap().into_data().unwrap();
            pieces.push(data.len());
        }
        assert_eq!(pieces, [ANSWER_PIECE, ANSWER_PIECE, 5]);
        // (given back when the connection drops the body, having put the last piece in its
        // buffers)
        assert!(
            budget.available_permits() < 4096,
            "room given back with the last piece"
        );
        drop(body);
        assert_eq!(budget.available_permits(), 4096);
    }
}
