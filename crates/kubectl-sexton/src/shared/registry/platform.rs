//! `--platform OS/ARCH[/VARIANT]` and the choice of one image from a multi-platform index,
//! as a container runtime on such a node would choose it.

use std::fmt;

#[cfg(not(target_os = "macos"))] // (no registry client on macOS: client_macos.rs)
use oci_client::manifest::ImageIndexEntry;

/// A platform: `linux/amd64`, `linux/arm64/v8`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Platform {
    os: String,
    arch: String,
    variant: Option<String>,
}

#[derive(Debug, thiserror::Error)]
#[error("expected OS/ARCH[/VARIANT], such as linux/amd64 or linux/arm64/v8")]
pub struct BadPlatform;

impl Platform {
    /// Parses `OS/ARCH[/VARIANT]` (clap's value parser of `--platform`).
    pub fn parse(s: &str) -> Result<Self, BadPlatform> {
        let parts: Vec<&str> = s.trim().split('/').collect();
        let valid = |p: &str| {
            !p.is_empty()
                && p.chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-' || c == '.')
        };
        match parts[..] {
            [os, arch] if valid(os) && valid(arch) => Ok(Self::new(os, arch, None)),
            [os, arch, variant] if valid(os) && valid(arch) && valid(variant) => {
                Ok(Self::new(os, arch, Some(variant)))
            }
            _ => Err(BadPlatform),
        }
    }

    /// Normalised as containerd normalises platforms, so that `linux/arm64` and
    /// `linux/arm64/v8` (and `x86_64`, `aarch64`) name the same images.
    fn new(os: &str, arch: &str, variant: Option<&str>) -> Self {
        let os = os.to_ascii_lowercase();
        let (arch, variant) = match (arch.to_ascii_lowercase().as_str(), variant) {
            ("x86_64" | "x86-64", v) => ("amd64".to_string(), v),
            ("aarch64" | "arm64", None | Some("v8")) => ("arm64".to_string(), None),
            ("aarch64", v) => ("arm64".to_string(), v),
            ("arm", None | Some("v7")) => ("arm".to_string(), Some("v7")),
            (a, v) => (a.to_string(), v),
        };
        Self {
            os,
            arch,
            variant: variant.map(str::to_ascii_lowercase),
        }
    }

    /// The digest of this platform's image in an index, else every platform it has (for
    /// the message). Entries without a platform, or `unknown/unknown` (build attestations),
    /// are not images to run.
    #[cfg(not(target_os = "macos"))]
    pub fn select(&self, entries: &[ImageIndexEntry]) -> Result<String, Vec<String>> {
        let platforms: Vec<(Platform, &ImageIndexEntry)> = entries
            .iter()
            .filter_map(|e| {
                let p = e.platform.as_ref()?;
                let (os, arch) = (p.os.to_string(), p.architecture.to_string());
                (os != "unknown").then(|| (Self::new(&os, &arch, p.variant.as_deref()), e))
            })
            .collect();
        match platforms.iter().find(|(p, _)| p == self) {
            Some((_, e)) => Ok(e.digest.clone()),
            None => Err(platforms.iter().map(|(p, _)| p.to_string()).collect()),
        }
    }
}

impl fmt::Display for Platform {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.os, self.arch)?;
        match &self.variant {
            // arm's default variant goes without saying, as users write it
            Some(v) if !(self.arch == "arm" && v == "v7") => write!(f, "/{v}"),
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn entries(platforms: &[(&str, &str, Option<&str>)]) -> Vec<ImageIndexEntry> {
        platforms
            .iter()
            .enumerate()
            .map(|(i, (os, arch, variant))| {
                serde_json::from_value(json!({
                    "mediaType": "application/vnd.oci.image.manifest.v1+json",
                    "digest": format!("sha256:{i}"),
                    "size": 1,
                    "platform": {"os": os, "architecture": arch, "variant": variant},
                }))
                .unwrap()
            })
            .collect()
    }

    #[test]
    fn platforms_are_parsed_and_normalised() {
        for (s, shown) in [
            ("linux/amd64", "linux/amd64"),
            ("linux/x86_64", "linux/amd64"),
            ("linux/arm64", "linux/arm64"),
            ("linux/arm64/v8", "linux/arm64"),
            ("linux/aarch64", "linux/arm64"),
            ("linux/arm", "linux/arm"),
            ("linux/arm/v7", "linux/arm"),
            ("linux/arm/v6", "linux/arm/v6"),
            ("windows/amd64", "windows/amd64"),
        ] {
            assert_eq!(Platform::parse(s).unwrap().to_string(), shown, "{s}");
        }
        for s in [
            "",
            "linux",
            "linux/",
            "/amd64",
            "linux/amd64/v1/x",
            "linux/amd 64",
        ] {
            assert!(Platform::parse(s).is_err(), "{s:?}");
        }
    }

    #[test]
    fn the_image_of_the_platform_is_chosen_from_an_index() {
        let index = entries(&[
            ("linux", "amd64", None),
            ("linux", "arm64", Some("v8")),
            ("linux", "arm", Some("v6")),
            ("unknown", "unknown", None),
        ]);
        let pick = |p: &str| Platform::parse(p).unwrap().select(&index);
        assert_eq!(pick("linux/amd64").unwrap(), "sha256:0");
        assert_eq!(pick("linux/arm64").unwrap(), "sha256:1");
        assert_eq!(pick("linux/arm64/v8").unwrap(), "sha256:1");
        assert_eq!(pick("linux/arm/v6").unwrap(), "sha256:2");
        // attestations are not listed as platforms
        assert_eq!(
            pick("linux/s390x").unwrap_err(),
            ["linux/amd64", "linux/arm64", "linux/arm/v6"]
        );
        assert!(pick("linux/arm").is_err(), "v7 is not v6");
    }
}
