package main

// Vault: vault-k8s, the Vault Agent injector.
//
// Research notes (§1, Vault): sidecar `vault-agent`; init container `vault-agent-init`;
// marker `vault.hashicorp.com/agent-inject-status: injected`; trigger
// `vault.hashicorp.com/agent-inject: "true"`; configuration `<release>-agent-injector-cfg`
// (usually `vault-agent-injector-cfg`, which sorts after `sexton-webhook`), webhook
// `vault.hashicorp.com`, operations CREATE and UPDATE, no reinvocationPolicy (Never); quit
// only with `vault.hashicorp.com/agent-enable-quit: "true"` (vault-k8s 0.16.0): POST
// 127.0.0.1:<agent cache listener port, default 8200>/agent/v1/quit; no native mode released.
// Sources: developer.hashicorp.com/vault/docs/platform/k8s/injector/annotations;
// hashicorp/vault-helm templates/injector-mutating-webhook.yaml; hashicorp/vault-k8s
// agent-inject/agent/{agent.go (ShouldInject, Patch), container_sidecar.go, config.go},
// CHANGELOG.md; hashicorp/vault-k8s #620, PR #659.
//
// Modelled here:
//   - Injected only with the trigger, which must parse as a bool (else Vault answers an
//     error: the Pod is refused); already injected when the status annotation says
//     "injected" (ShouldInject).
//   - vault-agent-init at the end of spec.initContainers (first with
//     `vault.hashicorp.com/agent-init-first: "true"`; none with `agent-pre-populate: "false"`);
//     vault-agent at the end of spec.containers (none with `agent-pre-populate-only: "true"`),
//     `command: [/bin/sh, -ec]` and one argument that decodes VAULT_CONFIG (base64 JSON).
//   - Quit: the agent configuration gets a listener on 127.0.0.1:<port> with
//     agent_api.enable_quit and an empty cache stanza (config.go), the port from
//     `vault.hashicorp.com/agent-cache-listener-port` (8200).
//   - The secrets volume is mounted into every container of the Pod (the default
//     `agent-inject-containers`); one template per `agent-inject-secret-NAME` annotation.
//   - failurePolicy Ignore is the chart's default (guess: the research does not say); the
//     image tag, the Vault address and the security context of recent releases are guesses.

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
)

var vault = vendor{
	inject: vaultInject,
	hook: hook{
		Configuration:  "vault-agent-injector-cfg",
		Webhook:        "vault.hashicorp.com",
		FailurePolicy:  "Ignore",
		Reinvocation:   "Never",
		Operations:     []string{"CREATE", "UPDATE"},
		TimeoutSeconds: 30,
	},
}

const vaultAnnotation = "vault.hashicorp.com/"

func vaultInject(p *Pod, o options) (string, error) {
	raw := p.Annotation(vaultAnnotation + "agent-inject")
	if raw == "" && !p.HasAnnotation(vaultAnnotation+"agent-inject") {
		return "no vault.hashicorp.com/agent-inject", nil
	}
	inject, ok := parseBool(raw)
	if !ok {
		return "", fmt.Errorf("error checking if should inject agent: strconv.ParseBool: parsing %q: invalid syntax", raw)
	}
	if !inject {
		return "vault.hashicorp.com/agent-inject is false", nil
	}
	if p.Annotation(vaultAnnotation+"agent-inject-status") == "injected" {
		return "agent-inject-status: injected", nil
	}
	flag := func(name string, def bool) bool {
		if v, ok := parseBool(p.Annotation(vaultAnnotation + name)); ok {
			return v
		}
		return def
	}
	port := 8200
	if v, err := strconv.Atoi(p.Annotation(vaultAnnotation + "agent-cache-listener-port")); err == nil {
		port = v
	}
	if o.quitPort != 0 {
		port = o.quitPort
	}
	quit := flag("agent-enable-quit", false)

	for _, v := range []string{"home-init", "home-sidecar", "vault-secrets"} {
		p.AddVolume(obj{"name": v, "emptyDir": obj{"medium": "Memory"}})
	}
	secrets := template(`{"name": "vault-secrets", "mountPath": "/vault/secrets"}`)
	for _, c := range p.List("containers") {
		Mount(c, secrets)
	}
	if flag("agent-pre-populate", true) {
		for _, c := range p.List("initContainers") {
			Mount(c, secrets)
		}
		init := vaultContainer(p, "vault-agent-init", "home-init", vaultConfig(p, true, quit, port))
		if flag("agent-init-first", false) {
			p.Insert("initContainers", 0, init)
		} else {
			p.Insert("initContainers", -1, init)
		}
	}
	if !flag("agent-pre-populate-only", false) {
		p.Insert("containers", -1, vaultContainer(p, "vault-agent", "home-sidecar", vaultConfig(p, false, quit, port)))
		if quit {
			p.QuitPort, p.QuitPath = port, "/agent/v1/quit"
		}
	}
	p.SetAnnotation(vaultAnnotation+"agent-inject-status", "injected")
	return "", nil
}

func vaultContainer(p *Pod, name, home, config string) obj {
	c := template(`{
		"image": "hashicorp/vault:1.20.4",
		"command": ["/bin/sh", "-ec"],
		"args": ["echo ${VAULT_CONFIG?} | base64 -d > /home/vault/config.json && vault agent -config=/home/vault/config.json"],
		"env": [
			{"name": "NAMESPACE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
			{"name": "HOST_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.hostIP"}}},
			{"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
			{"name": "VAULT_LOG_LEVEL", "value": "info"},
			{"name": "VAULT_LOG_FORMAT", "value": "standard"}
		],
		"resources": {"limits": {"cpu": "500m", "memory": "128Mi"}, "requests": {"cpu": "250m", "memory": "64Mi"}},
		"securityContext": {"allowPrivilegeEscalation": false, "capabilities": {"drop": ["ALL"]},
			"readOnlyRootFilesystem": true, "runAsGroup": 1000, "runAsNonRoot": true, "runAsUser": 100},
		"volumeMounts": [{"name": "vault-secrets", "mountPath": "/vault/secrets"}]
	}`)
	c["name"] = name
	SetEnv(c, "VAULT_CONFIG", config)
	Mount(c, obj{"name": home, "mountPath": "/home/vault"})
	if sa := p.serviceAccountMount(); sa != nil {
		sa["readOnly"] = true
		Mount(c, sa)
	}
	return c
}

// vaultConfig is the agent's configuration as VAULT_CONFIG carries it (config.go: rendered
// as JSON, base64-encoded).
func vaultConfig(p *Pod, init, quit bool, port int) string {
	var templates []any
	var names []string
	for k := range member(p.meta(), "annotations", false) {
		if n, ok := strings.CutPrefix(k, vaultAnnotation+"agent-inject-secret-"); ok {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	for _, n := range names {
		path := p.Annotation(vaultAnnotation + "agent-inject-secret-" + n)
		templates = append(templates, obj{
			"destination":     "/vault/secrets/" + n,
			"contents":        fmt.Sprintf(`{{ with secret %q }}{{ range $k, $v := .Data }}{{ $k }}: {{ $v }}`+"\n"+`{{ end }}{{ end }}`, path),
			"left_delimiter":  "{{",
			"right_delimiter": "}}",
		})
	}
	config := obj{
		"auto_auth": obj{
			"method": obj{"type": "kubernetes", "mount_path": "auth/kubernetes", "config": obj{
				"role":       p.Annotation(vaultAnnotation + "role"),
				"token_path": "/var/run/secrets/kubernetes.io/serviceaccount/token"}},
			"sink": []any{obj{"type": "file", "config": obj{"path": "/home/vault/.vault-token"}}},
		},
		"exit_after_auth": init,
		"pid_file":        "/home/vault/.pid",
		"vault":           obj{"address": "https://vault.vault.svc:8200"},
		"template_config": obj{"exit_on_retry_failure": true},
	}
	if len(templates) > 0 {
		config["template"] = templates
	}
	if quit {
		config["listener"] = []any{obj{"type": "tcp", "address": fmt.Sprintf("127.0.0.1:%d", port),
			"tls_disable": true, "agent_api": obj{"enable_quit": true}}}
		config["cache"] = obj{}
	}
	b, _ := json.Marshal(config)
	return base64.StdEncoding.EncodeToString(b)
}
