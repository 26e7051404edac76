//! Which namespaces' labels changed, or which namespaces are new, from the events of the
//! namespaces' watch: their pods are queued again, since the webhook may serve them now (or
//! no longer). A new namespace counts because the pod watch and this one are separate: a
//! pod can reach the net before its namespace does, be decided as "namespace unknown",
//! and have nothing else to bring it back.

use std::collections::{BTreeMap, HashMap};

use k8s_openapi::api::core::v1::Namespace;
use kube::ResourceExt;
use kube::core::PartialObjectMeta;
use kube::runtime::watcher::Event;

/// The namespaces' labels as last seen, to tell which changed. A namespace listed again is
/// compared only once the list ends: its pods are queued again for a decision that reads
/// the namespace from the cache, which takes in a list only at its end (`PodEvent` in
/// watch.rs says why); a namespace the list no longer has is forgotten then.
#[derive(Default)]
pub struct Labels {
    seen: HashMap<String, BTreeMap<String, String>>,
    listing: HashMap<String, BTreeMap<String, String>>,
    /// A first list has ended (before it, every pod waits for the caches anyway).
    listed: bool,
}

impl Labels {
    /// The namespaces this event shows new or with other labels (none on the first list).
    pub fn changed(&mut self, ev: &Event<PartialObjectMeta<Namespace>>) -> Vec<String> {
        match ev {
            Event::Apply(n) => {
                let now = n.labels().clone();
                match self.seen.insert(n.name_any(), now.clone()) {
                    Some(before) if before == now => vec![],
                    _ => vec![n.name_any()],
                }
            }
            Event::Delete(n) => {
                self.seen.remove(&n.name_any());
                vec![]
            }
            Event::Init => {
                self.listing.clear();
                vec![]
            }
            Event::InitApply(n) => {
                self.listing.insert(n.name_any(), n.labels().clone());
                vec![]
            }
            Event::InitDone => {
                let listed = std::mem::take(&mut self.listing);
                let changed = match std::mem::replace(&mut self.listed, true) {
                    false => vec![],
                    true => listed
                        .iter()
                        .filter(|(ns, now)| self.seen.get(*ns) != Some(*now))
                        .map(|(ns, _)| ns.clone())
                        .collect(),
                };
                self.seen = listed;
                changed
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ns(name: &str, labels: &[(&str, &str)]) -> PartialObjectMeta<Namespace> {
        let mut n = PartialObjectMeta::<Namespace>::default();
        n.metadata.name = Some(name.into());
        n.metadata.labels = Some(
            labels
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        );
        n
    }

    /// Feeds `events`; the namespaces reported after each.
    fn run(l: &mut Labels, events: Vec<Event<PartialObjectMeta<Namespace>>>) -> Vec<Vec<String>> {
        events.iter().map(|e| l.changed(e)).collect()
    }

    #[test]
    fn the_first_list_changes_nothing_then_a_new_namespace_or_a_changed_label_does() {
        let mut l = Labels::default();
        let on = [("sexton.dev/inject", "enabled")];
        let first = run(
            &mut l,
            vec![
                Event::Init,
                Event::InitApply(ns("a", &[])),
                Event::InitApply(ns("b", &on)),
                Event::InitDone,
            ],
        );
        assert!(first.iter().all(Vec::is_empty), "{first:?}");
        assert_eq!(l.changed(&Event::Apply(ns("a", &on))), ["a"]);
        assert!(
            l.changed(&Event::Apply(ns("a", &on))).is_empty(),
            "unchanged"
        );
        assert_eq!(l.changed(&Event::Apply(ns("new", &[]))), ["new"], "new");
    }

    /// A relist tells its changes only at its end (the cache holds the list only then), and
    /// forgets the namespaces it no longer has.
    #[test]
    fn a_relist_tells_its_changes_at_its_end_and_forgets_the_deleted() {
        let mut l = Labels::default();
        let on = [("sexton.dev/inject", "enabled")];
        run(
            &mut l,
            vec![
                Event::Init,
                Event::InitApply(ns("a", &[])),
                Event::InitApply(ns("gone", &[])),
                Event::InitDone,
            ],
        );
        let mut relist = run(
            &mut l,
            vec![
                Event::Init,
                Event::InitApply(ns("a", &on)),
                Event::InitApply(ns("made-meanwhile", &[])),
                Event::InitDone,
            ],
        );
        relist.last_mut().unwrap().sort();
        assert_eq!(
            relist,
            [
                vec![],
                vec![],
                vec![],
                vec!["a".to_string(), "made-meanwhile".to_string()]
            ]
        );
        assert!(!l.seen.contains_key("gone"));
        // back as it was, after an interrupted list (Init again): still one change
        let again = run(
            &mut l,
            vec![
                Event::Init,
                Event::InitApply(ns("a", &[])),
                Event::Init,
                Event::InitApply(ns("a", &[])),
                Event::InitDone,
            ],
        );
        assert_eq!(again.last().unwrap(), &["a".to_string()]);
    }
}
