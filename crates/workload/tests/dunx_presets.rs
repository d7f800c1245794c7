//! The DUnX application presets (`msort-like` … `mandel-like`, docs/workloads.md "DUnX
//! application presets"): each expands on gp1000 into the closed-form counts of its class rows,
//! and every generated reference goes to a page the thread shares.

use numalab_core::machine::presets as machines;
use numalab_workload::schema::WorkloadFile;
use numalab_workload::{compile, presets, CompileOptions, DunxClass, Program};

/// The eight application presets of the DUnX source, with the classes each must use.
const APPS: [(&str, &[&str]); 8] = [
    ("msort-like", &["PR", "SS"]),
    ("gauss-like", &["PR", "RO"]),
    ("hh3d-like", &["PR", "SS"]),
    ("hough-like", &["PR", "RO"]),
    ("psolu-like", &["PR", "RM"]),
    ("wave-like", &["PR", "RM"]),
    ("fish-like", &["PR", "SP"]),
    ("mandel-like", &["PR", "RO"]),
];

const N: u64 = 8;

fn rng() -> numalab_core::rng::StreamRng {
    numalab_core::rng::stream(5, "dunx-presets-test", 0)
}

fn load(name: &str) -> (WorkloadFile, Program) {
    let f = presets::load(name).unwrap();
    let p = compile(&f, name, &machines::load("gp1000").unwrap(), &CompileOptions::default()).unwrap_or_else(|e| panic!("{name}: {e}"));
    (f, p)
}

/// Sharer list of page `g` of a class with `m` sharers (docs/workloads.md, "The runs pattern").
fn sharers(g: u64, m: u64) -> Vec<u64> {
    (0..m).map(|j| (g * m + j) % N).collect()
}

/// One class's closed form: its class, region, and per thread (reads, writes).
type ClassForm = (DunxClass, String, Vec<(u64, u64)>);

/// Closed form from the class rows alone: per class, per thread, (reads, writes); and K.
fn closed_form(f: &WorkloadFile) -> (Vec<ClassForm>, u64) {
    let mut out = Vec::new();
    let mut k = 1;
    for r in &f.region {
        let class = DunxClass::parse(&r.dunx_class).unwrap();
        let (pages, m) = (r.pages.unwrap(), u64::from(r.sharers.unwrap()));
        let (reads, writes) = (r.reads.unwrap() as u64, r.writes.unwrap() as u64);
        let per_thread: Vec<(u64, u64)> = (0..N)
            .map(|t| {
                let mine = if class == DunxClass::PR { pages } else { (0..pages).filter(|&g| sharers(g, m).contains(&t)).count() as u64 };
                (mine * reads, mine * writes)
            })
            .collect();
        if class != DunxClass::PR {
            let total = reads + writes;
            let run = (r.run_granularity.unwrap() as u64).min(total);
            k = k.max(m * total.div_ceil(run));
        }
        out.push((class, r.name.clone(), per_thread));
    }
    (out, k)
}

#[test]
fn every_app_preset_is_registered_with_its_header_and_classes() {
    for (name, classes) in APPS {
        let (what, text) = presets::PRESETS.iter().find(|p| p.0 == name).map(|p| (p.1, p.2)).unwrap_or_else(|| panic!("{name} missing"));
        assert!(what.starts_with("DUnX "), "{name}: says what it mimics: {what}");
        assert!(text.starts_with(&format!("# {name}: the DUnX paper's ")), "{name}: header names the program");
        assert!(text.contains("[A]"), "{name}: assumptions are labelled");
        let (f, p) = load(name);
        assert_eq!(f.workload.name, name);
        assert_eq!(p.threads, 8);
        assert!(p.pinned);
        let mut got: Vec<&str> = f.region.iter().map(|r| r.dunx_class.as_str()).collect();
        got.sort_unstable();
        let mut want = classes.to_vec();
        want.sort_unstable();
        assert_eq!(got, want, "{name}");
        assert!(f.region.iter().all(|r| r.init_by.as_deref() == Some("none")), "{name}: placed by first reference");
    }
}

#[test]
fn every_app_preset_expands_into_its_closed_form_counts() {
    for (name, _) in APPS {
        let (f, p) = load(name);
        let (want, k) = closed_form(&f);
        let counts = p.synth_counts();
        assert_eq!(counts.len(), 1, "{name}: one runs phase");
        assert_eq!((counts[0].synth_phases, counts[0].passes), (k, 1), "{name}: K");
        assert_eq!(p.steps.len() as u64, 1 + k, "{name}: one step per synth phase after the first-touch step");
        for (class, region, per_thread) in &want {
            let c = counts[0].classes.iter().find(|c| c.class == *class).unwrap_or_else(|| panic!("{name}: {class:?}"));
            assert_eq!(&c.region, region);
            for (t, want_t) in per_thread.iter().enumerate() {
                assert_eq!((c.reads[t], c.writes[t]), *want_t, "{name} {class:?} thread {t}");
            }
        }

        // Replay every generated reference: the tallies match, and a thread only references
        // its own PR block and the shared pages whose sharer list names it.
        let shift = p.line_shift();
        let mut tally = vec![vec![(0u64, 0u64); N as usize]; f.region.len()];
        let mut r = rng();
        for s in 0..p.steps.len() {
            for t in 0..p.threads {
                for e in &p.work(s, t, &mut r).entries {
                    let mut e = e.clone();
                    for _ in 0..e.refs {
                        let (line, write) = e.next(&mut r);
                        let page = line >> shift;
                        let ri = p.regions.iter().position(|x| page >= x.first_page && page < x.first_page + x.pages).unwrap();
                        let (reg, row) = (&p.regions[ri], &f.region[ri]);
                        let g = page - reg.first_page;
                        if row.dunx_class == "PR" {
                            assert_eq!(g / row.pages.unwrap(), u64::from(t), "{name}: PR page of another thread");
                        } else {
                            assert!(
                                sharers(g, u64::from(row.sharers.unwrap())).contains(&u64::from(t)),
                                "{name}: {} page {g} by {t}",
                                reg.name
                            );
                        }
                        let x = &mut tally[ri][t as usize];
                        if write {
                            x.1 += 1
                        } else {
                            x.0 += 1
                        }
                    }
                }
            }
        }
        for (ri, (_, region, per_thread)) in want.iter().enumerate() {
            assert_eq!(&tally[ri], per_thread, "{name} {region}: generated references");
        }
    }
}

#[test]
fn app_presets_refuse_fewer_threads_than_sharers() {
    for (name, _) in APPS {
        let f = presets::load(name).unwrap();
        let max_m = f.region.iter().map(|r| r.sharers.unwrap()).max().unwrap();
        let e =
            compile(&f, name, &machines::load("gp1000").unwrap(), &CompileOptions { threads: Some(max_m - 1), scale: 1.0 }).unwrap_err();
        assert!(e.to_string().contains("sharers"), "{name}: {e}");
    }
}
