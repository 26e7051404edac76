//! The documentation says what the code does: the README and CONTRIBUTING.md start with the
//! project's two commands; docs/architecture.md names only what exists; and the references
//! generated from the code or the chart (the in-pod settings, the CLI's help, the metrics,
//! the chart's values) are what the code and the chart say today.
//!
//! A generated reference sits between `<!-- generated:NAME -->` and `<!-- /generated:NAME -->`
//! in its page; a test that finds it stale fails with a diff, and
//! `SEXTON_BLESS=1 cargo test --profile release-nolto --workspace --test docs` rewrites it.

use std::path::{Path, PathBuf};
use std::process::Command;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn read(rel: &str) -> String {
    std::fs::read_to_string(root().join(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

// ---- the two commands -----------------------------------------------------------------

#[test]
fn readme_and_contributing_start_with_the_two_commands() {
    for file in ["README.md", "CONTRIBUTING.md"] {
        let text = read(file);
        let head: Vec<&str> = text.lines().take(6).collect();
        assert!(
            head.iter().any(|l| l.starts_with("./scripts/demo.sh")),
            "{file}: {head:?}"
        );
        assert!(
            head.iter().any(|l| l.starts_with("./scripts/test.sh")),
            "{file}: {head:?}"
        );
    }
    assert!(
        read(".ci/run").contains("exec ./scripts/test.sh"),
        "CI must run exactly the README's test command"
    );
}

// ---- the license ----------------------------------------------------------------------

/// LICENSE is the Apache-2.0 text, and every place that names the license says so: the
/// crates, the chart, the images' label (Dockerfile and scripts/images.sh); the release
/// archives and the krew plugin carry LICENSE itself (scripts/release.sh).
#[test]
fn every_license_field_is_the_license_file() {
    let license = read("LICENSE");
    assert!(
        license.contains("Apache License") && license.contains("Version 2.0, January 2004"),
        "LICENSE is not the Apache-2.0 text"
    );
    for (file, needle) in [
        ("Cargo.toml", "license = \"Apache-2.0\""),
        (
            "charts/sexton/Chart.yaml",
            "artifacthub.io/license: Apache-2.0",
        ),
        (
            "Dockerfile",
            "org.opencontainers.image.licenses=\"Apache-2.0\"",
        ),
        ("scripts/images.sh", "LICENSE=Apache-2.0"),
        ("scripts/release.sh", "- from: LICENSE"),
    ] {
        assert!(read(file).contains(needle), "{file} lacks {needle:?}");
    }
    for krate in [
        "sexton-core",
        "sexton-inject",
        "sexton",
        "kubectl-sexton",
        "testbed",
    ] {
        let manifest = read(&format!("crates/{krate}/Cargo.toml"));
        assert!(
            manifest.contains("license.workspace = true"),
            "crates/{krate}/Cargo.toml does not take the workspace's license"
        );
    }
}

// ---- the in-pod settings --------------------------------------------------------------

/// docs/in-pod.md's settings table has one row per setting of the code, in the code's
/// order, each with its variable, flag and default (the meaning column is prose, kept by
/// hand: it says more than the flag's help).
#[test]
fn in_pod_settings_table_matches_code() {
    let page = read("docs/in-pod.md");
    let rows: Vec<&str> = page
        .lines()
        .skip_while(|l| !l.starts_with("| Env var | Flag | Default | Meaning |"))
        .skip(2)
        .take_while(|l| l.starts_with('|'))
        .collect();
    let expected: Vec<String> = sexton_core::settings::SETTINGS
        .iter()
        .map(|s| {
            let default = match s.default {
                None => "(required)".to_string(),
                Some("") => "(none)".to_string(),
                Some(d) => format!("`{d}`"),
            };
            format!("| `{}` | `--{}` | {} |", s.env, s.flag, default)
        })
        .collect();
    assert_eq!(
        rows.len(),
        expected.len(),
        "docs/in-pod.md has {} settings rows, the code {} settings",
        rows.len(),
        expected.len()
    );
    for (row, want) in rows.iter().zip(&expected) {
        assert!(
            row.starts_with(want.as_str()),
            "docs/in-pod.md: the row {row:?} should start with {want:?}"
        );
    }
}

/// The README's sidecar-contract section names the settings the contract added to the
/// in-pod supervisor (those `inject` writes so that `wrap` keeps native sidecars' promises),
/// each with its default and the code's own help, generated from `SETTINGS`.
#[test]
fn readme_contract_settings_match_code() {
    use sexton_core::settings::{Id, SETTINGS};
    let contract = [
        Id::DeathTrigger,
        Id::DeathDepsMode,
        Id::HoldStop,
        Id::PodGracePeriod,
        Id::RestartChild,
        Id::RestartBackoff,
        Id::PreStop,
    ];
    let mut out = String::from("| setting | default | what it does |\n|---|---|---|\n");
    for s in SETTINGS.iter().filter(|s| contract.contains(&s.id)) {
        let default = match s.default {
            None | Some("") => "(none)".to_string(),
            Some(d) => format!("`{d}`"),
        };
        out += &format!(
            "| `{}` | {default} | {} |\n",
            s.env,
            s.help.replace('|', "\\|")
        );
    }
    check_fragment("README.md", "contract-settings", &out);
}

/// README's table of the vendors' injected sidecars is the catalogue's.
#[test]
fn readme_catalogue_matches_code() {
    use sexton_inject::{Catalogue, Chain, DoneWhen, may_move};
    let code = |s: &str| format!("`{s}`");
    let mut out = String::from(
        "| vendor | sidecar | proof of injection | ended by (native sidecars available) | quit endpoint (`quit`) |\n|---|---|---|---|---|\n",
    );
    for v in Catalogue::default().vendors {
        let names: Vec<String> = v.containers.iter().map(|p| code(&p.0)).collect();
        let proof: Vec<String> = v.markers.iter().map(|m| code(&m.to_string())).collect();
        let mut ended = match (may_move(&v, None::<&Chain>), &v.keep_in_containers) {
            (true, _) => "native".to_string(),
            (false, Some(why)) => format!("wrap: {why}"),
            (false, None) => format!(
                "wrap: its webhook is called again and looks for it by name in `spec.containers`{}",
                match v.webhook.done_when {
                    DoneWhen::NameInContainers => "",
                    _ => " or `initContainers`",
                }
            ),
        };
        if !v.init_containers.is_empty() && may_move(&v, None) {
            let inits: Vec<String> = v.init_containers.iter().map(|p| code(&p.0)).collect();
            ended += &format!(", after {}", inits.join(" or "));
        }
        if let Some(e) = &v.startup {
            ended += &format!(", started once `:{}{}` answers", e.port, e.path);
        }
        if let Some(s) = &v.native_switch {
            ended += &format!("; before its webhook ran: {}", code(&s.to_string()));
        }
        let quit = match &v.quit {
            None => "none".to_string(),
            Some(q) => {
                let mut q_text = format!("POST `:{}{}`", q.endpoint.port, q.endpoint.path);
                if let Some(e) = &q.enable_env {
                    q_text += &format!(", turned on by `{}={}`", e.name, e.value);
                } else if let Some(a) = &q.enable_annotation {
                    q_text += &format!(", turned on by {}", code(&a.to_string()));
                }
                q_text
            }
        };
        out += &format!(
            "| {} | {} | {} | {ended} | {quit} |\n",
            v.name,
            names.join(", "),
            proof.join(" or ")
        );
    }
    check_fragment("README.md", "catalogue", &out);
}

/// The catalogue entry docs/webhook.md shows is one `--sidecar-catalogue` takes.
#[test]
fn the_documented_catalogue_entry_is_read_as_shown() {
    let page = read("docs/webhook.md");
    let section = &page[page.find("### Adding a vendor").expect("the section")..];
    let start = section.find("```yaml\n").expect("a YAML block") + 8;
    let yaml = &section[start..start + section[start..].find("```").unwrap()];
    let entries: serde_json::Value = serde_saphyr::from_str(yaml).expect("YAML");
    let c = sexton_inject::Catalogue::with_extra(&entries).expect("a catalogue entry");
    let acme = &c.vendors[0];
    assert_eq!(acme.name, "Acme Mesh");
    assert!(
        acme.quit
            .as_ref()
            .is_some_and(|q| q.urls_env.is_some() && q.enable_env.is_some())
    );
    assert!(acme.native_switch.is_some() && acme.startup.is_some());
}

// ---- generated fragments --------------------------------------------------------------

/// Compares the fragment NAME of FILE with `want`; under SEXTON_BLESS rewrites it.
fn check_fragment(file: &str, name: &str, want: &str) {
    let path = root().join(file);
    let text = read(file);
    let open = format!("<!-- generated:{name} ");
    let close = format!("<!-- /generated:{name} -->");
    let start = text
        .find(&open)
        .unwrap_or_else(|| panic!("{file} has no marker {open}...-->"));
    let body_start = start + text[start..].find("-->\n").expect("marker ends with -->") + 4;
    let end = text[body_start..]
        .find(&close)
        .map(|e| body_start + e)
        .unwrap_or_else(|| panic!("{file} has no marker {close}"));
    let have = &text[body_start..end];
    if have == want {
        return;
    }
    if std::env::var_os("SEXTON_BLESS").is_some() {
        let new = format!("{}{want}{}", &text[..body_start], &text[end..]);
        std::fs::write(&path, new).unwrap();
        return;
    }
    panic!(
        "{file}: the generated reference `{name}` is stale (- in the file, + generated):\n{}\n\
         rewrite it with: SEXTON_BLESS=1 cargo test --profile release-nolto --workspace --test docs",
        diff(have, want)
    );
}

/// A line diff (longest common subsequence), the lines that differ with - and +.
fn diff(a: &str, b: &str) -> String {
    let (a, b): (Vec<&str>, Vec<&str>) = (a.lines().collect(), b.lines().collect());
    let mut lcs = vec![vec![0usize; b.len() + 1]; a.len() + 1];
    for i in (0..a.len()).rev() {
        for j in (0..b.len()).rev() {
            lcs[i][j] = if a[i] == b[j] {
                lcs[i + 1][j + 1] + 1
            } else {
                lcs[i + 1][j].max(lcs[i][j + 1])
            };
        }
    }
    let (mut i, mut j, mut out) = (0, 0, String::new());
    while i < a.len() || j < b.len() {
        if i < a.len() && j < b.len() && a[i] == b[j] {
            (i, j) = (i + 1, j + 1);
        } else if j < b.len() && (i == a.len() || lcs[i][j + 1] >= lcs[i + 1][j]) {
            out.push_str(&format!("+{}\n", b[j]));
            j += 1;
        } else {
            out.push_str(&format!("-{}\n", a[i]));
            i += 1;
        }
    }
    out
}

// ---- the command line ------------------------------------------------------------------

fn help(path: &[String]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_kubectl-sexton"))
        .args(path)
        .arg("--help")
        .env_remove("KUBECONFIG")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "kubectl-sexton {path:?} --help failed"
    );
    String::from_utf8(out.stdout).unwrap()
}

/// The subcommands a help text lists (its `Commands:` section, and the top level's
/// `Server commands (...):` one), `help` left out.
fn subcommands(help: &str) -> Vec<String> {
    let section = |heading: fn(&str) -> bool| {
        help.lines()
            .skip_while(move |l| !heading(l))
            .skip(1)
            .take_while(|l| !l.trim().is_empty())
            .filter_map(|l| l.split_whitespace().next())
            .filter(|c| *c != "help")
            .map(str::to_string)
            .collect::<Vec<_>>()
    };
    let mut all = section(|l| l == "Commands:");
    all.extend(section(|l| l.starts_with("Server commands")));
    all
}

/// docs/cli.md holds `kubectl-sexton [COMMAND...] --help` of every command, as the binary
/// prints it.
#[test]
fn cli_reference_is_the_binarys_help() {
    let mut out = String::new();
    let mut todo = vec![vec![]];
    let mut seen = 0;
    while let Some(path) = todo.pop() {
        let text = help(&path);
        let name = std::iter::once("kubectl sexton".to_string())
            .chain(path.iter().cloned())
            .collect::<Vec<_>>()
            .join(" ");
        out.push_str(&format!("## `{name}`\n\n```text\n{text}```\n\n"));
        seen += 1;
        for c in subcommands(&text).into_iter().rev() {
            let mut p = path.clone();
            p.push(c);
            todo.push(p);
        }
    }
    assert!(seen > 8, "only {seen} commands found: did the help change?");
    check_fragment("docs/cli.md", "cli", &out);
}

// ---- metrics ---------------------------------------------------------------------------

/// One metric as its source registers it.
struct Metric {
    name: String,
    kind: &'static str,
    labels: Vec<String>,
    help: String,
}

/// The string literals and the registered value of each `register(` call of a metrics
/// source, with the metric's type and labels read from the value's declaration.
fn metrics_of(source: &str) -> Vec<Metric> {
    let prefix = source
        .split("Registry::with_prefix(\"")
        .nth(1)
        .and_then(|s| s.split('"').next())
        .expect("a Registry::with_prefix");
    let mut metrics = vec![];
    for call in source.split(".register(").skip(1) {
        let mut strings = call.split('"');
        let (name, help) = (strings.nth(1).unwrap(), strings.nth(1).unwrap());
        let after = call.splitn(5, '"').nth(4).unwrap();
        let value = after
            .trim_start_matches([',', ' ', '\n'])
            .split(".clone()")
            .next()
            .unwrap();
        let field = value.rsplit('.').next().unwrap().trim();
        let decl = source
            .lines()
            .find(|l| {
                let l = l.trim();
                l.starts_with(&format!("pub {field}: "))
                    || l.starts_with(&format!("let {field} = "))
            })
            .unwrap_or_else(|| panic!("no declaration of the metric value {field}"));
        let kind = ["Counter", "Gauge", "Histogram"]
            .into_iter()
            .find(|k| decl.contains(k))
            .unwrap_or_else(|| panic!("{decl}: which kind of metric?"));
        let labels = decl
            .split("Family<")
            .nth(1)
            .or_else(|| decl.split("Family::<").nth(1))
            .map(|f| label_names(source, f.split(',').next().unwrap().trim()))
            .unwrap_or_default();
        let suffix = if kind == "Counter" { "_total" } else { "" };
        metrics.push(Metric {
            name: format!("{prefix}_{name}{suffix}"),
            kind: match kind {
                "Counter" => "counter",
                "Gauge" => "gauge",
                _ => "histogram",
            },
            labels,
            help: help.to_string(),
        });
    }
    metrics
}

/// The fields of the label set struct NAME.
fn label_names(source: &str, name: &str) -> Vec<String> {
    let body = source
        .split(&format!("struct {name} {{"))
        .nth(1)
        .unwrap_or_else(|| panic!("no struct {name}"));
    body.split('}')
        .next()
        .unwrap()
        .lines()
        .filter_map(|l| l.trim().strip_prefix("pub "))
        .filter_map(|l| l.split(':').next())
        .map(str::to_string)
        .collect()
}

/// docs/metrics.md lists every metric the controllers and the webhook register.
#[test]
fn metrics_reference_is_the_code() {
    let mut out = String::from("| metric | type | labels | help |\n|---|---|---|---|\n");
    let mut n = 0;
    for file in [
        "crates/kubectl-sexton/src/controller/metrics.rs",
        "crates/kubectl-sexton/src/webhook/metrics.rs",
    ] {
        for m in metrics_of(&read(file)) {
            let labels: Vec<String> = m.labels.iter().map(|l| format!("`{l}`")).collect();
            out.push_str(&format!(
                "| `{}` | {} | {} | {} |\n",
                m.name,
                m.kind,
                labels.join(", "),
                m.help.replace('|', "\\|")
            ));
            n += 1;
        }
    }
    assert!(n >= 14, "only {n} metrics found: did the sources change?");
    check_fragment("docs/metrics.md", "metrics", &out);
}

// ---- the chart's values ---------------------------------------------------------------

/// A key of values.yaml: its dotted path, its value as written (leaves), its comment.
struct Value {
    key: String,
    value: Option<String>,
    doc: String,
}

/// Reads the chart's values.yaml: block mappings by indentation, flow values, block
/// sequences (written back in flow style), comments above a key or after its value. It
/// knows only what the chart's file uses, and fails on anything else rather than guess.
fn chart_values(yaml: &str) -> Vec<Value> {
    let lines: Vec<&str> = yaml.lines().collect();
    let indent = |l: &str| l.len() - l.trim_start().len();
    let mut out = vec![];
    let mut stack: Vec<(usize, String)> = vec![];
    let mut doc: Vec<String> = vec![];
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i];
        let t = line.trim();
        i += 1;
        if t.is_empty() {
            doc.clear();
            continue;
        }
        if let Some(c) = t.strip_prefix('#') {
            doc.push(c.trim().to_string());
            continue;
        }
        let ind = indent(line);
        let (key, rest) = t
            .split_once(':')
            .unwrap_or_else(|| panic!("values.yaml line {i}: not `key: value`: {t:?}"));
        assert!(
            !key.starts_with('-'),
            "values.yaml line {i}: a sequence item where a key was expected"
        );
        while stack.last().is_some_and(|(d, _)| *d >= ind) {
            stack.pop();
        }
        let path: Vec<&str> = stack.iter().map(|(_, k)| k.as_str()).collect();
        let full = if path.is_empty() {
            key.to_string()
        } else {
            format!("{}.{key}", path.join("."))
        };
        let (value, inline) = match rest.split_once(" #") {
            Some((v, c)) => (v.trim(), Some(c.trim().to_string())),
            None => (rest.trim(), None),
        };
        doc.extend(inline);
        let text = std::mem::take(&mut doc).join(" ");
        if !value.is_empty() {
            out.push(Value {
                key: full,
                value: Some(value.to_string()),
                doc: text,
            });
            continue;
        }
        // A block sequence under the key is a leaf, written in flow style.
        let items: Vec<&str> = lines[i..]
            .iter()
            .take_while(|l| l.trim().starts_with("- ") && indent(l) > ind)
            .map(|l| l.trim()[2..].trim())
            .collect();
        if !items.is_empty() {
            i += items.len();
            out.push(Value {
                key: full,
                value: Some(format!("[{}]", items.join(", "))),
                doc: text,
            });
            continue;
        }
        out.push(Value {
            key: full.clone(),
            value: None,
            doc: text,
        });
        stack.push((ind, key.to_string()));
    }
    out
}

fn value_type(v: &str) -> &'static str {
    match v {
        "true" | "false" => "bool",
        _ if v.starts_with('[') => "list",
        _ if v.starts_with('{') => "object",
        _ if v.starts_with('"') => "string",
        _ if v.parse::<i64>().is_ok() => "int",
        _ => "string",
    }
}

/// charts/sexton/README.md has every value of values.yaml, its type, default and comment.
#[test]
fn chart_values_table_is_values_yaml() {
    let values = chart_values(&read("charts/sexton/values.yaml"));
    let mut out = String::from("| value | type | default | description |\n|---|---|---|---|\n");
    let cell = |s: &str| s.replace('|', "\\|");
    for v in &values {
        let (ty, default) = match &v.value {
            Some(val) => (value_type(val), format!("`{}`", cell(val))),
            None if v.doc.is_empty() => continue,
            None => ("object", String::new()),
        };
        out.push_str(&format!(
            "| `{}` | {ty} | {default} | {} |\n",
            v.key,
            cell(&v.doc)
        ));
    }
    assert!(values.len() > 60, "only {} values read", values.len());
    for key in ["image.registry", "webhook.timeoutSeconds", "crds.keep"] {
        assert!(values.iter().any(|v| v.key == key), "{key} not read");
    }
    check_fragment("charts/sexton/README.md", "values", &out);
}

// ---- docs/architecture.md --------------------------------------------------------------

/// Every `file.rs`, `Type::function` and `module::function` that docs/architecture.md
/// names in backticks exists in the crates' sources, so the death path it describes is
/// the code's.
#[test]
fn architecture_names_only_what_exists() {
    let doc = read("docs/architecture.md");
    let mut files = vec![];
    let mut sources = String::new();
    let mut dirs = vec![root().join("crates")];
    while let Some(d) = dirs.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() && !p.ends_with("target") {
                dirs.push(p);
            } else if p.extension().is_some_and(|x| x == "rs") {
                files.push(p.file_name().unwrap().to_string_lossy().into_owned());
                sources.push_str(&std::fs::read_to_string(&p).unwrap());
            }
        }
    }
    let mut checked = 0;
    for quoted in doc.split('`').skip(1).step_by(2) {
        let quoted = quoted.split(['(', ' ', '{']).next().unwrap();
        if let Some(file) = quoted.strip_suffix(".rs") {
            let name = file.rsplit('/').next().unwrap();
            assert!(
                files.iter().any(|f| f == &format!("{name}.rs")),
                "docs/architecture.md names {quoted}, which does not exist"
            );
            checked += 1;
        } else if let Some((owner, item)) = quoted.rsplit_once("::") {
            let owner = owner.rsplit("::").next().unwrap();
            let is_ident =
                |s: &str| !s.is_empty() && s.chars().all(|c| c.is_alphanumeric() || c == '_');
            if !is_ident(owner) || !is_ident(item) {
                continue;
            }
            let owner_exists = files.iter().any(|f| f == &format!("{owner}.rs"))
                || sources.contains(&format!("struct {owner}"))
                || sources.contains(&format!("enum {owner}"))
                || sources.contains(&format!("mod {owner}"));
            let item_exists = sources.contains(&format!("fn {item}("))
                || sources.contains(&format!("fn {item}<"))
                || sources.contains(&format!("    {item}("))
                || sources.contains(&format!("    {item} {{"))
                || sources.contains(&format!("    {item},"));
            assert!(
                owner_exists && item_exists,
                "docs/architecture.md names {quoted}, which does not exist"
            );
            checked += 1;
        }
    }
    assert!(
        checked > 30,
        "only {checked} names checked: did the format change?"
    );
}

// ---- the measured figures ----------------------------------------------------------------

#[path = "docs/figures.rs"]
mod figures;
use figures::{mb_of_bytes, mb_of_kb, ms_of_us, table};

/// The figures the pages quote, each from its section of BENCHMARKS.md (docs/figures.rs).
struct Figures {
    reaction_p99: (String, String), // (sexton, kubexit)
    memory: String,                 // private / RSS, sexton's builds with the API client
    memory_slim: String,
    memory_kubexit: String,
    churn_sexton: String,
    churn_kubexit: String,
    completion: Vec<(&'static str, String)>, // (strategy, median)
    webhook_p99_500: (String, String, String), // injected, unchanged, Go floor injected
    webhook_p99_1000: String,
    webhook_soak: (f64, String), // % of a core, max RSS (MB), over the long run at 500/s
    controller: Controller,
    sizes: Sizes,
}

struct Controller {
    rss_idle_10k: f64,
    rss_max_10k: f64,
    kruise_rss: (f64, f64),
    rss_1k: f64,
    p99_10k: String,
    kruise_p99_10k: String,
    p99_1k: (f64, f64),
    queue_p99: (f64, f64), // s, sexton and OpenKruise, at 100 per second
    cpu_per_transition: (f64, f64),
    ejob_rss: f64,
    ejob_secs: f64,
}

struct Sizes {
    stamp: (String, String),
    sexton: (f64, f64), // amd64, arm64
    slim: (f64, f64),
    kubexit: f64,
}

fn figures() -> Figures {
    let doc = read("BENCHMARKS.md");
    let rx = table(&doc, "### Reaction latency");
    let idle = table(&doc, "### Wrapper overhead");
    let private = |col| mb_of_kb(idle.num(&["private memory"], col));
    let rss = |col| idle.num(&["steady RSS"], col);
    let mut with_api = vec![rss("sexton (`auto`)")];
    if idle.has_column("sexton musl") {
        with_api.push(rss("sexton musl"));
    }
    let (lo, hi) = with_api
        .iter()
        .fold((f64::MAX, 0f64), |(l, h), v| (l.min(*v), h.max(*v)));
    let range = if mb_of_kb(lo) == mb_of_kb(hi) {
        mb_of_kb(lo)
    } else {
        format!("{}–{}", mb_of_kb(lo), mb_of_kb(hi))
    };
    let wakeups = table(&doc, "**Wrapper wake-ups");
    let churn_cpu = table(&doc, "**Wrapper CPU, % of one core");
    let churn = |col| {
        let w = wakeups.num(&["5,000 (create)"], col);
        if w == 0.0 {
            "no wake-up".to_string()
        } else {
            format!("{:.0} % of a core", churn_cpu.num(&["5,000 (create)"], col))
        }
    };
    let done = table(&doc, "<!-- completion:start -->");
    let completion = [
        ("`native`", "native sidecar (`inject"),
        ("`native-wrap`", "native sidecar, also sexton-wrapped"),
        ("`wrap`", "sexton-wrapped"),
        ("`controller`", "controller image swap"),
        ("kubexit", "kubexit-wrapped"),
    ]
    .into_iter()
    .map(|(name, row)| (name, format!("{} s", done.cell(&[row], "median"))))
    .collect();
    let p99 = table(&doc, "**Latency p99 (µs)**");
    let hook = |rate, case, col| ms_of_us(p99.num(&[rate, case], col));
    let soak = table(&doc, "run at 500 requests/s**");
    let big = table(&doc, "**10,000 running pods, 100 per second**");
    let swap = table(&doc, "**10,000 running pods, 20 per second**");
    let small = table(&doc, "**1,000 running pods, 10 per second**");
    let small20 = table(&doc, "**1,000 running pods, 20 per second**");
    let (sx, kr) = ("sexton", "OpenKruise");
    let ejob = table(&doc, "**EphemeralJob end to end**");
    let ships = table(&doc, "<!-- ships:start -->");
    let size = table(&doc, "### Size (bytes)");
    let shipped = |row| {
        (
            ships.num(&[row], "linux/amd64"),
            ships.num(&[row], "linux/arm64"),
        )
    };
    Figures {
        reaction_p99: (
            ms_of_us(rx.num(&["p99"], "sexton (default")),
            ms_of_us(rx.num(&["p99"], "kubexit")),
        ),
        memory: format!("{} MB / {range} MB", private("sexton (`auto`)")),
        memory_slim: format!(
            "{} / {} MB",
            private("sexton slim"),
            mb_of_kb(rss("sexton slim"))
        ),
        memory_kubexit: format!(
            "{} MB / {} MB",
            private("kubexit"),
            mb_of_kb(rss("kubexit"))
        ),
        churn_sexton: churn("sexton `auto`"),
        churn_kubexit: format!(
            "~{:.0} % of a core",
            churn_cpu.num(&["5,000 (create)"], "kubexit")
        ),
        completion,
        webhook_p99_500: (
            hook("500", "marked", "sexton"),
            hook("500", "no sidecar", "sexton"),
            hook("500", "marked", "Go floor"),
        ),
        webhook_p99_1000: hook("1,000", "marked", "sexton"),
        webhook_soak: (
            soak.num(&["webhook CPU"], "sexton"),
            mb_of_kb(soak.last_num(&["RSS min / max"], "sexton")),
        ),
        controller: Controller {
            rss_idle_10k: big.num(&["RSS idle"], sx),
            rss_max_10k: big.num(&["RSS max in the window"], sx),
            kruise_rss: (
                big.num(&["RSS idle"], kr),
                big.num(&["RSS max in the window"], kr),
            ),
            rss_1k: small.num(&["RSS idle"], sx),
            p99_10k: swap.cell(&["reaction p99"], sx).to_string(),
            kruise_p99_10k: swap.cell(&["reaction p99"], kr).to_string(),
            p99_1k: (
                small.num(&["reaction p99"], sx),
                small20.num(&["reaction p99"], sx),
            ),
            queue_p99: (
                big.num(&["reaction p99"], sx) / 1000.0,
                big.num(&["reaction p99"], kr) / 1000.0,
            ),
            cpu_per_transition: (
                big.num(&["CPU per transition"], sx),
                big.num(&["CPU per transition"], kr),
            ),
            ejob_rss: ejob.last_num(&["controller CPU"], "10,000"),
            ejob_secs: ejob.num(&["every target"], "10,000"),
        },
        sizes: Sizes {
            stamp: figures::stamp(&doc, "<!-- ships:start -->"),
            sexton: shipped("`sexton` (with"),
            slim: shipped("`sexton` slim"),
            kubexit: size.num(&["static binary"], "kubexit"),
        },
    }
}

/// docs/benchmarks.md's table of the main figures.
#[test]
fn benchmarks_page_quotes_benchmarks_md() {
    let f = figures();
    let c = &f.controller;
    let completion: Vec<String> = f
        .completion
        .iter()
        .map(|(name, median)| format!("{name} {median}"))
        .collect();
    let rows = [
        (
            "the supervisor's reaction to a main's exit (the sidecar's child signalled), p99",
            format!("{} (kubexit {})", f.reaction_p99.0, f.reaction_p99.1),
            "Reaction latency",
        ),
        (
            "its memory, private / RSS",
            format!("{} (kubexit {})", f.memory, f.memory_kubexit),
            "Wrapper overhead",
        ),
        (
            "CPU at 5 000 unrelated files/s written into the graveyard",
            format!("{} (kubexit {})", f.churn_sexton, f.churn_kubexit),
            "CPU under graveyard churn",
        ),
        (
            "main's exit → pod `Succeeded` on a real node, median",
            completion.join(", "),
            "Time to Job completion on a real node",
        ),
        (
            "admission webhook, p99 at 500 reviews/s (injection)",
            format!(
                "{} (the Go floor {})",
                f.webhook_p99_500.0, f.webhook_p99_500.2
            ),
            "Admission webhook: latency under load",
        ),
        (
            "controllers at 10 000 running pods: RSS, swap reaction p99",
            format!(
                "{:.0}–{:.0} MB (OpenKruise {:.0}–{:.0} MB), {} ms",
                c.rss_idle_10k, c.rss_max_10k, c.kruise_rss.0, c.kruise_rss.1, c.p99_10k
            ),
            "Controllers at scale",
        ),
    ];
    let mut out = String::from("| what | measured | section of BENCHMARKS.md |\n|---|---|---|\n");
    for (what, measured, section) in rows {
        out.push_str(&format!("| {what} | {measured} | {section} |\n"));
    }
    check_fragment("docs/benchmarks.md", "figures", &out);
}

/// The sizes of the in-pod binary, in docs/introduction.md.
#[test]
fn introduction_sizes_are_what_ships() {
    let s = figures().sizes;
    let out = format!(
        "The in-pod binary, as `scripts/images.sh` built it at `{}` on {} (static glibc,\n\
         stripped; BENCHMARKS.md, \"What ships\"): {} MB for linux/amd64 and {} MB for\n\
         linux/arm64 with the Kubernetes API client (birth dependencies through the API), {} and\n\
         {} MB without it (the `-slim` tag).\n",
        s.stamp.0,
        s.stamp.1,
        mb_of_bytes(s.sexton.0),
        mb_of_bytes(s.sexton.1),
        mb_of_bytes(s.slim.0),
        mb_of_bytes(s.slim.1)
    );
    check_fragment("docs/introduction.md", "sizes", &out);
}

/// docs/comparison.md's measured rows against kubexit.
#[test]
fn comparison_with_kubexit_quotes_benchmarks_md() {
    let f = figures();
    let out = format!(
        "| measured ([BENCHMARKS.md](https://github.com/sexton-dev/sexton/blob/main/BENCHMARKS.md)) | kubexit | sexton |\n\
         |---|---|---|\n\
         | 5 000 unrelated files/s written into the graveyard | {} | {} |\n\
         | reaction to a main's exit (p99) | {} | {} |\n\
         | wrapper memory: private / RSS | {} | {} (slim build: {}) |\n\
         | binary | {} MB static Go | {} MB static (slim, without the API client: {} MB); [what ships](introduction.md#what-ships) |\n",
        f.churn_kubexit,
        f.churn_sexton,
        f.reaction_p99.1,
        f.reaction_p99.0,
        f.memory_kubexit,
        f.memory,
        f.memory_slim,
        mb_of_bytes(f.sizes.kubexit),
        mb_of_bytes(f.sizes.sexton.0),
        mb_of_bytes(f.sizes.slim.0)
    );
    check_fragment("docs/comparison.md", "kubexit-figures", &out);
}

/// docs/strategies.md's completion times.
#[test]
fn strategies_completion_times_are_benchmarks_md() {
    let f = figures();
    let median = |name: &str| {
        &f.completion
            .iter()
            .find(|(n, _)| *n == name)
            .expect("a strategy of the table")
            .1
    };
    let out = format!(
        "Main's exit → pod `Succeeded`, median on a real node ([BENCHMARKS.md](https://github.com/sexton-dev/sexton/blob/main/BENCHMARKS.md),\n\
         \"Time to Job completion\"): `native` {}, `native-wrap` {}, `wrap` {}, `controller` {};\n\
         a kubexit-wrapped sidecar {}.\n",
        median("`native`"),
        median("`native-wrap`"),
        median("`wrap`"),
        median("`controller`"),
        median("kubexit")
    );
    check_fragment("docs/strategies.md", "completion", &out);
}

/// docs/webhook.md's latency.
#[test]
fn webhook_latency_is_benchmarks_md() {
    let f = figures();
    let (injected, unchanged, go) = &f.webhook_p99_500;
    let out = format!(
        "**Latency** ([`bench/webhook/run.sh`](https://github.com/sexton-dev/sexton/blob/main/bench/webhook/run.sh), \
         BENCHMARKS.md \"Admission webhook: latency under load\"; TLS, keep-alive, 2 vCPUs): p99 {injected} \
         at 500 reviews/s for an injection (a minimal Go webhook that returns the same patch: {go}), \
         {unchanged} for an unchanged Pod, {} at 1 000/s; {:.0} % of a core and {} MB RSS at most over the \
         long run at 500/s.\n",
        f.webhook_p99_1000, f.webhook_soak.0, f.webhook_soak.1
    );
    check_fragment("docs/webhook.md", "latency", &out);
}

/// docs/sidecar-terminator.md's figures at scale.
#[test]
fn sidecar_terminator_at_scale_is_benchmarks_md() {
    let c = figures().controller;
    let met = |ok: bool| if ok { "met" } else { "missed" };
    let p99: f64 = figures::number(&c.p99_10k).expect("a number");
    let out = format!(
        "Measured at scale (`bench/scale/run.sh`, BENCHMARKS.md \"Controllers at scale\", OpenKruise\n\
         v1.8.2 in the same run): at 10 000 running pods, RSS {:.0} MB idle and {:.0} MB at most (target\n\
         100 MB: {}; OpenKruise {:.0} / {:.0} MB), {:.0} MB while an EphemeralJob injected into all 10 000\n\
         pods (all in {:.0} s); at 1 000, {:.0} MB. Swap reaction at 10 000 pods and 20 transitions per\n\
         second: p99 {} ms (target 100 ms: {}; OpenKruise {} ms); at 1 000 pods {:.0}–{:.0} ms. At 1 % of\n\
         the pods per second (100 per second) the test API server is what limits a 2-core machine:\n\
         sexton p99 {:.0} ms, OpenKruise {:.0} ms in the recorded run, and where it falls behind\n\
         both measure only its queue; the controller used {:.1} ms of CPU per transition\n\
         (OpenKruise {:.1}).\n",
        c.rss_idle_10k,
        c.rss_max_10k,
        met(c.rss_max_10k <= 100.0),
        c.kruise_rss.0,
        c.kruise_rss.1,
        c.ejob_rss,
        c.ejob_secs,
        c.rss_1k,
        c.p99_10k,
        met(p99 <= 100.0),
        c.kruise_p99_10k,
        c.p99_1k.0.min(c.p99_1k.1),
        c.p99_1k.0.max(c.p99_1k.1),
        c.queue_p99.0 * 1000.0,
        c.queue_p99.1 * 1000.0,
        c.cpu_per_transition.0,
        c.cpu_per_transition.1
    );
    check_fragment("docs/sidecar-terminator.md", "at-scale", &out);
}
