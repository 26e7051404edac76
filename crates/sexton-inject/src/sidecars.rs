//! Which containers of `spec.containers` are sidecars. The first source that names any
//! decides: the template annotation `sexton.dev/sidecars`, OpenKruise's markers, kubexit's
//! `KUBEXIT_DEATH_DEPS`, then `--sidecar`. The other containers are the mains.

use std::fmt;

use crate::markers::{env_pairs, env_value, kruise_marked};
use crate::template::{Template, name};

pub const ANNOTATION_SIDECARS: &str = "sexton.dev/sidecars";

/// Where the list of sidecars came from (said in the report).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    Annotation,
    KruiseMarkers,
    Kubexit,
    Flag,
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Source::Annotation => "annotation sexton.dev/sidecars",
            Source::KruiseMarkers => "OpenKruise markers",
            Source::Kubexit => "KUBEXIT_DEATH_DEPS",
            Source::Flag => "--sidecar",
        })
    }
}

/// The containers of a template, split.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Roles {
    pub sidecars: Vec<String>,
    pub mains: Vec<String>,
    pub source: Source,
}

/// A sidecar list that names what is not there.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "annotation {ANNOTATION_SIDECARS} names {missing:?}, which is not in spec.containers (containers: {present:?})"
)]
pub struct UnknownSidecar {
    pub missing: String,
    pub present: Vec<String>,
}

/// The sidecars and mains of `t`; `None` if nothing names a sidecar.
pub fn roles(t: &Template, flag: &[String]) -> Result<Option<Roles>, UnknownSidecar> {
    let names = t.container_names();
    let Some((sidecars, source)) = declared(t, &names)?
        .or_else(|| by_env(t, |c| kruise_marked(env_pairs(c))).map(|s| (s, Source::KruiseMarkers)))
        .or_else(|| by_env(t, is_kubexit_sidecar).map(|s| (s, Source::Kubexit)))
        .or_else(|| from_flag(&names, flag).map(|s| (s, Source::Flag)))
    else {
        return Ok(None);
    };
    let mains = names
        .into_iter()
        .filter(|n| !sidecars.contains(n))
        .collect();
    Ok(Some(Roles {
        sidecars,
        mains,
        source,
    }))
}

fn declared(
    t: &Template,
    names: &[String],
) -> Result<Option<(Vec<String>, Source)>, UnknownSidecar> {
    let Some(list) = t.annotation(ANNOTATION_SIDECARS) else {
        return Ok(None);
    };
    let mut sidecars: Vec<String> = vec![];
    for s in list.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        if !names.iter().any(|n| n == s) {
            return Err(UnknownSidecar {
                missing: s.into(),
                present: names.to_vec(),
            });
        }
        if !sidecars.iter().any(|x| x == s) {
            sidecars.push(s.into());
        }
    }
    // in the containers' order, whatever the annotation's
    let ordered: Vec<String> = names
        .iter()
        .filter(|n| sidecars.contains(n))
        .cloned()
        .collect();
    Ok((!ordered.is_empty()).then_some((ordered, Source::Annotation)))
}

fn is_kubexit_sidecar(c: &serde_json::Value) -> bool {
    env_value(c, "KUBEXIT_DEATH_DEPS").is_some_and(|v| !v.trim().is_empty())
}

fn by_env(t: &Template, marked: impl Fn(&serde_json::Value) -> bool) -> Option<Vec<String>> {
    let found: Vec<String> = t
        .containers()
        .iter()
        .filter(|c| marked(c))
        .map(|c| name(c).to_string())
        .collect();
    (!found.is_empty()).then_some(found)
}

fn from_flag(names: &[String], flag: &[String]) -> Option<Vec<String>> {
    let found: Vec<String> = names.iter().filter(|n| flag.contains(n)).cloned().collect();
    (!found.is_empty()).then_some(found)
}
