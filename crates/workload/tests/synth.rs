//! The `runs` pattern (DUnX synth schedule) and its check vector.

use numalab_core::machine::presets as machines;
use numalab_workload::{compile, presets, CompileOptions, DunxClass, Program};

fn rng() -> numalab_core::rng::StreamRng {
    numalab_core::rng::stream(3, "synth-test", 0)
}

fn synth(text: &str, threads: Option<u32>) -> Result<Program, String> {
    synth_scaled(text, threads, 1.0)
}

fn synth_scaled(text: &str, threads: Option<u32>, scale: f64) -> Result<Program, String> {
    let m = machines::load("gp1000").unwrap();
    let f = presets::parse(text, "t").map_err(|e| e.to_string())?;
    compile(&f, "t", &m, &CompileOptions { threads, scale }).map_err(|e| e.to_string())
}

fn preset() -> Program {
    synth(presets::text("dunx-synth").unwrap(), None).unwrap()
}

/// Every reference of every step: `(step, thread, line, write)` visited in step order.
fn for_each_ref(p: &Program, mut f: impl FnMut(usize, u32, u64, bool)) {
    let mut r = rng();
    for s in 0..p.steps.len() {
        for t in 0..p.threads {
            let w = p.work(s, t, &mut r);
            for e in &w.entries {
                let mut e = e.clone();
                for _ in 0..e.refs {
                    let (line, write) = e.next(&mut r);
                    f(s, t, line, write);
                }
            }
        }
    }
}

#[test]
fn check_vector_of_dunx_section_10() {
    let p = preset();
    assert_eq!(p.threads, 8);
    assert!(p.pinned);
    // K = 640 synth phases, one step each after the (empty) first-touch step.
    assert_eq!(p.steps.len(), 1 + 640);
    for s in 1..p.steps.len() {
        assert_eq!(p.synth_phase(s), Some(s as u64 - 1));
        assert!(p.steps[s].barrier_after, "each_run: a barrier after every synth phase");
        assert!(p.steps[s].p2p.is_none());
    }
    assert_eq!(p.synth_phase(0), None);
    // init_by = "none": no first touches before the run.
    assert!((0..8).all(|t| p.work(0, t, &mut rng()).total_refs() == 0));

    let counts = p.synth_counts();
    assert_eq!(counts.len(), 1);
    let c = &counts[0];
    assert_eq!((c.synth_phases, c.passes), (640, 1));
    let want = [
        (DunxClass::PR, 110_000, 10 * 1000),
        (DunxClass::RO, 320_000, 0),
        (DunxClass::RM, 80_400, 8 * 50),
        (DunxClass::SS, 20_000, 2 * 5000),
        (DunxClass::SP, 64_000, 8 * 4000),
    ];
    assert_eq!(c.classes.iter().map(|k| k.class).collect::<Vec<_>>(), want.iter().map(|w| w.0).collect::<Vec<_>>());
    for (k, (class, refs, writes)) in c.classes.iter().zip(want) {
        for t in 0..8 {
            assert_eq!(k.refs(t), refs, "{class:?} thread {t}");
            assert_eq!(k.writes[t], writes, "{class:?} thread {t}");
        }
    }

    // RM pair: eleven runs, ten of 1000 and one of 50; writes in rounds 0, 5, 10: 17, 17, 16.
    let rm = p.synth_pair_runs(DunxClass::RM).unwrap();
    assert_eq!(rm.len(), 11);
    assert!(rm[..10].iter().all(|r| r.0 == 1000));
    assert_eq!(rm[10].0, 50);
    let carrying: Vec<(usize, u64)> = rm.iter().enumerate().filter(|(_, r)| r.1 > 0).map(|(q, r)| (q, r.1)).collect();
    assert_eq!(carrying, vec![(0, 17), (5, 17), (10, 16)]);

    // The first touches of the SP pages fall on threads (and nodes) 0-7, one each.
    let sp = p.regions.iter().find(|r| r.name == "SP").unwrap();
    let node_of = |t: u32| m_node(&p, t);
    let firsts: Vec<u32> = (0..8).map(|g| p.synth_sharer(DunxClass::SP, g, 0).unwrap()).collect();
    let mut nodes: Vec<u16> = firsts.iter().map(|&t| node_of(t)).collect();
    nodes.sort_unstable();
    assert_eq!(nodes, (0..8).collect::<Vec<u16>>());
    assert_eq!(sp.pages, 8);

    // Now replay the generated streams and count everything again.
    let shift = p.line_shift();
    let region_names: Vec<String> = p.regions.iter().map(|r| r.name.clone()).collect();
    let mut got = vec![[[0u64; 2]; 8]; p.regions.len()]; // [region][thread][read/write]
    let mut first_touch: Vec<Option<(usize, u32)>> = vec![None; p.total_pages as usize];
    let mut second_in_step: Vec<bool> = vec![false; p.total_pages as usize];
    let mut pr_in_phase = vec![0u64; p.steps.len()];
    for_each_ref(&p, |s, t, line, write| {
        let page = line >> shift;
        let ri = p.regions.iter().position(|r| page >= r.first_page && page < r.first_page + r.pages).unwrap();
        got[ri][t as usize][write as usize] += 1;
        match first_touch[page as usize] {
            None => first_touch[page as usize] = Some((s, t)),
            Some((s0, t0)) if s0 == s && t0 != t => second_in_step[page as usize] = true,
            _ => {}
        }
        if region_names[ri] == "PR" {
            // Each thread's PR references go to its own PR pages.
            let r = &p.regions[ri];
            assert_eq!((page - r.first_page) / 10, t as u64);
            if t == 0 {
                pr_in_phase[s] += 1;
            }
        }
    });
    for cl in &c.classes {
        let ri = region_names.iter().position(|n| *n == cl.region).unwrap();
        for (t, g) in got[ri].iter().enumerate() {
            assert_eq!(*g, [cl.reads[t], cl.writes[t]], "{} thread {t}", cl.region);
        }
    }
    // PR references per phase follow floor((k+1) N/K) - floor(k N/K).
    for k in 0..640u64 {
        assert_eq!(pr_in_phase[k as usize + 1], (k + 1) * 110_000 / 640 - k * 110_000 / 640);
    }
    // SP page g is first touched, in phase 0, by exactly one thread, and that thread is firsts[g].
    for g in 0..8u64 {
        let page = (sp.first_page + g) as usize;
        assert_eq!(first_touch[page], Some((1, firsts[g as usize])));
        assert!(!second_in_step[page]);
    }
}

fn m_node(p: &Program, t: u32) -> u16 {
    let m = machines::load("gp1000").unwrap();
    m.cpu_table().node_of_cpu[p.initial_cpus[t as usize] as usize]
}

#[test]
fn runs_are_contiguous_and_writes_follow_the_floor_rule() {
    let p = preset();
    let rm = p.regions.iter().find(|r| r.name == "RM").unwrap().clone();
    let pr = p.regions.iter().find(|r| r.name == "PR").unwrap().clone();
    // Phase 0 of RM page 0: one run of 1000 with 17 writes, by one thread, not interrupted by
    // other shared pages (PR references interleave).
    let owner = p.synth_sharer(DunxClass::RM, 0, 0).unwrap();
    let mut r = rng();
    let w = p.work(1, owner, &mut r);
    let mut e = w.entries[0].clone();
    let mut seq = Vec::new();
    for _ in 0..e.refs {
        let (line, write) = e.next(&mut r);
        seq.push((line >> p.line_shift(), write));
    }
    let pos: Vec<usize> = seq.iter().enumerate().filter(|(_, x)| x.0 == rm.first_page).map(|(i, _)| i).collect();
    assert_eq!(pos.len(), 1000);
    // Between the first and last reference of the run only PR pages appear.
    for &(page, _) in &seq[pos[0]..=pos[999]] {
        assert!(page == rm.first_page || (page >= pr.first_page && page < pr.first_page + pr.pages));
    }
    let writes: Vec<bool> = pos.iter().map(|&i| seq[i].1).collect();
    for (i, &wr) in writes.iter().enumerate() {
        let i = i as u64;
        assert_eq!(wr, (i + 1) * 17 / 1000 > i * 17 / 1000, "reference {i} of the run");
    }
    // Class order inside a phase: RO runs come before RM runs, RM before SS, SS before SP.
    let class_of = |page: u64| p.region_of_page(page).unwrap().name.clone();
    let order: Vec<String> = seq.iter().map(|x| class_of(x.0)).filter(|n| n != "PR").fold(Vec::new(), |mut v, n| {
        if v.last() != Some(&n) {
            v.push(n);
        }
        v
    });
    let rank = |n: &str| ["RO", "RM", "SS", "SP"].iter().position(|c| *c == n).unwrap();
    assert!(order.windows(2).all(|w| rank(&w[0]) <= rank(&w[1])), "{order:?}");
}

#[test]
fn fuzzy_variant_has_no_barriers_and_the_same_counts() {
    let text = presets::text("dunx-synth").unwrap().replace("barrier = \"each_run\"", "barrier = \"none\"");
    let p = synth(&text, None).unwrap();
    assert_eq!(p.steps.len(), 641);
    assert!(p.steps[1..].iter().all(|s| !s.barrier_after));
    assert_eq!(p.synth_counts(), preset().synth_counts());
}

#[test]
fn iterations_repeat_the_synth_phases() {
    let text = presets::text("dunx-synth").unwrap().replace("init = \"parallel_ft\"", "init = \"parallel_ft\"\nrun = { iterations = 2 }");
    let p = synth(&text, None).unwrap();
    assert_eq!(p.steps.len(), 1 + 2 * 640);
    assert_eq!(p.synth_phase(641), Some(0));
    assert_eq!(p.steps[641].iteration, 1);
    assert_eq!(p.synth_counts()[0].passes, 2);
}

#[test]
fn rejected_synth_inputs() {
    let base = presets::text("dunx-synth").unwrap();
    let cases: Vec<(String, Option<u32>, &str)> = vec![
        (base.to_string(), Some(4), "M_c ≤ n"),
        (
            base.replace("reads = 20000\nwrites = 0", "reads = 20000\nwrites = 5"),
            None,
            "RO class needs writes = 0 and write_granularity = inf",
        ),
        (
            base.replace("write_granularity = inf", "write_granularity = 4000"),
            None,
            "RO class needs writes = 0 and write_granularity = inf",
        ),
        (base.replace("write_granularity = 5000", "write_granularity = inf"), None, "needs a finite write_granularity"),
        (base.replace("reads = 4000\nwrites = 4000", "reads = 0\nwrites = 8000"), None, "too many writes for a run"),
        (base.replace("sharers = 2\n", ""), None, "missing sharers"),
        (base.replace("reads = 5000\nwrites = 5000", "reads = 5000"), None, "missing writes"),
        (
            base.replace("run_granularity = 2500\nwrite_granularity = 2500", "run_granularity = 3000\nwrite_granularity = 2500"),
            None,
            "must be at least run_granularity",
        ),
        (base.replace("{ region = \"SS\", who = \"sharers\"", "{ region = \"SS\", who = \"all\""), None, "needs who = \"sharers\""),
        (
            base.replace(
                "{ region = \"SS\", who = \"sharers\", pattern = \"runs\" }",
                "{ region = \"SS\", who = \"all\", pattern = \"seq\", share = 1.0 }",
            ),
            None,
            "mixes `runs` with other patterns",
        ),
        (base.replace("dunx_class = \"SS\"\n", ""), None, "needs dunx_class"),
        (base.replace("dunx_class = \"SS\"", "dunx_class = \"RM\""), None, "names class RM twice"),
        (base.replace("sharers = 1\n", "sharers = 2\n"), None, "needs sharers = 1"),
        (base.replace("reads = 10000\nwrites = 50", "reads = 10000.5\nwrites = 50"), None, "whole number"),
        (base.replace("barrier = \"each_run\"", "barrier = \"p2p_neighbours\""), None, "not a p2p barrier"),
        (base.replace("barrier = \"each_run\"", "barrier = \"each_run\"\nparallel = false"), None, "needs parallel = true"),
        (
            base.replace("gap = { us = 2.0, dist = \"const\" }", "gap = { us = 2.0, dist = \"const\" }\nflops_per_access = 1.0"),
            None,
            "sets both flops_per_access and gap",
        ),
    ];
    for (text, threads, want) in cases {
        let e = synth(&text, threads).unwrap_err();
        assert!(e.contains(want), "wanted '{want}' in '{e}'");
    }
}

#[test]
fn each_run_is_rejected_without_runs() {
    let text = presets::text("stream-like").unwrap().replace("barrier = \"end\"", "barrier = \"each_run\"");
    let e = synth_scaled(&text, Some(2), 0.0001).unwrap_err();
    assert!(e.contains("each_run"), "{e}");
    let text = presets::text("stream-like").unwrap().replace("who = \"owner\"", "who = \"sharers\"");
    let e = synth_scaled(&text, Some(2), 0.0001).unwrap_err();
    assert!(e.contains("sharers"), "{e}");
}

mod props {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig { cases: 12, ..ProptestConfig::default() })]
        /// Whatever the scale and thread count, the generated streams match the reported counts,
        /// and every pair makes exactly R + W references.
        #[test]
        fn streams_match_reported_counts(threads in 8u32..12, scale in 0.05f64..0.3, fuzzy in any::<bool>()) {
            let mut text = presets::text("dunx-synth").unwrap().to_string();
            if fuzzy {
                text = text.replace("barrier = \"each_run\"", "barrier = \"none\"");
            }
            let p = synth_scaled(&text, Some(threads), scale).unwrap();
            let c = &p.synth_counts()[0];
            prop_assert_eq!(p.steps.len() as u64, 1 + c.synth_phases);
            let shift = p.line_shift();
            let n = threads as usize;
            let mut got = vec![vec![[0u64; 2]; n]; p.regions.len()];
            for_each_ref(&p, |_, t, line, write| {
                let page = line >> shift;
                let ri = p.regions.iter().position(|r| page >= r.first_page && page < r.first_page + r.pages).unwrap();
                got[ri][t as usize][write as usize] += 1;
            });
            for cl in &c.classes {
                let ri = p.regions.iter().position(|r| r.name == cl.region).unwrap();
                for (t, g) in got[ri].iter().enumerate() {
                    prop_assert_eq!(*g, [cl.reads[t], cl.writes[t]]);
                }
                // Totals over threads: pages x sharers x (R + W).
                let (m, rw): (u64, u64) = match cl.class {
                    DunxClass::PR => (threads as u64, 11_000),
                    DunxClass::RO => (8, 20_000),
                    DunxClass::RM => (4, 10_050),
                    DunxClass::SS => (2, 10_000),
                    DunxClass::SP => (8, 8_000),
                };
                let total: u64 = (0..n).map(|t| cl.refs(t)).sum();
                prop_assert_eq!(total, cl.pages * m * rw);
            }
            // The work estimate's closed form agrees with the exact counts.
            let counted: u64 = c.classes.iter().map(|cl| (0..n).map(|t| cl.refs(t)).sum::<u64>()).sum();
            prop_assert_eq!(p.estimated_refs(), p.total_pages + counted * c.passes);
        }
    }
}
