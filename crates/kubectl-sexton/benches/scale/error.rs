//! Errors of the harness: messages for the person running it, each saying what was being
//! done (`ctx`), typed so that a step's failure is never mistaken for a value.

/// A step of the harness failed: what was being done, and why.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct Failed(pub String);

impl From<String> for Failed {
    fn from(s: String) -> Failed {
        Failed(s)
    }
}

pub type Result<T> = std::result::Result<T, Failed>;

/// `.map_err(ctx("doing X"))`: an error message saying what was being done.
pub fn ctx<E: std::fmt::Display>(doing: impl Into<String>) -> impl FnOnce(E) -> Failed {
    let doing = doing.into();
    move |e| Failed(format!("{doing}: {e}"))
}

impl From<&str> for Failed {
    fn from(s: &str) -> Failed {
        Failed(s.to_owned())
    }
}
