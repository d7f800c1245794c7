//! numalab-linux
