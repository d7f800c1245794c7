//! Which OpenMP runtime a process loaded (`/proc/PID/maps`) and how its environment
//! (`/proc/PID/environ`) sets the runtime's barrier wait, turned into the simulator settings
//! that stand for it (docs/profile.md, "The OpenMP runtime"; the wait policies:
//! docs/scheduler.md, "Barrier waits: spin, then sleep").

use crate::root::FsRoot;
use numalab_core::profile::OpenMp;
use std::collections::BTreeMap;
use std::io::Read;

/// The environment variables that set a runtime's wait, recorded as the process has them.
pub const WAIT_VARIABLES: [&str; 5] = ["OMP_WAIT_POLICY", "GOMP_SPINCOUNT", "KMP_BLOCKTIME", "KMP_LIBRARY", "OMP_NUM_THREADS"];

/// Largest `environ` read: the kernel caps the initial environment far below this.
const MAX_ENVIRON_BYTES: u64 = 4 << 20;

/// The runtime of process `pid` and its wait settings; `None` when the process has no OpenMP
/// runtime mapped (not an OpenMP program, or one linked statically) or is gone.
pub fn read(root: &FsRoot, pid: u32) -> Option<OpenMp> {
    let (_, maps) = root.read(&format!("/proc/{pid}/maps")).ok()?;
    let mut environ = Vec::new();
    if let Ok(f) = std::fs::File::open(root.path(&format!("/proc/{pid}/environ"))) {
        // Unreadable (another user's process) leaves the environment empty: the runtime's
        // defaults are then reported, with a note in `unrepresented`.
        let _ = f.take(MAX_ENVIRON_BYTES).read_to_end(&mut environ);
    }
    from_text(&maps, &environ)
}

/// [`read`] on the text of `maps` and the bytes of `environ` (NUL-separated `KEY=VALUE`).
pub fn from_text(maps: &str, environ: &[u8]) -> Option<OpenMp> {
    let (runtime, library) = maps.lines().find_map(|line| {
        let path = line.split_whitespace().nth(5)?;
        let file = path.rsplit('/').next()?;
        let runtime = ["libgomp", "libomp", "libiomp5"].into_iter().find(|r| file.starts_with(&format!("{r}.so")))?;
        Some((runtime, path.to_string()))
    })?;
    let mut environment = BTreeMap::new();
    for entry in environ.split(|&b| b == 0) {
        let entry = String::from_utf8_lossy(entry);
        if let Some((key, value)) = entry.split_once('=') {
            if WAIT_VARIABLES.contains(&key) {
                environment.insert(key.to_string(), value.to_string());
            }
        }
    }
    let (sim_set, unrepresented) = sim_settings(runtime, &environment);
    Some(OpenMp { runtime: runtime.to_string(), library, environment, sim_set, unrepresented })
}

/// `OMP_WAIT_POLICY` as both runtimes read it: `active` or `passive`, case and surrounding
/// blanks ignored; anything else is the default.
fn wait_policy(environment: &BTreeMap<String, String>) -> Option<&'static str> {
    let v = environment.get("OMP_WAIT_POLICY")?.trim().to_ascii_lowercase();
    match v.as_str() {
        "active" => Some("active"),
        "passive" => Some("passive"),
        _ => None,
    }
}

/// The most spins the simulator's `gomp_spincount` takes: TOML integers are signed 64-bit, so
/// libgomp's "infinite" (`~0ULL`) is written as this, about 10^19 spins, which no run reaches.
const MAX_SPINS: u64 = i64::MAX as u64;

/// libgomp's `GOMP_SPINCOUNT` (its `parse_spincount`): a whole number with an optional `k`,
/// `M`, `G` or `T` suffix (thousands to 10^12), or `infinite` / `infinity`.
fn gomp_spincount(text: &str) -> Option<u64> {
    let t = text.trim();
    if t.eq_ignore_ascii_case("infinite") || t.eq_ignore_ascii_case("infinity") {
        return Some(MAX_SPINS);
    }
    let (digits, mult) = match t.char_indices().find(|(_, c)| !c.is_ascii_digit()) {
        None => (t, 1u64),
        Some((i, _)) => {
            let mult = match t[i..].trim() {
                "k" | "K" => 1_000,
                "M" => 1_000_000,
                "G" => 1_000_000_000,
                "T" => 1_000_000_000_000,
                _ => return None,
            };
            (&t[..i], mult)
        }
    };
    let n: u64 = digits.parse().ok()?;
    Some(n.saturating_mul(mult).min(MAX_SPINS))
}

/// The LLVM runtime's `KMP_BLOCKTIME` in ms: a whole number (ms), optionally with `ms` or `us`,
/// or `infinite` / `infinity` (its `KMP_MAX_BLOCKTIME`, `INT_MAX` ms).
fn kmp_blocktime_ms(text: &str) -> Option<f64> {
    let t = text.trim().to_ascii_lowercase();
    if t == "infinite" || t == "infinity" {
        return Some(i32::MAX as f64);
    }
    let (digits, scale) = if let Some(d) = t.strip_suffix("us") {
        (d, 1e-3)
    } else if let Some(d) = t.strip_suffix("ms") {
        (d, 1.0)
    } else {
        (t.as_str(), 1.0)
    };
    let n: u64 = digits.trim().parse().ok()?;
    Some((n as f64 * scale).min(i32::MAX as f64))
}

/// The `--set` settings that stand for this runtime's wait, and what the environment sets that
/// they cannot represent.
fn sim_settings(runtime: &str, environment: &BTreeMap<String, String>) -> (Vec<String>, Vec<String>) {
    let mut set = Vec::new();
    let mut unrepresented = Vec::new();
    let suffix = match wait_policy(environment) {
        Some(p) => format!("-{p}"),
        None => String::new(),
    };
    if let Some(v) = environment.get("OMP_WAIT_POLICY") {
        if wait_policy(environment).is_none() {
            unrepresented.push(format!("OMP_WAIT_POLICY={v}: neither active nor passive; the runtime's default is assumed"));
        }
    }
    if runtime == "libgomp" {
        set.push(format!("sim.sched.wait_policy=libgomp{suffix}"));
        if let Some(v) = environment.get("GOMP_SPINCOUNT") {
            match gomp_spincount(v) {
                Some(n) => set.push(format!("sim.sched.gomp_spincount={n}")),
                None => unrepresented.push(format!("GOMP_SPINCOUNT={v}: not a count libgomp reads; its default is assumed")),
            }
        }
    } else {
        set.push(format!("sim.sched.wait_policy=llvm{suffix}"));
        if let Some(v) = environment.get("KMP_BLOCKTIME") {
            match kmp_blocktime_ms(v) {
                Some(ms) => set.push(format!("sim.sched.kmp_blocktime_ms={ms}")),
                None => unrepresented.push(format!("KMP_BLOCKTIME={v}: not a time the runtime reads; its default is assumed")),
            }
        }
        if let Some(v) = environment.get("KMP_LIBRARY") {
            unrepresented.push(format!("KMP_LIBRARY={v}: the runtime's execution mode is not modelled"));
        }
    }
    (set, unrepresented)
}

/// The note on an OpenMP target: its runtime and the `--set` settings for its wait, what the
/// environment sets that they do not carry, and whether it left CPUs without a thread, which
/// lets Linux move spinning threads across nodes (docs/profile.md, "The OpenMP runtime").
pub fn note(o: &OpenMp, threads_seen: u32, cpus: usize) -> String {
    let mut note = format!(
        "openmp: {} ({}); the simulator waits at barriers as it does with {}",
        o.runtime,
        o.library,
        o.sim_set.iter().map(|s| format!("--set {s}")).collect::<Vec<_>>().join(" ")
    );
    if !o.unrepresented.is_empty() {
        note.push_str(&format!("; not carried over: {}", o.unrepresented.join("; ")));
    }
    if threads_seen > 0 && (threads_seen as usize) < cpus {
        note.push_str(&format!(
            "; it ran {threads_seen} thread{} on {cpus} CPUs it may use: with CPUs left idle Linux can move spinning threads \
             across nodes (docs/results/barrier-wait-guest.md, \"Idle CPUs\"); simulate the same shape (the machine's \
             `machine.smt`, or `--threads`)",
            if threads_seen == 1 { "" } else { "s" }
        ));
    }
    note
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_openmp_note_names_settings_not_carried_and_idle_cpus() {
        let o = OpenMp {
            runtime: "libgomp".into(),
            library: "/usr/lib/libgomp.so.1".into(),
            environment: BTreeMap::new(),
            sim_set: vec!["sim.sched.wait_policy=libgomp".into()],
            unrepresented: vec!["GOMP_SPINCOUNT=lots: not a count libgomp reads; its default is assumed".into()],
        };
        let n = note(&o, 4, 4);
        assert_eq!(
            n,
            "openmp: libgomp (/usr/lib/libgomp.so.1); the simulator waits at barriers as it does with --set \
             sim.sched.wait_policy=libgomp; not carried over: GOMP_SPINCOUNT=lots: not a count libgomp reads; its default \
             is assumed"
        );
        let n = note(&o, 32, 64);
        assert!(n.contains("; it ran 32 threads on 64 CPUs it may use: with CPUs left idle"), "{n}");
        // Threads not counted (no sample saw them): nothing said about idle CPUs.
        assert!(!note(&o, 0, 64).contains("CPUs left idle"));
    }

    /// Lines of one `/proc/PID/maps` of barrier_walk (guest/src/barrier_walk.c) on this
    /// project's host, Debian 12 with GCC 12's libgomp, as the kernel printed them (a
    /// selection: the program's first mapping, the heap, libc and libgomp's first two).
    const GOMP_MAPS: &str = "\
5648e23fd000-5648e23fe000 r--p 00000000 fe:00 10313774                   /tmp/s67/barrier_walk
5648f4fbd000-5648f4fde000 rw-p 00000000 00:00 0                          [heap]
7fe40434d000-7fe404373000 r--p 00000000 fe:00 326269                     /usr/lib/x86_64-linux-gnu/libc.so.6
7fe404373000-7fe4044c9000 r-xp 00026000 fe:00 326269                     /usr/lib/x86_64-linux-gnu/libc.so.6
7fe4044c9000-7fe40451c000 r--p 0017c000 fe:00 326269                     /usr/lib/x86_64-linux-gnu/libc.so.6
7fe40451c000-7fe404520000 r--p 001cf000 fe:00 326269                     /usr/lib/x86_64-linux-gnu/libc.so.6
7fe404520000-7fe404522000 rw-p 001d3000 fe:00 326269                     /usr/lib/x86_64-linux-gnu/libc.so.6
7fe40452f000-7fe404539000 r--p 00000000 fe:00 326474                     /usr/lib/x86_64-linux-gnu/libgomp.so.1.0.0
7fe404539000-7fe404568000 r-xp 0000a000 fe:00 326474                     /usr/lib/x86_64-linux-gnu/libgomp.so.1.0.0
";

    fn environ(pairs: &[&str]) -> Vec<u8> {
        let mut v = Vec::new();
        for p in pairs {
            v.extend_from_slice(p.as_bytes());
            v.push(0);
        }
        v
    }

    #[test]
    fn libgomp_with_no_settings_is_the_libgomp_policy() {
        let o = from_text(GOMP_MAPS, &environ(&["PATH=/usr/bin", "HOME=/root"])).unwrap();
        assert_eq!(o.runtime, "libgomp");
        assert_eq!(o.library, "/usr/lib/x86_64-linux-gnu/libgomp.so.1.0.0");
        assert!(o.environment.is_empty());
        assert_eq!(o.sim_set, ["sim.sched.wait_policy=libgomp"]);
        assert!(o.unrepresented.is_empty());
    }

    #[test]
    fn libgomp_settings_become_the_policy_and_the_count() {
        let env = environ(&["OMP_WAIT_POLICY= Passive ", "GOMP_SPINCOUNT=20k", "OMP_NUM_THREADS=4"]);
        let o = from_text(GOMP_MAPS, &env).unwrap();
        assert_eq!(o.sim_set, ["sim.sched.wait_policy=libgomp-passive", "sim.sched.gomp_spincount=20000"]);
        assert_eq!(o.environment["OMP_NUM_THREADS"], "4");
        let o = from_text(GOMP_MAPS, &environ(&["GOMP_SPINCOUNT=infinite", "OMP_WAIT_POLICY=active"])).unwrap();
        assert_eq!(o.sim_set, ["sim.sched.wait_policy=libgomp-active", "sim.sched.gomp_spincount=9223372036854775807"]);
        // What libgomp would refuse is named, and its default kept.
        let o = from_text(GOMP_MAPS, &environ(&["GOMP_SPINCOUNT=lots", "OMP_WAIT_POLICY=eager"])).unwrap();
        assert_eq!(o.sim_set, ["sim.sched.wait_policy=libgomp"]);
        assert_eq!(o.unrepresented.len(), 2, "{:?}", o.unrepresented);
        assert!(o.unrepresented[0].starts_with("OMP_WAIT_POLICY=eager"), "{:?}", o.unrepresented);
        assert!(o.unrepresented[1].starts_with("GOMP_SPINCOUNT=lots"), "{:?}", o.unrepresented);
    }

    #[test]
    fn the_llvm_and_intel_runtimes_take_their_blocktime() {
        // Lines in the kernel's format, written for the test (no such runtime on this host).
        let maps = "7f00-7f10 r-xp 00000000 08:01 42 /opt/llvm/lib/libomp.so\n";
        let o = from_text(maps, &environ(&["KMP_BLOCKTIME=0"])).unwrap();
        assert_eq!(
            (o.runtime.as_str(), o.sim_set.clone()),
            ("libomp", vec!["sim.sched.wait_policy=llvm".to_string(), "sim.sched.kmp_blocktime_ms=0".into()])
        );
        let maps = "7f00-7f10 r-xp 00000000 08:01 42 /opt/intel/lib/libiomp5.so\n";
        let o = from_text(maps, &environ(&["KMP_BLOCKTIME=500us", "KMP_LIBRARY=turnaround"])).unwrap();
        assert_eq!(o.runtime, "libiomp5");
        assert_eq!(o.sim_set, ["sim.sched.wait_policy=llvm", "sim.sched.kmp_blocktime_ms=0.5"]);
        assert_eq!(o.unrepresented, ["KMP_LIBRARY=turnaround: the runtime's execution mode is not modelled"]);
        let o = from_text(maps, &environ(&["KMP_BLOCKTIME=infinite", "OMP_WAIT_POLICY=passive"])).unwrap();
        assert_eq!(o.sim_set, ["sim.sched.wait_policy=llvm-passive", "sim.sched.kmp_blocktime_ms=2147483647"]);
    }

    #[test]
    fn a_process_without_a_runtime_has_none() {
        let maps = "7f00-7f10 r-xp 00000000 08:01 42 /usr/lib/x86_64-linux-gnu/libgompfoo.so\n\
                    7f10-7f20 r-xp 00000000 08:01 43 /usr/lib/x86_64-linux-gnu/libc.so.6\n\
                    7f20-7f30 rw-p 00000000 00:00 0\n";
        assert_eq!(from_text(maps, &environ(&["OMP_WAIT_POLICY=active"])), None);
        assert_eq!(from_text("", &[]), None);
    }

    #[test]
    fn counts_and_times_parse_as_the_runtimes_read_them() {
        assert_eq!(gomp_spincount("300000"), Some(300_000));
        assert_eq!(gomp_spincount(" 3M "), Some(3_000_000));
        assert_eq!(gomp_spincount("2T"), Some(2_000_000_000_000));
        assert_eq!(gomp_spincount("99999999999T"), Some(MAX_SPINS));
        assert_eq!(gomp_spincount("1.5k"), None);
        assert_eq!(gomp_spincount("-1"), None);
        assert_eq!(kmp_blocktime_ms("200"), Some(200.0));
        assert_eq!(kmp_blocktime_ms("20ms"), Some(20.0));
        assert_eq!(kmp_blocktime_ms("Infinite"), Some(i32::MAX as f64));
        assert_eq!(kmp_blocktime_ms("fast"), None);
    }
}
