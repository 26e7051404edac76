// The comparison anchor of bench/webhook/run.sh: the least a Go admission webhook does for the
// benchmark's injected review. net/http over TLS (HTTP/1.1 keep-alive as the API server
// calls it), the AdmissionReview and its Pod decoded into k8s.io/api's types with
// encoding/json, the marked sidecar (OpenKruise's KRUISE_TERMINATE_SIDECAR_WHEN_JOB_EXIT)
// moved to the init containers with restartPolicy Always, and the same JSON patch as
// sexton's answer (checked by measure.py), one JSON log line per injection.
//
// It is a floor, not a second implementation: none of sexton-inject's decisions (auto,
// the cluster's version, probes, wrap, refusals, repairs), no metrics, and it handles the
// shape of the benchmark's Pods (no annotations, no init containers) only.
package main

import (
	"crypto/tls"
	"encoding/json"
	"flag"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
)

const marker = "KRUISE_TERMINATE_SIDECAR_WHEN_JOB_EXIT"

type op struct {
	Op    string `json:"op"`
	Path  string `json:"path"`
	Value any    `json:"value,omitempty"`
}

// The record of sexton's annotation sexton.dev/injected, in its field order.
type record struct {
	Version      int             `json:"version"`
	Mechanism    string          `json:"mechanism"`
	Sidecars     []string        `json:"sidecars"`
	Mains        []string        `json:"mains"`
	Changed      []changed       `json:"changed"`
	Moved        []moved         `json:"moved"`
	CreatedLists []string        `json:"createdLists"`
	Absent       map[string]bool `json:"absent"`
}

type changed struct {
	Name   string `json:"name"`
	Fields fields `json:"fields"`
}

type fields struct {
	Env           []corev1.EnvVar `json:"env"`
	RestartPolicy *string         `json:"restartPolicy"`
}

type moved struct {
	Name  string `json:"name"`
	Index int    `json:"index"`
}

func marked(c *corev1.Container) bool {
	for _, e := range c.Env {
		if e.Name == marker && strings.EqualFold(e.Value, "true") {
			return true
		}
	}
	return false
}

// patch: the marked sidecars moved to the init containers as native sidecars.
func patch(pod *corev1.Pod) ([]op, *record) {
	rec := &record{Version: 1, Mechanism: "native", Absent: map[string]bool{}}
	var ops []op
	var inits []corev1.Container
	removed := 0
	for i := range pod.Spec.Containers {
		c := pod.Spec.Containers[i]
		if !marked(&c) {
			rec.Mains = append(rec.Mains, c.Name)
			continue
		}
		rec.Sidecars = append(rec.Sidecars, c.Name)
		rec.Changed = append(rec.Changed, changed{Name: c.Name, Fields: fields{Env: c.Env, RestartPolicy: nil}})
		rec.Moved = append(rec.Moved, moved{Name: c.Name, Index: i})
		var env []corev1.EnvVar
		for _, e := range c.Env {
			if e.Name != marker {
				env = append(env, e)
			}
		}
		c.Env = env
		always := corev1.ContainerRestartPolicyAlways
		c.RestartPolicy = &always
		inits = append(inits, c)
		ops = append(ops, op{Op: "remove", Path: "/spec/containers/" + strconv.Itoa(i-removed)})
		removed++
	}
	if len(inits) == 0 || len(rec.Mains) == 0 {
		return nil, nil
	}
	if len(pod.Spec.InitContainers) == 0 {
		rec.CreatedLists = []string{"initContainers"}
		ops = append(ops, op{Op: "add", Path: "/spec/initContainers", Value: inits})
	} else {
		for _, c := range inits {
			ops = append(ops, op{Op: "add", Path: "/spec/initContainers/-", Value: c})
		}
	}
	if pod.Annotations == nil {
		rec.Absent["annotations"] = true
	}
	text, _ := json.Marshal(rec)
	if pod.Annotations == nil {
		ops = append([]op{{Op: "add", Path: "/metadata/annotations", Value: map[string]string{"sexton.dev/injected": string(text)}}}, ops...)
	} else {
		ops = append([]op{{Op: "add", Path: "/metadata/annotations/sexton.dev~1injected", Value: string(text)}}, ops...)
	}
	return ops, rec
}

func mutate(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 8<<20))
	if err != nil {
		http.Error(w, err.Error(), http.StatusRequestEntityTooLarge)
		return
	}
	var review admissionv1.AdmissionReview
	if err := json.Unmarshal(body, &review); err != nil || review.Request == nil {
		http.Error(w, "not an AdmissionReview", http.StatusBadRequest)
		return
	}
	req := review.Request
	resp := &admissionv1.AdmissionResponse{UID: req.UID, Allowed: true}
	if req.Kind.Kind == "Pod" && req.Kind.Group == "" && req.Operation == admissionv1.Create {
		var pod corev1.Pod
		if err := json.Unmarshal(req.Object.Raw, &pod); err == nil {
			if ops, rec := patch(&pod); ops != nil {
				if p, err := json.Marshal(ops); err == nil {
					pt := admissionv1.PatchTypeJSONPatch
					resp.Patch, resp.PatchType = p, &pt
					slog.Info("injected", "pod", req.Namespace+"/"+pod.GenerateName, "mechanism", rec.Mechanism,
						"sidecars", rec.Sidecars, "dry_run", req.DryRun != nil && *req.DryRun)
				}
			}
		}
	}
	out, _ := json.Marshal(admissionv1.AdmissionReview{TypeMeta: review.TypeMeta, Response: resp})
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(out)
}

func main() {
	listen := flag.String("listen", "127.0.0.1:0", "address")
	certFile := flag.String("tls-cert-file", "", "PEM certificate")
	keyFile := flag.String("tls-key-file", "", "PEM key")
	flag.Parse()
	slog.SetDefault(slog.New(slog.NewJSONHandler(os.Stderr, nil)))
	cert, err := tls.LoadX509KeyPair(*certFile, *keyFile)
	if err != nil {
		slog.Error("certificate", "error", err)
		os.Exit(2)
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		slog.Error("listen", "error", err)
		os.Exit(2)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /mutate", mutate)
	srv := &http.Server{
		Handler:           mux,
		TLSConfig:         &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12},
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       90 * time.Second,
	}
	slog.Info("serving the webhook", "bound", ln.Addr().String())
	if err := srv.ServeTLS(ln, "", ""); err != nil {
		slog.Error("serve", "error", err)
		os.Exit(1)
	}
}
