//! Nothing is built here: the component is an artifact `./dev component` puts beside this file.
//! This only says how to make it when it is missing, instead of a bare include_bytes! error.

fn main() {
    let dir = std::path::PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets it"));
    for file in ["hindsight.wasm", "hindsight.wasm.sha256", "sources.sha256"] {
        println!("cargo:rerun-if-changed={file}");
        if !dir.join(file).is_file() {
            panic!(
                "{} is missing: build the component first with `./dev component` (it needs the \
                 wasm32-wasip2 target: `rustup target add wasm32-wasip2`)",
                dir.join(file).display()
            );
        }
    }
}
