package main

// Consul: consul-k8s's connect injector, with consul-dataplane.
//
// Research notes (§1, Consul): sidecar `consul-dataplane`; init container
// `consul-connect-inject-init`; marker annotation **and** label
// `consul.hashicorp.com/connect-inject-status: injected`; configuration `<fullname>-connect-injector`
// (usually `consul-connect-injector`), no reinvocationPolicy (Never); quit: consul-dataplane's
// lifecycle server on 127.0.0.1:20600/graceful_shutdown (DefaultGracefulPort,
// DefaultGracefulShutdownPath; since consul-k8s 1.2.x), the HTTP method not verified; no
// native mode released (issue #3919, PR #4678 open).
// Sources: hashicorp/consul-k8s charts/consul/templates/connect-inject-mutatingwebhookconfiguration.yaml;
// control-plane/connect-inject/constants, webhook/mesh_webhook.go (Handle, shouldInject,
// injectSidecar), webhook/consul_dataplane_sidecar.go; release v1.2.1 notes (GH-2233).
//
// Modelled here:
//   - Injected with `consul.hashicorp.com/connect-inject: "true"` (the chart's
//     connectInject.default is false, so the annotation is required); already injected when
//     the status annotation is set at all (shouldInject).
//   - consul-connect-inject-init at the end of spec.initContainers, consul-dataplane at the
//     end of spec.containers (first with
//     `consul.hashicorp.com/sidecar-proxy-hold-application-until-proxy-starts: "true"`),
//     readiness and liveness on TCP 20000 (consul_dataplane_sidecar.go).
//   - The lifecycle flags on consul-dataplane's arguments (-graceful-port=20600
//     -shutdown-drain-listeners ..., as consul-k8s's tests expect them); the graceful port
//     from `consul.hashicorp.com/sidecar-proxy-lifecycle-graceful-port`
//     (constants/annotations_and_labels.go).
//   - Not modelled: `consul.hashicorp.com/enable-consul-dataplane-as-sidecar`, a per-Pod
//     switch found in a stored snapshot of consul-k8s (lifecycle config,
//     EnableConsulDataplaneAsSidecar), release not verified.
//   - Annotations: the original Pod (JSON), the consul-k8s version, transparent proxy
//     enabled (the chart's default); labels: the status and managed-by.
//   - failurePolicy Fail is the chart's default (guess); images and versions are guesses.

import (
	"encoding/json"
	"fmt"
	"strconv"
)

var consul = vendor{
	inject: consulInject,
	hook: hook{
		Configuration:  "consul-connect-injector",
		Webhook:        "consul-connect-injector.consul.hashicorp.com",
		FailurePolicy:  "Fail",
		Reinvocation:   "Never",
		Operations:     []string{"CREATE"},
		TimeoutSeconds: 10,
	},
}

const consulAnnotation = "consul.hashicorp.com/"

func consulInject(p *Pod, o options) (string, error) {
	if p.Annotation(consulAnnotation+"connect-inject-status") != "" {
		return "connect-inject-status is set", nil
	}
	raw := p.Annotation(consulAnnotation + "connect-inject")
	inject, ok := parseBool(raw)
	if !p.HasAnnotation(consulAnnotation + "connect-inject") {
		return "no consul.hashicorp.com/connect-inject (connectInject.default: false)", nil
	}
	if !ok {
		return "", fmt.Errorf("error checking if should inject: strconv.ParseBool: parsing %q: invalid syntax", raw)
	}
	if !inject {
		return "consul.hashicorp.com/connect-inject is false", nil
	}
	graceful := 20600
	if v, err := strconv.Atoi(p.Annotation(consulAnnotation + "sidecar-proxy-lifecycle-graceful-port")); err == nil {
		graceful = v
	}
	if o.quitPort != 0 {
		graceful = o.quitPort
	}
	original, _ := json.Marshal(p.o)
	p.SetAnnotation(consulAnnotation+"original-pod", string(original))
	p.SetAnnotation(consulAnnotation+"consul-k8s-version", "v1.8.1")
	p.AddVolume(template(`{"name": "consul-connect-inject-data", "emptyDir": {"medium": "Memory"}}`))

	p.Insert("initContainers", -1, consulInit(p))
	sidecar := consulDataplane(graceful)
	if hold, _ := parseBool(p.Annotation(consulAnnotation + "sidecar-proxy-hold-application-until-proxy-starts")); hold {
		p.Insert("containers", 0, sidecar)
	} else {
		p.Insert("containers", -1, sidecar)
	}
	p.SetAnnotation(consulAnnotation+"connect-inject-status", "injected")
	p.SetAnnotation(consulAnnotation+"transparent-proxy-status", "enabled")
	p.SetLabel(consulAnnotation+"connect-inject-status", "injected")
	p.SetLabel(consulAnnotation+"connect-inject-managed-by", "consul-k8s-endpoints-controller")
	p.QuitPort, p.QuitPath = graceful, "/graceful_shutdown"
	return "", nil
}

func consulInit(p *Pod) obj {
	c := template(`{
		"name": "consul-connect-inject-init",
		"image": "hashicorp/consul-k8s-control-plane:1.8.1",
		"command": ["/bin/sh", "-ec", "consul-k8s-control-plane connect-init -pod-name=${POD_NAME} -pod-namespace=${POD_NAMESPACE} -log-level=info -log-json=false"],
		"env": [
			{"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
			{"name": "POD_NAMESPACE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
			{"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
			{"name": "CONSUL_ADDRESSES", "value": "consul-server.consul.svc"},
			{"name": "CONSUL_GRPC_PORT", "value": "8502"},
			{"name": "CONSUL_HTTP_PORT", "value": "8500"},
			{"name": "CONSUL_NODE_NAME", "value": "$(NODE_NAME)-virtual"}
		],
		"resources": {"limits": {"cpu": "50m", "memory": "150Mi"}, "requests": {"cpu": "50m", "memory": "25Mi"}},
		"securityContext": {"capabilities": {"add": ["NET_ADMIN"]}, "privileged": false,
			"runAsGroup": 0, "runAsNonRoot": false, "runAsUser": 0},
		"volumeMounts": [{"name": "consul-connect-inject-data", "mountPath": "/consul/connect-inject"}]
	}`)
	if sa := p.serviceAccountMount(); sa != nil {
		Mount(c, sa)
	}
	return c
}

func consulDataplane(graceful int) obj {
	return template(fmt.Sprintf(`{
		"name": "consul-dataplane",
		"image": "hashicorp/consul-dataplane:1.8.1",
		"args": ["-addresses", "consul-server.consul.svc", "-grpc-port=8502",
			"-proxy-service-id-path=/consul/connect-inject/proxyid", "-log-level=info", "-log-json=false",
			"-envoy-concurrency=2", "-tls-disabled", "-graceful-port=%[1]d", "-shutdown-drain-listeners",
			"-shutdown-grace-period-seconds=30", "-graceful-shutdown-path=/graceful_shutdown",
			"-startup-grace-period-seconds=0", "-graceful-startup-path=/graceful_startup",
			"-telemetry-prom-scrape-path=/metrics"],
		"env": [
			{"name": "TMPDIR", "value": "/consul/connect-inject"},
			{"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
			{"name": "DP_SERVICE_NODE_NAME", "value": "$(NODE_NAME)-virtual"}
		],
		"readinessProbe": {"tcpSocket": {"port": 20000}, "initialDelaySeconds": 1},
		"livenessProbe": {"tcpSocket": {"port": 20000}, "initialDelaySeconds": 1},
		"resources": {"limits": {"cpu": "100m", "memory": "100Mi"}, "requests": {"cpu": "100m", "memory": "100Mi"}},
		"securityContext": {"readOnlyRootFilesystem": true, "runAsGroup": 5995, "runAsNonRoot": true, "runAsUser": 5995},
		"volumeMounts": [{"name": "consul-connect-inject-data", "mountPath": "/consul/connect-inject"}]
	}`, graceful))
}
