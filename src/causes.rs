//! An error and its causes as one line, for logs and messages. At the
//! bottom, so that every layer can report a fault the same way.

/// `error: cause: cause`.
pub fn error_chain(err: &(dyn std::error::Error + 'static)) -> String {
    let mut text = err.to_string();
    let mut source = err.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}
