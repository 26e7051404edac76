//! The EphemeralJob CRD: the schema derived from the types, plus the validation the derive
//! cannot express, as OpenAPI and CEL rules (no webhook). `kubectl-sexton crd` prints it;
//! charts/sexton/files/crd-ephemeraljob.yaml is its output (deploy/ has it rendered by the chart).

use serde_json::{Value, json};

use super::types::{DEFAULT_TTL_AFTER_FINISHED, EphemeralJob};

/// The CRD, with the validation the derive cannot express added as OpenAPI and CEL rules
/// (no webhook): required fields of each template container, fields an ephemeral
/// container may not have, unique names, and which spec fields may change.
pub fn crd() -> Value {
    use kube::CustomResourceExt;
    let mut crd = serde_json::to_value(EphemeralJob::crd()).expect("CRD serializes");
    let schema = &mut crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"];
    schema["properties"]["spec"]["x-kubernetes-validations"] = json!([
        {"rule": "self.selector == oldSelf.selector", "message": "spec.selector is immutable (only replicas, parallelism and paused may change)"},
        {"rule": "self.template == oldSelf.template", "message": "spec.template is immutable (only replicas, parallelism and paused may change)"},
        {"rule": "self.?activeDeadlineSeconds == oldSelf.?activeDeadlineSeconds", "message": "spec.activeDeadlineSeconds is immutable (only replicas, parallelism and paused may change)"},
        {"rule": "self.?ttlSecondsAfterFinished == oldSelf.?ttlSecondsAfterFinished", "message": "spec.ttlSecondsAfterFinished is immutable (only replicas, parallelism and paused may change)"},
        {"rule": "self.?ttlSecondsAfterCreated == oldSelf.?ttlSecondsAfterCreated", "message": "spec.ttlSecondsAfterCreated is immutable (only replicas, parallelism and paused may change)"},
        {"rule": "self.?selectAllPods == oldSelf.?selectAllPods", "message": "spec.selectAllPods is immutable (only replicas, parallelism and paused may change)"},
        // an empty selector matches every pod: only when said so
        {"rule": "(has(self.selector.matchLabels) && size(self.selector.matchLabels) > 0) || (has(self.selector.matchExpressions) && size(self.selector.matchExpressions) > 0) || (has(self.selectAllPods) && self.selectAllPods)",
         "message": "spec.selector is empty, which selects every running pod of the namespace: give matchLabels or matchExpressions, or set spec.selectAllPods: true"},
    ]);
    let spec = &mut schema["properties"]["spec"]["properties"];
    spec["replicas"]["minimum"] = json!(1);
    spec["parallelism"]["minimum"] = json!(1);
    spec["activeDeadlineSeconds"]["minimum"] = json!(1);
    spec["ttlSecondsAfterFinished"]["minimum"] = json!(0);
    // OpenKruise's default: a finished job goes away after half an hour
    spec["ttlSecondsAfterFinished"]["default"] = json!(DEFAULT_TTL_AFTER_FINISHED);
    spec["ttlSecondsAfterCreated"]["minimum"] = json!(0);
    let list = &mut spec["template"]["properties"]["ephemeralContainers"];
    list["minItems"] = json!(1);
    list["maxItems"] = json!(16);
    list["x-kubernetes-validations"] = json!([
        {"rule": "self.all(c, self.exists_one(d, d.name == c.name))", "message": "template.ephemeralContainers: names must be unique"},
    ]);
    let item = &mut list["items"];
    item["required"] = json!([
        "name",
        "image",
        "imagePullPolicy",
        "terminationMessagePolicy",
        "targetContainerName"
    ]);
    item["properties"]["name"]["maxLength"] = json!(63);
    // bounds for the CEL cost estimate of the subPath rule
    item["properties"]["volumeMounts"]["maxItems"] = json!(32);
    item["properties"]["name"]["pattern"] = json!("^[a-z0-9]([-a-z0-9]*[a-z0-9])?$");
    // values the API server would refuse only when the containers are injected, late
    item["properties"]["image"]["pattern"] = json!(r"^\S(.*\S)?$");
    item["properties"]["imagePullPolicy"]["enum"] = json!(["Always", "IfNotPresent", "Never"]);
    item["properties"]["terminationMessagePolicy"]["enum"] =
        json!(["File", "FallbackToLogsOnError"]);
    item["x-kubernetes-validations"] = json!([
        {"rule": "!has(self.ports)", "message": "ephemeral containers may not have ports"},
        {"rule": "!has(self.resources)", "message": "ephemeral containers may not have resources"},
        {"rule": "!has(self.livenessProbe) && !has(self.readinessProbe) && !has(self.startupProbe)", "message": "ephemeral containers may not have probes"},
        {"rule": "!has(self.lifecycle)", "message": "ephemeral containers may not have lifecycle hooks"},
        {"rule": "!has(self.volumeMounts) || self.volumeMounts.all(m, !has(m.subPath) && !has(m.subPathExpr))", "message": "ephemeral containers may not use subPath volume mounts"},
        {"rule": "!has(self.restartPolicy) && !has(self.resizePolicy)", "message": "ephemeral containers may not have a restartPolicy or resizePolicy"},
    ]);
    crd
}

/// The CRD as YAML, as committed in charts/sexton/files/.
pub fn crd_yaml() -> String {
    let mut out = String::from(
        "# Generated by `kubectl-sexton crd` from crates/kubectl-sexton/src/shared/ephemeraljob/types.rs and crd.rs; do not edit.\n",
    );
    out.push_str(&serde_saphyr::to_string(&crd()).expect("CRD serializes as YAML"));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crd_has_the_validation_rules() {
        let crd = crd();
        let v = &crd["spec"]["versions"][0];
        let item = &v["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["template"]
            ["properties"]["ephemeralContainers"]["items"];
        assert_eq!(item["required"].as_array().unwrap().len(), 5);
        assert_eq!(v["subresources"]["status"], json!({}));
        assert_eq!(crd["spec"]["names"]["shortNames"], json!(["ejob"]));
        let cols: Vec<&str> = v["additionalPrinterColumns"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["name"].as_str().unwrap())
            .collect();
        assert_eq!(
            cols,
            [
                "STATUS",
                "MATCH",
                "SUCCEED",
                "FAILED",
                "RUNNING",
                "WAITING",
                "AGE",
                "REPLICAS",
                "PARALLELISM",
                "PAUSED",
                "REFUSED",
                "FINISHED"
            ]
        );
    }
}
