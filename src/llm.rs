//! The chat model: one OpenAI-compatible `POST {base}/chat/completions`
//! call with a system and a user message, returning the reply's text.
//! Errors say whether trying again may help ([`upstream::Error::is_transient`]).
//!
//! Classifier calls ask for JSON (`response_format`, see [`format`]), and
//! fall back rung by rung on a server that refuses it.
//!
//! Every prompt goes through the secret guard's [`secrets::redact`] before
//! it leaves: the classifier's window, HyDE's, expansion's and the
//! suggestions' prompts reach the model with each secret replaced by
//! `[secret: KIND]`.

pub mod format;
pub mod reply;

use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::config;
use crate::secrets;
use crate::upstream::{self, Endpoint};

/// A configured chat-completions endpoint.
#[derive(Clone, Debug)]
pub struct Llm {
    endpoint: Endpoint,
    settings: config::Llm,
    /// The classifier's `response_format`, down to what the server takes.
    formats: format::Ladder,
}

/// Which of the configured models a call is for.
#[derive(Clone, Copy, Debug)]
pub enum Purpose {
    /// HyDE, suggestions, query expansion: fast, on the request path.
    Retrieval,
    /// Capture: slower, off the request path.
    Classifier,
}

#[derive(Serialize)]
struct ChatRequest<'a> {
    model: &'a str,
    messages: [ChatMessage<'a>; 2],
    temperature: f32,
    #[serde(skip_serializing_if = "Option::is_none")]
    response_format: Option<Value>,
}

#[derive(Serialize)]
struct ChatMessage<'a> {
    role: &'a str,
    content: &'a str,
}

#[derive(Deserialize)]
struct ChatResponse {
    choices: Vec<Choice>,
}

#[derive(Deserialize)]
struct Choice {
    message: ReplyMessage,
}

#[derive(Deserialize)]
struct ReplyMessage {
    content: Option<String>,
}

impl Llm {
    pub fn new(settings: config::Llm) -> Self {
        let endpoint = Endpoint::new(
            &settings.base_url,
            "chat/completions",
            settings.api_key.as_ref().map(|key| key.expose().to_owned()),
            "the chat-completions endpoint",
            settings.max_reply_bytes,
        );
        Self {
            endpoint,
            settings,
            formats: format::Ladder::default(),
        }
    }

    /// The classifier model's context window, in tokens.
    pub fn context_tokens(&self) -> usize {
        self.settings.context_tokens
    }

    /// The configured timeout of one call for `purpose`.
    pub fn timeout(&self, purpose: Purpose) -> Duration {
        Duration::from_millis(match purpose {
            Purpose::Retrieval => self.settings.retrieval_timeout_ms,
            Purpose::Classifier => self.settings.classifier_timeout_ms,
        })
    }

    /// The reply's text, within `timeout` (at most the configured one).
    pub async fn complete(
        &self,
        purpose: Purpose,
        system: &str,
        user: &str,
        timeout: Duration,
    ) -> Result<String, upstream::Error> {
        let model = match purpose {
            Purpose::Retrieval => &self.settings.retrieval_model,
            Purpose::Classifier => &self.settings.classifier_model,
        };
        let user = secrets::redact(user);
        let mut rung = matches!(purpose, Purpose::Classifier).then(|| self.formats.current());
        let reply: ChatResponse = loop {
            let request = ChatRequest {
                model,
                messages: [
                    ChatMessage {
                        role: "system",
                        content: system,
                    },
                    ChatMessage {
                        role: "user",
                        content: &user,
                    },
                ],
                temperature: 0.0,
                response_format: rung.and_then(format::Rung::response_format),
            };
            let sent_format = request.response_format.is_some();
            match self
                .endpoint
                .post(&request, timeout.min(self.timeout(purpose)))
                .await
            {
                Err(upstream::Error::Status { status, body, .. })
                    if sent_format && format::is_refusal(status) =>
                {
                    let refused = rung.unwrap_or(format::Rung::Plain);
                    let next = self.formats.refuse(refused, &body);
                    tracing::info!(
                        status,
                        refused = refused.as_str(),
                        next = next.as_str(),
                        "the chat endpoint refused the response_format; asking on the next rung from now on"
                    );
                    rung = Some(next);
                }
                answered => break answered?,
            }
        };
        reply
            .choices
            .into_iter()
            .next()
            .and_then(|choice| choice.message.content)
            .ok_or_else(|| self.endpoint.malformed("no choice with text content"))
    }
}
