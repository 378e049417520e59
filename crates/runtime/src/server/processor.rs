//! The external processor's listener (Envoy's `ext_proc`: gRPC over HTTP/2). Each accepted
//! connection is served whole on one serving shard ([`Shards`]): hyper's HTTP/2 connection task
//! and the task of every stream on it run on that shard's single thread.
//!
//! Why not tonic's server on the shared work-stealing runtime: there the connection and each
//! stream are separate tasks that land on different workers, so every hand-off between them (a
//! message read, its answer written) wakes another thread through the kernel — about 4 `futex`
//! calls and 6 context switches a request at one connection. hyper spawns a stream's task with
//! `tokio::spawn`, which on a shard's current-thread runtime queues it on the same thread, so
//! waking it is a push onto a local queue. Envoy opens one connection to the processor per
//! worker thread, and each connection goes to the shard with the fewest open ones: several
//! connections still spread over the cores.

use std::error::Error as StdError;
use std::sync::Arc;
use std::time::Duration;

use hyper::body::{Body, Incoming};
use hyper::server::conn::http2;
use hyper::service::Service;
use hyper::{Request, Response};
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::graceful::{GracefulShutdown, Watcher};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

use super::shards::Shards;

type BoxError = Box<dyn StdError + Send + Sync>;

/// Serves `service` on `listener` until `stop` changes, then lets open streams finish for up to
/// `drain` (Envoy keeps its HTTP/2 connection to the processor open for as long as it may, so
/// each connection is asked to go away first). Connections go to `shards` when there are any,
/// otherwise they are served on the calling runtime.
pub(super) async fn serve<S, B>(
    listener: TcpListener,
    service: S,
    shards: Option<Arc<Shards>>,
    drain: Duration,
    mut stop: watch::Receiver<bool>,
) where
    S: Service<Request<Incoming>, Response = Response<B>> + Clone + Send + 'static,
    S::Future: Send + 'static,
    S::Error: Into<BoxError>,
    B: Body + Send + 'static,
    B::Data: Send,
    B::Error: Into<BoxError>,
{
    let mut builder = http2::Builder::new(TokioExecutor::new());
    builder
        .timer(TokioTimer::new())
        // As tonic's server had it: Envoy multiplexes all of one worker's requests on one
        // connection, and refusing a stream over a bound would fail that request.
        .max_concurrent_streams(None);
    let graceful = GracefulShutdown::new();
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => {
                    let _ = stream.set_nodelay(true);
                    let connection = Connection {
                        service: service.clone(),
                        builder: builder.clone(),
                        watcher: graceful.watcher(),
                    };
                    connection.hand_over(stream, shards.as_deref());
                }
                Err(err) => {
                    // Out of file descriptors and similar: back off instead of spinning.
                    tracing::warn!(%err, "the external processor's accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            },
            _ = stop.changed() => break,
        }
    }
    drop(listener);
    if tokio::time::timeout(drain, graceful.shutdown())
        .await
        .is_err()
    {
        tracing::warn!("external processing streams still open after the drain period");
    }
}

/// An accepted processor connection and what serving it needs.
struct Connection<S> {
    service: S,
    builder: http2::Builder<TokioExecutor>,
    watcher: Watcher,
}

impl<S, B> Connection<S>
where
    S: Service<Request<Incoming>, Response = Response<B>> + Clone + Send + 'static,
    S::Future: Send + 'static,
    S::Error: Into<BoxError>,
    B: Body + Send + 'static,
    B::Data: Send,
    B::Error: Into<BoxError>,
{
    /// Starts serving the connection: on a shard when there are shards, here otherwise.
    fn hand_over(self, stream: TcpStream, shards: Option<&Shards>) {
        let Some(shards) = shards else {
            tokio::spawn(self.run(stream));
            return;
        };
        // The socket leaves this runtime's reactor and joins the shard's.
        let stream = match stream.into_std() {
            Ok(stream) => stream,
            Err(err) => {
                tracing::warn!(%err, "cannot hand a processor connection to a shard");
                return;
            }
        };
        // `false` only while the server stops: the connection is closed unanswered.
        shards.dispatch(move || async move {
            match TcpStream::from_std(stream) {
                Ok(stream) => self.run(stream).await,
                Err(err) => tracing::warn!(%err, "a shard cannot take a processor connection"),
            }
        });
    }

    async fn run(self, stream: TcpStream) {
        let connection = self
            .builder
            .serve_connection(TokioIo::new(stream), self.service);
        // Connection errors (Envoy resetting or going away) are the peer's business.
        let _ = self.watcher.watch(connection).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;
    use http_body_util::{BodyExt, Full};
    use std::convert::Infallible;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// A service that answers with the name of the thread that runs it, once `go` allows;
    /// `entered` counts the requests it has begun.
    fn thread_names(
        go: watch::Receiver<bool>,
        entered: Arc<AtomicUsize>,
    ) -> impl Service<
        Request<Incoming>,
        Response = Response<Full<Bytes>>,
        Error = Infallible,
        Future = impl Send,
    > + Clone
           + Send
           + 'static {
        hyper::service::service_fn(move |_request: Request<Incoming>| {
            let mut go = go.clone();
            entered.fetch_add(1, Ordering::SeqCst);
            async move {
                let _ = go.wait_for(|go| *go).await;
                let name = std::thread::current().name().unwrap_or("").to_owned();
                Ok::<_, Infallible>(Response::new(Full::new(Bytes::from(name))))
            }
        })
    }

    /// An HTTP/2 client connection to `addr`.
    async fn connect(
        addr: std::net::SocketAddr,
    ) -> hyper::client::conn::http2::SendRequest<Full<Bytes>> {
        let stream = TcpStream::connect(addr).await.unwrap();
        let (sender, connection) =
            hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(stream))
                .await
                .unwrap();
        tokio::spawn(connection);
        sender
    }

    /// Sends `count` requests at once on one connection; the bodies of their answers.
    async fn streams(
        sender: &hyper::client::conn::http2::SendRequest<Full<Bytes>>,
        count: usize,
    ) -> Vec<Result<String, String>> {
        let calls = (0..count).map(|_| {
            let mut sender = sender.clone();
            async move {
                let request = Request::post("http://processor/")
                    .body(Full::new(Bytes::new()))
                    .unwrap();
                let answer = sender
                    .send_request(request)
                    .await
                    .map_err(|e| e.to_string())?;
                let body = answer
                    .into_body()
                    .collect()
                    .await
                    .map_err(|e| e.to_string())?;
                Ok(String::from_utf8(body.to_bytes().to_vec()).unwrap())
            }
        });
        futures_util::future::join_all(calls).await
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn each_connection_and_all_its_streams_run_on_one_shard() {
        let shards = Arc::new(Shards::start(2).unwrap());
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (stop, stopped) = watch::channel(false);
        let (_go, going) = watch::channel(true);
        let server = tokio::spawn(serve(
            listener,
            thread_names(going, Arc::default()),
            Some(Arc::clone(&shards)),
            Duration::from_secs(5),
            stopped,
        ));
        // The first connection stays open while the second is accepted, so the second goes to
        // the other shard.
        let first = connect(addr).await;
        let first_names = streams(&first, 4).await;
        let second = connect(addr).await;
        let second_names = streams(&second, 4).await;
        let one = |names: &[Result<String, String>]| {
            let first = names[0].clone().unwrap();
            assert!(names.iter().all(|n| n.as_ref() == Ok(&first)), "{names:?}");
            first
        };
        let (a, b) = (one(&first_names), one(&second_names));
        let mut seen = [a, b];
        seen.sort();
        assert_eq!(seen, ["src-shard-0", "src-shard-1"]);
        let _ = stop.send(true);
        server.await.unwrap();
        tokio::task::spawn_blocking(move || shards.stop())
            .await
            .unwrap();
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn without_shards_streams_run_on_the_calling_runtime() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (stop, stopped) = watch::channel(false);
        let (_go, going) = watch::channel(true);
        let server = tokio::spawn(serve(
            listener,
            thread_names(going, Arc::default()),
            None,
            Duration::from_secs(5),
            stopped,
        ));
        let names = streams(&connect(addr).await, 2).await;
        for name in names {
            let name = name.unwrap();
            assert!(!name.starts_with("src-shard-"), "{name}");
        }
        let _ = stop.send(true);
        server.await.unwrap();
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_stream_open_at_stop_finishes_and_new_connections_are_refused() {
        let shards = Arc::new(Shards::start(1).unwrap());
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (stop, stopped) = watch::channel(false);
        let (go, going) = watch::channel(false);
        let entered = Arc::new(AtomicUsize::new(0));
        let server = tokio::spawn(serve(
            listener,
            thread_names(going, Arc::clone(&entered)),
            Some(Arc::clone(&shards)),
            Duration::from_secs(10),
            stopped,
        ));
        let sender = connect(addr).await;
        let open = tokio::spawn(async move { streams(&sender, 1).await });
        // The stream is open (its answer waits for `go`) before the server is told to stop.
        while entered.load(Ordering::SeqCst) == 0 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let _ = stop.send(true);
        // The listener closes at once; the open stream still holds the drain.
        while TcpStream::connect(addr).await.is_ok() {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        assert!(!server.is_finished());
        let _ = go.send(true);
        let names = open.await.unwrap();
        assert_eq!(names, [Ok("src-shard-0".to_owned())]);
        server.await.unwrap();
        tokio::task::spawn_blocking(move || shards.stop())
            .await
            .unwrap();
    }
}
