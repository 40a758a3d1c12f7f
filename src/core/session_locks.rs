//! Per-session mutexes: one session's turns run one at a time, different sessions in parallel.
//!
//! The registry maps a session id to a weak handle of its mutex, so a mutex lives exactly as
//! long as someone holds or waits on it. Dead entries are swept whenever the map has doubled
//! since the last sweep, which keeps the map proportional to the sessions in use (not to every
//! session ever seen) at amortised O(1) cost per acquisition.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};

use tokio::sync::{Mutex as AsyncMutex, OwnedMutexGuard};

use super::session::SessionId;

/// Proof that the holder has exclusive use of one session's history, cursor and summary.
pub type SessionGuard = OwnedMutexGuard<()>;

/// The registry of per-session mutexes.
#[derive(Debug, Default)]
pub struct SessionLocks {
    /// A std mutex: it is held only for a map lookup, never across an await.
    inner: Mutex<Registry>,
}

#[derive(Debug, Default)]
struct Registry {
    locks: HashMap<SessionId, Weak<AsyncMutex<()>>>,
    sweep_at: usize,
}

impl SessionLocks {
    /// An empty registry.
    pub fn new() -> Self {
        Self::default()
    }

    /// Waits for exclusive use of `session`; waiters are served in arrival order (tokio's mutex
    /// is fair), which is what keeps one session's messages in order.
    pub async fn lock(&self, session: &SessionId) -> SessionGuard {
        let mutex = self.handle(session);
        mutex.lock_owned().await
    }

    /// How many sessions currently have a live mutex (held or awaited).
    pub fn live(&self) -> usize {
        let registry = self
            .inner
            .lock()
            .unwrap_or_else(|poison| poison.into_inner());
        registry
            .locks
            .values()
            .filter(|w| w.strong_count() > 0)
            .count()
    }

    /// How many entries the map holds, dead ones included (for tests of boundedness).
    pub fn entries(&self) -> usize {
        let registry = self
            .inner
            .lock()
            .unwrap_or_else(|poison| poison.into_inner());
        registry.locks.len()
    }

    fn handle(&self, session: &SessionId) -> Arc<AsyncMutex<()>> {
        let mut registry = self
            .inner
            .lock()
            .unwrap_or_else(|poison| poison.into_inner());
        if let Some(existing) = registry.locks.get(session).and_then(Weak::upgrade) {
            return existing;
        }
        let mutex = Arc::new(AsyncMutex::new(()));
        registry
            .locks
            .insert(session.clone(), Arc::downgrade(&mutex));
        if registry.locks.len() >= registry.sweep_at {
            registry.locks.retain(|_, weak| weak.strong_count() > 0);
            registry.sweep_at = (registry.locks.len() * 2).max(64);
        }
        mutex
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn map_stays_bounded_when_sessions_come_and_go() {
        let locks = SessionLocks::new();
        for n in 0..10_000 {
            let id = SessionId::new("http", &n.to_string()).unwrap();
            let _guard = locks.lock(&id).await;
        }
        assert!(locks.entries() <= 128, "entries = {}", locks.entries());
        assert_eq!(locks.live(), 0);
    }

    #[tokio::test]
    async fn same_session_is_exclusive() {
        let locks = Arc::new(SessionLocks::new());
        let id = SessionId::cli_local();
        let guard = locks.lock(&id).await;
        let other = locks.clone();
        let id2 = id.clone();
        let waiter = tokio::spawn(async move { other.lock(&id2).await });
        tokio::task::yield_now().await;
        assert!(!waiter.is_finished());
        drop(guard);
        waiter.await.unwrap();
    }
}
