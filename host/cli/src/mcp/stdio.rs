//! The stdio transport with the checks of [`super::frame`] in front: lines rmcp would drop or
//! misreport get their JSON-RPC error here. One task owns stdout, so an error reply never
//! interleaves with a reply from the server.

use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, DuplexStream};
use tokio::sync::mpsc;

use super::frame;

/// Big enough for the largest message a client may send (the HTTP body limit is the same).
const PIPE_BYTES: usize = 64 * 1024;

/// Starts the filter and the writer; returns the (read, write) pair to hand to rmcp and the
/// writer's task, which ends once every reply is on stdout.
pub fn filtered() -> ((DuplexStream, DuplexStream), tokio::task::JoinHandle<()>) {
    let (to_server, server_reads) = tokio::io::duplex(PIPE_BYTES);
    let (server_writes, from_server) = tokio::io::duplex(PIPE_BYTES);
    let (out, lines) = mpsc::channel::<Vec<u8>>(64);
    let writer = tokio::spawn(write_stdout(lines));
    tokio::spawn(forward_replies(from_server, out.clone()));
    tokio::spawn(filter_stdin(to_server, out));
    ((server_reads, server_writes), writer)
}

async fn filter_stdin(mut to_server: DuplexStream, out: mpsc::Sender<Vec<u8>>) {
    let mut stdin = BufReader::new(tokio::io::stdin());
    let mut line = Vec::new();
    loop {
        line.clear();
        match stdin.read_until(b'\n', &mut line).await {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
        let body = line.trim_ascii();
        if body.is_empty() {
            continue;
        }
        match frame::reject(body) {
            Some(reply) => {
                let mut text = reply.to_string().into_bytes();
                text.push(b'\n');
                if out.send(text).await.is_err() {
                    break;
                }
            }
            None => {
                if to_server.write_all(body).await.is_err() || to_server.write_all(b"\n").await.is_err() {
                    break;
                }
            }
        }
    }
    // Dropping `to_server` is the end of input for rmcp: the server stops as it would on EOF.
}

async fn forward_replies(from_server: DuplexStream, out: mpsc::Sender<Vec<u8>>) {
    let mut replies = BufReader::new(from_server);
    loop {
        let mut line = Vec::new();
        match replies.read_until(b'\n', &mut line).await {
            Ok(0) | Err(_) => break,
            Ok(_) => {
                if out.send(line).await.is_err() {
                    break;
                }
            }
        }
    }
}

async fn write_stdout(mut lines: mpsc::Receiver<Vec<u8>>) {
    let mut stdout = tokio::io::stdout();
    while let Some(line) = lines.recv().await {
        if stdout.write_all(&line).await.is_err() || stdout.flush().await.is_err() {
            // The client is gone; nothing more can be said to it.
            break;
        }
    }
}
