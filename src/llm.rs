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
//!
//! Every call is counted by the [`Meter`]: the reply's `usage`, or the
//! tokenizer's count when the server sends none.

pub mod format;
pub mod reply;

use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::config;
use crate::secrets;
use crate::tokens;
use crate::upstream::{self, Endpoint};
use crate::usage::{self, CallKind, Meter, Metered, Owner, Tokens};

/// A configured chat-completions endpoint.
#[derive(Clone, Debug)]
pub struct Llm {
    endpoint: Endpoint,
    settings: config::Llm,
    meter: Meter,
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

impl Purpose {
    fn of(kind: CallKind) -> Self {
        match kind {
            CallKind::Classifier | CallKind::Consolidation => Self::Classifier,
            _ => Self::Retrieval,
        }
    }
}

/// A model's reply and what the call took.
#[derive(Clone, Debug)]
pub struct Completion {
    pub text: String,
    pub usage: Metered,
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
    /// Read leniently: a server's odd `usage` is no reason to lose its reply.
    #[serde(default)]
    usage: Option<serde_json::Value>,
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
    pub fn new(settings: config::Llm, meter: Meter) -> Self {
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
            meter,
            formats: format::Ladder::default(),
        }
    }

    /// The meter every call is counted by (its budgets say whether a call
    /// may be made).
    pub fn meter(&self) -> &Meter {
        &self.meter
    }

    /// The classifier model's name, as configured.
    pub fn classifier_model(&self) -> &str {
        &self.settings.classifier_model
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

    /// The reply's text and what it took, within `timeout` (at most the
    /// configured one), for `owner`'s call of `kind`.
    pub async fn complete(
        &self,
        kind: CallKind,
        owner: Owner,
        system: &str,
        user: &str,
        timeout: Duration,
    ) -> Result<Completion, upstream::Error> {
        let purpose = Purpose::of(kind);
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
        let text = reply
            .choices
            .into_iter()
            .next()
            .and_then(|choice| choice.message.content);
        // A reply without text was still paid for.
        let reported = Tokens::reported(reply.usage.as_ref());
        let tokens = reported.unwrap_or_else(|| Tokens {
            prompt: (tokens::count(system) + tokens::count(&user)) as u64,
            completion: text.as_deref().map_or(0, |text| tokens::count(text) as u64),
        });
        let usage = self.meter.record(usage::Call {
            kind,
            model,
            owner,
            tokens,
            estimated: reported.is_none(),
        });
        let text = text.ok_or_else(|| self.endpoint.malformed("no choice with text content"))?;
        Ok(Completion { text, usage })
    }
}
