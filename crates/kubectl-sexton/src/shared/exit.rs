//! The exit codes of every subcommand, in one place so that each means the same whichever
//! command returns it. Usage errors exit 2 too (clap), `--help` and `--version` 0.

/// How a subcommand ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    /// 0: done; a long-running command stopped by SIGTERM or SIGINT; `doctor` found nothing
    /// wrong.
    Ok = 0,
    /// 1: it ran, and failed or found something: a long-running command failed while
    /// running (its runtime would not start, it lost its Lease); `inject` refused a
    /// resource (written unchanged); `doctor` found a warning or an error; `ejob results`
    /// could not read the job or its pods.
    Failed = 1,
    /// 2: it could not run: bad flags, unusable input, no Kubernetes client, a port taken,
    /// `doctor` without an API server. Nothing was done.
    Unusable = 2,
}

impl Exit {
    pub fn code(self) -> i32 {
        self as i32
    }
}
