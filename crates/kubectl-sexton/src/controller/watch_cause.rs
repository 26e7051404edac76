//! Why a watch failed, classified from the error itself: the watch's log line and the
//! `watch_errors_total{cause}` label. A module of its own because both the watch loop and
//! the metrics (which the loop reports to) name it: in either of them it made a circle.

use kube::runtime::watcher;
use prometheus_client::encoding::{EncodeLabelValue, LabelValueEncoder};

/// Why a watch failed, read from the error (never assumed): the log line and the
/// `watch_errors_total{cause}` label.
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq)]
pub enum WatchCause {
    /// 401/403: credentials or RBAC.
    Forbidden,
    /// 404: the API server does not serve the resource (a CRD not installed).
    NotFound,
    /// 410: the watch's resourceVersion is too old; the watcher relists.
    Expired,
    /// 429/5xx: the API server is overloaded or failing.
    ServerError,
    /// Another answer of the API server (400, 422, ...).
    Refused,
    /// Connection refused or reset, timeouts, TLS: the API server was not reached.
    Unreachable,
    /// The answer could not be read (not JSON, not the expected shape).
    Undecodable,
    Other,
}

impl WatchCause {
    pub fn of(e: &watcher::Error) -> Self {
        match e {
            watcher::Error::InitialListFailed(e)
            | watcher::Error::WatchStartFailed(e)
            | watcher::Error::WatchFailed(e) => Self::of_client(e),
            watcher::Error::WatchError(s) => Self::of_status(s.code),
            watcher::Error::NoResourceVersion => WatchCause::Other,
        }
    }

    fn of_client(e: &kube::Error) -> Self {
        match e {
            kube::Error::Api(s) => Self::of_status(s.code),
            kube::Error::HyperError(_)
            | kube::Error::Service(_)
            | kube::Error::HttpError(_)
            | kube::Error::ReadEvents(_) => WatchCause::Unreachable,
            kube::Error::SerdeError(_)
            | kube::Error::FromUtf8(_)
            | kube::Error::LinesCodecMaxLineLengthExceeded => WatchCause::Undecodable,
            _ => WatchCause::Other,
        }
    }

    fn of_status(code: u16) -> Self {
        match code {
            401 | 403 => WatchCause::Forbidden,
            404 => WatchCause::NotFound,
            410 => WatchCause::Expired,
            429 | 500..=599 => WatchCause::ServerError,
            400..=499 => WatchCause::Refused,
            _ => WatchCause::Other,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            WatchCause::Forbidden => "forbidden",
            WatchCause::NotFound => "not_found",
            WatchCause::Expired => "expired",
            WatchCause::ServerError => "server_error",
            WatchCause::Refused => "refused",
            WatchCause::Unreachable => "unreachable",
            WatchCause::Undecodable => "undecodable",
            WatchCause::Other => "other",
        }
    }

    pub fn explain(self) -> &'static str {
        match self {
            WatchCause::Forbidden => "forbidden",
            WatchCause::NotFound => "the API server does not serve this resource",
            WatchCause::Expired => "expired",
            WatchCause::ServerError => "the API server answered with an error; retrying",
            WatchCause::Refused => "the API server refused the request",
            WatchCause::Unreachable => "the API server could not be reached; retrying",
            WatchCause::Undecodable => "the API server's answer could not be read",
            WatchCause::Other => "retrying",
        }
    }
}

/// `cause="forbidden"`.
impl EncodeLabelValue for WatchCause {
    fn encode(&self, encoder: &mut LabelValueEncoder) -> Result<(), std::fmt::Error> {
        use std::fmt::Write;
        encoder.write_str(self.as_str())
    }
}
