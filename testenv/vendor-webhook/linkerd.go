package main

// Linkerd: the proxy injector.
//
// Research notes (§1, Linkerd): sidecar `linkerd-proxy` (an init container with restartPolicy
// Always when native); init container `linkerd-init`; markers: annotations
// `linkerd.io/proxy-version`, `linkerd.io/created-by`, label `linkerd.io/proxy-<kind>`; trigger
// `linkerd.io/inject`; configuration `linkerd-proxy-injector-webhook-config`, no
// reinvocationPolicy (Never); the injector bails on already-injected pods; quit: POST
// localhost:4191/shutdown, disabled by default since June 2024, enabled per Pod by
// `config.linkerd.io/proxy-admin-shutdown: enabled`; native: opt-in per Pod with
// `config.beta.linkerd.io/proxy-enable-native-sidecar` (the `config.alpha...` spelling is
// deprecated), Kubernetes >= 1.29.
// Sources: linkerd/linkerd2 charts/patch/templates/patch.json (where each container goes),
// charts/partials/templates/_proxy.tpl (the proxy container), _metadata.tpl, pkg/healthcheck
// HasExistingSidecars; https://linkerd.io/2/reference/proxy-configuration,
// https://linkerd.io/2/features/native-sidecars; linkerd/linkerd2 PR #12705, #3750.
//
// Modelled here:
//   - Selection: the namespace annotation `linkerd.io/inject: enabled` (here the test's
//     label); a Pod opts out with `linkerd.io/inject: disabled`; hostNetwork Pods are skipped.
//   - Already injected (HasExistingSidecars, as the brief asks: a container named
//     linkerd-proxy in either list): also a container istio-proxy, an init container
//     linkerd-init or istio-init, or their images (the stored source checks linkerd-proxy in
//     spec.containers only, and linkerd-init among the init containers, which a native Pod
//     always has).
//   - Legacy mode: linkerd-init at the end of spec.initContainers; linkerd-proxy at
//     spec.containers[0] (proxy.await, on by default) with its postStart hook linkerd-await.
//   - Native mode: linkerd-init at spec.initContainers[0], linkerd-proxy at [1] with
//     restartPolicy Always and a startupProbe on /ready (patch.json's $initIndex).
//   - Quit: LINKERD2_PROXY_SHUTDOWN_ENDPOINT_ENABLED is "true" with
//     `config.linkerd.io/proxy-admin-shutdown: enabled`, else "false"; the admin port is
//     `config.linkerd.io/admin-port` (4191).
//   - Configuration: the webhook's name and failurePolicy Ignore are guesses (the research
//     names the configuration only); the versions are guesses.

import (
	"crypto/sha256"
	"fmt"
	"strconv"
	"strings"
)

var linkerd = vendor{
	inject: linkerdInject,
	hook: hook{
		Configuration:  "linkerd-proxy-injector-webhook-config",
		Webhook:        "linkerd-proxy-injector.linkerd.io",
		FailurePolicy:  "Ignore",
		Reinvocation:   "Never",
		Operations:     []string{"CREATE"},
		TimeoutSeconds: 10,
	},
}

const linkerdVersion = "edge-25.10.1"

func linkerdInject(p *Pod, o options) (string, error) {
	if p.HostNetwork() {
		return "hostNetwork", nil
	}
	if p.Annotation("linkerd.io/inject") == "disabled" {
		return "linkerd.io/inject: disabled", nil
	}
	if c := linkerdExistingSidecar(p); c != "" {
		return "already has a sidecar: " + c, nil
	}
	admin := 4191
	if a, err := strconv.Atoi(p.Annotation("config.linkerd.io/admin-port")); err == nil {
		admin = a
	}
	if o.quitPort != 0 {
		admin = o.quitPort
	}
	native := p.Annotation("config.beta.linkerd.io/proxy-enable-native-sidecar") == "true" ||
		p.Annotation("config.alpha.linkerd.io/proxy-enable-native-sidecar") == "true"
	shutdown := p.Annotation("config.linkerd.io/proxy-admin-shutdown") == "enabled"

	p.AddVolume(template(`{"name": "linkerd-proxy-init-xtables-lock", "emptyDir": {}}`))
	p.AddVolume(template(`{"name": "linkerd-identity-end-entity", "emptyDir": {"medium": "Memory"}}`))
	p.AddVolume(template(`{"name": "linkerd-identity-token", "projected": {"sources": [{"serviceAccountToken":
		{"path": "linkerd-identity-token", "expirationSeconds": 86400, "audience": "identity.l5d.io"}}]}}`))
	proxy := linkerdProxy(admin, shutdown)
	if native {
		proxy["restartPolicy"] = "Always"
		proxy["startupProbe"] = template(fmt.Sprintf(`{"httpGet": {"path": "/ready", "port": %d},
			"initialDelaySeconds": 0, "periodSeconds": 1, "failureThreshold": 120}`, admin))
		p.Insert("initContainers", 0, linkerdInit())
		p.Insert("initContainers", 1, proxy)
	} else {
		proxy["lifecycle"] = template(fmt.Sprintf(`{"postStart": {"exec": {"command":
			["/usr/lib/linkerd/linkerd-await", "--timeout=2m", "--port=%d"]}}}`, admin))
		p.Insert("initContainers", -1, linkerdInit())
		p.Insert("containers", 0, proxy)
	}
	p.SetAnnotation("linkerd.io/created-by", "linkerd/proxy-injector "+linkerdVersion)
	p.SetAnnotation("linkerd.io/proxy-version", linkerdVersion)
	// (the digest of the trust anchors of a control plane this stand-in does not have)
	p.SetAnnotation("linkerd.io/trust-root-sha256", fmt.Sprintf("%x", sha256.Sum256([]byte("sexton test trust anchors"))))
	p.SetAnnotation("cluster-autoscaler.kubernetes.io/safe-to-evict", "true")
	p.SetLabel("linkerd.io/control-plane-ns", "linkerd")
	p.SetLabel("linkerd.io/workload-ns", p.Namespace)
	if kind, name := p.Owner(); name != "" {
		p.SetLabel("linkerd.io/proxy-"+strings.ToLower(kind), name)
	}
	if shutdown {
		p.QuitPort, p.QuitPath = admin, "/shutdown"
	}
	return "", nil
}

// linkerdExistingSidecar names the sidecar that makes the injector bail, or "".
func linkerdExistingSidecar(p *Pod) string {
	for _, c := range p.List("containers") {
		image := str(c.(obj)["image"])
		if n := nameOf(c); n == "linkerd-proxy" || n == "istio-proxy" ||
			strings.HasPrefix(image, "cr.l5d.io/linkerd/proxy:") || strings.HasPrefix(image, "gcr.io/istio-release/proxyv2:") {
			return n
		}
	}
	for _, c := range p.List("initContainers") {
		image := str(c.(obj)["image"])
		if n := nameOf(c); n == "linkerd-proxy" || n == "linkerd-init" || n == "istio-init" ||
			strings.HasPrefix(image, "cr.l5d.io/linkerd/proxy-init:") || strings.HasPrefix(image, "gcr.io/istio-release/proxy_init:") {
			return n
		}
	}
	return ""
}

func linkerdInit() obj {
	return template(`{
		"name": "linkerd-init",
		"image": "cr.l5d.io/linkerd/proxy-init:v2.4.3",
		"args": ["--ipv6=false", "--incoming-proxy-port", "4143", "--outgoing-proxy-port", "4140",
			"--proxy-uid", "2102", "--inbound-ports-to-ignore", "4190,4191,4567,4568",
			"--outbound-ports-to-ignore", "4567,4568"],
		"imagePullPolicy": "IfNotPresent",
		"securityContext": {"allowPrivilegeEscalation": false, "capabilities": {"add": ["NET_ADMIN", "NET_RAW"]},
			"privileged": false, "readOnlyRootFilesystem": true, "runAsGroup": 65534, "runAsNonRoot": true,
			"runAsUser": 65534, "seccompProfile": {"type": "RuntimeDefault"}},
		"terminationMessagePolicy": "FallbackToLogsOnError",
		"volumeMounts": [{"mountPath": "/run", "name": "linkerd-proxy-init-xtables-lock"}]
	}`)
}

func linkerdProxy(admin int, shutdown bool) obj {
	c := template(fmt.Sprintf(`{
		"name": "linkerd-proxy",
		"image": "cr.l5d.io/linkerd/proxy:%[1]s",
		"imagePullPolicy": "IfNotPresent",
		"env": [
			{"name": "_pod_name", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
			{"name": "_pod_ns", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
			{"name": "_pod_nodeName", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
			{"name": "LINKERD2_PROXY_LOG", "value": "warn,linkerd=info,hickory=error"},
			{"name": "LINKERD2_PROXY_DESTINATION_SVC_ADDR", "value": "linkerd-dst-headless.linkerd.svc.cluster.local.:8086"},
			{"name": "LINKERD2_PROXY_CONTROL_LISTEN_ADDR", "value": "[::]:4190"},
			{"name": "LINKERD2_PROXY_ADMIN_LISTEN_ADDR", "value": "[::]:%[2]d"},
			{"name": "LINKERD2_PROXY_OUTBOUND_LISTEN_ADDRS", "value": "127.0.0.1:4140,[::1]:4140"},
			{"name": "LINKERD2_PROXY_INBOUND_LISTEN_ADDR", "value": "[::]:4143"},
			{"name": "LINKERD2_PROXY_IDENTITY_DIR", "value": "/var/run/linkerd/identity/end-entity"},
			{"name": "LINKERD2_PROXY_IDENTITY_TOKEN_FILE", "value": "/var/run/secrets/tokens/linkerd-identity-token"}
		],
		"livenessProbe": {"httpGet": {"path": "/live", "port": %[2]d}, "initialDelaySeconds": 10, "timeoutSeconds": 1},
		"ports": [{"containerPort": 4143, "name": "linkerd-proxy"}, {"containerPort": %[2]d, "name": "linkerd-admin"}],
		"readinessProbe": {"httpGet": {"path": "/ready", "port": %[2]d}, "initialDelaySeconds": 2, "timeoutSeconds": 1},
		"securityContext": {"allowPrivilegeEscalation": false, "readOnlyRootFilesystem": true, "runAsNonRoot": true,
			"runAsUser": 2102, "seccompProfile": {"type": "RuntimeDefault"}},
		"terminationMessagePolicy": "FallbackToLogsOnError",
		"volumeMounts": [
			{"mountPath": "/var/run/linkerd/identity/end-entity", "name": "linkerd-identity-end-entity"},
			{"mountPath": "/var/run/secrets/tokens", "name": "linkerd-identity-token"}
		]
	}`, linkerdVersion, admin))
	SetEnv(c, "LINKERD2_PROXY_SHUTDOWN_ENDPOINT_ENABLED", strconv.FormatBool(shutdown))
	return c
}
