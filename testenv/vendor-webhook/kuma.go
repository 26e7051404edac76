package main

// Kuma (and Kong Mesh): the control plane's sidecar injector.
//
// Research notes (§1, Kuma / Kong Mesh): sidecar `kuma-sidecar`; init container `kuma-init`;
// marker annotation `kuma.io/sidecar-injected: "true"`; configuration
// `kuma-admission-mutating-webhook-configuration`; no quit endpoint found (it drains on
// SIGTERM, preStop); native: opt-in for the whole control plane
// (`experimental.sidecarContainers`, KUMA_EXPERIMENTAL_SIDECAR_CONTAINERS, Kuma >= 2.7, PR #9321),
// no per-Pod switch, so not modelled.
// Sources: kumahq/kuma pkg/plugins/runtime/k8s/metadata (KumaSidecarInjectedAnnotation),
// pkg/plugins/runtime/k8s/webhooks/injector (InjectKuma, needInject/preCheck,
// NewInitContainer), deployments/charts/kuma/templates/cp-webhooks-and-secrets.yaml;
// app/cni; PR #9321; kuma-website dpp-on-kubernetes.md.
//
// Modelled here:
//   - Selection: the namespace label `kuma.io/sidecar-injection: enabled` (here the test's
//     label); a Pod opts out with the label (or, deprecated, the annotation)
//     `kuma.io/sidecar-injection: disabled`.
//   - Already injected: **a container named kuma-sidecar in spec.containers** (needInject),
//     not the annotation, found in the stored sources beyond the research notes. Kuma is not
//     re-invoked by default (no reinvocationPolicy in its chart).
//   - kuma-sidecar **first** in spec.containers, kuma-init at the end of spec.initContainers
//     (first with `kuma.io/init-first: "true"`); the mesh label and the transparent proxy
//     annotations.
//   - failurePolicy: the chart's `controlPlane.injectorFailurePolicy` (its default, Fail, is a
//     guess); the webhook's name is the chart's; image versions and resources are guesses.

var kuma = vendor{
	inject: kumaInject,
	hook: hook{
		Configuration:  "kuma-admission-mutating-webhook-configuration",
		Webhook:        "namespace-kuma-injector.kuma.io",
		FailurePolicy:  "Fail",
		Reinvocation:   "Never",
		Operations:     []string{"CREATE"},
		TimeoutSeconds: 10,
	},
}

func kumaInject(p *Pod, _ options) (string, error) {
	setting := p.Annotation("kuma.io/sidecar-injection")
	if l := p.Label("kuma.io/sidecar-injection"); l != "" {
		setting = l
	}
	if setting == "disabled" || setting == "false" {
		return "kuma.io/sidecar-injection: " + setting, nil
	}
	if p.Has("containers", "kuma-sidecar") {
		return "a container kuma-sidecar in spec.containers", nil
	}
	p.AddVolume(template(`{"name": "kuma-init-tmp", "emptyDir": {"sizeLimit": "10M"}}`))
	p.AddVolume(template(`{"name": "kuma-sidecar-tmp", "emptyDir": {"sizeLimit": "10M"}}`))
	sidecar := kumaSidecar()
	if sa := p.serviceAccountMount(); sa != nil {
		Mount(sidecar, sa)
	}
	p.Insert("containers", 0, sidecar)
	init := kumaInit()
	if first, _ := parseBool(p.Annotation("kuma.io/init-first")); first {
		p.Insert("initContainers", 0, init)
	} else {
		p.Insert("initContainers", -1, init)
	}
	for k, v := range map[string]string{
		"kuma.io/sidecar-injected":                    "true",
		"kuma.io/sidecar-uid":                         "5678",
		"kuma.io/envoy-admin-port":                    "9901",
		"kuma.io/transparent-proxying":                "enabled",
		"kuma.io/transparent-proxying-inbound-port":   "15006",
		"kuma.io/transparent-proxying-outbound-port":  "15001",
		"kuma.io/transparent-proxying-ip-family-mode": "dualstack",
		"kuma.io/virtual-probes":                      "enabled",
		"kuma.io/virtual-probes-port":                 "9000",
	} {
		p.SetAnnotation(k, v)
	}
	p.SetLabel("kuma.io/mesh", "default")
	return "", nil
}

func kumaSidecar() obj {
	return template(`{
		"name": "kuma-sidecar",
		"image": "docker.io/kumahq/kuma-dp:2.12.2",
		"imagePullPolicy": "IfNotPresent",
		"args": ["run", "--log-level=info", "--concurrency=2"],
		"env": [
			{"name": "INSTANCE_IP", "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "status.podIP"}}},
			{"name": "KUMA_CONTROL_PLANE_URL", "value": "https://kuma-control-plane.kuma-system:5678"},
			{"name": "KUMA_DATAPLANE_DRAIN_TIME", "value": "30s"},
			{"name": "KUMA_DATAPLANE_MESH", "value": "default"},
			{"name": "KUMA_DATAPLANE_RUNTIME_TOKEN_PATH", "value": "/var/run/secrets/kubernetes.io/serviceaccount/token"},
			{"name": "POD_NAME", "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.name"}}},
			{"name": "POD_NAMESPACE", "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}}}
		],
		"livenessProbe": {"httpGet": {"path": "/ready", "port": 9901}, "initialDelaySeconds": 60, "periodSeconds": 5,
			"failureThreshold": 12, "timeoutSeconds": 3},
		"readinessProbe": {"httpGet": {"path": "/ready", "port": 9901}, "initialDelaySeconds": 1, "periodSeconds": 5,
			"failureThreshold": 12, "timeoutSeconds": 3},
		"resources": {"limits": {"cpu": "1", "memory": "512Mi"}, "requests": {"cpu": "50m", "memory": "64Mi"}},
		"securityContext": {"allowPrivilegeEscalation": false, "capabilities": {"drop": ["ALL"]},
			"readOnlyRootFilesystem": true, "runAsGroup": 5678, "runAsUser": 5678},
		"volumeMounts": [{"name": "kuma-sidecar-tmp", "mountPath": "/tmp"}]
	}`)
}

func kumaInit() obj {
	return template(`{
		"name": "kuma-init",
		"image": "docker.io/kumahq/kuma-init:2.12.2",
		"imagePullPolicy": "IfNotPresent",
		"command": ["/usr/bin/kumactl", "install", "transparent-proxy"],
		"args": ["--kuma-dp-user", "5678", "--redirect-inbound-port", "15006", "--redirect-outbound-port", "15001",
			"--exclude-inbound-ports", "9000", "--ip-family-mode", "dualstack"],
		"env": [{"name": "XTABLES_LOCKFILE", "value": "/tmp/xtables.lock"}],
		"resources": {"limits": {"cpu": "100m", "memory": "50M"}, "requests": {"cpu": "20m", "memory": "20M"}},
		"securityContext": {"capabilities": {"add": ["NET_ADMIN", "NET_RAW"], "drop": ["ALL"]},
			"readOnlyRootFilesystem": true, "runAsGroup": 0, "runAsUser": 0},
		"volumeMounts": [{"name": "kuma-init-tmp", "mountPath": "/tmp"}]
	}`)
}
