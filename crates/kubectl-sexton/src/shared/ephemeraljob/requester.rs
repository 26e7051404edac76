//! Who asked for an EphemeralJob: the annotation `sexton.dev/requester`, stamped at
//! admission (the webhook's `/mutate/ephemeraljobs` writes it from the review's userInfo;
//! the ValidatingAdmissionPolicy `sexton-ephemeraljob-requester` refuses a CREATE whose
//! stamp is not the creator's, and any UPDATE that changes it). The controller acts only
//! within the rights of the user named here (SubjectAccessReview).
//!
//! The stamp is one line per fact, `user=NAME`, `uid=UID` (if any), `group=GROUP` each,
//! `extra=KEY=VALUE` each: a format the policy's CEL can compare with `request.userInfo` as
//! sets (CEL cannot parse JSON), and that a person can read with `kubectl get -o yaml`.

use std::collections::BTreeMap;

use k8s_openapi::api::authentication::v1::UserInfo;

pub const ANNOTATION_REQUESTER: &str = "sexton.dev/requester";

/// What is wrong with a stamp.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StampError {
    #[error("more than one user= line, or an empty one")]
    User,
    #[error("extra line without KEY=VALUE: {0:?}")]
    Extra(String),
    #[error("unknown line {0:?}")]
    Unknown(String),
    #[error("no user= line")]
    NoUser,
}

/// Why a job's requester cannot be known.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RequesterError {
    #[error("it has no annotation {annotation}", annotation = ANNOTATION_REQUESTER)]
    NoStamp,
    #[error("its annotation {annotation} is malformed: {0}", annotation = ANNOTATION_REQUESTER)]
    Malformed(#[source] StampError),
}

/// The identity the controller acts for (what a SubjectAccessReview asks about).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct Requester {
    pub user: String,
    pub uid: Option<String>,
    pub groups: Vec<String>,
    pub extra: BTreeMap<String, Vec<String>>,
}

impl Requester {
    pub fn from_user_info(u: &UserInfo) -> Self {
        Requester {
            user: u.username.clone().unwrap_or_default(),
            uid: u.uid.clone().filter(|s| !s.is_empty()),
            groups: u.groups.clone().unwrap_or_default(),
            extra: u.extra.clone().unwrap_or_default(),
        }
    }

    /// The annotation's value.
    pub fn stamp(&self) -> String {
        let mut lines = vec![format!("user={}", self.user)];
        lines.extend(self.uid.iter().map(|u| format!("uid={u}")));
        lines.extend(self.groups.iter().map(|g| format!("group={g}")));
        for (k, vs) in &self.extra {
            lines.extend(vs.iter().map(|v| format!("extra={k}={v}")));
        }
        lines.join("\n")
    }

    /// Reads a stamp; the error says what is wrong with it.
    pub fn parse(stamp: &str) -> Result<Self, StampError> {
        let mut r = Requester::default();
        let mut user = None;
        // (split at '\n' alone, as the policy's CEL does: `lines()` would also drop a '\r',
        // and read the stamp of a user named "alice\r" as alice's)
        for line in stamp.split('\n') {
            match line.split_once('=') {
                Some(("user", u)) if user.is_none() && !u.is_empty() => user = Some(u.to_string()),
                Some(("user", _)) => return Err(StampError::User),
                Some(("uid", u)) if r.uid.is_none() => r.uid = Some(u.to_string()),
                Some(("group", g)) => r.groups.push(g.to_string()),
                Some(("extra", kv)) => match kv.split_once('=') {
                    Some((k, v)) => r.extra.entry(k.into()).or_default().push(v.into()),
                    None => return Err(StampError::Extra(line.to_string())),
                },
                _ => return Err(StampError::Unknown(line.to_string())),
            }
        }
        r.user = user.ok_or(StampError::NoUser)?;
        Ok(r)
    }

    /// The user who created `job`, or why it cannot be known.
    pub fn of(annotations: Option<&BTreeMap<String, String>>) -> Result<Self, RequesterError> {
        match annotations.and_then(|a| a.get(ANNOTATION_REQUESTER)) {
            None => Err(RequesterError::NoStamp),
            Some(s) => Self::parse(s).map_err(RequesterError::Malformed),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stamp_reads_back_as_the_same_requester() {
        let r = Requester {
            user: "alice@example.com".into(),
            uid: Some("42".into()),
            groups: vec!["devs".into(), "system:authenticated".into()],
            extra: BTreeMap::from([(
                "authentication.kubernetes.io/credential-id".into(),
                vec!["X509SHA256=ab=cd".into()],
            )]),
        };
        assert_eq!(Requester::parse(&r.stamp()), Ok(r));
    }

    #[test]
    fn a_bad_stamp_is_an_error_naming_the_line() {
        assert!(
            Requester::parse("group=devs")
                .unwrap_err()
                .to_string()
                .contains("user=")
        );
        assert!(Requester::parse("user=a\nuser=b").is_err());
        assert!(
            Requester::parse("user=a\nroot")
                .unwrap_err()
                .to_string()
                .contains("root")
        );
        assert!(
            Requester::of(None)
                .unwrap_err()
                .to_string()
                .contains(ANNOTATION_REQUESTER)
        );
    }
}
