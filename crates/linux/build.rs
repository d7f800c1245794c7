//! Builds the hinting-fault library (`shim/numalab_hint.c`, docs/live.md "The hinting-fault
//! sampler") with the system C compiler; the agent embeds the result and hands it to the
//! program it launches, so numalab stays one file. C rather than a Rust cdylib: a cdylib
//! cannot be another crate's build input on stable Cargo, and the library's signal handler
//! must run nothing but async-signal-safe calls, which C states plainly. Without a C compiler
//! the library is empty and the sampler says it was not built.
use std::path::PathBuf;
use std::process::Command;

fn main() {
    println!("cargo::rerun-if-env-changed=CC");
    build("shim/numalab_hint.c", "libnumalab_hint.so", "the hinting-fault sampler");
    // The round-1g library (docs/live.md, "round-1g for launched programs").
    build("shim/numalab_r1g.c", "libnumalab_r1g.so", "`numalab run --policy round-1g`");
}

fn build(src: &str, lib: &str, what: &str) {
    println!("cargo::rerun-if-changed={src}");
    let out = PathBuf::from(std::env::var("OUT_DIR").expect("OUT_DIR")).join(lib);
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let built = Command::new(&cc)
        .args(["-shared", "-fPIC", "-O2", "-Wall", "-Wextra", "-o"])
        .arg(&out)
        .arg(src)
        .args(["-ldl", "-pthread"])
        .status()
        .map(|s| s.success())
        .unwrap_or(false);
    if !built {
        println!("cargo::warning=could not build {src} with `{cc}`: {what} will be unavailable");
        std::fs::write(&out, b"").expect("write the empty library");
    }
}
