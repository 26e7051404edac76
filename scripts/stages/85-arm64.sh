# shellcheck shell=bash disable=SC2034
# The in-pod binary for arm64, emulated: the supervisor's integration tests again, each
# container now the shipped arm64 build (SEXTON_TEST_BIN), which the kernel hands to
# qemu-aarch64-static (binfmt_misc; registered here if the machine has none). The test
# harness stays native. All of them (api, faults_*, resilience, supervisor) but five that
# observe what qemu-user changes, not sexton:
#  - huge_file_at_tombstone_path_is_not_read_whole measures sexton's peak RSS: qemu's;
#  - child_killed_by_realtime_signal_exits_128_plus_n_with_the_signal_named and
#    realtime_stop_signal_during_birth_wait_ends_without_starting_the_child: qemu-user keeps
#    host realtime signals for itself and renumbers the guest's (a native child killed by
#    signal 34 is reported to sexton as 32);
#  - sigterm_while_waiting_for_own_lock_ends_without_starting_the_child watches sexton's
#    /proc/PID/exe and signal mask: the emulator's;
#  - orphans_are_reaped_as_pid1_and_as_subreaper: qemu-user 7.2 refuses
#    PR_SET_CHILD_SUBREAPER (EINVAL), so sexton cannot reap as a non-PID-1 subreaper there.
# The names are unique in the workspace, so the test binaries of the test stage are reused;
# api.rs needs the API server.
STAGE_HELP="the in-pod integration tests again with the shipped arm64 binary under
qemu-aarch64-static"
STAGE_NEEDS="images build services"
ARM64_TESTS=(--test supervisor --test faults_process --test faults_graveyard --test faults_extra --test resilience --test api)
ARM64_SKIP=(--skip huge_file_at_tombstone_path_is_not_read_whole --skip child_killed_by_realtime_signal_exits_128_plus_n_with_the_signal_named --skip realtime_stop_signal_during_birth_wait_ends_without_starting_the_child --skip sigterm_while_waiting_for_own_lock_ends_without_starting_the_child --skip orphans_are_reaped_as_pid1_and_as_subreaper)
# Every bounded wait of these tests is stretched by SEXTON_TEST_SLOWDOWN (testbed's
# `slowdown`): the emulated binary runs its start-up and system calls several times slower
# than the native one (CONTRIBUTING.md gives the factor measured).
EMULATION_FACTOR=5
run() {
  arm64_emulation
  local -x SEXTON_TEST_BIN="$PWD/target/images/bin/linux-arm64/sexton" SEXTON_TEST_SLOWDOWN=$EMULATION_FACTOR
  cargo_test "SEXTON_TEST_BIN=$SEXTON_TEST_BIN SEXTON_TEST_SLOWDOWN=$SEXTON_TEST_SLOWDOWN " \
    "${ARM64_TESTS[@]}" -- --exact "${ARM64_SKIP[@]}"
}
# An aarch64 binary executed on another machine runs under qemu-aarch64-static: Debian's
# qemu-user-static registers it with binfmt_misc (flag F: the interpreter is opened at
# registration, so it also runs in other mount namespaces, unshare --mount-proc's).
arm64_emulation() {
  [ "$(uname -m)" != aarch64 ] || return 0
  need_cmd qemu-aarch64-static || apt_install qemu-user-static
  local bm=/proc/sys/fs/binfmt_misc
  [ -e "$bm/register" ] || mount -t binfmt_misc binfmt_misc "$bm" \
    || { echo "binfmt_misc cannot be mounted: the arm64 tests need it (qemu-user-static)" >&2; exit 1; }
  if [ ! -e "$bm/qemu-aarch64" ]; then
    cat /usr/lib/binfmt.d/qemu-aarch64.conf > "$bm/register" \
      || { echo "cannot register qemu-aarch64 with binfmt_misc" >&2; exit 1; }
  fi
  grep -q '^flags: .*F' "$bm/qemu-aarch64" \
    || { echo "$bm/qemu-aarch64 lacks flag F: the arm64 binary would not run in the tests' mount namespaces" >&2; exit 1; }
}
