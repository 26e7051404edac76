//! The record of an injection, kept in the pod template's annotation `sexton.dev/injected`:
//! what was done (mechanism, sidecars, mains) and how to undo it (the fields each changed
//! container had, what was moved and what was added). `uninject` puts back exactly what
//! sexton changed and nothing else, so edits made since to other fields are kept.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::ahead::Ahead;
use crate::binary_source::BinaryForm;
use crate::options::Mechanism;
use crate::template::{Absent, Template, list_at, name, restore_field};

pub const ANNOTATION_INJECTED: &str = "sexton.dev/injected";

/// The record's format; a newer one is refused rather than misread.
const VERSION: u32 = 1;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Record {
    pub version: u32,
    pub mechanism: Mechanism,
    pub sidecars: Vec<String>,
    pub mains: Vec<String>,
    /// Containers whose fields sexton changed: the fields as they were (`null`: absent).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub changed: Vec<Changed>,
    /// Sidecars moved from `containers` to `initContainers`, with their former index.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub moved: Vec<Moved>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub added_init_containers: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub added_volumes: Vec<String>,
    /// `spec` lists that sexton created (`initContainers`, `volumes`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub created_lists: Vec<String>,
    /// Annotations sexton set for a vendor's webhook still to come (`ahead.rs`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub added_annotations: Vec<String>,
    #[serde(default)]
    pub absent: Absent,
    /// Where the supervisor's binary comes from, for `wrap` and `native-wrap`: noted only for
    /// the image volume (absent: the copy, as in records made before image volumes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub binary_source: Option<BinaryForm>,
    /// Where the binary comes from and why, said in the report (not kept).
    #[serde(skip)]
    pub binary_note: Option<String>,
    /// What of the containers' own settings could not be carried over (said in the report,
    /// not kept).
    #[serde(skip)]
    pub caveats: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Changed {
    pub name: String,
    pub fields: BTreeMap<String, Option<Value>>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Moved {
    pub name: String,
    pub index: usize,
}

/// A record that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RecordError {
    #[error("annotation {ANNOTATION_INJECTED} cannot be read ({0}); remove it by hand")]
    Unreadable(String),
    #[error(
        "annotation {ANNOTATION_INJECTED} has version {0}, newer than this kubectl-sexton knows ({VERSION}); use a newer one"
    )]
    Newer(u32),
}

impl Record {
    pub fn new(mechanism: Mechanism, sidecars: &[String], mains: &[String]) -> Record {
        Record {
            version: VERSION,
            mechanism,
            sidecars: sidecars.to_vec(),
            mains: mains.to_vec(),
            changed: vec![],
            moved: vec![],
            added_init_containers: vec![],
            added_volumes: vec![],
            created_lists: vec![],
            added_annotations: vec![],
            absent: Absent::default(),
            binary_source: None,
            binary_note: None,
            caveats: vec![],
        }
    }

    /// Notes the current value of `field` of `container`, the first time it is changed.
    pub fn before_change(&mut self, container: &Value, field: &str) {
        let n = name(container);
        let idx = match self.changed.iter().position(|c| c.name == n) {
            Some(i) => i,
            None => {
                self.changed.push(Changed {
                    name: n.to_string(),
                    fields: BTreeMap::new(),
                });
                self.changed.len() - 1
            }
        };
        self.changed[idx]
            .fields
            .entry(field.to_string())
            .or_insert_with(|| container.get(field).cloned().filter(|v| !v.is_null()));
    }

    /// Notes that `spec.<key>` is about to be created, if it does not exist.
    pub fn before_list(&mut self, t: &Template, key: &str) {
        if !t.has_spec_key(key) && !self.created_lists.iter().any(|k| k == key) {
            self.created_lists.push(key.to_string());
        }
    }

    /// Writes the record again, grown (at re-invocation): what was absent before the first
    /// pass stays what `undo` restores.
    pub fn resave(&self, t: &mut Template) {
        let json = serde_json::to_string(self).expect("a record serializes");
        t.set_annotation(ANNOTATION_INJECTED, json);
    }

    /// Sets the annotations for vendors' webhooks still to come, and writes the record.
    pub fn save_with(mut self, t: &mut Template, ahead: &[Ahead]) {
        self.absent = t.absent();
        for a in ahead {
            t.set_annotation(&a.key, a.value.clone());
            self.added_annotations.push(a.key.clone());
        }
        self.resave(t);
    }
}

/// The record of a template, if it was injected.
pub fn read(t: &Template) -> Option<Result<Record, RecordError>> {
    read_object(t.0)
}

/// [`read`], of a pod template that is not to be edited.
pub fn read_object(template: &Value) -> Option<Result<Record, RecordError>> {
    let raw = template["metadata"]["annotations"][ANNOTATION_INJECTED].as_str()?;
    let parsed = serde_json::from_str::<Value>(raw)
        .map_err(|e| RecordError::Unreadable(e.to_string()))
        .and_then(|v| match v["version"].as_u64() {
            Some(n) if n > VERSION as u64 => Err(RecordError::Newer(n as u32)),
            _ => serde_json::from_value(v).map_err(|e| RecordError::Unreadable(e.to_string())),
        });
    Some(parsed)
}

/// What sexton's record on a Pod says about which of its sidecars sexton ends (the
/// controller's safety net leaves those alone).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Injected {
    /// No record: nothing of sexton's ends a sidecar of this Pod.
    No,
    /// Set ahead of a vendor's webhook by `inject` on a template (`ahead.rs`): nothing was
    /// injected yet.
    Ahead,
    /// These sidecars (and the mechanism named) are ended by what sexton injected; the
    /// containers it took for mains.
    Sidecars {
        mechanism: Mechanism,
        sidecars: Vec<String>,
        mains: Vec<String>,
    },
    /// A record that cannot be read (a newer sexton's, or damaged): taken as covering every
    /// sidecar, since whatever wrote it may end them.
    Unreadable(RecordError),
}

/// [`Injected`] of a Pod (or pod template) as the API returns it.
pub fn injected(pod: &Value) -> Injected {
    match read_object(pod) {
        None => Injected::No,
        Some(Err(e)) => Injected::Unreadable(e),
        Some(Ok(r)) if r.sidecars.is_empty() => Injected::Ahead,
        Some(Ok(r)) => Injected::Sidecars {
            mechanism: r.mechanism,
            sidecars: r.sidecars,
            mains: r.mains,
        },
    }
}

/// Undoes what `record` says was done to `t`, and removes the record.
pub fn undo(t: &mut Template, record: &Record) {
    move_back(t, &record.moved);
    for c in &record.changed {
        if let Some(container) = t.container_mut(&c.name) {
            for (field, old) in &c.fields {
                restore_field(container, field, old);
            }
        }
    }
    for key in &record.added_annotations {
        // (the annotations' map itself goes with the record, if it was absent)
        t.remove_annotation(key, Absent::default());
    }
    remove_named(t, "initContainers", &record.added_init_containers);
    remove_named(t, "volumes", &record.added_volumes);
    for key in &record.created_lists {
        t.drop_empty_list(key);
    }
    t.remove_annotation(ANNOTATION_INJECTED, record.absent);
}

/// Removes the items of `spec.<key>` named in `names` (if the list exists).
fn remove_named(t: &mut Template, key: &str, names: &[String]) {
    if names.is_empty() || !t.has_spec_key(key) {
        return;
    }
    t.spec_list_mut(key)
        .retain(|c| !names.iter().any(|n| n == name(c)));
}

/// Sidecars moved to `initContainers` go back into `containers` at their former index.
fn move_back(t: &mut Template, moved: &[Moved]) {
    let mut sorted: Vec<&Moved> = moved.iter().collect();
    sorted.sort_by_key(|m| m.index);
    for m in sorted {
        if !t.has_spec_key("initContainers") {
            return;
        }
        let inits = t.spec_list_mut("initContainers");
        let Some(i) = inits.iter().position(|c| name(c) == m.name) else {
            continue;
        };
        let c = inits.remove(i);
        let containers = list_at(t.0.get_mut("spec").expect("a spec"), "containers");
        let at = m.index.min(containers.len());
        containers.insert(at, c);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(record: Option<&str>) -> Value {
        match record {
            Some(r) => json!({"metadata": {"annotations": {ANNOTATION_INJECTED: r}}}),
            None => json!({"metadata": {}}),
        }
    }

    #[test]
    fn what_a_record_says_it_ends() {
        assert_eq!(injected(&pod(None)), Injected::No);
        let r = r#"{"version":1,"mechanism":"native","sidecars":["proxy"],"mains":["main"]}"#;
        assert_eq!(
            injected(&pod(Some(r))),
            Injected::Sidecars {
                mechanism: Mechanism::Native,
                sidecars: vec!["proxy".into()],
                mains: vec!["main".into()],
            }
        );
        let ahead = r#"{"version":1,"mechanism":"native","sidecars":[],"mains":[]}"#;
        assert_eq!(injected(&pod(Some(ahead))), Injected::Ahead);
        assert!(matches!(
            injected(&pod(Some(r#"{"version":9}"#))),
            Injected::Unreadable(RecordError::Newer(9))
        ));
        assert!(matches!(
            injected(&pod(Some("{"))),
            Injected::Unreadable(RecordError::Unreadable(_))
        ));
    }
}
