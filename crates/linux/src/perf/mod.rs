//! `perf_event_open(2)` counting (perfutil §7): attribute encoding, group open and
//! `PERF_FORMAT_GROUP` reads, errno classification, the per-event capability probe, and
//! counter sets over threads or CPUs.

pub mod classify;
pub mod counters;
pub mod encoding;
pub mod read;
pub mod sys;
