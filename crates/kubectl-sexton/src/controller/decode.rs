//! A watch whose objects are decoded one at a time: the list and watch read raw objects,
//! and each becomes the controller's type on its own. An object that does not decode (a
//! value the CRD's schema let through, a field a newer version added) is logged once per
//! version (name, field, reason), counted in `undecodable_objects_total` and skipped; the
//! others are reconciled. (Decoding the typed list whole, one such object fails the list,
//! and with it every object of every namespace, after each restart.)

use std::collections::HashMap;
use std::fmt::Debug;
use std::sync::{Arc, Mutex};

use futures_util::{Stream, StreamExt};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{ApiResource, DynamicObject};
use kube::runtime::watcher::{self, Event, watcher};
use kube::{Api, Resource, ResourceExt};
use serde::de::DeserializeOwned;
use tracing::error;

use super::metrics::{Metrics, WatchLabel};
use super::watch::bounded;

/// What a watch of raw objects needs to hand on typed ones.
pub struct Lenient<K> {
    pub watch: &'static str,
    pub metrics: Arc<Metrics>,
    /// An object of the type carrying only `metadata`: what a deletion of an object that
    /// never decoded, or no longer does, removes from the cache.
    pub placeholder: fn(ObjectMeta) -> K,
}

/// The raw API of `K` in `namespace`, or in all namespaces.
pub fn raw_api<K>(client: kube::Client, namespace: Option<&str>) -> Api<DynamicObject>
where
    K: Resource<DynamicType = ()>,
{
    let ar = ApiResource::erase::<K>(&());
    match namespace {
        Some(ns) => Api::namespaced_with(client, ns, &ar),
        None => Api::all_with(client, &ar),
    }
}

/// The watch of `api`, each object decoded into `K` on its own.
pub fn one_at_a_time<K>(
    api: Api<DynamicObject>,
    config: watcher::Config,
    lenient: Lenient<K>,
) -> impl Stream<Item = watcher::Result<Event<K>>> + Send + 'static
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
{
    // uid → the resourceVersion last reported as undecodable (a relist does not log again)
    let reported: Arc<Mutex<HashMap<String, String>>> = Arc::default();
    let lenient = Arc::new(lenient);
    watcher(api, config).filter_map(move |ev| {
        let out = match ev {
            Err(e) => Some(Err(e)),
            Ok(ev) => typed(ev, &lenient, &reported).map(Ok),
        };
        std::future::ready(out)
    })
}

/// One event with its object decoded; None for a listed object that does not decode.
/// A changed object that no longer decodes leaves the cache (as if deleted): a controller
/// must not act on the version before.
fn typed<K>(
    ev: Event<DynamicObject>,
    lenient: &Lenient<K>,
    reported: &Mutex<HashMap<String, String>>,
) -> Option<Event<K>>
where
    K: DeserializeOwned,
{
    let decode = |o: DynamicObject| decode(o, lenient, reported);
    match ev {
        Event::Init => Some(Event::Init),
        Event::InitDone => Some(Event::InitDone),
        Event::InitApply(o) => decode(o).ok().map(Event::InitApply),
        Event::Apply(o) => Some(match decode(o) {
            Ok(k) => Event::Apply(k),
            Err(meta) => Event::Delete((lenient.placeholder)(*meta)),
        }),
        Event::Delete(o) => {
            if let Some(uid) = o.uid() {
                reported
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .remove(&uid);
            }
            let meta = o.metadata.clone();
            Some(Event::Delete(
                decode(o).unwrap_or_else(|_| (lenient.placeholder)(meta)),
            ))
        }
    }
}

/// The object as `K`, or (reported once per version) its metadata (boxed: the rare case
/// should not make every result the size of an `ObjectMeta`).
fn decode<K: DeserializeOwned>(
    o: DynamicObject,
    lenient: &Lenient<K>,
    reported: &Mutex<HashMap<String, String>>,
) -> Result<K, Box<ObjectMeta>> {
    let value = match serde_json::to_value(&o) {
        Ok(v) => v,
        Err(e) => {
            return Err(Box::new(undecodable(
                o.metadata,
                "",
                &e.to_string(),
                lenient,
                reported,
            )));
        }
    };
    serde_path_to_error::deserialize(value).map_err(|e| {
        let field = e.path().to_string();
        Box::new(undecodable(
            o.metadata,
            &field,
            &e.inner().to_string(),
            lenient,
            reported,
        ))
    })
}

fn undecodable<K>(
    meta: ObjectMeta,
    field: &str,
    reason: &str,
    lenient: &Lenient<K>,
    reported: &Mutex<HashMap<String, String>>,
) -> ObjectMeta {
    let uid = meta.uid.clone().unwrap_or_default();
    let rv = meta.resource_version.clone().unwrap_or_default();
    let first = reported
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .insert(uid, rv.clone())
        .is_none_or(|before| before != rv);
    if first {
        let watch = lenient.watch;
        lenient
            .metrics
            .undecodable
            .get_or_create(&WatchLabel { watch })
            .inc();
        let object = format!(
            "{}/{}",
            meta.namespace.as_deref().unwrap_or_default(),
            meta.name.as_deref().unwrap_or_default()
        );
        error!(watch, object = %object, field, resource_version = %rv, "cannot read {object}: {field}: {}; skipped (the other objects are reconciled)", bounded(reason));
    }
    meta
}
