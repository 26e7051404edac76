# shellcheck shell=bash disable=SC2034
# The layers (docs/architecture.md): the in-pod binary links none of the cluster side's
# crates, and the pure core nothing that does I/O. (Imports inside each crate:
# crates/kubectl-sexton/tests/layers.rs.)
STAGE_HELP="the crates' dependency rules (cargo tree; docs/architecture.md)"
STAGE_NEEDS=""
run() {
  forbidden sexton 'kube|kube-client|kube-runtime|kube-derive|kube-lease-manager|k8s-openapi|tokio|tokio-macros|hyper|prometheus-client|schemars|axum'
  forbidden sexton-core 'nix|libc|tokio|kube|kube-client|k8s-openapi|hyper|mio|socket2'
  forbidden sexton-inject 'nix|libc|tokio|kube|kube-client|k8s-openapi|hyper|mio|socket2|reqwest|oci-client'
  forbidden sexton 'sexton-inject'
}
forbidden() { # package, regex of crates it must not depend on
  local found
  found=$(cargo tree -p "$1" -e normal --prefix none | sed 's/ .*//' | grep -E "^($2)\$" | sort -u || true)
  if [ -n "$found" ]; then
    echo "$1 depends on ${found//$'\n'/ }: see docs/architecture.md" >&2; exit 1
  fi
}
