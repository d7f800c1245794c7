//! Readers of `/sys`: NUMA nodes, memory tiers, CPU topology and uncore memory-controller PMUs.

pub mod cpu;
pub mod node;
pub mod tiers;
pub mod uncore;
