//! Kubernetes' rules for `command` and `args` against the image's ENTRYPOINT and CMD, and
//! the command and args of the same process behind the in-pod supervisor.
//!
//! The rules (kubelet and container runtime alike; an empty list counts as unset):
//! - `command` set: the process is `command` + `args`; the image's ENTRYPOINT and CMD are
//!   ignored;
//! - `command` unset: the process is ENTRYPOINT + (`args` if set, else CMD).
//!
//! The kubelet expands `$(VAR)` in `command` and `args` (and turns `$$` into `$`), but not in
//! the image's ENTRYPOINT and CMD: moved into the pod spec, their `$` are doubled so the
//! process sees them unchanged.

use serde_json::Value;

/// An image's ENTRYPOINT and CMD (from its config).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ImageCommand {
    pub entrypoint: Vec<String>,
    pub cmd: Vec<String>,
}

/// Why an image's ENTRYPOINT and CMD are not known (said to the user with the fix).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Unresolved(pub String);

/// Looks up an image's ENTRYPOINT and CMD (a registry, a cache, a table in tests).
pub trait Resolve {
    fn resolve(&self, image: &str) -> Result<ImageCommand, Unresolved>;
}

/// The supervisor's path in wrapped containers (the `sexton-bin` volume).
pub const SEXTON: &str = "/sexton/sexton";

/// A list of strings, or `None` for absent, `null` or empty (unset, to Kubernetes).
pub fn strings(v: Option<&Value>) -> Option<Vec<String>> {
    let list: Vec<String> = v?
        .as_array()?
        .iter()
        .map(|s| s.as_str().unwrap_or_default().to_string())
        .collect();
    (!list.is_empty()).then_some(list)
}

/// Whether a container needs its image's ENTRYPOINT and CMD to be wrapped.
pub fn needs_image(container: &Value) -> bool {
    strings(container.get("command")).is_none()
}

/// The command and args that run the container's process behind the supervisor.
/// `image` is needed (and used) only when the container sets no `command`.
pub fn wrapped(
    container: &Value,
    image: Option<&ImageCommand>,
) -> Option<(Vec<String>, Option<Vec<String>>)> {
    let command = strings(container.get("command"));
    let args = strings(container.get("args"));
    let mut out = vec![SEXTON.to_string(), "--".to_string()];
    match command {
        Some(c) => {
            out.extend(c);
            Some((out, args))
        }
        None => {
            let image = image?;
            out.extend(image.entrypoint.iter().map(|s| escape(s)));
            let args = args.or_else(|| {
                let cmd: Vec<String> = image.cmd.iter().map(|s| escape(s)).collect();
                (!cmd.is_empty()).then_some(cmd)
            });
            // nothing to run at all: the container could not start before either
            (out.len() > 2 || args.is_some()).then_some((out, args))
        }
    }
}

/// A string from the image, as the pod spec must say it for the process to see it as is.
pub(crate) fn escape(s: &str) -> String {
    s.replace('$', "$$")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn img(entrypoint: &[&str], cmd: &[&str]) -> ImageCommand {
        ImageCommand {
            entrypoint: entrypoint.iter().map(|s| s.to_string()).collect(),
            cmd: cmd.iter().map(|s| s.to_string()).collect(),
        }
    }

    /// The process before (Kubernetes' rules) and after wrapping, for every combination.
    #[test]
    fn the_wrapped_process_is_the_original_behind_sexton() {
        let i = img(&["/ep", "x"], &["c1", "c2"]);
        for (container, command, args) in [
            (json!({}), vec!["/ep", "x"], Some(vec!["c1", "c2"])),
            (json!({"args": ["a"]}), vec!["/ep", "x"], Some(vec!["a"])),
            (json!({"command": ["/cmd"]}), vec!["/cmd"], None),
            (
                json!({"command": ["/cmd"], "args": ["a"]}),
                vec!["/cmd"],
                Some(vec!["a"]),
            ),
            // empty lists are unset
            (
                json!({"command": [], "args": []}),
                vec!["/ep", "x"],
                Some(vec!["c1", "c2"]),
            ),
            (
                json!({"command": null}),
                vec!["/ep", "x"],
                Some(vec!["c1", "c2"]),
            ),
        ] {
            let (c, a) = wrapped(&container, Some(&i)).unwrap();
            let mut want = vec![SEXTON, "--"];
            want.extend(command);
            assert_eq!(c, want, "{container}");
            assert_eq!(
                a,
                args.map(|v| v.iter().map(|s| s.to_string()).collect()),
                "{container}"
            );
        }
    }

    #[test]
    fn image_strings_keep_their_dollars_and_an_empty_image_is_refused() {
        let i = img(&["sh", "-c"], &["echo $(HOME) $$ $x"]);
        let (c, a) = wrapped(&json!({}), Some(&i)).unwrap();
        assert_eq!(c, [SEXTON, "--", "sh", "-c"]);
        assert_eq!(a.unwrap(), ["echo $$(HOME) $$$$ $$x"]);
        // the user's own command is already in the spec: untouched
        let (c, _) = wrapped(&json!({"command": ["echo", "$(HOME)"]}), None).unwrap();
        assert_eq!(c[3], "$(HOME)");
        assert_eq!(wrapped(&json!({}), Some(&img(&[], &[]))), None);
        assert_eq!(wrapped(&json!({}), None), None);
        let (c, a) = wrapped(&json!({}), Some(&img(&[], &["run"]))).unwrap();
        assert_eq!(
            (c, a),
            (
                vec![SEXTON.to_string(), "--".into()],
                Some(vec!["run".to_string()])
            )
        );
    }
}
