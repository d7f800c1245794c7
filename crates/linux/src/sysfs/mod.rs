//! Readers of `/sys`: NUMA nodes, memory tiers and CPU topology.

pub mod cpu;
pub mod node;
pub mod tiers;
