//! Carrefour over an open base (open.rs; docs/vm.md, "Carrefour in the hypervisor"): the
//! base keeps its hooks, hears the outcomes, and the page engine decides as over a native
//! static.

use super::tests::{busy, env, sample, tick_ms};
use super::*;
use crate::decision::{Outcome, PlaceRequest, Tick};
use crate::policy::DynPolicy;
use crate::testing::FakeSystem;
use numalab_core::machine::presets;
use std::collections::BTreeSet;
use std::sync::Arc;

/// A base for the open-Carrefour tests: places every page on node `node`, charges 7 ns a
/// placement, declines every unmap and records what it hears.
struct Recording {
    node: NodeId,
    pending_ns: f64,
    ticks: u32,
    heard: Vec<(Decision, Outcome)>,
}

impl DynPolicy for Recording {
    fn name(&self) -> &'static str {
        "recording"
    }
    fn config_toml(&self) -> toml::Table {
        let mut t = toml::Table::new();
        t.insert("node".into(), toml::Value::Integer(i64::from(self.node)));
        t
    }
    fn place(&mut self, _req: &PlaceRequest, _mem: &dyn MemoryState) -> Result<NodeId, OutOfMemory> {
        self.pending_ns += 7.0;
        Ok(self.node)
    }
    fn take_place_cost_ns(&mut self) -> f64 {
        std::mem::take(&mut self.pending_ns)
    }
    fn should_unmap(&mut self, _space: SpaceId, _page: PageIdx, _node: NodeId) -> bool {
        false
    }
    fn on_tick(&mut self, _tick: &Tick, _view: &dyn SystemView, _out: &mut Vec<Decision>) {
        self.ticks += 1;
    }
    fn on_outcomes(&mut self, _cause: &EventRef, decisions: &[Decision], outcomes: &[Outcome]) {
        self.heard.extend(decisions.iter().copied().zip(outcomes.iter().copied()));
    }
    fn counters(&self) -> Vec<(&'static str, u64)> {
        vec![("recording_ticks", u64::from(self.ticks))]
    }
}

fn recording(node: NodeId) -> Box<Recording> {
    Box::new(Recording { node, pending_ns: 0.0, ticks: 0, heard: Vec::new() })
}

#[test]
fn an_open_base_places_and_keeps_its_own_hooks() {
    let mut p = OpenCarrefour::new("vm:test+carrefour", CarrefourConfig::default(), &env(), recording(1)).unwrap();
    let req = PlaceRequest { space: 0, thread: 0, cpu: 0, cpu_node: 0, page: 3 };
    let mem = crate::testing::FixedMemory::uniform(2, 100);
    assert_eq!(DynPolicy::place(&mut p, &req, &mem), Ok(1), "the base places, not first-touch");
    assert_eq!(p.take_place_cost_ns(), 7.0, "the base's placement cost reaches the driver");
    assert!(!p.should_unmap(0, 3, 1));
    assert_eq!(p.name(), "vm:test+carrefour");
    let t = p.config_toml();
    assert_eq!(t["node"].as_integer(), Some(1));
    assert_eq!(t["carrefour"]["interval_ms"].as_integer(), Some(1000));
    assert!(p.sample_period_ns().is_some(), "Carrefour samples over any base");
    // A tick reaches both; the base's counters come first.
    let s = FakeSystem::new(2, 2, 4, 64, 1000);
    p.on_tick(&busy(1000), &s, &mut Vec::new());
    let c = p.counters();
    assert_eq!(c[0], ("recording_ticks", 1));
    assert!(c.contains(&("carrefour_intervals", 1)), "{c:?}");
}

#[test]
fn an_open_base_hears_the_outcomes_of_carrefours_orders() {
    let mut s = FakeSystem::new(2, 2, 4, 64, 1000);
    s.pages.insert((0, 5), 0);
    let mut p = OpenCarrefour::new("open", CarrefourConfig::default(), &env(), recording(0)).unwrap();
    p.on_sample(&sample(0, 5, 1, false));
    let mut out = Vec::new();
    p.on_tick(&busy(1000), &s, &mut out);
    let mv = Decision::MigratePage { space: 0, page: 5, to: 1 };
    assert_eq!(out, vec![mv]);
    p.on_outcomes(&EventRef::Tick, &out, &[Outcome::Applied]);
    assert_eq!(p.counters().iter().find(|c| c.0 == "carrefour_executed_orders"), Some(&("carrefour_executed_orders", 1)));
    // The base is the engine's open base: read its record through the engine.
    let heard = p.engine().open_base().unwrap().counters();
    assert_eq!(heard, vec![("recording_ticks", 1)]);
}

#[test]
fn an_open_base_refuses_a_base_key() {
    let e =
        OpenCarrefour::new("open", CarrefourConfig { base: Some(BaseKind::Round4k), ..CarrefourConfig::default() }, &env(), recording(0))
            .err()
            .unwrap();
    assert!(e.to_string().contains("base = \"round-4k\" names a native static, but this Carrefour runs over recording"), "{e}");
    let e =
        OpenCarrefour::new("open", CarrefourConfig { interval_ms: 0, ..CarrefourConfig::default() }, &env(), recording(0)).err().unwrap();
    assert!(e.to_string().contains("interval_ms must be at least 1"), "{e}");
}

#[test]
fn restricted_spaces_interleave_only_onto_their_nodes() {
    // Four nodes; space 0 restricted to nodes {2, 3}. A page on node 2 sampled from nodes 2
    // and 3 with a store is an interleave candidate (rule 2); whatever the draws, it may only
    // go to node 3.
    let env4 = PolicyEnv::new(Arc::new(presets::load("server-a-4n").unwrap()));
    let mut s = FakeSystem::new(4, 2, 8, 256, 1000);
    // Memory nodes 0 and 2 serve most traffic (MAPTU 320, LAR 25 %): I and M are on.
    let k = 1_000_000;
    let d = vec![vec![40 * k, 5 * k, 30 * k, 5 * k]; 4];
    let mut moved_to = BTreeSet::new();
    for seed in 0..64 {
        let mut p = OpenCarrefour::new("open", CarrefourConfig::default(), &env4.clone().with_seed(seed), recording(2)).unwrap();
        p.restrict_space(0, vec![2, 3]);
        for pg in 0..8 {
            s.pages.insert((0, pg), 2);
            p.on_sample(&sample(0, pg, 2, true));
            p.on_sample(&sample(0, pg, 3, false));
            p.on_sample(&sample(0, pg, 3, false));
        }
        let mut out = Vec::new();
        p.on_tick(&tick_ms(1000, d.clone()), &s, &mut out);
        for o in out {
            if let Decision::MigratePage { to, .. } = o {
                moved_to.insert(to);
            }
        }
    }
    assert_eq!(moved_to, BTreeSet::from([3]), "interleaved only onto the space's other node");
}

proptest::proptest! {
    /// Over a boxed native static, the open Carrefour issues exactly the orders the named
    /// variant issues: opening the base changes where pages are placed, never the page engine.
    #[test]
    fn an_open_base_decides_as_the_named_variant(
        samples in proptest::collection::vec((0u64..16, 0u16..2, proptest::bool::ANY), 0..80),
        homes in proptest::collection::vec(0u16..2, 16),
        seed in 0u64..1000,
    ) {
        let e = env().with_seed(seed);
        let mut named = FirstTouchCarrefour::new(CarrefourConfig::default(), &e).unwrap();
        let base = crate::statics::FirstTouch::new(crate::statics::FirstTouchConfig::default(), &e).unwrap();
        let mut open = OpenCarrefour::new("open", CarrefourConfig::default(), &e, Box::new(base)).unwrap();
        let mut s = FakeSystem::new(2, 2, 4, 16, 1000);
        for (pg, &h) in homes.iter().enumerate() {
            s.pages.insert((0, pg as u64), h);
        }
        for &(pg, node, write) in &samples {
            crate::Policy::on_sample(&mut named, &sample(0, pg, node, write));
            open.on_sample(&sample(0, pg, node, write));
        }
        let (mut a, mut b) = (Vec::new(), Vec::new());
        crate::Policy::on_tick(&mut named, &busy(1000), &s, &mut a);
        open.on_tick(&busy(1000), &s, &mut b);
        proptest::prop_assert_eq!(&a, &b);
        let req = PlaceRequest { space: 0, thread: 1, cpu: 2, cpu_node: 1, page: 0 };
        let mem = crate::testing::FixedMemory::uniform(2, 100);
        proptest::prop_assert_eq!(crate::Policy::place(&mut named, &req, &mem), DynPolicy::place(&mut open, &req, &mem));
    }
}
