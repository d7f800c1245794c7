//! The oracle policies' rules at their boundaries, the worked examples of
//! docs/policies/oracle.md (scripted faults, exact decisions), and the error fraction's
//! properties (exact count, nested sets, one stream per class, determinism).

use super::*;
use crate::testing::FakeSystem;
use crate::DynPolicy;
use numalab_core::machine::presets;
use proptest::prelude::*;

fn gp1000() -> PolicyEnv {
    PolicyEnv::new(Arc::new(presets::load("gp1000").unwrap()))
}

fn region(class: PageClass, first_page: u64, pages: u64, sharers: u32, run_refs: f64, write_run_refs: f64) -> ClassRegion {
    ClassRegion { space: 0, first_page, pages, class, sharers, run_refs, write_run_refs, written: write_run_refs.is_finite() }
}

/// The worked example's map (docs/policies/oracle.md, "Worked example"): pages 0–3 SS
/// (M = 2, r̂ = 2500), 4–7 SP (M = 8, r̂ = 100, ŵ = 200), 8–9 RO (M = 8, never written),
/// 10–11 PR.
fn example_classes() -> Arc<PageClasses> {
    Arc::new(
        PageClasses::new(vec![
            region(PageClass::Sp, 4, 4, 8, 100.0, 200.0),
            region(PageClass::Ss, 0, 4, 2, 2500.0, 2500.0),
            region(PageClass::Ro, 8, 2, 8, 1000.0, f64::INFINITY),
            region(PageClass::Pr, 10, 2, 1, 5000.0, 5000.0),
        ])
        .unwrap(),
    )
}

fn env_with(classes: Arc<PageClasses>, seed: u64) -> PolicyEnv {
    gp1000().with_page_classes(Some(classes)).with_seed(seed)
}

fn error_policy(errors: ErrorFractions, seed: u64) -> ErrorPolicy {
    ErrorPolicy::new(ErrorConfig { errors, ..ErrorConfig::default() }, &env_with(example_classes(), seed)).unwrap()
}

/// A system of 8 one-CPU nodes with pages 0..13 homed on node 0 (page 12 has no class).
fn system() -> FakeSystem {
    let mut sys = FakeSystem::new(8, 1, 8, 13, 100);
    for p in 0..13 {
        sys.pages.insert((0, p), 0);
    }
    sys
}

// ---- the class map ----

#[test]
fn class_lookup_at_region_boundaries() {
    let c = example_classes();
    let class_of = |p| c.region_of(0, p).map(|i| c.regions()[i].class);
    assert_eq!(class_of(0), Some(PageClass::Ss));
    assert_eq!(class_of(3), Some(PageClass::Ss));
    assert_eq!(class_of(4), Some(PageClass::Sp));
    assert_eq!(class_of(7), Some(PageClass::Sp));
    assert_eq!(class_of(8), Some(PageClass::Ro));
    assert_eq!(class_of(11), Some(PageClass::Pr));
    assert_eq!(class_of(12), None);
    assert_eq!(c.region_of(1, 0), None, "another space has no classes");
}

#[test]
fn overlapping_or_unusable_regions_are_refused() {
    let e = PageClasses::new(vec![region(PageClass::Ss, 0, 4, 2, 10.0, 10.0), region(PageClass::Sp, 3, 2, 2, 10.0, 10.0)]).unwrap_err();
    assert!(e.contains("overlap"), "{e}");
    let e = PageClasses::new(vec![region(PageClass::Ss, 0, 4, 0, 10.0, 10.0)]).unwrap_err();
    assert!(e.contains("sharers"), "{e}");
    let e = PageClasses::new(vec![region(PageClass::Ss, 0, 4, 2, 0.0, 10.0)]).unwrap_err();
    assert!(e.contains("run lengths"), "{e}");
}

// ---- the ideal rule ----

#[test]
fn break_even_counts_on_gp1000() {
    let be = BreakEven::from_machine(&gp1000().machine, &gp1000().allowed).unwrap();
    assert_eq!((be.c_mig_ns, be.c_rep_ns, be.c_coh_ns, be.delta_ns), (4.5e6, 4.6e6, 2.1e6, 6900.0));
    // SS with two sharers: 4.5 ms / (0.5 · 6.9 us) = 1304.35 (docs/model.md's 1304).
    let (k_mig, k_rep) = break_even(&region(PageClass::Ss, 0, 1, 2, 2500.0, 2500.0), Some(&be), None, None).unwrap();
    assert!((k_mig - 4.5e6 / 3450.0).abs() < 1e-9);
    assert!((k_rep - 6.7e6 / 3450.0).abs() < 1e-9, "a written class pays the coherency fault too");
    let (_, k_rep_ro) = break_even(&region(PageClass::Ro, 0, 1, 8, 10.0, f64::INFINITY), Some(&be), None, None).unwrap();
    assert!((k_rep_ro - 4.6e6 / (0.875 * 6900.0)).abs() < 1e-9, "RO pays no coherency fault");
    // One sharer: never worth moving; scalar overrides win.
    assert_eq!(break_even(&region(PageClass::Pr, 0, 1, 1, 10.0, 10.0), Some(&be), None, None).unwrap(), (f64::INFINITY, f64::INFINITY));
    assert_eq!(break_even(&region(PageClass::Ss, 0, 1, 2, 10.0, 10.0), None, Some(5.0), Some(7.0)).unwrap(), (5.0, 7.0));
    assert_eq!(break_even(&region(PageClass::Ss, 0, 1, 2, 10.0, 10.0), None, Some(5.0), None), Err("k_rep"));
}

#[test]
fn ideal_treatment_at_the_break_even_boundary() {
    // Strictly above the count pays; at it, static.
    assert_eq!(ideal_treatment(PageClass::Ss, 1000.0, 1000.0, 1000.0, 0.0), Treatment::Static);
    assert_eq!(ideal_treatment(PageClass::Ss, 1001.0, 1000.0, 1000.0, 0.0), Treatment::Migrate);
    assert_eq!(ideal_treatment(PageClass::Sp, 1001.0, 1000.0, 1000.0, 0.0), Treatment::Migrate);
    assert_eq!(ideal_treatment(PageClass::Rm, 1.0, 500.0, 0.0, 500.0), Treatment::Static);
    assert_eq!(ideal_treatment(PageClass::Rm, 1.0, 501.0, 0.0, 500.0), Treatment::Replicate);
    assert_eq!(ideal_treatment(PageClass::Ro, 1.0, f64::INFINITY, 0.0, 500.0), Treatment::Replicate);
    // Read-shared pages never migrate, read-write ones never replicate, PR stays.
    assert_eq!(ideal_treatment(PageClass::Ro, 1e9, 1.0, 0.0, 500.0), Treatment::Static);
    assert_eq!(ideal_treatment(PageClass::Ss, 1.0, 1e9, 1e9, 0.0), Treatment::Static);
    assert_eq!(ideal_treatment(PageClass::Pr, 1e9, 1e9, 0.0, 0.0), Treatment::Static);
}

#[test]
fn wrong_treatment_is_the_model_table() {
    use PageClass::*;
    use Treatment::*;
    for (class, ideal, wrong) in [
        (Ss, Migrate, Static),
        (Ss, Static, Migrate),
        (Sp, Static, Migrate),
        (Ro, Replicate, Static),
        (Rm, Static, Replicate),
        (Pr, Static, Static),
    ] {
        assert_eq!(wrong_treatment(class, ideal), wrong, "{class:?} {ideal:?}");
    }
}

#[test]
fn ideal_picks_per_class_on_the_example() {
    let p = Ideal::new(IdealConfig::default(), &env_with(example_classes(), 1)).unwrap();
    use PageClass::*;
    use Treatment::*;
    assert_eq!(p.oracle().ideal_by_class(), vec![(Pr, Static), (Ro, Replicate), (Ss, Migrate), (Sp, Static)]);
}

// ---- refusals ----

#[test]
fn without_class_knowledge_both_refuse_with_a_sentence() {
    for env in [gp1000(), gp1000().with_page_classes(Some(Arc::new(PageClasses::default())))] {
        for name in ["ideal", "error"] {
            let e = crate::build(name, toml::Table::new(), &env).err().expect("refused");
            let msg = e.to_string();
            assert!(msg.starts_with(&format!("policy '{name}'")) && msg.contains("DUnX class") && msg.contains("live agent"), "{msg}");
        }
    }
}

#[test]
fn a_machine_without_page_costs_needs_the_counts() {
    let env = PolicyEnv::new(Arc::new(presets::load("server-a-4n").unwrap())).with_page_classes(Some(example_classes()));
    let msg = crate::build("ideal", toml::Table::new(), &env).err().unwrap().to_string();
    assert!(msg.contains("costs_ms") && msg.contains("policy.k_mig"), "{msg}");
    let cfg: toml::Table = toml::from_str("k_mig = 1000.0\nk_rep = 1000.0").unwrap();
    assert!(crate::build("ideal", cfg, &env).is_ok());
}

#[test]
fn out_of_range_keys_are_refused_with_the_key() {
    let env = env_with(example_classes(), 1);
    for (text, key) in [
        ("errors.ss = 1.5", "errors.ss"),
        ("errors.sp = -0.1", "errors.sp"),
        ("k_mig = -1.0", "k_mig"),
        ("scan_delay_ms = 0", "scan_delay_ms"),
    ] {
        let cfg: toml::Table = toml::from_str(text).unwrap();
        let msg = crate::build("error", cfg, &env).err().unwrap().to_string();
        assert!(msg.contains(key), "{text}: {msg}");
    }
    let cfg: toml::Table = toml::from_str("errors.pr = 0.5").unwrap();
    let msg = crate::build("error", cfg, &env).err().unwrap().to_string();
    assert!(msg.contains("pr"), "PR pages are never wrong, so there is no key: {msg}");
    let cfg: toml::Table = toml::from_str("[errors]\nss = 0.5").unwrap();
    assert!(crate::build("ideal", cfg, &env).is_err(), "ideal has no error fractions");
}

#[test]
fn the_set_key_reaches_the_fraction() {
    // `--set policy.errors.ss=0.5` arrives as the nested table errors = { ss = 0.5 }.
    let cfg: toml::Table = toml::from_str("[errors]\nss = 0.5").unwrap();
    let p = crate::build("error", cfg, &env_with(example_classes(), 1)).unwrap();
    assert_eq!(p.config_toml()["errors"]["ss"].as_float(), Some(0.5));
    let c: std::collections::BTreeMap<_, _> = p.counters().into_iter().collect();
    assert_eq!((c["pages_ss"], c["wrong_pages_ss"]), (4, 2));
}

// ---- worked examples: scripted faults, exact decisions ----

#[test]
fn worked_example_ideal() {
    let mut p = Ideal::new(IdealConfig::default(), &env_with(example_classes(), 1)).unwrap();
    let mut sys = system();
    // SS page 1, node 3 reads: Mg migrates it to node 3.
    assert_eq!(sys.hit(&mut p, 3, 1), vec![Decision::MigratePage { space: 0, page: 1, to: 3 }]);
    // Node 5 starts the next run: migrated again.
    assert_eq!(sys.hit(&mut p, 5, 1), vec![Decision::MigratePage { space: 0, page: 1, to: 5 }]);
    // SP page 5: static, a remote mapping only.
    assert_eq!(sys.hit(&mut p, 3, 5), vec![]);
    // RO page 8: replicated to the reader.
    assert_eq!(sys.hit(&mut p, 3, 8), vec![Decision::Replicate { space: 0, page: 8, to: 3 }]);
    // PR page 10 and an unclassified page: nothing.
    assert_eq!(sys.hit(&mut p, 3, 10), vec![]);
    assert_eq!(sys.hit(&mut p, 3, 12), vec![]);
    let c: std::collections::BTreeMap<_, _> = DynPolicy::counters(&p).into_iter().collect();
    assert_eq!((c["faults_migration"], c["faults_replication"], c["faults_static"], c["faults_unclassified"]), (2, 1, 2, 1));
}

#[test]
fn worked_example_error_every_page_wrong() {
    let mut p = error_policy(ErrorFractions { ro: 1.0, rm: 1.0, ss: 1.0, sp: 1.0 }, 1);
    let mut sys = system();
    // SS (ideal Mg) is left static; SP (ideal S) migrates; RO (ideal Rp) is left static.
    assert_eq!(sys.hit(&mut p, 3, 1), vec![]);
    assert_eq!(sys.hit(&mut p, 3, 5), vec![Decision::MigratePage { space: 0, page: 5, to: 3 }]);
    assert_eq!(sys.hit(&mut p, 3, 8), vec![]);
    // PR pages are never wrong.
    assert_eq!(sys.hit(&mut p, 3, 10), vec![]);
    assert_eq!(p.oracle().treatment(0, 10), Some(Treatment::Static));
}

#[test]
fn error_at_zero_is_ideal_page_for_page() {
    let ideal = Ideal::new(IdealConfig::default(), &env_with(example_classes(), 9)).unwrap();
    let error = error_policy(ErrorFractions::default(), 9);
    for page in 0..13 {
        assert_eq!(ideal.oracle().treatment(0, page), error.oracle().treatment(0, page), "page {page}");
    }
}

#[test]
fn a_write_on_a_replicated_rp_page_collapses_to_the_writer() {
    let mut p = Ideal::new(IdealConfig::default(), &env_with(example_classes(), 1)).unwrap();
    let sys = system();
    // RO pages are never written by the workload; the rule is DUnX's coherency fault all the
    // same: node 3 holds a replica of page 8 (home 0) and writes.
    let mut f = sys.fault(3, 8);
    f.write = true;
    struct Copies<'a>(&'a FakeSystem);
    impl MemoryState for Copies<'_> {
        fn free_pages(&self, n: NodeId) -> u64 {
            self.0.free_pages(n)
        }
        fn capacity_pages(&self, n: NodeId) -> u64 {
            self.0.capacity_pages(n)
        }
    }
    let mut out = Vec::new();
    let kind = p.inner.replicate.decide(&f, 0b1001, &Copies(&sys), &mut out);
    assert_eq!(kind, crate::dunx::FaultKind::Coherency);
    assert_eq!(out[0], Decision::CollapseReplicas { space: 0, page: 8, keep: 3 });
}

// ---- the error fraction ----

fn wrong_pages(p: &ErrorPolicy, class_pages: std::ops::Range<u64>) -> Vec<u64> {
    let o = p.oracle();
    class_pages.filter(|&pg| o.treatment(0, pg) != Some(o.ideal_by_class().iter().find(|(c, _)| *c == class_of(pg)).unwrap().1)).collect()
}

fn class_of(page: u64) -> PageClass {
    match page {
        0..=3 => PageClass::Ss,
        4..=7 => PageClass::Sp,
        8..=9 => PageClass::Ro,
        _ => PageClass::Pr,
    }
}

proptest! {
    #[test]
    fn error_fraction_is_exact_nested_and_per_class(seed in 0u64..10_000, a in 0.0f64..=1.0, b in 0.0f64..=1.0, sp in 0.0f64..=1.0) {
        let (lo, hi) = if a <= b { (a, b) } else { (b, a) };
        let p_lo = error_policy(ErrorFractions { ss: lo, ..Default::default() }, seed);
        let p_hi = error_policy(ErrorFractions { ss: hi, sp, ..Default::default() }, seed);
        let (w_lo, w_hi) = (wrong_pages(&p_lo, 0..4), wrong_pages(&p_hi, 0..4));
        // Exactly round(e · P) pages.
        prop_assert_eq!(w_lo.len(), (lo * 4.0).round() as usize);
        prop_assert_eq!(w_hi.len(), (hi * 4.0).round() as usize);
        // A larger fraction adds pages to a smaller one's set, whatever the other class's.
        prop_assert!(w_lo.iter().all(|p| w_hi.contains(p)), "{:?} not within {:?}", w_lo, w_hi);
        prop_assert_eq!(wrong_pages(&p_hi, 4..8).len(), (sp * 4.0).round() as usize);
        prop_assert!(wrong_pages(&p_lo, 4..8).is_empty());
        // The same seed gives the same pages.
        let again = error_policy(ErrorFractions { ss: hi, sp, ..Default::default() }, seed);
        prop_assert_eq!(wrong_pages(&again, 0..12), wrong_pages(&p_hi, 0..12));
    }
}

#[test]
fn the_seed_chooses_the_pages() {
    let sets: std::collections::BTreeSet<Vec<u64>> =
        (0..20).map(|seed| wrong_pages(&error_policy(ErrorFractions { ss: 0.5, ..Default::default() }, seed), 0..4)).collect();
    assert!(sets.len() > 1, "20 seeds chose the same SS pages: {sets:?}");
}
