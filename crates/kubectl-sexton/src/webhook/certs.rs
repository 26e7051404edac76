//! The webhook's serving certificate: held for the TLS handshakes, and replaced at run time,
//! from files that change (a Secret volume, cert-manager) or from the self-managed Secret.
//! A replacement that cannot be read is refused and the certificate in use is kept.

use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};
use std::time::{Duration, SystemTime};

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use tracing::{error, info};

use crate::shared::certs::{Unparsable, not_after};

/// How often the certificate files are checked for a change.
const FILE_POLL: Duration = Duration::from_secs(2);

#[derive(Debug, thiserror::Error)]
pub enum CertError {
    #[error("{what}: no PEM certificate in it")]
    NoCertificate { what: String },
    #[error("{what}: no usable PEM private key in it ({reason})")]
    BadKey { what: String, reason: String },
    #[error("{what}: {source}")]
    Io {
        what: String,
        #[source]
        source: std::io::Error,
    },
    #[error(transparent)]
    Unparsable(#[from] Unparsable),
}

/// The certificate served, swapped atomically for the next handshakes.
#[derive(Debug, Default)]
pub struct CertStore(RwLock<Option<Arc<CertifiedKey>>>);

impl ResolvesServerCert for CertStore {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        self.0.read().expect("poisoned").clone()
    }
}

impl CertStore {
    /// Replaces the certificate from a PEM chain and key; returns when it expires.
    pub fn set_pem(&self, cert_pem: &[u8], key_pem: &[u8], what: &str) -> Result<i64, CertError> {
        let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(cert_pem)
            .filter_map(Result::ok)
            .collect();
        let Some(leaf) = chain.first() else {
            return Err(CertError::NoCertificate { what: what.into() });
        };
        let expires = not_after(leaf, what)?;
        let bad_key = |reason: String| CertError::BadKey {
            what: what.into(),
            reason,
        };
        let key = PrivateKeyDer::from_pem_slice(key_pem).map_err(|e| bad_key(e.to_string()))?;
        let provider = rustls::crypto::ring::default_provider();
        let signer = provider
            .key_provider
            .load_private_key(key)
            .map_err(|e| bad_key(e.to_string()))?;
        *self.0.write().expect("poisoned") = Some(Arc::new(CertifiedKey::new(chain, signer)));
        Ok(expires)
    }

    /// The TLS configuration that serves this store's certificate, HTTP/2 or HTTP/1.1; with
    /// `client_ca` (`--client-ca-file`), to clients with a certificate it signed only.
    pub fn server_config(
        self: &Arc<Self>,
        client_ca: Option<&Path>,
    ) -> Result<Arc<rustls::ServerConfig>, CertError> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder = rustls::ServerConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .expect("ring supports the default protocol versions");
        let builder = match client_ca {
            None => builder.with_no_client_auth(),
            Some(path) => builder.with_client_cert_verifier(client_verifier(path, provider)?),
        };
        let mut config = builder.with_cert_resolver(self.clone());
        config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        Ok(Arc::new(config))
    }
}

/// Verifies clients against the CAs of the PEM file `path` (`--client-ca-file`).
fn client_verifier(
    path: &Path,
    provider: Arc<rustls::crypto::CryptoProvider>,
) -> Result<Arc<dyn rustls::server::danger::ClientCertVerifier>, CertError> {
    let what = format!("--client-ca-file={}", path.display());
    let pem = read(path, "--client-ca-file")?;
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(&pem).filter_map(Result::ok) {
        roots
            .add(cert)
            .map_err(|_| Unparsable { what: what.clone() })?;
    }
    if roots.is_empty() {
        return Err(CertError::NoCertificate { what });
    }
    rustls::server::WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
        .build()
        .map_err(|_| CertError::NoCertificate { what })
}

/// Certificate and key files (`--tls-cert-file`, `--tls-key-file`).
#[derive(Debug, Clone)]
pub struct CertFiles {
    pub cert: PathBuf,
    pub key: PathBuf,
}

fn read(path: &Path, flag: &str) -> Result<Vec<u8>, CertError> {
    std::fs::read(path).map_err(|source| CertError::Io {
        what: format!("{flag}={}", path.display()),
        source,
    })
}

impl CertFiles {
    /// Loads the files into `store`.
    pub fn load(&self, store: &CertStore) -> Result<i64, CertError> {
        let cert = read(&self.cert, "--tls-cert-file")?;
        let key = read(&self.key, "--tls-key-file")?;
        let what = format!("--tls-cert-file={}", self.cert.display());
        store.set_pem(&cert, &key, &what)
    }

    /// What identifies the files' current contents: Secret volumes swap a symlink, so the
    /// modification time and size of what it points to are read, not the link's.
    fn stamp(&self) -> Option<(SystemTime, u64, SystemTime, u64)> {
        let c = std::fs::metadata(&self.cert).ok()?;
        let k = std::fs::metadata(&self.key).ok()?;
        Some((c.modified().ok()?, c.len(), k.modified().ok()?, k.len()))
    }

    /// Reloads the files into `store` whenever they change, for as long as the process runs.
    pub async fn watch(self, store: Arc<CertStore>) {
        let mut seen = self.stamp();
        loop {
            tokio::time::sleep(FILE_POLL).await;
            let now = self.stamp();
            if now == seen || now.is_none() {
                continue;
            }
            seen = now;
            match self.load(&store) {
                Ok(expires) => info!(
                    expires,
                    "serving certificate reloaded from {}",
                    self.cert.display()
                ),
                Err(e) => {
                    error!("serving certificate not reloaded (the previous one is kept): {e}")
                }
            }
        }
    }
}
