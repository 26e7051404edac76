// Stand-ins of the admission webhooks with which vendors inject their sidecars into Pods:
// Istio, Linkerd, Vault, Consul, Dapr, Datadog, the Cloud SQL Auth Proxy operator and Kuma
// (one file each, saying what the research notes and the vendor's sources say and which
// details are guesses). Test infrastructure only: the tests of sexton's recognition of
// injected sidecars register them on the test API server under the vendors' real
// configuration names and reinvocation policies, so that the API server orders them around
// sexton's webhook as in a real cluster (crates/testbed/src/vendor.rs).
//
// It edits the Pod as generic JSON and answers with a JSON patch of what changed: unlike a
// webhook built on k8s.io/api types (testenv/old-webhook), it never drops a field.
//
//	vendor-webhook --vendor NAME --listen ADDR --cert FILE --key FILE
//	               [--image IMAGE] [--sidecar-command JSON | --sidecar-args JSON] [--quit-port N]
//	vendor-webhook --vendor NAME --print-configuration --url URL --ca-bundle FILE
//	               --namespace-label KEY=VALUE [--configuration-name NAME]
//
// The first serves POST /mutate over TLS; --image, --sidecar-command (or --sidecar-args) and
// --quit-port make the
// vendor's containers runnable on the end-to-end tests' node (node.go). The second prints
// the vendor's MutatingWebhookConfiguration (JSON) calling URL, trusting the PEM in FILE,
// on the namespaces labelled KEY=VALUE only. NAME is one of the vendors, or native:CONTAINER
// (mover.go). Each review is logged on one line: the Pod, what was injected or why it was
// left alone.
package main

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net/http"
	"os"
	"strconv"
	"strings"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintf(os.Stderr, "vendor-webhook: %v\n", err)
		os.Exit(2)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("vendor-webhook", flag.ContinueOnError)
	fs.SetOutput(io.Discard) // (one line of error, below, instead of the usage)
	var (
		name       = fs.String("vendor", "", "")
		listen     = fs.String("listen", "", "")
		cert       = fs.String("cert", "", "")
		key        = fs.String("key", "", "")
		image      = fs.String("image", "", "")
		command    = fs.String("sidecar-command", "", "")
		asArgs     = fs.String("sidecar-args", "", "")
		quitPort   = fs.String("quit-port", "", "")
		print      = fs.Bool("print-configuration", false, "")
		url        = fs.String("url", "", "")
		caBundle   = fs.String("ca-bundle", "", "")
		label      = fs.String("namespace-label", "", "")
		configName = fs.String("configuration-name", "", "")
	)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	if *name == "" {
		return fmt.Errorf("--vendor is required (one of: %s)", vendorNames())
	}
	v, err := lookup(*name)
	if err != nil {
		return err
	}
	if *print {
		return printConfiguration(v, *configName, *url, *caBundle, *label)
	}
	if *command != "" && *asArgs != "" {
		return errors.New("--sidecar-command and --sidecar-args cannot be used together")
	}
	flagName := "--sidecar-command"
	if *asArgs != "" {
		*command, flagName = *asArgs, "--sidecar-args"
	}
	o, err := parseOptions(v, *name, *image, *command, *quitPort)
	if err != nil {
		return fmt.Errorf("%s%s", flagName, strings.TrimPrefix(err.Error(), "--sidecar-command"))
	}
	o.asArgs = *asArgs != ""
	if err != nil {
		return err
	}
	for flagName, value := range map[string]string{"--listen": *listen, "--cert": *cert, "--key": *key} {
		if value == "" {
			return fmt.Errorf("%s is required", flagName)
		}
	}
	s := &server{name: *name, vendor: v, options: o}
	mux := http.NewServeMux()
	mux.HandleFunc("/mutate", s.mutate)
	log.Printf("%s: serving on %s", *name, *listen)
	return http.ListenAndServeTLS(*listen, *cert, *key, mux)
}

func parseOptions(v vendor, name, image, command, quitPort string) (options, error) {
	o := options{image: image}
	if command != "" {
		if err := json.Unmarshal([]byte(command), &o.command); err != nil || len(o.command) == 0 {
			return o, fmt.Errorf("--sidecar-command must be a JSON array of strings, not %q", command)
		}
	}
	if quitPort != "" {
		n, err := strconv.Atoi(quitPort)
		if err != nil || n < 1 || n > 65535 {
			return o, fmt.Errorf("--quit-port must be a port number (1-65535), not %q", quitPort)
		}
		if v.fixedQuitPort {
			return o, fmt.Errorf("--quit-port: %s's quit port is fixed (its sidecar cannot move it)", name)
		}
		o.quitPort = n
	}
	return o, nil
}

func printConfiguration(v vendor, name, url, caFile, label string) error {
	if url == "" || caFile == "" || label == "" {
		return errors.New("--print-configuration needs --url, --ca-bundle and --namespace-label")
	}
	ca, err := os.ReadFile(caFile)
	if err != nil {
		return fmt.Errorf("--ca-bundle: %v", err)
	}
	c, err := v.configuration(name, url, base64.StdEncoding.EncodeToString(ca), label)
	if err != nil {
		return err
	}
	return json.NewEncoder(os.Stdout).Encode(c)
}

type server struct {
	name    string
	vendor  vendor
	options options
}

// mutate answers one AdmissionReview.
func (s *server) mutate(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 16<<20))
	var review obj
	if err == nil {
		var v any
		if v, err = parse(body); err == nil {
			review, _ = v.(obj)
		}
	}
	request, _ := review["request"].(obj)
	if request == nil {
		http.Error(w, "not an AdmissionReview", http.StatusBadRequest)
		return
	}
	response := obj{"uid": request["uid"], "allowed": true}
	if kind, _ := request["kind"].(obj); str(kind["kind"]) == "Pod" {
		s.review(request, response)
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(obj{
		"apiVersion": str(review["apiVersion"]),
		"kind":       "AdmissionReview",
		"response":   response,
	})
}

// review runs the vendor on the Pod of request and puts its patch, or its refusal, in
// response.
func (s *server) review(request, response obj) {
	before, _ := request["object"].(obj)
	if before == nil {
		return
	}
	p := &Pod{o: clone(before).(obj), Namespace: str(request["namespace"])}
	who := fmt.Sprintf("%s %s/%s", str(request["operation"]), p.Namespace, p.Name())
	leftAlone, err := s.vendor.inject(p, s.options)
	if err != nil {
		response["allowed"] = false
		response["status"] = obj{"message": err.Error(), "code": 400}
		log.Printf("%s: %s: refused: %v", s.name, who, err)
		return
	}
	forNode(p, before, s.options)
	patch := patchFor(before, p.o)
	if len(patch) > 0 {
		b, _ := json.Marshal(patch)
		response["patchType"] = "JSONPatch"
		response["patch"] = b // (base64 in JSON)
	}
	switch {
	case leftAlone != "" && len(patch) == 0:
		log.Printf("%s: %s: left alone: %s", s.name, who, leftAlone)
	case leftAlone != "":
		log.Printf("%s: %s: no sidecar added (%s); initContainers %v, containers %v", s.name, who,
			leftAlone, p.Names("initContainers"), p.Names("containers"))
	default:
		log.Printf("%s: %s: injected: initContainers %v, containers %v", s.name, who,
			p.Names("initContainers"), p.Names("containers"))
	}
}
