# shellcheck shell=bash disable=SC2034
# The desktop plugin, built by the desktop-build job in the background (its tools, then three
# builds at the lowest priority) and checked here: the .exe under Wine against the shipped
# Linux binary (the cluster job's), the Mach-O files' platform, CPU, links and signature.
STAGE_HELP="the plugin for macOS and Windows, cross-built and checked (scripts/desktop.sh:
the .exe under Wine against the Linux binary; the Mach-O files' platform, CPU,
links and arm64's signature)"
STAGE_NEEDS="cluster desktop-build"
run() { scripts/desktop.sh check; }
