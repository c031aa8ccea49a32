//! The process allocator: jemalloc, tuned to hand memory back.
//!
//! Why: glibc's malloc keeps per-thread arenas whose freed pages stay
//! resident, so RSS after thousands of streams close stayed near its peak,
//! and its size classes waste more per connection buffer. jemalloc packs
//! the per-stream buffers tighter and, with a background thread purging
//! dirty pages after a second, returns them to the kernel soon after the
//! streams end (figures in bench/results: "5000 concurrent open streams").
//! Its options are compiled in from `.cargo/config.toml`.

#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;
