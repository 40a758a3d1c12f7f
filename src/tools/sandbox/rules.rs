//! Which paths a sandboxed command may read or write: pure path logic, no Landlock.
//!
//! A command may read the system ([`SYSTEM_READ`]) and the skill directories, read and write
//! the workspace and its own temporary directory (added per command), and use a few devices.
//! Landlock grants rights on whole subtrees, so a readable directory that holds a hidden path
//! (squidbot's home, its config file, the owner's home: say a service whose home is
//! `/var/lib/squidbot`) is not granted as a whole: its entries are, one by one, except the
//! ones that are or hold a hidden path, recursively. The workspace is granted exactly (never
//! its parent, even when it sits inside the home), and a workspace that holds a hidden path
//! cannot be sandboxed at all.

use std::path::{Path, PathBuf};

use super::JailUnavailable;

/// Directories every command may read (and execute from) when they exist.
pub const SYSTEM_READ: &[&str] = &[
    "/bin",
    "/sbin",
    "/usr",
    "/lib",
    "/lib32",
    "/lib64",
    "/libx32",
    "/etc",
    "/opt",
    "/var",
    "/proc",
    "/sys",
    "/nix/store",
    "/run/systemd/resolve",
    "/run/resolvconf",
];

/// Devices a command may read and write.
pub const DEVICES_WRITE: &[&str] = &["/dev/null", "/dev/zero", "/dev/full"];

/// Devices a command may only read.
pub const DEVICES_READ: &[&str] = &["/dev/random", "/dev/urandom"];

/// Files of the system no command reads, though they sit in a readable directory: the
/// password and group shadows and the sudo rules. Only root can read them anyway, and a
/// gateway started as root (a container, a VPS) runs its commands as root: the jail, not the
/// permissions, must keep them out. Hidden like the home (see [`rules_for`]).
pub const SYSTEM_SECRETS: &[&str] = &[
    "/etc/shadow",
    "/etc/shadow-",
    "/etc/gshadow",
    "/etc/gshadow-",
    "/etc/sudoers",
    "/etc/sudoers.d",
    "/etc/security/opasswd",
];

/// What a rule grants.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// Read files, list directories, execute.
    Read,
    /// Everything: read, write, create, remove, rename within.
    ReadWrite,
}

/// One path and what a command may do beneath it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PathRule {
    /// The path (canonical where it exists).
    pub path: PathBuf,
    /// The rights granted beneath it.
    pub access: Access,
    /// Whether this is the workspace, which only the workspace jail may write.
    pub is_workspace: bool,
}

/// The rules of every command: `system` (normally [`SYSTEM_READ`]) and `readable` read-only,
/// the devices, and `workspace` read-write; nothing that is or holds a `hidden` path, except
/// the workspace and readable directories inside one. Fails when the workspace holds a hidden
/// path. Paths that do not exist are left out (they can be granted nothing).
pub fn rules_for(
    system: &[&str],
    workspace: &Path,
    readable: &[PathBuf],
    hidden: &[PathBuf],
) -> Result<Vec<PathRule>, JailUnavailable> {
    let hidden: Vec<PathBuf> = hidden.iter().map(|path| canonical(path)).collect();
    let workspace = canonical(workspace);
    if let Some(held) = hidden.iter().find(|path| path.starts_with(&workspace)) {
        return Err(JailUnavailable::WorkspaceHoldsHidden {
            workspace,
            hidden: held.clone(),
        });
    }
    let mut read = Vec::new();
    let mut roots: Vec<PathBuf> = system.iter().map(PathBuf::from).collect();
    roots.extend(readable.iter().cloned());
    for root in roots {
        let root = canonical(&root);
        if root.exists() {
            readable_except(&root, &hidden, &mut read);
        }
    }
    let mut rules: Vec<PathRule> = read
        .into_iter()
        .map(|path| PathRule {
            path,
            access: Access::Read,
            is_workspace: false,
        })
        .collect();
    for (devices, access) in [
        (DEVICES_WRITE, Access::ReadWrite),
        (DEVICES_READ, Access::Read),
    ] {
        rules.extend(
            devices
                .iter()
                .map(Path::new)
                .filter(|path| path.exists())
                .map(|path| PathRule {
                    path: path.to_owned(),
                    access,
                    is_workspace: false,
                }),
        );
    }
    rules.push(PathRule {
        path: workspace,
        access: Access::ReadWrite,
        is_workspace: true,
    });
    Ok(rules)
}

/// Adds to `out` the paths that together make `path` readable except every `hidden` path
/// (all canonical): `path` itself when it holds none; nothing when it is one; else its
/// entries, each treated the same way.
fn readable_except(path: &Path, hidden: &[PathBuf], out: &mut Vec<PathBuf>) {
    if hidden.iter().any(|h| h == path) {
        return;
    }
    if !hidden.iter().any(|h| h.starts_with(path)) {
        if !out.iter().any(|done| path.starts_with(done)) {
            out.push(path.to_owned());
        }
        return;
    }
    let Ok(entries) = std::fs::read_dir(path) else {
        return;
    };
    for entry in entries.flatten() {
        let entry = entry.path();
        // A symlink is granted as what it points to: Landlock rules hold on the real tree.
        let target = canonical(&entry);
        if target.starts_with(path) || !target.exists() {
            readable_except(&entry, hidden, out);
        } else {
            readable_except(&target, hidden, out);
        }
    }
}

/// `path` with symlinks resolved when it exists, else as given.
pub fn canonical(path: &Path) -> PathBuf {
    std::fs::canonicalize(path).unwrap_or_else(|_| path.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn paths(rules: &[PathRule], access: Access) -> Vec<PathBuf> {
        rules
            .iter()
            .filter(|rule| rule.access == access)
            .map(|rule| rule.path.clone())
            .collect()
    }

    #[test]
    fn a_workspace_inside_home_is_granted_exactly() {
        let root = tempfile::tempdir().unwrap();
        let root = canonical(root.path());
        let home = root.join("home");
        let workspace = home.join("workspace");
        let bundled = home.join("skills/bundled");
        for dir in [&workspace, &bundled, &home.join("sessions")] {
            std::fs::create_dir_all(dir).unwrap();
        }
        std::fs::write(home.join("squidbot.yaml"), "secret").unwrap();
        let rules = rules_for(
            &["/usr"],
            &workspace,
            std::slice::from_ref(&bundled),
            std::slice::from_ref(&home),
        )
        .unwrap();
        assert_eq!(paths(&rules, Access::ReadWrite).last(), Some(&workspace));
        let read = paths(&rules, Access::Read);
        assert!(read.contains(&bundled), "{read:?}");
        assert!(read.contains(&PathBuf::from("/usr")), "{read:?}");
        // Nothing grants the home, or anything above it, as a whole.
        for rule in &rules {
            assert!(
                !home.starts_with(&rule.path),
                "{} would expose the home",
                rule.path.display()
            );
        }
    }

    #[test]
    fn a_system_directory_holding_the_home_is_granted_around_it() {
        let root = tempfile::tempdir().unwrap();
        let root = canonical(root.path());
        let system = root.join("var");
        let home = system.join("lib/squidbot");
        let sibling = system.join("lib/dpkg");
        let config = system.join("etc-squidbot/squidbot.yaml");
        for dir in [&home.join("workspace"), &sibling, &system.join("cache")] {
            std::fs::create_dir_all(dir).unwrap();
        }
        std::fs::create_dir_all(config.parent().unwrap()).unwrap();
        std::fs::write(&config, "secret").unwrap();
        std::fs::write(system.join("etc-squidbot/other.conf"), "").unwrap();
        let system_str = system.to_str().unwrap();
        let rules = rules_for(
            &[system_str],
            &home.join("workspace"),
            &[],
            &[home.clone(), config.clone()],
        )
        .unwrap();
        let mut read = paths(&rules, Access::Read);
        read.retain(|path| path.starts_with(&root));
        read.sort();
        assert_eq!(
            read,
            [
                system.join("cache"),
                system.join("etc-squidbot/other.conf"),
                sibling,
            ]
        );
    }

    #[test]
    fn a_workspace_holding_the_home_is_refused() {
        let root = tempfile::tempdir().unwrap();
        let home = root.path().join("home");
        std::fs::create_dir_all(&home).unwrap();
        let error = rules_for(&[], root.path(), &[], &[home]).unwrap_err();
        assert!(
            matches!(error, JailUnavailable::WorkspaceHoldsHidden { .. }),
            "{error}"
        );
        let error = rules_for(&[], root.path(), &[], &[root.path().to_owned()]).unwrap_err();
        assert!(
            error.to_string().contains("tools.shell.sandbox: off"),
            "{error}"
        );
    }
}
