//! Self-managed TLS (`--self-managed-tls`), as Linkerd and Kyverno do it: the webhook keeps
//! a CA and a serving certificate in a Secret of its namespace, creates them when missing,
//! renews the serving certificate well before it expires, and writes the CA into the
//! `caBundle` of its MutatingWebhookConfiguration. Replicas share the Secret: the first
//! writer wins (a write conflict means another replica wrote; its certificate is used).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::ByteString;
use k8s_openapi::api::admissionregistration::v1::MutatingWebhookConfiguration;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Patch, PatchParams, PostParams};
use kube::{Api, Client};
use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair, KeyUsagePurpose};
use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;
use tracing::{info, warn};

use super::certs::CertStore;
use crate::shared::api_error::{Error as ApiError, Kind};
use crate::shared::certs::not_after;

const CA_DAYS: i64 = 3650;
const CERT_DAYS: i64 = 365;
/// A serving certificate is renewed once less than this is left.
const RENEW_BEFORE: i64 = 60 * 86400;
/// How often the Secret is read again (another replica may have renewed it).
const RECHECK: Duration = Duration::from_secs(300);
const FIELD_MANAGER: &str = "sexton-webhook";

/// Where the certificates live and whom they must name.
#[derive(Debug, Clone)]
pub struct SelfManaged {
    pub namespace: String,
    pub secret: String,
    /// The MutatingWebhookConfiguration whose caBundle is kept up to date.
    pub webhook_config: String,
    /// The Service's DNS names go into the certificate, plus these (`--tls-san`).
    pub service: String,
    pub extra_names: Vec<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error(transparent)]
    Api(#[from] ApiError),
    #[error("generating a certificate: {0}")]
    Generate(#[from] rcgen::Error),
    #[error("the Secret {0} holds no usable certificate ({1})")]
    Unusable(String, String),
}

/// The PEM files kept in the Secret.
#[derive(Debug, Clone, PartialEq)]
struct Pems {
    ca_cert: String,
    ca_key: String,
    cert: String,
    key: String,
}

impl SelfManaged {
    /// The names the serving certificate is valid for.
    fn names(&self) -> Vec<String> {
        let (s, ns) = (&self.service, &self.namespace);
        let mut v = vec![
            format!("{s}.{ns}.svc"),
            format!("{s}.{ns}.svc.cluster.local"),
            format!("{s}.{ns}"),
            s.clone(),
        ];
        v.extend(self.extra_names.iter().cloned());
        v
    }

    /// Makes sure a valid certificate is served and trusted: once at start (an error here
    /// is fatal), then every few minutes, renewing when due.
    pub async fn run(self, client: Client, store: Arc<CertStore>) {
        loop {
            tokio::time::sleep(RECHECK).await;
            if let Err(e) = self.ensure(&client, &store).await {
                warn!("self-managed TLS: {e}; retrying in {RECHECK:?}");
            }
        }
    }

    pub async fn ensure(&self, client: &Client, store: &CertStore) -> Result<(), TlsError> {
        let pems = self.current_or_new(client).await?;
        let what = format!("Secret {}/{}", self.namespace, self.secret);
        store
            .set_pem(pems.cert.as_bytes(), pems.key.as_bytes(), &what)
            .map_err(|e| TlsError::Unusable(what.clone(), e.to_string()))?;
        self.trust(client, &pems.ca_cert).await
    }

    fn object(&self) -> String {
        format!("{}/{}", self.namespace, self.secret)
    }

    /// The Secret's certificates if still good, else new ones written into it.
    async fn current_or_new(&self, client: &Client) -> Result<Pems, TlsError> {
        let api: Api<Secret> = Api::namespaced(client.clone(), &self.namespace);
        let existing = api
            .get_opt(&self.secret)
            .await
            .map_err(|e| ApiError::api(self.object(), "reading the TLS Secret", e))?;
        let old = existing.as_ref().and_then(pems_of);
        if let Some(p) = old.as_ref().filter(|p| self.still_good(p)) {
            return Ok(p.clone());
        }
        let new = self.generate(old.as_ref())?;
        let secret = secret_of(&self.secret, &new, existing);
        let written = match secret.metadata.resource_version {
            Some(_) => {
                api.replace(&self.secret, &PostParams::default(), &secret)
                    .await
            }
            None => api.create(&PostParams::default(), &secret).await,
        };
        match written {
            Ok(_) => {
                info!(secret = %self.object(), "self-managed TLS: wrote a new serving certificate");
                Ok(new)
            }
            // another replica wrote first: use its certificate
            Err(e) if Kind::of(&e) == Kind::Conflict || is_already_exists(&e) => {
                let s = api
                    .get(&self.secret)
                    .await
                    .map_err(|e| ApiError::api(self.object(), "reading the TLS Secret", e))?;
                pems_of(&s).ok_or_else(|| TlsError::Unusable(self.object(), "incomplete".into()))
            }
            Err(e) => Err(ApiError::api(self.object(), "writing the TLS Secret", e).into()),
        }
    }

    /// Valid for long enough, and for every name it must cover.
    fn still_good(&self, p: &Pems) -> bool {
        let Some(Ok(der)) = CertificateDer::pem_slice_iter(p.cert.as_bytes()).next() else {
            return false;
        };
        let Ok(expires) = not_after(&der, "") else {
            return false;
        };
        let covered = sans(&der);
        expires - Timestamp::now().as_second() > RENEW_BEFORE
            && self.names().iter().all(|n| covered.contains(n))
    }

    /// A serving certificate signed by the old CA if it is still good, else by a new CA.
    fn generate(&self, old: Option<&Pems>) -> Result<Pems, TlsError> {
        let reuse = old.and_then(|p| {
            let key = KeyPair::from_pem(&p.ca_key).ok()?;
            let issuer = Issuer::from_ca_cert_pem(&p.ca_cert, key).ok()?;
            let der = CertificateDer::pem_slice_iter(p.ca_cert.as_bytes())
                .next()?
                .ok()?;
            let left = not_after(&der, "").ok()? - Timestamp::now().as_second();
            (left > CERT_DAYS * 86400).then_some((issuer, p.ca_cert.clone(), p.ca_key.clone()))
        });
        let (issuer, ca_cert, ca_key) = match reuse {
            Some(r) => r,
            None => new_ca()?,
        };
        let key = KeyPair::generate()?;
        // (names that are IP addresses become IP SANs)
        let mut params = CertificateParams::new(self.names())?;
        params.distinguished_name.push(
            DnType::CommonName,
            format!("{}.{}.svc", self.service, self.namespace),
        );
        params.not_before = rcgen::date_time_ymd(2000, 1, 1);
        params.not_after = days_from_now(CERT_DAYS);
        let cert = params.signed_by(&key, &issuer)?;
        Ok(Pems {
            ca_cert,
            ca_key,
            cert: cert.pem(),
            key: key.serialize_pem(),
        })
    }

    /// Writes the CA into every webhook of the configuration, if it is not there already.
    async fn trust(&self, client: &Client, ca_pem: &str) -> Result<(), TlsError> {
        let api: Api<MutatingWebhookConfiguration> = Api::all(client.clone());
        let object = self.webhook_config.clone();
        let mwc = api.get(&self.webhook_config).await.map_err(|e| {
            ApiError::api(
                object.clone(),
                "reading the MutatingWebhookConfiguration",
                e,
            )
        })?;
        let bundle = ByteString(ca_pem.as_bytes().to_vec());
        let webhooks = mwc.webhooks.unwrap_or_default();
        if webhooks
            .iter()
            .all(|w| w.client_config.ca_bundle.as_ref() == Some(&bundle))
        {
            return Ok(());
        }
        // a JSON patch per webhook, guarded by its name, so a concurrent edit is not undone
        let ops: Vec<serde_json::Value> = webhooks
            .iter()
            .enumerate()
            .flat_map(|(i, w)| {
                [
                    serde_json::json!({"op": "test", "path": format!("/webhooks/{i}/name"), "value": w.name}),
                    serde_json::json!({"op": "add", "path": format!("/webhooks/{i}/clientConfig/caBundle"), "value": bundle}),
                ]
            })
            .collect();
        let patch: json_patch::Patch =
            serde_json::from_value(serde_json::Value::Array(ops)).expect("valid ops");
        let params = PatchParams::apply(FIELD_MANAGER);
        api.patch(
            &self.webhook_config,
            &PatchParams {
                force: false,
                ..params
            },
            &Patch::<()>::Json(patch),
        )
        .await
        .map_err(|e| ApiError::api(object, "writing the caBundle", e))?;
        info!(config = %self.webhook_config, "self-managed TLS: caBundle updated");
        Ok(())
    }
}

/// The DNS names and IP addresses a certificate is valid for.
fn sans(der: &[u8]) -> Vec<String> {
    use x509_parser::extensions::GeneralName;
    let Ok((_, cert)) = x509_parser::parse_x509_certificate(der) else {
        return vec![];
    };
    let Ok(Some(ext)) = cert.subject_alternative_name() else {
        return vec![];
    };
    ext.value
        .general_names
        .iter()
        .filter_map(|n| match n {
            GeneralName::DNSName(d) => Some(d.to_string()),
            GeneralName::IPAddress(b) => match b.len() {
                4 => Some(std::net::Ipv4Addr::from(<[u8; 4]>::try_from(*b).ok()?).to_string()),
                16 => Some(std::net::Ipv6Addr::from(<[u8; 16]>::try_from(*b).ok()?).to_string()),
                _ => None,
            },
            _ => None,
        })
        .collect()
}

fn is_already_exists(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.reason == "AlreadyExists")
}

fn days_from_now(days: i64) -> time::OffsetDateTime {
    time::OffsetDateTime::now_utc() + time::Duration::days(days)
}

/// A new CA: its issuer, certificate and key (PEM).
fn new_ca() -> Result<(Issuer<'static, KeyPair>, String, String), rcgen::Error> {
    let key = KeyPair::generate()?;
    let mut params = CertificateParams::new(Vec::<String>::new())?;
    params
        .distinguished_name
        .push(DnType::CommonName, "sexton-webhook-ca");
    params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    params.not_before = rcgen::date_time_ymd(2000, 1, 1);
    params.not_after = days_from_now(CA_DAYS);
    let cert = params.self_signed(&key)?;
    let (cert_pem, key_pem) = (cert.pem(), key.serialize_pem());
    Ok((Issuer::new(params, key), cert_pem, key_pem))
}

fn pems_of(s: &Secret) -> Option<Pems> {
    let data = s.data.as_ref()?;
    let get = |k: &str| String::from_utf8(data.get(k)?.0.clone()).ok();
    Some(Pems {
        ca_cert: get("ca.crt")?,
        ca_key: get("ca.key")?,
        cert: get("tls.crt")?,
        key: get("tls.key")?,
    })
}

/// The Secret holding `p` (replacing `existing`'s data, keeping its metadata).
fn secret_of(name: &str, p: &Pems, existing: Option<Secret>) -> Secret {
    let bytes = |s: &str| ByteString(s.as_bytes().to_vec());
    let data = BTreeMap::from([
        ("ca.crt".to_string(), bytes(&p.ca_cert)),
        ("ca.key".to_string(), bytes(&p.ca_key)),
        ("tls.crt".to_string(), bytes(&p.cert)),
        ("tls.key".to_string(), bytes(&p.key)),
    ]);
    let mut s = existing.unwrap_or_default();
    s.metadata.name = Some(name.into());
    // (a Secret's type cannot change: one made by someone else keeps its own)
    s.type_.get_or_insert_with(|| "kubernetes.io/tls".into());
    s.data = Some(data);
    s
}
