package main

// The answer: a JSON patch from the Pod as it came to the Pod as the vendor left it, one
// operation per member of metadata and spec that changed ("add" replaces a member that
// exists). What the vendor did not touch is not in the patch, so nothing is rewritten behind
// a later webhook's back, and the API server applies exactly the vendor's change.

import (
	"reflect"
	"sort"
	"strings"
)

func patchFor(before, after obj) []obj {
	var ops []obj
	for _, part := range []string{"metadata", "spec"} {
		b, a := member(before, part, false), member(after, part, false)
		for _, k := range keys(b, a) {
			path := "/" + part + "/" + pointerEscape(k)
			old, had := b[k]
			v, has := a[k]
			switch {
			case has && (!had || !reflect.DeepEqual(old, v)):
				ops = append(ops, obj{"op": "add", "path": path, "value": v})
			case had && !has:
				ops = append(ops, obj{"op": "remove", "path": path})
			}
		}
	}
	return ops
}

// keys of both objects, sorted (a stable patch, easy to read in the log).
func keys(a, b obj) []string {
	seen := map[string]bool{}
	var k []string
	for _, o := range []obj{a, b} {
		for key := range o {
			if !seen[key] {
				seen[key] = true
				k = append(k, key)
			}
		}
	}
	sort.Strings(k)
	return k
}

// pointerEscape escapes a member name for a JSON pointer (RFC 6901).
func pointerEscape(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}
