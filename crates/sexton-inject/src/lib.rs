//! sexton's manifest mutation: one declaration of which containers are sidecars, and
//! sexton picks how they are made to end.
//!
//! - `native`: sidecars become init containers with `restartPolicy: Always` (Kubernetes
//!   ≥ 1.29 on ordinary nodes);
//! - `wrap`: every container runs behind the in-pod supervisor, with the settings that make
//!   its sidecars keep a native sidecar's promises (anywhere, virtual-kubelet nodes included);
//! - `controller`: sidecars get the SidecarTerminator's markers, for the controller to end;
//! - `auto`: the first of these that works for the template.
//!
//! Pure: objects (`serde_json::Value`) in, objects out, edited in place so that fields this
//! crate does not know survive. The one outside input is the images' ENTRYPOINT and CMD,
//! which `wrap` needs for containers that set no `command`; it comes through [`Resolve`].
//! Every change is recorded in the annotation `sexton.dev/injected` on the pod template,
//! from which [`uninject`] restores the original, and which makes injecting twice the same
//! as injecting once.

mod admission;
mod ahead;
mod binary_source;
mod catalogue;
mod chain;
mod choose;
mod contract;
mod entrypoint;
mod extend;
mod lifecycle;
mod markers;
mod native;
mod options;
mod quit;
mod record;
mod report;
mod resource;
mod sidecars;
mod template;
mod terminator;
mod wrap;

pub use admission::{ANNOTATION_NATIVE, Admission, Scope, admit};
pub use binary_source::{ANNOTATION_BINARY_SOURCE, BinaryForm, can_land_on, mounts_image_volumes};
pub use catalogue::{
    Catalogue, CatalogueError, DoneWhen, Marker, On, Pattern, Recognised, Reinvocation, Vendor,
    run_to_completion,
};
pub use chain::{Chain, may_move};
pub use choose::{ANNOTATION_INJECT, virtual_kubelet};
pub use entrypoint::{ImageCommand, Resolve, Unresolved};
pub use markers::{ENV_KRUISE_SIDECAR, ENV_KRUISE_SIDECAR_IMAGE, kruise_marked};
pub use options::{
    BinarySource, BinarySourceError, Mechanism, NodeFacts, Options, Position, Runtimes, Strategy,
    StrategyError, Taint,
};
pub use record::{ANNOTATION_INJECTED, Injected, RecordError, injected};
pub use report::{Outcome, Report};
pub use resource::{entrypoints_needed, inject, uninject};
pub use sidecars::{ANNOTATION_SIDECARS, Roles, Source};

/// The sidecars and mains a pod template (a Pod, or a workload's `template`) declares, by
/// the rule [`inject`] reads; `None` if it declares none, or names a container it lacks.
/// (`&mut` only because templates are edited in place elsewhere; nothing is changed.)
pub fn declared_roles(template: &mut serde_json::Value) -> Option<Roles> {
    let none = Catalogue::empty();
    sidecars::roles(
        &template::Template(template),
        &[],
        &none,
        sidecars::Missing::Refuse,
    )
    .ok()
    .flatten()
}

/// The sidecars and mains of a pod (template), declared or recognised from `catalogue`;
/// `None` if it has none. A declared name the pod lacks is skipped (`doctor` and the
/// controller read pods as they are).
pub fn roles_of(pod: &mut serde_json::Value, catalogue: &Catalogue) -> Option<Roles> {
    sidecars::roles(
        &template::Template(pod),
        &[],
        catalogue,
        sidecars::Missing::Later,
    )
    .ok()
    .flatten()
}
