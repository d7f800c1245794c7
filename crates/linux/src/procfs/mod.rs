//! Readers of `/proc`: maps, numa_maps, the OpenMP runtime a process loaded, sched NUMA
//! statistics, vmstat and kernel settings.

pub mod maps;
pub mod numa_maps;
pub mod openmp;
pub mod sched;
pub mod settings;
pub mod stat;
pub mod vmstat;
