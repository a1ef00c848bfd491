//! Pre-initialises an edge component: instantiates it with WASI (the models directory mounted
//! read-only at `/models`) and wasi:http, runs its `wizer-initialize` (which loads the embedding
//! model), and writes the component again with the memory as that left it, so every instance of
//! the output starts with the model loaded.
//!
//! ```text
//! hindsight-edge-pre-init MODELS_DIR IN.wasm OUT.wasm
//! ```
//!
//! The stock `wasmtime wizer` does the same for hindsight-edge.wasm, but cannot for the Spin build:
//! its `-W unknown-imports-trap=y`, needed for `spin:sqlite`, also re-stubs WASI interfaces the
//! guest imports at a newer patch version than the CLI's, and instantiation then fails on their
//! resource types. Here only what WASI and wasi:http do not define is stubbed.

use wasmtime::component::types::ComponentItem;
use wasmtime::component::{Component, Linker, LinkerInstance, ResourceTable, ResourceType};
use wasmtime::error::Context as _;
use wasmtime::{bail, Config, Engine, Result, Store};
use wasmtime_wasi::{FsPerms, WasiCtx, WasiCtxView, WasiView};
use wasmtime_wasi_http::{WasiHttpCtx, WasiHttpCtxView, WasiHttpView};

struct Host {
    wasi: WasiCtx,
    http: WasiHttpCtx,
    table: ResourceTable,
}

impl WasiView for Host {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView { ctx: &mut self.wasi, table: &mut self.table }
    }
}

impl WasiHttpView for Host {
    fn http(&mut self) -> WasiHttpCtxView<'_> {
        WasiHttpCtxView { ctx: &mut self.http, table: &mut self.table, hooks: Default::default() }
    }
}

/// Defines the functions and resources of `instance` (an import nothing else defines) as traps:
/// the initialiser never calls them.
fn stub(
    linker: &mut LinkerInstance<'_, Host>,
    engine: &Engine,
    name: &str,
    item: &ComponentItem,
) -> Result<()> {
    match item {
        ComponentItem::ComponentInstance(instance) => {
            let mut inner = linker.instance(name)?;
            for (export, ext) in instance.exports(engine) {
                stub(&mut inner, engine, export, &ext.ty)?;
            }
        }
        ComponentItem::ComponentFunc(_) => {
            let what = name.to_string();
            linker
                .func_new(name, move |_, _, _, _| bail!("{what} is not available while pre-initialising"))?;
        }
        ComponentItem::Resource(_) => linker.resource(name, ResourceType::host::<()>(), |_, _| Ok(()))?,
        ComponentItem::Type(_) => {}
        other => bail!("cannot stub the import {name}: {other:?}"),
    }
    Ok(())
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [models, input, output] = args.as_slice() else {
        bail!("usage: hindsight-edge-pre-init MODELS_DIR IN.wasm OUT.wasm");
    };
    let wasm = std::fs::read(input).with_context(|| format!("reading {input}"))?;
    let engine = Engine::new(&Config::new())?;
    let mut wasi = WasiCtx::builder();
    wasi.inherit_stderr();
    wasi.preopened_dir(models, "/models", FsPerms::ReadOnly).with_context(|| format!("mounting {models}"))?;
    let mut store = Store::new(
        &engine,
        Host { wasi: wasi.build(), http: WasiHttpCtx::new(), table: ResourceTable::new() },
    );
    // The snapshot is read out of the instance in a few large host calls.
    store.set_hostcall_fuel(usize::MAX);
    let mut wizer = wasmtime_wizer::Wizer::new();
    // wizer 48 drops the initialiser from the core module but not from the component's lift of
    // it, which then does not validate: keep it (calling it again would only load the model again).
    wizer.init_func("wizer-initialize").keep_init_func(true);
    let (snapshot, _) = wizer
        .run_component(&mut store, &wasm, async |store: &mut Store<Host>, component: &Component| {
            let mut linker: Linker<Host> = Linker::new(&engine);
            wasmtime_wasi::p2::add_to_linker_async(&mut linker)?;
            wasmtime_wasi_http::p2::add_only_http_to_linker_async(&mut linker)?;
            for (name, ext) in component.component_type().imports(&engine) {
                if !name.starts_with("wasi:") {
                    stub(&mut linker.root(), &engine, name, &ext.ty)?;
                }
            }
            linker.instantiate_async(store, component).await
        })
        .await
        .context("pre-initialising")?;
    let partial = format!("{output}.partial");
    std::fs::write(&partial, &snapshot).with_context(|| format!("writing {partial}"))?;
    std::fs::rename(&partial, output).with_context(|| format!("writing {output}"))?;
    println!("{output}: {} bytes", snapshot.len());
    Ok(())
}
