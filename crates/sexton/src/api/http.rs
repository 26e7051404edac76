//! The Kubernetes API client of birth dependencies: blocking HTTP/1.1 over rustls, one
//! connection per request (`Connection: close`). sexton asks the API server two things,
//! a list of its pod and a watch of it, so a client library (kube-client: hyper, tower,
//! tokio; ~85 crates) would cost every pod its size for two requests.
//!
//! The server is trusted only as far as its certificate goes: a broken or hostile one must
//! not make sexton allocate without bound or wait forever, so every line, header block and
//! body is bounded (`MAX_*` below) and every connect, read and write has a timeout.

use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::sync::Arc;
use std::time::Duration;

use rustls::pki_types::ServerName;
use rustls::{ClientConnection, StreamOwned};

use super::config::{Config, TokenError};
use super::tls::{TlsError, client_config};
use crate::net;

/// One line of the status line or a header: the API server's are well under 1 KiB.
const MAX_HEAD_LINE: usize = 8 * 1024;
/// Header lines of one response (the API server sends about ten).
const MAX_HEADERS: usize = 100;
/// One chunk-size line of a chunked body (hex size and extensions).
const MAX_CHUNK_LINE: usize = 1024;
/// A body, and one line (one event) of a watch: one pod object. etcd refuses objects over
/// 1.5 MiB (its default --max-request-bytes), so 4 MiB holds any pod with room to spare.
pub const MAX_OBJECT: usize = 4 * 1024 * 1024;

/// Connecting (TCP and TLS handshake) and writing the request.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// Waiting for any byte of an answer to a GET.
const READ_TIMEOUT: Duration = Duration::from_secs(30);

/// Why a request failed. `Status` is the API server's answer (its Status object's message);
/// the others say where the exchange broke, for the outage report.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("HTTP {code}: {message}")]
    Status { code: u16, message: String },
    /// TCP connect or TLS handshake (the address is the outage report's).
    #[error("{0}")]
    Connect(io::Error),
    #[error("{0}")]
    Io(#[from] io::Error),
    #[error(transparent)]
    Token(#[from] TokenError),
    #[error("invalid response from the API server: {0}")]
    Protocol(String),
}

/// Why no client could be made for a configuration.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error(transparent)]
    Tls(#[from] TlsError),
    #[error("invalid API server host {host:?}: {source}")]
    Host {
        host: String,
        source: rustls::pki_types::InvalidDnsNameError,
    },
}

fn protocol(what: impl Into<String>) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, what.into())
}

/// A client of one API server.
pub struct Client {
    config: Config,
    tls: Arc<rustls::ClientConfig>,
    server_name: ServerName<'static>,
}

type Stream = BufReader<StreamOwned<ClientConnection, TcpStream>>;

/// The body of a response, read as it arrives.
pub struct Body {
    inner: Box<dyn BufRead + Send>,
}

impl Client {
    pub fn new(config: Config) -> Result<Client, ClientError> {
        let tls = Arc::new(client_config(&config)?);
        let server_name =
            ServerName::try_from(config.host.clone()).map_err(|source| ClientError::Host {
                host: config.host.clone(),
                source,
            })?;
        Ok(Client {
            config,
            tls,
            server_name,
        })
    }

    /// The API server's address, for messages.
    pub fn address(&self) -> String {
        self.config.address()
    }

    /// GET `path` (with its query): the JSON object of a 2xx answer.
    pub fn get(&self, path: &str) -> Result<serde_json::Value, Error> {
        let mut body = self.request(path, READ_TIMEOUT)?;
        let mut buf = Vec::new();
        (&mut body.inner)
            .take(MAX_OBJECT as u64 + 1)
            .read_to_end(&mut buf)?;
        if buf.len() > MAX_OBJECT {
            return Err(Error::Protocol(format!(
                "a response body over {MAX_OBJECT} bytes"
            )));
        }
        serde_json::from_slice(&buf).map_err(|e| Error::Protocol(format!("not JSON: {e}")))
    }

    /// GET `path` and return the body for streaming (a watch). `read_timeout` bounds each
    /// wait for more bytes: a watch is quiet while nothing changes, up to its timeoutSeconds.
    pub fn stream(&self, path: &str, read_timeout: Duration) -> Result<Body, Error> {
        self.request(path, read_timeout)
    }

    fn connect(&self) -> Result<StreamOwned<ClientConnection, TcpStream>, Error> {
        let tcp = net::connect(&self.config.host, self.config.port, CONNECT_TIMEOUT)
            .map_err(Error::Connect)?;
        tcp.set_read_timeout(Some(CONNECT_TIMEOUT))?;
        tcp.set_write_timeout(Some(CONNECT_TIMEOUT))?;
        tcp.set_nodelay(true)?;
        let conn = ClientConnection::new(self.tls.clone(), self.server_name.clone())
            .map_err(|e| Error::Connect(io::Error::other(e)))?;
        let mut tls = StreamOwned::new(conn, tcp);
        // the handshake now, so that its failures (a wrong CA) are told as such
        while tls.conn.is_handshaking() {
            tls.conn
                .complete_io(&mut tls.sock)
                .map_err(|e| Error::Connect(io::Error::new(e.kind(), format!("TLS: {e}"))))?;
        }
        Ok(tls)
    }

    fn request(&self, path: &str, read_timeout: Duration) -> Result<Body, Error> {
        // re-read on every request: bound service account tokens are rotated by the kubelet
        let token = self.config.token()?;
        let mut tls = self.connect()?;
        let path = format!("{}{path}", self.config.prefix);
        tls.write_all(
            request_head(&self.config.host_header(), &path, token.as_deref()).as_bytes(),
        )?;
        tls.flush()?;
        tls.sock.set_read_timeout(Some(read_timeout))?;
        let mut stream: Stream = BufReader::with_capacity(16 * 1024, tls);
        let head = read_head(&mut stream)?;
        let inner: Box<dyn BufRead + Send> = match head.framing {
            Framing::Chunked => Box::new(BufReader::new(Chunked::new(stream))),
            Framing::Length(n) => Box::new(stream.take(n)),
            Framing::Close => Box::new(stream),
        };
        let mut body = Body { inner };
        if !(200..300).contains(&head.code) {
            return Err(Error::Status {
                code: head.code,
                message: body.status_message(&head.reason),
            });
        }
        Ok(body)
    }
}

impl Body {
    /// A body read from `inner` (tests give it bytes).
    pub fn new(inner: Box<dyn BufRead + Send>) -> Body {
        Body { inner }
    }

    /// The next line (without its newline), at most `MAX_OBJECT` bytes; `None` at the end.
    pub fn next_line(&mut self) -> io::Result<Option<Vec<u8>>> {
        read_line(&mut self.inner, MAX_OBJECT)
    }

    /// The message of the Status object of an error answer, else its reason phrase.
    fn status_message(&mut self, reason: &str) -> String {
        let mut buf = Vec::new();
        let read = (&mut self.inner).take(64 * 1024).read_to_end(&mut buf);
        let status: Option<serde_json::Value> =
            read.ok().and_then(|_| serde_json::from_slice(&buf).ok());
        match status.as_ref().and_then(|s| s["message"].as_str()) {
            Some(m) => m.to_string(),
            None => reason.to_string(),
        }
    }
}

/// The request head: GET, the bearer token if any, and `Connection: close` (one request
/// per connection; the body then ends with the connection when it is not framed).
fn request_head(host: &str, path: &str, token: Option<&str>) -> String {
    let auth = token.map_or(String::new(), |t| {
        format!("Authorization: Bearer {}\r\n", t.trim())
    });
    format!(
        "GET {path} HTTP/1.1\r\nHost: {host}\r\n{auth}Accept: application/json\r\nUser-Agent: sexton/{}\r\nConnection: close\r\n\r\n",
        env!("CARGO_PKG_VERSION")
    )
}

/// How the body of a response ends.
#[derive(Debug, PartialEq)]
enum Framing {
    Chunked,
    Length(u64),
    Close,
}

#[derive(Debug, PartialEq)]
struct Head {
    code: u16,
    reason: String,
    framing: Framing,
}

/// Reads the status line and the headers (bounded: `MAX_HEAD_LINE`, `MAX_HEADERS`).
fn read_head(r: &mut impl BufRead) -> io::Result<Head> {
    let line =
        read_line(r, MAX_HEAD_LINE)?.ok_or_else(|| protocol("no answer (connection closed)"))?;
    let line = String::from_utf8_lossy(&line);
    let mut parts = line.trim_end_matches('\r').splitn(3, ' ');
    let (version, code) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
    if !version.starts_with("HTTP/1.") {
        return Err(protocol(format!("not an HTTP/1.x status line: {line:.80}")));
    }
    let code: u16 = code
        .parse()
        .map_err(|_| protocol(format!("no status code in {line:.80}")))?;
    let reason = parts.next().unwrap_or("").to_string();
    let mut framing = Framing::Close;
    for _ in 0..=MAX_HEADERS {
        let header =
            read_line(r, MAX_HEAD_LINE)?.ok_or_else(|| protocol("the headers end early"))?;
        let header = String::from_utf8_lossy(&header);
        let header = header.trim_end_matches('\r');
        if header.is_empty() {
            return Ok(Head {
                code,
                reason,
                framing,
            });
        }
        let Some((name, value)) = header.split_once(':') else {
            return Err(protocol(format!("not a header: {header:.80}")));
        };
        let value = value.trim();
        if name.eq_ignore_ascii_case("transfer-encoding") {
            if !value.eq_ignore_ascii_case("chunked") {
                return Err(protocol(format!(
                    "unsupported Transfer-Encoding: {value:.40}"
                )));
            }
            framing = Framing::Chunked;
        } else if name.eq_ignore_ascii_case("content-length") && framing != Framing::Chunked {
            let n = value
                .parse()
                .map_err(|_| protocol(format!("invalid Content-Length: {value:.40}")))?;
            framing = Framing::Length(n);
        }
    }
    Err(protocol(format!("more than {MAX_HEADERS} headers")))
}

/// One line up to `\n` (which is dropped), at most `max` bytes long; `None` at the end of
/// the input. A longer line is an error, found before it is held in memory.
pub fn read_line(r: &mut impl BufRead, max: usize) -> io::Result<Option<Vec<u8>>> {
    let mut line = Vec::new();
    loop {
        let buf = r.fill_buf()?;
        if buf.is_empty() {
            return if line.is_empty() {
                Ok(None)
            } else {
                Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "the input ends inside a line",
                ))
            };
        }
        let (take, done) = match buf.iter().position(|b| *b == b'\n') {
            Some(i) => (i, true),
            None => (buf.len(), false),
        };
        if line.len() + take > max {
            return Err(protocol(format!("a line over {max} bytes")));
        }
        line.extend_from_slice(&buf[..take]);
        r.consume(take + usize::from(done));
        if done {
            return Ok(Some(line));
        }
    }
}

/// The chunked transfer coding (RFC 9112 section 7.1) of a body: yields the data of the
/// chunks and ends at the last (empty) chunk. Trailers are skipped, bounded like headers.
pub struct Chunked<R> {
    inner: R,
    /// Bytes left of the current chunk; `None` between chunks.
    left: Option<u64>,
    done: bool,
}

impl<R: BufRead> Chunked<R> {
    pub fn new(inner: R) -> Chunked<R> {
        Chunked {
            inner,
            left: None,
            done: false,
        }
    }

    /// Reads a chunk-size line: the size of the next chunk.
    fn size_line(&mut self) -> io::Result<u64> {
        let line = read_line(&mut self.inner, MAX_CHUNK_LINE)?
            .ok_or_else(|| eof("the chunked body ends before its last chunk"))?;
        let line = String::from_utf8_lossy(&line);
        let hex = line.split(';').next().unwrap_or("").trim();
        u64::from_str_radix(hex, 16)
            .ok()
            .filter(|_| !hex.is_empty() && hex.len() <= 16)
            .ok_or_else(|| protocol(format!("invalid chunk size line {:.40?}", line.trim_end())))
    }

    /// The CRLF after a chunk's data.
    fn chunk_end(&mut self) -> io::Result<()> {
        match read_line(&mut self.inner, 2)? {
            Some(l) if l.is_empty() || l == b"\r" => Ok(()),
            None => Err(eof("the chunked body ends before its last chunk")),
            Some(_) => Err(protocol("no CRLF after a chunk")),
        }
    }

    fn trailers(&mut self) -> io::Result<()> {
        for _ in 0..=MAX_HEADERS {
            match read_line(&mut self.inner, MAX_HEAD_LINE)? {
                None => return Ok(()), // (the connection closed right after the last chunk)
                Some(l) if l.is_empty() || l == b"\r" => return Ok(()),
                Some(_) => {}
            }
        }
        Err(protocol(format!("more than {MAX_HEADERS} trailers")))
    }
}

fn eof(what: &str) -> io::Error {
    io::Error::new(io::ErrorKind::UnexpectedEof, what.to_string())
}

impl<R: BufRead> Read for Chunked<R> {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        loop {
            if self.done || out.is_empty() {
                return Ok(0);
            }
            match self.left {
                None => match self.size_line()? {
                    0 => {
                        self.trailers()?;
                        self.done = true;
                    }
                    n => self.left = Some(n),
                },
                Some(0) => {
                    self.chunk_end()?;
                    self.left = None;
                }
                Some(left) => {
                    let buf = self.inner.fill_buf()?;
                    if buf.is_empty() {
                        return Err(eof("the chunked body ends inside a chunk"));
                    }
                    let n = buf
                        .len()
                        .min(out.len())
                        .min(usize::try_from(left).unwrap_or(usize::MAX));
                    out[..n].copy_from_slice(&buf[..n]);
                    self.inner.consume(n);
                    self.left = Some(left - n as u64);
                    return Ok(n);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dechunk(input: &[u8]) -> io::Result<Vec<u8>> {
        let mut out = Vec::new();
        Chunked::new(input).read_to_end(&mut out)?;
        Ok(out)
    }

    #[test]
    fn chunked_bodies() {
        assert_eq!(
            dechunk(b"4\r\nWiki\r\n6;ext=1\r\npedia \r\nE\r\nin \r\n\r\nchunks.\r\n0\r\n\r\n")
                .unwrap(),
            b"Wikipedia in \r\n\r\nchunks."
        );
        // trailers are skipped; bytes after the last chunk are not read
        assert_eq!(dechunk(b"1\r\na\r\n0\r\nX-T: 1\r\n\r\nmore").unwrap(), b"a");
        // LF-only line ends are tolerated
        assert_eq!(dechunk(b"2\na\n\n0\n\n").unwrap(), b"a\n");
        for (bad, why) in [
            (&b"2\r\na"[..], "ends inside a chunk"),
            (b"2\r\nabc", "ends inside a line"),
            (b"2\r\nab", "ends before its last chunk"),
            (b"2\r\nabX\r\n", "no CRLF after a chunk"),
            (b"zz\r\n", "invalid chunk size"),
            (b"\r\n", "invalid chunk size"),
            (b"11111111111111111\r\n", "invalid chunk size"),
        ] {
            let e = dechunk(bad).unwrap_err().to_string();
            assert!(e.contains(why), "{bad:?}: {e}");
        }
        // a chunk-size line without an end is refused at the bound, not buffered
        let mut long = vec![b'0'; MAX_CHUNK_LINE + 10];
        long.extend_from_slice(b"1\r\n");
        assert!(
            dechunk(&long)
                .unwrap_err()
                .to_string()
                .contains("over 1024 bytes")
        );
    }

    #[test]
    fn lines_are_bounded() {
        let mut r: &[u8] = b"one\ntwo\r\n\nlast";
        assert_eq!(read_line(&mut r, 10).unwrap().unwrap(), b"one");
        assert_eq!(read_line(&mut r, 10).unwrap().unwrap(), b"two\r");
        assert_eq!(read_line(&mut r, 10).unwrap().unwrap(), b"");
        assert!(read_line(&mut r, 10).is_err(), "unterminated");
        assert!(read_line(&mut &b""[..], 10).unwrap().is_none());
        // exactly at the bound is fine; one more byte is an error
        assert_eq!(
            read_line(&mut &b"12345\n"[..], 5).unwrap().unwrap(),
            b"12345"
        );
        let e = read_line(&mut &b"123456\n"[..], 5).unwrap_err();
        assert!(e.to_string().contains("a line over 5 bytes"), "{e}");
        // split across reads (a small BufReader): still bounded
        let big = [b'x'; 100];
        let mut r = BufReader::with_capacity(7, &big[..]);
        assert!(read_line(&mut r, 50).is_err());
        // a watch line split across chunks comes out whole
        let body = b"5\r\n{\"a\":\r\n3\r\n1}\n\r\n0\r\n\r\n";
        let mut r = BufReader::new(Chunked::new(&body[..]));
        assert_eq!(read_line(&mut r, 100).unwrap().unwrap(), b"{\"a\":1}");
        assert!(read_line(&mut r, 100).unwrap().is_none());
    }

    #[test]
    fn response_heads() {
        let head = |s: &str| read_head(&mut s.as_bytes());
        assert_eq!(
            head("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n").unwrap(),
            Head { code: 200, reason: "OK".into(), framing: Framing::Chunked }
        );
        assert_eq!(
            head("HTTP/1.1 403 Forbidden\r\ncontent-length: 12\r\n\r\n").unwrap(),
            Head {
                code: 403,
                reason: "Forbidden".into(),
                framing: Framing::Length(12)
            }
        );
        assert_eq!(
            head("HTTP/1.0 200 OK\r\n\r\n").unwrap().framing,
            Framing::Close
        );
        for bad in [
            "",
            "SSH-2.0-OpenSSH_9\r\n\r\n",
            "HTTP/1.1 abc\r\n\r\n",
            "HTTP/1.1 200 OK\r\nno colon\r\n\r\n",
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n",
            "HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n",
            "HTTP/1.1 200 OK\r\n",
        ] {
            assert!(head(bad).is_err(), "{bad:?}");
        }
        let many = format!(
            "HTTP/1.1 200 OK\r\n{}\r\n",
            "A: b\r\n".repeat(MAX_HEADERS + 1)
        );
        assert!(
            head(&many)
                .unwrap_err()
                .to_string()
                .contains("more than 100 headers")
        );
        let long = format!(
            "HTTP/1.1 200 OK\r\nA: {}\r\n\r\n",
            "b".repeat(MAX_HEAD_LINE)
        );
        assert!(head(&long).is_err());
    }

    #[test]
    fn request_heads() {
        let h = request_head("10.0.0.1:443", "/api/v1/x?watch=true", Some("tok\n"));
        assert!(h.starts_with("GET /api/v1/x?watch=true HTTP/1.1\r\nHost: 10.0.0.1:443\r\nAuthorization: Bearer tok\r\n"), "{h}");
        assert!(h.ends_with("Connection: close\r\n\r\n"));
        assert!(!request_head("h", "/", None).contains("Authorization"));
    }
}
