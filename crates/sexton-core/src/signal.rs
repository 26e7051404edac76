//! Signals as plain numbers (pure): every Linux signal 1..=64, real-time ones included, with
//! names, parsing, and the rules of what sexton does with each. `nix`'s `Signal` enum cannot
//! hold a real-time signal, so a child killed by SIGRTMIN+3 or a SIGRTMIN+3 sent to PID 1
//! would be lost through it; this type never drops a number.

use std::fmt;

/// A signal number between 1 and 64 (the numbering of Linux on x86_64 and arm64).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Signal(i32);

/// Classic signals by name, in number order (index + 1 = number).
const NAMES: [&str; 31] = [
    "SIGHUP",
    "SIGINT",
    "SIGQUIT",
    "SIGILL",
    "SIGTRAP",
    "SIGABRT",
    "SIGBUS",
    "SIGFPE",
    "SIGKILL",
    "SIGUSR1",
    "SIGSEGV",
    "SIGUSR2",
    "SIGPIPE",
    "SIGALRM",
    "SIGTERM",
    "SIGSTKFLT",
    "SIGCHLD",
    "SIGCONT",
    "SIGSTOP",
    "SIGTSTP",
    "SIGTTIN",
    "SIGTTOU",
    "SIGURG",
    "SIGXCPU",
    "SIGXFSZ",
    "SIGVTALRM",
    "SIGPROF",
    "SIGWINCH",
    "SIGIO",
    "SIGPWR",
    "SIGSYS",
];

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SignalError {
    #[error("empty signal name")]
    Empty,
    #[error("{0} is not a signal number (1 to {max})", max = Signal::MAX)]
    Number(i32),
    #[error("unknown signal {0:?}; use a name such as SIGTERM, SIGINT, SIGQUIT, SIGRTMIN+3")]
    Unknown(String),
    #[error("{0:?} is outside SIGRTMIN..SIGRTMAX")]
    OutsideRealTime(String),
}

impl Signal {
    pub const SIGHUP: Signal = Signal(1);
    pub const SIGINT: Signal = Signal(2);
    pub const SIGQUIT: Signal = Signal(3);
    pub const SIGKILL: Signal = Signal(9);
    pub const SIGUSR1: Signal = Signal(10);
    pub const SIGSEGV: Signal = Signal(11);
    pub const SIGUSR2: Signal = Signal(12);
    pub const SIGPIPE: Signal = Signal(13);
    pub const SIGALRM: Signal = Signal(14);
    pub const SIGTERM: Signal = Signal(15);
    pub const SIGCHLD: Signal = Signal(17);
    pub const SIGCONT: Signal = Signal(18);
    pub const SIGSTOP: Signal = Signal(19);
    pub const SIGTSTP: Signal = Signal(20);
    pub const SIGWINCH: Signal = Signal(28);
    pub const SIGPWR: Signal = Signal(30);
    /// Real-time signals are named from 34 as glibc and the container runtimes do (an
    /// image's `STOPSIGNAL SIGRTMIN+3` is 37). 32 and 33 are reserved by the C library.
    pub const RTMIN: i32 = 34;
    pub const MAX: i32 = 64;

    pub fn new(number: i32) -> Option<Signal> {
        (1..=Self::MAX).contains(&number).then_some(Signal(number))
    }

    pub fn number(self) -> i32 {
        self.0
    }

    /// `SIGTERM`, `SIGRTMIN`, `SIGRTMIN+3`, `SIGRTMAX-1`, `SIGRTMAX`; `SIG32` and `SIG33`
    /// (the C library's own) by number.
    pub fn name(self) -> String {
        let n = self.0;
        match n {
            1..=31 => NAMES[(n - 1) as usize].to_string(),
            Self::RTMIN => "SIGRTMIN".into(),
            Self::MAX => "SIGRTMAX".into(),
            35..=49 => format!("SIGRTMIN+{}", n - Self::RTMIN),
            50..=63 => format!("SIGRTMAX-{}", Self::MAX - n),
            _ => format!("SIG{n}"),
        }
    }

    /// By name (`SIGTERM`, `TERM`, `term`, `SIGRTMIN+3`, `RTMAX-2`) or number (`15`).
    pub fn parse(s: &str) -> Result<Signal, SignalError> {
        let t = s.trim();
        if t.is_empty() {
            return Err(SignalError::Empty);
        }
        if let Ok(n) = t.parse::<i32>() {
            return Signal::new(n).ok_or(SignalError::Number(n));
        }
        let upper = t.to_ascii_uppercase();
        let bare = upper.strip_prefix("SIG").unwrap_or(&upper);
        let unknown = || SignalError::Unknown(t.into());
        let rt = |base: i32, rest: &str, sign: i32| -> Result<Signal, SignalError> {
            let offset: i32 = if rest.is_empty() {
                0
            } else {
                rest.parse().map_err(|_| unknown())?
            };
            let n = base + sign * offset;
            if (Self::RTMIN..=Self::MAX).contains(&n) {
                Ok(Signal(n))
            } else {
                Err(SignalError::OutsideRealTime(t.into()))
            }
        };
        if let Some(rest) = bare.strip_prefix("RTMIN") {
            return rt(Self::RTMIN, rest.strip_prefix('+').unwrap_or(rest), 1);
        }
        if let Some(rest) = bare.strip_prefix("RTMAX") {
            return rt(Self::MAX, rest.strip_prefix('-').unwrap_or(rest), -1);
        }
        if let Some(n) = bare.parse::<i32>().ok().and_then(Signal::new) {
            return Ok(n); // `SIG32`, as `name` writes the ones without a name
        }
        let full = format!("SIG{bare}");
        let alias = match full.as_str() {
            "SIGIOT" => "SIGABRT",
            "SIGPOLL" => "SIGIO",
            other => other,
        };
        NAMES
            .iter()
            .position(|n| *n == alias)
            .map(|i| Signal(i as i32 + 1))
            .ok_or_else(unknown)
    }

    /// Whether sexton passes this signal on to its child: every signal it can catch, except
    /// the ones about sexton itself (as tini and catatonit do):
    /// - SIGCHLD (its own children's news), SIGKILL and SIGSTOP (cannot be caught);
    /// - the synchronous faults SIGILL, SIGTRAP, SIGABRT, SIGBUS, SIGFPE, SIGSEGV, SIGSYS
    ///   (a fault of sexton must end sexton, not be forwarded);
    /// - SIGPIPE and SIGXFSZ, raised by sexton's own writes (a closed log pipe, a file
    ///   size limit);
    /// - SIGTTIN and SIGTTOU (sexton's own terminal access);
    /// - 32 and 33, the C library's internal signals.
    pub fn is_forwarded(self) -> bool {
        !matches!(
            self.0,
            4..=9 | 11 | 13 | 17 | 19 | 21 | 22 | 25 | 31 | 32 | 33
        )
    }

    /// Whether this signal, received before the child was started, ends the container
    /// without starting it: the signals runtimes use to stop a container (SIGTERM, SIGINT,
    /// SIGQUIT, SIGHUP, SIGPWR, and the real-time ones, such as systemd's SIGRTMIN+3).
    /// Others (SIGUSR1, SIGWINCH, ...) are meant for a running program and are dropped then.
    pub fn ends_wait(self) -> bool {
        matches!(self.0, 1 | 2 | 3 | 15 | 30) || self.0 >= Self::RTMIN
    }

    /// Every signal sexton forwards, in number order.
    pub fn forwarded() -> impl Iterator<Item = Signal> {
        (1..=Self::MAX).map(Signal).filter(|s| s.is_forwarded())
    }
}

impl fmt::Display for Signal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_for_every_number() {
        for n in 1..=Signal::MAX {
            let s = Signal::new(n).unwrap();
            assert_eq!(Signal::parse(&s.name()), Ok(s), "{n} {}", s.name());
            assert_eq!(Signal::parse(&n.to_string()), Ok(s));
        }
        assert_eq!(Signal::new(0), None);
        assert_eq!(Signal::new(65), None);
    }

    #[test]
    fn parses_names_like_runtimes() {
        for (text, n) in [
            ("SIGTERM", 15),
            ("TERM", 15),
            ("term", 15),
            (" sigquit ", 3),
            ("KILL", 9),
            ("USR1", 10),
            ("SIGRTMIN", 34),
            ("SIGRTMIN+3", 37),
            ("rtmin+3", 37),
            ("SIGRTMAX", 64),
            ("SIGRTMAX-2", 62),
            ("SIGIOT", 6),
            ("SIGPOLL", 29),
            ("SIGPWR", 30),
        ] {
            assert_eq!(Signal::parse(text).map(Signal::number), Ok(n), "{text}");
        }
        for bad in [
            "",
            "SIGFOO",
            "0",
            "65",
            "-1",
            "SIGRTMIN+31",
            "SIGRTMAX-31",
            "RTMIN+x",
        ] {
            assert!(Signal::parse(bad).is_err(), "{bad:?}");
        }
        assert_eq!(Signal(37).name(), "SIGRTMIN+3");
        assert_eq!(Signal(63).name(), "SIGRTMAX-1");
        assert_eq!(Signal(32).name(), "SIG32");
    }

    #[test]
    fn forwarding_rules() {
        let not: Vec<i32> = (1..=64).filter(|&n| !Signal(n).is_forwarded()).collect();
        assert_eq!(
            not,
            [4, 5, 6, 7, 8, 9, 11, 13, 17, 19, 21, 22, 25, 31, 32, 33]
        );
        for s in [
            Signal::SIGTERM,
            Signal::SIGPWR,
            Signal::SIGWINCH,
            Signal::SIGTSTP,
            Signal(37),
            Signal(64),
        ] {
            assert!(s.is_forwarded(), "{s}");
        }
        let ends: Vec<i32> = (1..34).filter(|&n| Signal(n).ends_wait()).collect();
        assert_eq!(ends, [1, 2, 3, 15, 30]);
        assert!((34..=64).all(|n| Signal(n).ends_wait()));
        assert_eq!(Signal::forwarded().count(), 64 - 16);
    }
}
