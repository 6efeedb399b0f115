//! `--dump FILE` of the retrieval-quality workloads: the evidence behind
//! every answer, for replaying fusion variants offline in seconds rather
//! than rerunning the service for each.
//!
//! One JSON line per memory (`{"namespace", "key", "tokens"}`: its lexical
//! tokens as the index sees them) and one per question (`{"namespace",
//! "question", "tokens", "answers", "candidates"}`), where `candidates` is
//! every memory the search stage found for the question, asked again with
//! the largest `top_k`, each with its cosine similarity (`similarity`), its
//! BM25 score relative to the best (`lexical`) and the fused score
//! (`match`). From these and the tokens, idf, coverage and both searches'
//! ranks follow.

use std::fs::File;
use std::io::{BufWriter, Write as _};
use std::path::Path;

use engram::index::lexical;
use serde_json::{Value, json};

use crate::server::Client;
use crate::workload::Result;

/// Enough for every memory a search finds in these workloads' namespaces.
const ALL_CANDIDATES: usize = 1000;

pub struct Dump {
    file: BufWriter<File>,
}

impl Dump {
    pub fn create(path: &Path) -> Result<Self> {
        let file =
            File::create(path).map_err(|err| format!("creating {}: {err}", path.display()))?;
        Ok(Self {
            file: BufWriter::new(file),
        })
    }

    /// A memory of `namespace`, named `key` in the question lines.
    pub fn memory(&mut self, namespace: &str, key: &str, content: &str) -> Result {
        let line = json!({"namespace": namespace, "key": key, "tokens": tokens(content)});
        writeln!(self.file, "{line}")?;
        Ok(())
    }

    /// Asks `request` (a `POST /retrieve` body in query mode) again for
    /// every candidate and writes its line; `answers` are the keys that
    /// answer it, `key_of` maps a memory id to its key.
    pub async fn question<'a>(
        &mut self,
        client: &Client,
        namespace: &str,
        request: &Value,
        answers: &[&str],
        key_of: impl Fn(&str) -> Option<&'a str>,
    ) -> Result {
        let query = request["query"].as_str().unwrap_or_default();
        let turn_id = request["turn_id"].as_str().unwrap_or_default();
        let mut again = request.clone();
        again["top_k"] = json!(ALL_CANDIDATES);
        again["turn_id"] = json!(format!("dump-{turn_id}"));
        let answer = client.retrieve(&again).await?;
        let candidates: Vec<Value> = answer["memories"]
            .as_array()
            .map(Vec::as_slice)
            .unwrap_or_default()
            .iter()
            .filter_map(|memory| {
                let key = key_of(memory["id"].as_str()?)?;
                let scores = &memory["scores"];
                Some(json!({"key": key, "similarity": scores["similarity"],
                    "lexical": scores["lexical"], "match": scores["match"]}))
            })
            .collect();
        let line = json!({"namespace": namespace, "turn_id": turn_id, "question": query,
            "tokens": tokens(query), "answers": answers, "candidates": candidates});
        writeln!(self.file, "{line}")?;
        Ok(())
    }

    pub fn finish(mut self) -> Result {
        self.file.flush()?;
        Ok(())
    }
}

fn tokens(text: &str) -> Vec<String> {
    lexical::tokens(text).collect()
}
