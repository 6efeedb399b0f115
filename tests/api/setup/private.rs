//! What setup leaves on disk besides its entries: the user's new settings
//! files are readable by the user only (they hold keys and tokens), and
//! a project file's backup is kept out of the checkout, where `git add -A`
//! would commit it.
//! Setup edits the agent's files: nothing here depends on the storage backend.

use std::path::{Path, PathBuf};
use std::process::Output;

use crate::hooks::{Project, engram, run};

async fn setup(project: &Project, args: &[&str]) -> Output {
    let mut command = engram(project);
    command.arg("setup").args(args).current_dir(&project.cwd);
    run(command, String::new()).await
}

fn mode(path: &Path) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

/// Where setup keeps the backups of `file`, a file in the project: the
/// same path under the state directory's `engram/backups/`.
pub fn backup_place(project: &Project, file: &Path) -> PathBuf {
    project
        .home()
        .join("state/engram/backups")
        .join(file.strip_prefix("/").unwrap())
}

/// Every file below `dir` whose name holds `.engram-backup-`.
fn backups_below(dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            found.extend(backups_below(&path));
        } else if path.to_string_lossy().contains(".engram-backup-") {
            found.push(path);
        }
    }
    found
}

#[tokio::test]
async fn setup_creates_the_users_new_settings_files_readable_by_the_user_only() {
    for agent in [
        "claude-code",
        "codex",
        "cursor",
        "gemini",
        "vscode",
        "opencode",
        "qwen-code",
        "copilot",
        "amp",
    ] {
        let project = Project::new("claude-code/transcript.jsonl");
        let output = setup(&project, &[agent]).await;
        assert!(output.status.success(), "{agent}: {output:?}");
        let report = String::from_utf8(output.stdout).unwrap();
        let created: Vec<&str> = report
            .lines()
            .filter_map(|line| line.strip_suffix(": created"))
            .collect();
        assert!(!created.is_empty(), "{agent}: {report}");
        for file in created {
            assert_eq!(mode(Path::new(file)), 0o600, "{agent}: {file}");
        }
    }
}

#[tokio::test]
async fn a_project_files_backup_is_kept_out_of_the_checkout() {
    let project = Project::new("claude-code/transcript.jsonl");
    let mcp = project.cwd.join(".mcp.json");
    let original = r#"{"mcpServers": {"docs": {"command": "docs-mcp"}}}"#;
    std::fs::write(&mcp, original).unwrap();

    let output = setup(&project, &["claude-code", "--scope", "project"]).await;

    assert!(output.status.success(), "{output:?}");
    assert_eq!(
        backups_below(&project.cwd),
        Vec::<PathBuf>::new(),
        "nothing for `git add -A` to pick up"
    );
    let report = String::from_utf8(output.stdout).unwrap();
    let backup = report
        .split("backup: ")
        .nth(1)
        .and_then(|rest| rest.split(',').next())
        .map(PathBuf::from)
        .unwrap_or_else(|| panic!("{report}"));
    assert_eq!(backup.parent(), backup_place(&project, &mcp).parent());
    assert_eq!(std::fs::read_to_string(&backup).unwrap(), original);
    assert_eq!(mode(&backup), 0o600);
}
