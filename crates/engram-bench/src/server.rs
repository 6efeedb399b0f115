//! The service under test: built in process on a loopback port, driven
//! over HTTP, stopped gracefully.

use std::path::Path;
use std::time::{Duration, Instant};

use engram::app::App;
use engram::config::{Config, EmbeddingProvider, Llm};
use engram::routes::batch::MAX_BATCH;
use serde_json::{Value, json};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use crate::workload::{EmbedderChoice, Result};
use engram_fake_upstream as upstream;

/// How many times a batch answered `503` is sent in all.
const BATCH_ATTEMPTS: u32 = 6;

/// The wait before a batch's second attempt; it doubles each time after.
const BATCH_BACKOFF: Duration = Duration::from_secs(1);

#[derive(Clone)]
pub struct Client {
    base: String,
    client: reqwest::Client,
}

pub struct Server {
    client: Client,
    stop: oneshot::Sender<()>,
    serving: JoinHandle<()>,
}

impl Server {
    /// Starts a service over `data_dir` and returns it with the time from
    /// build to ready (store loaded and index built).
    pub async fn start(data_dir: &Path, embedder: EmbedderChoice) -> Result<(Self, Duration)> {
        Self::start_with(data_dir, embedder, |_| {}).await
    }

    /// [`Server::start`] with the configuration adjusted first.
    pub async fn start_with(
        data_dir: &Path,
        embedder: EmbedderChoice,
        adjust: impl FnOnce(&mut Config),
    ) -> Result<(Self, Duration)> {
        let upstream = upstream::Upstream::start_with(upstream::Setup::BENCH).await;
        Self::start_on(data_dir, embedder, &upstream, adjust).await
    }

    /// [`Server::start_with`] on a fake upstream the caller started (to
    /// read what it was asked).
    pub async fn start_on(
        data_dir: &Path,
        embedder: EmbedderChoice,
        upstream: &upstream::Upstream,
        adjust: impl FnOnce(&mut Config),
    ) -> Result<(Self, Duration)> {
        let mut config = Config {
            listen: ([127, 0, 0, 1], 0).into(),
            data_dir: data_dir.to_owned(),
            ..Config::default()
        };
        // The fake upstream always stands in for the chat model (HyDE), and
        // for the embedder unless the local model is measured.
        let upstream_url = upstream.base_url.clone();
        config.llm = Some(Llm {
            base_url: upstream_url.clone(),
            ..Llm::default()
        });
        if embedder == EmbedderChoice::Fake {
            config.embedding.provider = EmbeddingProvider::Openai;
            config.embedding.base_url = upstream_url;
            config.embedding.model = "bench-fake".to_owned();
            config.embedding.dimensions = Some(upstream::Vectors::MINILM.dimensions);
        }
        adjust(&mut config);
        let started = Instant::now();
        let app = App::build(config).await?;
        let base = format!("http://{}", app.local_addr()?);
        let (stop, stopped) = oneshot::channel::<()>();
        let serving = tokio::spawn(async move {
            let shutdown = async {
                let _ = stopped.await;
            };
            if let Err(err) = app.run_until_stopped(shutdown).await {
                eprintln!("engram-bench: the service failed: {err}");
            }
        });
        let server = Self {
            client: Client::for_base(base),
            stop,
            serving,
        };
        server.wait_ready().await?;
        let ready_in = started.elapsed();
        server.wait_indexed().await?;
        Ok((server, ready_in))
    }

    /// A client of this server, to share between tasks.
    pub fn client(&self) -> Client {
        self.client.clone()
    }

    async fn wait_ready(&self) -> Result {
        loop {
            let response = self
                .client
                .client
                .get(format!("{}/readyz", self.client.base))
                .send()
                .await?;
            if response.status().is_success() {
                return Ok(());
            }
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    }

    /// Waits until the index holds every write made so far.
    pub async fn wait_indexed(&self) -> Result {
        loop {
            let stats: Value = self
                .client
                .client
                .get(format!("{}/stats", self.client.base))
                .send()
                .await?
                .json()
                .await?;
            if stats["index"]["pending"] == 0 {
                return Ok(());
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    pub async fn stop(self) {
        let _ = self.stop.send(());
        let _ = self.serving.await;
    }
}

impl Client {
    /// A client of the service at `base` (`http://127.0.0.1:<port>`).
    pub fn for_base(base: String) -> Self {
        Self {
            base,
            client: reqwest::Client::new(),
        }
    }

    /// `http://127.0.0.1:<port>`.
    pub fn base_url(&self) -> &str {
        &self.base
    }

    /// Any request with a JSON body: only the status (the answer is read
    /// and dropped unparsed, so the bench holds none of it).
    pub async fn status_of(&self, method: &str, path: &str, body: &Value) -> Result<u16> {
        let method = reqwest::Method::from_bytes(method.as_bytes())?;
        let response = self
            .client
            .request(method, format!("{}{path}", self.base))
            .json(body)
            .send()
            .await?;
        let status = response.status().as_u16();
        let mut response = response;
        while response.chunk().await?.is_some() {}
        Ok(status)
    }

    /// Any request: the status and the JSON answer (null when not JSON).
    pub async fn send(
        &self,
        method: &str,
        path: &str,
        body: Option<&Value>,
    ) -> Result<(u16, Value)> {
        let method = reqwest::Method::from_bytes(method.as_bytes())?;
        let mut request = self.client.request(method, format!("{}{path}", self.base));
        if let Some(body) = body {
            request = request.json(body);
        }
        let response = request.send().await?;
        let status = response.status().as_u16();
        let bytes = response.bytes().await?;
        Ok((
            status,
            serde_json::from_slice(&bytes).unwrap_or(Value::Null),
        ))
    }

    pub async fn retrieve(&self, body: &Value) -> Result<Value> {
        self.post("/retrieve", body, 200).await
    }

    pub async fn create(&self, body: &Value) -> Result<Value> {
        self.post("/memories", body, 201).await
    }

    /// Writes `bodies` through `POST /memories/batch`, in requests of at
    /// most 1,000 under the body limit (as `engram import` sends them),
    /// and answers each one's result in order: `{"status": 201,
    /// "memory"}` or `{"status", "problem"}`. A batch answered `503`
    /// (its time ran out on a busy disk; nothing of it was written) is
    /// sent again after a wait that doubles each time ([`BATCH_BACKOFF`]
    /// first), up to [`BATCH_ATTEMPTS`] times in all: a disk behind on
    /// its writes gets time to catch up.
    pub async fn create_all(&self, bodies: Vec<Value>) -> Result<Vec<Value>> {
        let mut results = Vec::with_capacity(bodies.len());
        for batch in engram::client::import::batches(bodies, MAX_BATCH) {
            let count = batch.len();
            let body = json!({ "memories": batch });
            let mut attempt = 1;
            let answer = loop {
                let (status, answer) = self.send("POST", "/memories/batch", Some(&body)).await?;
                match status {
                    200 => break answer,
                    503 if attempt < BATCH_ATTEMPTS => {
                        tokio::time::sleep(BATCH_BACKOFF * 2u32.pow(attempt - 1)).await;
                        attempt += 1;
                    }
                    _ => return Err(format!("/memories/batch answered {status}: {answer}").into()),
                }
            };
            match answer["results"].as_array() {
                Some(answered) if answered.len() == count => results.extend_from_slice(answered),
                _ => return Err(format!("/memories/batch answered {answer}").into()),
            }
        }
        Ok(results)
    }

    /// [`Self::create_all`] when every memory must be written: the
    /// memories, in order.
    pub async fn create_each(&self, bodies: Vec<Value>) -> Result<Vec<Value>> {
        self.create_all(bodies)
            .await?
            .into_iter()
            .map(|result| match result["status"].as_u64() {
                Some(201) => Ok(result["memory"].clone()),
                _ => Err(format!("/memories/batch refused a memory: {result}").into()),
            })
            .collect()
    }

    async fn post(&self, path: &str, body: &Value, expected: u16) -> Result<Value> {
        let response = self
            .client
            .post(format!("{}{path}", self.base))
            .json(body)
            .send()
            .await?;
        let status = response.status().as_u16();
        let answer: Value = response.json().await?;
        if status != expected {
            return Err(format!("{path} answered {status}: {answer}").into());
        }
        Ok(answer)
    }
}
