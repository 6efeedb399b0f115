//! How long the list and a memory page take to render at 10,000 memories,
//! in the browser: from the route change to the page in the document, its
//! API calls included (the `render:<view>` measures the UI records). A
//! measurement, not a test: it asserts nothing about time and runs only
//! when asked:
//!
//! ```sh
//! cargo test --release --test api browser::render_times -- --ignored --nocapture
//! ```
//!
//! With `ENGRAM_UI_SCREENSHOTS=<dir>` it also saves the screenshots
//! `docs/browser.md` shows.

use std::io::Write;
use std::path::PathBuf;

use chrono::{Duration, Utc};
use engram::memory::{
    Category, Lifecycle, Memory, MemoryId, Namespace, Origin, RelatedEdge, Relationship,
};
use serde_json::Value;

use super::{Browser, Served};
use crate::helpers::{Ground, TestApp};

const MEMORIES: usize = 10_000;
const SAMPLES: usize = 30;

/// Writes `MEMORIES` memory files (80 % in repo/forge, the rest user/ana,
/// every fifth linked to the one before); their ids, oldest first.
fn write_store(root: &std::path::Path) -> Vec<MemoryId> {
    let words = [
        "deploy",
        "helm",
        "chart",
        "staging",
        "cache",
        "index",
        "queue",
        "worker",
        "retry",
        "schema",
        "migration",
        "lint",
        "fixture",
        "review",
        "token",
        "budget",
    ];
    let start = Utc::now() - Duration::days(30);
    let mut ids: Vec<MemoryId> = Vec::with_capacity(MEMORIES);
    for n in 0..MEMORIES {
        let namespace = if n % 5 == 4 {
            Namespace::User("ana".parse().unwrap())
        } else {
            Namespace::Repo("forge".parse().unwrap())
        };
        let related = match ids.last() {
            Some(previous) if n % 5 == 1 => vec![RelatedEdge {
                id: *previous,
                relationship: Relationship::Related,
            }],
            _ => Vec::new(),
        };
        let at = start + Duration::seconds(i64::try_from(n).unwrap() * 60);
        let memory = Memory {
            id: MemoryId::new(),
            version: 1,
            namespace,
            category: Category::ALL[n % Category::ALL.len()],
            created_at: at,
            updated_at: at,
            supersedes: None,
            related,
            importance: None,
            session_id: None,
            trigger: Origin::Manual,
            anchors: Vec::new(),
            commit: None,
            observed_at: None,
            lifecycle: Lifecycle::default(),
            content: format!(
                "Fact {n}: the **{}** rule for `{}` and {} in the {} service.",
                words[n % words.len()],
                words[(n / 3) % words.len()],
                words[(n / 7) % words.len()],
                words[(n / 11) % words.len()],
            ),
        };
        let dir = match &memory.namespace {
            Namespace::Repo(repo) => root.join("repos").join(repo.as_str()),
            Namespace::User(user) => root.join("users").join(user.as_str()),
        };
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            dir.join(format!("{}.md", memory.id)),
            engram::store::markdown::render(&memory),
        )
        .unwrap();
        ids.push(memory.id);
    }
    ids
}

/// The durations of every `render:<view>` measure so far, in ms.
async fn measures(browser: &Browser, view: &str) -> Vec<f64> {
    let script =
        format!("return performance.getEntriesByName('render:{view}').map((m) => m.duration)");
    serde_json::from_value(browser.eval(&script).await).unwrap()
}

fn summary(view: &str, mut times: Vec<f64>) -> String {
    times.sort_by(f64::total_cmp);
    let at = |q: f64| {
        #[expect(
            clippy::cast_possible_truncation,
            clippy::cast_sign_loss,
            clippy::cast_precision_loss,
            reason = "a rank among a few dozen samples"
        )]
        let rank = ((times.len() - 1) as f64 * q).round() as usize;
        times[rank]
    };
    format!(
        "{view}: {} renders, p50 {:.1} ms, p95 {:.1} ms, max {:.1} ms",
        times.len(),
        at(0.5),
        at(0.95),
        at(1.0)
    )
}

#[tokio::test]
#[ignore = "a measurement: run with --ignored --nocapture"]
async fn render_times_at_ten_thousand_memories() {
    let Some(browser) = Browser::start().await else {
        return;
    };
    let ground = Ground::new().await;
    let ids = write_store(ground.path());
    let served = Served::serve(TestApp::builder().on(ground).embedder()).await;

    for n in 0..SAMPLES {
        browser.open(&served.ui(&format!("#/?n={n}"))).await;
    }
    for n in 0..SAMPLES {
        browser
            .open(&served.ui(&format!("#/?text=rule&category=patterns&n={n}")))
            .await;
    }
    for n in 0..SAMPLES {
        let id = ids[(n * 331 + 17) % ids.len()];
        browser.open(&served.ui(&format!("#/m/{id}"))).await;
    }
    let list = measures(&browser, "list").await;
    let (plain, filtered) = list.split_at(SAMPLES);
    let report = [
        summary("list, 50 of 10,000, no filter", plain.to_vec()),
        summary("list, text + category filter", filtered.to_vec()),
        summary("memory page", measures(&browser, "memory").await),
    ];
    let mut out = std::io::stderr();
    for line in report {
        let _ = writeln!(out, "{line}");
    }

    if let Some(shots) = std::env::var_os("ENGRAM_UI_SCREENSHOTS").map(PathBuf::from) {
        std::fs::create_dir_all(&shots).unwrap();
        let linked = ids[(MEMORIES / 2) - (MEMORIES / 2) % 5 + 1];
        browser.open(&served.ui("#/")).await;
        browser.screenshot(&shots.join("ui-list.png")).await;
        browser.open(&served.ui(&format!("#/m/{linked}"))).await;
        browser.screenshot(&shots.join("ui-memory.png")).await;
        browser.client.set_window_size(400, 860).await.unwrap();
        browser.open(&served.ui(&format!("#/m/{linked}"))).await;
        browser.screenshot(&shots.join("ui-phone.png")).await;
        let shown: Value = browser.eval("return document.title").await;
        let _ = writeln!(out, "screenshots of {shown} in {}", shots.display());
    }
    browser.close().await;
    served.stop().await;
}
