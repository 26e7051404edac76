//! kubectl's flag conventions, defined once for every command people run: `-n/--namespace`
//! is always the namespace acted on (`--sexton-namespace` the one sexton is installed in),
//! `-o/--output` the format (`text` and `wide` where a table is printed, `json`, `yaml`).
//! `--kubeconfig`, `--context` and `--request-timeout` are `kube_client::KubeFlags`.

use clap::{Args, ValueEnum};
use serde::Serialize;

/// `-n/--namespace`.
#[derive(Args, Debug, Clone)]
pub struct NamespaceFlag {
    /// The namespace acted on (default: the kubeconfig context's)
    #[arg(short, long, value_name = "NAMESPACE")]
    pub namespace: Option<String>,
}

/// `--sexton-namespace`.
#[derive(Args, Debug, Clone)]
pub struct SextonNamespaceFlag {
    /// The namespace sexton's controller and webhook are installed in
    #[arg(long, value_name = "NAMESPACE", default_value = "sexton-system")]
    pub sexton_namespace: String,
}

/// The formats of a report (`doctor`, `version`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ReportFormat {
    Text,
    Json,
    Yaml,
}

/// `-o` of a report.
#[derive(Args, Debug, Clone)]
pub struct ReportOutput {
    /// Output format
    #[arg(short, long, value_enum, default_value = "text")]
    pub output: ReportFormat,
}

/// The formats of a table (`ejob results`): `wide` has more columns.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum TableFormat {
    Text,
    Wide,
    Json,
    Yaml,
}

/// `-o` of a table.
#[derive(Args, Debug, Clone)]
pub struct TableOutput {
    /// Output format (wide: more columns)
    #[arg(short, long, value_enum, default_value = "text")]
    pub output: TableFormat,
}

/// `value` as pretty JSON or YAML, ending with a newline.
pub fn structured(value: &impl Serialize, yaml: bool) -> String {
    if yaml {
        serde_saphyr::to_string(value).expect("a report serializes as YAML")
    } else {
        serde_json::to_string_pretty(value).expect("a report serializes as JSON") + "\n"
    }
}

/// Whether kubectl runs this binary as its plugin (`kubectl sexton ...`), for usage that
/// says so. Recent kubectl sets `KUBECTL_PATH` for its plugins (kubernetes#138694, merged
/// in April 2026); older ones set no variable (none since 1.12: checked with 1.32), but run
/// the plugin by its absolute path,
/// where a shell passes the name as typed. In a pod (the chart's `/kubectl-sexton ...`)
/// it is never kubectl.
pub fn invoked_by_kubectl() -> bool {
    if std::env::var_os("KUBECTL_PATH").is_some() {
        return true;
    }
    let in_pod = std::env::var_os("KUBERNETES_SERVICE_HOST").is_some();
    let absolute = std::env::args_os()
        .next()
        .is_some_and(|a| std::path::Path::new(&a).is_absolute());
    absolute && !in_pod
}
