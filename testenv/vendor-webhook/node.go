package main

// The vendor's containers made to run on the real node of the end-to-end tests, where the
// vendors' images and control planes do not exist (--image, --sidecar-command). Only what the
// vendor added is changed; the names, the places, the markers, the probes, the security
// contexts and the Pod's own containers stay the vendor's.
//   - --image: every added container runs IMAGE (imagePullPolicy IfNotPresent: the node's
//     images are imported, not pulled); their lifecycle hooks, which call the vendors'
//     binaries, are removed; the vendor's init containers run /bin/true; references to
//     ConfigMaps and Secrets of the vendor's control plane (volumes, variables) become
//     optional.
//   - --sidecar-command: the command of every added sidecar (in spec.containers, or an init
//     container with restartPolicy Always), without arguments, and with only these
//     variables: VENDOR_QUIT_PORT and VENDOR_QUIT_PATH (the vendor's quit endpoint as
//     configured for this Pod; absent when the vendor has none or it is not enabled) and
//     VENDOR_PORTS (the quit port and the ports of the sidecar's probes, space-separated).
//     quit-server.sh, beside this file, is such a sidecar for busybox.
//   - --sidecar-args: the same program written as the sidecar's args, its command unset
//     (an image without an entrypoint, such as busybox:e2e, runs args[0]): a sidecar that
//     sets no `command`, as Istio's, which a swap of its image can end.

import (
	"sort"
	"strconv"
	"strings"
)

func forNode(p *Pod, before obj, o options) {
	if o.image == "" && o.command == nil {
		return
	}
	had := map[string]bool{}
	old := &Pod{o: before}
	for _, list := range []string{"initContainers", "containers", "volumes"} {
		for _, n := range old.Names(list) {
			had[list+"/"+n] = true
		}
	}
	for _, list := range []string{"initContainers", "containers"} {
		for _, c := range p.List(list) {
			co := c.(obj)
			if had[list+"/"+nameOf(co)] {
				continue
			}
			sidecar := list == "containers" || co["restartPolicy"] == "Always"
			if o.image != "" {
				co["image"] = o.image
				co["imagePullPolicy"] = "IfNotPresent"
				delete(co, "lifecycle")
				optionalReferences(co["env"])
				if !sidecar {
					co["command"] = []any{"/bin/true"}
					delete(co, "args")
				}
			}
			if sidecar && o.command != nil {
				// The kubelet expands $(VAR) and turns $$ into $ in a container's command and args:
				// escaped, the sidecar runs exactly the command given (quit-server.sh's $$
				// would otherwise reach the shell as $).
				var cmd []any
				for _, a := range o.command {
					cmd = append(cmd, strings.ReplaceAll(a, "$", "$$"))
				}
				if o.asArgs {
					co["args"] = cmd
					delete(co, "command")
				} else {
					co["command"] = cmd
					delete(co, "args")
				}
				co["env"] = nodeEnv(p, co)
			}
		}
	}
	if o.image != "" {
		for _, v := range p.List("volumes") {
			if !had["volumes/"+nameOf(v)] {
				optionalReferences(v)
			}
		}
	}
}

// optionalReferences marks every configMap, secret, configMapKeyRef and secretKeyRef under v
// optional.
func optionalReferences(v any) {
	switch t := v.(type) {
	case []any:
		for _, e := range t {
			optionalReferences(e)
		}
	case obj:
		for k, e := range t {
			if ref, ok := e.(obj); ok && (k == "configMap" || k == "secret" || k == "configMapKeyRef" || k == "secretKeyRef") {
				ref["optional"] = true
			}
			optionalReferences(e)
		}
	}
}

func nodeEnv(p *Pod, c obj) []any {
	var env []any
	ports := map[int]bool{}
	if p.QuitPort != 0 {
		env = append(env, obj{"name": "VENDOR_QUIT_PORT", "value": strconv.Itoa(p.QuitPort)},
			obj{"name": "VENDOR_QUIT_PATH", "value": p.QuitPath})
		ports[p.QuitPort] = true
	}
	for _, probe := range []string{"readinessProbe", "livenessProbe", "startupProbe"} {
		pr, _ := c[probe].(obj)
		for _, handler := range []string{"httpGet", "tcpSocket"} {
			h, _ := pr[handler].(obj)
			if n, err := strconv.Atoi(portString(h["port"])); err == nil {
				ports[n] = true
			}
		}
	}
	var list []int
	for n := range ports {
		list = append(list, n)
	}
	sort.Ints(list)
	var s []string
	for _, n := range list {
		s = append(s, strconv.Itoa(n))
	}
	return append(env, obj{"name": "VENDOR_PORTS", "value": strings.Join(s, " ")})
}

func portString(v any) string {
	switch t := v.(type) {
	case string:
		return t
	case interface{ String() string }: // json.Number
		return t.String()
	}
	return ""
}
