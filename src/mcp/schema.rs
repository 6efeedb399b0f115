//! The JSON Schemas of the MCP tools' inputs and outputs, taken from the
//! OpenAPI document: a tool's arguments are read by the same types as the
//! REST request bodies, so they are described by the same schemas, with the
//! same limits and wording. MCP wants each schema whole, so references to
//! the document's components are inlined.

use std::sync::Arc;

use serde_json::{Map, Value};
use utoipa::PartialSchema;

use crate::routes;

/// How deep references may nest before the schema stops expanding them
/// (no schema of this API nests deeper; this only bounds a cycle).
const MAX_DEPTH: usize = 16;

/// The components every schema may refer to.
pub struct Components(Map<String, Value>);

impl Components {
    /// The schemas of the service's OpenAPI document.
    pub fn of_api() -> Self {
        let document = serde_json::to_value(routes::openapi()).expect("the document serializes");
        let schemas = document["components"]["schemas"]
            .as_object()
            .cloned()
            .unwrap_or_default();
        Self(schemas)
    }

    /// `T`'s schema, whole, as MCP carries it. MCP wants `"type":
    /// "object"` at the top, which a struct with a flattened part (an
    /// `allOf`) does not state.
    pub fn schema_of<T: PartialSchema>(&self) -> Arc<Map<String, Value>> {
        let schema = serde_json::to_value(T::schema()).expect("a schema serializes");
        match self.inline(schema, 0) {
            Value::Object(mut object) => {
                object
                    .entry("type")
                    .or_insert_with(|| Value::from("object"));
                Arc::new(object)
            }
            other => panic!(
                "the schema of {} is not an object: {other}",
                type_name::<T>()
            ),
        }
    }

    fn inline(&self, value: Value, depth: usize) -> Value {
        match value {
            Value::Object(object) => {
                if let Some(Value::String(reference)) = object.get("$ref")
                    && depth < MAX_DEPTH
                    && let Some(name) = reference.strip_prefix("#/components/schemas/")
                    && let Some(target) = self.0.get(name)
                {
                    return self.inline(target.clone(), depth + 1);
                }
                Value::Object(
                    object
                        .into_iter()
                        .map(|(key, value)| (key, self.inline(value, depth)))
                        .collect(),
                )
            }
            Value::Array(items) => Value::Array(
                items
                    .into_iter()
                    .map(|value| self.inline(value, depth))
                    .collect(),
            ),
            other => other,
        }
    }
}

fn type_name<T>() -> &'static str {
    std::any::type_name::<T>()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::routes::writing::CreateMemoryRequest;

    #[test]
    fn a_request_schema_is_whole_and_keeps_the_rest_limits() {
        let schema = Components::of_api().schema_of::<CreateMemoryRequest>();
        let text = Value::Object((*schema).clone()).to_string();
        assert!(!text.contains("$ref"), "{text}");
        // The enum of scopes came in from its component.
        assert!(
            text.contains("\"repo\"") && text.contains("\"user\""),
            "{text}"
        );
        assert_eq!(schema["type"], "object");
        let required = schema["required"].as_array().unwrap();
        assert!(required.contains(&Value::from("content")), "{text}");
    }

    /// A part of an `allOf` that forbids properties it does not name
    /// forbids the other parts' too: no result could match. Clients check
    /// `structuredContent` against these schemas.
    #[test]
    fn no_output_schema_forbids_the_properties_of_its_other_parts() {
        fn forbidding_parts(value: &Value, path: &str, found: &mut Vec<String>) {
            match value {
                Value::Object(object) => {
                    if let Some(Value::Array(parts)) = object.get("allOf") {
                        for (index, part) in parts.iter().enumerate() {
                            if part.get("additionalProperties") == Some(&Value::Bool(false)) {
                                found.push(format!("{path}/allOf/{index}"));
                            }
                        }
                    }
                    for (key, value) in object {
                        forbidding_parts(value, &format!("{path}/{key}"), found);
                    }
                }
                Value::Array(items) => {
                    for (index, value) in items.iter().enumerate() {
                        forbidding_parts(value, &format!("{path}/{index}"), found);
                    }
                }
                _ => {}
            }
        }
        let mut found = Vec::new();
        for tool in crate::mcp::catalogue() {
            let output = Value::Object((*tool.output_schema.unwrap()).clone());
            forbidding_parts(&output, &tool.name, &mut found);
        }
        assert!(found.is_empty(), "{found:?}");
    }
}
