//! Dynamic placement policies: they move pages and threads while the program runs.

pub mod autonuma;
