//! What one review may cost: the body's size and how long it may take to arrive, how many
//! JSON values it may hold, how many containers its Pod may have, how large the answer may
//! be, how many reviews are worked on at once, and how many bytes of bodies and of answers
//! not yet read are held. A review over a limit is answered (an HTTP error for a body that
//! is not a review, else the Pod admitted unchanged with a warning that names the limit):
//! the webhook's memory stays bounded whatever arrives and whatever is not read.

use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::http::{HeaderMap, StatusCode, header};
use http_body_util::BodyExt;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// The API server sends at most about 3 MiB (its request limit); more is not from it.
pub const MAX_REVIEW_BYTES: usize = 3 << 20;
/// The body must have arrived this long after the request head.
pub const BODY_TIMEOUT: Duration = Duration::from_secs(10);
/// JSON values (objects, lists, scalars) in one review. A real Pod has a few thousand; a
/// body of 3 MiB of `[0,0,...]` has 1.5 million, 48 MB once parsed, and more in copies.
pub const MAX_JSON_VALUES: usize = 100_000;
/// Reviews worked on at once (parsed, injected, answered); others wait their turn. One
/// review at the body and value limits peaks at about 50 MB (the tree and the copy the
/// injection works on; BENCHMARKS.md), so two stay well under the chart's 256Mi.
pub const CONCURRENT_REVIEWS: usize = 2;
/// Bytes of request bodies held at once, whole or arriving, by every connection together:
/// each frame is counted as it arrives (so a slow body holds only what it sent), and the
/// body's share is given back once it is parsed; a frame beyond it waits at most
/// [`BUDGET_WAIT`]. Without it, bodies were read whole before a review's turn: 32 complete
/// bodies of 3 MiB waiting for the turns took 126 MiB, and nothing bounded the number.
/// With the connections' own buffers bounded (`server.rs`: HTTP/1 16 KiB, HTTP/2 windows
/// of 32 KiB a stream and 128 KiB a connection), the webhook's memory is bounded by this,
/// the reviews' turns and the connections.
pub const BODY_BUDGET: usize = 32 << 20;
/// How long a frame waits for room in the budget before its review is refused as busy
/// (503, the failurePolicy applies), giving back what it held: bodies that each hold part
/// of the budget and wait for more would otherwise wait for one another until their
/// deadline.
pub const BUDGET_WAIT: Duration = Duration::from_secs(1);
/// The budget's unit (a semaphore's permits are counted in u32).
const BUDGET_UNIT: usize = 1 << 10;
// (a body's buffer, grown up to the size limit, must fit a client's shares and the stamps'
// budget, or it would never fit)
const _: () = assert!(
    MAX_REVIEW_BYTES <= CLIENT_BODY_SHARE
        && MAX_REVIEW_BYTES <= STAMP_CLIENT_SHARE
        && STAMP_CLIENT_SHARE < STAMP_BODY_BUDGET
);
// (nor would the longest answer)
const _: () = assert!(
    MAX_ANSWER_BYTES <= CLIENT_BODY_SHARE
        && MAX_ANSWER_BYTES <= STAMP_CLIENT_SHARE
        && MAX_ANSWER_BYTES <= ANSWER_BUDGET
        && MAX_ANSWER_BYTES <= STAMP_ANSWER_BUDGET
);

/// The part of the budgets one client (an address) may hold, its bodies and its answers not
/// yet read together: without it, one connection with a few HTTP/2 streams of 3 MiB that
/// stall would hold the whole body budget and leave every other client's review refused as
/// busy. The API server sends every user's Pods from one address or a few: 12 MiB is
/// hundreds of usual reviews, or four at the size limit, at once. (With `--client-ca-file`
/// the API server's connections have no share: the budgets are theirs whole, since no
/// other client gets past the handshake; `clients.rs`.)
pub const CLIENT_BODY_SHARE: usize = 12 << 20;
/// Bytes of the EphemeralJob requester's stamps held at once: a budget of their own (an
/// EphemeralJob is a few kB), so that a stamp never waits behind Pods.
pub const STAMP_BODY_BUDGET: usize = 4 << 20;
/// The part of the stamps' budgets one client address may hold (bodies and answers
/// together, as [`CLIENT_BODY_SHARE`]): the least that holds one body at the size limit, so
/// that one address that fills its share (forged stamps of a megabyte that it does not read)
/// leaves a megabyte, hundreds of real stamps, to the others. A share of its own, not the
/// address's Pods' share: the API server's stamps must not wait behind its Pods.
pub const STAMP_CLIENT_SHARE: usize = MAX_REVIEW_BYTES;
/// Bytes of answers held at once until their clients have read them, by every connection
/// together (the client's share, [`CLIENT_BODY_SHARE`], counts them with its bodies): an
/// answer takes room for its length once it is built, in its review's turn (`answer_room`:
/// the global budget waited for at most [`BUDGET_WAIT`], the client's share not at all),
/// and gives it back once the connection has written its last piece ([`ANSWER_PIECE`];
/// `sending.rs`). Without it, answers were held whole until read: 64
/// connections from one address that never read answers of 1.2 MB (a Pod's long command,
/// which `wrap`'s patch repeats) took 101 MiB more, for as long as they stayed open (22 MiB
/// with it). A usual answer is a few kB; this is a dozen at the patch limit.
pub const ANSWER_BUDGET: usize = 16 << 20;
/// The stamps' answers' own (as their bodies').
pub const STAMP_ANSWER_BUDGET: usize = 4 << 20;
/// An answer is handed to its connection in pieces of this size, each when the connection
/// has written the last (HTTP/1: its 16 KiB buffer; HTTP/2: the stream's window and send
/// buffer): what a client has not read stays in the answer's room, not in the connection's
/// buffers, where no budget would see it.
pub const ANSWER_PIECE: usize = 16 << 10;
/// A connection that still holds a piece of an answer this long after the answer found
/// room is closed (its other streams with it): a client that reads nothing gives back its
/// answers' room by then. The API server reads its answers at once.
pub const SEND_DEADLINE: Duration = Duration::from_secs(10);
/// How long a review whose body was read waits for a turn before it is refused as busy
/// (503): past the longest `timeoutSeconds` an API server gives a webhook, 30 s, nobody
/// waits for its answer.
pub const TURN_WAIT: Duration = Duration::from_secs(30);

/// A budget of `bytes` as a semaphore of [`BUDGET_UNIT`]s.
pub fn body_budget(bytes: usize) -> Arc<Semaphore> {
    Arc::new(Semaphore::new(bytes / BUDGET_UNIT))
}

/// The two kinds of review, each with budgets of its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Pods (`/mutate`, `/mutate/annotated`).
    Pods,
    /// The EphemeralJob requester's stamps (`/mutate/ephemeraljobs`).
    Stamps,
}

impl Kind {
    /// Its budgets' sizes: bodies, answers, and one client address's share of them.
    pub fn sizes(self) -> (usize, usize, usize) {
        match self {
            Kind::Pods => (BODY_BUDGET, ANSWER_BUDGET, CLIENT_BODY_SHARE),
            Kind::Stamps => (STAMP_BODY_BUDGET, STAMP_ANSWER_BUDGET, STAMP_CLIENT_SHARE),
        }
    }
}

/// What reviews of one kind share: their turns ([`CONCURRENT_REVIEWS`]), the bytes of bodies
/// held at once ([`BODY_BUDGET`]), and of answers not yet read ([`ANSWER_BUDGET`]); the
/// stamps' are `STAMP_*`.
pub struct Pools {
    pub kind: Kind,
    pub turns: Arc<Semaphore>,
    pub budget: Arc<Semaphore>,
    pub answers: Arc<Semaphore>,
}

impl Pools {
    pub fn new(kind: Kind) -> Self {
        let (bodies, answers, _) = kind.sizes();
        Pools {
            kind,
            turns: Arc::new(Semaphore::new(CONCURRENT_REVIEWS)),
            budget: body_budget(bodies),
            answers: body_budget(answers),
        }
    }
}

/// A client address's shares of the budgets ([`CLIENT_BODY_SHARE`], [`STAMP_CLIENT_SHARE`]),
/// which `server.rs` puts in each of its requests' extensions (not in the API server's).
#[derive(Clone)]
pub struct ClientShare {
    pods: Arc<Semaphore>,
    stamps: Arc<Semaphore>,
}

impl ClientShare {
    pub fn new() -> Self {
        ClientShare {
            pods: body_budget(CLIENT_BODY_SHARE),
            stamps: body_budget(STAMP_CLIENT_SHARE),
        }
    }

    /// The share of `kind`'s budgets.
    pub fn of(&self, kind: Kind) -> &Arc<Semaphore> {
        match kind {
            Kind::Pods => &self.pods,
            Kind::Stamps => &self.stamps,
        }
    }
}

/// What a body or an answer holds of a budget and of its client's share, given back when
/// dropped.
pub struct Room {
    budget: OwnedSemaphorePermit,
    client: Option<OwnedSemaphorePermit>,
}

impl Room {
    /// No room (in `pool`): for an answer that carries none over.
    #[cfg(test)]
    pub fn none(pool: &Arc<Semaphore>) -> Room {
        let budget = pool.clone().try_acquire_many_owned(0).expect("no permits");
        Room {
            budget,
            client: None,
        }
    }
}

/// The longest answer: the patch's limit in base64, and room for the rest (the echoed
/// apiVersion, kind and uid, each at most [`MAX_ECHOED`] bytes, and the warnings); a longer
/// one admits the Pod unchanged (`answer.rs`).
pub const MAX_ANSWER_BYTES: usize = MAX_PATCH_BYTES.div_ceil(3) * 4 + (64 << 10);
/// The review's strings an answer repeats (a UID is 36 bytes, the others a few).
pub const MAX_ECHOED: usize = 256;
/// Why a review's strings that its answer repeats (apiVersion, kind, request.uid) are
/// refused, if one is too long.
pub fn echoed_too_long(api_version: &str, kind: &str, uid: &str) -> Option<String> {
    let fields = [
        ("apiVersion", api_version),
        ("kind", kind),
        ("request.uid", uid),
    ];
    let (name, value) = fields.iter().find(|(_, v)| v.len() > MAX_ECHOED)?;
    Some(format!(
        "the review's {name} is {} bytes, more than {MAX_ECHOED}: not from an API server\n",
        value.len()
    ))
}

/// Why a review is refused: its body not read, or its answer not sent.
#[derive(Debug, PartialEq, Eq)]
pub enum Refused {
    TooLarge,
    TooSlow,
    Broken,
    TooManyValues(usize),
    Busy,
    /// No room for the answer within [`BUDGET_WAIT`].
    AnswersUnread,
}

impl Refused {
    /// The HTTP answer (the API server applies the webhook's failurePolicy to it), naming
    /// the budgets of `kind`, and the client's share if it counted (`shared`).
    pub fn answer(&self, kind: Kind, shared: bool) -> (StatusCode, String) {
        let (bodies, answers, share) = kind.sizes();
        let share = match shared {
            true => format!(
                ", {} MiB of bodies and answers from one client address",
                share >> 20
            ),
            false => String::new(),
        };
        match self {
            Refused::TooLarge => (
                StatusCode::PAYLOAD_TOO_LARGE,
                format!(
                    "the review is larger than {MAX_REVIEW_BYTES} bytes (the API server's own limit)\n"
                ),
            ),
            Refused::TooSlow => (
                StatusCode::REQUEST_TIMEOUT,
                format!(
                    "the review's body did not arrive within {}s\n",
                    BODY_TIMEOUT.as_secs()
                ),
            ),
            Refused::Broken => (
                StatusCode::BAD_REQUEST,
                "the review's body could not be read\n".into(),
            ),
            Refused::Busy => (
                StatusCode::SERVICE_UNAVAILABLE,
                format!(
                    "no room for the review's body within {}s: the webhook holds at most {} MiB of bodies{}; try again\n",
                    BUDGET_WAIT.as_secs(),
                    bodies >> 20,
                    share,
                ),
            ),
            Refused::AnswersUnread => (
                StatusCode::SERVICE_UNAVAILABLE,
                format!(
                    "no room for the answer: the webhook holds at most {} MiB of answers not yet read (waited for {}s){}; try again\n",
                    answers >> 20,
                    BUDGET_WAIT.as_secs(),
                    share,
                ),
            ),
            Refused::TooManyValues(n) => (
                StatusCode::PAYLOAD_TOO_LARGE,
                format!("the review holds more than {MAX_JSON_VALUES} JSON values ({n} counted)\n"),
            ),
        }
    }
}

/// The body, read within [`BODY_TIMEOUT`], at most [`MAX_REVIEW_BYTES`] (refused at once
/// when its Content-Length says more), and with at most [`MAX_JSON_VALUES`] values; with
/// what it holds of the [`BODY_BUDGET`] and of its client's share, to be kept until its
/// review is answered.
pub async fn read_body(
    headers: &HeaderMap,
    body: Body,
    budget: &Arc<Semaphore>,
    client: Option<&Arc<Semaphore>>,
) -> Result<(axum::body::Bytes, Room), Refused> {
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > MAX_REVIEW_BYTES as u64) {
        return Err(Refused::TooLarge);
    }
    let read = budgeted(body, declared, budget, client);
    let (bytes, held) = match tokio::time::timeout(BODY_TIMEOUT, read).await {
        Err(_) => return Err(Refused::TooSlow),
        Ok(Err(e)) => return Err(e),
        Ok(Ok(read)) => read,
    };
    match json_values(&bytes) {
        n if n > MAX_JSON_VALUES => Err(Refused::TooManyValues(n)),
        _ => Ok((bytes, held)),
    }
}

/// The body's frames, each counted as it arrives: room for the buffer's next capacity (it
/// doubles, up to the declared length) is taken from the client's share, then from the
/// budget, before the buffer grows. So a body holds at most twice what it sent, and
/// exactly its length once whole.
async fn budgeted(
    body: Body,
    declared: Option<u64>,
    budget: &Arc<Semaphore>,
    client: Option<&Arc<Semaphore>>,
) -> Result<(axum::body::Bytes, Room), Refused> {
    let mut body = http_body_util::Limited::new(body, MAX_REVIEW_BYTES);
    let mut held = Room {
        budget: room(budget, 0).await?,
        client: match client {
            Some(c) => Some(room(c, 0).await?),
            None => None,
        },
    };
    let most = declared.map_or(MAX_REVIEW_BYTES, |n| (n as usize).min(MAX_REVIEW_BYTES));
    let mut bytes = Vec::new();
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|e| match is_length_limit(&*e) {
            true => Refused::TooLarge,
            false => Refused::Broken,
        })?;
        let Ok(data) = frame.into_data() else {
            continue; // (trailers)
        };
        let needed = bytes.len() + data.len();
        if needed > bytes.capacity() {
            let capacity = (2 * bytes.capacity()).min(most).max(needed);
            let more = capacity.div_ceil(BUDGET_UNIT) - held.budget.num_permits();
            if let (Some(c), Some(share)) = (client, held.client.as_mut()) {
                share.merge(room(c, more).await?);
            }
            held.budget.merge(room(budget, more).await?);
            bytes.reserve_exact(capacity - bytes.len());
        }
        bytes.extend_from_slice(&data);
    }
    Ok((bytes.into(), held))
}

/// Room for an answer of `bytes`: in the client's share, what its review's body held there
/// (`body`, usually more than the answer needs) and, if that is short, the rest at once or
/// not at all (only this client's own bodies and unread answers fill its share: waiting,
/// in the review's turn, would make every other client wait behind it); then in the
/// answers' `budget`, waited for at most [`BUDGET_WAIT`] (clients on two addresses fill it).
pub async fn answer_room(
    bytes: usize,
    budget: &Arc<Semaphore>,
    body: Room,
    client: Option<&Arc<Semaphore>>,
) -> Result<Room, Refused> {
    let units = bytes.div_ceil(BUDGET_UNIT).max(1);
    let client = match (client, body.client) {
        (None, _) => None,
        (Some(_), Some(mut held)) if held.num_permits() >= units => held.split(units),
        (Some(c), held) => {
            let have = held.as_ref().map_or(0, OwnedSemaphorePermit::num_permits);
            let more = u32::try_from(units - have).unwrap_or(u32::MAX);
            let Ok(mut more) = c.clone().try_acquire_many_owned(more) else {
                return Err(Refused::AnswersUnread);
            };
            if let Some(held) = held {
                more.merge(held);
            }
            Some(more)
        }
    };
    // (`room` takes free room at once, as a try would)
    let budget = room(budget, units)
        .await
        .map_err(|_| Refused::AnswersUnread)?;
    Ok(Room { budget, client })
}

/// `units` of `pool`, waited for at most [`BUDGET_WAIT`].
async fn room(pool: &Arc<Semaphore>, units: usize) -> Result<OwnedSemaphorePermit, Refused> {
    let units = u32::try_from(units).unwrap_or(u32::MAX);
    match tokio::time::timeout(BUDGET_WAIT, pool.clone().acquire_many_owned(units)).await {
        Ok(permit) => Ok(permit.expect("never closed")),
        Err(_) => Err(Refused::Busy),
    }
}

fn is_length_limit(e: &(dyn std::error::Error + Send + Sync + 'static)) -> bool {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(s) = source {
        if s.is::<http_body_util::LengthLimitError>() {
            return true;
        }
        source = s.source();
    }
    false
}

/// About how many values the JSON text holds, counted without parsing it: one more than the
/// separators (`,` `:`) and openings (`[` `{`) outside strings. An upper bound of what
/// parsing would allocate, in one pass and no memory.
pub fn json_values(text: &[u8]) -> usize {
    let (mut n, mut in_string, mut escaped) = (1usize, false, false);
    for &b in text {
        if in_string {
            match (escaped, b) {
                (true, _) => escaped = false,
                (false, b'\\') => escaped = true,
                (false, b'"') => in_string = false,
                _ => {}
            }
            continue;
        }
        match b {
            b'"' => in_string = true,
            b',' | b':' | b'[' | b'{' => n += 1,
            _ => {}
        }
    }
    n
}

/// Containers of all kinds a Pod may have for the webhook to inject it.
pub const MAX_CONTAINERS: usize = 64;
/// The largest patch the webhook answers with (a pod at [`MAX_CONTAINERS`] takes about
/// a quarter of it with `wrap`); above it the Pod is admitted unchanged.
pub const MAX_PATCH_BYTES: usize = 1 << 20;

/// The longest container name of a valid Pod (a DNS label); the API server refuses longer
/// ones, so a longer one is a forged review (and `wrap`'s dependency lists repeat names).
const MAX_NAME: usize = 63;
/// The longest `sexton.dev/` annotation read, but the record of an injection: lists of
/// container names (at most [`MAX_CONTAINERS`] of [`MAX_NAME`] bytes) and single words. The
/// JSON-values limit does not count inside strings, and mutating admission runs before the
/// API server checks annotation sizes: a 3 MiB `sexton.dev/native-sidecars` of 600 000
/// names held an injection's turn for minutes (a hostile review's finding).
const MAX_ANNOTATION: usize = 16 << 10;

/// Why a Pod is not injected although it asks to be: a limit, in the words of the warning.
pub fn beyond_limits(pod: &serde_json::Value) -> Option<String> {
    let lists = ["containers", "initContainers", "ephemeralContainers"];
    let all = || {
        lists
            .iter()
            .flat_map(|k| pod["spec"][*k].as_array().into_iter().flatten())
    };
    let n = all().count();
    if n > MAX_CONTAINERS {
        return Some(format!(
            "the pod has {n} containers, more than the webhook injects ({MAX_CONTAINERS})"
        ));
    }
    if all()
        .filter_map(|c| c["name"].as_str())
        .any(|name| name.len() > MAX_NAME)
    {
        return Some(format!(
            "a container name is longer than {MAX_NAME} characters: not a valid Pod"
        ));
    }
    annotation_too_long(pod)
}

/// Why one of the Pod's `sexton.dev/` annotations is not read: longer than
/// [`MAX_ANNOTATION`], or, the record of an injection (which repeats the commands it
/// changed, so may be long), holding more than [`MAX_JSON_VALUES`] values.
fn annotation_too_long(pod: &serde_json::Value) -> Option<String> {
    let annotations = pod["metadata"]["annotations"].as_object()?;
    annotations.iter().find_map(|(key, value)| {
        let text = value.as_str().filter(|_| key.starts_with("sexton.dev/"))?;
        if key == sexton_inject::ANNOTATION_INJECTED {
            let n = json_values(text.as_bytes());
            return (n > MAX_JSON_VALUES).then(|| {
                format!("the annotation {key} holds more than {MAX_JSON_VALUES} JSON values ({n} counted)")
            });
        }
        (text.len() > MAX_ANNOTATION).then(|| {
            format!(
                "the annotation {} is {} bytes, more than the webhook reads ({MAX_ANNOTATION})",
                escaped(key, 128),
                text.len()
            )
        })
    })
}

pub fn patch_too_large(bytes: usize) -> Option<String> {
    (bytes > MAX_PATCH_BYTES).then(|| {
        format!("the injection would be a patch of {bytes} bytes, more than the webhook answers with ({MAX_PATCH_BYTES})")
    })
}

/// Text from a review, fit for an Event's note: control characters escaped (no forged
/// lines), at most `max` bytes (cut on a character boundary, marked with `...`).
pub fn escaped(text: &str, max: usize) -> String {
    let mut out = String::with_capacity(text.len().min(max));
    for c in text.chars() {
        let piece: String = if c.is_control() {
            c.escape_default().collect()
        } else {
            c.to_string()
        };
        if out.len() + piece.len() > max.saturating_sub(3) {
            out.push_str("...");
            break;
        }
        out.push_str(&piece);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_counted_outside_strings() {
        assert_eq!(json_values(b"5"), 1);
        assert_eq!(json_values(b"[0,0,0]"), 4);
        assert_eq!(json_values(br#"{"a":"x,y:[{","b":[1]}"#), 6);
        assert_eq!(json_values(br#"["\"," ,1]"#), 3);
    }

    #[test]
    fn notes_escape_control_characters_and_are_bounded() {
        assert_eq!(escaped("a\nb\u{1b}[31m", 100), "a\\nb\\u{1b}[31m");
        let long = escaped(&"é".repeat(1000), 64);
        assert!(long.len() <= 64 && long.ends_with("..."), "{long}");
    }
}
