// An admission webhook built the way the webhooks users report are: on an old k8s.io/api
// (v0.27, before native sidecars), decoding the Pod into its types and writing back what it
// decoded. Its Container has no `restartPolicy`, so every init container loses it: a
// native sidecar becomes a plain init container. Test infrastructure only (the webhook
// tests of kubectl-sexton run it beside sexton's webhook); it changes nothing else.
//
//	old-webhook ADDR CERT KEY
package main

import (
	"encoding/json"
	"log"
	"net/http"
	"os"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
)

func main() {
	if len(os.Args) != 4 {
		log.Fatal("usage: old-webhook ADDR CERT KEY")
	}
	http.HandleFunc("/mutate", mutate)
	log.Printf("serving on %s", os.Args[1])
	log.Fatal(http.ListenAndServeTLS(os.Args[1], os.Args[2], os.Args[3], nil))
}

func mutate(w http.ResponseWriter, r *http.Request) {
	var review admissionv1.AdmissionReview
	if err := json.NewDecoder(r.Body).Decode(&review); err != nil || review.Request == nil {
		http.Error(w, "not an AdmissionReview", http.StatusBadRequest)
		return
	}
	response := &admissionv1.AdmissionResponse{UID: review.Request.UID, Allowed: true}
	var pod corev1.Pod
	if err := json.Unmarshal(review.Request.Object.Raw, &pod); err == nil && len(pod.Spec.InitContainers) > 0 {
		// the round trip through old types: what they do not know is gone
		inits, _ := json.Marshal(pod.Spec.InitContainers)
		patch, _ := json.Marshal([]map[string]any{
			{"op": "replace", "path": "/spec/initContainers", "value": json.RawMessage(inits)},
		})
		jsonPatch := admissionv1.PatchTypeJSONPatch
		response.Patch = patch
		response.PatchType = &jsonPatch
		log.Printf("rewrote the init containers of %s/%s%s", review.Request.Namespace, pod.Name, pod.GenerateName)
	}
	review.Response = response
	review.Request = nil
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(review)
}
