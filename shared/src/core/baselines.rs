//! The code paths Floe replaced, kept per catalog so that `floe-bench` can measure each beside
//! the path that replaced it in one run. All are off, and only the `bench` feature (which only
//! the bench crate enables) has the setters: no production build can turn one on, and a test
//! that could would change its own catalog, never another's.

#[cfg(feature = "bench")]
use std::sync::atomic::{AtomicBool, Ordering};

/// Which replaced code paths one catalog takes.
#[derive(Debug, Default)]
pub struct Baselines {
    /// Commits write their whole metadata file instead of splicing it from the base file's
    /// bytes (the bytes are the same).
    #[cfg(feature = "bench")]
    full_rewrite: AtomicBool,
    /// Table answers are compressed per request (the compression layer's way) instead of
    /// from the cache.
    #[cfg(feature = "bench")]
    compress_per_request: AtomicBool,
    /// Changes number their events on the org's counter in their own write, as before the
    /// sequencer (those events carry no `entity-sequence`).
    #[cfg(feature = "bench")]
    number_on_write: AtomicBool,
}

#[cfg(feature = "bench")]
impl Baselines {
    pub fn full_rewrite(&self) -> bool {
        self.full_rewrite.load(Ordering::Relaxed)
    }
    pub fn compress_per_request(&self) -> bool {
        self.compress_per_request.load(Ordering::Relaxed)
    }
    pub fn number_on_write(&self) -> bool {
        self.number_on_write.load(Ordering::Relaxed)
    }
    pub fn set_full_rewrite(&self, on: bool) {
        self.full_rewrite.store(on, Ordering::Relaxed);
    }
    pub fn set_compress_per_request(&self, on: bool) {
        self.compress_per_request.store(on, Ordering::Relaxed);
    }
    pub fn set_number_on_write(&self, on: bool) {
        self.number_on_write.store(on, Ordering::Relaxed);
    }
}

#[cfg(not(feature = "bench"))]
impl Baselines {
    pub const fn full_rewrite(&self) -> bool {
        false
    }
    pub const fn compress_per_request(&self) -> bool {
        false
    }
    pub const fn number_on_write(&self) -> bool {
        false
    }
}
