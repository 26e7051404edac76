//! The watch of this pod, on the API thread: a list, then watches resumed from the last
//! resourceVersion, until `stop` is set; what it says is posted to the supervisor's loop.
//! An outage is retried and reported sparingly; a refusal that persists before any read
//! ends the wait.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use tracing::{debug, info, warn};

use super::http::{self, Body, Client};
use super::pod::{Change, list_path, listed, parse_event, pod_view, watch_path};
use crate::events::Event;
use sexton_core::config::PodRef;
use sexton_core::machine::PodView;

/// How often a persisting outage is reported again (the first failure is reported at once).
const REPORT_EVERY: Duration = Duration::from_secs(30);

/// The API's failures, reported the first time, when the kind of failure changes, and
/// every `REPORT_EVERY` while it lasts: never a line per retry.
struct Outage {
    address: String,
    attempts: u64,
    last_report: Option<(std::time::Instant, String)>,
}

impl Outage {
    fn new(address: String) -> Outage {
        Outage {
            address,
            attempts: 0,
            last_report: None,
        }
    }

    /// Records a failure; returns the problem as the birth-timeout message will say it.
    fn failed(&mut self, what: &str, e: &http::Error) -> String {
        self.attempts += 1;
        let cause = e.to_string();
        let problem = format!("{what} at {}: {cause}", self.address);
        let due = match &self.last_report {
            None => true,
            Some((at, said)) => *said != cause || at.elapsed() >= REPORT_EVERY,
        };
        if due {
            warn!(
                attempts = self.attempts,
                "cannot {what} pod through the Kubernetes API at {}: {cause}; retrying (reported again every {}s while it lasts)",
                self.address,
                REPORT_EVERY.as_secs()
            );
            self.last_report = Some((std::time::Instant::now(), cause));
        }
        problem
    }

    fn recovered(&mut self) {
        if self.last_report.take().is_some() {
            info!(address = %self.address, attempts = self.attempts, "the Kubernetes API answers again");
        }
        self.attempts = 0;
    }
}

/// A 403 is not always final: an API server that has just (re)started answers 403 until
/// its RBAC caches are filled (seen in the tests). Before the first successful read, a 403
/// that persists for `GRACE` is reported as missing RBAC; after one, 403s are retried like
/// any outage (the birth timeout still bounds the wait).
#[derive(Default)]
struct Forbidden {
    since: Option<std::time::Instant>,
    ever_read: bool,
}

impl Forbidden {
    const GRACE: Duration = Duration::from_secs(3);

    fn read_ok(&mut self) {
        self.since = None;
        self.ever_read = true;
    }

    /// `Some(message)` when the 403 should end the wait.
    fn check(&mut self, pod: &PodRef, detail: String) -> Option<String> {
        let since = *self.since.get_or_insert_with(std::time::Instant::now);
        if !self.ever_read && since.elapsed() >= Self::GRACE {
            return Some(forbidden(pod, &detail));
        }
        debug!(
            "{detail}; retrying (an API server that has just started answers 403 until its RBAC caches are filled)"
        );
        None
    }
}

fn forbidden(pod: &PodRef, detail: &str) -> String {
    format!(
        "the Kubernetes API refused to show pod {}/{} ({detail}): the pod's service account needs a Role in namespace {:?} with rules [{{apiGroups: [\"\"], resources: [\"pods\"], verbs: [\"get\", \"list\", \"watch\"]}}] and a RoleBinding to it (see examples/rbac-birth-deps.yaml)",
        pod.namespace, pod.name, pod.namespace
    )
}

/// What to do after a failed read or watch.
enum Next {
    Retry,
    Fatal(String),
}

/// A failed read or watch: a 401/403 that persists ends the wait; anything else is an
/// outage, reported sparingly and retried after a pause (backing off up to 2 s).
fn failed(
    what: &str,
    e: http::Error,
    pod: &PodRef,
    state: &mut WatchState,
    post: &impl Fn(Event),
) -> Next {
    if let http::Error::Status { code, message } = &e {
        if *code == 403 || *code == 401 {
            let detail = format!("{what}: HTTP {code}: {message}");
            if let Some(fatal) = state.forbidden.check(pod, detail) {
                return Next::Fatal(fatal);
            }
            std::thread::sleep(Duration::from_millis(500));
            return Next::Retry;
        }
    }
    let problem = state.outage.failed(what, &e);
    if !state.forbidden.ever_read {
        post(Event::ApiUnreachable(problem));
    }
    std::thread::sleep(state.pause);
    state.pause = (state.pause * 2).min(Duration::from_secs(2));
    Next::Retry
}

struct WatchState {
    pause: Duration,
    forbidden: Forbidden,
    outage: Outage,
}

/// Why a watch ended: the server ended it (resume from the last resourceVersion), read
/// the pod again, stop, or a refusal (its message) that ends the wait.
#[derive(Debug, PartialEq)]
enum WatchEnd {
    Ended,
    ListAgain,
    Stopped,
    Refused(String),
}

/// Follows one watch until it ends (server timeout, disconnect, error) or `stop` is set;
/// `version` follows the events' resourceVersion.
fn follow(
    body: &mut Body,
    version: &mut String,
    pod: &PodRef,
    state: &mut WatchState,
    stop: &AtomicBool,
    post: &impl Fn(Event),
) -> WatchEnd {
    loop {
        let line = match body.next_line() {
            Ok(Some(line)) => line,
            Ok(None) => return WatchEnd::Ended,
            Err(e) => {
                debug!("watch stream broke ({e}); listing again");
                return WatchEnd::ListAgain;
            }
        };
        if stop.load(Ordering::Relaxed) {
            return WatchEnd::Stopped;
        }
        if line.trim_ascii().is_empty() {
            continue;
        }
        let (change, at) = match parse_event(&line) {
            Ok(event) => event,
            Err(e) => {
                debug!("watch stream broke ({e}); listing again");
                return WatchEnd::ListAgain;
            }
        };
        if let Some(at) = at {
            *version = at;
        }
        match change {
            Change::Pod(view) => post(Event::Pod(view)),
            Change::Deleted => post(Event::Pod(PodView::default())),
            Change::Bookmark => {}
            Change::Error { code: 403, message } => {
                let refused = state.forbidden.check(pod, format!("watch: {message}"));
                return refused.map_or(WatchEnd::ListAgain, WatchEnd::Refused);
            }
            Change::Error { code, message } => {
                debug!("watch ended: {message} ({code}); listing again");
                return WatchEnd::ListAgain;
            }
        }
    }
}

/// Reads, then watches, this pod until `stop` is set, posting what it says about container
/// readiness; a persistent refusal (401/403) ends with `Event::ApiFatal`, an outage is
/// retried. Each watch asks the server to end it after `timeout` seconds.
pub fn watch_pod(
    client: &Client,
    pod: &PodRef,
    stop: &AtomicBool,
    post: &impl Fn(Event),
    timeout: u32,
) {
    let mut state = WatchState {
        pause: Duration::from_millis(100),
        forbidden: Forbidden::default(),
        outage: Outage::new(client.address()),
    };
    // a quiet watch sends nothing until the server ends it: a read waiting longer than that
    // is a dead connection (a half-open TCP after a node's failure)
    let read_timeout = Duration::from_secs(u64::from(timeout) + 30);
    let mut announced = false;
    // the resourceVersion to resume a watch from; `None`: read the pod first
    let mut resume: Option<String> = None;
    while !stop.load(Ordering::Relaxed) {
        let mut version = match resume.take() {
            Some(version) => version,
            None => match client.get(&list_path(pod)).and_then(|l| listed(pod, l)) {
                Ok((p, version)) => {
                    state.pause = Duration::from_millis(100);
                    state.forbidden.read_ok();
                    state.outage.recovered();
                    if !announced {
                        info!(pod = %pod.name, namespace = %pod.namespace, "watching the pod's container readiness through the Kubernetes API");
                        announced = true;
                    }
                    post(Event::Pod(pod_view(&p)));
                    version
                }
                Err(e) => match failed("read", e, pod, &mut state, post) {
                    Next::Fatal(fatal) => return post(Event::ApiFatal(fatal)),
                    Next::Retry => continue,
                },
            },
        };
        let mut body = match client.stream(&watch_path(pod, &version, timeout), read_timeout) {
            Ok(body) => body,
            Err(http::Error::Status { code: 410, message }) => {
                debug!("watch refused: {message} (410); listing again");
                continue;
            }
            Err(e) => match failed("watch", e, pod, &mut state, post) {
                Next::Fatal(fatal) => return post(Event::ApiFatal(fatal)),
                Next::Retry => continue,
            },
        };
        match follow(&mut body, &mut version, pod, &mut state, stop, post) {
            WatchEnd::Refused(fatal) => return post(Event::ApiFatal(fatal)),
            WatchEnd::Stopped => return,
            WatchEnd::Ended => {
                debug!("the API server ended the watch; resuming from resourceVersion {version}");
                resume = Some(version);
            }
            WatchEnd::ListAgain => {}
        }
        // after a watch: a short pause, so that a restarting (or broken) API server is not
        // hammered
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    fn pod() -> PodRef {
        PodRef {
            name: "job-1".into(),
            namespace: "team-a".into(),
        }
    }

    #[test]
    fn forbidden_is_final_only_when_it_persists_before_any_read() {
        let mut f = Forbidden::default();
        assert_eq!(
            f.check(&pod(), "HTTP 403".into()),
            None,
            "the first 403 may be a starting API server"
        );
        f.since = Some(Instant::now() - Forbidden::GRACE);
        let msg = f
            .check(&pod(), "HTTP 403: nope".into())
            .expect("persisted: final");
        assert!(
            msg.contains("team-a/job-1") && msg.contains(r#"verbs: ["get", "list", "watch"]"#),
            "{msg}"
        );
        // after one successful read, 403s are outages, however long
        let mut f = Forbidden::default();
        f.read_ok();
        f.since = Some(Instant::now() - Forbidden::GRACE * 10);
        assert_eq!(f.check(&pod(), "HTTP 403".into()), None);
    }

    /// `follow` over a watch body given as bytes: what it posts and how it ends.
    fn follow_bytes(body: &str) -> (WatchEnd, String, Vec<PodView>) {
        let mut body = Body::new(Box::new(std::io::Cursor::new(body.as_bytes().to_vec())));
        let mut state = WatchState {
            pause: Duration::ZERO,
            forbidden: Forbidden::default(),
            outage: Outage::new("https://h:443".into()),
        };
        let posted = std::cell::RefCell::new(Vec::new());
        let post = |e: Event| match e {
            Event::Pod(view) => posted.borrow_mut().push(view),
            other => panic!("{other:?}"),
        };
        let mut version = "1".to_string();
        let end = follow(
            &mut body,
            &mut version,
            &pod(),
            &mut state,
            &AtomicBool::new(false),
            &post,
        );
        (end, version, posted.into_inner())
    }

    #[test]
    fn a_watch_resumes_after_the_servers_end_and_lists_again_after_an_error() {
        let added = r#"{"type":"ADDED","object":{"metadata":{"resourceVersion":"5"},"status":{"containerStatuses":[{"name":"proxy","ready":true}]}}}"#;
        let bookmark = r#"{"type":"BOOKMARK","object":{"metadata":{"resourceVersion":"9"}}}"#;
        // the server ended the watch (timeoutSeconds): resume from the last version seen
        let (end, version, posted) = follow_bytes(&format!("{added}\n\n{bookmark}\n"));
        assert_eq!((end, version.as_str()), (WatchEnd::Ended, "9"));
        assert_eq!(posted.len(), 1);
        assert_eq!(posted[0].ready, ["proxy"]);
        // 410 Gone: the version is too old, read the pod again
        let gone = r#"{"type":"ERROR","object":{"kind":"Status","message":"too old resource version","code":410}}"#;
        let (end, _, posted) = follow_bytes(&format!("{added}\n{gone}\n{added}\n"));
        assert_eq!((end, posted.len()), (WatchEnd::ListAgain, 1));
        // a broken stream (cut inside a line) or garbage: read again
        assert_eq!(follow_bytes(r#"{"type":"ADD"#).0, WatchEnd::ListAgain);
        assert_eq!(follow_bytes("<html>\n").0, WatchEnd::ListAgain);
        // a deletion says no container is ready any more
        let (_, _, posted) = follow_bytes("{\"type\":\"DELETED\",\"object\":{}}\n");
        assert_eq!(posted, [PodView::default()]);
        // a 403 in the stream before any read, persisting: the refusal ends the wait
        let forbidden =
            r#"{"type":"ERROR","object":{"kind":"Status","message":"nope","code":403}}"#;
        assert_eq!(
            follow_bytes(&format!("{forbidden}\n")).0,
            WatchEnd::ListAgain,
            "not yet: within the grace"
        );
    }
}
