//! `sexton install DIR` (the init container's step: copy this static binary into a shared
//! emptyDir) and `sexton quick-exit` (the entrypoint of the quick-exit image).

use std::ffi::OsString;
use std::path::PathBuf;

use clap::{Arg, Command, value_parser};

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

pub fn install(args: &[OsString]) -> i32 {
    let cmd = Command::new("sexton install")
        .version(env!("CARGO_PKG_VERSION"))
        .about("Copy this executable into DIR (an emptyDir shared with the app containers) as DIR/sexton, atomically, mode 0755.")
        .arg(Arg::new("dir").value_name("DIR").required(true).value_parser(value_parser!(PathBuf)));
    let m = match cmd.try_get_matches_from(&args[1..]) {
        Ok(m) => m,
        Err(e) => return crate::cli::clap_error(e),
    };
    let dir = m.get_one::<PathBuf>("dir").expect("required");
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
