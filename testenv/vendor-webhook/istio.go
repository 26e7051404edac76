package main

// Istio: istiod's sidecar injector.
//
// Research notes (§1, Istio): sidecar `istio-proxy` in spec.containers, or in initContainers
// with restartPolicy Always in native mode; init container `istio-init` (`istio-validation`
// with the CNI plugin, not modelled); marker annotation `sidecar.istio.io/status` = JSON
// {"initContainers":[...],"containers":["istio-proxy"],...,"revision":..}, labels
// `security.istio.io/tlsMode`, `service.istio.io/canonical-name`; configuration
// `istio-sidecar-injector`, reinvocationPolicy from `sidecarInjectorWebhook.reinvocationPolicy`,
// default Never; quit: POST localhost:15020/quitquitquit (pilot-agent's status port); native:
// env ENABLE_NATIVE_SIDECARS, overridden per Pod by the alpha annotation
// `sidecar.istio.io/nativeSidecar`; native by default from Istio 1.27 on nodes >= 1.33.
// Sources: istio/istio manifests/charts/istio-control/istio-discovery/files/injection-template.yaml
// and templates/mutatingwebhook.yaml; pkg/kube/inject/webhook.go; PR #49570, PR #56428;
// discussion #61963.
//
// Modelled here:
//   - Selection: the namespace label istio-injection=enabled (here the test's label); a Pod
//     opts out with `sidecar.istio.io/inject: "false"` (a label wins over an annotation);
//     hostNetwork Pods are never injected (injectRequired).
//   - Legacy mode, the default here (Istio before 1.27, or native mode off): istio-proxy with
//     args only (the image's entrypoint is pilot-agent) and a readinessProbe GET
//     :15021/healthz/ready, last in spec.containers; istio-init last in spec.initContainers
//     (reorderPod: "iptables setup last so we do not blackhole init containers").
//   - Native mode with `sidecar.istio.io/nativeSidecar: "true"`: spec.initContainers is
//     istio-init, istio-proxy (restartPolicy Always), then the Pod's own (reorderPod). The
//     startupProbe on the readiness endpoint that native mode adds is a guess from the
//     research's "gated" (PR #49570); the stored template snapshot predates native mode.
//   - Already injected: Istio has no such check. It runs its template again and merges each
//     of its containers by name into the list the template puts it in (a strategic merge:
//     here the template's fields over the existing container's), then reorders
//     (webhook.go: injectPod, reapplyOverwrittenContainers, reorderPod). A Pod it injected
//     itself comes back the same; a legacy-mode Pod whose istio-proxy was moved to
//     initContainers gets a second istio-proxy in spec.containers, which the API server
//     refuses. With the default reinvocationPolicy Never that happens only when Istio is
//     called on a Pod that already carries its sidecar.
//   - Metrics merge (meshConfig enablePrometheusMerge, on by default): the prometheus.io
//     annotations point at the agent (applyPrometheusMerge).
//   - Configuration: failurePolicy Fail and the webhook's name are the chart's
//     (mutatingwebhook.yaml); the image tag is a guess.

import (
	"encoding/json"
	"strings"
)

var istio = vendor{
	inject: istioInject,
	hook: hook{
		Configuration:  "istio-sidecar-injector",
		Webhook:        "namespace.sidecar-injector.istio.io",
		FailurePolicy:  "Fail",
		Reinvocation:   "Never",
		Operations:     []string{"CREATE"},
		TimeoutSeconds: 10,
	},
	// pilot-agent's status port, not configurable per Pod
	fixedQuitPort: true,
}

const istioProxyName = "istio-proxy"

func istioInject(p *Pod, _ options) (string, error) {
	if p.HostNetwork() {
		return "hostNetwork", nil
	}
	setting := p.Annotation("sidecar.istio.io/inject")
	if l := p.Label("sidecar.istio.io/inject"); l != "" {
		setting = l
	}
	if setting == "false" {
		return `sidecar.istio.io/inject: "false"`, nil
	}
	native := p.Annotation("sidecar.istio.io/nativeSidecar") == "true"
	apps := istioAppContainers(p)
	proxy := istioProxy(p, apps)
	inits, containers := []obj{istioInit()}, []obj{proxy}
	if native {
		proxy["restartPolicy"] = "Always"
		proxy["startupProbe"] = template(`{"httpGet": {"path": "/healthz/ready", "port": 15021},
			"initialDelaySeconds": 0, "periodSeconds": 1, "timeoutSeconds": 3, "failureThreshold": 600}`)
		inits, containers = append(inits, proxy), nil
	}
	for _, c := range inits {
		mergeByName(p, "initContainers", c)
	}
	for _, c := range containers {
		mergeByName(p, "containers", c)
	}
	var volumes []string
	for _, v := range istioVolumes() {
		p.AddVolume(v)
		volumes = append(volumes, nameOf(v))
	}
	istioMetadata(p, apps, inits, containers, volumes)
	istioReorder(p)
	p.QuitPort, p.QuitPath = 15020, "/quitquitquit"
	return "", nil
}

// mergeByName puts c in list: over the container of its name there (its fields win), or at
// the end.
func mergeByName(p *Pod, list string, c obj) {
	if i := p.Index(list, nameOf(c)); i >= 0 {
		old := p.List(list)[i].(obj)
		for k, v := range c {
			old[k] = v
		}
		return
	}
	p.Insert(list, -1, c)
}

func istioAppContainers(p *Pod) []string {
	var apps []string
	for _, n := range p.Names("containers") {
		if n != istioProxyName {
			apps = append(apps, n)
		}
	}
	return apps
}

func istioInit() obj {
	return template(`{
		"name": "istio-init",
		"image": "docker.io/istio/proxyv2:1.26.2",
		"args": ["istio-iptables", "-p", "15001", "-z", "15006", "-u", "1337", "-m", "REDIRECT",
			"-i", "*", "-x", "", "-b", "*", "-d", "15090,15021,15020", "--log_output_level=default:info"],
		"resources": {"limits": {"cpu": "2", "memory": "1Gi"}, "requests": {"cpu": "100m", "memory": "128Mi"}},
		"securityContext": {"allowPrivilegeEscalation": false, "privileged": false,
			"capabilities": {"add": ["NET_ADMIN", "NET_RAW"], "drop": ["ALL"]},
			"readOnlyRootFilesystem": false, "runAsGroup": 0, "runAsNonRoot": false, "runAsUser": 0}
	}`)
}

func istioProxy(p *Pod, apps []string) obj {
	c := template(`{
		"name": "istio-proxy",
		"image": "docker.io/istio/proxyv2:1.26.2",
		"args": ["proxy", "sidecar", "--domain", "$(POD_NAMESPACE).svc.cluster.local",
			"--proxyLogLevel=warning", "--proxyComponentLogLevel=misc:error", "--log_output_level=default:info"],
		"ports": [{"containerPort": 15090, "protocol": "TCP", "name": "http-envoy-prom"}],
		"env": [
			{"name": "JWT_POLICY", "value": "third-party-jwt"},
			{"name": "PILOT_CERT_PROVIDER", "value": "istiod"},
			{"name": "CA_ADDR", "value": "istiod.istio-system.svc:15012"},
			{"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
			{"name": "POD_NAMESPACE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
			{"name": "INSTANCE_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
			{"name": "SERVICE_ACCOUNT", "valueFrom": {"fieldRef": {"fieldPath": "spec.serviceAccountName"}}},
			{"name": "HOST_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.hostIP"}}},
			{"name": "PROXY_CONFIG", "value": "{}\n"},
			{"name": "ISTIO_META_CLUSTER_ID", "value": "Kubernetes"},
			{"name": "ISTIO_META_INTERCEPTION_MODE", "value": "REDIRECT"},
			{"name": "ISTIO_META_MESH_ID", "value": "cluster.local"},
			{"name": "TRUST_DOMAIN", "value": "cluster.local"}
		],
		"readinessProbe": {"httpGet": {"path": "/healthz/ready", "port": 15021},
			"initialDelaySeconds": 0, "periodSeconds": 15, "timeoutSeconds": 3, "failureThreshold": 4},
		"securityContext": {"allowPrivilegeEscalation": false, "capabilities": {"drop": ["ALL"]},
			"privileged": false, "readOnlyRootFilesystem": true, "runAsGroup": 1337,
			"runAsNonRoot": true, "runAsUser": 1337},
		"resources": {"limits": {"cpu": "2", "memory": "1Gi"}, "requests": {"cpu": "100m", "memory": "128Mi"}},
		"volumeMounts": [
			{"name": "workload-socket", "mountPath": "/var/run/secrets/workload-spiffe-uds"},
			{"name": "credential-socket", "mountPath": "/var/run/secrets/credential-uds"},
			{"name": "workload-certs", "mountPath": "/var/run/secrets/workload-spiffe-credentials"},
			{"name": "istiod-ca-cert", "mountPath": "/var/run/secrets/istio"},
			{"name": "istio-data", "mountPath": "/var/lib/istio/data"},
			{"name": "istio-envoy", "mountPath": "/etc/istio/proxy"},
			{"name": "istio-token", "mountPath": "/var/run/secrets/tokens"},
			{"name": "istio-podinfo", "mountPath": "/etc/istio/pod"}
		]
	}`)
	var ports []any
	for _, a := range p.List("containers") {
		if ap, ok := a.(obj)["ports"].([]any); ok {
			ports = append(ports, ap...)
		}
	}
	b, _ := json.Marshal(ports)
	if ports == nil {
		b = []byte("[]")
	}
	SetEnv(c, "ISTIO_META_POD_PORTS", string(b))
	SetEnv(c, "ISTIO_META_APP_CONTAINERS", strings.Join(apps, ","))
	if kind, name := p.Owner(); name != "" {
		SetEnv(c, "ISTIO_META_WORKLOAD_NAME", name)
		SetEnv(c, "ISTIO_META_OWNER", "kubernetes://apis/"+istioAPIVersion(kind)+"/namespaces/"+
			p.Namespace+"/"+strings.ToLower(kind)+"s/"+name)
	}
	return c
}

func istioAPIVersion(kind string) string {
	if kind == "Job" || kind == "CronJob" {
		return "batch/v1"
	}
	return "apps/v1"
}

func istioVolumes() []obj {
	var v []obj
	for _, s := range []string{
		`{"name": "workload-socket", "emptyDir": {}}`,
		`{"name": "credential-socket", "emptyDir": {}}`,
		`{"name": "workload-certs", "emptyDir": {}}`,
		`{"name": "istio-envoy", "emptyDir": {"medium": "Memory"}}`,
		`{"name": "istio-data", "emptyDir": {}}`,
		`{"name": "istio-podinfo", "downwardAPI": {"items": [
			{"path": "labels", "fieldRef": {"fieldPath": "metadata.labels"}},
			{"path": "annotations", "fieldRef": {"fieldPath": "metadata.annotations"}}]}}`,
		`{"name": "istio-token", "projected": {"sources": [{"serviceAccountToken":
			{"path": "istio-token", "expirationSeconds": 43200, "audience": "istio-ca"}}]}}`,
		`{"name": "istiod-ca-cert", "configMap": {"name": "istio-ca-root-cert"}}`,
	} {
		v = append(v, template(s))
	}
	return v
}

// istioMetadata: the template's labels and annotations, the metrics merge and the status
// annotation (applyMetadata: the names of what the template injected).
func istioMetadata(p *Pod, apps []string, inits, containers []obj, volumes []string) {
	firstOf := func(keys ...string) string {
		for _, k := range keys {
			if v := p.Label(k); v != "" {
				return v
			}
		}
		return ""
	}
	owner := p.Name()
	if _, name := p.Owner(); name != "" {
		owner = name
	}
	canonical := firstOf("service.istio.io/canonical-name", "app.kubernetes.io/name", "app")
	if canonical == "" {
		canonical = owner
	}
	revision := firstOf("service.istio.io/canonical-revision", "app.kubernetes.io/version", "version")
	if revision == "" {
		revision = "latest"
	}
	tls := firstOf("security.istio.io/tlsMode")
	if tls == "" {
		tls = "istio"
	}
	p.SetLabel("security.istio.io/tlsMode", tls)
	p.SetLabel("service.istio.io/canonical-name", canonical)
	p.SetLabel("service.istio.io/canonical-revision", revision)
	if len(apps) > 0 {
		for _, k := range []string{"kubectl.kubernetes.io/default-logs-container", "kubectl.kubernetes.io/default-container"} {
			if !p.HasAnnotation(k) {
				p.SetAnnotation(k, apps[0])
			}
		}
	}
	p.SetAnnotation("prometheus.io/port", "15020")
	p.SetAnnotation("prometheus.io/path", "/stats/prometheus")
	p.SetAnnotation("prometheus.io/scrape", "true")
	namesOf := func(l []obj) []string {
		var n []string
		for _, c := range l {
			n = append(n, nameOf(c))
		}
		return n
	}
	status, _ := json.Marshal(struct {
		InitContainers   []string `json:"initContainers"`
		Containers       []string `json:"containers"`
		Volumes          []string `json:"volumes"`
		ImagePullSecrets []string `json:"imagePullSecrets"`
		Revision         string   `json:"revision"`
	}{namesOf(inits), namesOf(containers), volumes, nil, "default"})
	p.SetAnnotation("sidecar.istio.io/status", string(status))
}

// istioReorder is reorderPod: the proxy last in spec.containers; in native mode
// istio-init, istio-proxy first in spec.initContainers, else istio-init last.
func istioReorder(p *Pod) {
	move := func(list, name string, first bool) {
		i := p.Index(list, name)
		if i < 0 {
			return
		}
		l := p.List(list)
		c := l[i].(obj)
		p.SetList(list, append(l[:i:i], l[i+1:]...))
		if first {
			p.Insert(list, 0, c)
		} else {
			p.Insert(list, -1, c)
		}
	}
	move("containers", istioProxyName, false)
	if p.Has("initContainers", istioProxyName) {
		move("initContainers", istioProxyName, true)
		move("initContainers", "istio-init", true)
	} else {
		move("initContainers", "istio-init", false)
	}
}
