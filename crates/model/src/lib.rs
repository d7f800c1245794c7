//! numalab-model
