//! Every preset compiles and keeps the generator's invariants (docs/workloads.md).

use numalab_core::machine::presets as machines;
use numalab_core::Machine;
use numalab_workload::program::{P2p, ThreadWork};
use numalab_workload::schema::{Pattern, Sharing, Who, WorkloadFile};
use numalab_workload::stream::Cursor;
use numalab_workload::{compile, presets, CompileOptions, Program};
use proptest::prelude::*;

fn rng() -> numalab_core::rng::StreamRng {
    numalab_core::rng::stream(11, "presets-test", 0)
}

fn server() -> Machine {
    machines::load("server-a-4n").unwrap()
}

/// Bytes of a preset at scale 1 (sum of its regions).
fn base_bytes(f: &WorkloadFile) -> f64 {
    f.region
        .iter()
        .map(|r| {
            r.bytes.map(|b| b as f64).or(r.frac.map(|x| x * f.workload.footprint as f64)).unwrap_or(r.pages.unwrap_or(0) as f64 * 4096.0)
        })
        .sum()
}

/// A scale that makes the preset about `mb` MB.
fn scale_for(f: &WorkloadFile, mb: f64) -> f64 {
    (mb * 1e6 / base_bytes(f)).min(1.0)
}

/// Presets built on the `runs` pattern (dunx-synth and the DUnX application presets): fixed
/// thread count, counts from class rows (tests/synth.rs, tests/dunx_presets.rs).
fn is_runs_preset(name: &str) -> bool {
    presets::load(name).unwrap().region.iter().any(|r| !r.dunx_class.is_empty())
}

/// The presets that do not use the `runs` pattern.
fn npb_and_friends() -> Vec<&'static str> {
    presets::names().into_iter().filter(|n| !is_runs_preset(n)).collect()
}

fn compiled(name: &str, threads: u32, mb: f64) -> (WorkloadFile, Program) {
    let f = presets::load(name).unwrap();
    let scale = scale_for(&f, mb);
    let p = compile(&f, name, &server(), &CompileOptions { threads: Some(threads), scale }).unwrap_or_else(|e| panic!("{name}: {e}"));
    (f, p)
}

/// Largest-remainder apportionment, as docs/workloads.md specifies it.
fn apportion(total: u64, shares: &[f64]) -> Vec<u64> {
    let raw: Vec<f64> = shares.iter().map(|s| s * total as f64).collect();
    let mut out: Vec<u64> = raw.iter().map(|r| r.floor() as u64).collect();
    let mut left = total - out.iter().sum::<u64>();
    let mut order: Vec<usize> = (0..shares.len()).collect();
    order.sort_by(|&a, &b| (raw[b] - raw[b].floor()).total_cmp(&(raw[a] - raw[a].floor())).then(a.cmp(&b)));
    for &i in order.iter().cycle() {
        if left == 0 {
            break;
        }
        out[i] += 1;
        left -= 1;
    }
    out
}

fn lines_of_region(p: &Program, name: &str) -> u64 {
    p.regions.iter().find(|r| r.name == name).unwrap().pages * p.lines_per_page
}

/// Expected references per entry of one repeat of phase `pi`, all threads together.
fn expected_counts(f: &WorkloadFile, p: &Program, pi: usize, scale: f64) -> Vec<u64> {
    let ph = &f.phase[pi];
    let refs = if ph.refs > 0 {
        ((ph.refs as f64 * scale).round() as u64).max(1)
    } else {
        let mut names: Vec<&str> = ph.accesses.iter().map(|a| a.region.as_str()).collect();
        names.sort_unstable();
        names.dedup();
        names.iter().map(|n| lines_of_region(p, n)).sum()
    };
    let counts = apportion(refs, &ph.accesses.iter().map(|a| a.share).collect::<Vec<_>>());
    assert_eq!(counts.iter().sum::<u64>(), refs);
    counts
}

/// Thread `t`'s entries matched to the phase's accesses: `(access index, entry index)`.
fn entry_map(f: &WorkloadFile, pi: usize, w: &ThreadWork, counts: &[u64], threads: u32, t: u32) -> Vec<(usize, usize)> {
    let ph = &f.phase[pi];
    let mut out = Vec::new();
    let mut ei = 0;
    for (ai, a) in ph.accesses.iter().enumerate() {
        let solo = !ph.parallel || a.who == Who::Master;
        let want = if solo {
            if t == 0 {
                counts[ai]
            } else {
                0
            }
        } else {
            counts[ai] / threads as u64 + u64::from((t as u64) < counts[ai] % threads as u64)
        };
        if want == 0 {
            continue;
        }
        assert!(ei < w.entries.len(), "phase {} thread {t}: entry for access {ai} missing", ph.name);
        assert_eq!(w.entries[ei].refs, want, "phase {} thread {t} access {ai} ({})", ph.name, a.region);
        out.push((ai, ei));
        ei += 1;
    }
    assert_eq!(ei, w.entries.len(), "phase {} thread {t}: extra entries", ph.name);
    out
}

/// The first step of every phase.
fn first_steps(p: &Program, phases: usize) -> Vec<(usize, usize)> {
    (0..phases).filter_map(|pi| p.steps.iter().position(|s| s.phase == Some(pi)).map(|s| (pi, s))).collect()
}

#[test]
fn every_preset_parses_compiles_and_has_a_description() {
    assert_eq!(presets::names().len(), 22);
    for (name, what, text) in presets::PRESETS {
        assert!(!what.is_empty());
        assert!(text.starts_with(&format!("# {name}:")), "{name}: header comment first");
        let f = presets::parse(text, name).unwrap();
        assert_eq!(f.workload.name, *name);
        if is_runs_preset(name) {
            let p = compile(&f, name, &machines::load("gp1000").unwrap(), &CompileOptions::default()).unwrap();
            assert_eq!(p.threads, 8);
            continue;
        }
        assert!(matches!(&f.workload.threads, numalab_workload::schema::Threads::Named(s) if s == "cores"), "{name}: threads = cores");
        let p = compile(&f, name, &server(), &CompileOptions { threads: None, scale: scale_for(&f, 8.0) }).unwrap();
        assert_eq!(p.threads, 32);
    }
}

#[test]
fn entry_counts_follow_the_shares_exactly() {
    for name in npb_and_friends() {
        for threads in [1, 3, 8] {
            let f = presets::load(name).unwrap();
            let scale = scale_for(&f, 6.0);
            let p = compile(&f, name, &server(), &CompileOptions { threads: Some(threads), scale }).unwrap();
            for (pi, s) in first_steps(&p, f.phase.len()) {
                let counts = expected_counts(&f, &p, pi, scale);
                let mut total = 0;
                for t in 0..threads {
                    let w = p.work(s, t, &mut rng());
                    entry_map(&f, pi, &w, &counts, threads, t);
                    total += w.entries.iter().map(|e| e.refs).sum::<u64>();
                }
                assert_eq!(total, counts.iter().sum::<u64>(), "{name} phase {}", f.phase[pi].name);
            }
        }
    }
}

/// Stencil halo depth in lines at this scale (plane_bytes scale as scale^(2/3)).
fn halo_lines(plane_bytes: u64, h: u64, scale: f64) -> u64 {
    h * ((plane_bytes as f64 * scale.powf(2.0 / 3.0) / 64.0).ceil() as u64).max(1)
}

#[test]
fn targets_stay_inside_the_right_blocks() {
    let threads = 4;
    for name in npb_and_friends() {
        let (f, p) = compiled(name, threads, 6.0);
        let scale = scale_for(&f, 6.0);
        let shift = p.line_shift();
        let repartitioned: Vec<&str> = f.phase.iter().filter_map(|ph| ph.repartition.as_ref().map(|r| r.region.as_str())).collect();
        for (pi, s) in first_steps(&p, f.phase.len()) {
            let ph = &f.phase[pi];
            let counts = expected_counts(&f, &p, pi, scale);
            for t in 0..threads {
                let mut r = rng();
                let w = p.work(s, t, &mut r);
                for (ai, ei) in entry_map(&f, pi, &w, &counts, threads, t) {
                    let a = &ph.accesses[ai];
                    let fr = f.region.iter().find(|x| x.name == a.region).unwrap();
                    let reg = p.regions.iter().find(|x| x.name == a.region).unwrap();
                    let owner = |line: u64| reg.owner_of.owner((line >> shift) - reg.first_page, reg.pages);
                    let block = |b: u32| -> (u64, u64) {
                        let pages: Vec<u64> = (0..reg.pages).filter(|&q| reg.owner_of.owner(q, reg.pages) == Some(b)).collect();
                        ((reg.first_page + pages[0]) * p.lines_per_page, (reg.first_page + pages[pages.len() - 1] + 1) * p.lines_per_page)
                    };
                    let pat = Pattern::parse(&a.pattern).unwrap();
                    let mut e = w.entries[ei].clone();
                    let n = e.refs.min(4000);
                    // Fewer pages than threads: a thread without a block works on the page at t/T.
                    let no_block = (0..reg.pages).all(|q| reg.owner_of.owner(q, reg.pages) != Some(t));
                    let fallback_page = reg.first_page + t as u64 * reg.pages / threads as u64;
                    let strict_owner = a.who == Who::Owner
                        && (fr.owner_share == 1.0 || fr.sharing == Sharing::Private)
                        && !repartitioned.contains(&a.region.as_str());
                    for _ in 0..n {
                        let (line, _) = e.next(&mut r);
                        let page = line >> shift;
                        assert!(
                            page >= reg.first_page && page < reg.first_page + reg.pages,
                            "{name}/{}: {} outside its region",
                            ph.name,
                            a.region
                        );
                        if no_block && a.who == Who::Owner {
                            let o = owner(line).unwrap();
                            assert!(
                                page == fallback_page || o.abs_diff(t) <= 1 || fr.owner_share < 1.0,
                                "{name}/{}: blockless thread {t} at page {page}",
                                ph.name
                            );
                            continue;
                        }
                        match pat {
                            Pattern::Stencil { halo_planes } => {
                                let o = owner(line).unwrap();
                                assert!(o.abs_diff(t) <= 1, "{name}/{}: stencil reached block {o} from {t}", ph.name);
                                let h = halo_lines(fr.plane_bytes, halo_planes, scale);
                                if o + 1 == t {
                                    assert!(line >= block(o).1 - h, "{name}: lower halo deeper than {h} lines");
                                } else if o == t + 1 {
                                    assert!(line < block(o).0 + h, "{name}: upper halo deeper than {h} lines");
                                }
                            }
                            Pattern::Transpose => {
                                let o = owner(line).unwrap();
                                let (lo, hi) = block(o);
                                let len = hi - lo;
                                let (slo, shi) = (lo + t as u64 * len / threads as u64, lo + (t as u64 + 1) * len / threads as u64);
                                assert!(line >= slo && line < shi, "{name}: transpose left slice {t} of block {o}");
                            }
                            Pattern::Reduction => {
                                assert_eq!(line, reg.first_page * p.lines_per_page + t as u64 % (reg.pages * p.lines_per_page));
                            }
                            _ if strict_owner => {
                                assert_eq!(owner(line), Some(t), "{name}/{}: {} left the owner's block", ph.name, a.region)
                            }
                            _ => {}
                        }
                    }
                }
                // The closing reads of a reduction: thread 0 only, every line of the region once.
                if t != 0 {
                    assert!(w.epilogue.is_empty());
                }
            }
        }
    }
}

#[test]
fn master_and_serial_phases_run_on_thread_0_only() {
    for name in ["xsbench-like", "master-slave"] {
        let (f, p) = compiled(name, 4, 6.0);
        for (pi, s) in first_steps(&p, f.phase.len()) {
            let ph = &f.phase[pi];
            if ph.parallel && ph.accesses.iter().all(|a| a.who != Who::Master) {
                continue;
            }
            assert!(p.work(s, 0, &mut rng()).total_refs() > 0);
            for t in 1..4 {
                let w = p.work(s, t, &mut rng());
                let master_only = !ph.parallel || ph.accesses.iter().all(|a| a.who == Who::Master);
                if master_only {
                    assert_eq!(w.total_refs(), 0, "{name}/{}", ph.name);
                }
            }
        }
    }
}

#[test]
fn lu_sweeps_are_forward_and_reverse_wavefronts() {
    let (_, p) = compiled("lu-like", 4, 6.0);
    let lower: Vec<_> = p.steps.iter().filter(|s| s.phase_name == "ssor_lower").collect();
    let upper: Vec<_> = p.steps.iter().filter(|s| s.phase_name == "ssor_upper").collect();
    assert_eq!(lower.len(), 250);
    assert_eq!(upper.len(), 250);
    assert!(lower.iter().all(|s| s.p2p == Some(P2p { chunks: 16, reverse: false }) && s.barrier_after));
    assert!(upper.iter().all(|s| s.p2p == Some(P2p { chunks: 16, reverse: true }) && s.barrier_after));
    assert!(p.steps.iter().filter(|s| !s.phase_name.starts_with("ssor")).all(|s| s.p2p.is_none()));
    // Lower sweep of step i comes right before its upper sweep.
    let i = p.steps.iter().position(|s| s.phase_name == "ssor_lower").unwrap();
    assert_eq!(p.steps[i + 1].phase_name, "ssor_upper");
}

#[test]
fn ua_repartition_moves_ownership_by_s() {
    let threads = 4u32;
    let (_, p) = compiled("ua-like", threads, 12.0);
    let mesh = p.regions.iter().find(|r| r.name == "mesh").unwrap().clone();
    let pages = mesh.pages;
    let s = (0.05 * pages as f64 / threads as f64 + 0.5).floor() as u64;
    assert!(s > 0);
    // Pages owned by thread t in a step: the segments of its `seq` walk over the mesh
    // (the third access; its cursor is a Walk over the owned block).
    let (shift, lpp, first) = (p.line_shift(), p.lines_per_page as usize, mesh.first_page);
    let owned = |step: usize, t: u32| -> Vec<u64> {
        let w = p.work(step, t, &mut rng());
        let Cursor::Walk { segs, .. } = &w.entries[2].cursor else { panic!("mesh seq is a walk") };
        let mut v: Vec<u64> = segs.iter().flat_map(|g| (0..g.lines()).step_by(lpp).map(move |i| (g.line_at(i) >> shift) - first)).collect();
        v.sort_unstable();
        v.dedup();
        v
    };
    // Steps 1..=5 are the first five repeats (offset 0); the drift applies after every 5th.
    for (step, off) in [(1usize, 0u64), (5, 0), (6, s), (10, s), (11, 2 * s), (200, 39 * s)] {
        for t in 0..threads {
            let want: Vec<u64> = (0..pages).filter(|&q| mesh.owner_of.owner((q + off) % pages, pages) == Some(t)).collect();
            assert_eq!(owned(step, t), want, "step {step} thread {t}");
        }
    }
    // T*s pages changed owner between step 5 and step 6.
    let owner_at = |step: usize| -> Vec<u32> {
        let mut o = vec![u32::MAX; pages as usize];
        for t in 0..threads {
            for q in owned(step, t) {
                o[q as usize] = t;
            }
        }
        o
    };
    let (a, b) = (owner_at(5), owner_at(6));
    assert!(a.iter().chain(&b).all(|&x| x != u32::MAX));
    assert_eq!(a.iter().zip(&b).filter(|(x, y)| x != y).count() as u64, threads as u64 * s);
}

#[test]
fn graph500_and_is_phase_structure() {
    let (_, p) = compiled("graph500-like", 4, 20.0);
    let names: Vec<&str> = p.steps.iter().map(|s| s.phase_name.as_str()).collect();
    assert_eq!(names[..3], ["init", "generate", "build_csr"]);
    assert_eq!(names.iter().filter(|n| **n == "bfs").count(), 64);
    assert!(p.steps.iter().filter(|s| s.phase_name == "bfs").all(|s| s.barrier_after));
    let (_, p) = compiled("is-like", 4, 6.0);
    assert_eq!(p.steps[1].phase_name, "keygen");
    assert_eq!(p.steps.iter().filter(|s| s.phase_name == "rank").count(), 10);
    // The reduction's closing reads: thread 0 reads every line of bucket_sizes once.
    let w = p.work(2, 0, &mut rng());
    assert_eq!(w.epilogue.len(), 1);
    assert_eq!(w.epilogue[0].refs, lines_of_region(&p, "bucket_sizes"));
}

/// §1.2 of the workloads spec (HyDM class-C table): peak MB, reads + writes (M), read share.
const HYDM: &[(&str, f64, f64, f64)] = &[
    ("is-like", 1572.0, 1096.0, 0.69),
    ("ep-like", 20.0, 3767.0, 0.73),
    ("cg-like", 1102.0, 31984.0, 0.97),
    ("mg-like", 3536.0, 10447.0, 0.72),
    ("ft-like", 7188.0, 28752.0, 0.65),
    ("bt-like", 1676.0, 62952.0, 0.73),
    ("sp-like", 1416.0, 140253.0, 0.66),
    ("lu-like", 760.0, 123018.0, 0.69),
];

#[test]
fn npb_presets_match_the_class_c_table_at_scale_1() {
    for &(name, mb, accesses_m, read_share) in HYDM {
        let f = presets::load(name).unwrap();
        let p = compile(&f, name, &server(), &CompileOptions { threads: Some(2), scale: 1.0 }).unwrap();
        let bytes = p.footprint_bytes() as f64;
        assert!(bytes >= mb * 1e6 && bytes <= mb * 1e6 * 1.01 + 8192.0, "{name}: footprint {bytes}");
        let (mut refs, mut reads) = (0f64, 0f64);
        let mut r = rng();
        for s in 0..p.steps.len() {
            for t in 0..p.threads {
                let w = p.work(s, t, &mut r);
                for e in w.entries.iter().chain(&w.epilogue) {
                    refs += e.refs as f64;
                    reads += e.refs as f64 - (e.refs as f64 * e.write_frac).floor();
                }
            }
        }
        // CG's Example A reduction runs over the whole `vecs` region, whose closing reads by
        // thread 0 at each of the 1,875 barriers add 16% to the volume.
        let max = if name == "cg-like" { 1.2 } else { 1.0 };
        let ratio = refs / (accesses_m * 1e6);
        assert!(ratio >= 0.85 && ratio <= max, "{name}: {refs} references, {ratio:.3} of the real program's");
        let share = reads / refs;
        eprintln!("{name}: {:.1} MB, {refs:.3e} refs ({ratio:.3} of §1.2), read share {share:.3} (want {read_share})", bytes / 1e6);
        let tol = 0.02;
        assert!((share - read_share).abs() <= tol, "{name}: read share {share:.3}, want {read_share}");
    }
}

#[test]
fn rejected_inputs_name_the_rule() {
    let m = server();
    let base = "[workload]\nname = \"x\"\nthreads = 4\nfootprint = 4_000_000\n";
    let region = "[[region]]\nname = \"a\"\nbytes = 1_000_000\nsharing = \"partitioned\"\n";
    let phase = "[[phase]]\nname = \"p\"\naccesses = [ { region = \"a\", who = \"owner\", pattern = \"seq\", share = 1.0 } ]\n";
    let cases: Vec<(String, &str)> = vec![
        (
            format!("{base}{}{phase}", region.replace("bytes = 1_000_000", "bytes = 1_000_000\nfrac = 0.1")),
            "exactly one of bytes, frac and pages (got 2)",
        ),
        (format!("{base}{}{phase}", region.replace("bytes = 1_000_000\n", "")), "exactly one of bytes, frac and pages (got 0)"),
        (
            format!("{}{}{phase}", base.replace("footprint = 4_000_000\n", ""), region.replace("bytes = 1_000_000", "frac = 0.5")),
            "frac needs workload.footprint",
        ),
        (
            format!("{base}{}{phase}", region.replace("\"partitioned\"", "\"shared_rw\"\ninit_by = \"master\"")),
            "who = \"owner\" needs a partitioned region",
        ),
        (
            format!(
                "{base}{}{}",
                region.replace("\"partitioned\"", "\"shared_rw\"\ninit_by = \"owner\""),
                phase.replace("\"owner\"", "\"all\"")
            ),
            "init_by = \"owner\" needs a partition",
        ),
        (
            format!(
                "{base}{}{}",
                region.replace("\"partitioned\"", "\"shared_ro\"\ninit_by = \"master\""),
                phase.replace("who = \"owner\"", "who = \"all\", read_frac = 0.5")
            ),
            "writes to a shared_ro region outside a once phase",
        ),
        (
            format!(
                "{base}{}{}",
                region.replace("\"partitioned\"", "\"replicated\"\ninit_by = \"master\""),
                phase.replace("who = \"owner\"", "who = \"all\", read_frac = 0.9")
            ),
            "writes to a replicated region outside a once phase",
        ),
        (
            format!("{base}{region}{}", phase.replace("name = \"p\"", "name = \"p\"\nflops_per_access = 2.0\ngap = { us = 1.0 }")),
            "sets both flops_per_access and gap",
        ),
        (format!("{base}{region}{}", phase.replace("share = 1.0", "share = 0.5")), "shares sum to 0.5, not 1"),
        (format!("{base}{region}{}", phase.replace("\"seq\"", "\"stencil:1\"")), "stencil needs plane_bytes"),
        (format!("{base}{region}{}", phase.replace("\"owner\"", "\"sharers\"")), "who = \"sharers\" goes with the `runs` pattern"),
    ];
    for (text, want) in cases {
        let f = presets::parse(&text, "x.toml").unwrap_or_else(|e| panic!("{e}\n{text}"));
        let e = compile(&f, "x.toml", &m, &CompileOptions::default()).unwrap_err().to_string();
        assert!(e.contains(want), "wanted '{want}' in '{e}'");
        assert!(e.starts_with("x.toml"), "{e}");
    }
    // A write in a once phase is allowed on a shared_ro region.
    let ok = format!(
        "{base}{}{}",
        region.replace("\"partitioned\"", "\"shared_ro\"\ninit_by = \"master\""),
        phase.replace("name = \"p\"", "name = \"p\"\nonce = true").replace("who = \"owner\"", "who = \"all\", read_frac = 0.5")
    );
    compile(&presets::parse(&ok, "x").unwrap(), "x", &m, &CompileOptions::default()).unwrap();
    // Unknown keys in every table are parse errors with a line number.
    for (text, key) in [
        (format!("{}colour = 1\n{region}{phase}", base), "colour"),
        (format!("{base}{region}colour = 1\n{phase}"), "colour"),
        (format!("{base}{region}{}", phase.replace("share = 1.0", "share = 1.0, colour = 1")), "colour"),
        (format!("{base}{region}{phase}repartition = {{ region = \"a\", every = 1, fraction = 0.1 }}\n"), "fraction"),
    ] {
        let e = presets::parse(&text, "y.toml").unwrap_err();
        let msg = e.to_string();
        assert!(msg.contains(key) && msg.starts_with("y.toml:"), "{msg}");
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]
    /// For any preset, thread count and scale: per-thread entry counts add up to the phase's
    /// volume exactly, and every reference lands inside the workload's pages.
    #[test]
    fn volumes_add_up_for_any_thread_count(which in 0usize..13, threads in 1u32..33, mb in 2.0f64..10.0) {
        let names = npb_and_friends();
        let name = names[which % names.len()];
        let f = presets::load(name).unwrap();
        let scale = scale_for(&f, mb);
        let p = compile(&f, name, &server(), &CompileOptions { threads: Some(threads), scale }).unwrap();
        for (pi, s) in first_steps(&p, f.phase.len()) {
            let counts = expected_counts(&f, &p, pi, scale);
            let mut total = 0;
            for t in 0..threads {
                let mut r = rng();
                let w = p.work(s, t, &mut r);
                entry_map(&f, pi, &w, &counts, threads, t);
                total += w.entries.iter().map(|e| e.refs).sum::<u64>();
                for e in &w.entries {
                    let mut e = e.clone();
                    for _ in 0..e.refs.min(200) {
                        let (line, _) = e.next(&mut r);
                        prop_assert!((line >> p.line_shift()) < p.total_pages);
                    }
                }
            }
            prop_assert_eq!(total, counts.iter().sum::<u64>());
        }
    }
}

/// The escape lists a thread keeps between steps (`Program::work_with`, crate `escapes`) give
/// every step exactly the work that building them gives, through repartitions; and they are
/// kept: ua-like's two escaping entries share one list, and steps between two repartitions
/// reuse it.
#[test]
fn kept_escape_lists_give_the_work_built_anew() {
    use numalab_workload::EscapeLists;
    use std::sync::Arc;
    let threads = 8;
    let mut shared_within_a_step = 0;
    let mut reused_across_steps = 0;
    for name in npb_and_friends() {
        let (_, p) = compiled(name, threads, 6.0);
        for t in 0..threads {
            let mut lists = EscapeLists::default();
            let (mut r1, mut r2) = (rng(), rng());
            let mut last: Option<Arc<[numalab_workload::Seg]>> = None;
            for s in 0..p.steps.len().min(40) {
                let kept = p.work_with(s, t, &mut r1, &mut lists);
                let built = p.work(s, t, &mut r2);
                assert_eq!(kept.entries, built.entries, "{name} thread {t} step {s}");
                assert_eq!(kept.epilogue, built.epilogue, "{name} thread {t} step {s}");
                let escapes: Vec<_> = kept.entries.iter().filter_map(|e| e.escape.as_ref().map(|x| x.others.clone())).collect();
                shared_within_a_step += escapes.windows(2).filter(|w| Arc::ptr_eq(&w[0], &w[1])).count();
                if let (Some(prev), Some(first)) = (&last, escapes.first()) {
                    reused_across_steps += usize::from(Arc::ptr_eq(prev, first));
                }
                last = escapes.first().cloned().or(last);
            }
        }
    }
    assert!(shared_within_a_step > 0, "no step shared a list between its entries");
    assert!(reused_across_steps > 0, "no step reused its predecessor's list");
}
