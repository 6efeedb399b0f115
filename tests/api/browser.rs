//! The memory browser in a real browser: Debian's headless Chromium driven
//! over WebDriver (chromedriver, through fantoccini) against the real app
//! on a loopback port, with the fake upstream as embedder and classifier.
//!
//! A test opens its browser and app with one line, `let (browser, served)
//! = session!(…);`. Without `chromium` and `chromedriver` it prints
//! "skipped: no chromium" to the terminal and passes, except under CI
//! (`CI` set), where it fails: `.ci/run` installs both. The tests take
//! turns: one browser at a time on a small machine.
//!
//! Files mode but for the capture page's PostgreSQL queue: the pages call
//! the API, which the rest of the suite runs over both backends.

use std::net::TcpListener;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use fantoccini::{Client, ClientBuilder, Locator};
use serde_json::{Value, json};
use tokio::sync::Semaphore;

use crate::helpers::{Builder, RunningApp, TestApp, call, deadline, skip, wait_ready};
use crate::upstream::{Behaviour, Upstream};

mod capture_page;
mod live_sync;
mod pages;
mod render_times;
mod review;
mod safety;

/// One browser at a time.
static TURN: Semaphore = Semaphore::const_new(1);

/// The flags that run Chromium headless on a machine without a display,
/// sandbox or network.
const CHROMIUM_FLAGS: [&str; 9] = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--window-size=1280,900",
];

/// `name` on the `PATH`, if it is there.
fn on_path(name: &str) -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|path| {
        std::env::split_paths(&path)
            .map(|dir| dir.join(name))
            .find(|candidate| candidate.is_file())
    })
}

/// A browser session and the chromedriver behind it.
pub struct Browser {
    pub client: Client,
    driver: Child,
    _profile: tempfile::TempDir,
    _turn: tokio::sync::SemaphorePermit<'static>,
}

impl Browser {
    /// A fresh browser (new profile, so empty session storage), or `None`
    /// after saying the test is skipped when Chromium or its driver is not
    /// installed (CI installs both: `.ci/install-browser`).
    pub async fn start() -> Option<Self> {
        let (Some(chromium), Some(chromedriver)) = (
            on_path("chromium").or_else(|| on_path("chromium-browser")),
            on_path("chromedriver"),
        ) else {
            skip("no chromium (apt-get install chromium chromium-driver)");
            return None;
        };
        let turn = TURN.acquire().await.unwrap();
        let port = free_port();
        // Its own process group, which the Chromium it starts joins, so
        // that a test that fails midway can stop both (see `Drop`).
        let driver = Command::new(chromedriver)
            .process_group(0)
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let profile = tempfile::tempdir().unwrap();
        let mut args: Vec<String> = CHROMIUM_FLAGS.iter().map(|&flag| flag.to_owned()).collect();
        args.push(format!("--user-data-dir={}", profile.path().display()));
        let mut capabilities = serde_json::Map::new();
        capabilities.insert(
            "goog:chromeOptions".to_owned(),
            json!({"binary": chromium, "args": args}),
        );
        let url = format!("http://127.0.0.1:{port}");
        let deadline = deadline();
        let client = loop {
            match ClientBuilder::new(hyper_util::client::legacy::connect::HttpConnector::new())
                .capabilities(capabilities.clone())
                .connect(&url)
                .await
            {
                Ok(client) => break client,
                Err(err) => {
                    assert!(
                        Instant::now() < deadline,
                        "chromedriver never answered: {err}"
                    );
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            }
        };
        Some(Self {
            client,
            driver,
            _profile: profile,
            _turn: turn,
        })
    }

    /// Opens `url` and waits for the page to finish rendering.
    pub async fn open(&self, url: &str) {
        self.client.goto(url).await.unwrap();
        self.wait_for(
            "the page to render",
            "return document.querySelector('main:not([aria-busy]) h1') !== null",
        )
        .await;
    }

    /// Runs `script` (a function body) and returns its value.
    pub async fn eval(&self, script: &str) -> Value {
        self.client.execute(script, Vec::new()).await.unwrap()
    }

    /// Waits until `script` returns a truthy value.
    pub async fn wait_for(&self, what: &str, script: &str) {
        let deadline = deadline();
        loop {
            let value = self.eval(script).await;
            if !matches!(value, Value::Null | Value::Bool(false)) {
                return;
            }
            assert!(Instant::now() < deadline, "gave up waiting for {what}");
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
    }

    /// Types `text` into the element `css`, replacing what it held.
    pub async fn fill(&self, css: &str, text: &str) {
        let element = self.client.find(Locator::Css(css)).await.unwrap();
        element.clear().await.unwrap();
        element.send_keys(text).await.unwrap();
    }

    pub async fn click(&self, css: &str) {
        self.client
            .find(Locator::Css(css))
            .await
            .unwrap()
            .click()
            .await
            .unwrap();
    }

    /// The texts of every element matching `css`.
    pub async fn texts(&self, css: &str) -> Vec<String> {
        let script = format!(
            "return [...document.querySelectorAll({})].map((e) => e.textContent)",
            json!(css)
        );
        serde_json::from_value(self.eval(&script).await).unwrap()
    }

    /// A PNG of the window, for `docs/browser.md`.
    pub async fn screenshot(&self, path: &Path) {
        std::fs::write(path, self.client.screenshot().await.unwrap()).unwrap();
    }

    /// Ends the session (Chromium quits), then the driver (on drop).
    pub async fn close(self) {
        let _ = self.client.clone().close().await;
    }
}

impl Drop for Browser {
    /// A test that failed before `close` still stops its driver and
    /// Chromium: the whole process group.
    fn drop(&mut self) {
        let group = format!("-{}", self.driver.id());
        let _ = Command::new("kill")
            .args(["-KILL", "--", &group])
            .stderr(Stdio::null())
            .status();
        let _ = self.driver.wait();
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// The real app on a loopback port, with the fake upstream as embedder and
/// classifier.
pub struct Served {
    pub app: RunningApp,
}

impl Served {
    pub async fn start(adjust: impl FnOnce(&mut engram::config::Config)) -> Self {
        let app = TestApp::builder().embedder().llm().config(adjust);
        Self::serve(app).await
    }

    /// Serves `app`, once it is ready.
    pub async fn serve(app: Builder<'_>) -> Self {
        let app = app.serve().await;
        wait_ready(&app.base_url).await;
        Self { app }
    }

    /// The data directory the app serves.
    pub fn data_dir(&self) -> &Path {
        &self.app.data_dir
    }

    /// The URL of a page of the browser: `ui("#/m/…")`.
    pub fn ui(&self, route: &str) -> String {
        format!("{}/ui/{route}", self.app.base_url)
    }

    /// The URL of `memory`'s page.
    pub fn memory_page(&self, memory: &Value) -> String {
        self.ui(&format!("#/m/{}", memory["id"].as_str().unwrap()))
    }

    /// Calls the API (with `key` as bearer, if any); the status and JSON.
    pub async fn call(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<&Value>,
        key: Option<&str>,
    ) -> (u16, Value) {
        let (status, _, json) = call(&self.app.base_url, method, path, key, body).await;
        (status, json)
    }

    /// Waits until every write so far is in the index (root view).
    pub async fn wait_indexed(&self) {
        self.app.wait_indexed().await;
    }

    /// Writes a memory through the API; the memory.
    pub async fn create(&self, body: Value) -> Value {
        let (status, memory) = self
            .call(reqwest::Method::POST, "/memories", Some(&body), None)
            .await;
        assert_eq!(status, 201, "{memory}");
        memory
    }

    pub async fn stop(self) {
        self.app.stop().await;
    }
}

/// A browser and the app (with its configuration adjusted), or `None`
/// (after saying the test is skipped) when there is no browser.
pub async fn open_session(
    adjust: impl FnOnce(&mut engram::config::Config),
) -> Option<(Browser, Served)> {
    let browser = Browser::start().await?;
    Some((browser, Served::start(adjust).await))
}

/// A test's browser and app, `(Browser, Served)`, the app's configuration
/// adjusted by the closure given, if one is: `session!()`,
/// `session!(|config| …)`. Where there is no browser it returns from the
/// test, which [`open_session`] has said is skipped.
macro_rules! session {
    () => {
        $crate::browser::session!(|_| {})
    };
    ($adjust:expr) => {
        match $crate::browser::open_session($adjust).await {
            Some(opened) => opened,
            None => return,
        }
    };
}
pub(crate) use session;

/// Closes the browser, then stops the app.
pub async fn end(browser: Browser, served: Served) {
    browser.close().await;
    served.stop().await;
}

/// Makes the fake classifier reply `reply` (a JSON array of memories).
pub fn classifier_says(upstream: &Upstream, reply: &str) {
    upstream.set_chat(Behaviour::Answer, reply);
}
