//! Why a reconciliation failed and what to do about it. Every error has a [`Kind`], which is
//! its metric label (`reconcile_errors_total{kind}`) and decides how soon the object is
//! retried ([`Kind::retry_after`]): a conflict is retried at once, a missing permission
//! slowly (a person has to fix the RBAC), an overloaded or unreachable API server in
//! between.

use std::time::Duration;

/// A failed reconciliation. `object` is `namespace/name`; `doing` says what was being done
/// (`"patching the image of sidecar(s) [\"proxy\"]"`, `"writing status"`).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{object}: {doing}: {source}{}", hint_suffix(.source))]
    Api {
        object: String,
        doing: String,
        #[source]
        source: kube::Error,
    },
    #[error("{object}: still conflicting after {attempts} attempts")]
    StillConflicting { object: String, attempts: usize },
}

impl Error {
    pub fn api(object: String, doing: impl Into<String>, source: kube::Error) -> Self {
        Error::Api {
            object,
            doing: doing.into(),
            source,
        }
    }

    pub fn kind(&self) -> Kind {
        match self {
            Error::Api { source, .. } => Kind::of(source),
            Error::StillConflicting { .. } => Kind::Conflict,
        }
    }
}

/// What a permission error needs: named in the message, so the log says what to grant.
fn hint_suffix(e: &kube::Error) -> &'static str {
    match Kind::of(e) {
        Kind::Forbidden => " (RBAC: compare the controller's role with deploy/rbac.yaml)",
        _ => "",
    }
}

/// The class of a failure, as far as retrying it is concerned.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind {
    /// 409: someone else wrote the object; re-read and retry at once.
    Conflict,
    /// 401/403: a person has to fix credentials or RBAC.
    Forbidden,
    /// 400/404/422 and other refusals that retrying alone will not change.
    Invalid,
    /// 429, 5xx, timeouts, connection errors: the API server is busy or away.
    Unavailable,
    /// Anything else (a response that could not be read, ...).
    Other,
}

impl Kind {
    /// Classifies an error of the Kubernetes client.
    pub fn of(e: &kube::Error) -> Kind {
        match e {
            kube::Error::Api(s) => Kind::of_status(s.code),
            kube::Error::HyperError(_) | kube::Error::Service(_) | kube::Error::HttpError(_) => {
                Kind::Unavailable
            }
            _ => Kind::Other,
        }
    }

    /// Classifies an HTTP status of the API server.
    pub fn of_status(code: u16) -> Kind {
        match code {
            409 => Kind::Conflict,
            401 | 403 => Kind::Forbidden,
            429 | 500..=599 => Kind::Unavailable,
            400..=499 => Kind::Invalid,
            _ => Kind::Other,
        }
    }

    /// How long to wait before reconciling the object again. An event on the object
    /// (someone fixed its spec) reconciles it earlier anyway.
    pub fn retry_after(self) -> Duration {
        Duration::from_secs(match self {
            Kind::Conflict => 1,
            Kind::Unavailable => 5,
            Kind::Other => 15,
            Kind::Forbidden => 60,
            Kind::Invalid => 300,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_are_classified_and_retried_by_kind() {
        for (code, kind, secs) in [
            (409, Kind::Conflict, 1),
            (401, Kind::Forbidden, 60),
            (403, Kind::Forbidden, 60),
            (400, Kind::Invalid, 300),
            (404, Kind::Invalid, 300),
            (422, Kind::Invalid, 300),
            (429, Kind::Unavailable, 5),
            (500, Kind::Unavailable, 5),
            (503, Kind::Unavailable, 5),
            (504, Kind::Unavailable, 5),
            (302, Kind::Other, 15),
        ] {
            assert_eq!(Kind::of_status(code), kind, "{code}");
            assert_eq!(kind.retry_after(), Duration::from_secs(secs), "{code}");
        }
    }

    #[test]
    fn a_conflict_that_persists_is_a_conflict_and_forbidden_names_rbac() {
        let e = Error::StillConflicting {
            object: "ns/p".into(),
            attempts: 5,
        };
        assert_eq!(e.kind(), Kind::Conflict);
        assert_eq!(e.to_string(), "ns/p: still conflicting after 5 attempts");
        let status = kube::core::Status::failure("pods is forbidden", "Forbidden").with_code(403);
        let e = Error::api(
            "ns/p".into(),
            "writing status",
            kube::Error::Api(Box::new(status)),
        );
        assert_eq!(e.kind(), Kind::Forbidden);
        assert!(e.to_string().starts_with("ns/p: writing status: "), "{e}");
        assert!(e.to_string().ends_with("deploy/rbac.yaml)"), "{e}");
    }
}
