package main

// A vendor: how its injector changes a Pod (one file per vendor, with what the research
// notes say and where a detail is a guess), and the MutatingWebhookConfiguration it installs
// by default, whose name decides where the API server calls it among the others (it sorts
// configurations by name) and whose reinvocationPolicy decides whether it is called again
// after a later webhook changed the Pod.
//
// Research notes: injected-sidecars-2026.md, sections 0 and 1 (the project's shared research;
// its sources are named beside each vendor).

import (
	"fmt"
	"sort"
	"strings"
)

type vendor struct {
	// inject changes p as the vendor's injector does; it returns why it left p alone ("" when
	// it did not), or an error when the vendor refuses the Pod.
	inject func(p *Pod, o options) (leftAlone string, err error)
	hook   hook
	// fixedQuitPort: the vendor's quit port cannot be configured (--quit-port is refused).
	fixedQuitPort bool
}

// hook is the vendor's default MutatingWebhookConfiguration, reduced to what decides when
// and how the API server calls it.
type hook struct {
	Configuration string // metadata.name: the order among configurations
	Webhook       string // webhooks[0].name
	FailurePolicy string
	Reinvocation  string
	Operations    []string
	// ObjectSelector: the vendor's own, when it has one (Datadog's selection label)
	ObjectSelector obj
	TimeoutSeconds int
}

// options: the flags that change what is injected.
type options struct {
	image    string   // --image: every container the vendor adds runs this image
	command  []string // --sidecar-command: the command of the vendor's sidecars
	asArgs   bool     // --sidecar-args: the same program as the sidecars' args, command unset
	quitPort int      // --quit-port: the quit endpoint's port instead of the vendor's default
}

var vendors = map[string]vendor{
	"istio":    istio,
	"linkerd":  linkerd,
	"vault":    vault,
	"consul":   consul,
	"dapr":     dapr,
	"datadog":  datadog,
	"cloudsql": cloudsql,
	"kuma":     kuma,
}

func vendorNames() string {
	var n []string
	for k := range vendors {
		n = append(n, k)
	}
	sort.Strings(n)
	return strings.Join(n, ", ") + ", " + moverPrefix + "CONTAINER"
}

// lookup finds the vendor called name (or the test's mover, mover.go).
func lookup(name string) (vendor, error) {
	if c, ok := strings.CutPrefix(name, moverPrefix); ok {
		if c == "" {
			return vendor{}, fmt.Errorf("--vendor %s needs a container name after the colon", name)
		}
		return mover(c), nil
	}
	v, ok := vendors[name]
	if !ok {
		return vendor{}, fmt.Errorf("--vendor: unknown vendor %q (one of: %s)", name, vendorNames())
	}
	return v, nil
}

// configuration is the vendor's MutatingWebhookConfiguration, named name (the vendor's
// default when ""), calling url with caBundle (base64 PEM), on the namespaces labelled
// label (KEY=VALUE) only: the tests' namespaces, never another test's.
func (v vendor) configuration(name, url, caBundle, label string) (obj, error) {
	key, value, ok := strings.Cut(label, "=")
	if !ok || key == "" {
		return nil, fmt.Errorf("--namespace-label must be KEY=VALUE, not %q", label)
	}
	if name == "" {
		name = v.hook.Configuration
	}
	var ops []any
	for _, op := range v.hook.Operations {
		ops = append(ops, op)
	}
	webhook := obj{
		"name":                    v.hook.Webhook,
		"admissionReviewVersions": []any{"v1"},
		"clientConfig":            obj{"url": url, "caBundle": caBundle},
		"rules": []any{obj{"operations": ops, "apiGroups": []any{""}, "apiVersions": []any{"v1"},
			"resources": []any{"pods"}, "scope": "*"}},
		"namespaceSelector":  obj{"matchLabels": obj{key: value}},
		"failurePolicy":      v.hook.FailurePolicy,
		"reinvocationPolicy": v.hook.Reinvocation,
		"sideEffects":        "None",
		"timeoutSeconds":     v.hook.TimeoutSeconds,
		"matchPolicy":        "Equivalent",
	}
	if v.hook.ObjectSelector != nil {
		webhook["objectSelector"] = v.hook.ObjectSelector
	}
	return obj{
		"apiVersion": "admissionregistration.k8s.io/v1",
		"kind":       "MutatingWebhookConfiguration",
		"metadata":   obj{"name": name},
		"webhooks":   []any{webhook},
	}, nil
}
