//! Why a lookup failed, as a short reason the user can act on. The caller puts it into
//! "container X sets no command, and the ENTRYPOINT of image Y cannot be read (REASON):
//! set `command` on the container", so a reason names the registry, the repository or the
//! flag, and the fix where there is one.

use std::error::Error;
use std::io;
use std::time::Duration;

use oci_client::errors::{OciDistributionError, OciErrorCode};
use sexton_core::duration::format_go_duration;
use sexton_inject::Unresolved;

use super::credentials::Source;
use super::platform::Platform;

/// What went wrong, before it is put into words.
#[derive(Debug)]
pub enum Failure {
    /// From the registry, or on the way to it.
    Oci(OciDistributionError),
    /// No image of the platform in the index; the platforms it has.
    NoPlatform(Vec<String>),
    /// An index where the platform's image should be.
    NestedIndex,
    /// The manifest's config is not an image config; its media type.
    NotAnImage(String),
    /// The config is larger than image configs are; its declared size.
    ConfigTooLarge(i64),
    /// The config is not an image config's JSON.
    BadConfig(serde_json::Error),
    /// No answer within the lookup's time.
    Timeout,
}

impl From<OciDistributionError> for Failure {
    fn from(e: OciDistributionError) -> Self {
        Failure::Oci(e)
    }
}

/// What a reason names.
pub struct Context<'a> {
    /// The registry as the image names it (`docker.io`, `127.0.0.1:15000`).
    pub registry: &'a str,
    pub repository: &'a str,
    /// `tag 1`, `digest sha256:...`.
    pub version: String,
    pub source: &'a Source,
    pub platform: &'a Platform,
    /// Reached over plain HTTP (`--insecure-registry`).
    pub insecure: bool,
    pub timeout: Duration,
}

/// The reason, in words.
pub fn explain(f: Failure, cx: &Context) -> Unresolved {
    let registry = cx.registry;
    Unresolved(match f {
        Failure::Oci(e) => oci(e, cx),
        Failure::NoPlatform(found) if found.is_empty() => {
            format!(
                "no {} image in the index, which names no platform",
                cx.platform
            )
        }
        Failure::NoPlatform(found) => format!(
            "no {} image in the index (platforms: {}; see --platform)",
            cx.platform,
            found.join(", ")
        ),
        Failure::NestedIndex => format!(
            "the index's {} entry is an index itself, which is not supported",
            cx.platform
        ),
        Failure::NotAnImage(media_type) => {
            format!("not a container image (its config's media type is {media_type})")
        }
        Failure::ConfigTooLarge(size) => {
            format!("its config is {size} bytes, far more than image configs are")
        }
        Failure::BadConfig(e) => format!("its config is not an image config: {e}"),
        Failure::Timeout => format!(
            "no answer from {registry} within {} (--registry-timeout)",
            format_go_duration(cx.timeout)
        ),
    })
}

fn oci(e: OciDistributionError, cx: &Context) -> String {
    let registry = cx.registry;
    match e {
        OciDistributionError::UnauthorizedError { .. } => unauthorized(cx),
        OciDistributionError::AuthenticationFailure(_) => unauthorized(cx),
        OciDistributionError::RegistryError { envelope, .. } => match envelope.errors.first() {
            Some(first) => registry_error(&first.code, &first.message, cx),
            None => format!("{registry} answered an error without details"),
        },
        OciDistributionError::ServerError { code, message, .. } => {
            let first = message.lines().next().unwrap_or_default().trim();
            match first.is_empty() {
                true => format!("{registry} answered HTTP {code}"),
                false => format!("{registry} answered HTTP {code}: {first}"),
            }
        }
        OciDistributionError::RequestError(e) => request(&e, e.is_connect(), e.is_timeout(), cx),
        OciDistributionError::UnsupportedSchemaVersionError(v) => format!(
            "its manifest is of Docker's schema {v}, which is not supported: push the image again with a current client"
        ),
        OciDistributionError::UnsupportedMediaTypeError(m) => {
            format!("its manifest's media type {m} is not an image's")
        }
        OciDistributionError::DigestError(e) => {
            format!("{registry} sent content that does not match its digest ({e})")
        }
        OciDistributionError::IoError(e) => format!("reading its config: {e}"),
        other => format!("{registry}: {other}"),
    }
}

fn registry_error(code: &OciErrorCode, message: &str, cx: &Context) -> String {
    let (registry, repository) = (cx.registry, cx.repository);
    match code {
        OciErrorCode::ManifestUnknown | OciErrorCode::NotFound => format!(
            "manifest unknown: no {} in {repository} on {registry}",
            cx.version
        ),
        OciErrorCode::NameUnknown => format!("repository {repository} unknown on {registry}"),
        OciErrorCode::BlobUnknown => {
            format!("{registry} lacks the image's config blob (blob unknown)")
        }
        OciErrorCode::Unauthorized => unauthorized(cx),
        OciErrorCode::Denied => format!("access denied by {registry}: {}", fix(cx)),
        OciErrorCode::Toomanyrequests => format!(
            "{registry} refuses more requests for now (too many requests): try again later, or with credentials (--registry-config)"
        ),
        other => {
            // the code as the registry wrote it (MANIFEST_INVALID, ...)
            let code = serde_json::to_value(other)
                .ok()
                .and_then(|v| v.as_str().map(String::from))
                .unwrap_or_else(|| format!("{other:?}"));
            format!("{registry} answered {code}: {message}")
        }
    }
}

fn unauthorized(cx: &Context) -> String {
    format!("401 unauthorized: {}", fix(cx))
}

/// What to do about a refusal, given where the credentials came from.
fn fix(cx: &Context) -> String {
    let registry = cx.registry;
    match cx.source {
        Source::Anonymous => format!("set credentials for {registry} in --registry-config"),
        Source::File(path) => format!(
            "the credentials for {registry} in {} are refused: check them",
            path.display()
        ),
        Source::Helper(helper) => format!(
            "the credentials for {registry} are in the credential helper docker-credential-{helper}, which is not run: put them in `auths` of a file for --registry-config"
        ),
        Source::IdentityToken(path) => format!(
            "the credentials for {registry} in {} are an identity token, which is not supported: log in with a username and password",
            path.display()
        ),
    }
}

/// A request that got no HTTP answer: the deepest cause says why (connection refused, a
/// name that does not resolve, TLS).
fn request(e: &(dyn Error + 'static), connect: bool, timed_out: bool, cx: &Context) -> String {
    let registry = cx.registry;
    if timed_out {
        return explain(Failure::Timeout, cx).0;
    }
    let chain = causes(e);
    let refused = chain.iter().any(|c| {
        c.downcast_ref::<io::Error>()
            .is_some_and(|io| io.kind() == io::ErrorKind::ConnectionRefused)
    });
    let tls = chain.iter().find_map(|c| c.downcast_ref::<rustls::Error>());
    let deepest = chain.last().copied().unwrap_or(e);
    if let Some(tls) = tls {
        let hint = match cx.insecure {
            true => String::new(),
            false => format!("; if it serves plain HTTP: --insecure-registry {registry}"),
        };
        return format!("TLS with {registry} failed ({tls}){hint}");
    }
    match (refused, connect) {
        (true, _) => format!("cannot connect to {registry}: connection refused"),
        (false, true) => format!("cannot connect to {registry}: {deepest}"),
        (false, false) => format!("request to {registry} failed: {deepest}"),
    }
}

/// `e` and its causes, outermost first. An io::Error's `source` skips the error it wraps
/// (and TLS errors come wrapped in two), so those are followed by hand.
fn causes<'a>(e: &'a (dyn Error + 'static)) -> Vec<&'a (dyn Error + 'static)> {
    let mut chain = vec![];
    let mut next = Some(e);
    while let Some(c) = next {
        chain.push(c);
        next = match c.downcast_ref::<io::Error>().and_then(io::Error::get_ref) {
            Some(inner) => Some(inner as &(dyn Error + 'static)),
            None => c.source(),
        };
    }
    chain
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    fn cx<'a>(source: &'a Source, platform: &'a Platform) -> Context<'a> {
        Context {
            registry: "r.io",
            repository: "team/app",
            version: "tag 1".into(),
            source,
            platform,
            insecure: false,
            timeout: Duration::from_secs(20),
        }
    }

    fn registry_error(code: &str) -> Failure {
        let envelope = serde_json::from_value(serde_json::json!(
            {"errors": [{"code": code, "message": "m"}]}
        ))
        .unwrap();
        Failure::Oci(OciDistributionError::RegistryError {
            envelope,
            url: "u".into(),
        })
    }

    #[test]
    fn refusals_say_where_the_credentials_are_and_the_fix() {
        let p = Platform::parse("linux/amd64").unwrap();
        let unauthorized =
            || Failure::Oci(OciDistributionError::UnauthorizedError { url: "u".into() });
        for (source, want) in [
            (
                Source::Anonymous,
                "401 unauthorized: set credentials for r.io in --registry-config",
            ),
            (
                Source::File(PathBuf::from("/c.json")),
                "401 unauthorized: the credentials for r.io in /c.json are refused: check them",
            ),
            (
                Source::Helper("desktop".into()),
                "401 unauthorized: the credentials for r.io are in the credential helper docker-credential-desktop, which is not run: put them in `auths` of a file for --registry-config",
            ),
        ] {
            assert_eq!(explain(unauthorized(), &cx(&source, &p)).0, want);
        }
        let anon = Source::Anonymous;
        assert_eq!(
            explain(registry_error("UNAUTHORIZED"), &cx(&anon, &p)).0,
            "401 unauthorized: set credentials for r.io in --registry-config"
        );
        assert_eq!(
            explain(registry_error("DENIED"), &cx(&anon, &p)).0,
            "access denied by r.io: set credentials for r.io in --registry-config"
        );
    }

    #[test]
    fn registry_answers_in_words() {
        let (anon, p) = (Source::Anonymous, Platform::parse("linux/arm64").unwrap());
        let say = |f| explain(f, &cx(&anon, &p)).0;
        assert_eq!(
            say(registry_error("MANIFEST_UNKNOWN")),
            "manifest unknown: no tag 1 in team/app on r.io"
        );
        assert_eq!(
            say(registry_error("NAME_UNKNOWN")),
            "repository team/app unknown on r.io"
        );
        assert_eq!(
            say(registry_error("MANIFEST_INVALID")),
            "r.io answered MANIFEST_INVALID: m"
        );
        assert_eq!(
            say(Failure::NoPlatform(vec![
                "linux/amd64".into(),
                "linux/s390x".into()
            ])),
            "no linux/arm64 image in the index (platforms: linux/amd64, linux/s390x; see --platform)"
        );
        assert_eq!(
            say(Failure::Timeout),
            "no answer from r.io within 20s (--registry-timeout)"
        );
        assert_eq!(
            say(Failure::Oci(OciDistributionError::ServerError {
                code: 503,
                url: "u".into(),
                message: "busy\nmore".into()
            })),
            "r.io answered HTTP 503: busy"
        );
    }
}
