//! Where `serve --http` listens and whom it answers: the `Host` names and browser `Origin`s it
//! accepts (loopback, the address it is bound to, the `--public-host` names), and its connection
//! loop, which closes a connection whose headers do not arrive within the read timeout and holds
//! at most [`MAX_CONNECTIONS`] at once (axum's own loop sets no timer, so a client that never
//! finishes its headers kept its connection for ever, before any token was checked).

use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::pin::pin;
use std::sync::Arc;
use std::time::Duration;

use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto::Builder;
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio::sync::{watch, Semaphore};

use crate::error::{CliError, CliResult};

/// Connections served at once; more wait in the kernel's backlog.
pub const MAX_CONNECTIONS: usize = 512;
/// How long a stop waits for open requests to finish.
const DRAIN: Duration = Duration::from_secs(30);
const LOOPBACK_NAMES: [&str; 3] = ["localhost", "127.0.0.1", "::1"];

/// What `serve --http` was told about its address: checked before the store is opened.
pub struct Listen {
    pub addr: SocketAddr,
    /// `host` or `host:port` authorities, as rmcp's `allowed_hosts` takes them.
    pub hosts: Vec<String>,
    /// `scheme://host:port` (or `:*`), as rmcp's `allowed_origins` takes them.
    pub origins: Vec<String>,
    pub read_timeout: Duration,
}

impl Listen {
    pub fn new(addr: SocketAddr, public_hosts: &[String], read_timeout_seconds: u64) -> CliResult<Listen> {
        if !(1..=3600).contains(&read_timeout_seconds) {
            return Err(CliError::field(
                "read-timeout",
                format!("{read_timeout_seconds} is out of range: give 1 to 3600 seconds"),
            ));
        }
        let mut names: Vec<(String, Option<u16>)> =
            LOOPBACK_NAMES.iter().map(|n| (n.to_string(), None)).collect();
        // The address itself, when it names one interface (127.0.0.2, 192.0.2.7): clients reach it by it.
        if !addr.ip().is_unspecified() {
            names.push((addr.ip().to_string(), None));
        }
        for (i, given) in public_hosts.iter().enumerate() {
            names.push(
                parse_public_host(given).map_err(|why| {
                    CliError::field(&format!("public-host[{i}]"), format!("{given:?} {why}"))
                })?,
            );
        }
        names.dedup();
        let authority = |name: &str| if name.contains(':') { format!("[{name}]") } else { name.to_string() };
        let hosts = names
            .iter()
            .map(|(name, port)| match port {
                Some(p) => format!("{}:{p}", authority(name)),
                None => authority(name),
            })
            .collect();
        let origins = names
            .iter()
            .flat_map(|(name, port)| {
                let port = port.map_or("*".to_string(), |p| p.to_string());
                ["http", "https"].map(|scheme| format!("{scheme}://{}:{port}", authority(name)))
            })
            .collect();
        Ok(Listen { addr, hosts, origins, read_timeout: Duration::from_secs(read_timeout_seconds) })
    }
}

/// `memory.example.com`, `memory.example.com:8443`, `192.0.2.7`, `[2001:db8::7]:8443`: a host
/// name or an address, with an optional port; nothing else (no scheme, path or user).
fn parse_public_host(given: &str) -> Result<(String, Option<u16>), String> {
    let text = given.trim();
    let (host, port) = match text.strip_prefix('[') {
        Some(rest) => {
            let (inside, after) = rest.split_once(']').ok_or("has a '[' without its ']'")?;
            inside.parse::<std::net::Ipv6Addr>().map_err(|_| "holds no IPv6 address between '[' and ']'")?;
            let port = match after {
                "" => None,
                after => {
                    Some(after.strip_prefix(':').ok_or("has text after ']' that is not a :port")?.to_string())
                }
            };
            (inside.to_string(), port)
        }
        None => match text.rsplit_once(':') {
            Some((h, p)) => (h.to_string(), Some(p.to_string())),
            None => (text.to_string(), None),
        },
    };
    let port = match port {
        None => None,
        Some(p) => Some(p.parse::<u16>().ok().filter(|p| *p > 0).ok_or("has a port that is not 1 to 65535")?),
    };
    let is_ip = host.parse::<IpAddr>().is_ok();
    let is_name = !host.is_empty()
        && host.len() <= 253
        && host.split('.').all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && !label.starts_with('-')
                && !label.ends_with('-')
                && label.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
        });
    if !is_ip && !is_name {
        return Err(
            "is not a host name (letters, digits, '-' and '.') or an IP address, with an optional :port"
                .into(),
        );
    }
    Ok((host.to_ascii_lowercase(), port))
}

/// Serves `router` on `listener` until `stop` resolves, then lets open requests finish (at
/// most [`DRAIN`]).
pub async fn serve(
    listener: TcpListener,
    router: axum::Router,
    read_timeout: Duration,
    stop: impl Future<Output = ()>,
) {
    let slots = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    let (closing, closed) = watch::channel(false);
    let mut stop = pin!(stop);
    loop {
        let slot = tokio::select! {
            _ = &mut stop => break,
            slot = slots.clone().acquire_owned() => match slot {
                Ok(slot) => slot,
                Err(_) => break,
            },
        };
        let stream = tokio::select! {
            _ = &mut stop => break,
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                // Out of file descriptors, or a connection reset before it was taken: the
                // listener is fine; try again shortly.
                Err(_) => {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        let service = TowerToHyperService::new(router.clone());
        let mut closed = closed.clone();
        tokio::spawn(async move {
            let _slot = slot;
            let mut builder = Builder::new(TokioExecutor::new());
            builder.http1().timer(TokioTimer::new()).header_read_timeout(read_timeout);
            let mut connection = pin!(builder.serve_connection_with_upgrades(TokioIo::new(stream), service));
            tokio::select! {
                _ = connection.as_mut() => return,
                _ = closed.changed() => {}
            }
            connection.as_mut().graceful_shutdown();
            let _ = connection.await;
        });
    }
    drop(listener);
    let _ = closing.send(true);
    let _ = tokio::time::timeout(DRAIN, slots.acquire_many(MAX_CONNECTIONS as u32)).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn public_hosts_become_hosts_and_origins() {
        let addr: SocketAddr = "0.0.0.0:8765".parse().unwrap();
        let listen =
            Listen::new(addr, &["Memory.Example.com".into(), "[2001:db8::7]:8443".into()], 10).unwrap();
        assert_eq!(
            listen.hosts,
            ["localhost", "127.0.0.1", "[::1]", "memory.example.com", "[2001:db8::7]:8443"]
        );
        assert!(listen.origins.contains(&"https://memory.example.com:*".to_string()));
        assert!(listen.origins.contains(&"http://[2001:db8::7]:8443".to_string()));
    }

    #[test]
    fn the_bound_address_is_accepted_by_its_own_name() {
        let listen = Listen::new("127.0.0.2:9000".parse().unwrap(), &[], 10).unwrap();
        assert!(listen.hosts.contains(&"127.0.0.2".to_string()));
    }

    #[test]
    fn a_bad_public_host_names_the_flag_and_the_problem() {
        let addr: SocketAddr = "0.0.0.0:8765".parse().unwrap();
        for bad in [
            "https://memory.example.com",
            "memory.example.com/mcp",
            "",
            "a b",
            "host:0",
            "host:99999",
            "[::1",
        ] {
            let err = Listen::new(addr, &["ok.example".into(), bad.into()], 10).err().expect(bad).to_string();
            assert!(err.contains("public-host[1]"), "{bad}: {err}");
        }
        let err = Listen::new(addr, &[], 0).err().unwrap().to_string();
        assert!(err.contains("read-timeout"), "{err}");
    }
}
