//! Pure: whether each of the vendors' injected sidecars of a Job's pod (or those its
//! template asks a vendor's webhook for, `found.rs`) will be ended, and how: already a native sidecar;
//! ended by sexton (the record `sexton.dev/injected` names it, and the mechanism); in a
//! namespace or pod that sexton's webhook serves, so that new pods have it ended; or
//! nothing ends it, with the fix.

use serde_json::Value;
use sexton_inject::{ANNOTATION_INJECT, ANNOTATION_INJECTED, Chain, may_move};

use super::found::{Found, Place};
use super::report::{Finding, Status};
use super::webhooks::{PodServed, Serving};

/// Where a pod is: its namespace, how sexton's webhook serves it, and the webhook chain
/// (`None`: unknown, the vendors' default registrations decide, as in the webhook).
#[derive(Debug, Clone, Copy)]
pub struct At<'a> {
    pub ns: &'a str,
    pub serving: &'a Serving,
    pub chain: Option<&'a Chain>,
}

/// How (and whether) a sidecar will be ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ending {
    /// A native sidecar: by sexton's mechanism (`Some`), or the vendor's own native mode.
    Native(Option<String>),
    /// Left in `spec.containers` and ended by sexton's mechanism (wrap, quit, controller).
    Sexton(String),
    /// The template switches on the vendor's own native sidecars (the marker).
    VendorNative(String),
    /// sexton's webhook serves the template's pods (configuration `.0`).
    WillEnd(String),
    /// sexton injected the pod (mechanism `.0`) but not this sidecar: `.1` says why.
    Missed(String, String),
    OptedOut,
    /// sexton's webhook serves the namespace now, but this pod was admitted without it.
    NotYet(String),
    /// Nothing ends it: how sexton's webhook treats the namespace says why.
    Nothing(Serving),
}

impl Ending {
    pub fn status(&self) -> Status {
        match self {
            Ending::Native(_)
            | Ending::Sexton(_)
            | Ending::VendorNative(_)
            | Ending::WillEnd(_) => Status::Ok,
            _ => Status::Warning,
        }
    }
}

/// sexton's record on the pod: its mechanism, sidecars and mains, if it has a readable one.
fn record(pod: &Value) -> Option<(String, Vec<String>, Vec<String>)> {
    let text = pod["metadata"]["annotations"][ANNOTATION_INJECTED].as_str()?;
    let r: Value = serde_json::from_str(text).ok()?;
    let names = |key: &str| -> Vec<String> {
        r[key]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|n| n.as_str().map(str::to_string))
            .collect()
    };
    Some((
        r["mechanism"].as_str()?.to_string(),
        names("sidecars"),
        names("mains"),
    ))
}

/// How `f`, of `pod`, will be ended.
pub fn ending(pod: &Value, f: &Found, serving: &Serving) -> Ending {
    let record = record(pod);
    if f.place == Place::Native {
        let by_sexton = record
            .filter(|(_, sidecars, _)| sidecars.contains(&f.container))
            .map(|(m, _, _)| m);
        return Ending::Native(by_sexton);
    }
    if f.place == Place::Coming
        && let Some(switch) = f.vendor.native_switch.as_ref().filter(|m| m.on_pod(pod))
    {
        return Ending::VendorNative(switch.to_string());
    }
    if let Some((mechanism, sidecars, mains)) = record {
        if sidecars.contains(&f.container) {
            return Ending::Sexton(mechanism);
        }
        if f.place == Place::Containers {
            let why = if mains.contains(&f.container) {
                "its record counts it as a main container (sexton's webhook did not recognise it: --recognise=false there, or the marker came later)"
            } else {
                "it was added after sexton's webhook injected the pod, and was not ended when sexton's webhook was called again (its reinvocationPolicy is not IfNeeded, or the change was refused: see the pod's events)"
            };
            return Ending::Missed(mechanism, why.into());
        }
    }
    match serving.pod(pod) {
        PodServed::OptedOut => Ending::OptedOut,
        PodServed::Yes => {
            let config = match serving {
                Serving::Namespace(c) | Serving::Annotation(c) => c.clone(),
                _ => String::new(),
            };
            if f.place == Place::Coming {
                Ending::WillEnd(config)
            } else {
                Ending::NotYet(config)
            }
        }
        PodServed::NotAsked => Ending::Nothing(serving.clone()),
    }
}

/// What sexton's webhook will do with the sidecar: the strategy the pod's annotation asks
/// for, or `auto`'s choice (native, unless the sidecar must stay in `spec.containers`, where
/// it is wrapped: the vendor's webhook is called again and looks for it there by name, or
/// the catalogue says why).
fn how(f: &Found, pod: &Value, chain: Option<&Chain>) -> String {
    let asked = pod["metadata"]["annotations"][ANNOTATION_INJECT]
        .as_str()
        .map(str::trim)
        .filter(|a| !a.eq_ignore_ascii_case("auto"));
    if let Some(strategy) = asked {
        return format!("{strategy}, as the annotation {ANNOTATION_INJECT} asks");
    }
    if may_move(f.vendor, chain) {
        return "made a native sidecar, or wrapped where native sidecars cannot run".into();
    }
    match &f.vendor.keep_in_containers {
        Some(why) => format!("wrapped, not made native: {why}"),
        None => format!(
            "wrapped, not made native: {}'s webhook is called again after sexton's and looks for {:?} by name in spec.containers",
            f.vendor.name, f.container
        ),
    }
}

/// The sentence for `f` and its ending, and the fix.
pub fn describe(
    f: &Found,
    e: &Ending,
    at: At,
    pod: &Value,
    pod_name: Option<&str>,
) -> (String, Option<String>) {
    let (ns, chain) = (at.ns, at.chain);
    let label = format!("kubectl label namespace {ns} sexton.dev/inject=enabled");
    let native = f.vendor.native_switch.as_ref().map(|m| {
        let value = m.value.as_deref().unwrap_or("true");
        format!(
            "or switch on {}'s own native sidecars: annotate the pod template {}={value}",
            f.vendor.name, m.key.0
        )
    });
    let or_native = |fix: String| match &native {
        Some(n) => format!("{fix}; {n}"),
        None => fix,
    };
    let not_ended = "not ended: nothing ends it";
    let (what, fix) = match e {
        Ending::Native(None) => (
            "a native sidecar already (the vendor's own native mode): the kubelet stops it after the main containers".into(),
            None,
        ),
        Ending::Native(Some(m)) => (
            format!("made a native sidecar by sexton ({ANNOTATION_INJECTED}: {m})"),
            None,
        ),
        Ending::Sexton(m) => (
            format!("ended by sexton ({ANNOTATION_INJECTED}: {m}): {}", mechanism(m)),
            None,
        ),
        Ending::VendorNative(switch) => (
            format!("injected as a native sidecar by {} itself ({switch})", f.vendor.name),
            None,
        ),
        Ending::WillEnd(config) => (
            format!(
                "ended by sexton's webhook ({config}) in the pods: {}",
                how(f, pod, chain)
            ),
            None,
        ),
        Ending::Missed(m, why) => (
            format!("not ended: sexton injected this pod ({m}) without it: {why}"),
            pod_name.map(|p| {
                format!(
                    "kubectl get events -n {ns} --field-selector involvedObject.name={p},type=Warning"
                )
            }),
        ),
        Ending::OptedOut => (
            format!("not ended: the pod opts out of sexton ({ANNOTATION_INJECT}: disabled)"),
            Some(format!(
                "remove the annotation {ANNOTATION_INJECT}: disabled from the pod template"
            )),
        ),
        Ending::NotYet(config) => (
            format!(
                "not ended in this pod, admitted without sexton (created before sexton's webhook served namespace {ns}, or while it did not answer); sexton's webhook ({config}) ends it in new pods: {}",
                how(f, pod, chain)
            ),
            pod_name.map(|p| {
                format!(
                    "kubectl delete pod -n {ns} {p} (the Job creates another, which sexton's webhook injects; this pod's work is done again)"
                )
            }),
        ),
        Ending::Nothing(Serving::Annotation(_)) => (
            format!(
                "{not_ended} (namespace {ns} is not labelled sexton.dev/inject=enabled, and the pod does not ask with the annotation {ANNOTATION_INJECT})"
            ),
            Some(or_native(label)),
        ),
        Ending::Nothing(Serving::NotInstalled) => (
            format!("{not_ended} (sexton's webhook is not installed)"),
            Some(or_native(format!(
                "install sexton's webhook (kubectl apply -k deploy/), then: {label}"
            ))),
        ),
        Ending::Nothing(Serving::Excluded) => (
            format!("{not_ended} (sexton's webhook does not serve namespace {ns}: its namespaceSelector excludes it)"),
            Some(or_native(format!("run the Job in a namespace sexton's webhook serves ({label})"))),
        ),
        Ending::Nothing(Serving::Unknown(why)) => (
            format!("not ended unless sexton's webhook serves namespace {ns}, which is unknown: {why}"),
            None,
        ),
        Ending::Nothing(Serving::Namespace(_)) => (not_ended.into(), None),
    };
    let sentence = format!(
        "{:?} ({}, {}): {what}",
        f.container, f.vendor.name, f.evidence
    );
    (sentence, fix)
}

/// What a mechanism does to a sidecar left in `spec.containers`.
fn mechanism(m: &str) -> &'static str {
    match m {
        "wrap" | "native-wrap" => {
            "the in-pod supervisor stops it once the main containers are done"
        }
        "quit" => "the main containers' supervisor calls its quit endpoint once they are done",
        "controller" => {
            "sexton's SidecarTerminator (kubectl sexton controller) stops it once the main containers are done"
        }
        _ => "as its record says",
    }
}

/// One finding for a pod's (or a template's) sidecars: `lead` says which pod; the status is
/// the worst ending's, the fix the first one given.
pub fn finding(
    object: String,
    lead: &str,
    found: &[Found],
    at: At,
    pod: &Value,
    pod_name: Option<&str>,
) -> Option<Finding> {
    if found.is_empty() {
        return None;
    }
    let mut status = Status::Ok;
    let mut sentences = vec![];
    let mut fix = None;
    for f in found {
        let e = ending(pod, f, at.serving);
        status = status.max(e.status());
        let (sentence, f_fix) = describe(f, &e, at, pod, pod_name);
        sentences.push(sentence);
        fix = fix.or(f_fix);
    }
    let mut finding = Finding::new(status, object, format!("{lead}: {}", sentences.join("; ")));
    finding.fix = fix;
    Some(finding)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::doctor::found::tests::pod;
    use crate::doctor::found::{asked, in_pod};
    use serde_json::json;
    use sexton_inject::Catalogue;

    fn istio(extra: Value) -> Value {
        let mut a = json!({"sidecar.istio.io/status": "{}"});
        a.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        pod(a, json!({}), &["main", "istio-proxy"], &[])
    }

    fn record(mechanism: &str, sidecars: &[&str], mains: &[&str]) -> String {
        json!({"version": 1, "mechanism": mechanism, "sidecars": sidecars, "mains": mains})
            .to_string()
    }

    fn ns(name: &str) -> Serving {
        Serving::Namespace(name.into())
    }

    /// The ending of the first sidecar found in `p`.
    fn end(p: &Value, serving: &Serving) -> Ending {
        let c = Catalogue::default();
        let found = in_pod(p, &c);
        ending(p, &found[0], serving)
    }

    #[test]
    fn how_each_sidecar_ends() {
        let vault_native = pod(
            json!({"vault.hashicorp.com/agent-inject-status": "injected"}),
            json!({}),
            &["main"],
            &["vault-agent"],
        );
        assert_eq!(
            end(&vault_native, &Serving::NotInstalled),
            Ending::Native(None)
        );
        let mut by_sexton = vault_native.clone();
        by_sexton["metadata"]["annotations"][ANNOTATION_INJECTED] =
            json!(record("native", &["vault-agent"], &["main"]));
        assert_eq!(
            end(&by_sexton, &Serving::NotInstalled),
            Ending::Native(Some("native".into()))
        );
        let wrapped =
            istio(json!({ANNOTATION_INJECTED: record("wrap", &["istio-proxy"], &["main"])}));
        assert_eq!(
            end(&wrapped, &Serving::NotInstalled),
            Ending::Sexton("wrap".into())
        );
        // injected by sexton, without this sidecar: added later, or taken for a main
        let later = istio(json!({ANNOTATION_INJECTED: record("native", &["logs"], &["main"])}));
        assert!(
            matches!(end(&later, &ns("s")), Ending::Missed(m, why) if m == "native" && why.contains("added after"))
        );
        let main =
            istio(json!({ANNOTATION_INJECTED: record("wrap", &[], &["main", "istio-proxy"])}));
        assert!(
            matches!(end(&main, &ns("s")), Ending::Missed(_, why) if why.contains("main container"))
        );
        // not injected: the webhook's scope decides
        let plain = istio(json!({}));
        assert_eq!(end(&plain, &ns("s")), Ending::NotYet("s".into()));
        let out = istio(json!({"sexton.dev/inject": "disabled"}));
        assert_eq!(end(&out, &ns("s")), Ending::OptedOut);
        let annotated = Serving::Annotation("s".into());
        assert_eq!(end(&plain, &annotated), Ending::Nothing(annotated.clone()));
        let asks = istio(json!({"sexton.dev/inject": "wrap"}));
        assert_eq!(end(&asks, &annotated), Ending::NotYet("s".into()));
        for s in [
            Serving::NotInstalled,
            Serving::Excluded,
            Serving::Unknown("x".into()),
        ] {
            assert_eq!(end(&plain, &s), Ending::Nothing(s.clone()));
            assert_eq!(end(&plain, &s).status(), Status::Warning);
        }
        assert_eq!(Ending::NotYet("s".into()).status(), Status::Warning);
        assert_eq!(Ending::Sexton("wrap".into()).status(), Status::Ok);
    }

    #[test]
    fn a_template_that_asks_a_vendor_for_its_sidecar() {
        let c = Catalogue::default();
        let t = pod(
            json!({"vault.hashicorp.com/agent-inject": "true"}),
            json!({"sidecar.istio.io/inject": "true"}),
            &["main"],
            &[],
        );
        let found = asked(&t, &c);
        let names: Vec<(&str, &str)> = found
            .iter()
            .map(|f| (f.container.as_str(), f.evidence.as_str()))
            .collect();
        assert_eq!(
            names,
            [
                (
                    "istio-proxy",
                    "asks for it: label sidecar.istio.io/inject=true"
                ),
                (
                    "vault-agent",
                    "asks for it: annotation vault.hashicorp.com/agent-inject=true"
                )
            ]
        );
        assert_eq!(ending(&t, &found[0], &ns("s")), Ending::WillEnd("s".into()));
        assert_eq!(
            ending(&t, &found[0], &Serving::NotInstalled),
            Ending::Nothing(Serving::NotInstalled)
        );
        // Istio's own native mode, switched on in the template
        let mut native = t.clone();
        native["metadata"]["annotations"]["sidecar.istio.io/nativeSidecar"] = json!("true");
        assert_eq!(
            ending(&native, &asked(&native, &c)[0], &Serving::NotInstalled),
            Ending::VendorNative("annotation sidecar.istio.io/nativeSidecar=true".into())
        );
    }

    #[test]
    fn findings_say_how_and_give_the_fix() {
        let c = Catalogue::default();
        let p = istio(json!({}));
        let found = in_pod(&p, &c);
        let at = |serving: &'static Serving| At {
            ns: "jobs",
            serving,
            chain: None,
        };
        static NOT: Serving = Serving::NotInstalled;
        let f = finding(
            "job jobs/j".into(),
            "pod p",
            &found,
            at(&NOT),
            &p,
            Some("p"),
        )
        .unwrap();
        assert_eq!(f.status, Status::Warning);
        assert_eq!(
            f.message,
            "pod p: \"istio-proxy\" (Istio, annotation sidecar.istio.io/status): not ended: nothing ends it (sexton's webhook is not installed)"
        );
        assert_eq!(
            f.fix.as_deref(),
            Some(
                "install sexton's webhook (kubectl apply -k deploy/), then: kubectl label namespace jobs sexton.dev/inject=enabled; or switch on Istio's own native sidecars: annotate the pod template sidecar.istio.io/nativeSidecar=true"
            )
        );
        // served, not injected yet: the way new pods will be
        static SERVED: Serving = Serving::Namespace(String::new());
        let f = finding(
            "job jobs/j".into(),
            "pod p",
            &found,
            at(&SERVED),
            &p,
            Some("p"),
        )
        .unwrap();
        assert!(
            f.message
                .contains("ends it in new pods: made a native sidecar, or wrapped where"),
            "{}",
            f.message
        );
        assert!(f.fix.unwrap().starts_with("kubectl delete pod -n jobs p "));
        // Datadog's webhook is called again and looks for its sidecar by name: wrapped
        let dd = pod(
            json!({}),
            json!({"agent.datadoghq.com/sidecar": "fargate"}),
            &["main", "datadog-agent-injected"],
            &[],
        );
        let found = in_pod(&dd, &c);
        let f = finding(
            "job jobs/d".into(),
            "pod d",
            &found,
            at(&SERVED),
            &dd,
            Some("d"),
        )
        .unwrap();
        assert!(
            f.message.contains(
                "wrapped, not made native: Datadog Agent's webhook is called again after sexton's and looks for \"datadog-agent-injected\" by name in spec.containers"
            ),
            "{}",
            f.message
        );
        // the Cloud SQL operator's proxy stays where its controller looks for it, whatever the order
        let csql = pod(
            json!({"cloudsql.cloud.google.com/orders": "1,img"}),
            json!({}),
            &["main", "csql-orders"],
            &[],
        );
        let found = in_pod(&csql, &c);
        let f = finding(
            "job jobs/c".into(),
            "pod c",
            &found,
            at(&SERVED),
            &csql,
            Some("c"),
        )
        .unwrap();
        assert!(
            f.message.contains("ends it in new pods: wrapped, not made native: the Cloud SQL operator's Pod controller looks for its proxy in spec.containers"),
            "{}",
            f.message
        );
        // every sidecar ended: ok, no fix
        let done = istio(json!({ANNOTATION_INJECTED: record("wrap", &["istio-proxy"], &["main"])}));
        let found = in_pod(&done, &c);
        let f = finding(
            "job jobs/j".into(),
            "pod p",
            &found,
            at(&NOT),
            &done,
            Some("p"),
        )
        .unwrap();
        assert_eq!((f.status, f.fix), (Status::Ok, None));
        assert!(f.message.ends_with("ended by sexton (sexton.dev/injected: wrap): the in-pod supervisor stops it once the main containers are done"), "{}", f.message);
        assert!(finding("x".into(), "y", &[], at(&NOT), &done, None).is_none());
    }
}
