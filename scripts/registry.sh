#!/usr/bin/env bash
# Container registries for tests, on 127.0.0.1 only, plain HTTP: Debian's docker-registry
# (the distribution v2 registry) three times, with test images pushed by skopeo.
#
#   anonymous  127.0.0.1:15000  no authentication
#   basic      127.0.0.1:15001  htpasswd basic authentication
#   token      127.0.0.1:15002  bearer tokens from the token server on 127.0.0.1:15003
#                               (scripts/registry-token.py; the same user and password)
#
# The images, on each (built by e2e/mkimage.py):
#   sexton-test/app:1    ENTRYPOINT ["/bin/app","--serve"]  CMD ["--port","8080"]  (Docker manifest)
#   sexton-test/side:1   CMD ["proxy","--home=$HOME"], no ENTRYPOINT               (OCI manifest)
#   sexton-test/multi:1  an index: linux/amd64 with CMD ["amd64"], linux/arm64/v8 with CMD ["arm64"]
#
#   scripts/registry.sh up      install what is missing (Debian packages), start, push (idempotent)
#   scripts/registry.sh env     print the addresses, user, password and digests as `export` lines
#   scripts/registry.sh down    stop what `up` started (by PID) and remove its state
#   scripts/registry.sh status  say whether it is up
#
# Settings (environment): SEXTON_REGISTRY_STATE (default /tmp/sexton-registry, or
# /tmp/sexton-registry-PORT with SEXTON_REGISTRY_PORT set), SEXTON_REGISTRY_PORT (15000: the
# first of four consecutive ports). Helpers: scripts/lib.sh.
set -euo pipefail

# shellcheck source=scripts/lib.sh
. "$(dirname "$0")/lib.sh"
# (registries on other ports get a state directory of their own unless told otherwise)
STATE="${SEXTON_REGISTRY_STATE:-/tmp/sexton-registry${SEXTON_REGISTRY_PORT:+-$SEXTON_REGISTRY_PORT}}"
lib_init registry "$STATE"
# (not 5000: where systemd runs, Debian's docker-registry package starts a registry there)
BASE="${SEXTON_REGISTRY_PORT:-15000}"
ANON_PORT=$BASE BASIC_PORT=$((BASE + 1)) TOKEN_PORT=$((BASE + 2)) REALM_PORT=$((BASE + 3))
USER_NAME=sexton
SERVICE=sexton-test-registry ISSUER=sexton-test-token
# the token server's Python: Debian's, which has python3-jwt (another python3 may come first)
PY=/usr/bin/python3
REGISTRIES=(anonymous basic token)

port_of() {
  case "$1" in anonymous) echo "$ANON_PORT" ;; basic) echo "$BASIC_PORT" ;; token) echo "$TOKEN_PORT" ;; esac
}

install_missing() {
  local pkgs=()
  command -v docker-registry >/dev/null || pkgs+=(docker-registry)
  command -v skopeo >/dev/null || pkgs+=(skopeo)
  command -v htpasswd >/dev/null || pkgs+=(apache2-utils)
  command -v curl >/dev/null || pkgs+=(curl)
  command -v openssl >/dev/null || pkgs+=(openssl)
  "$PY" -c 'import jwt, cryptography' 2>/dev/null || pkgs+=(python3-jwt python3-cryptography)
  [ ${#pkgs[@]} -eq 0 ] && return 0
  apt_install "${pkgs[@]}"
}

# answers PORT: the registry serves its API (200, or 401 where authentication is on).
answers() {
  local code
  code=$(curl -s -o /dev/null --max-time 2 -w '%{http_code}' "http://127.0.0.1:$1/v2/") || return 1
  [ "$code" = 200 ] || [ "$code" = 401 ]
}

ready() {
  local r
  [ -f "$STATE/pushed" ] || return 1
  for r in "${REGISTRIES[@]}" token-server; do alive "$r" || return 1; done
  for r in "${REGISTRIES[@]}"; do answers "$(port_of "$r")" || return 1; done
}

# config NAME: the registry's configuration (distribution's YAML) with its own storage.
config() {
  local name=$1 port
  port=$(port_of "$name")
  cat <<EOF
version: 0.1
log: {level: warn, accesslog: {disabled: true}}
storage:
  filesystem: {rootdirectory: $STATE/$name}
  delete: {enabled: true}
http:
  addr: 127.0.0.1:$port
  secret: $(openssl rand -hex 16)
EOF
  case "$name" in
    basic) printf 'auth:\n  htpasswd: {realm: sexton-test, path: %s}\n' "$STATE/htpasswd" ;;
    token) printf 'auth:\n  token: {realm: "http://127.0.0.1:%s/auth", service: %s, issuer: %s, rootcertbundle: %s}\n' \
      "$REALM_PORT" "$SERVICE" "$ISSUER" "$STATE/token/ca.crt" ;;
  esac
}

# manifest_digest REGISTRY REPO:TAG ACCEPT: the digest the registry gives the manifest.
manifest_digest() {
  curl -sf --max-time 10 -o /dev/null -D - -H "Accept: $3" "http://$1/v2/${2%%:*}/manifests/${2#*:}" |
    sed -n 's/^[Dd]ocker-[Cc]ontent-[Dd]igest: *\([^[:space:]]*\).*/\1/p'
}

skopeo_() { skopeo --policy "$STATE/policy.json" "$@"; }

# push: the images built, pushed to the anonymous registry, and copied from there to the
# others (skopeo --all keeps the index and its digests).
push() {
  local img="$STATE/images" anon="127.0.0.1:$ANON_PORT" mk=("$PY" "$ROOT/e2e/mkimage.py") d
  mkdir -p "$img"
  echo '{"default":[{"type":"insecureAcceptAnything"}]}' >"$STATE/policy.json"
  "${mk[@]}" "$img/app.tar" sexton-test/app:1 --entrypoint '["/bin/app","--serve"]' --cmd '["--port","8080"]'
  # shellcheck disable=SC2016  # a literal $HOME: the image's own, which wrap must keep
  "${mk[@]}" "$img/side.tar" sexton-test/side:1 --cmd '["proxy","--home=$HOME"]'
  "${mk[@]}" "$img/amd64.tar" sexton-test/multi:amd64 --cmd '["amd64"]'
  "${mk[@]}" "$img/arm64.tar" sexton-test/multi:arm64 --arch arm64 --variant v8 --cmd '["arm64"]'
  quietly skopeo_ copy --dest-tls-verify=false "docker-archive:$img/app.tar" "docker://$anon/sexton-test/app:1"
  quietly skopeo_ copy --dest-tls-verify=false --format oci "docker-archive:$img/side.tar" "docker://$anon/sexton-test/side:1"
  local v2=application/vnd.docker.distribution.manifest.v2+json entries=()
  for arch in amd64 arm64; do
    quietly skopeo_ copy --dest-tls-verify=false "docker-archive:$img/$arch.tar" "docker://$anon/sexton-test/multi:$arch"
    curl -sf --max-time 10 -H "Accept: $v2" -o "$img/$arch.json" "http://$anon/v2/sexton-test/multi/manifests/$arch" ||
      die "cannot read back sexton-test/multi:$arch"
    d=$(sha256sum "$img/$arch.json" | cut -d' ' -f1)
    local platform='"os":"linux","architecture":"amd64"'
    [ "$arch" = arm64 ] && platform='"os":"linux","architecture":"arm64","variant":"v8"'
    entries+=("{\"mediaType\":\"$v2\",\"digest\":\"sha256:$d\",\"size\":$(stat -c %s "$img/$arch.json"),\"platform\":{$platform}}")
  done
  local list=application/vnd.docker.distribution.manifest.list.v2+json
  (IFS=,; echo "{\"schemaVersion\":2,\"mediaType\":\"$list\",\"manifests\":[${entries[*]}]}") >"$img/index.json"
  curl -sf --max-time 10 -X PUT -H "Content-Type: $list" --data-binary "@$img/index.json" \
    "http://$anon/v2/sexton-test/multi/manifests/1" >/dev/null || die "cannot push the index sexton-test/multi:1"
  for r in basic token; do
    for i in app:1 side:1 multi:1; do
      quietly skopeo_ copy --all --src-tls-verify=false --dest-tls-verify=false \
        --dest-creds "$USER_NAME:$(cat "$STATE/password")" "docker://$anon/sexton-test/$i" \
        "docker://127.0.0.1:$(port_of "$r")/sexton-test/$i"
    done
  done
  manifest_digest "$anon" sexton-test/app:1 "$v2" >"$STATE/app.digest"
  [ -s "$STATE/app.digest" ] || die "no digest for sexton-test/app:1"
  touch "$STATE/pushed"
}

up() {
  if ready; then
    log "already up (127.0.0.1:$ANON_PORT anonymous, :$BASIC_PORT basic, :$TOKEN_PORT token)"
    return 0
  fi
  install_missing
  # Leftovers of a half-started run are ours to clean; a foreign listener is not.
  down_quiet
  ports_free "set SEXTON_REGISTRY_PORT" "$ANON_PORT" "$BASIC_PORT" "$TOKEN_PORT" "$REALM_PORT"
  mkdir -p "$STATE/token"
  openssl rand -hex 12 >"$STATE/password"
  quietly htpasswd -Bbc "$STATE/htpasswd" "$USER_NAME" "$(cat "$STATE/password")"
  ca_create "$STATE/token" "$ISSUER"
  # (9>&-: the daemons must not inherit, and so hold, the lock of `up`)
  spawn token-server "$PY" "$ROOT/scripts/registry-token.py" "$REALM_PORT" "$STATE/token/ca.key" \
    "$ISSUER" "$SERVICE" "$USER_NAME" "$STATE/password" 9>&-
  for r in "${REGISTRIES[@]}"; do
    config "$r" >"$STATE/$r.yml"
    spawn "$r" docker-registry serve "$STATE/$r.yml" 9>&-
  done
  wait_for token-server 30 port_in_use "$REALM_PORT"
  for r in "${REGISTRIES[@]}"; do wait_for "$r" 30 answers "$(port_of "$r")"; done
  push
  log "up: 127.0.0.1:$ANON_PORT anonymous, :$BASIC_PORT basic, :$TOKEN_PORT token (user $USER_NAME)"
}

down_quiet() {
  [ -d "$STATE" ] || return 0
  stop "${REGISTRIES[@]}" token-server
  rm -rf "$STATE"
}

env_() {
  ready || die "not up (scripts/registry.sh up)"
  echo "export SEXTON_REGISTRY_ANONYMOUS=127.0.0.1:$ANON_PORT"
  echo "export SEXTON_REGISTRY_BASIC=127.0.0.1:$BASIC_PORT"
  echo "export SEXTON_REGISTRY_TOKEN=127.0.0.1:$TOKEN_PORT"
  echo "export SEXTON_REGISTRY_USER=$USER_NAME"
  echo "export SEXTON_REGISTRY_PASSWORD=$(cat "$STATE/password")"
  echo "export SEXTON_REGISTRY_APP_DIGEST=$(cat "$STATE/app.digest")"
}

# One `up` or `down` at a time (two test processes may ask at once).
exec 9>"$STATE.lock"
flock -w 120 9 || die "another scripts/registry.sh has held $STATE.lock for 120s"

case "${1:-}" in
  up) up ;;
  down) down_quiet; log "down" ;;
  env) env_ ;;
  status)
    if ready; then log "up (127.0.0.1:$ANON_PORT-$REALM_PORT)"; else log "down"; exit 1; fi
    ;;
  *) echo "usage: $0 up|down|env|status" >&2; exit 2 ;;
esac
