//! Certificate inspection: when an X.509 certificate expires (the webhook's serving
//! certificate and its CA, and `doctor`'s check of them).

/// A certificate that is not one; `what` names where it came from.
#[derive(Debug, thiserror::Error)]
#[error("{what}: not a valid X.509 certificate")]
pub struct Unparsable {
    pub what: String,
}

/// When a certificate (DER) expires, as seconds since the epoch.
pub fn not_after(der: &[u8], what: &str) -> Result<i64, Unparsable> {
    let (_, cert) =
        x509_parser::parse_x509_certificate(der).map_err(|_| Unparsable { what: what.into() })?;
    Ok(cert.validity().not_after.timestamp())
}
