//! Benchmark: the gateway under load through its HTTP API, with a scripted LLM that answers at
//! once.
//!
//! It starts the real `squidbot gateway` (release build) on a fresh home and measures:
//! - startup: exec to the first `200` from `/readyz`;
//! - idle RSS after start;
//! - turns per second and p50/p99 latency of `POST /v1/sessions/{id}/messages` for 1, 10, 100
//!   and 1 000 concurrent sessions (each session a client that sends its next message when the
//!   last one is answered; every turn is a full turn: durable appends, prompt, LLM over HTTP);
//! - RSS after each level (10 000 turns each) and once the load has stopped.
//!
//! With `--soak` it runs the soak instead: 100 000 turns over 1 000 sessions (100 each, so
//! every session consolidates), sampling the gateway's RSS every second, and prints the RSS at
//! the end of warm-up (the first 10 000 turns), its peak after warm-up, and at the end.
//!
//! Run: `cargo bench --bench gateway_load` (`-- --quick` for a shorter run, `-- --soak` for
//! the soak; `SQUIDBOT_PROOF_TURNS` / `SQUIDBOT_PROOF_SESSIONS` scale the soak;
//! `SQUIDBOT_BIN=target/release/squidbot` measures the release build instead of the bench's).

#[path = "../tests/it/support/scripted_llm.rs"]
#[allow(dead_code)]
mod scripted_llm;

use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use scripted_llm::{Reply, ScriptedLlm};

const TOKEN: &str = "bench-token";

fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// CPU time (user + system) the process has used, from /proc.
fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let fields: Vec<&str> = stat
        .rsplit(')')
        .next()
        .unwrap_or("")
        .split_whitespace()
        .collect();
    let ticks: f64 = fields
        .get(11..13)
        .map(|f| f.iter().filter_map(|v| v.parse::<f64>().ok()).sum())
        .unwrap_or(0.0);
    ticks / 100.0
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let index = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[index.min(sorted.len() - 1)]
}

async fn run_load(
    client: &reqwest::Client,
    base: &str,
    sessions: usize,
    turns_per_session: usize,
    progress: &Arc<AtomicUsize>,
) -> (f64, Duration, Duration) {
    let started = Instant::now();
    let tasks: Vec<_> = (0..sessions)
        .map(|s| {
            let client = client.clone();
            let progress = progress.clone();
            let url = format!("{base}/v1/sessions/load{sessions}-{s}/messages");
            tokio::spawn(async move {
                let mut latencies = Vec::with_capacity(turns_per_session);
                for m in 0..turns_per_session {
                    let t = Instant::now();
                    let response = client
                        .post(&url)
                        .bearer_auth(TOKEN)
                        .json(&serde_json::json!({ "text": format!("message {m}") }))
                        .send()
                        .await
                        .expect("request");
                    assert!(
                        response.status().is_success(),
                        "status {}",
                        response.status()
                    );
                    let _ = response.bytes().await;
                    latencies.push(t.elapsed());
                    progress.fetch_add(1, Ordering::Relaxed);
                }
                latencies
            })
        })
        .collect();
    let mut all = Vec::with_capacity(sessions * turns_per_session);
    for task in tasks {
        all.extend(task.await.expect("client task"));
    }
    let elapsed = started.elapsed();
    all.sort();
    (
        all.len() as f64 / elapsed.as_secs_f64(),
        percentile(&all, 0.5),
        percentile(&all, 0.99),
    )
}

fn env_or(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// The soak: `turns` over `sessions`, RSS sampled every second while it runs.
async fn soak(client: &reqwest::Client, base: &str, pid: u32) {
    let turns = env_or("SQUIDBOT_PROOF_TURNS", 100_000);
    let sessions = env_or("SQUIDBOT_PROOF_SESSIONS", 1_000);
    let warm_up = turns / 10;
    let progress = Arc::new(AtomicUsize::new(0));
    let samples = Arc::new(std::sync::Mutex::new(Vec::<(usize, u64)>::new()));
    let sampler = tokio::spawn({
        let progress = progress.clone();
        let samples = samples.clone();
        async move {
            loop {
                tokio::time::sleep(Duration::from_secs(1)).await;
                let done = progress.load(Ordering::Relaxed);
                samples.lock().unwrap().push((done, rss_kib(pid)));
            }
        }
    });
    let started = Instant::now();
    let (tps, p50, p99) = run_load(client, base, sessions, turns / sessions, &progress).await;
    sampler.abort();
    let end = rss_kib(pid);
    let samples = samples.lock().unwrap().clone();
    let at_warm_up = samples
        .iter()
        .find(|(done, _)| *done >= warm_up)
        .map_or(end, |(_, rss)| *rss);
    let peak = samples
        .iter()
        .filter(|(done, _)| *done >= warm_up)
        .map(|(_, rss)| *rss)
        .max()
        .unwrap_or(end)
        .max(end);
    let mib = |kib: u64| kib as f64 / 1024.0;
    println!(
        "  soak: {} turns over {sessions} sessions in {:.1} s ({tps:.0} turns/s, p50 {:.2} ms, p99 {:.2} ms)",
        progress.load(Ordering::Relaxed),
        started.elapsed().as_secs_f64(),
        p50.as_secs_f64() * 1e3,
        p99.as_secs_f64() * 1e3,
    );
    println!(
        "  soak RSS: after warm-up ({warm_up} turns) {:.1} MiB, peak after warm-up {:.1} MiB, end {:.1} MiB; growth after warm-up {:+.1} MiB",
        mib(at_warm_up),
        mib(peak),
        mib(end),
        mib(end) - mib(at_warm_up)
    );
    let series: Vec<String> = samples
        .iter()
        .step_by((samples.len() / 12).max(1))
        .map(|(done, rss)| format!("{}k:{:.1}", done / 1000, mib(*rss)))
        .collect();
    println!("  soak RSS series (turns:MiB): {}", series.join(" "));
}

#[tokio::main]
async fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let soaking = std::env::args().any(|a| a == "--soak");
    let llm = ScriptedLlm::start().await;
    llm.set_handler(|_| Reply::Text("ok".into()));
    let home = tempfile::tempdir().expect("tempdir");
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let config = format!(
        "llm:\n  providers:\n    local:\n      api_base: \"{}\"\n  models:\n    small:\n      provider: local\n      model: scripted\n  pools:\n    default: [small]\nagents:\n  consolidation_threshold: 100\n  keep_recent: 20\n  heartbeat:\n    enabled: false\ngateway:\n  max_parallel_sessions: 128\n  http:\n    listen: 127.0.0.1:{port}\n    token: {TOKEN}\n",
        llm.url()
    );
    std::fs::write(home.path().join("squidbot.yaml"), config).unwrap();
    let base = format!("http://127.0.0.1:{port}");
    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(256)
        .tcp_nodelay(true)
        .build()
        .unwrap();

    let exec = Instant::now();
    // `cargo bench` builds its own squidbot (tokio with the dev-dependencies' features, so other
    // symbol names than a release build and none of build.rs's function order applies):
    // SQUIDBOT_BIN points the bench at the release binary users run.
    let binary =
        std::env::var("SQUIDBOT_BIN").unwrap_or_else(|_| env!("CARGO_BIN_EXE_squidbot").to_owned());
    let mut child = tokio::process::Command::new(binary)
        .arg("gateway")
        .env("SQUIDBOT_HOME", home.path())
        .env("RUST_LOG", "error")
        .envs(std::env::var("BENCH_MALLOC_ARENA_MAX").map(|v| ("MALLOC_ARENA_MAX".to_owned(), v)))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("spawn gateway");
    let pid = child.id().unwrap();
    loop {
        if let Ok(r) = client.get(format!("{base}/readyz")).send().await
            && r.status().is_success()
        {
            break;
        }
        tokio::time::sleep(Duration::from_micros(500)).await;
    }
    let ready = exec.elapsed();
    tokio::time::sleep(Duration::from_millis(300)).await;
    let idle = rss_kib(pid);
    println!(
        "gateway_load: squidbot gateway (release), scripted LLM answering at once, {} cores",
        std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1)
    );
    println!("  exec -> /readyz: {:.1} ms", ready.as_secs_f64() * 1e3);
    println!("  idle RSS after start: {:.1} MiB", idle as f64 / 1024.0);

    if soaking {
        soak(&client, &base, pid).await;
        child.kill().await.ok();
        return;
    }
    let total_turns = if quick { 2_000 } else { 10_000 };
    let mut done = 0;
    let progress = Arc::new(AtomicUsize::new(0));
    // The 100-session level runs twice: if memory were lost per turn, RSS would keep rising.
    for sessions in [1usize, 10, 100, 100, 1_000] {
        let per_session = (total_turns / sessions).max(1);
        let cpu_before = cpu_seconds(pid);
        let (tps, p50, p99) = run_load(&client, &base, sessions, per_session, &progress).await;
        let cpu_per_turn = (cpu_seconds(pid) - cpu_before) / (per_session * sessions) as f64;
        done += per_session * sessions;
        println!(
            "  {sessions:>4} concurrent sessions: {tps:>7.0} turns/s, p50 {:>6.2} ms, p99 {:>6.2} ms; gateway CPU {:.0} µs/turn; RSS after {done} turns {:.1} MiB",
            p50.as_secs_f64() * 1e3,
            p99.as_secs_f64() * 1e3,
            cpu_per_turn * 1e6,
            rss_kib(pid) as f64 / 1024.0
        );
    }
    tokio::time::sleep(Duration::from_secs(12)).await;
    println!(
        "  RSS 12 s after the load: {:.1} MiB",
        rss_kib(pid) as f64 / 1024.0
    );
    child.kill().await.ok();
}
