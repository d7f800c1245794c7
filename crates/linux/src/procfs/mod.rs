//! Readers of `/proc`: numa_maps, sched NUMA statistics, vmstat and kernel settings.

pub mod numa_maps;
pub mod sched;
pub mod settings;
pub mod vmstat;
