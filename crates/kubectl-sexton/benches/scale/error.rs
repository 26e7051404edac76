//! Errors of the harness: messages for the person running it.

pub type Result<T> = std::result::Result<T, String>;

/// `.map_err(ctx("doing X"))`: an error message saying what was being done.
pub fn ctx<E: std::fmt::Display>(doing: impl Into<String>) -> impl FnOnce(E) -> String {
    let doing = doing.into();
    move |e| format!("{doing}: {e}")
}
