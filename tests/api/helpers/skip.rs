//! A test that needs what a developer's machine may lack (a browser,
//! `node`, an npm package under `tests/`) says it is skipped, and why,
//! and passes; under CI (`CI` set), where `.ci/run` installs all of it,
//! it fails instead. PostgreSQL's tests do the same through
//! `pg_cluster`.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// Says on the terminal (past the test harness's capture) that the
/// running test is skipped and why; under CI, fails it. The test is
/// named by its thread, which the harness names after it.
pub fn skip(why: &str) {
    let test = std::thread::current().name().unwrap_or("a test").to_owned();
    assert!(
        std::env::var_os("CI").is_none(),
        "{test} cannot run under CI: {why}"
    );
    let _ = writeln!(std::io::stderr(), "{test}: skipped: {why}");
}

/// What was found, or `None` after [`skip`] with why it was not.
pub fn or_skip<T>(found: Result<T, String>) -> Option<T> {
    found.map_err(|why| skip(&why)).ok()
}

/// `file` of the npm package `tests/<package>` (under its
/// `node_modules`, installed by `npm ci --prefix tests/<package>`, as
/// `.ci/run` does), once `node` runs too; otherwise why not.
pub fn npm_installed(node: &Path, package: &str, file: &str) -> Result<PathBuf, String> {
    let install = format!("npm ci --prefix tests/{package}");
    let installed = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests")
        .join(package)
        .join("node_modules")
        .join(file);
    if !installed.is_file() {
        return Err(format!("{file} is not installed ({install})"));
    }
    let runs = Command::new(node)
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|status| status.success());
    if !runs {
        return Err(format!("{} does not run", node.display()));
    }
    Ok(installed)
}
