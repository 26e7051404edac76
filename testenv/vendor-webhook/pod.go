package main

// The Pod as generic JSON: every field the API server sent is kept, known to this program or
// not (unlike a webhook built on k8s.io/api types, which drops what its version does not
// know: testenv/old-webhook). Numbers stay json.Number, so they go back out as they came.

import (
	"bytes"
	"encoding/json"
	"fmt"
)

type obj = map[string]any

// parse decodes JSON, numbers as json.Number.
func parse(b []byte) (any, error) {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, err
	}
	return v, nil
}

// template parses a vendor's container or volume written as JSON in this program's source.
func template(s string) obj {
	v, err := parse([]byte(s))
	if err != nil {
		panic(fmt.Sprintf("a template of this program is not JSON: %v\n%s", err, s))
	}
	return v.(obj)
}

// clone is a deep copy.
func clone(v any) any {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	c, err := parse(b)
	if err != nil {
		panic(err)
	}
	return c
}

func str(v any) string {
	s, _ := v.(string)
	return s
}

// Pod is the Pod under review, with what the vendor's injector learns about it.
type Pod struct {
	o         obj
	Namespace string // the request's namespace (a new Pod's metadata may have none)
	// QuitPort and QuitPath: the quit endpoint of the sidecar the vendor added, as configured
	// for this Pod (0: none); the end-to-end sidecar serves it (e2e.go).
	QuitPort int
	QuitPath string
}

// member returns o[key] as an object, creating it when create is set.
func member(o obj, key string, create bool) obj {
	if c, ok := o[key].(obj); ok {
		return c
	}
	if !create {
		return obj{}
	}
	c := obj{}
	o[key] = c
	return c
}

func (p *Pod) meta() obj { return member(p.o, "metadata", true) }
func (p *Pod) spec() obj { return member(p.o, "spec", true) }

// Name is the Pod's name, or its generateName (a Job's Pod has no name yet).
func (p *Pod) Name() string {
	if n := str(p.meta()["name"]); n != "" {
		return n
	}
	return str(p.meta()["generateName"])
}

// Annotation and Label read without creating anything ("" when absent).
func (p *Pod) Annotation(k string) string { return str(member(p.meta(), "annotations", false)[k]) }
func (p *Pod) Label(k string) string      { return str(member(p.meta(), "labels", false)[k]) }

func (p *Pod) HasAnnotation(k string) bool {
	_, ok := member(p.meta(), "annotations", false)[k]
	return ok
}

func (p *Pod) SetAnnotation(k, v string) { member(p.meta(), "annotations", true)[k] = v }
func (p *Pod) SetLabel(k, v string)      { member(p.meta(), "labels", true)[k] = v }

func (p *Pod) HostNetwork() bool { return p.spec()["hostNetwork"] == true }

// Owner is the kind and name of the Pod's controller (a Job for a Job's Pod), or "".
func (p *Pod) Owner() (kind, name string) {
	refs, _ := p.meta()["ownerReferences"].([]any)
	for _, r := range refs {
		if ref, ok := r.(obj); ok && ref["controller"] == true {
			return str(ref["kind"]), str(ref["name"])
		}
	}
	return "", ""
}

// List is spec.containers or spec.initContainers ("containers", "initContainers").
func (p *Pod) List(list string) []any {
	l, _ := p.spec()[list].([]any)
	return l
}

func (p *Pod) SetList(list string, l []any) { p.spec()[list] = l }

// Index is the place of the container named name in list, or -1.
func (p *Pod) Index(list, name string) int {
	for i, c := range p.List(list) {
		if nameOf(c) == name {
			return i
		}
	}
	return -1
}

func (p *Pod) Has(list, name string) bool { return p.Index(list, name) >= 0 }

// Insert puts c at place i of list (-1: at the end).
func (p *Pod) Insert(list string, i int, c obj) {
	l := p.List(list)
	if i < 0 || i > len(l) {
		i = len(l)
	}
	l = append(l[:i:i], append([]any{c}, l[i:]...)...)
	p.SetList(list, l)
}

// Names lists the names of the containers of list, in order.
func (p *Pod) Names(list string) []string {
	var n []string
	for _, c := range p.List(list) {
		n = append(n, nameOf(c))
	}
	return n
}

// AddVolume adds v unless the Pod has a volume of its name (a vendor's volume from an
// earlier injection).
func (p *Pod) AddVolume(v obj) {
	for _, old := range p.List("volumes") {
		if nameOf(old) == nameOf(v) {
			return
		}
	}
	p.Insert("volumes", -1, v)
}

func nameOf(c any) string {
	if o, ok := c.(obj); ok {
		return str(o["name"])
	}
	return ""
}

// Mount adds the volume mount m to container c unless c mounts something at its path.
func Mount(c any, m obj) {
	co, ok := c.(obj)
	if !ok {
		return
	}
	mounts, _ := co["volumeMounts"].([]any)
	for _, old := range mounts {
		if o, ok := old.(obj); ok && o["mountPath"] == m["mountPath"] {
			return
		}
	}
	co["volumeMounts"] = append(mounts, clone(m))
}

// SetEnv sets the variable name of container c to value (added, or replaced in place).
func SetEnv(c any, name, value string) {
	co, ok := c.(obj)
	if !ok {
		return
	}
	env, _ := co["env"].([]any)
	for _, e := range env {
		if o, ok := e.(obj); ok && o["name"] == name {
			delete(o, "valueFrom")
			o["value"] = value
			return
		}
	}
	co["env"] = append(env, obj{"name": name, "value": value})
}

// Env is the value of variable name of container c ("" when absent).
func Env(c any, name string) string {
	co, _ := c.(obj)
	env, _ := co["env"].([]any)
	for _, e := range env {
		if o, ok := e.(obj); ok && o["name"] == name {
			return str(o["value"])
		}
	}
	return ""
}

// serviceAccountMount is the mount of the Pod's ServiceAccount token that the API server's
// ServiceAccount admission plugin gave its first container that has one (it runs before the
// webhooks), which injectors copy into their own containers.
func (p *Pod) serviceAccountMount() obj {
	for _, c := range p.List("containers") {
		co, _ := c.(obj)
		mounts, _ := co["volumeMounts"].([]any)
		for _, m := range mounts {
			if mo, ok := m.(obj); ok && mo["mountPath"] == "/var/run/secrets/kubernetes.io/serviceaccount" {
				return clone(mo).(obj)
			}
		}
	}
	return nil
}

// parseBool reads an annotation as the vendors' Go code does (strconv.ParseBool's spellings).
func parseBool(s string) (value, ok bool) {
	switch s {
	case "1", "t", "T", "TRUE", "true", "True":
		return true, true
	case "0", "f", "F", "FALSE", "false", "False":
		return false, true
	}
	return false, false
}
