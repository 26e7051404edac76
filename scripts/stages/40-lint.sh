# shellcheck shell=bash disable=SC2034
# The chart, the workflows and the documentation site. The chart's server-side dry runs
# are in crates/kubectl-sexton/tests/chart.rs, the docs' generated references in
# crates/kubectl-sexton/tests/docs.rs. helm and actionlint come from the Go builds.
STAGE_HELP="helm lint of the chart, deploy/ rendered from it, actionlint of the workflows,
the documentation site (scripts/book.sh: mdbook, links, a screenshot)"
STAGE_NEEDS="go-builds book-tools"
run() {
  HELM="$(scripts/tools.sh helm)"; export HELM
  "$HELM" lint --strict charts/sexton
  scripts/manifests.sh check              # deploy/ is the chart rendered
  "$(scripts/tools.sh actionlint)" .github/workflows/*.yaml
  scripts/book.sh                         # mdbook build docs, every link and anchor, a screenshot
  python3 bench/lib/check.py --self-test  # the benchmarks' checker flags what it is for
}
