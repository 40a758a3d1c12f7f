//! Tests of `fetch_url` against local axum servers: the SSRF table and the positive paths.
//!
//! Server A listens on 127.0.0.2 and server B on 127.0.0.4, both allowed by the test policy.
//! Server C listens on 127.0.0.1, which the policy forbids, on the same port as A; it counts
//! its hits, so the tests can show that nothing ever connected to it.

use std::collections::{HashMap, VecDeque};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use axum::Router;
use axum::extract::Query;
use axum::http::{HeaderMap, header};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::get;
use serde_json::json;

use super::{AddressPolicy, FetchUrlTool, Fetcher, Resolve};
use crate::core::ports::tool::{Tool, ToolContext};
use crate::core::session::SessionId;

const A: Ipv4Addr = Ipv4Addr::new(127, 0, 0, 2);
const B: Ipv4Addr = Ipv4Addr::new(127, 0, 0, 4);
const C: Ipv4Addr = Ipv4Addr::LOCALHOST;

/// Answers each host from a queue of answers; the last answer repeats. Counts calls.
#[derive(Default)]
struct FakeResolver {
    answers: Mutex<HashMap<String, VecDeque<Vec<IpAddr>>>>,
    calls: AtomicUsize,
}

impl FakeResolver {
    fn answer(self, host: &str, answers: &[&[IpAddr]]) -> Self {
        if let Ok(mut map) = self.answers.lock() {
            map.insert(
                host.to_owned(),
                answers.iter().map(|answer| answer.to_vec()).collect(),
            );
        }
        self
    }
}

#[async_trait]
impl Resolve for FakeResolver {
    async fn resolve(&self, host: &str, port: u16) -> std::io::Result<Vec<SocketAddr>> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        let mut map = self.answers.lock().unwrap();
        let queue = map
            .get_mut(host)
            .ok_or_else(|| std::io::Error::other(format!("no such host {host}")))?;
        let answer = if queue.len() > 1 {
            queue.pop_front().unwrap()
        } else {
            queue.front().cloned().unwrap_or_default()
        };
        Ok(answer
            .into_iter()
            .map(|ip| SocketAddr::new(ip, port))
            .collect())
    }
}

async fn page() -> Response {
    (
        [(header::CONTENT_TYPE, "text/html; charset=utf-8")],
        "<html><head><title>Secret title</title><style>body{color:red}</style></head>\
         <body><h1>Welcome</h1><script>var token = 1;</script><p>Hello <b>world</b></p></body></html>",
    )
        .into_response()
}

async fn latin1() -> Response {
    (
        [(header::CONTENT_TYPE, "text/plain; charset=ISO-8859-1")],
        b"Gr\xfc\xdfe aus K\xf6ln".to_vec(),
    )
        .into_response()
}

async fn big() -> Response {
    ([(header::CONTENT_TYPE, "text/plain")], "x".repeat(100_000)).into_response()
}

async fn small() -> Response {
    (
        [(header::CONTENT_TYPE, "text/html")],
        "<p>abcdefghijklmnop</p>",
    )
        .into_response()
}

async fn image() -> Response {
    (
        [(header::CONTENT_TYPE, "image/png")],
        vec![0x89, b'P', b'N', b'G'],
    )
        .into_response()
}

async fn slow() -> Response {
    tokio::time::sleep(Duration::from_secs(5)).await;
    "late".into_response()
}

async fn redirect(Query(query): Query<HashMap<String, String>>) -> Response {
    Redirect::temporary(query.get("to").map(String::as_str).unwrap_or("/")).into_response()
}

async fn host_echo(headers: HeaderMap) -> Response {
    let host = headers
        .get(header::HOST)
        .and_then(|value| value.to_str().ok())
        .unwrap_or("");
    (
        [(header::CONTENT_TYPE, "text/plain")],
        format!("server saw host {host}"),
    )
        .into_response()
}

async fn redirect_loop() -> Response {
    Redirect::temporary("/loop").into_response()
}

/// Starts a server on `ip` and `port` (0: any) and returns its port; `hits` counts every
/// request it gets.
async fn serve(ip: Ipv4Addr, port: u16, hits: Arc<AtomicUsize>) -> u16 {
    let app = Router::new()
        .route("/page", get(page))
        .route("/latin1", get(latin1))
        .route("/big", get(big))
        .route("/small", get(small))
        .route("/image", get(image))
        .route("/slow", get(slow))
        .route("/redirect", get(redirect))
        .route("/loop", get(redirect_loop))
        .route("/host", get(host_echo))
        .layer(axum::middleware::from_fn(
            move |request: axum::extract::Request, next: axum::middleware::Next| {
                let hits = hits.clone();
                async move {
                    hits.fetch_add(1, Ordering::SeqCst);
                    next.run(request).await
                }
            },
        ));
    let listener = tokio::net::TcpListener::bind((ip, port)).await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move { axum::serve(listener, app).await });
    port
}

struct World {
    tool: FetchUrlTool,
    resolver: Arc<FakeResolver>,
    a: u16,
    b: u16,
    a_hits: Arc<AtomicUsize>,
    c_hits: Arc<AtomicUsize>,
}

async fn world() -> World {
    let a_hits = Arc::new(AtomicUsize::new(0));
    let a = serve(A, 0, a_hits.clone()).await;
    let b = serve(B, 0, Arc::default()).await;
    let c_hits = Arc::new(AtomicUsize::new(0));
    serve(C, a, c_hits.clone()).await;
    let private: IpAddr = "10.0.0.7".parse().unwrap();
    let resolver = Arc::new(
        FakeResolver::default()
            .answer("localhost", &[&[A.into()]])
            .answer("public.test", &[&[A.into()]])
            .answer("other.test", &[&[B.into()]])
            .answer("evil.test", &[&[private]])
            .answer("metadata.test", &[&["169.254.169.254".parse().unwrap()]])
            .answer("mixed.test", &[&[A.into(), C.into()]])
            .answer("v6private.test", &[&["fd00::1".parse().unwrap()]])
            // Public (allowed) at check time, the forbidden server C for any later lookup.
            .answer("rebind.test", &[&[A.into()], &[C.into()]])
            .answer("rebind-late.test", &[&[A.into()], &[C.into()]]),
    );
    let policy = AddressPolicy::allowing(vec![A.into(), B.into()]);
    let tool = FetchUrlTool::with_fetcher(Fetcher::new(policy, resolver.clone()));
    World {
        tool,
        resolver,
        a,
        b,
        a_hits,
        c_hits,
    }
}

impl World {
    async fn call(&self, arguments: serde_json::Value) -> (bool, String) {
        let context =
            ToolContext::for_test().with_session(SessionId::new("test", "fetch").unwrap());
        let output = self.tool.call(arguments, &context).await;
        (output.is_error, output.content)
    }

    /// Fetches `url` and asserts it was refused with a message containing `expected`.
    async fn check(&self, url: &str, expected: &str) {
        let (is_error, content) = self.call(json!({"url": url})).await;
        assert!(is_error, "{url} was not refused: {content}");
        assert!(
            content.contains("blocked by SSRF policy"),
            "{url}: {content}"
        );
        assert!(
            content.contains(expected),
            "{url}: expected {expected:?} in {content:?}"
        );
    }
}

/// The page part of a result, before the notes.
fn body_of(content: &str) -> &str {
    content.split("\n\n[").next().unwrap_or("")
}

#[tokio::test]
async fn ssrf_cases_are_all_refused() {
    let world = world().await;
    // Server C (forbidden) listens on 127.0.0.1 at port `a`, so every loopback case that
    // slipped through would reach a live server and be counted.
    let a = world.a;
    let cases: Vec<(String, &str)> = vec![
        (
            format!("http://127.0.0.1:{a}/page"),
            "127.0.0.1, a loopback",
        ),
        (
            format!("http://localhost:{a}/page"),
            "\"localhost\" is local",
        ),
        (format!("http://LocalHost.:{a}/page"), "is local"),
        (format!("http://sub.localhost:{a}/page"), "is local"),
        ("http://10.1.2.3/".into(), "private"),
        ("http://172.16.5.4/".into(), "private"),
        ("http://192.168.0.1/".into(), "private"),
        (
            "http://169.254.169.254/latest/meta-data/".into(),
            "cloud metadata",
        ),
        ("http://100.64.1.1/".into(), "carrier-grade NAT"),
        ("http://0.0.0.0/".into(), "unspecified"),
        ("http://255.255.255.255/".into(), "broadcast"),
        ("http://224.0.0.1/".into(), "multicast"),
        ("http://192.0.2.1/".into(), "documentation"),
        (format!("http://[::1]:{a}/"), "loopback"),
        ("http://[::]/".into(), "unspecified"),
        ("http://[fe80::1]/".into(), "link-local"),
        ("http://[fc00::1]/".into(), "unique local"),
        ("http://[ff02::1]/".into(), "multicast"),
        ("http://[2001:db8::1]/".into(), "documentation"),
        (format!("http://[::ffff:127.0.0.1]:{a}/"), "IPv4 embedded"),
        ("http://[::ffff:169.254.169.254]/".into(), "IPv4 embedded"),
        ("http://[64:ff9b::a00:1]/".into(), "NAT64"),
        ("http://[2002:c0a8:1::1]/".into(), "6to4"),
        (
            format!("http://2130706433:{a}/page"),
            "127.0.0.1, a loopback",
        ),
        (
            format!("http://0177.0.0.1:{a}/page"),
            "127.0.0.1, a loopback",
        ),
        (
            format!("http://0x7f000001:{a}/page"),
            "127.0.0.1, a loopback",
        ),
        (format!("http://0x7f.1:{a}/page"), "127.0.0.1, a loopback"),
        (format!("http://127.1:{a}/page"), "127.0.0.1, a loopback"),
        (
            "http://evil.test/".into(),
            "evil.test is 10.0.0.7, a private",
        ),
        ("http://metadata.test/".into(), "cloud metadata"),
        ("http://v6private.test/".into(), "unique local"),
        // One answer mixing an allowed and a forbidden address: the whole hop is refused.
        (
            format!("http://mixed.test:{a}/page"),
            "mixed.test is 127.0.0.1",
        ),
        (
            format!("http://127.0.0.2:{a}/redirect?to=http://10.0.0.1/"),
            "10.0.0.1, a private",
        ),
        (
            format!("http://127.0.0.2:{a}/redirect?to=http://169.254.169.254/"),
            "cloud metadata",
        ),
        (
            format!("http://127.0.0.2:{a}/redirect?to=http://127.0.0.1:{a}/page"),
            "loopback",
        ),
        (
            format!("http://127.0.0.2:{a}/redirect?to=http://evil.test/"),
            "evil.test is 10.0.0.7",
        ),
        (
            format!("http://127.0.0.2:{a}/redirect?to=file:///etc/passwd"),
            "scheme \"file\"",
        ),
        // The second hop to the same name resolves again and meets the rebound answer.
        (
            format!("http://rebind-late.test:{a}/redirect?to=http://rebind-late.test:{a}/page"),
            "rebind-late.test is 127.0.0.1",
        ),
        ("file:///etc/passwd".into(), "scheme \"file\""),
        ("ftp://example.com/".into(), "scheme \"ftp\""),
        ("gopher://example.com/".into(), "scheme \"gopher\""),
        (format!("http://user:pw@127.0.0.2:{a}/page"), "credentials"),
        ("http://user@example.com/".into(), "credentials"),
    ];
    for (url, reason) in &cases {
        world.check(url, reason).await;
    }
    assert_eq!(
        world.c_hits.load(Ordering::SeqCst),
        0,
        "the forbidden server was contacted"
    );
}

#[tokio::test]
async fn dns_rebinding_cannot_move_the_connection() {
    let world = world().await;
    // rebind.test answers A (allowed) once, then C (forbidden, listening on the same port).
    // The hop is checked with the first answer and connected with it; nothing resolves the
    // name again, so C never sees a request.
    let a = world.a;
    let before = world.resolver.calls.load(Ordering::SeqCst);
    let (is_error, content) = world
        .call(json!({"url": format!("http://rebind.test:{a}/host")}))
        .await;
    assert!(!is_error, "{content}");
    assert!(content.contains("server saw host rebind.test"), "{content}");
    let calls = world.resolver.calls.load(Ordering::SeqCst) - before;
    assert_eq!(calls, 1, "the name was resolved more than once");
    assert_eq!(world.a_hits.load(Ordering::SeqCst), 1);
    assert_eq!(
        world.c_hits.load(Ordering::SeqCst),
        0,
        "the forbidden server was contacted"
    );
}

#[tokio::test]
async fn pinned_connection_reaches_the_checked_server() {
    let world = world().await;
    let a = world.a;
    let (is_error, content) = world
        .call(json!({"url": format!("http://public.test:{a}/host")}))
        .await;
    assert!(!is_error, "{content}");
    // The Host header keeps the name: pinning changes the address, not the request.
    assert!(
        content.contains(&format!("server saw host public.test:{a}")),
        "{content}"
    );
    assert_eq!(world.c_hits.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn invalid_url_is_named() {
    let world = world().await;
    let (is_error, content) = world.call(json!({"url": "not a url"})).await;
    assert!(is_error && content.contains("invalid URL"), "{content}");
}

#[tokio::test]
async fn html_becomes_text_without_head_script_or_style() {
    let world = world().await;
    let url = format!("http://127.0.0.2:{}/page", world.a);
    let (is_error, content) = world.call(json!({"url": url})).await;
    assert!(!is_error, "{content}");
    assert!(
        content.contains("Welcome") && content.contains("Hello"),
        "{content}"
    );
    for absent in ["Secret title", "color:red", "token", "<p>", "<b>"] {
        assert!(!content.contains(absent), "{absent} in {content}");
    }
    let (_, raw) = world.call(json!({"url": url, "format": "html"})).await;
    assert!(raw.starts_with("<html>"), "{raw}");
}

#[tokio::test]
async fn latin1_is_decoded() {
    let world = world().await;
    let url = format!("http://127.0.0.2:{}/latin1", world.a);
    let (is_error, content) = world.call(json!({"url": url})).await;
    assert!(!is_error, "{content}");
    assert!(content.starts_with("Grüße aus Köln"), "{content}");
}

#[tokio::test]
async fn limits_cut_and_say_so() {
    let world = world().await;
    let a = world.a;
    let (_, content) = world
        .call(json!({"url": format!("http://127.0.0.2:{a}/small"), "max_bytes": 10, "format": "html"}))
        .await;
    assert!(content.starts_with("<p>abcdefg\n"), "{content}");
    assert!(content.contains("Body cut at 10 bytes"), "{content}");
    let (_, content) = world
        .call(json!({"url": format!("http://127.0.0.2:{a}/big"), "max_bytes": 50_000, "max_chars": 100_000}))
        .await;
    assert_eq!(body_of(&content).len(), 50_000);
    assert!(content.contains("Body cut at 50000 bytes"), "{content}");
    let (_, content) = world
        .call(json!({"url": format!("http://127.0.0.2:{a}/big")}))
        .await;
    assert_eq!(body_of(&content).len(), 8000);
    assert!(
        content.contains("Output cut at 8000 characters"),
        "{content}"
    );
    assert!(!content.contains("Body cut"), "{content}");
}

#[tokio::test]
async fn redirect_to_another_allowed_address_is_followed() {
    let world = world().await;
    let (a, b) = (world.a, world.b);
    let url = format!("http://127.0.0.2:{a}/redirect?to=http://other.test:{b}/latin1");
    let (is_error, content) = world.call(json!({"url": url})).await;
    assert!(!is_error, "{content}");
    assert!(content.contains("Grüße"), "{content}");
    assert!(
        content.contains(&format!("[Source: http://other.test:{b}/latin1]")),
        "{content}"
    );
    let relative = format!("http://127.0.0.2:{a}/redirect?to=/page");
    let (is_error, content) = world.call(json!({"url": relative})).await;
    assert!(!is_error && content.contains("Welcome"), "{content}");
}

#[tokio::test]
async fn redirect_loops_stop() {
    let world = world().await;
    let a = world.a;
    let url = format!("http://127.0.0.2:{a}/loop");
    let (is_error, content) = world.call(json!({"url": url})).await;
    assert!(
        is_error && content.contains("too many redirects"),
        "{content}"
    );
}

#[tokio::test]
async fn non_text_content_is_refused() {
    let world = world().await;
    let url = format!("http://127.0.0.2:{}/image", world.a);
    let (is_error, content) = world.call(json!({"url": url})).await;
    assert!(
        is_error && content.contains("unsupported content-type \"image/png\""),
        "{content}"
    );
}

#[tokio::test]
async fn slow_server_times_out() {
    let world = world().await;
    let url = format!("http://127.0.0.2:{}/slow", world.a);
    let started = std::time::Instant::now();
    let (is_error, content) = world.call(json!({"url": url, "timeout_seconds": 1})).await;
    assert!(
        is_error && content.contains("timed out after 1 s"),
        "{content}"
    );
    assert!(started.elapsed() < Duration::from_secs(4));
}

#[tokio::test]
async fn bad_arguments_are_named() {
    let world = world().await;
    for (arguments, expected) in [
        (json!({}), "missing field `url`"),
        (
            json!({"url": "http://x/", "bogus": 1}),
            "unknown field `bogus`",
        ),
        (
            json!({"url": "http://x/", "format": "pdf"}),
            "unknown variant `pdf`",
        ),
        (
            json!({"url": "http://x/", "max_bytes": 0}),
            "max_bytes must be at least 1",
        ),
    ] {
        let (is_error, content) = world.call(arguments).await;
        assert!(is_error && content.contains(expected), "{content}");
    }
}
