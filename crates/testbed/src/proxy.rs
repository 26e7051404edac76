//! A way to put the real API server's answers at the wrong moment for the code under test,
//! without a hook in that code: `kubectl proxy` (plain HTTP on loopback, carrying the
//! credentials of a kubeconfig) behind a [`HoldingProxy`], a byte-level TCP relay that
//! stops the first request containing a given string half-way, until the test releases
//! it. Between the two, the test can change the object, so that the API server answers
//! the held request with a real 409 Conflict.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, Sender, channel};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::wait::TIMEOUT;

/// `kubectl proxy` for `kubeconfig` on a free loopback port; stopped when dropped.
pub struct KubectlProxy {
    child: Child,
    pub addr: SocketAddr,
}

impl KubectlProxy {
    pub fn start(kubeconfig: &Path) -> KubectlProxy {
        let mut child = Command::new("kubectl")
            .env("KUBECONFIG", kubeconfig)
            .args(["proxy", "--address=127.0.0.1", "--port=0"])
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start kubectl proxy");
        // "Starting to serve on 127.0.0.1:PORT"
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let addr = line
            .trim()
            .rsplit(' ')
            .next()
            .and_then(|a| a.parse().ok())
            .unwrap_or_else(|| panic!("kubectl proxy said {line:?}"));
        KubectlProxy { child, addr }
    }
}

impl Drop for KubectlProxy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A kubeconfig (written to `path`) that reaches the API server through plain HTTP at
/// `addr` with no credentials of its own (a proxy adds them).
pub fn kubeconfig_via(addr: SocketAddr, path: &Path) -> PathBuf {
    std::fs::write(
        path,
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: p\n  cluster:\n    server: http://{addr}\nusers:\n- name: p\n  user: {{}}\ncontexts:\n- name: p\n  context: {{cluster: p, user: p}}\ncurrent-context: p\n"
        ),
    )
    .unwrap();
    path.to_path_buf()
}

/// A TCP relay to `upstream` that holds the first request containing `needle`: the bytes
/// up to the end of `needle` are passed on (so the server waits for the rest of the
/// request), the rest only after [`HoldingProxy::release`].
pub struct HoldingProxy {
    pub addr: SocketAddr,
    held: Receiver<()>,
    release: Arc<Mutex<Option<Sender<()>>>>,
}

impl HoldingProxy {
    pub fn start(upstream: SocketAddr, needle: &str) -> HoldingProxy {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let (held_tx, held) = channel();
        let (release_tx, release_rx) = channel();
        let gate = Arc::new(Gate {
            needle: needle.as_bytes().to_vec(),
            taken: AtomicBool::new(false),
            held: Mutex::new(Some(held_tx)),
            release: Mutex::new(Some(release_rx)),
        });
        std::thread::spawn(move || {
            for client in listener.incoming().flatten() {
                let Ok(server) = TcpStream::connect(upstream) else {
                    continue;
                };
                relay(client, server, gate.clone());
            }
        });
        HoldingProxy {
            addr,
            held,
            release: Arc::new(Mutex::new(Some(release_tx))),
        }
    }

    /// Waits (at most `TIMEOUT`) until a request is held; false if none came.
    pub fn wait_held(&self) -> bool {
        self.held.recv_timeout(TIMEOUT).is_ok()
    }

    /// Lets the held request (and every later one) through.
    pub fn release(&self) {
        if let Some(tx) = self.release.lock().unwrap().take() {
            let _ = tx.send(());
        }
    }
}

impl Drop for HoldingProxy {
    fn drop(&mut self) {
        self.release();
    }
}

struct Gate {
    needle: Vec<u8>,
    taken: AtomicBool,
    held: Mutex<Option<Sender<()>>>,
    release: Mutex<Option<Receiver<()>>>,
}

impl Gate {
    /// Where `needle` ends in `seen` (the last bytes passed on, then the new ones), if
    /// this is the first time it is seen.
    fn find(&self, seen: &[u8]) -> Option<usize> {
        if self.taken.load(Ordering::Relaxed) {
            return None;
        }
        let n = self.needle.len();
        let at = seen.windows(n).position(|w| w == self.needle)?;
        (!self.taken.swap(true, Ordering::Relaxed)).then_some(at + n)
    }

    /// Tells the test a request is held and waits for its release (bounded, so a failed
    /// test cannot hang the relay forever).
    fn hold(&self) {
        if let Some(tx) = self.held.lock().unwrap().take() {
            let _ = tx.send(());
        }
        if let Some(rx) = self.release.lock().unwrap().take() {
            let _ = rx.recv_timeout(TIMEOUT * 4);
        }
    }
}

fn relay(client: TcpStream, server: TcpStream, gate: Arc<Gate>) {
    let (c2, s2) = (client.try_clone().unwrap(), server.try_clone().unwrap());
    std::thread::spawn(move || copy_holding(client, server, &gate));
    std::thread::spawn(move || copy_plain(s2, c2));
}

fn copy_plain(mut from: TcpStream, mut to: TcpStream) {
    let _ = std::io::copy(&mut from, &mut to);
    let _ = to.shutdown(Shutdown::Write);
}

fn copy_holding(mut from: TcpStream, mut to: TcpStream, gate: &Gate) {
    let keep = gate.needle.len().saturating_sub(1);
    let mut tail: Vec<u8> = vec![];
    let mut buf = [0u8; 16 * 1024];
    let _ = from.set_read_timeout(Some(Duration::from_secs(600)));
    loop {
        let n = match from.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        let chunk = &buf[..n];
        let seen = [tail.as_slice(), chunk].concat();
        let sent = match gate.find(&seen) {
            // the end of the needle, as an offset into this chunk
            Some(end) => {
                let split = end.saturating_sub(tail.len()).min(n);
                if to.write_all(&chunk[..split]).is_err() {
                    break;
                }
                gate.hold();
                to.write_all(&chunk[split..])
            }
            None => to.write_all(chunk),
        };
        if sent.is_err() {
            break;
        }
        tail = seen[seen.len().saturating_sub(keep)..].to_vec();
    }
    let _ = to.shutdown(Shutdown::Write);
}

/// A TCP relay to `upstream` that the test can cut, as a network partition would: [`cut`]
/// closes every connection it carries, and holds each new one unanswered (as a lost
/// network does: the client sees no error, so its retry delays do not grow meanwhile)
/// until [`mend`], which carries them on. (Bytes pass untouched: TLS goes end to end.)
///
/// [`cut`]: CuttableRelay::cut
/// [`mend`]: CuttableRelay::mend
pub struct CuttableRelay {
    pub addr: SocketAddr,
    links: Arc<Mutex<Links>>,
}

struct Links {
    upstream: SocketAddr,
    cut: bool,
    /// Both ends of every connection carried (to close at a cut).
    open: Vec<TcpStream>,
    /// Connections accepted during a cut, not yet carried.
    held: Vec<TcpStream>,
}

impl Links {
    /// Carries `client` to the upstream (closed if the upstream cannot be reached).
    fn carry(&mut self, client: TcpStream) {
        let Ok(server) = TcpStream::connect(self.upstream) else {
            let _ = client.shutdown(Shutdown::Both);
            return;
        };
        let ends = (client.try_clone(), server.try_clone());
        let (Ok(c2), Ok(s2)) = ends else {
            panic!("CuttableRelay: out of file descriptors");
        };
        // (closed connections are dropped from the list at the next one)
        self.open.retain(|s| s.peer_addr().is_ok());
        self.open
            .extend([c2.try_clone().unwrap(), s2.try_clone().unwrap()]);
        std::thread::spawn(move || copy_plain(client, server));
        std::thread::spawn(move || copy_plain(s2, c2));
    }
}

impl CuttableRelay {
    pub fn start(upstream: SocketAddr) -> CuttableRelay {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let links = Arc::new(Mutex::new(Links {
            upstream,
            cut: false,
            open: vec![],
            held: vec![],
        }));
        let accepted = links.clone();
        std::thread::spawn(move || {
            for client in listener.incoming().flatten() {
                let mut l = accepted.lock().unwrap();
                if l.cut {
                    l.held.push(client);
                } else {
                    l.carry(client);
                }
            }
        });
        CuttableRelay { addr, links }
    }

    /// Closes every connection carried; new ones are held until [`CuttableRelay::mend`].
    pub fn cut(&self) {
        let mut l = self.links.lock().unwrap();
        l.cut = true;
        for s in l.open.drain(..) {
            let _ = s.shutdown(Shutdown::Both);
        }
    }

    /// Carries the held connections and every new one again.
    pub fn mend(&self) {
        let mut l = self.links.lock().unwrap();
        l.cut = false;
        for client in std::mem::take(&mut l.held) {
            l.carry(client);
        }
    }
}

/// A copy of `kubeconfig` (written to `path`) that reaches its API server at `addr`
/// instead of 127.0.0.1:PORT, its credentials and CA kept (a relay passes TLS through).
pub fn kubeconfig_relayed(kubeconfig: &Path, addr: SocketAddr, path: &Path) -> PathBuf {
    let text = std::fs::read_to_string(kubeconfig).unwrap();
    let mut servers = 0;
    let relayed: Vec<String> = text
        .lines()
        .map(|l| match l.split_once("server: https://127.0.0.1:") {
            Some((indent, _)) => {
                servers += 1;
                format!("{indent}server: https://{addr}")
            }
            None => l.to_string(),
        })
        .collect();
    assert_eq!(
        servers,
        1,
        "{}: one server on 127.0.0.1 expected",
        kubeconfig.display()
    );
    std::fs::write(path, relayed.join("\n") + "\n").unwrap();
    path.to_path_buf()
}
