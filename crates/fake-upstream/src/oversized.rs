//! An upstream gone wrong: every reply, whatever was asked, hundreds of
//! megabytes long, streamed by hand over a raw socket so that the fake
//! holds none of it.

/// Serves on a free loopback port an upstream whose every reply, whatever
/// was asked, is a chat completion `reply_bytes` long: an upstream gone
/// wrong. The reply is streamed from one small buffer, so the fake itself
/// holds none of it and the bench measures only what Engram keeps.
pub async fn start_oversized(reply_bytes: usize) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind the oversized upstream");
    let url = format!(
        "http://{}/v1",
        listener.local_addr().expect("local address")
    );
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            // A client that hangs up mid-reply is what a cap looks like.
            tokio::spawn(async move {
                let _ = answer_oversized(stream, reply_bytes).await;
            });
        }
    });
    url
}

/// Reads one request and answers it with `reply_bytes` of chat completion.
async fn answer_oversized(
    stream: tokio::net::TcpStream,
    reply_bytes: usize,
) -> std::io::Result<()> {
    let mut request = Vec::new();
    let mut chunk = [0u8; 16 * 1024];
    let body_start = loop {
        let read = read_some(&stream, &mut chunk).await?;
        if read == 0 {
            return Ok(());
        }
        request.extend_from_slice(&chunk[..read]);
        if let Some(end) = request.windows(4).position(|w| w == b"\r\n\r\n") {
            break end + 4;
        }
    };
    let head = String::from_utf8_lossy(&request[..body_start]).to_lowercase();
    let body_length: usize = head
        .lines()
        .find_map(|line| line.strip_prefix("content-length:"))
        .and_then(|value| value.trim().parse().ok())
        .unwrap_or(0);
    let mut remaining = body_length.saturating_sub(request.len() - body_start);
    while remaining > 0 {
        let read = read_some(&stream, &mut chunk).await?;
        if read == 0 {
            return Ok(());
        }
        remaining = remaining.saturating_sub(read);
    }

    let opening = r#"{"object":"chat.completion","model":"bench","choices":[{"index":0,"message":{"role":"assistant","content":""#;
    let closing = r#""}}]}"#;
    let filler_length = reply_bytes.saturating_sub(opening.len() + closing.len());
    let head = format!(
        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{opening}",
        opening.len() + filler_length + closing.len()
    );
    write_all(&stream, head.as_bytes()).await?;
    let filler = [b'x'; 64 * 1024];
    let mut left = filler_length;
    while left > 0 {
        let part = left.min(filler.len());
        write_all(&stream, &filler[..part]).await?;
        left -= part;
    }
    write_all(&stream, closing.as_bytes()).await
}

/// Reads what has arrived (0 at end of stream).
pub async fn read_some(
    stream: &tokio::net::TcpStream,
    buffer: &mut [u8],
) -> std::io::Result<usize> {
    loop {
        stream.readable().await?;
        match stream.try_read(buffer) {
            Err(err) if err.kind() == std::io::ErrorKind::WouldBlock => {}
            result => return result,
        }
    }
}

async fn write_all(stream: &tokio::net::TcpStream, mut bytes: &[u8]) -> std::io::Result<()> {
    while !bytes.is_empty() {
        stream.writable().await?;
        match stream.try_write(bytes) {
            Ok(written) => bytes = &bytes[written..],
            Err(err) if err.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(err) => return Err(err),
        }
    }
    Ok(())
}
