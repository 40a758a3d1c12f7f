//! squidbot's files are the owner's alone: the config may hold keys, the home holds every
//! conversation, MEMORY.md, usage and the Matrix store.
//!
//! Two measures, so no umask and no earlier version can leave them readable by other users:
//! every squidbot process starts with umask `077` ([`restrict_umask`]), so whatever it creates
//! (sessions, the ledger, the store, attachments, a config written by `onboard`, and what
//! shell commands create) is `0600` or `0700`; and at start the home directory and the config
//! file themselves are narrowed to `0700` and `0600` when something left them open
//! ([`narrow_home`]), which closes everything beneath the home at once.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use squidbot::config::LoadedConfig;

/// Files and directories the process creates are its user's alone.
pub fn restrict_umask() {
    // SAFETY: umask takes an integer and cannot fail.
    unsafe {
        libc::umask(0o077);
    }
}

/// Narrows the home directory to `0700` and the config file to `0600` when group or others
/// may read them, saying so once.
pub fn narrow_home(loaded: &LoadedConfig) {
    narrow(&loaded.home, 0o700);
    narrow(&loaded.path, 0o600);
}

fn narrow(path: &Path, mode: u32) {
    let Ok(meta) = std::fs::metadata(path) else {
        return;
    };
    let current = meta.permissions().mode() & 0o777;
    if current & 0o077 == 0 {
        return;
    }
    match std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)) {
        Ok(()) => tracing::warn!(
            path = %path.display(),
            from = format!("{current:o}"),
            to = format!("{mode:o}"),
            "Other users could read this; narrowed it to its owner."
        ),
        Err(error) => tracing::warn!(
            path = %path.display(),
            error = %error,
            "Other users can read this and it could not be narrowed; fix its mode."
        ),
    }
}
