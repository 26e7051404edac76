//! The macOS build's registry "client": none. reqwest, under oci-client, has no TLS stack
//! that links without Apple's SDK (both of its stacks link the Security framework), so the
//! macOS binaries, cross-built without it (scripts/desktop.sh), read no registry. Every
//! lookup is refused with the ways around it: `inject --strategy wrap` needs an image's
//! command only for containers whose manifest gives none.

use sexton_inject::{ImageCommand, Unresolved};

use super::opts::RegistryOpts;

/// No client: a type with no values, so that no lookup can be made with one.
pub enum Lookup {}

impl Lookup {
    pub fn new(_: &RegistryOpts) -> Result<Self, Unresolved> {
        Err(Unresolved(
            "the macOS build of kubectl-sexton reads no image registries: give the container's command in the manifest, or run inject on Linux or Windows".into(),
        ))
    }

    pub async fn image(&self, _: &str) -> Result<ImageCommand, Unresolved> {
        match *self {}
    }
}
