//! numalab-sim
