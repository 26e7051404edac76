//! The built-in vendors (the sources are named in the catalogue's module doc).

use super::vendor::{
    DoneWhen, Endpoint, Env, Marker, On, Pattern, Quit, Registration, Reinvocation, Vendor,
};

fn p(s: &str) -> Pattern {
    Pattern(s.into())
}

fn ann(key: &str, value: Option<&str>) -> Marker {
    Marker::new(On::Annotation, key, value)
}

fn label(key: &str, value: Option<&str>) -> Marker {
    Marker::new(On::Label, key, value)
}

fn endpoint(port: u16, path: &str) -> Endpoint {
    Endpoint {
        port,
        path: path.into(),
    }
}

fn quit(port: u16, path: &str) -> Quit {
    Quit {
        endpoint: endpoint(port, path),
        port_annotation: None,
        enable_env: None,
        enable_annotation: None,
        unavailable_with: vec![],
        urls_env: None,
    }
}

fn registration(
    configurations: &[&str],
    reinvocation: Reinvocation,
    done: DoneWhen,
) -> Registration {
    Registration {
        configurations: configurations.iter().map(|c| p(c)).collect(),
        reinvocation,
        done_when: done,
    }
}

/// The built-in vendors (the module doc names the sources).
/// The built-in vendors.
pub fn builtin() -> Vec<Vendor> {
    use DoneWhen::*;
    use Reinvocation::*;
    vec![
        Vendor {
            name: "Istio".into(),
            containers: vec![p("istio-proxy")],
            markers: vec![ann("sidecar.istio.io/status", None)],
            // istio-validation replaces istio-init with Istio's CNI plugin
            init_containers: vec![p("istio-init"), p("istio-validation")],
            triggers: vec![label("sidecar.istio.io/inject", Some("true"))],
            // Istio's native mode gates the mains on the proxy's readiness the same way
            startup: Some(endpoint(15021, "/healthz/ready")),
            quit: Some(Quit {
                // not served when the status port is turned off
                unavailable_with: vec![ann("status.sidecar.istio.io/port", Some("0"))],
                ..quit(15020, "/quitquitquit")
            }),
            native_switch: Some(ann("sidecar.istio.io/nativeSidecar", Some("true"))),
            // (called again, it applies its template anew and merges its containers by name
            // into spec.containers: a moved proxy is added a second time)
            webhook: registration(
                &["istio-sidecar-injector*", "istio-revision-tag-*"],
                Never,
                NameInContainers,
            ),
            keep_in_containers: None,
        },
        Vendor {
            name: "Linkerd".into(),
            containers: vec![p("linkerd-proxy")],
            markers: vec![ann("linkerd.io/proxy-version", None)],
            // linkerd-network-validator with Linkerd's CNI plugin (name not verified)
            init_containers: vec![p("linkerd-init"), p("linkerd-network-validator")],
            triggers: vec![
                ann("linkerd.io/inject", Some("enabled")),
                ann("linkerd.io/inject", Some("ingress")),
            ],
            // (the proxy's postStart hook, linkerd-await, already holds the next container)
            startup: None,
            quit: Some(Quit {
                enable_env: Some(Env {
                    name: "LINKERD2_PROXY_SHUTDOWN_ENDPOINT_ENABLED".into(),
                    value: "true".into(),
                }),
                enable_annotation: Some(ann(
                    "config.linkerd.io/proxy-admin-shutdown",
                    Some("enabled"),
                )),
                ..quit(4191, "/shutdown")
            }),
            native_switch: Some(ann(
                "config.beta.linkerd.io/proxy-enable-native-sidecar",
                Some("true"),
            )),
            webhook: registration(
                &["linkerd-proxy-injector-webhook-config"],
                Never,
                NameInEitherList,
            ),
            keep_in_containers: None,
        },
        Vendor {
            name: "Vault Agent".into(),
            containers: vec![p("vault-agent")],
            markers: vec![ann(
                "vault.hashicorp.com/agent-inject-status",
                Some("injected"),
            )],
            init_containers: vec![p("vault-agent-init")],
            triggers: vec![ann("vault.hashicorp.com/agent-inject", Some("true"))],
            startup: None,
            quit: Some(Quit {
                port_annotation: Some("vault.hashicorp.com/agent-cache-listener-port".into()),
                enable_annotation: Some(ann("vault.hashicorp.com/agent-enable-quit", Some("true"))),
                ..quit(8200, "/agent/v1/quit")
            }),
            native_switch: None, // not released (vault-k8s#620, PR #659)
            webhook: registration(
                &["vault-agent-injector-cfg", "*-agent-injector-cfg"],
                Never,
                Marker,
            ),
            keep_in_containers: None,
        },
        Vendor {
            name: "Consul".into(),
            containers: vec![p("consul-dataplane")],
            markers: vec![
                ann(
                    "consul.hashicorp.com/connect-inject-status",
                    Some("injected"),
                ),
                label(
                    "consul.hashicorp.com/connect-inject-status",
                    Some("injected"),
                ),
            ],
            init_containers: vec![p("consul-connect-inject-init")],
            triggers: vec![ann("consul.hashicorp.com/connect-inject", Some("true"))],
            startup: None,
            quit: Some(Quit {
                port_annotation: Some(
                    "consul.hashicorp.com/sidecar-proxy-lifecycle-graceful-port".into(),
                ),
                ..quit(20600, "/graceful_shutdown")
            }),
            native_switch: None, // not released (consul-k8s#3919)
            webhook: registration(
                &["consul-connect-injector", "*-connect-injector"],
                Never,
                Marker,
            ),
            keep_in_containers: None,
        },
        Vendor {
            name: "Dapr".into(),
            containers: vec![p("daprd")],
            markers: vec![label("dapr.io/sidecar-injected", Some("true"))],
            init_containers: vec![],
            triggers: vec![ann("dapr.io/enabled", Some("true"))],
            startup: None,
            quit: Some(Quit {
                port_annotation: Some("dapr.io/http-port".into()),
                // the API then needs a token sexton does not have
                unavailable_with: vec![ann("dapr.io/api-token-secret", None)],
                ..quit(3500, "/v1.0/shutdown")
            }),
            native_switch: None, // not released (dapr/dapr#9422)
            // (its injector looks for `daprd` in spec.containers)
            webhook: registration(&["dapr-sidecar-injector"], Never, NameInContainers),
            keep_in_containers: None,
        },
        Vendor {
            name: "Datadog Agent".into(),
            containers: vec![p("datadog-agent-injected")],
            // the label that selects pods for the sidecar; the container's name is Datadog's own
            markers: vec![label("agent.datadoghq.com/sidecar", None)],
            init_containers: vec![],
            triggers: vec![],
            startup: None,
            quit: None,
            native_switch: None,
            webhook: registration(&["datadog-webhook"], IfNeeded, NameInContainers),
            keep_in_containers: None,
        },
        Vendor {
            name: "Cloud SQL Auth Proxy".into(),
            containers: vec![p("csql-*")],
            markers: vec![ann("cloudsql.cloud.google.com/*", None)],
            init_containers: vec![],
            triggers: vec![],
            startup: None,
            quit: Some(Quit {
                urls_env: Some("CSQL_PROXY_QUIT_URLS".into()),
                ..quit(9091, "/quitquitquit")
            }),
            native_switch: None, // the operator's own: AuthProxyWorkload spec.sidecarType
            // (mutating-core-webhook-configuration with the namePrefix of the operator's
            // config/default kustomization, which builds its release manifest)
            webhook: registration(
                &["*mutating-core-webhook-configuration"],
                Never,
                NameInContainers,
            ),
            keep_in_containers: Some(
                "the Cloud SQL operator's Pod controller looks for its proxy in spec.containers (and deletes a failing Pod that lacks it); its own native mode is the AuthProxyWorkload's spec.sidecarType".into(),
            ),
        },
        Vendor {
            name: "Kuma".into(),
            containers: vec![p("kuma-sidecar")],
            markers: vec![ann("kuma.io/sidecar-injected", Some("true"))],
            init_containers: vec![p("kuma-init")],
            triggers: vec![
                ann("kuma.io/sidecar-injection", Some("enabled")),
                label("kuma.io/sidecar-injection", Some("enabled")),
            ],
            startup: None,
            quit: None,
            native_switch: None, // control-plane wide only (experimental.sidecarContainers)
            webhook: registration(
                &["kuma-admission-mutating-webhook-configuration"],
                Never,
                // (its injector looks for `kuma-sidecar` in spec.containers)
                NameInContainers,
            ),
            keep_in_containers: None,
        },
        Vendor {
            name: "OpenTelemetry Collector".into(),
            containers: vec![p("otc-container")],
            markers: vec![label("sidecar.opentelemetry.io/injected", None)],
            init_containers: vec![],
            triggers: vec![ann("sidecar.opentelemetry.io/inject", None)],
            startup: None,
            quit: None,
            native_switch: None, // the operator injects natively itself on Kubernetes >= 1.29
            // (configuration name not verified: the chart's namePrefix changes it)
            webhook: registration(
                &["*opentelemetry-operator-mutation*"],
                Never,
                NameInContainers,
            ),
            keep_in_containers: None,
        },
    ]
}
