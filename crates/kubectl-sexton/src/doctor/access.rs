//! What a check asks of the API, named, so that a refusal becomes that check's error
//! ("forbidden: cannot list nodes (cluster-wide)") and never ends the doctor.

use std::fmt;

/// One request: verb, resource, and where.
#[derive(Debug, Clone)]
pub struct Access {
    pub verb: &'static str,
    pub resource: &'static str,
    /// `None`: cluster-wide (or all namespaces).
    pub namespace: Option<String>,
    pub name: Option<String>,
}

impl Access {
    pub fn new(verb: &'static str, resource: &'static str) -> Self {
        Access {
            verb,
            resource,
            namespace: None,
            name: None,
        }
    }

    pub fn in_ns(mut self, ns: Option<&str>) -> Self {
        self.namespace = ns.map(str::to_string);
        self
    }

    pub fn named(mut self, name: &str) -> Self {
        self.name = Some(name.to_string());
        self
    }
}

impl fmt::Display for Access {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.verb, self.resource)?;
        match (&self.namespace, &self.name) {
            (Some(ns), Some(n)) => write!(f, " {ns}/{n}"),
            (None, Some(n)) => write!(f, " {n}"),
            (Some(ns), None) => write!(f, " in namespace {ns}"),
            (None, None) => write!(f, " (cluster-wide)"),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum AccessError {
    #[error("forbidden: cannot {access}: {message}")]
    Forbidden { access: Access, message: String },
    #[error("{access}: {source}")]
    Failed {
        access: Access,
        #[source]
        source: Box<kube::Error>,
    },
}

/// The result of `access`, its refusal named.
pub fn answer<T>(access: Access, r: Result<T, kube::Error>) -> Result<T, AccessError> {
    r.map_err(|source| match source {
        kube::Error::Api(s) if s.code == 403 => AccessError::Forbidden {
            access,
            message: s.message,
        },
        source => AccessError::Failed {
            access,
            source: Box::new(source),
        },
    })
}

/// As [`answer`], with "not found" as `None`.
pub fn optional<T>(access: Access, r: Result<T, kube::Error>) -> Result<Option<T>, AccessError> {
    match r {
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(None),
        r => answer(access, r).map(Some),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refusals_name_the_verb_resource_and_scope() {
        let status = kube::core::Status::failure(
            "nodes is forbidden: User \"x\" cannot list resource \"nodes\"",
            "Forbidden",
        )
        .with_code(403);
        let e = answer::<()>(
            Access::new("list", "nodes"),
            Err(kube::Error::Api(status.boxed())),
        )
        .unwrap_err();
        assert!(
            e.to_string()
                .starts_with("forbidden: cannot list nodes (cluster-wide): nodes is forbidden"),
            "{e}"
        );
        let a = Access::new("get", "deployments.apps")
            .in_ns(Some("sexton-system"))
            .named("sexton-controller");
        assert_eq!(
            a.to_string(),
            "get deployments.apps sexton-system/sexton-controller"
        );
        let missing = kube::core::Status::failure("not found", "NotFound").with_code(404);
        assert!(
            optional::<()>(a, Err(kube::Error::Api(missing.boxed())))
                .unwrap()
                .is_none()
        );
    }
}
