//! The API server's client of the macOS build. kube's `rustls-tls` verifies certificates
//! with rustls-platform-verifier, which links Apple's Security framework; the plugin is
//! cross-built without the macOS SDK (scripts/desktop.sh), so it cannot link it. This client
//! is kube's stack (base URI, authentication, headers, timeouts) over rustls with ring that
//! trusts exactly the kubeconfig's certificate authority, as kubectl does when the
//! kubeconfig names one (every cluster's does in practice). Built on every platform (used on
//! macOS only), so that a change of kube's API breaks the Linux build too.

use std::sync::Arc;

use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use kube::client::{Body, ConfigExt};
use kube::{Client, Config};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use secrecy::ExposeSecret;
use tower::ServiceBuilder;

/// Why the client could not be made (the parent module words it as its `ClientError`; this
/// module imports nothing from it, so that the two do not depend on each other).
#[derive(Debug)]
pub enum Error {
    Client(kube::Error),
    Tls(String),
}

pub fn client(config: Config) -> Result<Client, Error> {
    let tls = tls_config(&config)?;
    let mut http = HttpConnector::new();
    http.enforce_http(false);
    http.set_connect_timeout(config.connect_timeout);
    let mut https = hyper_rustls::HttpsConnectorBuilder::new()
        .with_tls_config(tls)
        .https_or_http();
    if let Some(name) = &config.tls_server_name {
        let name = ServerName::try_from(name.clone())
            .map_err(|e| Error::Tls(format!("tls-server-name {name:?}: {e}")))?;
        https = https.with_server_name_resolver(hyper_rustls::FixedServerNameResolver::new(name));
    }
    let mut connector =
        hyper_timeout::TimeoutConnector::new(https.enable_http1().wrap_connector(http));
    connector.set_read_timeout(config.read_timeout);
    connector.set_write_timeout(config.write_timeout);
    let http: hyper_util::client::legacy::Client<_, Body> =
        hyper_util::client::legacy::Builder::new(TokioExecutor::new()).build(connector);
    let service = ServiceBuilder::new()
        .layer(config.base_uri_layer())
        .option_layer(config.auth_layer().map_err(Error::Client)?)
        .layer(config.extra_headers_layer().map_err(Error::Client)?)
        // (a refreshed token's layer fails with BoxError: the connection's errors too)
        .map_err(tower::BoxError::from)
        .service(http);
    Ok(Client::new(service, config.default_namespace))
}

/// rustls trusting the kubeconfig's certificate authority, with its client certificate if
/// it has one.
fn tls_config(config: &Config) -> Result<rustls::ClientConfig, Error> {
    let tls = |what: &str, e: &dyn std::fmt::Display| Error::Tls(format!("{what}: {e}"));
    if config.accept_invalid_certs {
        return Err(Error::Tls(
            "insecure-skip-tls-verify: the macOS build verifies the API server against the kubeconfig's certificate-authority; give it one".into(),
        ));
    }
    let Some(authorities) = config.root_cert.as_deref() else {
        return Err(Error::Tls(
            "the kubeconfig's cluster has no certificate-authority(-data): the macOS build trusts only that authority".into(),
        ));
    };
    let mut roots = rustls::RootCertStore::empty();
    for der in authorities {
        roots
            .add(CertificateDer::from(der.clone()))
            .map_err(|e| tls("certificate-authority", &e))?;
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| tls("TLS versions", &e))?
        .with_root_certificates(roots);
    let Some((chain, key)) = identity(config)? else {
        return Ok(builder.with_no_client_auth());
    };
    builder
        .with_client_auth_cert(chain, key)
        .map_err(|e| tls("client-key", &e))
}

/// The kubeconfig user's client certificate and key (`client-certificate(-data)`,
/// `client-key(-data)`), when it has them.
fn identity(
    config: &Config,
) -> Result<Option<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>)>, Error> {
    let user = &config.auth_info;
    let key = user
        .client_key_data
        .as_ref()
        .map(|k| k.expose_secret().to_string());
    let cert = pem_of(
        "client-certificate",
        user.client_certificate_data.as_deref(),
        user.client_certificate.as_deref(),
    )?;
    let key = pem_of("client-key", key.as_deref(), user.client_key.as_deref())?;
    let (cert, key) = match (cert, key) {
        (None, None) => return Ok(None),
        (Some(c), Some(k)) => (c, k),
        (Some(_), None) => {
            return Err(Error::Tls("client-certificate without client-key".into()));
        }
        (None, Some(_)) => {
            return Err(Error::Tls("client-key without client-certificate".into()));
        }
    };
    let chain = CertificateDer::pem_slice_iter(&cert)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| Error::Tls(format!("client-certificate: {e}")))?;
    let key =
        PrivateKeyDer::from_pem_slice(&key).map_err(|e| Error::Tls(format!("client-key: {e}")))?;
    Ok(Some((chain, key)))
}

/// PEM bytes from a kubeconfig field's base64 `-data` form, else from its file.
fn pem_of(field: &str, data: Option<&str>, file: Option<&str>) -> Result<Option<Vec<u8>>, Error> {
    use base64::Engine as _;
    if let Some(data) = data {
        return base64::engine::general_purpose::STANDARD
            .decode(data.trim())
            .map(Some)
            .map_err(|e| Error::Tls(format!("{field}-data: {e}")));
    }
    file.map(|f| std::fs::read(f).map_err(|e| Error::Tls(format!("{field} {f}: {e}"))))
        .transpose()
}
