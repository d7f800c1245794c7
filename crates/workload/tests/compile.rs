use numalab_core::machine::presets as machines;
use numalab_workload::{compile, presets, CompileOptions, WorkloadError};
use proptest::prelude::*;

fn rng() -> numalab_core::rng::StreamRng {
    numalab_core::rng::stream(7, "test", 0)
}

fn lines_of(work: &numalab_workload::program::ThreadWork, rng: &mut impl rand::Rng) -> Vec<(u64, bool)> {
    let mut out = Vec::new();
    for e in work.entries.iter().chain(&work.epilogue) {
        let mut e = e.clone();
        for _ in 0..e.refs {
            out.push(e.next(rng));
        }
    }
    out
}

#[test]
fn stream_like_layout_and_volumes_are_exact() {
    let m = machines::load("server-a-4n").unwrap();
    let file = presets::load("stream-like").unwrap();
    let p = compile(&file, "stream-like", &m, &CompileOptions { threads: None, scale: 0.01 }).unwrap();
    assert_eq!(p.threads, 32, "threads = cores");
    let pages = (6_400_000f64 / 4096.0).ceil() as u64;
    assert_eq!(p.regions.iter().map(|r| r.pages).collect::<Vec<_>>(), vec![pages; 3]);
    assert_eq!(p.regions[1].first_page, pages);
    // init + 10 triad iterations.
    assert_eq!(p.steps.len(), 11);
    assert!(p.steps.iter().all(|s| s.barrier_after));
    // One triad sweep: every line of a, b and c once, split over the threads.
    let total: u64 = (0..32).map(|t| p.work(1, t, &mut rng()).total_refs()).sum();
    assert_eq!(total, 3 * pages * 64);
    // Thread 5 only touches its own blocks; writes go to a only.
    let refs = lines_of(&p.work(1, 5, &mut rng()), &mut rng());
    for (line, write) in refs {
        let page = line >> p.line_shift();
        let r = p.region_of_page(page).unwrap();
        assert_eq!(r.owner_of.owner(page - r.first_page, r.pages), Some(5));
        assert_eq!(write, r.name == "a");
    }
}

#[test]
fn swrr_alternates_triad_entries() {
    let m = machines::load("server-a-2n").unwrap();
    let p = compile(&presets::load("stream-like").unwrap(), "s", &m, &CompileOptions { threads: Some(2), scale: 0.001 }).unwrap();
    let w = p.work(1, 0, &mut rng());
    let mut s = numalab_workload::stream::Swrr::new(w.entries.iter().map(|e| e.refs));
    let picks: Vec<usize> = (0..6).map(|_| s.pick()).collect();
    assert_eq!(picks, vec![0, 1, 2, 0, 1, 2]);
}

#[test]
fn master_init_touches_everything_from_thread_0() {
    let m = machines::load("server-a-4n").unwrap();
    let p = compile(&presets::load("master-slave").unwrap(), "m", &m, &CompileOptions { threads: Some(8), scale: 0.001 }).unwrap();
    let partials = p.regions.iter().find(|r| r.name == "partials").unwrap();
    let t0 = p.work(0, 0, &mut rng()).total_refs();
    let t3 = p.work(0, 3, &mut rng()).total_refs();
    let owned_by_0 = (0..partials.pages).filter(|&i| partials.owner_of.owner(i, partials.pages) == Some(0)).count() as u64;
    assert_eq!(t0, p.total_pages - partials.pages + owned_by_0);
    assert!(t3 <= partials.pages);
    // The fill phase (once) runs before the iterations, by thread 0 only.
    assert_eq!(p.steps[1].phase_name, "fill");
    assert_eq!(p.work(1, 1, &mut rng()).total_refs(), 0);
    assert!(p.steps[1].barrier_after, "parallel = false with barrier none counts as end");
    // Threads are scattered over the CPU nodes.
    let nodes: Vec<_> = p.initial_cpus.iter().map(|&c| m.cpu_table().node_of_cpu[c as usize]).collect();
    assert_eq!(nodes, vec![0, 1, 2, 3, 0, 1, 2, 3]);
}

#[test]
fn errors_name_what_is_wrong() {
    let m = machines::load("server-a-4n").unwrap();
    let text = presets::text("cg-like").unwrap();
    let bad = text.replace("owner_share = 0.97", "owner_share = 0.97\nowner_shares = 1");
    let e = presets::parse(&bad, "my.toml").unwrap_err();
    let msg = e.to_string();
    assert!(msg.starts_with("my.toml:"), "{msg}");
    assert!(msg.contains("owner_shares"), "{msg}");
    assert!(matches!(e, WorkloadError::Parse { line: Some(_), .. }));

    let cases = [
        (text.replace("share = 0.70", "share = 0.60"), "shares sum to"),
        (text.replace("region = \"p\",", "region = \"q\","), "no region has this name"),
        (text.replace("pattern = \"seq\",       share = 0.70", "pattern = \"stencil:1\", share = 0.70"), "stencil needs plane_bytes"),
    ];
    for (t, want) in cases {
        let f = presets::parse(&t, "x").unwrap();
        let e = compile(&f, "x", &m, &CompileOptions::default()).unwrap_err().to_string();
        assert!(e.contains(want), "wanted '{want}' in '{e}'");
    }
    let f = presets::parse(text, "x").unwrap();
    let e = compile(&f, "x", &m, &CompileOptions { threads: Some(0), scale: 1.0 }).unwrap_err().to_string();
    assert!(e.contains("threads must be at least 1"), "{e}");
    let e = compile(&f, "x", &m, &CompileOptions { threads: None, scale: 1000.0 }).unwrap_err();
    match e {
        WorkloadError::TooLarge { over_bytes, suggest_scale, .. } => {
            let need: u64 = [0.80, 0.04, 0.16].iter().map(|f| ((1_102_000_000f64 * f * 1000.0) / 4096.0).ceil() as u64 * 4096).sum();
            assert_eq!(over_bytes, need - m.total_mem_bytes());
            assert!(suggest_scale < 200.0);
        }
        other => panic!("{other}"),
    }
    let e = presets::load("nope").unwrap_err().to_string();
    assert!(e.contains("valid presets: is-like, ep-like, cg-like"), "{e}");
}

proptest! {
    /// Every page is first-touched exactly once, whatever the preset, thread count and scale
    /// (no page at all before the run for `init_by = "none"`, as in dunx-synth).
    #[test]
    fn init_touches_every_page_once(threads in 1u32..40, scale in 0.0005f64..0.003, which in 0usize..22) {
        let m = machines::load("server-a-4n").unwrap();
        let name = presets::names()[which % presets::names().len()];
        let file = presets::load(name).unwrap();
        let none = file.region.iter().all(|r| r.init_by.as_deref() == Some("none"));
        let runs = file.region.iter().any(|r| !r.dunx_class.is_empty());
        let threads = if runs { threads.max(8) } else { threads };
        let p = compile(&file, name, &m, &CompileOptions { threads: Some(threads), scale }).unwrap();
        let mut seen = vec![0u8; p.total_pages as usize];
        for t in 0..threads {
            for (line, write) in lines_of(&p.work(0, t, &mut rng()), &mut rng()) {
                prop_assert!(write);
                seen[(line >> p.line_shift()) as usize] += 1;
            }
        }
        let want = if none { 0 } else { 1 };
        prop_assert!(seen.iter().all(|&c| c == want), "{}", name);
    }
}

#[test]
fn copies_make_a_mix_of_independent_processes() {
    let m = machines::load("server-a-4n").unwrap();
    let mut file = presets::load("stream-like").unwrap();
    file.workload.copies = 3;
    let spec = numalab_workload::WorkloadSpec::Single(file.clone());
    let p = numalab_workload::compile_spec(&spec, "s", &m, &CompileOptions { threads: Some(4), scale: 0.001 }).unwrap();
    let one = compile(&presets::load("stream-like").unwrap(), "s", &m, &CompileOptions { threads: Some(4), scale: 0.001 }).unwrap();
    assert_eq!(p.processes(), 3);
    assert_eq!(p.threads, 12);
    assert_eq!(p.total_pages, 3 * one.total_pages);
    assert_eq!(p.members[2].name, "stream-like.2");
    assert_eq!(p.process_of(5), 1);
    assert_eq!(p.process_threads(1), 4..8);
    assert_eq!(p.steps_of(9).len(), one.steps.len());
    // Thread 5 is thread 1 of instance 1: the same lines as thread 1 alone, one instance up.
    let shifted = lines_of(&p.work(1, 5, &mut rng()), &mut rng());
    let alone = lines_of(&one.work(1, 1, &mut rng()), &mut rng());
    assert_eq!(shifted.len(), alone.len());
    for (a, b) in shifted.iter().zip(&alone) {
        assert_eq!(a.0, b.0 + one.total_pages * one.lines_per_page);
    }
    // Threads are spread over all cores as one group.
    let mut cpus = p.initial_cpus.clone();
    cpus.sort_unstable();
    cpus.dedup();
    assert_eq!(cpus.len(), 12);
}

#[test]
fn mix_presets_compile_with_named_instances_on_distinct_pinned_cores() {
    let m = machines::load("knl-7250-flat").unwrap();
    let spec = numalab_workload::WorkloadSpec::parse(presets::text("hydm-npb-mix").unwrap(), "mix").unwrap();
    let p = numalab_workload::compile_spec(&spec, "mix", &m, &CompileOptions { threads: None, scale: 0.001 }).unwrap();
    assert_eq!(p.processes(), 16);
    assert_eq!(p.threads, 64);
    assert!(p.pinned, "random placement pins");
    assert_eq!(p.members[5].name, "cg-like.1");
    let mut cpus = p.initial_cpus.clone();
    cpus.sort_unstable();
    cpus.dedup();
    assert_eq!(cpus.len(), 64, "distinct cores for every thread of every instance");
    let bad = "mix = { name = \"m\" }\nmember = [ { preset = \"nope\" } ]\n";
    let e = numalab_workload::compile_spec(
        &numalab_workload::WorkloadSpec::parse(bad, "m.toml").unwrap(),
        "m.toml",
        &m,
        &CompileOptions::default(),
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("unknown workload preset 'nope'"), "{e}");
    let e = numalab_workload::WorkloadSpec::parse("mix = { name = \"m\", bogus = 1 }\nmember = []\n", "m.toml").unwrap_err().to_string();
    assert!(e.starts_with("m.toml:1") && e.contains("bogus"), "{e}");
}

#[test]
fn the_32_program_mix_and_member_iterations() {
    let m = machines::load("knl-7250-flat").unwrap();
    let opts = CompileOptions { threads: None, scale: 0.001 };
    let compile_text =
        |text: &str| numalab_workload::compile_spec(&numalab_workload::WorkloadSpec::parse(text, "m.toml").unwrap(), "m.toml", &m, &opts);
    let p16 = compile_text(presets::text("hydm-npb-mix").unwrap()).unwrap();
    let p32 = compile_text(presets::text("hydm-npb-mix-32").unwrap()).unwrap();
    assert_eq!((p32.processes(), p32.threads), (32, 64), "32 programs, 2 threads each, the same 64 cores");
    assert_eq!(p32.members[11].name, "cg-like.3");
    assert_eq!(p32.total_pages, 2 * p16.total_pages, "four copies of each program instead of two");
    // A member's iterations lengthen that member only: more references, the same pages.
    let one = compile_text("mix = { name = \"m\" }\nmember = [ { preset = \"stream-like\", threads = 2 } ]\n").unwrap();
    let more = compile_text("mix = { name = \"m\" }\nmember = [ { preset = \"stream-like\", threads = 2, iterations = 30 } ]\n").unwrap();
    assert_eq!(one.total_pages, more.total_pages);
    let first_touch = one.total_pages;
    assert_eq!(more.estimated_refs() - first_touch, 3 * (one.estimated_refs() - first_touch), "30 iterations instead of 10");
    let e = compile_text("mix = { name = \"m\" }\nmember = [ { preset = \"stream-like\", iterations = 0 } ]\n").unwrap_err().to_string();
    assert!(e.contains("member 'stream-like': iterations must be at least 1"), "{e}");
    let mix = compile_text(presets::text("tiering-mix").unwrap()).unwrap();
    assert_eq!((mix.processes(), mix.threads), (3, 48));
}
