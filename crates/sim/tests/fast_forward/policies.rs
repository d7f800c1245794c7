//! The test policies of `fast_forward.rs`: each scripts one kind of event into a run.

/// A policy that places pages by first touch and, at its first tick, moves one page in
/// `every` of space 0 to node `to`.
pub mod holes {
    use numalab_core::NodeId;
    use numalab_policy::{Decision, MemoryState, OutOfMemory, PlaceRequest, Policy, PolicyEnv, PolicyError, SystemView, Tick};
    use serde::{Deserialize, Serialize};

    #[derive(Clone, Debug, Default, Serialize, Deserialize)]
    pub struct Config {
        pub pages: u64,
        pub every: u64,
        pub to: NodeId,
    }

    pub struct Holes {
        config: Config,
        done: bool,
    }

    impl Policy for Holes {
        type Config = Config;
        const NAME: &'static str = "holes";
        const SUMMARY: &'static str = "test only";
        fn new(config: Config, _env: &PolicyEnv) -> Result<Self, PolicyError> {
            Ok(Holes { config, done: false })
        }
        fn config(&self) -> &Config {
            &self.config
        }
        fn place(&mut self, req: &PlaceRequest, _mem: &dyn MemoryState) -> Result<NodeId, OutOfMemory> {
            Ok(req.cpu_node)
        }
        fn on_tick(&mut self, _tick: &Tick, _view: &dyn SystemView, out: &mut Vec<Decision>) {
            if std::mem::replace(&mut self.done, true) {
                return;
            }
            for page in (self.config.every / 2..self.config.pages).step_by(self.config.every as usize) {
                out.push(Decision::MigratePage { space: 0, page, to: self.config.to });
            }
        }
    }
}

/// A policy that arms every page of every space at each tick (a scan step per space, as
/// autonuma's task work does it) and records when each hinting fault happened, in the order
/// the faults reach it.
pub mod fault_clock {
    use numalab_core::NodeId;
    use numalab_policy::{
        Decision, HintFault, MemoryState, OutOfMemory, PageScan, PlaceRequest, Policy, PolicyEnv, PolicyError, SystemView, Tick,
    };
    use serde::{Deserialize, Serialize};
    use std::sync::{Arc, Mutex};

    #[derive(Clone, Debug, Default, Serialize, Deserialize)]
    pub struct Config {
        /// At each fault, also move the next page to the faulting thread's node: a decision
        /// beyond the faulting page.
        #[serde(default)]
        pub migrate_next: bool,
        /// Instead of arming pages: keep per-node mappings, with a page scanner every 5 ms
        /// that drops every mapping it reports, so threads fault on their pages again.
        #[serde(default)]
        pub mappings: bool,
    }

    pub struct FaultClock {
        config: Config,
        pub seen_ns: Arc<Mutex<Vec<u64>>>,
    }

    impl Policy for FaultClock {
        type Config = Config;
        const NAME: &'static str = "fault-clock";
        const SUMMARY: &'static str = "test only";
        fn new(config: Config, _env: &PolicyEnv) -> Result<Self, PolicyError> {
            Ok(FaultClock { config, seen_ns: Arc::default() })
        }
        fn config(&self) -> &Config {
            &self.config
        }
        fn place(&mut self, req: &PlaceRequest, _mem: &dyn MemoryState) -> Result<NodeId, OutOfMemory> {
            Ok(req.cpu_node)
        }
        fn page_scanner_period_ns(&self) -> Option<u64> {
            self.config.mappings.then_some(5_000_000)
        }
        fn on_page_scan(&mut self, scan: &PageScan, _view: &dyn SystemView, out: &mut Vec<Decision>) {
            for p in &scan.pages {
                out.push(Decision::DropMappings { space: p.space, page: p.page, keep: None });
            }
        }
        fn on_tick(&mut self, _tick: &Tick, view: &dyn SystemView, out: &mut Vec<Decision>) {
            if self.config.mappings {
                return;
            }
            for space in 0..view.spaces() {
                let thread = view.space_threads(space).start;
                out.push(Decision::ScanStep { space, thread, pages: 1 << 20 });
            }
        }
        fn on_hint_fault(&mut self, fault: &HintFault, _view: &dyn SystemView, out: &mut Vec<Decision>) {
            self.seen_ns.lock().unwrap().push(fault.time_ns);
            if self.config.migrate_next {
                out.push(Decision::MigratePage { space: fault.space, page: fault.page + 1, to: fault.cpu_node });
            }
        }
    }
}
