//! Readers of `/proc`: maps, numa_maps, sched NUMA statistics, vmstat and kernel settings.

pub mod maps;
pub mod numa_maps;
pub mod sched;
pub mod settings;
pub mod stat;
pub mod vmstat;
