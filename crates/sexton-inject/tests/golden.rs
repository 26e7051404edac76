//! Golden files of the mutation: every `tests/golden/*.in.yaml` (its first line gives the
//! options) is injected, and the reports and output must equal `*.out.yaml`. For every
//! case, injecting the output again changes nothing, and uninjecting it gives the input back.
//! `SEXTON_BLESS=1 cargo test -p sexton-inject --test golden` rewrites the golden files.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::Value;
use sexton_inject::{
    ImageCommand, Options, Position, Report, Resolve, Runtimes, Strategy, Unresolved, inject,
    uninject,
};

/// Images as a registry would describe them.
struct Images(BTreeMap<&'static str, ImageCommand>);

fn images() -> Images {
    let img = |e: &[&str], c: &[&str]| ImageCommand {
        entrypoint: e.iter().map(|s| s.to_string()).collect(),
        cmd: c.iter().map(|s| s.to_string()).collect(),
    };
    Images(BTreeMap::from([
        ("busybox:1", img(&[], &["sh"])),
        ("proxy:1", img(&["/proxy"], &["--port", "$(PORT)"])),
        (
            "envoy:1",
            img(
                &["/docker-entrypoint.sh"],
                &["envoy", "-c", "/etc/envoy/envoy.yaml"],
            ),
        ),
        ("shipper:1", img(&["/bin/shipper"], &[])),
        ("scratch-empty:1", img(&[], &[])),
        // vendors' sidecar images (tests/golden/vendors-*.in.yaml)
        (
            "docker.io/istio/proxyv2:1.27.0",
            img(&["/usr/local/bin/pilot-agent"], &[]),
        ),
        (
            "cr.l5d.io/linkerd/proxy:stable-2.14.10",
            img(&["/usr/lib/linkerd/linkerd2-proxy"], &[]),
        ),
        (
            "hashicorp/consul-dataplane:1.6.0",
            img(
                &["/usr/local/bin/docker-entrypoint.sh"],
                &["consul-dataplane"],
            ),
        ),
        (
            "gcr.io/datadoghq/agent:7",
            img(&["/bin/entrypoint.sh"], &[]),
        ),
        (
            "gcr.io/cloud-sql-connectors/cloud-sql-proxy:2.14.1",
            img(&["/cloud-sql-proxy"], &[]),
        ),
        (
            "docker.io/kumahq/kuma-dp:2.9.0",
            img(&["/usr/bin/kuma-dp"], &[]),
        ),
        (
            "ghcr.io/open-telemetry/opentelemetry-collector:0.120.0",
            img(&["/otelcol"], &[]),
        ),
    ]))
}

impl Resolve for Images {
    fn resolve(&self, image: &str) -> Result<ImageCommand, Unresolved> {
        self.0
            .get(image)
            .cloned()
            .ok_or_else(|| Unresolved(format!("{image}: manifest unknown")))
    }
}

/// The options on the case's first line (`# args: --strategy wrap --sidecar proxy`).
fn options(first_line: &str) -> Options {
    let mut o = Options {
        sexton_image: "sexton:test".into(),
        ..Options::default()
    };
    let args: Vec<&str> = first_line
        .trim_start_matches("# args:")
        .split_whitespace()
        .collect();
    for pair in args.chunks(2) {
        match pair {
            ["--strategy", s] => o.strategy = s.parse::<Strategy>().unwrap(),
            ["--sidecar", n] => o.sidecars.push(n.to_string()),
            ["--native-position", "first"] => o.position = Position::First,
            ["--binary-source", s] => o.binary_source = s.parse().unwrap(),
            ["--container-runtime", r] => match &mut o.runtimes {
                Runtimes::Given(list) => list.push(r.to_string()),
                _ => o.runtimes = Runtimes::Given(vec![r.to_string()]),
            },
            ["--kubernetes-version", v] => {
                let (a, b) = v.split_once('.').unwrap();
                o.kubernetes_version = Some((a.parse().unwrap(), b.parse().unwrap()));
            }
            other => panic!("unknown args {other:?}"),
        }
    }
    o
}

fn cases() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden");
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.to_string_lossy().ends_with(".in.yaml"))
        .collect();
    v.sort();
    assert!(v.len() >= 8, "golden cases missing: {v:?}");
    v
}

fn render(reports: &[Report], docs: &[Value]) -> String {
    let mut out: String = reports.iter().map(|r| format!("# {r}\n")).collect();
    out.push_str(&serde_saphyr::to_string_multiple(docs).unwrap());
    out
}

fn inject_all(docs: &[Value], o: &Options) -> (Vec<Report>, Vec<Value>) {
    let mut out = docs.to_vec();
    let reports = out
        .iter_mut()
        .flat_map(|d| inject(d, o, &images()))
        .collect();
    (reports, out)
}

#[test]
fn golden_files() {
    let bless = std::env::var_os("SEXTON_BLESS").is_some();
    let mut failed = vec![];
    for input in cases() {
        let text = std::fs::read_to_string(&input).unwrap();
        let o = options(text.lines().next().unwrap());
        let docs: Vec<Value> = serde_saphyr::from_str_multiple(&text).unwrap();
        let (reports, out) = inject_all(&docs, &o);
        let rendered = render(&reports, &out);
        let golden = PathBuf::from(input.to_string_lossy().replace(".in.yaml", ".out.yaml"));
        if bless {
            std::fs::write(&golden, &rendered).unwrap();
        } else if std::fs::read_to_string(&golden).ok().as_deref() != Some(rendered.as_str()) {
            failed.push(format!("{}:\n{rendered}", golden.display()));
        }
        let (_, again) = inject_all(&out, &o);
        assert_eq!(
            again,
            out,
            "{}: injecting twice differs from once",
            input.display()
        );
        let mut back = out.clone();
        for d in &mut back {
            uninject(d);
        }
        assert_eq!(
            back,
            docs,
            "{}: uninject does not restore the input",
            input.display()
        );
    }
    assert!(
        failed.is_empty(),
        "golden files differ (SEXTON_BLESS=1 to accept):\n{}",
        failed.join("\n")
    );
}
