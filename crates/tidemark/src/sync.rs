//! Locks and atomics for the write gate and the version store: parking_lot
//! and std normally, loom's model-checked ones under `cfg(loom)` (same
//! parking_lot-style API: `lock()` returns the guard, `Condvar::wait`
//! takes it by `&mut`).

#[cfg(not(loom))]
pub(crate) use parking_lot::{Condvar, Mutex, RwLock, RwLockReadGuard, RwLockWriteGuard};
#[cfg(not(loom))]
pub(crate) use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize};

#[cfg(loom)]
pub(crate) use loom::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize};

/// Marks a store-then-load pair whose order the protocol needs (the
/// gate's slot counter against its `closing` flag, a snapshot's `active`
/// count against the gate). The accesses are `SeqCst`, which already
/// orders them; loom models `SeqCst` accesses only as acquire/release but
/// does model `SeqCst` fences, so under loom this is a fence, and
/// otherwise nothing.
pub(crate) fn seqcst_point() {
    #[cfg(loom)]
    loom::sync::atomic::fence(std::sync::atomic::Ordering::SeqCst);
}

/// Lets a waiting loop give way: a CPU hint normally, a scheduling point
/// for loom.
pub(crate) fn relax(spins: u32) {
    #[cfg(not(loom))]
    {
        if spins < 100 {
            std::hint::spin_loop();
        } else {
            std::thread::yield_now();
        }
    }
    #[cfg(loom)]
    {
        let _ = spins;
        loom::thread::yield_now();
    }
}

/// Gives the processor to another thread (a scheduling point for loom).
pub(crate) fn yield_now() {
    #[cfg(not(loom))]
    std::thread::yield_now();
    #[cfg(loom)]
    loom::thread::yield_now();
}

#[cfg(loom)]
mod model {
    use std::ops::{Deref, DerefMut};

    /// A poisoned lock means a model thread panicked; the model fails
    /// anyway, so the inner value is used.
    pub(crate) struct Mutex<T>(loom::sync::Mutex<T>);

    pub(crate) struct MutexGuard<'a, T>(Option<loom::sync::MutexGuard<'a, T>>);

    impl<T> Mutex<T> {
        pub(crate) fn new(t: T) -> Self {
            Mutex(loom::sync::Mutex::new(t))
        }
        pub(crate) fn lock(&self) -> MutexGuard<'_, T> {
            MutexGuard(Some(self.0.lock().unwrap_or_else(|e| e.into_inner())))
        }
    }

    impl<T: Default> Default for Mutex<T> {
        fn default() -> Self {
            Mutex::new(T::default())
        }
    }

    impl<T> Deref for MutexGuard<'_, T> {
        type Target = T;
        fn deref(&self) -> &T {
            // Only `Condvar::wait` empties it, and refills it before it
            // returns.
            self.0.as_ref().expect("guard held")
        }
    }

    impl<T> DerefMut for MutexGuard<'_, T> {
        fn deref_mut(&mut self) -> &mut T {
            self.0.as_mut().expect("guard held")
        }
    }

    pub(crate) struct Condvar(loom::sync::Condvar);

    impl Condvar {
        pub(crate) fn new() -> Self {
            Condvar(loom::sync::Condvar::new())
        }
        pub(crate) fn wait<T>(&self, g: &mut MutexGuard<'_, T>) {
            let inner = g.0.take().expect("guard held");
            g.0 = Some(self.0.wait(inner).unwrap_or_else(|e| e.into_inner()));
        }
        pub(crate) fn notify_one(&self) {
            self.0.notify_one();
        }
        pub(crate) fn notify_all(&self) {
            self.0.notify_all();
        }
    }

    pub(crate) struct RwLock<T>(loom::sync::RwLock<T>);

    impl<T> RwLock<T> {
        pub(crate) fn new(t: T) -> Self {
            RwLock(loom::sync::RwLock::new(t))
        }
        pub(crate) fn read(&self) -> loom::sync::RwLockReadGuard<'_, T> {
            self.0.read().unwrap_or_else(|e| e.into_inner())
        }
        pub(crate) fn write(&self) -> loom::sync::RwLockWriteGuard<'_, T> {
            self.0.write().unwrap_or_else(|e| e.into_inner())
        }
        pub(crate) fn try_write(&self) -> Option<loom::sync::RwLockWriteGuard<'_, T>> {
            match self.0.try_write() {
                Ok(g) => Some(g),
                Err(std::sync::TryLockError::Poisoned(e)) => Some(e.into_inner()),
                Err(std::sync::TryLockError::WouldBlock) => None,
            }
        }
    }
}

#[cfg(loom)]
pub(crate) use loom::sync::{RwLockReadGuard, RwLockWriteGuard};
#[cfg(loom)]
pub(crate) use model::{Condvar, Mutex, RwLock};
