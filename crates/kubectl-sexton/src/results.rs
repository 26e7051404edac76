//! `kubectl sexton ejob results NAME`: every target of an EphemeralJob, read from the pods
//! themselves (exact, whatever the cap of `status.targets`), as a table or JSON, and with
//! `--logs` the tails of the ephemeral containers' logs. It reads with the user's own
//! credentials: `get` on the job, `list` on pods, `get` on pods/log for `--logs`.

use std::io::Write;

use crate::shared::pod::Pod;
use clap::{Args, Subcommand};
use futures_util::{StreamExt, stream};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{ListParams, LogParams};
use kube::{Api, Client};
use serde_json::json;

use crate::shared::cli::{NamespaceFlag, TableFormat, TableOutput, structured};
use crate::shared::ephemeraljob::{
    EphemeralJob, Refused, Relation, TargetResult, relation, result,
};
use crate::shared::exit::Exit;
use crate::shared::kube_client::{ClientError, KubeFlags, namespace_or_default};
use crate::shared::logging;
use crate::shared::runtime::block_on;

/// Logs read at once, and at most this much of each.
const LOG_CONCURRENCY: usize = 4;
const LOG_BYTES: i64 = 64 * 1024;

#[derive(Subcommand, Debug)]
pub enum EjobCommand {
    /// Every target of an EphemeralJob: pod, container, state, exit code, duration, message
    Results(ResultsFlags),
}

#[derive(Args, Debug)]
pub struct ResultsFlags {
    /// The EphemeralJob
    name: String,
    #[command(flatten)]
    namespace: NamespaceFlag,
    #[command(flatten)]
    kube: KubeFlags,
    #[command(flatten)]
    output: TableOutput,
    /// Also print the tail of each ephemeral container's log
    #[arg(long)]
    logs: bool,
    /// Lines of each log (with --logs)
    #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(i64).range(1..=10_000))]
    tail: i64,
}

pub fn main(cmd: EjobCommand) -> Exit {
    let EjobCommand::Results(flags) = cmd;
    let Ok(done) = block_on(run(flags)) else {
        logging::stderr_line("kubectl-sexton ejob results: cannot start the async runtime");
        return Exit::Unusable;
    };
    match done {
        Ok(()) => Exit::Ok,
        Err(e) => {
            logging::stderr_line(&format!("kubectl-sexton ejob results: {e}"));
            e.exit()
        }
    }
}

/// Why `ejob results` could not say.
#[derive(Debug, thiserror::Error)]
enum ResultsError {
    #[error(transparent)]
    Client(#[from] ClientError),
    #[error("ephemeraljob {namespace}/{name}: {source}")]
    Job {
        namespace: String,
        name: String,
        source: kube::Error,
    },
    #[error("listing pods in {namespace}: {source}")]
    Pods {
        namespace: String,
        source: kube::Error,
    },
    #[error("writing the output: {0}")]
    Output(#[source] std::io::Error),
}

impl ResultsError {
    /// 1 when the API server answered no (no such job, forbidden), 2 when it could not be
    /// asked (bad kubeconfig, unreachable).
    fn exit(&self) -> Exit {
        match self {
            ResultsError::Client(_) => Exit::Unusable,
            ResultsError::Job { source, .. } | ResultsError::Pods { source, .. } => match source {
                kube::Error::Api(_) => Exit::Failed,
                _ => Exit::Unusable,
            },
            ResultsError::Output(_) => Exit::Failed,
        }
    }
}

async fn run(flags: ResultsFlags) -> Result<(), ResultsError> {
    let (client, _) = flags.kube.connect().await?;
    let ns = namespace_or_default(flags.namespace.namespace.as_deref(), &client);
    let job = Api::<EphemeralJob>::namespaced(client.clone(), &ns)
        .get(&flags.name)
        .await
        .map_err(|source| ResultsError::Job {
            namespace: ns.clone(),
            name: flags.name.clone(),
            source,
        })?;
    let results = targets(&client, &ns, &job).await?;
    let refused = job
        .status
        .as_ref()
        .map(|s| s.refused.clone())
        .unwrap_or_default();
    let mut out = String::new();
    let doc =
        || json!({"job": format!("{ns}/{}", flags.name), "targets": results, "refused": refused});
    match flags.output.output {
        TableFormat::Json => out.push_str(&structured(&doc(), false)),
        TableFormat::Yaml => out.push_str(&structured(&doc(), true)),
        TableFormat::Text => out.push_str(&table(&results, &refused, false)),
        TableFormat::Wide => out.push_str(&table(&results, &refused, true)),
    }
    if flags.logs {
        out.push_str(&logs(&client, &ns, &results, flags.tail).await);
    }
    let mut stdout = std::io::stdout().lock();
    stdout
        .write_all(out.as_bytes())
        .map_err(ResultsError::Output)
}

/// The results of every injected container of every pod of the namespace holding ours.
async fn targets(
    client: &Client,
    ns: &str,
    job: &EphemeralJob,
) -> Result<Vec<TargetResult>, ResultsError> {
    let pods = Api::<Pod>::namespaced(client.clone(), ns)
        .list(&ListParams::default())
        .await
        .map_err(|source| ResultsError::Pods {
            namespace: ns.into(),
            source,
        })?;
    let mut all: Vec<TargetResult> = pods
        .items
        .iter()
        .filter(|p| relation(p, job) == Relation::Ours)
        .flat_map(|p| {
            job.spec
                .template
                .ephemeral_containers
                .iter()
                .map(move |c| result(p, &c.name))
        })
        .collect();
    all.sort_by(|a, b| (&a.pod, &a.container).cmp(&(&b.pod, &b.container)));
    Ok(all)
}

/// The targets as aligned columns; `wide` adds when each started and finished and the
/// reason, and keeps the whole first line of each message.
fn table(results: &[TargetResult], refused: &[Refused], wide: bool) -> String {
    let mut header = vec!["POD", "CONTAINER", "STATE", "EXIT", "DURATION"];
    if wide {
        header.extend(["STARTED", "FINISHED", "REASON"]);
    }
    header.push("MESSAGE");
    let mut rows: Vec<Vec<String>> = vec![header.into_iter().map(String::from).collect()];
    let message = |m: &str| if wide { first_line(m) } else { one_line(m) };
    for r in results {
        let duration = match (&r.started_at, &r.finished_at) {
            (Some(s), Some(f)) => format!("{}s", f.0.as_second() - s.0.as_second()),
            _ => "-".into(),
        };
        let text = r.message.as_deref().or(r.reason.as_deref()).unwrap_or("");
        let mut row = vec![
            r.pod.clone(),
            r.container.clone(),
            r.state.as_str().to_string(),
            r.exit_code.map_or("-".into(), |c| c.to_string()),
            duration,
        ];
        if wide {
            let at = |t: &Option<_>| t.as_ref().map_or("-".into(), |t: &Time| t.0.to_string());
            row.extend([
                at(&r.started_at),
                at(&r.finished_at),
                r.reason.clone().unwrap_or_else(|| "-".into()),
            ]);
        }
        row.push(message(text));
        rows.push(row);
    }
    for r in refused {
        let mut row = vec![
            r.pod.clone(),
            "-".into(),
            "Refused".into(),
            "-".into(),
            "-".into(),
        ];
        if wide {
            row.extend(["-".into(), "-".into(), "-".into()]);
        }
        row.push(message(&r.message));
        rows.push(row);
    }
    let columns = rows[0].len();
    let widths: Vec<usize> = (0..columns)
        .map(|i| rows.iter().map(|r| r[i].chars().count()).max().unwrap_or(0))
        .collect();
    let mut out = String::new();
    for r in rows {
        let cells: Vec<String> = r
            .iter()
            .enumerate()
            .map(|(i, c)| format!("{c:<w$}", w = widths[i]))
            .collect();
        out.push_str(cells.join("   ").trim_end());
        out.push('\n');
    }
    out
}

/// The first line of a message.
fn first_line(s: &str) -> String {
    s.lines().next().unwrap_or("").to_string()
}

/// The first line of a message, at most 80 characters.
fn one_line(s: &str) -> String {
    let line = s.lines().next().unwrap_or("");
    let cut: String = line.chars().take(80).collect();
    if cut.len() < line.len() {
        format!("{cut}...")
    } else {
        cut
    }
}

/// The tail of each container's log, a few at a time, each bounded in size.
async fn logs(client: &Client, ns: &str, results: &[TargetResult], tail: i64) -> String {
    // (kube's log reader is defined on k8s-openapi's Pod; nothing of it is decoded here)
    let api = Api::<k8s_openapi::api::core::v1::Pod>::namespaced(client.clone(), ns);
    let reads = stream::iter(results)
        .map(|r| {
            let api = api.clone();
            async move {
                let params = LogParams {
                    container: Some(r.container.clone()),
                    tail_lines: Some(tail),
                    limit_bytes: Some(LOG_BYTES),
                    ..Default::default()
                };
                let text = match api.logs(&r.pod, &params).await {
                    Ok(t) => t,
                    Err(e) => format!("(no log: {e})\n"),
                };
                format!("\n==> {}/{} <==\n{}", r.pod, r.container, text)
            }
        })
        .buffered(LOG_CONCURRENCY)
        .collect::<Vec<String>>()
        .await;
    reads.concat()
}
