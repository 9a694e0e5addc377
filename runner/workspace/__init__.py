"""The git wing: the only place git runs on the host (the target repository, never an
arm's checkout). `runner.workspace.git` is the one choke point every call goes through;
`bundle` imports an arm's work checked, `merge` makes the experiment branch."""

from runner.workspace.git import (
    GitError,
    GitRun,
    Part,
    arm_branch,
    base_bundle,
    cat_blobs,
    commit_of,
    commit_patch,
    file_at,
    files_at,
    git_bytes,
    git_capped,
    git_lines,
    git_run,
    git_stream,
    grep_files,
    objects_dir,
    records,
    require_clean,
    resolve_commit,
    run_git,
    toplevel,
    work_diff,
    work_messages,
)

__all__ = ["GitError", "GitRun", "Part", "arm_branch", "base_bundle", "cat_blobs",
           "commit_of", "commit_patch", "file_at", "files_at", "git_bytes", "git_capped",
           "git_lines", "git_run", "git_stream", "grep_files", "objects_dir", "records",
           "require_clean", "resolve_commit", "run_git", "toplevel", "work_diff",
           "work_messages"]
