//! A stand-in for Spin's runtime, for testing `hindsight-edge-spin.wasm` where Spin itself cannot
//! be installed: like Spin's HTTP trigger it makes a fresh instance of the component for every
//! request, mounts the files directory read-only, and lends `spin:sqlite@3.0.0`'s `default`
//! database — here a local SQLite file opened with rusqlite, as Spin's own in-process SQLite is,
//! with its errors reported as Spin reports them (`io(message)`).
//!
//! ```text
//! hindsight-spin-host --addr 127.0.0.1:0 --files DATA --sqlite FILE [--env K=V]... [--cache DIR] COMPONENT
//! ```
//!
//! It prints `Serving HTTP on http://ADDR/` once it listens, as `wasmtime serve` does.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use hyper::server::conn::http1;
use sha2::Digest;
use tokio::net::TcpListener;
use wasmtime::component::{Component, Linker, Resource, ResourceTable};
use wasmtime::error::Context as _;
use wasmtime::{bail, Result};
use wasmtime::{Config, Engine, Store};
use wasmtime_wasi::{FsPerms, WasiCtx, WasiCtxView, WasiView};
use wasmtime_wasi_http::p2::bindings::http::types::Scheme;
use wasmtime_wasi_http::p2::bindings::ProxyPre;
use wasmtime_wasi_http::p2::body::HyperOutgoingBody;
use wasmtime_wasi_http::{WasiHttpCtx, WasiHttpCtxView, WasiHttpView};

mod spin_sqlite {
    wasmtime::component::bindgen!({
        path: "../../guest/edge/wit",
        interfaces: "import spin:sqlite/sqlite@3.0.0;",
        with: { "spin:sqlite/sqlite.connection": super::Connection },
    });
}

use spin_sqlite::spin::sqlite::sqlite::{self, Error as SqlError, QueryResult, RowResult, Value};

/// An open `connection` resource.
pub struct Connection(rusqlite::Connection);

struct Options {
    addr: SocketAddr,
    files: PathBuf,
    sqlite: PathBuf,
    env: Vec<(String, String)>,
    cache: Option<PathBuf>,
    component: PathBuf,
}

struct Host {
    pre: ProxyPre<Instance>,
    options: Arc<Options>,
}

struct Instance {
    wasi: WasiCtx,
    http: WasiHttpCtx,
    table: ResourceTable,
    sqlite: PathBuf,
}

impl WasiView for Instance {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView { ctx: &mut self.wasi, table: &mut self.table }
    }
}

impl WasiHttpView for Instance {
    fn http(&mut self) -> WasiHttpCtxView<'_> {
        WasiHttpCtxView { ctx: &mut self.http, table: &mut self.table, hooks: Default::default() }
    }
}

fn io(e: rusqlite::Error) -> SqlError {
    SqlError::Io(e.to_string())
}

impl sqlite::HostConnection for Instance {
    fn open(&mut self, database: String) -> Result<Resource<Connection>, SqlError> {
        if database != "default" {
            return Err(SqlError::NoSuchDatabase);
        }
        let conn = rusqlite::Connection::open(&self.sqlite).map_err(io)?;
        self.table.push(Connection(conn)).map_err(|e| SqlError::Io(e.to_string()))
    }

    fn execute(
        &mut self,
        conn: Resource<Connection>,
        statement: String,
        parameters: Vec<Value>,
    ) -> Result<QueryResult, SqlError> {
        let conn = &self.table.get(&conn).map_err(|_| SqlError::InvalidConnection)?.0;
        let mut stmt = conn.prepare(&statement).map_err(io)?;
        let columns: Vec<String> = stmt.column_names().into_iter().map(String::from).collect();
        let params: Vec<rusqlite::types::Value> = parameters
            .into_iter()
            .map(|v| match v {
                Value::Integer(i) => rusqlite::types::Value::Integer(i),
                Value::Real(r) => rusqlite::types::Value::Real(r),
                Value::Text(t) => rusqlite::types::Value::Text(t),
                Value::Blob(b) => rusqlite::types::Value::Blob(b),
                Value::Null => rusqlite::types::Value::Null,
            })
            .collect();
        let mut rows = stmt.query(rusqlite::params_from_iter(params)).map_err(io)?;
        let mut out = Vec::new();
        while let Some(row) = rows.next().map_err(io)? {
            let values = (0..columns.len())
                .map(|c| {
                    Ok(match row.get_ref(c).map_err(io)? {
                        rusqlite::types::ValueRef::Integer(i) => Value::Integer(i),
                        rusqlite::types::ValueRef::Real(r) => Value::Real(r),
                        rusqlite::types::ValueRef::Text(t) => Value::Text(String::from_utf8_lossy(t).into()),
                        rusqlite::types::ValueRef::Blob(b) => Value::Blob(b.to_vec()),
                        rusqlite::types::ValueRef::Null => Value::Null,
                    })
                })
                .collect::<Result<Vec<_>, SqlError>>()?;
            out.push(RowResult { values });
        }
        Ok(QueryResult { columns, rows: out })
    }

    fn last_insert_rowid(&mut self, conn: Resource<Connection>) -> i64 {
        self.table.get(&conn).map_or(0, |c| c.0.last_insert_rowid())
    }

    fn changes(&mut self, conn: Resource<Connection>) -> u64 {
        self.table.get(&conn).map_or(0, |c| c.0.changes())
    }

    fn drop(&mut self, conn: Resource<Connection>) -> wasmtime::Result<()> {
        self.table.delete(conn)?;
        Ok(())
    }
}

impl sqlite::Host for Instance {}

fn parse_options() -> Result<Options> {
    let mut args = std::env::args().skip(1);
    let (mut addr, mut files, mut sqlite, mut env, mut cache, mut component) =
        (None, None, None, Vec::new(), None, None);
    while let Some(arg) = args.next() {
        let mut value = |name: &str| args.next().with_context(|| format!("{name} needs a value"));
        match arg.as_str() {
            "--addr" => addr = Some(value("--addr")?.parse::<SocketAddr>().context("--addr")?),
            "--files" => files = Some(PathBuf::from(value("--files")?)),
            "--sqlite" => sqlite = Some(PathBuf::from(value("--sqlite")?)),
            "--cache" => cache = Some(PathBuf::from(value("--cache")?)),
            "--env" => {
                let pair = value("--env")?;
                let (k, v) = pair.split_once('=').context("--env takes KEY=VALUE")?;
                env.push((k.to_string(), v.to_string()));
            }
            other if other.starts_with("--") => bail!("unknown option {other}"),
            other => component = Some(PathBuf::from(other)),
        }
    }
    Ok(Options {
        addr: addr.unwrap_or_else(|| "127.0.0.1:0".parse().expect("an address")),
        files: files.context("--files DIR is required")?,
        sqlite: sqlite.context("--sqlite FILE is required")?,
        env,
        cache,
        component: component.context("the component's path is required")?,
    })
}

/// The component, compiled once per content hash into `cache` (compiling takes seconds), as the
/// hindsight host caches its own.
fn load(engine: &Engine, path: &PathBuf, cache: Option<&PathBuf>) -> Result<Component> {
    let bytes = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
    let sha256 = format!("{:x}", sha2::Sha256::digest(&bytes));
    let (component, _cached) =
        hindsight::__private::load_component(engine, &bytes, &sha256, cache.map(PathBuf::as_path))?;
    Ok(component)
}

impl Host {
    async fn handle(
        &self,
        req: hyper::Request<hyper::body::Incoming>,
    ) -> Result<hyper::Response<HyperOutgoingBody>> {
        let mut wasi = WasiCtx::builder();
        wasi.inherit_stderr();
        wasi.preopened_dir(&self.options.files, "/data", FsPerms::ReadOnly)?;
        for (k, v) in &self.options.env {
            wasi.env(k, v);
        }
        let mut store = Store::new(
            self.pre.engine(),
            Instance {
                wasi: wasi.build(),
                http: WasiHttpCtx::new(),
                table: ResourceTable::new(),
                sqlite: self.options.sqlite.clone(),
            },
        );
        let (sender, receiver) = tokio::sync::oneshot::channel();
        let req = store.data_mut().http().new_incoming_request(Scheme::Http, req)?;
        let out = store.data_mut().http().new_response_outparam(sender)?;
        let pre = self.pre.clone();
        let task = tokio::task::spawn(async move {
            let proxy = pre.instantiate_async(&mut store).await?;
            proxy.wasi_http_incoming_handler().call_handle(&mut store, req, out).await
        });
        match receiver.await {
            Ok(Ok(response)) => Ok(response),
            Ok(Err(e)) => Err(e.into()),
            Err(_) => match task.await {
                Ok(Ok(())) => bail!("the component never set a response"),
                Ok(Err(e)) => Err(e.context("the component trapped before it set a response")),
                Err(e) => Err(e.into()),
            },
        }
    }
}

#[tokio::main]
async fn main() -> Result<()> {
    let options = Arc::new(parse_options()?);
    let engine = Engine::new(&Config::new())?;
    let component = load(&engine, &options.component, options.cache.as_ref())?;
    let mut linker: Linker<Instance> = Linker::new(&engine);
    wasmtime_wasi::p2::add_to_linker_async(&mut linker)?;
    wasmtime_wasi_http::p2::add_only_http_to_linker_async(&mut linker)?;
    sqlite::add_to_linker::<Instance, wasmtime::component::HasSelf<Instance>>(&mut linker, |s| s)?;
    let host =
        Arc::new(Host { pre: ProxyPre::new(linker.instantiate_pre(&component)?)?, options: options.clone() });
    let listener = TcpListener::bind(options.addr).await?;
    println!("Serving HTTP on http://{}/", listener.local_addr()?);
    loop {
        let (client, _) = listener.accept().await?;
        let host = host.clone();
        tokio::task::spawn(async move {
            let service = hyper::service::service_fn(move |req| {
                let host = host.clone();
                async move { host.handle(req).await }
            });
            if let Err(e) = http1::Builder::new()
                .keep_alive(true)
                .serve_connection(wasmtime_wasi_http::io::TokioIo::new(client), service)
                .await
            {
                eprintln!("serving a connection: {e:?}");
            }
        });
    }
}
