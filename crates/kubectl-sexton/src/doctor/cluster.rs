//! The API server's version, and whether native sidecars (init containers with
//! `restartPolicy: Always`) exist there: on by default from 1.29, behind the alpha gate
//! `SidecarContainers` in 1.28, absent before.

use k8s_openapi::apimachinery::pkg::version::Info;

use super::report::{Check, Finding, Status};
use crate::shared::values::version;

pub const NAME: &str = "api-server";

pub fn check(info: &Info) -> Check {
    let shown = &info.git_version;
    let Ok((major, minor)) =
        version(&format!("{}.{}", info.major, info.minor)).or_else(|_| version(shown))
    else {
        return Check::new(
            NAME,
            format!("Kubernetes {shown}: version not understood"),
            vec![Finding::new(
                Status::Warning,
                "version",
                format!("cannot tell whether native sidecars exist in {shown:?}"),
            )],
        );
    };
    let wrap =
        "use the in-pod supervisor instead: kubectl sexton inject --strategy wrap -f MANIFEST";
    match (major, minor) {
        (1, 29..) | (2.., _) => Check::new(
            NAME,
            format!("Kubernetes {shown}: native sidecars available (1.29 or later)"),
            vec![],
        ),
        (1, 28) => Check::new(
            NAME,
            format!("Kubernetes {shown}: native sidecars only with the alpha feature gate SidecarContainers"),
            vec![Finding::new(
                Status::Warning,
                "version",
                "Kubernetes 1.28 runs native sidecars only if the feature gate SidecarContainers is on (API server and every kubelet)",
            )
            .fix(wrap)],
        ),
        _ => Check::new(
            NAME,
            format!("Kubernetes {shown}: no native sidecars (1.29 or later)"),
            vec![Finding::new(
                Status::Warning,
                "version",
                format!("Kubernetes {major}.{minor} has no native sidecars"),
            )
            .fix(wrap)],
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(major: &str, minor: &str, git: &str) -> Info {
        Info {
            major: major.into(),
            minor: minor.into(),
            git_version: git.into(),
            ..Default::default()
        }
    }

    #[test]
    fn versions_and_native_sidecars() {
        for (i, status) in [
            (info("1", "34", "v1.34.4"), Status::Ok),
            (info("1", "29+", "v1.29.3-eks-1"), Status::Ok),
            (info("1", "28", "v1.28.0"), Status::Warning),
            (info("1", "27", "v1.27.9"), Status::Warning),
            (info("", "", "v1.30.1"), Status::Ok),
            (info("", "", "weird"), Status::Warning),
        ] {
            assert_eq!(check(&i).status, status, "{i:?}");
        }
        assert!(
            check(&info("1", "34", "v1.34.4"))
                .summary
                .contains("v1.34.4")
        );
    }
}
