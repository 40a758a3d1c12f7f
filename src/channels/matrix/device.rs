//! The bot's device id, per home.
//!
//! Every home once logged in as device `SQUIDBOT01`: two homes on one account (a laptop and a
//! server, a test and the real one) then shared one device id with two crypto stores, and
//! each broke the other's encryption. A home without a configured `device_id` now chooses one
//! at its first login and keeps it in its Matrix store; a store made before keeps the old one.

use std::path::Path;

/// The device id every home used before each chose its own.
pub const LEGACY_DEVICE_ID: &str = "SQUIDBOT01";

/// The device id to log in with: `configured` when set, else the one kept in `store_dir`
/// (`device_id`), else `SQUIDBOT01` for a store made before that file, else a new random one,
/// saved before it is used.
pub fn device_id(configured: &str, store_dir: &Path) -> std::io::Result<String> {
    if !configured.is_empty() {
        return Ok(configured.to_owned());
    }
    let path = store_dir.join("device_id");
    match std::fs::read_to_string(&path) {
        Ok(id) if !id.trim().is_empty() => return Ok(id.trim().to_owned()),
        Ok(_) => {}
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {}
        Err(error) => return Err(error),
    }
    let made_before = std::fs::read_dir(store_dir)?
        .any(|entry| entry.is_ok_and(|e| e.file_name() != "device_id"));
    let id = if made_before {
        LEGACY_DEVICE_ID.to_owned()
    } else {
        let suffix: String = std::iter::repeat_with(fastrand::uppercase)
            .take(10)
            .collect();
        format!("SQUIDBOT{suffix}")
    };
    crate::storage::atomic::write(&path, id.as_bytes())?;
    Ok(id)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_home_keeps_its_own_device_and_old_stores_keep_theirs() {
        let (one, two, old) = (
            tempfile::tempdir().unwrap(),
            tempfile::tempdir().unwrap(),
            tempfile::tempdir().unwrap(),
        );
        let first = device_id("", one.path()).unwrap();
        assert!(
            first.starts_with("SQUIDBOT") && first.len() == 18,
            "{first}"
        );
        assert_eq!(device_id("", one.path()).unwrap(), first);
        assert_ne!(device_id("", two.path()).unwrap(), first);
        std::fs::write(old.path().join("matrix-sdk-crypto.sqlite3"), b"").unwrap();
        assert_eq!(device_id("", old.path()).unwrap(), LEGACY_DEVICE_ID);
        assert_eq!(device_id("MYBOT", one.path()).unwrap(), "MYBOT");
    }
}
