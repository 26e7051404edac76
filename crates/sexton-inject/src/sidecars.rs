//! Which containers of `spec.containers` are sidecars: those declared, and those recognised.
//! The first declaring source that names any decides the declared ones: the template
//! annotation `sexton.dev/sidecars`, OpenKruise's markers, kubexit's `KUBEXIT_DEATH_DEPS`,
//! then `--sidecar`. Recognised are the containers the catalogue proves another vendor's
//! webhook injected into a run-to-completion pod (`catalogue.rs`), declared or not. The
//! other containers are the mains.

use std::fmt;

use crate::catalogue::{Catalogue, Recognised};
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
    /// Nothing declared: every sidecar was recognised from the catalogue.
    Recognised,
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Source::Annotation => "annotation sexton.dev/sidecars",
            Source::KruiseMarkers => "OpenKruise markers",
            Source::Kubexit => "KUBEXIT_DEATH_DEPS",
            Source::Flag => "--sidecar",
            Source::Recognised => "the catalogue of injected sidecars",
        })
    }
}

/// The containers of a template, split.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Roles {
    pub sidecars: Vec<String>,
    pub mains: Vec<String>,
    pub source: Source,
    /// The sidecars that are vendors' injected ones (declared too or not), with their vendor.
    pub recognised: Vec<Recognised>,
}

impl Roles {
    /// The vendor of sidecar `name`, if it was recognised.
    pub fn vendor_of(&self, name: &str) -> Option<&str> {
        self.recognised
            .iter()
            .find(|r| r.container == name)
            .map(|r| r.vendor.as_str())
    }
}

/// What to do with a name in `sexton.dev/sidecars` that the pod does not have.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Missing {
    /// Refuse: a manifest names what it does not have (a typo).
    Refuse,
    /// Skip it: at admission, a webhook that runs later may still add it (the API server
    /// calls sexton's again then).
    Later,
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

/// The sidecars and mains of `t`, declared (`flag`: `--sidecar`) or recognised from
/// `catalogue`; `None` if no container is a sidecar.
pub fn roles(
    t: &Template,
    flag: &[String],
    catalogue: &Catalogue,
    missing: Missing,
) -> Result<Option<Roles>, UnknownSidecar> {
    let names = t.container_names();
    let declared = declared(t, &names, missing)?
        .or_else(|| by_env(t, |c| kruise_marked(env_pairs(c))).map(|s| (s, Source::KruiseMarkers)))
        .or_else(|| by_env(t, is_kubexit_sidecar).map(|s| (s, Source::Kubexit)))
        .or_else(|| from_flag(&names, flag).map(|s| (s, Source::Flag)));
    let recognised = catalogue.recognise(t.0);
    let (declared, source) = match declared {
        Some((list, source)) => (list, source),
        None if recognised.is_empty() => return Ok(None),
        None => (vec![], Source::Recognised),
    };
    let is_sidecar =
        |n: &String| declared.contains(n) || recognised.iter().any(|r| &r.container == n);
    let (sidecars, mains) = names.into_iter().partition(is_sidecar);
    Ok(Some(Roles {
        sidecars,
        mains,
        source,
        recognised,
    }))
}

fn declared(
    t: &Template,
    names: &[String],
    missing: Missing,
) -> Result<Option<(Vec<String>, Source)>, UnknownSidecar> {
    let Some(list) = t.annotation(ANNOTATION_SIDECARS) else {
        return Ok(None);
    };
    let mut sidecars: Vec<String> = vec![];
    for s in list.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        if !names.iter().any(|n| n == s) {
            if missing == Missing::Later {
                continue;
            }
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
