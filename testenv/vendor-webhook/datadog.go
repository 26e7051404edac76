package main

// Datadog: the Cluster Agent's admission controller, agent sidecar injection (provider
// fargate).
//
// Research notes (§1, Datadog): sidecar `datadog-agent-injected` in spec.containers, no init
// container; selection label `agent.datadoghq.com/sidecar: fargate` (provider fargate); sets
// `shareProcessNamespace: true`; configuration `datadog-webhook` (config
// `admission_controller.webhook_name`), **reinvocationPolicy IfNeeded by default**; no HTTP
// quit: an agent setting (PR #31543, Nov 2024) makes the sidecar exit once no other process
// is left in the Pod (it needs the shared PID namespace); no native mode found.
// Sources: DataDog/datadog-agent pkg/clusteragent/admission/mutate/agent_sidecar
// (agentSidecarContainerName, injectAgentSidecar, applyFargateOverrides), pkg/config
// (webhook_name datadog-webhook, reinvocation_policy IfNeeded), PR #23963, PR #31543;
// DataDog/datadog-operator#1116.
//
// Modelled here:
//   - Called only for Pods with the selection label (the webhook's objectSelector).
//   - Already injected: **a container named datadog-agent-injected in spec.containers only**
//     (injectAgentSidecar). The provider's overrides are applied every time, the sidecar
//     added or not, and change nothing when already applied: shareProcessNamespace, the
//     sockets volume mounted in every container, the agent's and the apps' variables.
//     So when Datadog is re-invoked (IfNeeded) after a later webhook moved its sidecar to
//     initContainers, it adds a second one, and the API server refuses the Pod (`Duplicate
//     value`): the fault sexton must avoid.
//   - failurePolicy Ignore is the Cluster Agent's default (`admission_controller.failure_policy`,
//     guess); the webhook's name, the image, the resources and the agent's variables are
//     guesses.

var datadog = vendor{
	inject: datadogInject,
	hook: hook{
		Configuration:  "datadog-webhook",
		Webhook:        "datadog.webhook.agent.sidecar",
		FailurePolicy:  "Ignore",
		Reinvocation:   "IfNeeded",
		Operations:     []string{"CREATE"},
		ObjectSelector: obj{"matchLabels": obj{"agent.datadoghq.com/sidecar": "fargate"}},
		TimeoutSeconds: 10,
	},
}

const datadogAgent = "datadog-agent-injected"

func datadogInject(p *Pod, _ options) (string, error) {
	if p.Label("agent.datadoghq.com/sidecar") != "fargate" {
		return "no label agent.datadoghq.com/sidecar: fargate", nil
	}
	leftAlone := ""
	if p.Has("containers", datadogAgent) {
		leftAlone = "a container " + datadogAgent + " in spec.containers (overrides applied again)"
	} else {
		p.Insert("containers", -1, datadogAgentContainer())
	}
	datadogFargateOverrides(p)
	return leftAlone, nil
}

func datadogAgentContainer() obj {
	return template(`{
		"name": "datadog-agent-injected",
		"image": "gcr.io/datadoghq/agent:7.71.1",
		"env": [
			{"name": "DD_API_KEY", "valueFrom": {"secretKeyRef": {"name": "datadog-secret", "key": "api-key"}}},
			{"name": "DD_SITE", "value": "datadoghq.com"},
			{"name": "DD_CLUSTER_NAME", "value": ""},
			{"name": "DD_KUBERNETES_KUBELET_NODENAME", "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "spec.nodeName"}}},
			{"name": "DD_LANGUAGE_DETECTION_ENABLED", "value": "false"}
		],
		"resources": {"limits": {"cpu": "200m", "memory": "256Mi"}, "requests": {"cpu": "200m", "memory": "256Mi"}}
	}`)
}

// datadogFargateOverrides is applyFargateOverrides: idempotent.
func datadogFargateOverrides(p *Pod) {
	p.spec()["shareProcessNamespace"] = true
	p.AddVolume(template(`{"name": "ddsockets", "emptyDir": {}}`))
	sockets := template(`{"name": "ddsockets", "mountPath": "/var/run/datadog"}`)
	for _, c := range p.List("containers") {
		Mount(c, sockets)
		if nameOf(c) == datadogAgent {
			SetEnv(c, "DD_EKS_FARGATE", "true")
			SetEnv(c, "DD_APM_RECEIVER_SOCKET", "/var/run/datadog/apm.socket")
			SetEnv(c, "DD_DOGSTATSD_SOCKET", "/var/run/datadog/dsd.socket")
			continue
		}
		SetEnv(c, "DD_TRACE_AGENT_URL", "unix:///var/run/datadog/apm.socket")
		SetEnv(c, "DD_DOGSTATSD_URL", "unix:///var/run/datadog/dsd.socket")
	}
}
