//! The API client's TLS: rustls with ring (no aws-lc: a C build and ~1 MB), TLS 1.2 and
//! 1.3 (an API server speaks both), the server trusted through the configured certificate
//! authorities, a client certificate when one is configured; and, for a kubeconfig's
//! `insecure-skip-tls-verify` (feature `kubeconfig`), a verifier that accepts any server
//! certificate.

use std::sync::Arc;

use rustls::pki_types::pem::{self, PemObject};
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::{ClientConfig, ConfigBuilder, RootCertStore, WantsVerifier};

use super::config::Config;

/// Why no TLS configuration could be made from the configuration.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("TLS: {0}")]
    Versions(rustls::Error),
    #[error(
        "no certificate authority for the API server (a kubeconfig needs certificate-authority[-data] or insecure-skip-tls-verify)"
    )]
    NoAuthority,
    #[error("certificate authority: {0}")]
    AuthorityPem(pem::Error),
    #[error("certificate authority: {0}")]
    Authority(rustls::Error),
    #[error("certificate authority: no certificate in it")]
    EmptyAuthority,
    #[error("client certificate: {0}")]
    ClientCertificatePem(pem::Error),
    #[error("client key: {0}")]
    ClientKey(pem::Error),
    #[error("client certificate: {0}")]
    ClientCertificate(rustls::Error),
    #[cfg(not(feature = "kubeconfig"))]
    #[error("insecure-skip-tls-verify needs the `kubeconfig` feature")]
    InsecureNeedsKubeconfig,
}

type WantsClientCert = ConfigBuilder<ClientConfig, rustls::client::WantsClientCert>;

/// The TLS configuration of a client of `config`'s server.
pub fn client_config(config: &Config) -> Result<ClientConfig, TlsError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(TlsError::Versions)?;
    let builder = if config.insecure {
        insecure(builder, provider)?
    } else {
        let ca = config.ca.as_deref().ok_or(TlsError::NoAuthority)?;
        builder.with_root_certificates(roots(ca)?)
    };
    match &config.identity {
        None => Ok(builder.with_no_client_auth()),
        Some((cert, key)) => {
            let certs = CertificateDer::pem_slice_iter(cert)
                .collect::<Result<Vec<_>, _>>()
                .map_err(TlsError::ClientCertificatePem)?;
            let key = PrivateKeyDer::from_pem_slice(key).map_err(TlsError::ClientKey)?;
            builder
                .with_client_auth_cert(certs, key)
                .map_err(TlsError::ClientCertificate)
        }
    }
}

/// The certificates of a PEM bundle, as trust anchors.
fn roots(pem: &[u8]) -> Result<RootCertStore, TlsError> {
    let mut roots = RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(pem) {
        let cert = cert.map_err(TlsError::AuthorityPem)?;
        roots.add(cert).map_err(TlsError::Authority)?;
    }
    if roots.is_empty() {
        return Err(TlsError::EmptyAuthority);
    }
    Ok(roots)
}

#[cfg(feature = "kubeconfig")]
fn insecure(
    builder: ConfigBuilder<ClientConfig, WantsVerifier>,
    provider: Arc<rustls::crypto::CryptoProvider>,
) -> Result<WantsClientCert, TlsError> {
    Ok(builder
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(NoVerify(provider))))
}

#[cfg(not(feature = "kubeconfig"))]
fn insecure(
    _: ConfigBuilder<ClientConfig, WantsVerifier>,
    _: Arc<rustls::crypto::CryptoProvider>,
) -> Result<WantsClientCert, TlsError> {
    Err(TlsError::InsecureNeedsKubeconfig)
}

/// `insecure-skip-tls-verify: true`: any server certificate is accepted (the handshake's
/// signatures are still checked, as kubectl does).
#[cfg(feature = "kubeconfig")]
#[derive(Debug)]
struct NoVerify(Arc<rustls::crypto::CryptoProvider>);

#[cfg(feature = "kubeconfig")]
impl rustls::client::danger::ServerCertVerifier for NoVerify {
    fn verify_server_cert(
        &self,
        _: &CertificateDer<'_>,
        _: &[CertificateDer<'_>],
        _: &rustls::pki_types::ServerName<'_>,
        _: &[u8],
        _: rustls::pki_types::UnixTime,
    ) -> Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
        Ok(rustls::client::danger::ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::config::Token;

    #[test]
    fn the_server_is_trusted_only_through_a_certificate_authority() {
        let c = Config {
            host: "fd00::1".into(),
            port: 443,
            prefix: String::new(),
            ca: None,
            token: Token::None,
            identity: None,
            insecure: false,
        };
        let err = |c: &Config| client_config(c).unwrap_err().to_string();
        assert!(err(&c).contains("no certificate authority"));
        let c = Config {
            ca: Some(b"not pem".to_vec()),
            ..c
        };
        assert!(err(&c).contains("no certificate in it"));
    }
}
