//! OpenKruise's SidecarTerminator markers: the env vars that say "end me when the main
//! containers are done". The controller (`kubectl-sexton controller`) acts on them, and
//! injection reads them to find sidecars.

use serde_json::Value;

pub const ENV_KRUISE_SIDECAR: &str = "KRUISE_TERMINATE_SIDECAR_WHEN_JOB_EXIT";
pub const ENV_KRUISE_SIDECAR_IMAGE: &str = "KRUISE_TERMINATE_SIDECAR_WHEN_JOB_EXIT_WITH_IMAGE";

/// A container whose env (name, value) pairs carry a marker: the first, `true` (any case),
/// or the second, non-empty.
pub fn kruise_marked<'a>(env: impl IntoIterator<Item = (&'a str, Option<&'a str>)>) -> bool {
    env.into_iter().any(|(name, value)| match name {
        ENV_KRUISE_SIDECAR => value.is_some_and(|v| v.eq_ignore_ascii_case("true")),
        ENV_KRUISE_SIDECAR_IMAGE => value.is_some_and(|v| !v.is_empty()),
        _ => false,
    })
}

/// Whether the container's env has a marker (set to anything).
pub fn has_marker(container: &Value) -> bool {
    has_env(container, ENV_KRUISE_SIDECAR) || has_env(container, ENV_KRUISE_SIDECAR_IMAGE)
}

/// Removes the markers from the container's env (and the env, if nothing is left): a
/// sidecar that native sidecars or the supervisor end must not also be swapped by the
/// SidecarTerminator.
pub fn strip_markers(container: &mut Value) {
    let Some(env) = container.get_mut("env").and_then(Value::as_array_mut) else {
        return;
    };
    env.retain(|e| e["name"] != ENV_KRUISE_SIDECAR && e["name"] != ENV_KRUISE_SIDECAR_IMAGE);
    if env.is_empty() {
        container.as_object_mut().expect("an object").remove("env");
    }
}

/// The (name, value) pairs of a container's env.
pub fn env_pairs(container: &Value) -> impl Iterator<Item = (&str, Option<&str>)> {
    container["env"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|e| Some((e["name"].as_str()?, e["value"].as_str())))
}

/// The value of env var `name` in a container, if set by value.
pub fn env_value<'a>(container: &'a Value, name: &str) -> Option<&'a str> {
    env_pairs(container)
        .find(|(n, _)| *n == name)
        .and_then(|(_, v)| v)
}

/// Whether the container's env defines `name` at all (by value or from a source).
pub fn has_env(container: &Value, name: &str) -> bool {
    container["env"]
        .as_array()
        .is_some_and(|env| env.iter().any(|e| e["name"] == name))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markers_as_the_controller_reads_them() {
        for (env, marked) in [
            (vec![(ENV_KRUISE_SIDECAR, Some("true"))], true),
            (vec![(ENV_KRUISE_SIDECAR, Some("TRUE"))], true),
            (vec![(ENV_KRUISE_SIDECAR, Some("false"))], false),
            (vec![(ENV_KRUISE_SIDECAR, None)], false),
            (vec![(ENV_KRUISE_SIDECAR_IMAGE, Some("q:1"))], true),
            (vec![(ENV_KRUISE_SIDECAR_IMAGE, Some(""))], false),
            (vec![("OTHER", Some("true"))], false),
        ] {
            assert_eq!(kruise_marked(env.clone()), marked, "{env:?}");
        }
    }
}
