//! What the requester of a job may do, asked of the API server (SubjectAccessReview), so
//! that the controller never does for a user what RBAC refuses them: it injects only where
//! the requester may `patch pods/ephemeralcontainers`, and reports a termination message
//! only where they may `get pods/log`.
//!
//! Each question is asked for the whole namespace first (one answer for every pod when the
//! grant has no resourceNames), then for the one pod; answers are kept `FRESH` so that a
//! job over 10 000 pods asks a few questions per reconciliation, not 10 000, and at most
//! `CAPACITY` of them (the oldest go first).

use std::time::Duration;

use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use kube::api::PostParams;
use kube::{Api, Client};

use super::fresh::Fresh;
use crate::shared::ephemeraljob::Requester;

/// How long an answer is reused: a revoked right stops being used within this time.
const FRESH: Duration = Duration::from_secs(10);
/// The most answers kept.
const CAPACITY: usize = 4096;

/// One question: may the requester `verb` `resource` (named `name`, or any) in `namespace`?
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Question {
    pub verb: &'static str,
    pub resource: &'static str,
    pub subresource: &'static str,
    pub namespace: String,
    pub name: Option<String>,
}

impl Question {
    pub const INJECT: (&str, &str, &str) = ("patch", "pods", "ephemeralcontainers");
    pub const READ_OUTPUT: (&str, &str, &str) = ("get", "pods", "log");

    pub fn new(
        (verb, resource, subresource): (&'static str, &'static str, &'static str),
        namespace: &str,
        name: Option<&str>,
    ) -> Self {
        Question {
            verb,
            resource,
            subresource,
            namespace: namespace.into(),
            name: name.map(Into::into),
        }
    }

    /// `patch pods/ephemeralcontainers`, for messages.
    pub fn right(&self) -> String {
        format!("{} {}/{}", self.verb, self.resource, self.subresource)
    }
}

pub struct Access {
    client: Client,
    answers: Fresh<(Requester, Question), bool>,
}

impl Access {
    pub fn new(client: Client) -> Self {
        Access {
            client,
            answers: Fresh::new(FRESH, CAPACITY),
        }
    }

    /// Whether `who` may do what `q` asks on the pod `name` (the namespace-wide answer
    /// first). An error is the API server's: the caller fails closed.
    pub async fn may(
        &self,
        who: &Requester,
        mut q: Question,
        name: &str,
    ) -> Result<bool, kube::Error> {
        q.name = None;
        if self.ask(who, &q).await? {
            return Ok(true);
        }
        q.name = Some(name.into());
        self.ask(who, &q).await
    }

    async fn ask(&self, who: &Requester, q: &Question) -> Result<bool, kube::Error> {
        let key = (who.clone(), q.clone());
        if let Some(allowed) = self.answers.get(&key) {
            return Ok(allowed);
        }
        let review = SubjectAccessReview {
            spec: SubjectAccessReviewSpec {
                user: Some(who.user.clone()),
                uid: who.uid.clone(),
                groups: Some(who.groups.clone()),
                extra: Some(who.extra.clone()),
                resource_attributes: Some(ResourceAttributes {
                    namespace: Some(q.namespace.clone()),
                    verb: Some(q.verb.into()),
                    resource: Some(q.resource.into()),
                    subresource: Some(q.subresource.into()),
                    name: q.name.clone(),
                    ..Default::default()
                }),
                ..Default::default()
            },
            ..Default::default()
        };
        let answer = Api::<SubjectAccessReview>::all(self.client.clone())
            .create(&PostParams::default(), &review)
            .await?;
        let allowed = answer
            .status
            .is_some_and(|s| s.allowed && !s.denied.unwrap_or(false));
        self.answers.put(key, allowed);
        Ok(allowed)
    }
}
