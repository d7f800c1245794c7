//! Identifiers. Plain integer aliases keep hot loops free of conversions; the names say which
//! space a number lives in.

/// A NUMA node, numbered as Linux does (CPU nodes socket-major, CPU-less nodes after them).
pub type NodeId = u16;
/// A logical CPU (hardware thread), numbered node-major: all CPUs of node 0 first.
pub type CpuId = u32;
/// A workload thread, numbered from 0 inside one simulated process; thread 0 is the master.
pub type ThreadId = u32;
/// Index of a base page inside one address space (`address >> page_shift`).
pub type PageIdx = u64;
