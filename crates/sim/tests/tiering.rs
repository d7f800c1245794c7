//! `linux-tiering` in the engine (docs/policies/linux-tiering.md) on knl-7250-flat with a
//! shrunken MCDRAM and on cxl-expander with shrunken DRAM: slow-tier pages are promoted, kswapd
//! demotes (CXL), the fast nodes never hold more than their capacity, the policy's counters add
//! up with the engine's, runs are deterministic.

use numalab_core::machine::presets;
use numalab_sim::{run_one, RunMetrics, Scenario, SimConfig};
use numalab_workload::{compile_spec, CompileOptions, WorkloadSpec};
use std::sync::Arc;

/// Four programs of two threads: two bandwidth-hungry cg-like, two compute-bound ep-like.
const SMALL_MIX: &str = r#"
mix = { name = "small", description = "test", placement = "random", seed = 1 }
member = [ { preset = "cg-like", copies = 2, threads = 2 }, { preset = "ep-like", copies = 2, threads = 2 } ]
"#;

fn scenario(fast_pages: u64, cfg: &[(&str, i64)]) -> Scenario {
    let mut m = presets::load("knl-7250-flat").unwrap();
    m.nodes[1].mem_bytes = fast_pages * 4096;
    let m = Arc::new(m);
    let spec = WorkloadSpec::parse(SMALL_MIX, "mix").unwrap();
    let program = compile_spec(&spec, "mix", &m, &CompileOptions { threads: None, scale: 0.002 }).unwrap();
    let mut policy_config = toml::Table::new();
    for (k, v) in cfg {
        policy_config.insert((*k).into(), toml::Value::Integer(*v));
    }
    // On knl the DDR node holds the CPUs, so under Linux's rule (the default) both tiers are
    // top tier and nothing would be promoted; the what-if rule makes DDR the slow tier.
    policy_config.insert("top_tier".into(), toml::Value::String("fastest".into()));
    Scenario {
        machine: m,
        program: Arc::new(program),
        policy: numalab_policy::find("linux-tiering").unwrap(),
        policy_config,
        sim: SimConfig { tick_ms: 100.0, ..SimConfig::default() },
    }
}

fn counter(r: &RunMetrics, k: &str) -> u64 {
    r.policy_counters[k]
}

#[test]
fn promotes_demotes_and_keeps_to_capacity() {
    // Short delays so that scanning starts within the short run; a fast node of 2048 pages.
    let s = scenario(2048, &[("scan_delay_ms", 5), ("scan_period_min_ms", 10), ("scan_period_max_ms", 200)]);
    let r = run_one(&s, 7).unwrap();
    println!("knl: pages_per_node {:?}, {:?}", r.pages_per_node, r.policy_counters);
    assert!(r.pages_per_node[1] <= 2048);
    let (promoted, demoted) = (counter(&r, "pgpromote_success"), counter(&r, "pgdemote_kswapd"));
    assert!(promoted > 0, "nothing promoted: {:?}", r.policy_counters);
    assert!(counter(&r, "pgpromote_candidate") >= promoted);
    // The policy only migrates pages to promote or demote them.
    assert_eq!(r.page_migrations, promoted + demoted, "{:?}", r.policy_counters);
    // Promotions happen inside hinting faults, demotions outside.
    assert_eq!(r.numa.numa_pages_migrated, promoted);
    // Nothing on the fast tier is ever scanned: every hinting fault was on the DDR node.
    assert_eq!(r.numa.numa_hint_faults_local, r.numa.numa_hint_faults, "CPUs are on node 0 only");
    assert_eq!(r, run_one(&s, 7).unwrap(), "same seed, same run");
}

#[test]
fn on_a_cxl_machine_kswapd_demotes_and_hot_pages_come_back() {
    // DRAM nodes cut to 384 pages each, watermarks 10% apart (low 38, high 76, promo 114
    // pages); the mix (about 1100 pages) overflows into the CXL expanders.
    let mut m = presets::load("cxl-expander").unwrap();
    for n in [0, 1] {
        m.nodes[n].mem_bytes = 384 * 4096;
    }
    let m = Arc::new(m);
    let spec = WorkloadSpec::parse(SMALL_MIX, "mix").unwrap();
    let program = compile_spec(&spec, "mix", &m, &CompileOptions { threads: None, scale: 0.002 }).unwrap();
    let mut policy_config = toml::Table::new();
    for (k, v) in [("scan_delay_ms", 5), ("scan_period_min_ms", 10), ("scan_period_max_ms", 200), ("watermark_scale_factor", 1000)] {
        policy_config.insert(k.into(), toml::Value::Integer(v));
    }
    let s = Scenario {
        machine: m,
        program: Arc::new(program),
        policy: numalab_policy::find("linux-tiering").unwrap(),
        policy_config,
        sim: SimConfig { tick_ms: 100.0, ..SimConfig::default() },
    };
    let r = run_one(&s, 3).unwrap();
    println!("cxl: pages_per_node {:?}, {:?}", r.pages_per_node, r.policy_counters);
    assert!(r.pages_per_node[0] <= 384 && r.pages_per_node[1] <= 384);
    let (promoted, demoted) = (counter(&r, "pgpromote_success"), counter(&r, "pgdemote_kswapd"));
    assert!(r.pages_per_node[2] + r.pages_per_node[3] > 0, "the mix must overflow into CXL: {:?}", r.pages_per_node);
    assert!(demoted > 0 && counter(&r, "kswapd_runs") > 0, "{:?}", r.policy_counters);
    assert!(promoted > 0, "{:?}", r.policy_counters);
    assert_eq!(r.page_migrations, promoted + demoted);
    // Promotions target the faulting CPU's DRAM node: no fault was on a DRAM page.
    assert_eq!(r.numa.numa_hint_faults_local, 0);
}
