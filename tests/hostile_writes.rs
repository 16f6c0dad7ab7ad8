//! Writing only what allot owns, against hostile or careless folders (issue 12): `allot
//! build --out` never deletes or replaces a file it did not write, takes a lock, and never
//! writes through a link; `allot fmt` never changes what a file means, keeps escapes and
//! `/-`, and refuses links and read-only files. Every hostile input is made by the test.

use std::path::Path;

use crate::common::allot;
use allot_compiler::test_support::files_under as tree;

const BUDGET: &str = "cluster c gpus=8 gpu-type=h100 {\n    slurm cluster=lab\n}\ncontract b min-runtime=\"1h\" default=#true\n\
    project a share=1 {\n    users alice\n}\n";

/// A budget repository and an output folder, in one temporary folder.
struct Setup {
    dir: tempfile::TempDir,
}

impl Setup {
    fn new() -> Setup {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("repo")).unwrap();
        std::fs::write(dir.path().join("repo/allot.kdl"), BUDGET).unwrap();
        Setup { dir }
    }

    fn out(&self) -> std::path::PathBuf {
        self.dir.path().join("out")
    }

    fn build(&self, extra: &[&str]) -> (i32, String, String) {
        let repo = self.dir.path().join("repo");
        let out = self.out();
        let mut args = vec!["build", repo.to_str().unwrap(), "--out", out.to_str().unwrap()];
        args.extend(extra);
        allot(&args)
    }
}

fn no_temporary_folders(out: &Path) {
    let left: Vec<String> = std::fs::read_dir(out)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name.starts_with(".allot-tmp-"))
        .collect();
    assert!(left.is_empty(), "temporary folders left behind: {left:?}");
}

#[test]
fn a_foreign_file_in_a_target_folder_survives_and_the_build_refuses() {
    let setup = Setup::new();
    assert_eq!(setup.build(&[]).0, 0);
    let foreign = setup.out().join("slurm/slurm.conf");
    std::fs::write(&foreign, "ClusterName=production\n").unwrap();
    let before = tree(&setup.out());

    let (status, _, stderr) = setup.build(&[]);
    assert_eq!(status, 1);
    assert!(
        stderr.contains("slurm/slurm.conf (not written by allot)")
            && stderr.contains("--force")
            && stderr.contains("nothing was written"),
        "{stderr}"
    );
    assert_eq!(tree(&setup.out()), before, "nothing changed");
    no_temporary_folders(&setup.out());
}

#[test]
fn a_first_build_into_a_folder_holding_foreign_files_refuses() {
    let setup = Setup::new();
    std::fs::create_dir_all(setup.out().join("slurm/old")).unwrap();
    std::fs::write(setup.out().join("slurm/old/notes.txt"), "mine\n").unwrap();
    let (status, _, stderr) = setup.build(&[]);
    assert_eq!(status, 1);
    assert!(stderr.contains("slurm/old/notes.txt (not written by allot)"), "{stderr}");
    assert_eq!(std::fs::read_to_string(setup.out().join("slurm/old/notes.txt")).unwrap(), "mine\n");
    assert!(!setup.out().join("slurm/lab.cfg").exists());
}

#[test]
fn force_replaces_foreign_files() {
    let setup = Setup::new();
    std::fs::create_dir_all(setup.out().join("slurm")).unwrap();
    std::fs::write(setup.out().join("slurm/slurm.conf"), "ClusterName=production\n").unwrap();
    let (status, _, stderr) = setup.build(&["--force"]);
    assert_eq!(status, 0, "{stderr}");
    assert!(!setup.out().join("slurm/slurm.conf").exists());
    assert!(setup.out().join("slurm/lab.cfg").is_file());
    assert_eq!(setup.build(&[]).0, 0, "what --force wrote is allot's");
}

#[test]
fn a_file_changed_since_allot_wrote_it_is_refused() {
    let setup = Setup::new();
    assert_eq!(setup.build(&[]).0, 0);
    let changed = setup.out().join("slurm/lab.cfg");
    std::fs::write(&changed, "# edited by hand on the login node\n").unwrap();
    let (status, _, stderr) = setup.build(&[]);
    assert_eq!(status, 1);
    assert!(stderr.contains("slurm/lab.cfg (changed since allot wrote it)"), "{stderr}");
    assert_eq!(std::fs::read_to_string(&changed).unwrap(), "# edited by hand on the login node\n");
}

#[test]
fn files_allot_wrote_and_no_longer_emits_are_removed() {
    let setup = Setup::new();
    assert_eq!(setup.build(&[]).0, 0);
    assert!(setup.out().join("slurm/lab.cfg").is_file());
    std::fs::write(setup.dir.path().join("repo/allot.kdl"), BUDGET.replace("cluster=lab", "cluster=gpu"))
        .unwrap();
    let (status, _, stderr) = setup.build(&[]);
    assert_eq!(status, 0, "{stderr}");
    assert!(!setup.out().join("slurm/lab.cfg").exists(), "the stale file is gone");
    assert!(setup.out().join("slurm/gpu.cfg").is_file());
    let manifest = std::fs::read_to_string(setup.out().join(".allot-manifest")).unwrap();
    assert!(manifest.contains("  slurm/gpu.cfg\n") && !manifest.contains("lab.cfg"), "{manifest}");

    // A target no cluster is bound to any more: its folder, all allot's, goes.
    std::fs::write(setup.dir.path().join("repo/allot.kdl"), BUDGET.replace("    slurm cluster=lab\n", ""))
        .unwrap();
    let (status, _, stderr) = setup.build(&[]);
    assert_eq!(status, 0, "{stderr}");
    assert!(!setup.out().join("slurm").exists());
}

#[test]
fn a_concurrent_build_fails_at_once_naming_the_folder() {
    let setup = Setup::new();
    assert_eq!(setup.build(&[]).0, 0);
    let before = tree(&setup.out());
    let held = std::fs::OpenOptions::new().write(true).open(setup.out().join(".allot-lock")).unwrap();
    held.lock().unwrap();

    let (status, _, stderr) = setup.build(&[]);
    assert_eq!(status, 1);
    let out = setup.out();
    assert!(stderr.contains(&format!("another allot build is writing to {}", out.display())), "{stderr}");
    assert_eq!(tree(&out), before);
    no_temporary_folders(&out);
    held.unlock().unwrap();
    assert_eq!(setup.build(&[]).0, 0);
}

#[test]
fn temporary_folders_of_a_killed_build_are_removed() {
    let setup = Setup::new();
    assert_eq!(setup.build(&[]).0, 0);
    std::fs::create_dir_all(setup.out().join(".allot-tmp-killed/new/slurm")).unwrap();
    assert_eq!(setup.build(&[]).0, 0);
    no_temporary_folders(&setup.out());
}

#[cfg(unix)]
#[test]
fn a_symlinked_target_folder_is_never_written_through() {
    let setup = Setup::new();
    let elsewhere = setup.dir.path().join("etc-slurm");
    std::fs::create_dir(&elsewhere).unwrap();
    std::fs::write(elsewhere.join("slurm.conf"), "ClusterName=production\n").unwrap();
    std::fs::create_dir(setup.out()).unwrap();
    std::os::unix::fs::symlink(&elsewhere, setup.out().join("slurm")).unwrap();
    for extra in [&[][..], &["--force"][..]] {
        let (status, _, stderr) = setup.build(extra);
        assert_eq!(status, 1, "{extra:?}");
        assert!(
            stderr.contains("is a symbolic link") && stderr.contains("never writes through links"),
            "{stderr}"
        );
    }
    assert!(std::fs::symlink_metadata(setup.out().join("slurm")).unwrap().file_type().is_symlink());
    assert_eq!(tree(&elsewhere).keys().collect::<Vec<_>>(), ["slurm.conf"]);
    assert_eq!(std::fs::read_to_string(elsewhere.join("slurm.conf")).unwrap(), "ClusterName=production\n");
    no_temporary_folders(&setup.out());
}

#[cfg(unix)]
#[test]
fn a_foreign_link_or_fifo_inside_a_target_folder_is_refused_and_not_opened() {
    let setup = Setup::new();
    assert_eq!(setup.build(&[]).0, 0);
    let fifo = setup.out().join("slurm/pipe");
    let made = std::process::Command::new("mkfifo").arg(&fifo).status().unwrap();
    assert!(made.success());
    std::os::unix::fs::symlink("/etc/passwd", setup.out().join("slurm/lab-slurm.conf.bak")).unwrap();
    let (status, _, stderr) = setup.build(&[]);
    assert_eq!(status, 1);
    assert!(
        stderr.contains("slurm/pipe (not a regular file)")
            && stderr.contains("slurm/lab-slurm.conf.bak (not a regular file)"),
        "{stderr}"
    );
}

/// A repository holding one budget file, `allot.kdl`, with `text`.
fn repo_with(text: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("allot.kdl"), text).unwrap();
    dir
}

fn fmt(dir: &Path, extra: &[&str]) -> (i32, String, String) {
    let mut args = vec!["fmt"];
    args.extend(extra);
    args.push(dir.to_str().unwrap());
    allot(&args)
}

#[test]
fn fmt_keeps_slashdash_entries_and_nodes() {
    let dir = repo_with(
        "project a   share=1 /-max-gpus=4 {\n  users alice /-bob   carol\n}\n/-project old share=1 {\n    users dave\n}\n",
    );
    let (status, _, stderr) = fmt(dir.path(), &[]);
    assert_eq!(status, 0, "{stderr}");
    assert_eq!(
        std::fs::read_to_string(dir.path().join("allot.kdl")).unwrap(),
        "project a share=1 /-max-gpus=4 {\n    users alice /-bob carol\n}\n/-project old share=1 {\n    users dave\n}\n"
    );
    assert_eq!(fmt(dir.path(), &["--check"]).0, 0);
}

#[test]
fn fmt_keeps_escapes_as_escapes_and_the_result_parses() {
    let text =
        "project   a share=1 {\n    users \"al\\u{0}ice\" \"bob\\u{202E}txt.exe\" \"\\u{2066}carol\"\n}\n";
    let dir = repo_with(text);
    let (status, _, stderr) = fmt(dir.path(), &[]);
    assert_eq!(status, 0, "{stderr}");
    let formatted = std::fs::read_to_string(dir.path().join("allot.kdl")).unwrap();
    assert_eq!(formatted, text.replace("project   a", "project a"));
    assert!(!formatted.chars().any(|c| c == '\0' || c == '\u{202E}' || c == '\u{2066}'));
    let (status, _, stderr) = fmt(dir.path(), &["--check"]);
    assert_eq!(status, 0, "the result parses and is canonical: {stderr}");
    let (_, _, stderr) = allot(&["check", dir.path().to_str().unwrap()]);
    assert!(!stderr.contains("allot::syntax"), "{stderr}");
}

#[cfg(unix)]
#[test]
fn fmt_refuses_a_symlinked_file_and_leaves_the_link_and_its_target() {
    let dir = tempfile::tempdir().unwrap();
    let outside = dir.path().join("outside.kdl");
    let text = "project   a share=1\n";
    std::fs::write(&outside, text).unwrap();
    let repo = dir.path().join("repo");
    std::fs::create_dir(&repo).unwrap();
    std::os::unix::fs::symlink(&outside, repo.join("allot.kdl")).unwrap();

    for extra in [&[][..], &["--check"][..]] {
        let (status, _, stderr) = fmt(&repo, extra);
        assert_eq!(status, 1, "{extra:?}");
        assert!(stderr.contains("allot.kdl: is a symbolic link"), "{stderr}");
    }
    assert!(std::fs::symlink_metadata(repo.join("allot.kdl")).unwrap().file_type().is_symlink());
    assert_eq!(std::fs::read_to_string(&outside).unwrap(), text);
}

#[cfg(unix)]
#[test]
fn fmt_refuses_a_file_reached_through_a_symlinked_folder() {
    let dir = tempfile::tempdir().unwrap();
    let repo = dir.path().join("repo");
    std::fs::create_dir_all(repo.join("real")).unwrap();
    std::fs::write(repo.join("real/x.kdl"), "project   x share=1\n").unwrap();
    std::fs::write(repo.join("allot.kdl"), "include \"teams/x.kdl\"\n").unwrap();
    // A link inside the repository is read, but fmt does not write through it.
    std::os::unix::fs::symlink("real", repo.join("teams")).unwrap();
    let (status, _, stderr) = fmt(&repo, &[]);
    assert_eq!(status, 1);
    assert!(stderr.contains("is reached through the symbolic link `teams`"), "{stderr}");
    assert_eq!(std::fs::read_to_string(repo.join("real/x.kdl")).unwrap(), "project   x share=1\n");
    // A link leading out of the repository is not even read.
    let outside = dir.path().join("elsewhere");
    std::fs::create_dir(&outside).unwrap();
    std::fs::write(outside.join("x.kdl"), "project   x share=1\n").unwrap();
    std::fs::remove_file(repo.join("teams")).unwrap();
    std::os::unix::fs::symlink(&outside, repo.join("teams")).unwrap();
    let (status, _, stderr) = fmt(&repo, &[]);
    assert_eq!(status, 1);
    assert!(stderr.contains("allot::include::outside"), "{stderr}");
    assert_eq!(std::fs::read_to_string(outside.join("x.kdl")).unwrap(), "project   x share=1\n");
}

#[cfg(unix)]
#[test]
fn fmt_refuses_a_read_only_file() {
    let text = "project   a share=1\n";
    let dir = repo_with(text);
    let file = dir.path().join("allot.kdl");
    let mut permissions = std::fs::metadata(&file).unwrap().permissions();
    permissions.set_readonly(true);
    std::fs::set_permissions(&file, permissions).unwrap();
    for extra in [&[][..], &["--check"][..]] {
        let (status, _, stderr) = fmt(dir.path(), extra);
        assert_eq!(status, 1);
        assert!(stderr.contains("allot.kdl: is read-only"), "{stderr}");
    }
    assert_eq!(std::fs::read_to_string(&file).unwrap(), text);
    assert!(std::fs::metadata(&file).unwrap().permissions().readonly());
}

#[cfg(unix)]
#[test]
fn fmt_refuses_a_hard_linked_file_and_keeps_permissions_otherwise() {
    use std::os::unix::fs::PermissionsExt;
    let dir = repo_with("project   a share=1\n");
    let file = dir.path().join("allot.kdl");
    std::fs::hard_link(&file, dir.path().join("copy.kdl")).unwrap();
    let (status, _, stderr) = fmt(dir.path(), &[]);
    assert_eq!(status, 1);
    assert!(stderr.contains("has other hard links"), "{stderr}");

    std::fs::remove_file(dir.path().join("copy.kdl")).unwrap();
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o640)).unwrap();
    assert_eq!(fmt(dir.path(), &[]).0, 0);
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "project a share=1\n");
    assert_eq!(std::fs::metadata(&file).unwrap().permissions().mode() & 0o777, 0o640);
}

#[cfg(unix)]
#[test]
fn a_new_file_gets_the_permissions_of_any_new_file() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let dump = dir.path().join("dump.cfg");
    std::fs::write(&dump, "Cluster - 'lab'\nParent - 'root'\nAccount - 'a':Fairshare=1\n").unwrap();
    let out = dir.path().join("imported");
    let (status, _, stderr) =
        allot(&["import", "slurm", "--gpus", "8", dump.to_str().unwrap(), "--out", out.to_str().unwrap()]);
    assert_eq!(status, 0, "{stderr}");
    // A file made the ordinary way in the same place: its mode is what the umask leaves.
    let ordinary = dir.path().join("ordinary");
    std::fs::File::create(&ordinary).unwrap();
    let mode = |path: &Path| std::fs::metadata(path).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&out.join("allot.kdl")), mode(&ordinary));
}
