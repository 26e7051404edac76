//! When the API server calls the webhook again (reinvocation) after a later webhook changed
//! the Pod: the sidecars that webhook added (declared in `sexton.dev/sidecars` before they
//! existed, or recognised from the catalogue) are ended by the mechanism sexton's first pass
//! chose, added to what it did rather than undoing and redoing it (which would drop what the
//! later webhook added to the fields sexton had changed). The record grows with them, so
//! that `uninject`, the controller and `doctor` see them.
//!
//! Per mechanism: `native` moves them as the first pass would; `wrap` puts them behind the
//! supervisor, stopped after every main (in reverse order among themselves; the first pass's
//! sidecars are not ordered against them); `quit` adds their quit endpoints to the mains'
//! hooks; `controller` marks them. `native-wrap` makes them native.
//!
//! Also here: a second copy of a sidecar sexton moved to `initContainers`, put back into
//! `spec.containers` by a webhook called again after sexton's first pass that looks for its
//! sidecar there by name, is removed (the API server would refuse the Pod for the duplicate
//! name).

use std::collections::BTreeMap;

use crate::contract::{StartOrder, plan};
use crate::entrypoint::Resolve;
use crate::native::native;
use crate::options::{Mechanism, Options};
use crate::quit::endpoints;
use crate::record::Record;
use crate::report::Refusal;
use crate::sidecars::{Missing, Roles, roles};
use crate::template::{Template, name};
use crate::terminator::mark;
use crate::wrap::also_behind;

/// The sidecars of `t` that `record` does not know yet (in the containers' order), with
/// their vendors.
pub fn added(t: &Template, record: &Record, opts: &Options) -> Option<Roles> {
    let now = roles(t, &opts.sidecars, &opts.catalogue, Missing::Later).ok()??;
    let known = |n: &String| record.sidecars.contains(n) || record.mains.contains(n);
    let new: Vec<String> = now.sidecars.iter().filter(|s| !known(s)).cloned().collect();
    (!new.is_empty()).then(|| Roles {
        recognised: now
            .recognised
            .into_iter()
            .filter(|r| new.contains(&r.container))
            .collect(),
        sidecars: new,
        mains: record.mains.clone(),
        source: now.source,
    })
}

/// Ends the `added` sidecars by `record`'s mechanism and adds them to the record; nothing
/// is changed when it cannot.
pub fn extend(
    t: &mut Template,
    record: &mut Record,
    added: &Roles,
    opts: &Options,
    resolver: &dyn Resolve,
) -> Result<(), Refusal> {
    let mut copy = t.0.clone();
    let attempt = &mut Template(&mut copy);
    let mut more = match record.mechanism {
        Mechanism::Native | Mechanism::NativeWrap => {
            native(attempt, added, opts).map_err(|r| Refusal::new(record.mechanism, r.message))?
        }
        Mechanism::Wrap => wrap_more(attempt, added, resolver)?,
        Mechanism::Quit => quit_more(attempt, record, added, opts)?,
        Mechanism::Controller => mark(attempt, added)?,
    };
    record.sidecars.extend(added.sidecars.iter().cloned());
    record.moved.append(&mut more.moved);
    record.caveats.append(&mut more.caveats);
    for c in more.changed {
        // the first change of a field is the one to undo
        match record.changed.iter_mut().find(|x| x.name == c.name) {
            Some(x) => {
                for (field, old) in c.fields {
                    x.fields.entry(field).or_insert(old);
                }
            }
            None => record.changed.push(c),
        }
    }
    // (sexton's lists exist already: what the extension notes as created is not)
    *t.0 = copy;
    Ok(())
}

/// The new sidecars behind the supervisor, each stopped after every main.
fn wrap_more(t: &mut Template, added: &Roles, resolver: &dyn Resolve) -> Result<Record, Refusal> {
    let mut record = Record::new(Mechanism::Wrap, &added.sidecars, &added.mains);
    let mut plan = plan(t, added, StartOrder::Kubelet);
    record.caveats = std::mem::take(&mut plan.caveats);
    let settings: BTreeMap<_, _> = plan
        .settings
        .into_iter()
        .filter(|(n, _)| added.sidecars.contains(n))
        .collect();
    also_behind(t, &added.sidecars, settings, resolver, &mut record)?;
    Ok(record)
}

/// The new sidecars' quit endpoints added to every main's hooks.
fn quit_more(
    t: &mut Template,
    record: &Record,
    added: &Roles,
    opts: &Options,
) -> Result<Record, Refusal> {
    let endpoints = endpoints(t, added, opts)?;
    for m in &record.mains {
        let c = t.container_mut(m).expect("a main is a container");
        let hooks = c["env"].as_array_mut().and_then(|env| {
            env.iter_mut()
                .find(|e| e["name"] == "KUBEXIT_SHUTDOWN_HOOKS")
        });
        let Some(hooks) = hooks else {
            // (the user set the main's hooks' group differently: theirs stays)
            continue;
        };
        let mut urls: Vec<String> = hooks["value"]
            .as_str()
            .unwrap_or_default()
            .split(',')
            .filter(|u| !u.is_empty())
            .map(str::to_string)
            .collect();
        for u in &endpoints.urls {
            if !urls.contains(u) {
                urls.push(u.clone());
            }
        }
        hooks["value"] = serde_json::Value::from(urls.join(","));
    }
    let mut more = Record::new(Mechanism::Quit, &added.sidecars, &added.mains);
    endpoints.turn_on(t, &mut more);
    Ok(more)
}

/// Removes from `spec.containers` a second copy of a sidecar that `record` says sexton
/// moved to `initContainers`; the warnings say which.
pub fn drop_copies(t: &mut Template, record: &Record) -> Vec<String> {
    let in_init: Vec<String> = t
        .init_containers()
        .iter()
        .map(|c| name(c).to_string())
        .collect();
    let copies: Vec<String> = t
        .containers()
        .iter()
        .map(|c| name(c).to_string())
        .filter(|n| record.moved.iter().any(|m| &m.name == n) && in_init.contains(n))
        .collect();
    if copies.is_empty() {
        return vec![];
    }
    t.spec_list_mut("containers")
        .retain(|c| !copies.iter().any(|n| n == name(c)));
    copies
        .into_iter()
        .map(|n| format!(
            "sexton: removed a second copy of sidecar {n:?} from spec.containers: a webhook called again after sexton's added it back by name, and sexton had made it a native sidecar (spec.initContainers); two containers of one name would have the Pod refused"
        ))
        .collect()
}
