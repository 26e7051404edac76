//! The doctor's report, pure: checks and their findings, rendered as text (grouped by
//! check, coloured only when asked) or JSON (a stable schema, docs/doctor.md), and
//! the exit code they make.

use serde::Serialize;

use crate::shared::exit::Exit;

/// The version of the JSON schema; bumped only by changes that break readers.
pub const SCHEMA_VERSION: u32 = 1;

/// Exit codes: nothing wrong; a warning or an error was found. (2, the doctor could not
/// run, is decided before there is a report.)
pub const EXIT_OK: Exit = Exit::Ok;
pub const EXIT_FOUND: Exit = Exit::Failed;
pub const EXIT_CANNOT_RUN: Exit = Exit::Unusable;

/// Ordered: a check is as bad as its worst finding.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    Ok,
    Warning,
    Error,
}

impl Status {
    fn label(self) -> &'static str {
        match self {
            Status::Ok => "ok",
            Status::Warning => "warning",
            Status::Error => "error",
        }
    }

    /// ANSI colour: green, yellow, red.
    fn colour(self) -> &'static str {
        match self {
            Status::Ok => "\x1b[32m",
            Status::Warning => "\x1b[33m",
            Status::Error => "\x1b[31m",
        }
    }
}

/// One thing found: what it is about, what is wrong (or right), and the command that fixes it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Finding {
    pub status: Status,
    /// What it is about: `pod NS/NAME`, `namespace NS`, `FILE: Job/NAME`, ...
    pub object: String,
    pub message: String,
    /// The command (or step) that fixes it; `null` when there is nothing to do.
    pub fix: Option<String>,
}

impl Finding {
    pub fn new(status: Status, object: impl Into<String>, message: impl Into<String>) -> Self {
        Finding {
            status,
            object: object.into(),
            message: message.into(),
            fix: None,
        }
    }

    pub fn fix(mut self, fix: impl Into<String>) -> Self {
        self.fix = Some(fix.into());
        self
    }
}

/// One named check: its status (the worst of its findings, or `error` if it could not
/// look), a one-line summary of the evidence, and its findings.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Check {
    /// Stable identifier: `api-server`, `admission`, `virtual-kubelet`, `stuck-pods`,
    /// `components`, `manifests`.
    pub name: &'static str,
    pub status: Status,
    pub summary: String,
    pub findings: Vec<Finding>,
}

impl Check {
    /// A check with these findings; its status is the worst of them.
    pub fn new(name: &'static str, summary: impl Into<String>, findings: Vec<Finding>) -> Self {
        let status = findings
            .iter()
            .map(|f| f.status)
            .max()
            .unwrap_or(Status::Ok);
        Check {
            name,
            status,
            summary: summary.into(),
            findings,
        }
    }

    /// A check that could not look (the API refused or failed): an error naming why.
    pub fn failed(name: &'static str, object: impl Into<String>, why: impl Into<String>) -> Self {
        let why = why.into();
        Check::new(
            name,
            format!("could not run: {why}"),
            vec![Finding::new(Status::Error, object, why)],
        )
    }
}

/// Every check, in the order they ran.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Report {
    pub schema_version: u32,
    pub status: Status,
    pub checks: Vec<Check>,
}

impl Report {
    pub fn new(checks: Vec<Check>) -> Self {
        let status = checks.iter().map(|c| c.status).max().unwrap_or(Status::Ok);
        Report {
            schema_version: SCHEMA_VERSION,
            status,
            checks,
        }
    }

    pub fn exit_code(&self) -> Exit {
        match self.status {
            Status::Ok => EXIT_OK,
            Status::Warning | Status::Error => EXIT_FOUND,
        }
    }

    pub fn json(&self) -> String {
        let mut s = serde_json::to_string_pretty(self).expect("the report serializes");
        s.push('\n');
        s
    }

    /// The report for a reader: one block per check, its findings indented under it, each
    /// fix on its own line. `colour`: ANSI colours on the status labels.
    pub fn text(&self, colour: bool) -> String {
        let paint = |status: Status, s: &str| {
            if colour {
                format!("{}{s}\x1b[0m", status.colour())
            } else {
                s.to_string()
            }
        };
        let label = |status: Status| paint(status, &format!("[{}]", status.label()));
        let mut out = String::new();
        for c in &self.checks {
            out.push_str(&format!("{} {}: {}\n", label(c.status), c.name, c.summary));
            for f in &c.findings {
                out.push_str(&format!(
                    "    {} {}: {}\n",
                    label(f.status),
                    f.object,
                    f.message
                ));
                if let Some(fix) = &f.fix {
                    out.push_str(&format!("        fix: {fix}\n"));
                }
            }
        }
        let count = |s: Status| {
            self.checks
                .iter()
                .flat_map(|c| &c.findings)
                .filter(|f| f.status == s)
                .count()
        };
        let (errors, warnings) = (count(Status::Error), count(Status::Warning));
        let verdict = match self.status {
            Status::Ok => "nothing wrong found".to_string(),
            _ => format!("{errors} error(s), {warnings} warning(s)"),
        };
        out.push_str(&format!(
            "\n{} {} check(s): {verdict}\n",
            label(self.status),
            self.checks.len()
        ));
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report() -> Report {
        Report::new(vec![
            Check::new("api-server", "Kubernetes v1.34.4", vec![]),
            Check::new(
                "stuck-pods",
                "1 stuck pod",
                vec![
                    Finding::new(Status::Warning, "pod ns/p", "proxy still runs")
                        .fix("kubectl sexton inject --sidecar proxy -f MANIFEST"),
                ],
            ),
        ])
    }

    #[test]
    fn status_and_exit_code_are_the_worst_finding() {
        let r = report();
        assert_eq!(
            (r.checks[0].status, r.checks[1].status, r.status),
            (Status::Ok, Status::Warning, Status::Warning)
        );
        assert_eq!(r.exit_code(), EXIT_FOUND);
        assert_eq!(Report::new(vec![]).exit_code(), EXIT_OK);
        let failed = Check::failed("components", "deployment x", "forbidden");
        assert_eq!(failed.status, Status::Error);
        assert_eq!(Report::new(vec![failed]).exit_code(), EXIT_FOUND);
    }

    #[test]
    fn json_schema_is_stable() {
        let v: serde_json::Value = serde_json::from_str(&report().json()).unwrap();
        assert_eq!(
            v,
            serde_json::json!({
                "schemaVersion": 1,
                "status": "warning",
                "checks": [
                    {"name": "api-server", "status": "ok", "summary": "Kubernetes v1.34.4", "findings": []},
                    {"name": "stuck-pods", "status": "warning", "summary": "1 stuck pod", "findings": [
                        {"status": "warning", "object": "pod ns/p", "message": "proxy still runs",
                         "fix": "kubectl sexton inject --sidecar proxy -f MANIFEST"}
                    ]},
                ]
            })
        );
    }

    #[test]
    fn text_groups_findings_under_their_check_and_colours_only_when_asked() {
        let plain = report().text(false);
        assert_eq!(
            plain,
            "[ok] api-server: Kubernetes v1.34.4\n\
             [warning] stuck-pods: 1 stuck pod\n    \
             [warning] pod ns/p: proxy still runs\n        \
             fix: kubectl sexton inject --sidecar proxy -f MANIFEST\n\
             \n[warning] 2 check(s): 0 error(s), 1 warning(s)\n"
        );
        assert!(!plain.contains('\x1b'));
        assert!(report().text(true).contains("\x1b[33m[warning]\x1b[0m"));
    }
}
