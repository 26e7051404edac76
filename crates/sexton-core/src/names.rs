//! Names: container names (DNS-1123 labels, which makes them safe graveyard file names),
//! pod names (DNS-1123 subdomains) and lists of dependencies.

use thiserror::Error;

#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum NameError {
    #[error(
        "must be a plain name: `/` and `..` are not allowed (the name is a file name in the graveyard)"
    )]
    NotPlain,
    #[error("is {0} characters long; a DNS-1123 label has at most 63")]
    TooLong(usize),
    #[error("contains {0:?}; a DNS-1123 label has only lower-case letters, digits and `-`")]
    BadChar(char),
    #[error("must start and end with a lower-case letter or digit (DNS-1123 label)")]
    Edges,
    #[error("is {0} characters long; at most 253")]
    SubdomainTooLong(usize),
    #[error("part {0:?} {1}")]
    Part(String, Box<NameError>),
}

#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum DepListError {
    #[error("dependency {0:?} {1}")]
    Name(String, NameError),
    #[error("{0:?} is this container's own name; a container cannot depend on itself")]
    Own(String),
    #[error("{0:?} is listed twice")]
    Twice(String),
}

/// A container name: a DNS-1123 label (what Kubernetes requires of container names), so it
/// is also a safe file name in the graveyard.
pub fn validate_name(name: &str) -> Result<(), NameError> {
    if name.contains('/') || name.contains("..") || name == "." {
        return Err(NameError::NotPlain);
    }
    if name.len() > 63 {
        return Err(NameError::TooLong(name.len()));
    }
    let ok_char = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-';
    if let Some(c) = name.chars().find(|&c| !ok_char(c)) {
        return Err(NameError::BadChar(c));
    }
    let alnum = |c: Option<char>| c.is_some_and(|c| c.is_ascii_alphanumeric());
    if !alnum(name.chars().next()) || !alnum(name.chars().last()) {
        return Err(NameError::Edges);
    }
    Ok(())
}

/// A DNS-1123 subdomain (pod names): lower-case labels joined by dots, at most 253.
pub fn validate_subdomain(name: &str) -> Result<(), NameError> {
    if name.len() > 253 {
        return Err(NameError::SubdomainTooLong(name.len()));
    }
    for label in name.split('.') {
        validate_name(label).map_err(|e| NameError::Part(label.into(), Box::new(e)))?;
    }
    Ok(())
}

/// A comma list of container names: blanks trimmed, empty items skipped; each a valid
/// name; duplicates and self-references rejected.
pub fn parse_dep_list(value: &str, own_name: &str) -> Result<Vec<String>, DepListError> {
    let mut out: Vec<String> = Vec::new();
    for item in value.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        validate_name(item).map_err(|e| DepListError::Name(item.into(), e))?;
        if item == own_name {
            return Err(DepListError::Own(item.into()));
        }
        if out.iter().any(|d| d == item) {
            return Err(DepListError::Twice(item.into()));
        }
        out.push(item.to_string());
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        for ok in ["a", "main", "sidecar-1", "0", &"a".repeat(63)] {
            assert!(validate_name(ok).is_ok(), "{ok}");
        }
        for bad in [
            "",
            "A",
            "a_b",
            "a.b",
            "-a",
            "a-",
            "a/b",
            "..",
            ".",
            &"a".repeat(64),
            "ä",
        ] {
            assert!(validate_name(bad).is_err(), "{bad}");
        }
    }
}
