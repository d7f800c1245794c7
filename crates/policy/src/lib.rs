//! numalab-policy
