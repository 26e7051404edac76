package main

// Dapr: the sidecar injector.
//
// Research notes (§1, Dapr): sidecar `daprd` in spec.containers, no init container; marker
// label `dapr.io/sidecar-injected: "true"` (and `dapr.io/app-id`); trigger annotation
// `dapr.io/enabled`; configuration `dapr-sidecar-injector`, webhook
// `sidecar-injector.dapr.io`, no reinvocationPolicy (Never); quit: POST
// localhost:<dapr.io/http-port, 3500>/v1.0/shutdown answers 204 (the header
// Dapr-Force-Shutdown forces the exit); a `dapr-api-token` is needed when
// `dapr.io/api-token-secret` is set; no native mode released (issue #9422).
// Sources: https://docs.dapr.io/operations/hosting/kubernetes/kubernetes-job/ ;
// https://docs.dapr.io/reference/api/shutdown_api/ ; dapr/dapr
// charts/dapr/charts/dapr_sidecar_injector/templates/dapr_sidecar_injector_webhook_config.yaml,
// pkg/injector (SidecarInjectedLabel; patcher: NeedsPatching, podContainsSidecarContainer).
//
// Modelled here:
//   - Injected with `dapr.io/enabled: "true"`. Already injected: **a container named daprd in
//     spec.containers**, not the label (dapr/dapr pkg/injector/patcher, NeedsPatching →
//     podContainsSidecarContainer, found in the stored sources beyond the research notes):
//     like Datadog, a daprd moved to initContainers would be injected again if Dapr were
//     re-invoked (it is not by default).
//   - daprd at the end of spec.containers; every other container gets DAPR_HTTP_PORT and
//     DAPR_GRPC_PORT; readiness and liveness GET :3501/v1.0/healthz.
//   - The HTTP port (and so the quit port) from `dapr.io/http-port` as the research says
//     (the name of that annotation is not verified further).
//   - failurePolicy Ignore (guess); daprd's arguments, image and version are guesses.

import (
	"fmt"
	"strconv"
)

var dapr = vendor{
	inject: daprInject,
	hook: hook{
		Configuration:  "dapr-sidecar-injector",
		Webhook:        "sidecar-injector.dapr.io",
		FailurePolicy:  "Ignore",
		Reinvocation:   "Never",
		Operations:     []string{"CREATE"},
		TimeoutSeconds: 10,
	},
}

func daprInject(p *Pod, o options) (string, error) {
	if enabled, _ := parseBool(p.Annotation("dapr.io/enabled")); !enabled {
		return "dapr.io/enabled is not true", nil
	}
	if p.Has("containers", "daprd") {
		return "a container daprd in spec.containers", nil
	}
	httpPort := 3500
	if v, err := strconv.Atoi(p.Annotation("dapr.io/http-port")); err == nil {
		httpPort = v
	}
	if o.quitPort != 0 {
		httpPort = o.quitPort
	}
	appID := p.Annotation("dapr.io/app-id")
	if appID == "" {
		appID = p.Name()
	}
	for _, c := range p.List("containers") {
		SetEnv(c, "DAPR_HTTP_PORT", strconv.Itoa(httpPort))
		SetEnv(c, "DAPR_GRPC_PORT", "50001")
	}
	p.AddVolume(template(`{"name": "dapr-identity-token", "projected": {"sources": [{"serviceAccountToken":
		{"path": "token", "expirationSeconds": 7200, "audience": "spiffe://cluster.local/ns/dapr-system/dapr-sentry"}}]}}`))
	p.Insert("containers", -1, daprd(appID, httpPort))
	p.SetLabel("dapr.io/sidecar-injected", "true")
	p.SetLabel("dapr.io/app-id", appID)
	p.SetLabel("dapr.io/metrics-enabled", "true")
	p.QuitPort, p.QuitPath = httpPort, "/v1.0/shutdown"
	return "", nil
}

func daprd(appID string, httpPort int) obj {
	return template(fmt.Sprintf(`{
		"name": "daprd",
		"image": "ghcr.io/dapr/daprd:1.16.2",
		"imagePullPolicy": "IfNotPresent",
		"command": ["/daprd"],
		"args": ["--mode", "kubernetes", "--dapr-http-port", "%[2]d", "--dapr-grpc-port", "50001",
			"--dapr-internal-grpc-port", "50002", "--dapr-listen-addresses", "[::1],127.0.0.1",
			"--dapr-public-port", "3501", "--app-id", %[1]q,
			"--control-plane-address", "dapr-api.dapr-system.svc.cluster.local:443",
			"--sentry-address", "dapr-sentry.dapr-system.svc.cluster.local:443",
			"--placement-host-address", "dapr-placement-server.dapr-system.svc.cluster.local:50005",
			"--log-level", "info", "--enable-metrics=true", "--metrics-port", "9090", "--enable-mtls"],
		"env": [
			{"name": "NAMESPACE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
			{"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
			{"name": "DAPR_CONTROLPLANE_NAMESPACE", "value": "dapr-system"},
			{"name": "DAPR_CONTROLPLANE_TRUST_DOMAIN", "value": "cluster.local"}
		],
		"ports": [
			{"containerPort": %[2]d, "name": "dapr-http"}, {"containerPort": 50001, "name": "dapr-grpc"},
			{"containerPort": 50002, "name": "dapr-internal"}, {"containerPort": 9090, "name": "dapr-metrics"}
		],
		"readinessProbe": {"httpGet": {"path": "/v1.0/healthz", "port": 3501},
			"initialDelaySeconds": 3, "periodSeconds": 6, "timeoutSeconds": 3, "failureThreshold": 3},
		"livenessProbe": {"httpGet": {"path": "/v1.0/healthz", "port": 3501},
			"initialDelaySeconds": 3, "periodSeconds": 6, "timeoutSeconds": 3, "failureThreshold": 3},
		"securityContext": {"allowPrivilegeEscalation": false, "capabilities": {"drop": ["ALL"]},
			"readOnlyRootFilesystem": true, "runAsNonRoot": true, "seccompProfile": {"type": "RuntimeDefault"}},
		"volumeMounts": [{"name": "dapr-identity-token", "mountPath": "/var/run/secrets/dapr.io/sentrytoken", "readOnly": true}]
	}`, appID, httpPort))
}
