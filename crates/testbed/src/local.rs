//! Small pieces of the local machine that several test files use: a free loopback port,
//! `openssl` (certificates for the TLS servers under test), and a command fed its input.

use std::net::TcpListener;
use std::process::{Command, Output};

/// A loopback port nothing listens on now.
pub fn free_port() -> u16 {
    let [port] = free_ports();
    port
}

/// The band free ports are picked from: below the kernel's ephemeral range (32768-60999 by
/// default), from which `bind(0)` and every outgoing connection's source port come. A port
/// picked there and released could be taken, before its server binds it, by any of the
/// machine's connections (CI runs the benchmarks beside the e2e scenarios: OpenKruise's
/// manager once exited on such a port). Nothing of ours listens in this band either: the
/// fixed ports of scripts/ (10248-10259, 15000-15003, 16443, 23790, 23800, 26543, 33890,
/// 33900) are outside it, and so is Kubernetes' NodePort range (30000-32767).
/// scripts/lib.sh's `free_port` picks from the same band.
const BAND: std::ops::Range<u16> = 27000..30000;

/// `N` distinct loopback ports nothing listens on now, picked at random in [`BAND`] (so two
/// processes picking at once rarely pick alike) and each bound once to check it is free;
/// all held until every one is picked, so none is picked twice. Where the kernel's
/// ephemeral range reaches into the band, the kernel picks (`bind(0)`).
pub fn free_ports<const N: usize>() -> [u16; N] {
    let mut held: Vec<TcpListener> = Vec::with_capacity(N);
    let band_usable = ephemeral_low().is_none_or(|low| low >= BAND.end);
    let mut seed = random_seed();
    for _ in 0..N {
        let mut picked = None;
        for _ in 0..if band_usable { 200 } else { 0 } {
            // (xorshift: a uniform pick needs no crate here)
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            let port = BAND.start + (seed % u64::from(BAND.end - BAND.start)) as u16;
            if let Ok(l) = TcpListener::bind(("127.0.0.1", port)) {
                picked = Some(l);
                break;
            }
        }
        held.push(picked.unwrap_or_else(|| TcpListener::bind("127.0.0.1:0").unwrap()));
    }
    std::array::from_fn(|i| held[i].local_addr().unwrap().port())
}

/// The low end of the kernel's ephemeral port range, if it can be read.
fn ephemeral_low() -> Option<u16> {
    std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// A seed differing between processes and calls (std's hasher keys are random per process).
fn random_seed() -> u64 {
    use std::hash::{BuildHasher, RandomState};
    RandomState::new().hash_one(std::time::Instant::now()) | 1
}

/// `openssl` with `args`, which must succeed.
pub fn openssl(args: &[&str]) -> Output {
    let out = Command::new("openssl").args(args).output().unwrap();
    assert!(
        out.status.success(),
        "openssl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// Runs `cmd` with `input` on its stdin and its output captured. A program that exits
/// without reading its input (refusing its arguments, say) is not a failure of the test:
/// the broken pipe is ignored, and the program's own exit status tells.
pub fn output_with_input(cmd: &mut std::process::Command, input: &[u8]) -> std::process::Output {
    use std::io::Write;
    use std::process::Stdio;
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("starting the command");
    let mut stdin = child.stdin.take().expect("piped stdin");
    match stdin.write_all(input) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => panic!("writing stdin: {e}"),
        _ => {}
    }
    drop(stdin);
    child.wait_with_output().expect("waiting for the command")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Distinct ports, free (each binds again), in the band below the ephemeral range
    /// wherever that range leaves it room.
    #[test]
    fn free_ports_are_distinct_free_and_below_the_ephemeral_range() {
        for _ in 0..20 {
            let ports: [u16; 8] = free_ports();
            let mut sorted = ports.to_vec();
            sorted.sort_unstable();
            sorted.dedup();
            assert_eq!(sorted.len(), 8, "{ports:?}");
            let held: Vec<_> = ports
                .iter()
                .map(|p| TcpListener::bind(("127.0.0.1", *p)).expect("a picked port binds"))
                .collect();
            drop(held);
            if ephemeral_low().is_some_and(|low| low >= BAND.end) {
                assert!(ports.iter().all(|p| BAND.contains(p)), "{ports:?}");
            }
        }
    }
}
