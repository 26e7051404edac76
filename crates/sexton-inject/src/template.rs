//! Reading and editing a pod template (`{metadata, spec}`) as JSON: containers by name,
//! annotations, fields of a container. Edits touch only what they name.

use serde_json::{Map, Value};

/// A pod template: a Pod object, or the `template` of a workload.
pub struct Template<'a>(pub &'a mut Value);

impl Template<'_> {
    pub fn spec(&self) -> &Value {
        &self.0["spec"]
    }

    pub fn annotation(&self, key: &str) -> Option<&str> {
        self.0["metadata"]["annotations"][key].as_str()
    }

    /// Sets an annotation, creating `metadata` and `annotations` if needed.
    pub fn set_annotation(&mut self, key: &str, value: String) {
        let meta = object_at(self.0, "metadata");
        let annotations = object_at(meta, "annotations");
        annotations
            .as_object_mut()
            .expect("an object")
            .insert(key.into(), Value::String(value));
    }

    /// Removes an annotation; then an empty `annotations` (or `metadata`) that `absent`
    /// says did not exist before is removed too.
    pub fn remove_annotation(&mut self, key: &str, absent: Absent) {
        let Some(meta) = self.0.get_mut("metadata").and_then(Value::as_object_mut) else {
            return;
        };
        if let Some(a) = meta.get_mut("annotations").and_then(Value::as_object_mut) {
            a.remove(key);
            if a.is_empty() && absent.annotations {
                meta.remove("annotations");
            }
        }
        if meta.is_empty() && absent.metadata {
            self.0
                .as_object_mut()
                .expect("an object")
                .remove("metadata");
        }
    }

    /// What of `metadata.annotations` does not exist yet.
    pub fn absent(&self) -> Absent {
        Absent {
            metadata: self.0.get("metadata").is_none(),
            annotations: self.0["metadata"].get("annotations").is_none(),
        }
    }

    pub fn containers(&self) -> &[Value] {
        list(self.spec(), "containers")
    }

    pub fn init_containers(&self) -> &[Value] {
        list(self.spec(), "initContainers")
    }

    pub fn container_names(&self) -> Vec<String> {
        self.containers()
            .iter()
            .map(|c| name(c).to_string())
            .collect()
    }

    /// The container `name` of `spec.containers`.
    pub fn container(&self, name_: &str) -> Option<&Value> {
        self.containers().iter().find(|c| name(c) == name_)
    }

    pub fn container_mut(&mut self, name_: &str) -> Option<&mut Value> {
        self.spec_list_mut("containers")
            .iter_mut()
            .find(|c| name(c) == name_)
    }

    /// `spec.<key>` as a mutable list, created if absent.
    pub fn spec_list_mut(&mut self, key: &str) -> &mut Vec<Value> {
        let spec = object_at(self.0, "spec");
        list_at(spec, key)
    }

    /// Removes `spec.<key>` if it is an empty list.
    pub fn drop_empty_list(&mut self, key: &str) {
        let spec = &mut self.0["spec"];
        if spec[key].as_array().is_some_and(Vec::is_empty) {
            spec.as_object_mut().expect("an object").remove(key);
        }
    }

    pub fn has_spec_key(&self, key: &str) -> bool {
        self.spec().get(key).is_some()
    }
}

/// Whether `metadata` and `metadata.annotations` existed before sexton added its record.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Absent {
    #[serde(default, skip_serializing_if = "is_false")]
    pub metadata: bool,
    #[serde(default, skip_serializing_if = "is_false")]
    pub annotations: bool,
}

fn is_false(b: &bool) -> bool {
    !b
}

/// A container's (or volume's) name.
pub fn name(v: &Value) -> &str {
    v["name"].as_str().unwrap_or_default()
}

/// The list at `obj[key]`, empty if absent or not a list.
pub fn list<'a>(obj: &'a Value, key: &str) -> &'a [Value] {
    obj[key].as_array().map(Vec::as_slice).unwrap_or_default()
}

/// `obj[key]` as an object, created (or replaced, if it is not an object) as needed.
fn object_at<'a>(obj: &'a mut Value, key: &str) -> &'a mut Value {
    let map = obj.as_object_mut().expect("an object");
    let v = map.entry(key).or_insert_with(|| Value::Object(Map::new()));
    if !v.is_object() {
        *v = Value::Object(Map::new());
    }
    v
}

/// `obj[key]` as a list, created (or replaced, if it is not a list) as needed.
pub fn list_at<'a>(obj: &'a mut Value, key: &str) -> &'a mut Vec<Value> {
    let map = obj.as_object_mut().expect("an object");
    let v = map.entry(key).or_insert_with(|| Value::Array(vec![]));
    if !v.is_array() {
        *v = Value::Array(vec![]);
    }
    v.as_array_mut().expect("a list")
}

/// Puts a field back as it was: set, or removed if it was absent.
pub fn restore_field(container: &mut Value, key: &str, old: &Option<Value>) {
    let Some(map) = container.as_object_mut() else {
        return;
    };
    match old {
        Some(v) => {
            map.insert(key.into(), v.clone());
        }
        None => {
            map.remove(key);
        }
    }
}
