//! `sexton install DIR` (the init container's step: copy this static binary into a shared
//! emptyDir) and `sexton quick-exit` (the entrypoint of the quick-exit image).

use std::path::Path;

use crate::logging::{stderr_line, stdout_line};

/// The entrypoint of the quick-exit image: the SidecarTerminator swaps a sidecar's image to
/// it, the kubelet restarts the container with the sidecar's own arguments appended, and it
/// must end with 0 whatever they are.
pub fn quick_exit() -> i32 {
    stderr_line(
        "sexton quick-exit: this sidecar was ended by the sexton controller (its image was swapped because the pod's main containers are done); exiting 0",
    );
    0
}

/// Copies this executable to `dir/sexton` (the directory made if missing), atomically,
/// mode 0755; the exit code.
pub fn install(dir: &Path) -> i32 {
    if let Err(e) = std::fs::create_dir_all(dir) {
        stderr_line(&format!(
            "sexton install: cannot create {}: {e}",
            dir.display()
        ));
        return 1;
    }
    let exe = match std::env::current_exe() {
        Ok(p) => p,
        Err(e) => {
            stderr_line(&format!(
                "sexton install: cannot find my own executable (is /proc mounted?): {e}"
            ));
            return 1;
        }
    };
    match crate::files::atomic_copy(&exe, dir, "sexton", 0o755) {
        Ok(n) => {
            stdout_line(&format!(
                "sexton install: installed {} ({n} bytes)",
                dir.join("sexton").display()
            ));
            0
        }
        Err(e) => {
            stderr_line(&format!(
                "sexton install: cannot install into {}: {e}",
                dir.display()
            ));
            1
        }
    }
}
