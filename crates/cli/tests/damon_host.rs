//! `attach --sampler damon` against this machine's own DAMON (docs/live.md, "The DAMON
//! sampler"). Where DAMON is absent, held by someone else, or free but without virtual-address
//! monitoring, the refusal is checked (and that nothing of DAMON changed or stayed behind);
//! where it is free and numalab runs as root, a program with a hot
//! and a cold 64 MiB mapping is monitored for real and the regions DAMON reports must find
//! the hot one hotter, and the kdamond must be gone afterwards.

use assert_cmd::Command;
use numalab_linux::live::damon_sampler::{check_damon, ADMIN};
use numalab_linux::FsRoot;

fn run(args: &[&str]) -> (Option<i32>, String, String) {
    let o = Command::cargo_bin("numalab").unwrap().args(args).output().unwrap();
    (o.status.code(), String::from_utf8_lossy(&o.stdout).into_owned(), String::from_utf8_lossy(&o.stderr).into_owned())
}

/// Every file of the kdamonds' state this test could disturb, with its text.
fn damon_state() -> Vec<(String, String)> {
    let root = FsRoot::host();
    let mut out = Vec::new();
    let nr = root.read(&format!("{ADMIN}/kdamonds/nr_kdamonds")).map(|(_, t)| t).unwrap_or_default();
    out.push(("nr_kdamonds".to_string(), nr.clone()));
    for k in 0..nr.trim().parse::<u32>().unwrap_or(0) {
        for f in ["state", "pid", "contexts/0/operations"] {
            let t = root.read(&format!("{ADMIN}/kdamonds/{k}/{f}")).map(|(_, t)| t).unwrap_or_default();
            out.push((format!("{k}/{f}"), t));
        }
    }
    out
}

fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| s.lines().find(|l| l.starts_with("Uid:")).map(|l| l.split_whitespace().nth(2) == Some("0")))
        .unwrap_or(false)
}

/// A child with a hot 64 MiB mapping (written all the time) and a cold one (written once);
/// prints its pid and the two addresses.
fn hot_and_cold() -> (std::process::Child, u32, u64, u64) {
    use std::io::BufRead;
    let script = "import mmap,os,time,ctypes\nS=64<<20\nh=mmap.mmap(-1,S,flags=mmap.MAP_PRIVATE|mmap.MAP_ANONYMOUS)\nc=mmap.mmap(-1,S,flags=mmap.MAP_PRIVATE|mmap.MAP_ANONYMOUS)\nfor i in range(0,S,4096): h[i]=1; c[i]=1\nprint(os.getpid(),ctypes.addressof(ctypes.c_char.from_buffer(h)),ctypes.addressof(ctypes.c_char.from_buffer(c)),flush=True)\nt=time.time()\nwhile time.time()-t<30:\n    for i in range(0,S,4096): h[i]=2";
    let mut child = std::process::Command::new("python3").args(["-c", script]).stdout(std::process::Stdio::piped()).spawn().unwrap();
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
    let f: Vec<u64> = line.split_whitespace().map(|x| x.parse().unwrap()).collect();
    (child, f[0] as u32, f[1], f[2])
}

/// The largest `nr_accesses` of the regions overlapping `[start, start + len)`, and the bytes
/// of the overlap with regions that were accessed.
fn heat(regions: &[serde_json::Value], start: u64, len: u64) -> (u64, u64) {
    let mut max = 0;
    let mut hot_bytes = 0;
    for r in regions {
        let r: Vec<u64> = r.as_array().unwrap().iter().map(|x| x.as_u64().unwrap()).collect();
        let (lo, hi) = (r[0].max(start), r[1].min(start + len));
        if lo < hi {
            max = max.max(r[2]);
            if r[2] > 0 {
                hot_bytes += hi - lo;
            }
        }
    }
    (max, hot_bytes)
}

#[test]
fn attach_sampler_damon_follows_the_hosts_damon() {
    let before = damon_state();
    let (mut child, pid, hot, cold) = hot_and_cold();
    let pid_s = pid.to_string();
    let args = ["--format", "json", "attach", "--pid", &pid_s, "--policy", "autonuma", "--sampler", "damon", "--duration", "3"];
    match check_damon(&FsRoot::host()) {
        Err(reason) => {
            let (code, _, stderr) = run(&args);
            child.kill().unwrap();
            child.wait().unwrap();
            eprintln!("DAMON is not usable on this host ({reason}): checked the refusal; the monitoring half is skipped");
            assert_eq!(code, Some(2), "{stderr}");
            let want = format!("error: --sampler damon is not available on this host: {reason}");
            assert_eq!(stderr.trim_end(), want);
            assert_eq!(damon_state(), before, "DAMON changed although numalab refused");
        }
        Ok(()) if !is_root() => {
            child.kill().unwrap();
            child.wait().unwrap();
            eprintln!("DAMON is free here but this test is not root: writing its sysfs files needs root; skipped");
        }
        Ok(()) => {
            let (code, stdout, stderr) = run(&args);
            child.kill().unwrap();
            child.wait().unwrap();
            let no_vaddr = "error: damon: no vaddr: ";
            if stderr.starts_with(no_vaddr) {
                // Free, but built without virtual-address monitoring (this machine's 6.18 since
                // 2026-12-01): refused once the context showed it, and all of it removed.
                eprintln!(
                    "DAMON is free here but monitors no process ({}): checked the refusal; the monitoring half is skipped",
                    stderr.trim_end()
                );
                assert_eq!(code, Some(2), "{stderr}");
                assert!(stderr.contains("avail_operations lists") && stderr.contains("CONFIG_DAMON_VADDR"), "{stderr}");
                assert_eq!(damon_state(), before, "numalab left its kdamond behind after refusing");
                return;
            }
            assert_eq!(code, Some(0), "{stderr}");
            let v: serde_json::Value = serde_json::from_str(&stdout).unwrap();
            assert_eq!(v["sampler"], "damon");
            assert!(v["sampler_counters"]["updates"].as_u64().unwrap() >= 5, "{}", v["sampler_counters"]);
            let regions = v["sampler_report"]["regions"].as_array().unwrap();
            assert!(!regions.is_empty());
            let (hot_max, hot_bytes) = heat(regions, hot, 64 << 20);
            let (cold_max, _) = heat(regions, cold, 64 << 20);
            assert!(hot_max > cold_max, "hot {hot_max} vs cold {cold_max}: {regions:?}");
            assert!(hot_bytes >= 32 << 20, "only {hot_bytes} bytes of the hot mapping seen accessed: {regions:?}");
            assert_eq!(damon_state(), before, "numalab left its kdamond behind");
        }
    }
}
