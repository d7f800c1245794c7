//! Shared by the report tests: the checked-in result documents (tests/data, made by
//! tests/data/regen.sh with the real CLI).

#![allow(dead_code)]

use std::path::{Path, PathBuf};

pub fn data(name: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests").join("data").join(name).display().to_string()
}

pub fn golden_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests").join("golden")
}

pub fn read(name: &str) -> String {
    std::fs::read_to_string(data(name)).unwrap()
}
