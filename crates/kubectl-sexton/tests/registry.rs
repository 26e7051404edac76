//! `kubectl-sexton inject --strategy wrap` as a real process against real registries
//! (scripts/registry.sh: the distribution registry, anonymous, with basic authentication,
//! and with bearer tokens from a token realm): containers that set no `command` run their
//! image's ENTRYPOINT and CMD, read through index, manifest and config, behind the
//! supervisor. A lookup that fails refuses the resource (exit 1), which is written out
//! unchanged, with the image, the reason and the fix on stderr; every failure is bounded.

use std::net::TcpListener;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use testbed::{Scratch, registry};

const KUBECTL_SEXTON: &str = env!("CARGO_BIN_EXE_kubectl-sexton");
const SEXTON: &str = "/sexton/sexton";

/// A Job whose two containers set no command: `main`, and the sidecar `proxy`.
fn job(main: &str, proxy: &str) -> String {
    format!(
        "apiVersion: batch/v1
kind: Job
metadata: {{name: j}}
spec:
  template:
    spec:
      restartPolicy: Never
      containers:
        - {{name: main, image: '{main}'}}
        - {{name: proxy, image: '{proxy}'}}
"
    )
}

struct Run {
    code: i32,
    docs: Vec<Value>,
    stderr: String,
    took: Duration,
}

impl Run {
    /// A container of the (one) Job's pod template, by name.
    fn container(&self, name: &str) -> &Value {
        self.docs[0]["spec"]["template"]["spec"]["containers"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["name"] == name)
            .unwrap_or_else(|| panic!("no container {name}: {:?}", self.docs))
    }

    /// `command` and `args` of a container.
    fn process(&self, name: &str) -> (Value, Value) {
        let c = self.container(name);
        (c["command"].clone(), c["args"].clone())
    }
}

/// `kubectl-sexton inject --strategy wrap --sidecar proxy ARGS -f MANIFEST`, with
/// `DOCKER_CONFIG` at `docker_config` (a directory of the test's: the developer's own
/// credentials never count); bounded by testbed's wait.
fn inject(s: &Scratch, manifest: &str, args: &[&str], docker_config: &Path) -> Run {
    let file = s.path("job.yaml");
    std::fs::write(&file, manifest).unwrap();
    let mut c = Command::new(KUBECTL_SEXTON);
    c.args(["inject", "--strategy", "wrap", "--sidecar", "proxy"])
        .args(args)
        .arg("-f")
        .arg(&file)
        .env("DOCKER_CONFIG", docker_config);
    let start = Instant::now();
    let mut p = s.spawn_host("inject", c);
    let code = p.wait();
    let took = start.elapsed();
    let stdout = p.stdout();
    Run {
        code,
        docs: serde_saphyr::from_str_multiple(&stdout).unwrap_or_default(),
        stderr: p.logs(),
        took,
    }
}

/// The process of `sexton-test/app:1` and `sexton-test/side:1` behind the supervisor
/// (scripts/registry.sh builds them): ENTRYPOINT + CMD, and CMD alone whose `$` is doubled
/// so that the kubelet passes it on unexpanded.
fn assert_app_and_side(run: &Run) {
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(
        run.process("main"),
        (
            json!([SEXTON, "--", "/bin/app", "--serve"]),
            json!(["--port", "8080"])
        )
    );
    assert_eq!(
        run.process("proxy"),
        (json!([SEXTON, "--"]), json!(["proxy", "--home=$$HOME"]))
    );
}

/// Writes a docker config.json into `dir` and returns `dir`.
fn docker_config<'a>(dir: &'a Path, config: &Value) -> &'a Path {
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(dir.join("config.json"), config.to_string()).unwrap();
    dir
}

#[test]
fn anonymous_registry_tags_and_digests() {
    let r = registry();
    let s = Scratch::new("registry-anon");
    let none = s.path("no-docker-config");
    let insecure = ["--insecure-registry", r.anonymous.as_str()];
    let (app, side) = (
        format!("{}/sexton-test/app:1", r.anonymous),
        format!("{}/sexton-test/side:1", r.anonymous),
    );
    let run = inject(&s, &job(&app, &side), &insecure, &none);
    assert_app_and_side(&run);
    eprintln!("anonymous: two images looked up in {:?}", run.took);
    // by digest, and by tag and digest (the digest decides)
    let by_digest = format!("{}/sexton-test/app@{}", r.anonymous, r.app_digest);
    let both = format!("{}/sexton-test/app:nope@{}", r.anonymous, r.app_digest);
    for main in [by_digest, both] {
        let run = inject(&s, &job(&main, &side), &insecure, &none);
        assert_app_and_side(&run);
    }
    // an unknown tag: refused (not written), the image and the reason named
    let unknown = format!("{}/sexton-test/app:nope", r.anonymous);
    let manifest = job(&unknown, &side);
    let run = inject(&s, &manifest, &insecure, &none);
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert!(
        run.docs.is_empty(),
        "a refused resource is not written: {:?}",
        run.docs
    );
    let want = format!(
        "container \"main\" sets no command, and the ENTRYPOINT of image \"{unknown}\" cannot be read (manifest unknown: no tag nope in sexton-test/app on {}): set `command` on the container",
        r.anonymous
    );
    assert!(run.stderr.contains(&want), "{}", run.stderr);
    // a registry over plain HTTP, without --insecure-registry: TLS fails, the flag is named
    let run = inject(&s, &job(&app, &side), &[], &none);
    assert_eq!(run.code, 1, "{}", run.stderr);
    let hint = format!(
        "; if it serves plain HTTP: --insecure-registry {}",
        r.anonymous
    );
    assert!(
        run.stderr
            .contains(&format!("(TLS with {} failed (", r.anonymous))
            && run.stderr.contains(&hint),
        "{}",
        run.stderr
    );
}

#[test]
fn multi_platform_index_gives_the_platform_s_image() {
    let r = registry();
    let s = Scratch::new("registry-platform");
    let none = s.path("no-docker-config");
    let multi = format!("{}/sexton-test/multi:1", r.anonymous);
    let manifest = job(&multi, &multi);
    let cmd_of = |platform: Option<&str>| {
        let mut args = vec!["--insecure-registry", r.anonymous.as_str()];
        if let Some(p) = platform {
            args.extend(["--platform", p]);
        }
        let run = inject(&s, &manifest, &args, &none);
        assert_eq!(run.code, 0, "{platform:?}: {}", run.stderr);
        assert_eq!(run.process("main").0, json!([SEXTON, "--"]));
        run.process("main").1
    };
    assert_eq!(cmd_of(None), json!(["amd64"]), "the default is linux/amd64");
    assert_eq!(cmd_of(Some("linux/amd64")), json!(["amd64"]));
    assert_eq!(cmd_of(Some("linux/arm64")), json!(["arm64"]));
    assert_eq!(cmd_of(Some("linux/arm64/v8")), json!(["arm64"]));
    // a platform the index lacks: refused, naming those it has
    let run = inject(
        &s,
        &manifest,
        &[
            "--insecure-registry",
            r.anonymous.as_str(),
            "--platform",
            "linux/s390x",
        ],
        &none,
    );
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert!(
        run.docs.is_empty(),
        "a refused resource is not written: {:?}",
        run.docs
    );
    assert!(
        run.stderr.contains(
            "(no linux/s390x image in the index (platforms: linux/amd64, linux/arm64; see --platform))"
        ),
        "{}",
        run.stderr
    );
}

/// Basic authentication and bearer tokens, with the credentials of a docker config.json (the
/// default file of `$DOCKER_CONFIG`, and `--registry-config`); without them, refused.
#[test]
fn registries_that_ask_for_credentials() {
    let r = registry();
    let s = Scratch::new("registry-auth");
    let none = s.path("no-docker-config");
    let auth = |password: &str| {
        use base64::Engine;
        base64::engine::general_purpose::STANDARD.encode(format!("{}:{password}", r.user))
    };
    for reg in [&r.basic, &r.token] {
        let (app, side) = (
            format!("{reg}/sexton-test/app:1"),
            format!("{reg}/sexton-test/side:1"),
        );
        let manifest = job(&app, &side);
        let insecure = ["--insecure-registry", reg.as_str()];
        // `auth` in $DOCKER_CONFIG/config.json, keyed as `docker login` writes it
        let dir = s.path(&format!("docker-{}", reg.replace(':', "-")));
        let config = json!({"auths": {format!("http://{reg}"): {"auth": auth(&r.password)}}});
        let run = inject(&s, &manifest, &insecure, docker_config(&dir, &config));
        assert_app_and_side(&run);
        eprintln!("{reg}: two images looked up in {:?}", run.took);
        // `username` and `password` in the file of --registry-config
        let file = s.path("explicit.json");
        let config = json!({"auths": {reg: {"username": r.user, "password": r.password}}});
        std::fs::write(&file, config.to_string()).unwrap();
        let mut args = insecure.to_vec();
        args.extend(["--registry-config", file.to_str().unwrap()]);
        assert_app_and_side(&inject(&s, &manifest, &args, &none));
        // no credentials: refused (not written), the image and the fix named
        let run = inject(&s, &manifest, &insecure, &none);
        assert_eq!(run.code, 1, "{}", run.stderr);
        assert!(
            run.docs.is_empty(),
            "a refused resource is not written: {:?}",
            run.docs
        );
        let want = format!(
            "the ENTRYPOINT of image \"{app}\" cannot be read (401 unauthorized: set credentials for {reg} in --registry-config): set `command` on the container"
        );
        assert!(run.stderr.contains(&want), "{}", run.stderr);
        // wrong ones: said to be refused
        let config = json!({"auths": {reg: {"auth": auth("wrong")}}});
        let run = inject(&s, &manifest, &insecure, docker_config(&dir, &config));
        assert_eq!(run.code, 1, "{}", run.stderr);
        let want = format!(
            "(401 unauthorized: the credentials for {reg} in {} are refused: check them)",
            dir.join("config.json").display()
        );
        assert!(run.stderr.contains(&want), "{}", run.stderr);
        // a credential helper is named, not run
        let config = json!({"credHelpers": {reg: "secretservice"}});
        let run = inject(&s, &manifest, &insecure, docker_config(&dir, &config));
        assert_eq!(run.code, 1, "{}", run.stderr);
        assert!(
            run.stderr
                .contains("docker-credential-secretservice, which is not run"),
            "{}",
            run.stderr
        );
    }
    // a --registry-config that cannot be read: every lookup says so
    let app = format!("{}/sexton-test/app:1", r.anonymous);
    let run = inject(
        &s,
        &job(&app, &app),
        &[
            "--insecure-registry",
            r.anonymous.as_str(),
            "--registry-config",
            "/no/such.json",
        ],
        &none,
    );
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert!(
        run.stderr
            .contains("(cannot read /no/such.json (--registry-config): No such file"),
        "{}",
        run.stderr
    );
}

/// A registry that is down, and one that accepts connections but never answers: refused
/// within the bound, naming the registry.
#[test]
fn unreachable_registries_are_refused_in_bounded_time() {
    let s = Scratch::new("registry-down");
    let none = s.path("no-docker-config");
    // a port nobody listens on (taken, then released)
    let down = {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().to_string()
    };
    let app = format!("{down}/sexton-test/app:1");
    let run = inject(
        &s,
        &job(&app, &app),
        &["--insecure-registry", down.as_str()],
        &none,
    );
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert!(
        run.stderr
            .contains(&format!("(cannot connect to {down}: connection refused)")),
        "{}",
        run.stderr
    );
    assert!(run.took < Duration::from_secs(5), "{:?}", run.took);
    eprintln!("down: refused in {:?}", run.took);
    // the kernel completes connections to a listener nobody accepts on, so the request is
    // sent and no answer comes: the lookup's bound ends it
    let silent = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = silent.local_addr().unwrap().to_string();
    let app = format!("{addr}/sexton-test/app:1");
    let args = [
        "--insecure-registry",
        addr.as_str(),
        "--registry-timeout",
        "1s",
    ];
    let run = inject(&s, &job(&app, &app), &args, &none);
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert!(
        run.stderr.contains(&format!(
            "(no answer from {addr} within 1s (--registry-timeout))"
        )),
        "{}",
        run.stderr
    );
    assert!(
        run.took >= Duration::from_secs(1) && run.took < Duration::from_secs(5),
        "{:?}",
        run.took
    );
    eprintln!("silent: refused in {:?}", run.took);
    drop(silent);
}

#[test]
fn bad_registry_flags_are_usage_errors() {
    let s = Scratch::new("registry-flags");
    let none = s.path("no-docker-config");
    for (args, flag) in [
        (["--platform", "linux"], "--platform"),
        (["--platform", "linux/amd64/v1/x"], "--platform"),
        (["--registry-timeout", "0s"], "--registry-timeout"),
        (["--registry-timeout", "soon"], "--registry-timeout"),
    ] {
        let run = inject(&s, &job("a:1", "b:1"), &args, &none);
        assert_eq!(run.code, 2, "{args:?}: {}", run.stderr);
        assert!(run.docs.is_empty(), "{args:?}");
        assert!(run.stderr.contains(flag), "{args:?}: {}", run.stderr);
    }
}
