//! The entry points: find the pod template of each object (Pod, the workloads, CronJob,
//! and the items of a List), and inject or uninject it. A template is replaced only when it
//! was injected; any other outcome leaves the object exactly as it came.

use std::cell::RefCell;
use std::collections::BTreeSet;

use serde_json::Value;

use crate::ahead::{Ahead, ahead};
use crate::choose::{native_unavailable, strategy};
use crate::entrypoint::{ImageCommand, Resolve, Unresolved};
use crate::native::{native, native_wrap};
use crate::options::{Mechanism, Options, Strategy};
use crate::quit::quit;
use crate::record::{self, Record};
use crate::report::{Outcome, Refusal, Report};
use crate::sidecars::{Missing, Roles, roles};
use crate::template::Template;
use crate::terminator::mark;
use crate::wrap::wrap;

/// Where the pod template of each kind is.
fn template_path(kind: &str) -> Option<&'static [&'static str]> {
    match kind {
        "Pod" => Some(&[]),
        "Job"
        | "Deployment"
        | "StatefulSet"
        | "DaemonSet"
        | "ReplicaSet"
        | "ReplicationController" => Some(&["spec", "template"]),
        "CronJob" => Some(&["spec", "jobTemplate", "spec", "template"]),
        _ => None,
    }
}

/// `job/backup`, as kubectl names objects.
fn resource_id(obj: &Value) -> String {
    let kind = obj["kind"]
        .as_str()
        .unwrap_or("object")
        .to_ascii_lowercase();
    let meta = &obj["metadata"];
    let name = meta["name"]
        .as_str()
        .or_else(|| meta["generateName"].as_str())
        .unwrap_or("(unnamed)");
    format!("{kind}/{name}")
}

/// Calls `each` on the pod template of `doc` (of each item, for a List).
fn for_each_template(
    doc: &mut Value,
    each: &mut dyn FnMut(&mut Template) -> Outcome,
) -> Vec<Report> {
    let kind = doc["kind"].as_str().unwrap_or_default().to_string();
    if kind.ends_with("List") && doc["items"].is_array() {
        let items = doc["items"].as_array_mut().expect("a list");
        return items
            .iter_mut()
            .flat_map(|item| for_each_template(item, each))
            .collect();
    }
    let resource = resource_id(doc);
    let Some(path) = template_path(&kind) else {
        return vec![Report {
            resource,
            outcome: Outcome::Skipped,
        }];
    };
    let at = path.iter().map(|k| format!("{k}.")).collect::<String>();
    let outcome = match path.iter().try_fold(&mut *doc, |v, key| v.get_mut(*key)) {
        Some(t) if t["spec"]["containers"].is_array() => match not_a_container(t) {
            Some(list) => Outcome::Refused(format!(
                "{at}spec.{list} has an entry that is not an object"
            )),
            None => each(&mut Template(t)),
        },
        _ => Outcome::Refused(format!("{at}spec.containers is missing or not a list")),
    };
    vec![Report { resource, outcome }]
}

/// The list of containers with an entry that is not an object (the API server refuses such a
/// Pod; an AdmissionReview forged by a client of the webhook may still carry it).
fn not_a_container(t: &Value) -> Option<&'static str> {
    ["containers", "initContainers"].into_iter().find(|k| {
        t["spec"][*k]
            .as_array()
            .is_some_and(|l| l.iter().any(|c| !c.is_object()))
    })
}

/// Injects every pod template of `doc`, one report per object.
pub fn inject(doc: &mut Value, opts: &Options, resolver: &dyn Resolve) -> Vec<Report> {
    for_each_template(doc, &mut |t| {
        let mut copy = t.0.clone();
        let outcome = inject_template(&mut Template(&mut copy), opts, resolver);
        if matches!(outcome, Outcome::Injected { .. }) {
            *t.0 = copy;
        }
        outcome
    })
}

/// [`inject`] of a copy of `doc`: the copy if a template of it was injected (else nothing:
/// `doc` stays as it came), and the first report's outcome. One copy, where `inject` on a
/// copy would make a second of each template to restore it from.
pub(crate) fn inject_copy(
    doc: &Value,
    opts: &Options,
    resolver: &dyn Resolve,
) -> (Option<Value>, Outcome) {
    let mut copy = doc.clone();
    let reports = if doc["kind"].as_str().is_some_and(|k| k.ends_with("List")) {
        // (each item is restored on its own when it is not injected)
        inject(&mut copy, opts, resolver)
    } else {
        for_each_template(&mut copy, &mut |t| inject_template(t, opts, resolver))
    };
    let injected = reports
        .iter()
        .any(|r| matches!(r.outcome, Outcome::Injected { .. }));
    let outcome = reports
        .into_iter()
        .next()
        .map(|r| r.outcome)
        .unwrap_or(Outcome::Skipped);
    (injected.then_some(copy), outcome)
}

/// Restores every injected pod template of `doc` to what it was.
pub fn uninject(doc: &mut Value) -> Vec<Report> {
    for_each_template(doc, &mut |t| match record::read(t) {
        None => Outcome::Unchanged("not injected".into()),
        Some(Err(e)) => Outcome::Refused(e.to_string()),
        Some(Ok(r)) => {
            record::undo(t, &r);
            Outcome::Restored
        }
    })
}

/// The images whose ENTRYPOINT and CMD injecting `doc` would look up.
pub fn entrypoints_needed(doc: &Value, opts: &Options) -> Vec<String> {
    struct Recorder(RefCell<BTreeSet<String>>);
    impl Resolve for Recorder {
        fn resolve(&self, image: &str) -> Result<ImageCommand, Unresolved> {
            self.0.borrow_mut().insert(image.to_string());
            Ok(ImageCommand {
                entrypoint: vec!["/looked-up".into()],
                cmd: vec![],
            })
        }
    }
    let recorder = Recorder(RefCell::default());
    inject(&mut doc.clone(), opts, &recorder);
    recorder.0.into_inner().into_iter().collect()
}

/// One template: a previous injection undone first (so injecting twice is injecting once),
/// then the strategy applied.
fn inject_template(t: &mut Template, opts: &Options, resolver: &dyn Resolve) -> Outcome {
    match record::read(t) {
        Some(Err(e)) => return Outcome::Refused(e.to_string()),
        Some(Ok(r)) => record::undo(t, &r),
        None => {}
    }
    let (strategy, from_annotation) = match strategy(t, opts) {
        Ok(s) => s,
        Err(e) => return Outcome::Refused(e.to_string()),
    };
    if strategy == Strategy::Disabled {
        let by = if from_annotation {
            "annotation sexton.dev/inject"
        } else {
            "--strategy"
        };
        return Outcome::Unchanged(format!("disabled by {by}"));
    }
    let missing = match opts.at_admission {
        true => Missing::Later,
        false => Missing::Refuse,
    };
    let roles = match roles(t, &opts.sidecars, &opts.catalogue, missing) {
        Ok(Some(r)) => r,
        Ok(None) => return ahead_only(t, strategy, opts),
        Err(e) => return Outcome::Refused(e.to_string()),
    };
    if roles.mains.is_empty() {
        return Outcome::Refused(format!(
            "every container is a sidecar ({}), so there is no main container to wait for",
            roles.source
        ));
    }
    match apply(t, &roles, strategy, opts, resolver) {
        Ok((record, note)) => {
            let native = matches!(record.mechanism, Mechanism::Native | Mechanism::NativeWrap);
            let later = ahead(t.0, &opts.catalogue, native);
            let outcome = Outcome::Injected {
                mechanism: record.mechanism,
                sidecars: roles.sidecars.clone(),
                recognised: roles.recognised.clone(),
                note: join_notes(note, ahead_note(&later, native)),
                caveats: record.caveats.clone(),
            };
            record.save_with(t, &later);
            outcome
        }
        Err(refusals) => Outcome::Refused(
            refusals
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join("; "),
        ),
    }
}

/// A template with no sidecar yet that asks a vendor's webhook for one: the vendor's switch
/// set ahead of it (`ahead.rs`), recorded; else nothing to do.
fn ahead_only(t: &mut Template, strategy: Strategy, opts: &Options) -> Outcome {
    let native = matches!(
        strategy,
        Strategy::Auto | Strategy::Native | Strategy::NativeWrap
    ) && native_unavailable(t.spec(), opts).is_none();
    let later = ahead(t.0, &opts.catalogue, native);
    if later.is_empty() {
        return Outcome::Unchanged("no sidecars".into());
    }
    let mechanism = if native {
        Mechanism::Native
    } else {
        Mechanism::Wrap
    };
    let record = Record::new(mechanism, &[], &t.container_names());
    let outcome = Outcome::Injected {
        mechanism,
        sidecars: vec![],
        recognised: vec![],
        note: ahead_note(&later, native),
        caveats: vec![],
    };
    record.save_with(t, &later);
    outcome
}

/// What the annotations set ahead of vendors' webhooks ask of them.
fn ahead_note(later: &[Ahead], native: bool) -> Option<String> {
    let what = match native {
        true => "to inject its sidecar natively",
        false => "to turn its sidecar's quit endpoint on",
    };
    let each: Vec<String> = later
        .iter()
        .map(|a| format!("{} {what} (annotation {}={})", a.vendor, a.key, a.value))
        .collect();
    (!each.is_empty()).then(|| format!("asks {}", each.join(", ")))
}

fn join_notes(a: Option<String>, b: Option<String>) -> Option<String> {
    match (a, b) {
        (Some(a), Some(b)) => Some(format!("{a}; {b}")),
        (a, b) => a.or(b),
    }
}

type Applied = Result<(Record, Option<String>), Vec<Refusal>>;

/// The strategy's mechanism, or for `auto` the first that works: native, wrap, quit,
/// controller.
fn apply(
    t: &mut Template,
    roles: &Roles,
    strategy: Strategy,
    opts: &Options,
    resolver: &dyn Resolve,
) -> Applied {
    let mut tried = vec![];
    let order: &[Mechanism] = match strategy {
        Strategy::Native => &[Mechanism::Native],
        Strategy::NativeWrap => &[Mechanism::NativeWrap],
        Strategy::Wrap => &[Mechanism::Wrap],
        Strategy::Quit => &[Mechanism::Quit],
        _ => &[
            Mechanism::Native,
            Mechanism::Wrap,
            Mechanism::Quit,
            Mechanism::Controller,
        ],
    };
    for &m in order {
        // (`auto` tries quit endpoints only for vendors' sidecars: a note that a sidecar of
        // the user's has none would say nothing useful)
        if m == Mechanism::Quit && strategy != Strategy::Quit && roles.recognised.is_empty() {
            continue;
        }
        let mut copy = t.0.clone();
        let mut attempt = Template(&mut copy);
        match one(&mut attempt, m, roles, opts, resolver) {
            Ok(mut record) => {
                *t.0 = copy;
                let notes: Vec<String> = tried
                    .iter()
                    .map(|r: &Refusal| format!("not {r}"))
                    .chain(record.binary_note.take())
                    .collect();
                let note = (!notes.is_empty()).then(|| notes.join("; "));
                return Ok((record, note));
            }
            Err(r) => tried.push(r),
        }
    }
    Err(tried)
}

fn one(
    t: &mut Template,
    m: Mechanism,
    roles: &Roles,
    opts: &Options,
    resolver: &dyn Resolve,
) -> Result<Record, Refusal> {
    match m {
        Mechanism::Native => match native_unavailable(t.spec(), opts) {
            Some(why) => Err(Refusal::new(Mechanism::Native, why)),
            None => native(t, roles, opts),
        },
        Mechanism::NativeWrap => match native_unavailable(t.spec(), opts) {
            Some(why) => Err(Refusal::new(Mechanism::NativeWrap, why)),
            None => native_wrap(t, roles, opts, resolver),
        },
        Mechanism::Wrap => wrap(t, roles, opts, resolver),
        Mechanism::Quit => quit(t, roles, opts, resolver),
        Mechanism::Controller => mark(t, roles),
    }
}
