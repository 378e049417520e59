//! A plain HTTP/1 client for tests, on hyper: whole answers ([`Answer`]) or open responses for
//! streaming, and raw bytes on a fresh TCP connection for byte-exact and malformed requests.

use std::net::SocketAddr;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::header::HeaderMap;
use hyper::{Method, Request, Response};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::{TestResult, PATIENCE};

/// A whole answer.
#[derive(Debug)]
pub struct Answer {
    pub status: u16,
    pub headers: HeaderMap,
    pub body: Bytes,
}

impl Answer {
    pub fn json(&self) -> TestResult<Value> {
        serde_json::from_slice(&self.body)
            .map_err(|e| format!("{e}: {}", String::from_utf8_lossy(&self.body)).into())
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    /// A header parsed as a number, or a failure naming it.
    pub fn header_f64(&self, name: &str) -> TestResult<f64> {
        let value = self
            .header(name)
            .ok_or_else(|| format!("no `{name}` header"))?;
        Ok(value.parse()?)
    }

    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    /// The OpenAI error envelope's fields, or a failure naming what came back instead.
    pub fn error(&self) -> TestResult<(String, Option<String>, String)> {
        let v = self.json()?;
        let e = &v["error"];
        let message = e["message"].as_str().ok_or("no error.message")?.to_owned();
        let kind = e["type"].as_str().ok_or("no error.type")?.to_owned();
        Ok((message, e["code"].as_str().map(str::to_owned), kind))
    }

    /// The assistant text of a chat completion.
    pub fn content(&self) -> TestResult<String> {
        let v = self.json()?;
        Ok(v["choices"][0]["message"]["content"]
            .as_str()
            .ok_or_else(|| format!("no content in {v}"))?
            .to_owned())
    }
}

/// Reads a whole response.
pub async fn read(response: Response<Incoming>) -> TestResult<Answer> {
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    let body = response.into_body().collect().await?.to_bytes();
    Ok(Answer {
        status,
        headers,
        body,
    })
}

/// A plain HTTP/1 client.
#[derive(Clone)]
pub struct Http {
    client: Client<HttpConnector, Full<Bytes>>,
}

impl Default for Http {
    fn default() -> Http {
        Http::new()
    }
}

impl Http {
    pub fn new() -> Http {
        Http {
            client: Client::builder(TokioExecutor::new()).build(HttpConnector::new()),
        }
    }

    /// HTTP/2 with prior knowledge (h2c), as a multiplexing gateway speaks.
    pub fn http2_only() -> Http {
        Http {
            client: Client::builder(TokioExecutor::new())
                .http2_only(true)
                .build(HttpConnector::new()),
        }
    }

    pub async fn send(
        &self,
        method: Method,
        url: &str,
        body: impl Into<Bytes>,
        headers: &[(&str, &str)],
    ) -> TestResult<Answer> {
        read(self.open(method, url, body, headers).await?).await
    }

    /// Sends and returns the response with its body unread (for streaming tests).
    pub async fn open(
        &self,
        method: Method,
        url: &str,
        body: impl Into<Bytes>,
        headers: &[(&str, &str)],
    ) -> TestResult<Response<Incoming>> {
        let mut request = Request::builder().method(method).uri(url);
        let mut has_type = false;
        for (name, value) in headers {
            has_type |= name.eq_ignore_ascii_case("content-type");
            request = request.header(*name, *value);
        }
        if !has_type {
            request = request.header("content-type", "application/json");
        }
        let request = request.body(Full::new(body.into()))?;
        Ok(self.client.request(request).await?)
    }
}

/// Sends raw bytes on a fresh connection and returns everything the server wrote before closing
/// (or before `PATIENCE`).
pub async fn raw_exchange(addr: SocketAddr, request: &[u8]) -> TestResult<String> {
    let mut stream = TcpStream::connect(addr).await?;
    stream.write_all(request).await?;
    let mut out = Vec::new();
    let mut buf = [0u8; 8192];
    loop {
        match tokio::time::timeout(PATIENCE, stream.read(&mut buf)).await {
            Ok(Ok(0)) | Err(_) => break,
            Ok(Ok(n)) => {
                out.extend_from_slice(&buf[..n]);
                // One answer is all these tests want: stop at the end of its headers + body.
                if answer_complete(&out) {
                    break;
                }
            }
            Ok(Err(e)) => return Err(e.into()),
        }
    }
    Ok(String::from_utf8_lossy(&out).into_owned())
}

fn answer_complete(bytes: &[u8]) -> bool {
    let text = String::from_utf8_lossy(bytes);
    let Some(head_end) = text.find("\r\n\r\n") else {
        return false;
    };
    let head = text[..head_end].to_ascii_lowercase();
    let length = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .and_then(|v| v.trim().parse::<usize>().ok());
    match length {
        Some(n) => bytes.len() >= head_end + 4 + n,
        None => false,
    }
}
