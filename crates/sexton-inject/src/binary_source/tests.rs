use super::*;
use serde_json::json;
use std::sync::Arc;

fn node(name: &str, runtime: &str, labels: &[(&str, &str)], taints: &[(&str, &str)]) -> NodeFacts {
    NodeFacts {
        name: name.into(),
        labels: labels
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        taints: taints
            .iter()
            .map(|(k, e)| Taint {
                key: k.to_string(),
                value: String::new(),
                effect: e.to_string(),
            })
            .collect(),
        runtime: runtime.into(),
    }
}

fn opts(version: Option<(u32, u32)>, runtimes: Runtimes) -> Options {
    Options {
        kubernetes_version: version,
        runtimes,
        ..Options::default()
    }
}

fn form(pod: &mut Value, o: &Options) -> Result<(BinaryForm, Option<String>), String> {
    choose(&Template(pod), o)
}

#[test]
fn runtimes_that_mount_image_volumes() {
    for (runtime, mounts) in [
        ("containerd://2.1.0", true),
        ("containerd://v2.4.2", true),
        ("containerd://2.2.1-1~ubuntu.24.04", true),
        ("containerd://2.0.9", false),
        ("containerd://1.7.27", false),
        ("containerd://v2.2.3-k3s1", false),
        ("containerd://2.4.0-k3s1", false),
        ("cri-o://1.31.0", true),
        ("cri-o://1.33.2", true),
        ("cri-o://1.30.9", false),
        ("docker://29.6.2", false),
        ("containerd://", false),
        ("containerd://two", false),
        ("remote://2.4", false),
        ("", false),
    ] {
        assert_eq!(mounts_image_volumes(runtime), mounts, "{runtime}");
    }
}

#[test]
fn auto_needs_kubernetes_1_35_and_runtimes_known_to_mount() {
    let good = Runtimes::Given(vec!["containerd://2.1.0".into()]);
    let mut pod = json!({"spec": {}});
    // nothing known: the copy, said nowhere
    assert_eq!(
        form(&mut pod, &opts(None, good.clone())),
        Ok((BinaryForm::Copy, None))
    );
    assert_eq!(
        form(&mut pod, &opts(Some((1, 37)), Runtimes::Unknown))
            .unwrap()
            .0,
        BinaryForm::Copy
    );
    // (below 1.35 image volumes are off by default: nothing to say)
    assert_eq!(
        form(&mut pod, &opts(Some((1, 34)), good.clone())),
        Ok((BinaryForm::Copy, None))
    );
    assert_eq!(
        form(&mut pod, &opts(Some((1, 35)), good.clone())),
        Ok((BinaryForm::ImageVolume, None))
    );
    let mixed = Runtimes::Given(vec![
        "containerd://2.1.0".into(),
        "containerd://2.0.7".into(),
    ]);
    let (f, why) = form(&mut pod, &opts(Some((1, 36)), mixed)).unwrap();
    assert_eq!(f, BinaryForm::Copy);
    assert!(
        why.unwrap()
            .contains("a node runs \"containerd://2.0.7\", which is not known to mount")
    );
    let mut vk = json!({"spec": {"nodeSelector": {"type": "virtual-kubelet"}}});
    assert_eq!(
        form(&mut vk, &opts(Some((1, 36)), good)).unwrap().0,
        BinaryForm::Copy
    );
}

#[test]
fn explicit_sources_and_the_annotation() {
    let mut pod = json!({"spec": {}});
    let mut o = opts(Some((1, 30)), Runtimes::Unknown);
    o.binary_source = BinarySource::ImageVolume;
    assert!(
        form(&mut pod, &o)
            .unwrap_err()
            .contains("Kubernetes 1.30 has no image volumes")
    );
    o.kubernetes_version = Some((1, 31));
    assert_eq!(form(&mut pod, &o), Ok((BinaryForm::ImageVolume, None)));
    o.kubernetes_version = None;
    assert_eq!(form(&mut pod, &o), Ok((BinaryForm::ImageVolume, None)));
    let mut annotated =
        json!({"metadata": {"annotations": {ANNOTATION_BINARY_SOURCE: "copy"}}, "spec": {}});
    assert_eq!(form(&mut annotated, &o), Ok((BinaryForm::Copy, None)));
    annotated["metadata"]["annotations"][ANNOTATION_BINARY_SOURCE] = json!("floppy");
    let err = form(&mut annotated, &o).unwrap_err();
    assert!(
        err.contains("sexton.dev/binary-source") && err.contains("floppy"),
        "{err}"
    );
}

#[test]
fn only_the_nodes_a_pod_can_land_on_decide() {
    let nodes = Runtimes::Nodes(Arc::new(vec![
        node("new", "containerd://2.4.2", &[("pool", "new")], &[]),
        node("old", "containerd://1.7.27", &[("pool", "old")], &[]),
        node(
            "gpu",
            "containerd://1.7.27",
            &[("pool", "gpu")],
            &[("gpu", "NoSchedule")],
        ),
        node(
            "k3s",
            "containerd://v2.2.3-k3s1",
            &[("pool", "edge")],
            &[("edge", "NoExecute")],
        ),
    ]));
    let o = opts(Some((1, 36)), nodes);
    let chosen = |spec: Value| form(&mut json!({"spec": spec}), &o).unwrap();
    // every untainted node: old is among them
    let (f, why) = chosen(json!({}));
    assert_eq!(f, BinaryForm::Copy);
    assert!(
        why.unwrap()
            .contains("node old runs \"containerd://1.7.27\"")
    );
    assert_eq!(
        chosen(json!({"nodeSelector": {"pool": "new"}})).0,
        BinaryForm::ImageVolume
    );
    assert_eq!(
        chosen(json!({"nodeName": "new"})).0,
        BinaryForm::ImageVolume
    );
    assert_eq!(chosen(json!({"nodeName": "old"})).0, BinaryForm::Copy);
    let affinity = |op: &str, values: &[&str]| {
        json!({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": [{"key": "pool", "operator": op, "values": values}]}]}}}})
    };
    assert_eq!(
        chosen(affinity("In", &["new", "gpu"])).0,
        BinaryForm::ImageVolume
    );
    assert_eq!(
        chosen(affinity("NotIn", &["old"])).0,
        BinaryForm::ImageVolume
    );
    assert_eq!(chosen(affinity("In", &["old"])).0, BinaryForm::Copy);
    // tolerating gpu's taint brings an old node in; the k3s node's NoExecute taint too
    let tolerates = |key: &str| json!({"tolerations": [{"key": key, "operator": "Exists"}]});
    assert_eq!(
        chosen(json!({"nodeSelector": {"pool": "gpu"}})).1.unwrap(),
        "binary copied: no known node can run the pod"
    );
    let mut spec = affinity("NotIn", &["old"]);
    spec["tolerations"] = tolerates("edge")["tolerations"].clone();
    let (f, why) = chosen(spec);
    assert_eq!(f, BinaryForm::Copy);
    assert!(why.unwrap().contains("node k3s runs"));
    // a DaemonSet's pod: matchFields on the node's name
    let pinned = json!({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["new"]}]}]}}}});
    assert_eq!(chosen(pinned).0, BinaryForm::ImageVolume);
}

#[test]
fn selector_operators_and_tolerations() {
    let n = node(
        "n",
        "containerd://2.4.2",
        &[("zone", "a"), ("cores", "8")],
        &[("dedicated", "NoSchedule")],
    );
    let spec = |v: Value| v;
    let term = |exprs: Value| {
        spec(json!({"tolerations": [{"operator": "Exists"}],
            "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": exprs}]}}}}))
    };
    for (exprs, lands) in [
        (json!([{"key": "zone", "operator": "Exists"}]), true),
        (json!([{"key": "zone", "operator": "DoesNotExist"}]), false),
        (
            json!([{"key": "cores", "operator": "Gt", "values": ["4"]}]),
            true,
        ),
        (
            json!([{"key": "cores", "operator": "Lt", "values": ["4"]}]),
            false,
        ),
        (
            json!([{"key": "zone", "operator": "In", "values": ["a"]}, {"key": "cores", "operator": "In", "values": ["2"]}]),
            false,
        ),
        (json!([]), false),
    ] {
        assert_eq!(can_land_on(&term(exprs.clone()), &n), lands, "{exprs}");
    }
    // the taint: not tolerated, tolerated by key and value, by key with another effect
    assert!(!can_land_on(&json!({}), &n));
    assert!(can_land_on(
        &json!({"tolerations": [{"key": "dedicated", "operator": "Equal", "value": ""}]}),
        &n
    ));
    assert!(!can_land_on(
        &json!({"tolerations": [{"key": "dedicated", "operator": "Exists", "effect": "NoExecute"}]}),
        &n
    ));
    assert!(!can_land_on(
        &json!({"tolerations": [{"key": "dedicated", "value": "x"}]}),
        &n
    ));
}
