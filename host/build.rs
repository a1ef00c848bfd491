//! Builds the guest component for wasm32-wasip2 (simd128, opt-level 3, fat LTO) with a nested
//! cargo into its own target dir, and hands its path and sha256 to the host crate.
//!
//! `HINDSIGHT_GUEST_WASM=path` skips the nested build and embeds that file instead.

use std::env;
use std::path::{Path, PathBuf};
use std::process::Command;

use sha2::{Digest, Sha256};

fn main() {
    let manifest_dir = PathBuf::from(env::var("CARGO_MANIFEST_DIR").unwrap());
    let root = manifest_dir.parent().unwrap().to_path_buf();
    for watched in ["guest/src", "guest/Cargo.toml", "wit", "Cargo.lock", "Cargo.toml"] {
        println!("cargo:rerun-if-changed={}", root.join(watched).display());
    }
    println!("cargo:rerun-if-env-changed=HINDSIGHT_GUEST_WASM");

    let wasm = match env::var_os("HINDSIGHT_GUEST_WASM") {
        Some(path) => PathBuf::from(path),
        None => build_guest(&root),
    };
    let bytes = std::fs::read(&wasm).unwrap_or_else(|e| panic!("reading {}: {e}", wasm.display()));
    let digest = Sha256::digest(&bytes);
    let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    println!("cargo:rustc-env=HINDSIGHT_WASM_PATH={}", wasm.display());
    println!("cargo:rustc-env=HINDSIGHT_WASM_SHA256={hex}");
}

fn build_guest(root: &Path) -> PathBuf {
    let target_dir = root.join("target").join("guest-wasm");
    let cargo = env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.current_dir(root)
        .args(["build", "-p", "hindsight-guest", "--target", "wasm32-wasip2", "--profile", "guest"])
        .arg("--target-dir")
        .arg(&target_dir);
    // The outer build's flags, wrappers (clippy-driver) and target must not leak into the guest's.
    for var in [
        "RUSTFLAGS",
        "CARGO_ENCODED_RUSTFLAGS",
        "RUSTC_WRAPPER",
        "RUSTC_WORKSPACE_WRAPPER",
        "CARGO_BUILD_TARGET",
        "CARGO_TARGET_DIR",
        "CARGO_BUILD_RUSTFLAGS",
        "CARGO_PRIMARY_PACKAGE",
    ] {
        cmd.env_remove(var);
    }
    cmd.env("CARGO_ENCODED_RUSTFLAGS", "-Ctarget-feature=+simd128");
    let status = cmd.status().expect("running cargo for the guest");
    if !status.success() {
        panic!(
            "building the guest component failed ({status}); is the target installed? \
             run `rustup target add wasm32-wasip2`"
        );
    }
    target_dir.join("wasm32-wasip2").join("guest").join("hindsight_guest.wasm")
}
