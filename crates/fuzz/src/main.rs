//! `numalab-fuzz TARGET|all [--seconds N] [--seed S] [--corpus DIR] [--crashes DIR] [--hang-seconds H]`
//!
//! Deterministic mutation fuzzing on stable Rust: seed inputs from `corpus/<target>/` are
//! mutated with a seeded ChaCha stream (byte flips, insertions, deletions, splices, numeric
//! edge values, duplicated lines) and fed to the target under `catch_unwind`. An input that
//! panics is saved to `crashes/<target>/` and counted; the exit status is 1 if any did.
//! Same seed and corpus give the same inputs (the number tried depends on the time given).
//! An input that keeps the target busy for `--hang-seconds` (default 10) is a hang: a watchdog
//! saves it to `crashes/<target>/hang-*` and the run stops with status 1 (a hung call cannot be
//! abandoned from inside the process).

use numalab_fuzz::{target, TARGETS};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

const INTERESTING: &[&str] = &[
    "0",
    "-1",
    "1",
    "nan",
    "inf",
    "-inf",
    "1e308",
    "1e-308",
    "1e12",
    "-0.0",
    "4294967295",
    "4294967296",
    "18446744073709551615",
    "9223372036854775807",
    "9223372036854775808",
    "9007199254740992",
    "\"\"",
    "[]",
    "{}",
    "0-4294967295",
    "0-1,0-1",
    "kB",
    "\u{0}",
    "[[phase]]",
    "[[region]]",
    "[[nodes]]",
];

fn mutate(rng: &mut ChaCha8Rng, input: &[u8], pool: &[Vec<u8>]) -> Vec<u8> {
    let mut v = input.to_vec();
    for _ in 0..rng.random_range(1..=4) {
        let len = v.len();
        match rng.random_range(0..8) {
            0 if len > 0 => {
                let i = rng.random_range(0..len);
                v[i] ^= 1 << rng.random_range(0..8);
            }
            1 if len > 0 => {
                let i = rng.random_range(0..len);
                v[i] = rng.random();
            }
            2 if len > 0 => {
                let a = rng.random_range(0..len);
                let b = (a + rng.random_range(1..=16)).min(len);
                v.drain(a..b);
            }
            3 => {
                let i = rng.random_range(0..=len);
                let s = INTERESTING[rng.random_range(0..INTERESTING.len())].as_bytes();
                v.splice(i..i, s.iter().copied());
            }
            4 => {
                // Replace a number with an edge value.
                let starts: Vec<usize> = (0..len).filter(|&i| v[i].is_ascii_digit() && (i == 0 || !v[i - 1].is_ascii_digit())).collect();
                if let Some(&s) = starts.get(rng.random_range(0..starts.len().max(1))) {
                    let mut e = s;
                    while e < len && (v[e].is_ascii_digit() || v[e] == b'.' || v[e] == b'e') {
                        e += 1;
                    }
                    let s2 = INTERESTING[rng.random_range(0..16)].as_bytes();
                    v.splice(s..e, s2.iter().copied());
                }
            }
            5 if !pool.is_empty() => {
                // Splice a piece of another seed.
                let other = &pool[rng.random_range(0..pool.len())];
                if !other.is_empty() {
                    let a = rng.random_range(0..other.len());
                    let b = (a + rng.random_range(1..=64)).min(other.len());
                    let i = rng.random_range(0..=len);
                    v.splice(i..i, other[a..b].iter().copied());
                }
            }
            6 => {
                // Duplicate a line.
                let lines: Vec<&[u8]> = v.split(|&b| b == b'\n').collect();
                if !lines.is_empty() {
                    let l = lines[rng.random_range(0..lines.len())].to_vec();
                    let i = rng.random_range(0..=len);
                    let mut ins = l;
                    ins.push(b'\n');
                    v.splice(i..i, ins);
                }
            }
            _ => {
                let i = rng.random_range(0..=len);
                v.insert(i, rng.random_range(0x20..0x7f));
            }
        }
    }
    v.truncate(1 << 20);
    v
}

fn seeds(dir: &Path) -> Vec<Vec<u8>> {
    let mut files: Vec<PathBuf> =
        std::fs::read_dir(dir).map(|rd| rd.filter_map(|e| e.ok()).map(|e| e.path()).collect()).unwrap_or_default();
    files.sort();
    let mut out: Vec<Vec<u8>> = files.iter().filter_map(|p| std::fs::read(p).ok()).collect();
    if out.is_empty() {
        out.push(Vec::new());
    }
    out
}

struct Outcome {
    execs: u64,
    ok: u64,
    crashes: u64,
}

/// Saves the input under test if one call takes longer than `limit`, then ends the process.
struct Watchdog {
    input: Mutex<Vec<u8>>,
    execs: AtomicU64,
    done: AtomicBool,
}

impl Watchdog {
    fn watch(&self, name: &str, seed: u64, crashes: &Path, limit: Duration) {
        let (mut seen, mut since) = (u64::MAX, Instant::now());
        while !self.done.load(Ordering::Relaxed) {
            std::thread::sleep(Duration::from_millis(200));
            let now = self.execs.load(Ordering::Relaxed);
            if now != seen {
                (seen, since) = (now, Instant::now());
            } else if since.elapsed() >= limit {
                let dir = crashes.join(name);
                let _ = std::fs::create_dir_all(&dir);
                let p = dir.join(format!("hang-{seed}-{now}"));
                let input = self.input.lock().unwrap_or_else(|e| e.into_inner()).clone();
                let _ = std::fs::write(&p, input);
                eprintln!("{name}: input {now} has run for {:.0} s; saved to {}", limit.as_secs_f64(), p.display());
                std::process::exit(1);
            }
        }
    }
}

fn fuzz(name: &str, secs: f64, seed: u64, corpus: &Path, crashes: &Path, hang: Duration) -> Outcome {
    let t = target(name).expect("known target");
    let pool = seeds(&corpus.join(name));
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ name.bytes().fold(0u64, |h, b| h.wrapping_mul(31).wrapping_add(b as u64)));
    let deadline = Instant::now() + Duration::from_secs_f64(secs);
    let mut o = Outcome { execs: 0, ok: 0, crashes: 0 };
    let mut last_report = Instant::now();
    let dog = Watchdog { input: Mutex::new(Vec::new()), execs: AtomicU64::new(0), done: AtomicBool::new(false) };
    std::thread::scope(|s| {
        s.spawn(|| dog.watch(name, seed, crashes, hang));
        while Instant::now() < deadline {
            let base = &pool[rng.random_range(0..pool.len())];
            let input = if o.execs < pool.len() as u64 { pool[o.execs as usize].clone() } else { mutate(&mut rng, base, &pool) };
            o.execs += 1;
            dog.input.lock().unwrap_or_else(|e| e.into_inner()).clone_from(&input);
            dog.execs.store(o.execs, Ordering::Relaxed);
            match std::panic::catch_unwind(|| (t.run)(&input)) {
                Ok(Ok(())) => o.ok += 1,
                Ok(Err(_)) => {}
                Err(_) => {
                    o.crashes += 1;
                    let dir = crashes.join(name);
                    let _ = std::fs::create_dir_all(&dir);
                    let p = dir.join(format!("crash-{seed}-{}", o.execs));
                    let _ = std::fs::write(&p, &input);
                    eprintln!("{name}: panic on input saved to {}", p.display());
                }
            }
            if last_report.elapsed() > Duration::from_secs(10) {
                eprintln!("{name}: {} execs, {} accepted, {} crashes", o.execs, o.ok, o.crashes);
                last_report = Instant::now();
            }
        }
        dog.done.store(true, Ordering::Relaxed);
    });
    o
}

fn main() -> std::process::ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let usage = || {
        eprintln!(
            "usage: numalab-fuzz TARGET|all [--seconds N] [--seed S] [--corpus DIR] [--crashes DIR] [--hang-seconds H]\ntargets: {}",
            TARGETS.iter().map(|t| t.name).collect::<Vec<_>>().join(", ")
        );
        std::process::ExitCode::from(2)
    };
    let Some(which) = args.first() else { return usage() };
    // `numalab-fuzz TARGET --replay FILE...`: run inputs once and print each outcome.
    if args.get(1).map(String::as_str) == Some("--replay") {
        let Some(t) = target(which) else { return usage() };
        for f in &args[2..] {
            let data = std::fs::read(f).unwrap_or_default();
            match std::panic::catch_unwind(|| (t.run)(&data)) {
                Ok(Ok(())) => println!("{f}: accepted"),
                Ok(Err(e)) => println!("{f}: error: {e}"),
                Err(_) => println!("{f}: PANIC"),
            }
        }
        return std::process::ExitCode::SUCCESS;
    }
    let (mut secs, mut seed, mut hang) = (60.0, 1u64, Duration::from_secs(10));
    let here = Path::new(env!("CARGO_MANIFEST_DIR"));
    let (mut corpus, mut crashes) = (here.join("corpus"), here.join("crashes"));
    let mut i = 1;
    while i < args.len() {
        let val = args.get(i + 1).cloned().unwrap_or_default();
        match args[i].as_str() {
            "--seconds" => match val.parse::<f64>() {
                Ok(s) if s > 0.0 && s.is_finite() => secs = s,
                _ => return usage(),
            },
            "--seed" => match val.parse() {
                Ok(s) => seed = s,
                _ => return usage(),
            },
            "--hang-seconds" => match val.parse::<f64>() {
                Ok(h) if h > 0.0 && h.is_finite() => hang = Duration::from_secs_f64(h),
                _ => return usage(),
            },
            "--corpus" => corpus = PathBuf::from(val),
            "--crashes" => crashes = PathBuf::from(val),
            _ => return usage(),
        }
        i += 2;
    }
    let names: Vec<&str> = if which == "all" {
        TARGETS.iter().map(|t| t.name).collect()
    } else if target(which).is_some() {
        vec![which.as_str()]
    } else {
        return usage();
    };
    // Panics are expected and reported per input; keep their messages off the terminal.
    std::panic::set_hook(Box::new(|_| {}));
    let mut any = false;
    for n in names {
        let start = Instant::now();
        let o = fuzz(n, secs, seed, &corpus, &crashes, hang);
        println!(
            "{n}: {:.0} s, {} execs ({:.0}/s), {} accepted, {} rejected with an error, {} crashes",
            start.elapsed().as_secs_f64(),
            o.execs,
            o.execs as f64 / start.elapsed().as_secs_f64(),
            o.ok,
            o.execs - o.ok - o.crashes,
            o.crashes
        );
        any |= o.crashes > 0;
    }
    if any {
        std::process::ExitCode::from(1)
    } else {
        std::process::ExitCode::SUCCESS
    }
}
