package main

// The Cloud SQL Auth Proxy operator.
//
// Research notes (§1, Cloud SQL Auth Proxy operator): sidecar `csql-<ns>-<AuthProxyWorkload
// name>` (prefix `csql-`, hashed if longer than 63 characters), no init container; marker
// annotation `cloudsql.cloud.google.com/<AuthProxyWorkload name>` = `<generation>,<image>`;
// configuration: base name `mutating-core-webhook-configuration` with a kustomize prefix
// (final name not verified), webhook `mpod.kb.io`, failurePolicy Ignore, CREATE and UPDATE of
// Pods (and workloads); the operator sets CSQL_PROXY_QUITQUITQUIT=true, admin port 9091,
// preStop GET /quitquitquit, CSQL_PROXY_EXIT_ZERO_ON_SIGTERM=true on the proxy, and
// CSQL_PROXY_QUIT_URLS="http://localhost:9091/quitquitquit ..." in the app containers; native:
// `spec.sidecarType: initContainer` on the AuthProxyWorkload (not modelled: no per-Pod switch).
// Sources: GoogleCloudPlatform/cloud-sql-proxy-operator internal/workload/{names.go,
// podspec_updates.go}, config/webhook/core_webhook.yaml, config/default/kustomization.yaml
// (namePrefix), internal/controller/pod_controller.go; PR #624, issue #381; cloud-sql-proxy
// cmd/root.go.
//
// Modelled here:
//   - The configuration's name: `cloud-sql-proxy-operator-mutating-core-webhook-configuration`,
//     the base name with the namePrefix of the operator's config/default kustomization,
//     which builds its release manifest (it sorts before `sexton-webhook`).
//   - The operator reads AuthProxyWorkload resources, which the test API server does not
//     have: the stand-in acts as if the namespace held one, named `db` (generation 1),
//     whose workload selector matches every Pod. The container name follows the research:
//     `csql-<namespace>-db` through SafePrefixedName (the stored names.go has
//     `csql-<workload>` and, later, `csql-<workload>-<proxy type>`: only the prefix is
//     stable across versions).
//   - No "already injected" check: the operator configures the Pod every time (CREATE and
//     UPDATE), finding its container by name **in spec.containers**; one already there is
//     kept (its update in place is not modelled), the annotation and the variables set again.
//     Its Pod controller also deletes a failing Pod whose proxy is missing from
//     spec.containers (CheckWorkloadContainers), not modelled here.
//   - The proxy at the end of spec.containers; the admin (quit) port 9091.
//   - Probes on :9801 and the security context are guesses; resources from podspec_updates.go.

import (
	"fmt"
	"hash/fnv"
	"strings"
)

var cloudsql = vendor{
	inject: cloudsqlInject,
	hook: hook{
		Configuration:  "cloud-sql-proxy-operator-mutating-core-webhook-configuration",
		Webhook:        "mpod.kb.io",
		FailurePolicy:  "Ignore",
		Reinvocation:   "Never",
		Operations:     []string{"CREATE", "UPDATE"},
		TimeoutSeconds: 15,
	},
}

const (
	cloudsqlWorkload = "db"
	cloudsqlImage    = "gcr.io/cloud-sql-connectors/cloud-sql-proxy:2.18.2"
)

func cloudsqlInject(p *Pod, o options) (string, error) {
	name := safePrefixedName("csql-", p.Namespace+"-"+cloudsqlWorkload)
	admin := 9091
	if o.quitPort != 0 {
		admin = o.quitPort
	}
	quitURLs := fmt.Sprintf("http://localhost:%d/quitquitquit", admin)
	leftAlone := ""
	if p.Has("containers", name) {
		leftAlone = "its container " + name + " is in spec.containers (annotation and variables set again)"
	} else {
		p.Insert("containers", -1, cloudsqlProxy(name, admin))
	}
	for _, c := range p.List("containers") {
		if nameOf(c) != name {
			SetEnv(c, "CSQL_PROXY_QUIT_URLS", quitURLs)
		}
	}
	p.SetAnnotation("cloudsql.cloud.google.com/"+cloudsqlWorkload, "1,"+cloudsqlImage)
	p.QuitPort, p.QuitPath = admin, "/quitquitquit"
	return leftAlone, nil
}

func cloudsqlProxy(name string, admin int) obj {
	c := template(fmt.Sprintf(`{
		"image": %q,
		"args": ["project:region:db?port=5000"],
		"env": [
			{"name": "CSQL_PROXY_HEALTH_CHECK", "value": "true"},
			{"name": "CSQL_PROXY_HTTP_PORT", "value": "9801"},
			{"name": "CSQL_PROXY_HTTP_ADDRESS", "value": "0.0.0.0"},
			{"name": "CSQL_PROXY_USER_AGENT", "value": "cloud-sql-proxy-operator/1.7.2"},
			{"name": "CSQL_PROXY_ADMIN_PORT", "value": "%[2]d"},
			{"name": "CSQL_PROXY_QUITQUITQUIT", "value": "true"},
			{"name": "CSQL_PROXY_EXIT_ZERO_ON_SIGTERM", "value": "true"},
			{"name": "CSQL_PROXY_STRUCTURED_LOGS", "value": "true"}
		],
		"lifecycle": {"preStop": {"httpGet": {"path": "/quitquitquit", "port": %[2]d, "host": "localhost"}}},
		"ports": [{"containerPort": 5000, "protocol": "TCP"}, {"containerPort": 9801, "protocol": "TCP"}],
		"startupProbe": {"httpGet": {"path": "/startup", "port": 9801}, "periodSeconds": 1, "failureThreshold": 60, "timeoutSeconds": 10},
		"livenessProbe": {"httpGet": {"path": "/liveness", "port": 9801}, "periodSeconds": 10, "failureThreshold": 3, "timeoutSeconds": 10},
		"readinessProbe": {"httpGet": {"path": "/readiness", "port": 9801}, "periodSeconds": 10, "failureThreshold": 6, "timeoutSeconds": 10},
		"resources": {"requests": {"cpu": "1", "memory": "2Gi"}},
		"securityContext": {"allowPrivilegeEscalation": false, "readOnlyRootFilesystem": true, "runAsNonRoot": true}
	}`, cloudsqlImage, admin))
	c["name"] = name
	return c
}

// safePrefixedName is the operator's SafePrefixedName (names.go): prefix + name, lower-case,
// shortened around an FNV-32a hash when longer than 63 characters.
func safePrefixedName(prefix, name string) string {
	const maxLen = 63
	if len(prefix)+len(name) <= maxLen {
		return strings.ToLower(prefix + name)
	}
	h := fnv.New32a()
	h.Write([]byte(name))
	suffix := fmt.Sprintf("-%x", h.Sum32())
	keep := (maxLen - len(suffix) - len(prefix)) / 2
	return strings.ToLower(prefix + name[:keep] + name[len(name)-keep:] + suffix)
}
