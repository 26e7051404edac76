//! No input panics the webhook's decision: `admit` (and `inject`, `uninject`,
//! `entrypoints_needed`) over arbitrary JSON shaped like the Pod of an AdmissionReview, as a
//! client that reaches the webhook port can forge it (the API server validates real Pods;
//! a forged review is not validated). Scalars where containers belong, non-string names,
//! broken records, every strategy. The number of cases is fixed: it runs bounded in CI
//! (`scripts/test.sh --quick`). A patch, when there is one, must apply to the Pod.

use proptest::prelude::*;
use serde_json::{Map, Value, json};
use sexton_inject::{
    ImageCommand, Options, Resolve, Scope, Unresolved, admit, entrypoints_needed, inject, uninject,
};

/// Images whose name starts with `ok` resolve; the others do not.
struct SomeImages;

impl Resolve for SomeImages {
    fn resolve(&self, image: &str) -> Result<ImageCommand, Unresolved> {
        match image.starts_with("ok") {
            true => Ok(ImageCommand {
                entrypoint: vec!["/run".into()],
                cmd: vec!["x".into()],
            }),
            false => Err(Unresolved(format!("{image}: not found"))),
        }
    }
}

fn leaf() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        (-1e9f64..1e9).prop_map(Value::from),
        "[a-z/\"\\\\\n:,{}-]{0,8}".prop_map(Value::from),
    ]
}

/// Any JSON, a few levels deep.
fn any_json() -> impl Strategy<Value = Value> {
    leaf().prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::from),
            prop::collection::btree_map("[a-z]{1,6}", inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

fn name() -> impl Strategy<Value = Value> {
    prop_oneof![
        6 => prop::sample::select(vec!["main", "proxy", "log", "sexton-install", ""]).prop_map(Value::from),
        1 => any_json(),
    ]
}

fn string_list() -> impl Strategy<Value = Value> {
    prop_oneof![
        prop::collection::vec("[a-z/]{0,6}", 0..3).prop_map(|v| json!(v)),
        any_json(),
    ]
}

fn env() -> impl Strategy<Value = Value> {
    let var = (
        prop::sample::select(vec![
            "KRUISE_TERMINATE_SIDECAR_WHEN_JOB_EXIT",
            "KRUISE_TERMINATE_SIDECAR_WHEN_JOB_EXIT_WITH_IMAGE",
            "KUBEXIT_GRAVEYARD",
            "KUBEXIT_DEATH_DEPS",
            "KUBEXIT_NAME",
            "OTHER",
        ]),
        prop_oneof![Just(json!("true")), any_json()],
    )
        .prop_map(|(n, v)| json!({"name": n, "value": v}));
    prop_oneof![
        4 => prop::collection::vec(prop_oneof![4 => var, 1 => any_json()], 0..3).prop_map(Value::from),
        1 => any_json(),
    ]
}

/// A container: an object with some of the fields sexton reads (each maybe of the wrong
/// type), or any JSON at all.
fn container() -> impl Strategy<Value = Value> {
    let fields = (
        name(),
        prop_oneof![
            Just(json!("ok-app:1")),
            Just(json!("missing:1")),
            any_json()
        ],
        prop::option::of(string_list()),
        prop::option::of(string_list()),
        prop::option::of(env()),
        prop::option::of(prop_oneof![
            Just(json!([{"name": "v", "mountPath": "/sexton"}])),
            any_json()
        ]),
        prop::option::of(prop_oneof![Just(json!("Always")), any_json()]),
        prop::option::of(any_json()),
    );
    let object = fields.prop_map(|(n, image, command, args, env, mounts, restart, probe)| {
        let mut c = Map::new();
        c.insert("name".into(), n);
        c.insert("image".into(), image);
        let optional = [
            ("command", command),
            ("args", args),
            ("env", env),
            ("volumeMounts", mounts),
            ("restartPolicy", restart),
            ("readinessProbe", probe),
        ];
        for (k, v) in optional {
            if let Some(v) = v {
                c.insert(k.into(), v);
            }
        }
        Value::Object(c)
    });
    prop_oneof![5 => object, 1 => leaf(), 1 => any_json()]
}

fn containers() -> impl Strategy<Value = Value> {
    prop_oneof![
        8 => prop::collection::vec(container(), 0..5).prop_map(Value::from),
        1 => any_json(),
    ]
}

fn annotation_value() -> impl Strategy<Value = Value> {
    prop_oneof![
        prop::sample::select(vec![
            "wrap",
            "native",
            "auto",
            "controller",
            "disabled",
            "main",
            "proxy",
            "proxy,log",
            "proxy,main",
            "{}",
            "{\"version\":1}",
            "[]",
            "garbage"
        ])
        .prop_map(Value::from),
        any_json(),
    ]
}

fn annotations() -> impl Strategy<Value = Value> {
    let keys = prop::sample::select(vec![
        "sexton.dev/inject",
        "sexton.dev/sidecars",
        "sexton.dev/injected",
        "sexton.dev/native-sidecars",
        "sexton.dev/strategy",
        "other",
    ]);
    prop_oneof![
        6 => prop::collection::btree_map(keys, annotation_value(), 0..4)
            .prop_map(|m| Value::Object(m.into_iter().map(|(k, v)| (k.to_string(), v)).collect())),
        1 => any_json(),
    ]
}

/// A Pod as a forged review could carry it.
fn pod() -> impl Strategy<Value = Value> {
    let spec = (
        containers(),
        prop::option::of(containers()),
        prop::option::of(prop_oneof![
            Just(json!([{"name": "sexton-bin", "emptyDir": {}}])),
            any_json()
        ]),
        prop::option::of(prop_oneof![any::<i64>().prop_map(Value::from), any_json()]),
        prop::option::of(prop_oneof![Just(json!({"name": "windows"})), any_json()]),
    )
        .prop_map(|(containers, init, volumes, grace, os)| {
            let mut s = Map::new();
            s.insert("containers".into(), containers);
            for (k, v) in [
                ("initContainers", init),
                ("volumes", volumes),
                ("terminationGracePeriodSeconds", grace),
                ("os", os),
            ] {
                if let Some(v) = v {
                    s.insert(k.into(), v);
                }
            }
            Value::Object(s)
        });
    let whole = (annotations(), prop::option::of(any_json()), spec).prop_map(
        |(annotations, owners, spec)| {
            let mut meta = json!({"name": "p", "annotations": annotations});
            if let Some(o) = owners {
                meta["ownerReferences"] = o;
            }
            json!({"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec})
        },
    );
    prop_oneof![12 => whole, 1 => any_json()]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 3000, ..ProptestConfig::default() })]

    #[test]
    fn admit_never_panics_and_its_patch_applies(pod in pod()) {
        for scope in [Scope::Namespace, Scope::Annotation] {
            let a = admit(&pod, scope, &Options::default(), &SomeImages);
            let mut patched = pod.clone();
            prop_assert!(json_patch::patch(&mut patched, &a.patch).is_ok(), "{:?}", a.patch);
        }
        let _ = entrypoints_needed(&pod, &Options::default());
        let mut injected = pod.clone();
        let _ = inject(&mut injected, &Options::default(), &SomeImages);
        let _ = uninject(&mut injected);
    }
}
