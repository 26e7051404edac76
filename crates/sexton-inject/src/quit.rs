//! `quit`: for vendors' injected sidecars that can be neither native (Kubernetes < 1.29,
//! virtual-kubelet nodes) nor wrapped (their image's entrypoint cannot be read): the mains
//! run behind the supervisor, which POSTs each sidecar's quit endpoint (from the catalogue)
//! once every main is done (`KUBEXIT_SHUTDOWN_HOOKS`, with `KUBEXIT_SHUTDOWN_HOOKS_AFTER`
//! naming the other mains, and under OnFailure `KUBEXIT_SHUTDOWN_HOOKS_ON=success`, since
//! a failed main is restarted). The sidecars themselves stay as they are, but for the
//! variable that turns a vendor's endpoint on where it is off by default (Linkerd's).
//!
//! Weaker than the other mechanisms, and said so in the README: the sidecars stop after the
//! mains when the mains finish, but a deleted pod's sidecars get the kubelet's SIGTERM with
//! the mains, and a crashed sidecar is restarted only by the kubelet's own rules.

use std::collections::BTreeMap;

use serde_json::json;
use sexton_core::endpoint::HttpUrl;

use crate::catalogue::{Env, Quit, Vendor};
use crate::contract::Group;
use crate::entrypoint::Resolve;
use crate::markers::env_value;
use crate::options::{Mechanism, Options};
use crate::record::Record;
use crate::report::Refusal;
use crate::sidecars::Roles;
use crate::template::{Template, list_at};
use crate::wrap::behind_supervisor;

fn refuse(message: String) -> Refusal {
    Refusal::new(Mechanism::Quit, message)
}

pub fn quit(
    t: &mut Template,
    roles: &Roles,
    opts: &Options,
    resolver: &dyn Resolve,
) -> Result<Record, Refusal> {
    let endpoints = endpoints(t, roles, opts)?;
    let mut record = Record::new(Mechanism::Quit, &roles.sidecars, &roles.mains);
    let settings = hooks(t, roles, &endpoints.urls);
    behind_supervisor(t, &roles.mains, settings, opts, resolver, &mut record)
        .map_err(|r| refuse(r.message))?;
    endpoints.turn_on(t, &mut record);
    Ok(record)
}

/// What ends the sidecars: the URLs to POST, and the variables that turn them on.
pub struct Endpoints {
    pub urls: Vec<String>,
    enable: Vec<(String, Env)>,
}

/// The quit endpoints of every sidecar of `roles`; refused if one has none sexton can call.
pub fn endpoints(t: &Template, roles: &Roles, opts: &Options) -> Result<Endpoints, Refusal> {
    let mut urls: Vec<String> = vec![];
    let mut enable = vec![];
    for s in &roles.sidecars {
        let (vendor, q) = endpoint_of(t, roles, opts, s)?;
        for u in urls_of(t, roles, q, vendor)? {
            if !urls.contains(&u) {
                urls.push(u);
            }
        }
        if let Some(env) = &q.enable_env {
            enable.push((s.clone(), env.clone()));
        }
    }
    Ok(Endpoints { urls, enable })
}

impl Endpoints {
    /// Sets the variables that turn the endpoints on, on their sidecars.
    pub fn turn_on(&self, t: &mut Template, record: &mut Record) {
        for (s, env) in &self.enable {
            let c = t.container_mut(s).expect("a sidecar is a container");
            if env_value(c, &env.name) == Some(env.value.as_str()) {
                continue;
            }
            record.before_change(c, "env");
            let list = list_at(c, "env");
            list.retain(|e| e["name"] != env.name.as_str());
            list.push(json!({"name": env.name, "value": env.value}));
        }
    }
}

/// The quit endpoint of sidecar `s`, if it has one that sexton can call.
fn endpoint_of<'c>(
    t: &Template,
    roles: &Roles,
    opts: &'c Options,
    s: &str,
) -> Result<(&'c Vendor, &'c Quit), Refusal> {
    let Some(vendor) = roles.vendor_of(s).and_then(|v| opts.catalogue.vendor(v)) else {
        return Err(refuse(format!(
            "sidecar {s:?} is not a vendor's injected sidecar of the catalogue, so sexton knows no quit endpoint for it"
        )));
    };
    let Some(q) = &vendor.quit else {
        return Err(refuse(format!(
            "{} ({s:?}) has no quit endpoint",
            vendor.name
        )));
    };
    if let Some(m) = q.unavailable_with.iter().find(|m| m.on_pod(t.0)) {
        return Err(refuse(format!(
            "{}'s quit endpoint cannot be called in this pod ({m})",
            vendor.name
        )));
    }
    if q.enable_env.is_none()
        && let Some(a) = q.enable_annotation.as_ref().filter(|a| !a.on_pod(t.0))
    {
        return Err(refuse(format!(
            "{}'s quit endpoint is off in this pod: its webhook turns it on for pods created with the {a}",
            vendor.name
        )));
    }
    Ok((vendor, q))
}

/// The URLs that end sidecar `q`'s process: those its vendor wrote into the mains, else its
/// endpoint on loopback (the port from the pod's annotation where the vendor reads one).
fn urls_of(t: &Template, roles: &Roles, q: &Quit, vendor: &Vendor) -> Result<Vec<String>, Refusal> {
    let written = q.urls_env.as_ref().and_then(|var| {
        roles
            .mains
            .iter()
            .filter_map(|m| t.container(m))
            .find_map(|c| env_value(c, var))
    });
    let urls: Vec<String> = match written {
        Some(list) => list
            .split([' ', ','])
            .filter(|u| !u.is_empty())
            .map(str::to_string)
            .collect(),
        None => {
            let port = q
                .port_annotation
                .as_ref()
                .and_then(|a| t.annotation(a))
                .and_then(|p| p.trim().parse::<u16>().ok())
                .unwrap_or(q.endpoint.port);
            vec![format!("http://127.0.0.1:{port}{}", q.endpoint.path)]
        }
    };
    for u in &urls {
        // the supervisor's own rule: a shutdown endpoint is on the pod's loopback
        match HttpUrl::parse(u) {
            Ok(url) if url.is_loopback() => {}
            _ => {
                return Err(refuse(format!(
                    "{}'s quit URL {u:?} is not an http:// URL on the pod's loopback",
                    vendor.name
                )));
            }
        }
    }
    Ok(urls)
}

/// Each main's settings: the hooks, run by the last main to finish (the others named), and
/// under OnFailure only after successes (a failed main is restarted).
fn hooks(t: &Template, roles: &Roles, urls: &[String]) -> BTreeMap<String, Vec<Group>> {
    let on_failure = t.spec()["restartPolicy"] == "OnFailure";
    roles
        .mains
        .iter()
        .map(|m| {
            let mut group: Group = vec![("KUBEXIT_SHUTDOWN_HOOKS", urls.join(","))];
            let others: Vec<&str> = roles
                .mains
                .iter()
                .filter(|o| *o != m)
                .map(String::as_str)
                .collect();
            if !others.is_empty() {
                group.push(("KUBEXIT_SHUTDOWN_HOOKS_AFTER", others.join(",")));
            }
            if on_failure {
                group.push(("KUBEXIT_SHUTDOWN_HOOKS_ON", "success".into()));
            }
            (m.clone(), vec![group])
        })
        .collect()
}
