#!/usr/bin/env bash
# kubectl-sexton for the desktops that run kubectl: macOS (amd64, arm64) and Windows (amd64),
# cross-built here with cargo-zigbuild (zig as the C compiler and linker; no macOS SDK, no
# MinGW), then checked:
#   - Windows: the real .exe runs under Wine (Debian's wine64): --help, version --client,
#     inject -f and uninject -f of a Job, each compared with the linux/amd64 binary's
#     output (line endings and the .exe suffix aside);
#   - macOS: each binary is a Mach-O executable for its CPU (magic, cputype, filetype) that
#     loads nothing but libSystem, libiconv and libcharset (no framework: nothing here could
#     link one).
# The binaries go to target/images/bin/{darwin-amd64,darwin-arm64,windows-amd64}/, where
# scripts/release.sh archives them.
#
#   scripts/desktop.sh          tools, build, check
#   scripts/desktop.sh tools    rustup's targets, cargo-zigbuild and zig (scripts/tools.sh,
#                               from PyPI, cached in ~/.cache/sexton-tools), Wine (apt)
#   scripts/desktop.sh build    the three binaries (one cargo, profile desktop; installs
#                               the build tools above if missing)
#   scripts/desktop.sh check    the checks above (LINUX_PLUGIN: the binary to compare with,
#                               default target/images/bin/linux-amd64/kubectl-sexton)
#
# Build cost: each target compiles kubectl-sexton's whole dependency tree (~270 crates) with
# profile `desktop` (Cargo.toml: opt-level 0, no LTO), the macOS ones fewer crates (no
# registry client there); what that costs a cold run: CONTRIBUTING.md, where a cold run's
# time goes. The Linux build is untouched (its dependencies and features are as before).
# Wine's prefix (its C: drive, made on first use): ~/.cache/sexton-wine.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
OUT="$ROOT/target/images/bin"
# platform directory, Rust target, file name
ALL_DESKTOPS=(darwin-amd64:x86_64-apple-darwin:kubectl-sexton
  darwin-arm64:aarch64-apple-darwin:kubectl-sexton
  windows-amd64:x86_64-pc-windows-gnu:kubectl-sexton.exe)
# SEXTON_DESKTOP_PLATFORMS (space-separated, default all three): the platforms built and
# checked (scripts/test.sh's full run, its desktop stage and the release: all three).
DESKTOPS=()
for d in "${ALL_DESKTOPS[@]}"; do
  case " ${SEXTON_DESKTOP_PLATFORMS:-darwin-amd64 darwin-arm64 windows-amd64} " in
    *" ${d%%:*} "*) DESKTOPS+=("$d") ;;
  esac
done
[ ${#DESKTOPS[@]} -gt 0 ] || { echo "desktop.sh: SEXTON_DESKTOP_PLATFORMS='${SEXTON_DESKTOP_PLATFORMS:-}' names none of darwin-amd64 darwin-arm64 windows-amd64" >&2; exit 2; }
# built PLATFORM: whether PLATFORM is one of this run's
built() { case " ${DESKTOPS[*]} " in *" $1:"*) return 0 ;; *) return 1 ;; esac; }
export WINEPREFIX="${XDG_CACHE_HOME:-$HOME/.cache}/sexton-wine" WINEDEBUG=-all

# shellcheck source=scripts/lib.sh
. scripts/lib.sh    # (log, die)
LIB_NAME=desktop.sh

# What the build needs: Rust's standard library for each target, cargo-zigbuild and zig.
build_tools() {
  local d t
  for d in "${DESKTOPS[@]}"; do
    t=$(echo "$d" | cut -d: -f2)
    rustup target list --installed 2>/dev/null | grep -qx "$t" || rustup target add "$t" >&2 \
      || die "no Rust standard library for $t (rustup target add $t)"
  done
  scripts/tools.sh cargo-zigbuild >/dev/null
}

# ... and what the checks need: Wine.
tools() {
  build_tools
  built windows-amd64 || return 0
  if ! command -v wine >/dev/null || [ ! -x /usr/lib/wine/wine64 ]; then
    [ "$(id -u)" = 0 ] || die "missing: wine wine64 (install them, or run as root)"
    log "installing wine wine64"
    # (waits for another apt of the same run rather than fail on dpkg's lock)
    apt-get -o DPkg::Lock::Timeout=600 update -qq >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -qq \
      --no-install-recommends wine wine64 >/dev/null
  fi
  # Made here if it can be; scripts/test.sh runs this step in the background at the lowest
  # priority, where wineboot, starved of CPU for minutes beside the foreground's builds, was
  # seen to fail with nothing but the prefix's usual messages (in a cold run). Then
  # the partial prefix is removed, and `check` makes it, in the foreground.
  if ! (wine_prefix); then
    log "the Wine prefix is left to \`desktop.sh check\`"
    wineserver -k 2>/dev/null || true
    rm -rf "$WINEPREFIX"
  fi
}

# Wine's prefix, made once, with the bcryptprimitives.dll that Debian's Wine 8 lacks and
# every Rust program for Windows needs (scripts/desktop/bcryptprimitives.c says why), built
# by zig (cargo-zigbuild's) for x86_64-windows-gnu.
wine_prefix() {
  local dll="$WINEPREFIX/drive_c/windows/system32/bcryptprimitives.dll" zigbuild
  [ -f "$dll" ] && return 0
  mkdir -p "$(dirname "$WINEPREFIX")"   # (wine makes the prefix, not its parent: none on a new machine)
  local out
  out=$(wineboot --init 2>&1) || die "wineboot --init failed (WINEPREFIX=$WINEPREFIX): $(echo "$out" | tail -3)"
  zigbuild=$(scripts/tools.sh cargo-zigbuild)
  "$(dirname "$zigbuild")/python3" -m ziglang cc -target x86_64-windows-gnu -shared -O2 \
    -o "$dll.tmp" scripts/desktop/bcryptprimitives.c -ladvapi32 \
    || die "cannot build bcryptprimitives.dll for Wine (zig cc)"
  rm -f "${dll%.dll}".{tmp.lib,tmp.pdb,lib,pdb} "$dll".{pdb,tmp.pdb}   # (zig cc's import library and symbols)
  mv "$dll.tmp" "$dll"
}

# One cargo per operating system: cargo unifies features across the targets of one build,
# and Windows's TLS features (crates/kubectl-sexton/Cargo.toml) would bring the Security
# framework into the macOS binaries, which does not link here. Both macOS targets share
# their features, so they are one build; the host's build scripts and proc-macros are
# built once for all (one target directory).
build() {
  local zigbuild d os targets
  build_tools
  zigbuild=$(scripts/tools.sh cargo-zigbuild)
  for os in windows darwin; do
    targets=()
    for d in "${DESKTOPS[@]}"; do
      case "$d" in "$os"-*) targets+=(--target "$(echo "$d" | cut -d: -f2)") ;; esac
    done
    [ ${#targets[@]} -gt 0 ] || continue
    # (cargo-zigbuild runs zig as `python3 -m ziglang`: its environment's python first)
    PATH="$(dirname "$zigbuild"):$PATH" "$zigbuild" zigbuild --profile desktop --locked \
      -p kubectl-sexton --bin kubectl-sexton "${targets[@]}"
  done
  local dir triple file
  for d in "${DESKTOPS[@]}"; do
    IFS=: read -r dir triple file <<<"$d"
    mkdir -p "$OUT/$dir"
    cp "$ROOT/target/$triple/desktop/$file" "$OUT/$dir/$file"
  done
  log "built: $(for d in "${DESKTOPS[@]}"; do printf '%s/%s ' "${d%%:*}" "${d##*:}"; done)"
}

check() {
  local macs=()
  built darwin-amd64 && macs+=("$OUT/darwin-amd64/kubectl-sexton" x86_64)
  built darwin-arm64 && macs+=("$OUT/darwin-arm64/kubectl-sexton" arm64)
  [ ${#macs[@]} -eq 0 ] || mach_o "${macs[@]}"
  if built windows-amd64; then wine_tests; fi
}

# mach_o FILE CPU...: each a Mach-O executable for macOS on that CPU, linking no framework,
# signed where macOS requires it (arm64).
mach_o() {
  python3 - "$@" <<'EOF'
import struct, sys
CPU = {"x86_64": 0x01000007, "arm64": 0x0100000C}
LOADS = {0xC, 0x80000018, 0x8000001F}  # LC_LOAD_DYLIB, LC_LOAD_WEAK_DYLIB, LC_REEXPORT_DYLIB
# (libiconv: Rust's standard library links it on Apple targets; libcharset: the libiconv.tbd
# that cargo-zigbuild links with, Apple's, re-exports it, and zig loads it too. Both are in
# every macOS's /usr/lib.)
ALLOWED = ("/usr/lib/libSystem.B.dylib", "/usr/lib/libiconv.2.dylib", "/usr/lib/libcharset.1.dylib")
args = sys.argv[1:]
for path, arch in zip(args[::2], args[1::2]):
    data = open(path, "rb").read()
    magic, cpu, _, filetype, ncmds = struct.unpack_from("<IiiII", data, 0)
    assert magic == 0xFEEDFACF, f"{path}: not a 64-bit Mach-O file (magic {magic:#x})"
    assert cpu == CPU[arch], f"{path}: cputype {cpu:#x}, not {arch} ({CPU[arch]:#x})"
    assert filetype == 2, f"{path}: Mach-O filetype {filetype}, not MH_EXECUTE"
    off, dylibs, platforms, signed = 32, [], [], False
    for _ in range(ncmds):
        cmd, size = struct.unpack_from("<II", data, off)
        if cmd in LOADS:
            name = struct.unpack_from("<I", data, off + 8)[0]
            dylibs.append(data[off + name:off + size].split(b"\0")[0].decode())
        elif cmd == 0x32:  # LC_BUILD_VERSION: the platform it runs on
            platforms.append(struct.unpack_from("<I", data, off + 8)[0])
        elif cmd == 0x1D:  # LC_CODE_SIGNATURE
            signed = True
        off += size
    assert platforms == [1], f"{path}: built for platforms {platforms}, not macOS (1)"
    # (Apple silicon runs no unsigned code: an arm64 binary without a signature, even an
    # ad-hoc one, is killed at exec; zig signs ad hoc, as Apple's linker does)
    assert signed or arch != "arm64", f"{path}: arm64 without a code signature: macOS would kill it"
    extra = [d for d in dylibs if d not in ALLOWED]
    assert not extra, f"{path}: loads {extra}: a framework needs the macOS SDK to link"
    assert "/usr/lib/libSystem.B.dylib" in dylibs, f"{path}: loads {dylibs}, not libSystem"
    print(f"desktop.sh: {path}: Mach-O executable, macOS, {arch}{', signed' if signed else ''}, loads {', '.join(dylibs)}", file=sys.stderr)
EOF
}

# wine_up DIR: one wineserver for all the commands (-p: it stays when idle; the EXIT trap
# ends it), started and shown working with a Wine builtin (cmd.exe) before the first
# command: otherwise each command starts the server and the prefix's system processes,
# and they end after it, a churn at every command.
wine_up() {
  persistent_server
  # (into a file, not a pipe: the prefix's system processes, started by this first
  # command and alive as long as the server, inherit its stdout and would hold a pipe open)
  (cd "$1" && timeout 120 wine cmd.exe /c echo wine-ok >up.out 2>&1 </dev/null) || true
  case "$(tr -d '\r' <"$1/up.out")" in
    *wine-ok*) ;;
    *) log "Wine's cmd.exe said '$(tail -1 "$1/up.out")': its prefix is made again"
       wineserver -k 2>/dev/null || true
       rm -rf "$WINEPREFIX"; wine_prefix; persistent_server ;;
  esac
}

# persistent_server: the prefix's wineserver, started with -p. Beside a server still
# running (the one wineboot started in wine_prefix stays a few seconds after its last
# client), `wineserver -p` exits 2 and leaves that one, which is not persistent; so that one
# is waited for first (`wineserver -w`), 30 s at most: a persistent server left
# by a killed check never ends, and then it serves the commands.
persistent_server() {
  timeout 30 wineserver -w || true
  wineserver -p </dev/null >/dev/null 2>&1 || log "no new persistent wineserver: another one stays up"
}

# Each command under Wine and natively: the same exit code, the same stdout and stderr
# once Windows' CRLF and the .exe suffix are taken out.
wine_tests() {
  local exe="$OUT/windows-amd64/kubectl-sexton.exe"
  local linux="${LINUX_PLUGIN:-$OUT/linux-amd64/kubectl-sexton}"
  [ -x "$linux" ] || die "$linux is missing (scripts/images.sh cluster builds it)"
  [ -f "$exe" ] || die "$exe is missing (scripts/desktop.sh build)"
  command -v wine >/dev/null || die "wine is missing (scripts/desktop.sh tools)"
  wine_prefix
  local tmp; tmp=$(mktemp -d)
  # shellcheck disable=SC2064  # (expanded now)
  trap "wineserver -k 2>/dev/null; rm -rf '$tmp'" EXIT
  wine_up "$tmp"
  cp examples/inject/job.yaml "$tmp/job.yaml"
  "$linux" inject -f "$tmp/job.yaml" >"$tmp/injected.yaml" 2>/dev/null
  local n=0
  same() { # ARGS...: the .exe and the Linux binary agree
    n=$((n + 1))
    local w=0 l=0
    (cd "$tmp" && timeout 60 "$linux" "$@" >"l.out" 2>"l.err") || l=$?
    (cd "$tmp" && timeout 120 wine "$exe" "$@" >"w.out" 2>"w.err") || w=$?
    # kubectl-sexton says something on every path (checked below on Linux's side): a
    # non-zero exit with no word at all is Wine failing to run it, seen once in a CI run,
    # and here beside CPU and disk load once in ~1 100 commands, once in 4 700 with the
    # persistent server of wine_up (exit 1, nothing on stdout or stderr, the same command
    # fine again at once). It is run once more, with Wine's error channel on for the
    # record; a second failure fails the check.
    if [ "$w" != "$l" ] && [ "$w" != 0 ] && [ ! -s "$tmp/w.out" ] && [ ! -s "$tmp/w.err" ]; then
      log "wine kubectl-sexton.exe $*: exit $w and not a word (Wine ran nothing): once more"
      # (-all first: /usr/bin/wine prints its wine32 hint unless WINEDEBUG starts so)
      (cd "$tmp" && WINEDEBUG=-all,err+all timeout 120 wine "$exe" "$@" >"w.out" 2>"w.dbg") \
        && w=0 || w=$?
      grep ':err:' "$tmp/w.dbg" | grep -v ':ntlm' | tail -5 | sed 's/^/desktop.sh:   /' >&2 || true
      grep -v ':err:' "$tmp/w.dbg" >"$tmp/w.err" || true
    fi
    [ "$w" = "$l" ] || { cat "$tmp/w.err" >&2; die "wine kubectl-sexton.exe $*: exit $w, Linux $l"; }
    local s
    for s in out err; do
      sed -e 's/\r$//' -e 's/kubectl-sexton\.exe/kubectl-sexton/g' "$tmp/w.$s" >"$tmp/w.$s.n"
      diff -u "$tmp/l.$s" "$tmp/w.$s.n" >&2 || die "wine kubectl-sexton.exe $*: std$s differs from Linux's (diff above)"
    done
    [ -s "$tmp/l.out" ] || [ -s "$tmp/l.err" ] || die "kubectl-sexton $*: printed nothing"
  }
  same --help
  same version --client
  same inject -f job.yaml
  same inject --strategy wrap -f job.yaml
  same uninject -f injected.yaml
  # a missing file: the same exit code and a message naming it (the OS's words differ)
  local w=0 l=0
  (cd "$tmp" && timeout 120 wine "$exe" inject -f missing.yaml >/dev/null 2>w.err) || w=$?
  (cd "$tmp" && "$linux" inject -f missing.yaml >/dev/null 2>/dev/null) || l=$?
  if [ "$w" != "$l" ] || [ "$w" = 0 ] || ! grep -q missing.yaml "$tmp/w.err"; then
    die "wine kubectl-sexton.exe inject -f missing.yaml: exit $w (Linux $l): $(cat "$tmp/w.err")"
  fi
  log "wine: kubectl-sexton.exe agrees with linux/amd64 on $n commands"
}

case "${1:-all}" in
  all) tools; build; check ;;
  tools) tools ;;
  build) build ;;
  check) check ;;
  *) echo "usage: $0 [tools|build|check]" >&2; exit 2 ;;
esac
