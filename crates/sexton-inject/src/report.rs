//! One line per resource saying what was done and why, as `linkerd inject` does:
//! `job/backup: native (sidecars: cloud-sql-proxy)`.

use std::fmt;

use crate::catalogue::Recognised;
use crate::options::Mechanism;

/// What became of one resource.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    Injected {
        mechanism: Mechanism,
        sidecars: Vec<String>,
        /// The sidecars that are vendors' injected ones, with their vendor.
        recognised: Vec<Recognised>,
        /// Why this mechanism, when `auto` chose it over another.
        note: Option<String>,
        /// What of the containers' own settings the mechanism could not carry over.
        caveats: Vec<String>,
    },
    /// Left as it was, and why (no sidecars, disabled, ...).
    Unchanged(String),
    /// Left as it was because injecting it would be wrong: the user must act. Makes the
    /// command exit non-zero.
    Refused(String),
    /// `uninject`: the original restored.
    Restored,
    /// Not a kind with a pod template: passed through.
    Skipped,
}

impl Outcome {
    pub fn is_refused(&self) -> bool {
        matches!(self, Outcome::Refused(_))
    }
}

/// A resource (`job/backup`, in a List `list[2]/job/backup`) and its outcome.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Report {
    pub resource: String,
    pub outcome: Outcome,
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: ", self.resource)?;
        match &self.outcome {
            Outcome::Injected {
                mechanism,
                sidecars,
                recognised,
                note,
                caveats,
            } => {
                let named: Vec<String> = sidecars
                    .iter()
                    .map(|s| match recognised.iter().find(|r| &r.container == s) {
                        Some(r) => format!("{s} [{}, injected]", r.vendor),
                        None => s.clone(),
                    })
                    .collect();
                match named.is_empty() {
                    true => write!(f, "{mechanism} (sidecars: none yet)")?,
                    false => write!(f, "{mechanism} (sidecars: {})", named.join(", "))?,
                }
                if *mechanism == Mechanism::Controller {
                    write!(
                        f,
                        "; ended by the SidecarTerminator (kubectl-sexton controller must run)"
                    )?;
                }
                if let Some(n) = note {
                    write!(f, "; {n}")?;
                }
                for c in caveats {
                    write!(f, "; {c}")?;
                }
                Ok(())
            }
            Outcome::Unchanged(why) => write!(f, "unchanged ({why})"),
            Outcome::Refused(why) => write!(f, "refused: {why}"),
            Outcome::Restored => write!(f, "restored"),
            Outcome::Skipped => write!(f, "skipped (no pod template)"),
        }
    }
}

/// Why a mechanism cannot be used for a template; the message names the field and the fix.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{mechanism}: {message}")]
pub struct Refusal {
    pub mechanism: Mechanism,
    pub message: String,
}

impl Refusal {
    pub fn new(mechanism: Mechanism, message: String) -> Self {
        Refusal { mechanism, message }
    }
}
