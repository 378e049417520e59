//! A backend on a raw TCP socket that fails on purpose, for the tests of upstream faults: it
//! answers readiness probes (`GET`) with an empty model list and every `POST` with the
//! [`Script`] it was given (a status with headers, an event stream that ends, resets or stalls,
//! a JSON body cut short, or a reset before any byte), and counts the `POST`s it got.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;

use crate::TestResult;

/// How an event stream goes on after its pieces.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum After {
    /// The chunked body ends properly.
    End,
    /// The connection is reset (RST), the body unfinished.
    Reset,
    /// Nothing more is sent; the connection stays open until the router closes it.
    Stall,
}

/// What the peer does with each `POST`.
#[derive(Debug, Clone)]
pub enum Script {
    /// Reads the request, then resets the connection before any byte of an answer.
    ResetBeforeHead,
    /// Reads the request and never answers (until the router hangs up).
    Silent,
    /// A whole answer: status, extra header lines (`name: value`), JSON body.
    Answer(u16, Vec<String>, String),
    /// An event stream (`200`, chunked) of `pieces`, then `after` once the test says
    /// [`Peer::proceed`] (so the router has relayed the pieces before a reset can discard them).
    Stream(Vec<String>, After),
    /// A JSON answer announcing `content-length` of the whole `body`, cut after half of it by
    /// a reset.
    CutJson(String),
}

/// A running faulty peer.
pub struct Peer {
    /// Its base URL, up to `/v1`.
    pub url: String,
    posts: Arc<AtomicUsize>,
    go: mpsc::UnboundedSender<()>,
    /// One message each time the router closed a connection the peer held open (`Stall`,
    /// `Silent`).
    pub hung_up: mpsc::UnboundedReceiver<()>,
}

impl Peer {
    pub async fn start(script: Script) -> TestResult<Peer> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let url = format!("http://{}/v1", listener.local_addr()?);
        let posts = Arc::new(AtomicUsize::new(0));
        let (hung_tx, hung_up) = mpsc::unbounded_channel();
        let (go, go_rx) = mpsc::unbounded_channel();
        let go_rx = Arc::new(tokio::sync::Mutex::new(go_rx));
        let counter = Arc::clone(&posts);
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let script = script.clone();
                let counter = Arc::clone(&counter);
                let hung = hung_tx.clone();
                let go = Arc::clone(&go_rx);
                tokio::spawn(async move {
                    let _ = serve(stream, &script, &counter, (&hung, &go)).await;
                });
            }
        });
        Ok(Peer {
            url,
            posts,
            go,
            hung_up,
        })
    }

    /// `POST`s received so far.
    pub fn posts(&self) -> usize {
        self.posts.load(Ordering::SeqCst)
    }

    /// Lets a stream go on to its `After`.
    pub fn proceed(&self) {
        let _ = self.go.send(());
    }

    /// Reads a streamed answer's `body` to its end, letting the stream go on ([`Peer::proceed`])
    /// once the client has read `relayed`, so a fault comes only after the pieces got through.
    /// An error reading the body fails the test: a failed stream must still end cleanly.
    pub async fn read_releasing<B>(&self, mut body: B, relayed: &str) -> TestResult<Vec<u8>>
    where
        B: hyper::body::Body<Data = bytes::Bytes> + Unpin,
        B::Error: std::error::Error + Send + Sync + 'static,
    {
        use http_body_util::BodyExt;
        let mut read = Vec::new();
        let mut told = false;
        loop {
            if !told && read.starts_with(relayed.as_bytes()) {
                self.proceed();
                told = true;
            }
            match tokio::time::timeout(crate::PATIENCE, body.frame()).await? {
                None => return Ok(read),
                Some(frame) => {
                    if let Some(data) = frame?.data_ref() {
                        read.extend_from_slice(data);
                    }
                }
            }
        }
    }
}

/// Answers the requests of one connection (keep-alive) until it closes.
async fn serve(
    mut stream: TcpStream,
    script: &Script,
    posts: &AtomicUsize,
    (hung, go): (
        &mpsc::UnboundedSender<()>,
        &tokio::sync::Mutex<mpsc::UnboundedReceiver<()>>,
    ),
) -> TestResult {
    loop {
        let line = read_request(&mut stream).await?;
        if line.starts_with("GET") {
            let body = "{\"object\":\"list\",\"data\":[]}";
            let head = format!(
                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
                body.len()
            );
            stream.write_all(head.as_bytes()).await?;
            continue;
        }
        posts.fetch_add(1, Ordering::SeqCst);
        match script {
            Script::ResetBeforeHead => return reset(stream),
            Script::Silent => {
                wait_for_close(&mut stream).await;
                let _ = hung.send(());
                return Ok(());
            }
            Script::Answer(status, headers, body) => {
                let mut head = format!("HTTP/1.1 {status} Scripted\r\n");
                for h in headers {
                    head.push_str(h);
                    head.push_str("\r\n");
                }
                head.push_str(&format!(
                    "content-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
                    body.len()
                ));
                stream.write_all(head.as_bytes()).await?;
            }
            Script::Stream(pieces, after) => {
                let head = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n";
                stream.write_all(head.as_bytes()).await?;
                for piece in pieces {
                    let chunk = format!("{:x}\r\n{piece}\r\n", piece.len());
                    stream.write_all(chunk.as_bytes()).await?;
                    stream.flush().await?;
                    // Separate pieces reach the router as separate reads.
                    tokio::time::sleep(Duration::from_millis(5)).await;
                }
                if *after != After::Stall {
                    go.lock().await.recv().await;
                }
                match after {
                    After::End => stream.write_all(b"0\r\n\r\n").await?,
                    After::Reset => return reset(stream),
                    After::Stall => {
                        wait_for_close(&mut stream).await;
                        let _ = hung.send(());
                        return Ok(());
                    }
                }
            }
            Script::CutJson(body) => {
                let head = format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
                    body.len()
                );
                stream.write_all(head.as_bytes()).await?;
                stream.write_all(&body.as_bytes()[..body.len() / 2]).await?;
                stream.flush().await?;
                tokio::time::sleep(Duration::from_millis(20)).await;
                return reset(stream);
            }
        }
    }
}

/// Closes with a reset (linger 0) instead of an orderly shutdown.
#[allow(
    deprecated,
    reason = "a zero linger never blocks the drop: it resets the connection at once"
)]
fn reset(stream: TcpStream) -> TestResult {
    stream.set_linger(Some(Duration::ZERO))?;
    drop(stream);
    Ok(())
}

/// Waits until the other side closes the connection.
async fn wait_for_close(stream: &mut TcpStream) {
    let mut byte = [0u8; 256];
    while let Ok(n) = stream.read(&mut byte).await {
        if n == 0 {
            break;
        }
    }
}

/// Reads one request (head and `content-length` body); returns its request line.
pub async fn read_request(stream: &mut TcpStream) -> TestResult<String> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        let n = stream.read(&mut chunk).await?;
        if n == 0 {
            return Err("connection closed before a request".into());
        }
        buf.extend_from_slice(&chunk[..n]);
        let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") else {
            continue;
        };
        let head = String::from_utf8_lossy(&buf[..end]).into_owned();
        let length = head
            .lines()
            .find_map(|l| {
                l.to_ascii_lowercase()
                    .strip_prefix("content-length:")
                    .map(|v| v.trim().to_owned())
            })
            .and_then(|v| v.parse::<usize>().ok())
            .unwrap_or(0);
        while buf.len() < end + 4 + length {
            let n = stream.read(&mut chunk).await?;
            if n == 0 {
                break;
            }
            buf.extend_from_slice(&chunk[..n]);
        }
        return Ok(head.lines().next().unwrap_or_default().to_owned());
    }
}
