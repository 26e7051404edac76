# shellcheck shell=bash disable=SC2034
# cargo test, every crate's tests (`scripts/test.sh CARGO-TEST-ARGS`: with those arguments),
# against the test API server and registries.
STAGE_HELP="cargo test: every crate's tests, against the test API server
(scripts/testenv.sh) and registries (scripts/registry.sh), started here"
STAGE_NEEDS="build services"
run() { cargo_tests "${CARGO_ARGS[@]}"; }
