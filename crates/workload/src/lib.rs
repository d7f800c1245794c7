//! numalab-workload
