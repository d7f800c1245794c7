//! What the live agent observes of a program's memory accesses (docs/live.md, "Observing
//! accesses"): one trait, several samplers, each saying what it cannot see.

use serde::{Deserialize, Serialize};

/// One observed memory access.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Observation {
    /// Kernel thread id (`gettid`) of the accessing thread.
    pub tid: i32,
    /// CPU the access ran on (kernel CPU number).
    pub cpu: u32,
    /// Kernel node id of that CPU.
    pub cpu_node: u32,
    /// Virtual address accessed.
    pub addr: u64,
    /// Kernel node id of the page, when the observer knows it (a hardware sampler does not:
    /// the agent then asks `move_pages`).
    pub page_node: Option<u32>,
    pub write: bool,
    /// Nanoseconds since the agent started.
    pub time_ns: u64,
}

/// One address range an accessor-less monitor (DAMON) reported: how often it was found
/// accessed in the last aggregation interval. The engine hands its numbered pages to the
/// policy's `on_region_heat` (docs/live.md, "Region heat").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RegionAccess {
    pub start: u64,
    /// Exclusive.
    pub end: u64,
    pub nr_accesses: u32,
    /// Checks per aggregation interval (`nr_accesses`'s largest value).
    pub max_accesses: u32,
    pub age: u32,
}

/// Why an observer cannot run or stopped.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ObserveError {
    /// The sampler cannot work on this host; the text says exactly why.
    #[error("{sampler}: {reason}")]
    Unavailable { sampler: &'static str, reason: String },
    /// It worked and then failed.
    #[error("{sampler}: {reason}")]
    Failed { sampler: &'static str, reason: String },
}

/// A source of access observations, polled once per agent period.
///
/// An observation names the accessing thread and CPU because the policy hooks it becomes
/// (hinting faults, access samples) carry them. A sampler that cannot name them (DAMON: per
/// region access frequency only) appends no observation rather than a made-up accessor, and
/// gives what it saw through [`AccessObserver::counters`] and [`AccessObserver::report`]
/// (docs/live.md, "The DAMON sampler").
pub trait AccessObserver {
    /// Its name for `--sampler` and the summary.
    fn name(&self) -> &'static str;
    /// What it cannot see (for the summary and docs/live.md).
    fn limits(&self) -> &'static str;
    /// Append the accesses observed since the last poll, oldest first.
    fn poll(&mut self, out: &mut Vec<Observation>) -> Result<(), ObserveError>;
    /// The sampler's own counters, by name, for the summary (none by default).
    fn counters(&self) -> Vec<(&'static str, u64)> {
        Vec::new()
    }
    /// What the sampler saw that is no observation, for the JSON (`sampler_report`; DAMON:
    /// its last regions); none by default.
    fn report(&self) -> Option<serde_json::Value> {
        None
    }
    /// Pages the observer can be asked to watch at a time ([`AccessObserver::arm`]); 0: it
    /// watches what it chooses (the default).
    fn arm_capacity(&self) -> usize {
        0
    }
    /// Watch these page addresses (ascending, at most `arm_capacity`) in place of the previous
    /// set: the engine's marked pages, so that an observed access to one is the fault Linux's
    /// scanner would have caused (docs/live.md, "The agent chooses the protected pages").
    /// `false`: not taken now (ask again later).
    fn arm(&mut self, _addrs: &[u64]) -> bool {
        false
    }
    /// Append address ranges `[lo, hi)` whose pages it can never watch (any order, may
    /// overlap): the engine leaves them out of what it hands [`AccessObserver::arm`]. None by
    /// default.
    fn unwatchable(&mut self, _out: &mut Vec<(u64, u64)>) {}
    /// The regions of an update the last poll made, once each (DAMON: every non-empty
    /// update); none by default.
    fn take_regions(&mut self, _out: &mut Vec<RegionAccess>) {}
}

/// Plays back a fixed stream, one batch per poll (tests, and replays of recorded streams).
#[derive(Clone, Debug, Default)]
pub struct ScriptedObserver {
    pub rounds: std::collections::VecDeque<Vec<Observation>>,
    /// Pages it accepts to watch (0: it takes no [`AccessObserver::arm`] request), and the
    /// sets it was asked to watch, in order (tests).
    pub arm_capacity: usize,
    pub armed: Vec<Vec<u64>>,
    /// Ranges it says it cannot watch ([`AccessObserver::unwatchable`]).
    pub unwatchable: Vec<(u64, u64)>,
    /// Regions to hand out, one batch per poll (tests of region heat).
    pub region_rounds: std::collections::VecDeque<Vec<RegionAccess>>,
    regions_due: Vec<RegionAccess>,
}

impl ScriptedObserver {
    pub fn new(rounds: Vec<Vec<Observation>>) -> ScriptedObserver {
        ScriptedObserver { rounds: rounds.into(), ..Default::default() }
    }

    /// A replay file: one JSON array of observations per line, one line per period
    /// (docs/live.md, "Replaying observations"). Errors name the line.
    pub fn from_json_lines(text: &str) -> Result<ScriptedObserver, String> {
        let mut rounds = Vec::new();
        for (i, line) in text.lines().enumerate() {
            if line.trim().is_empty() {
                continue;
            }
            rounds.push(serde_json::from_str(line).map_err(|e| format!("line {}: {e}", i + 1))?);
        }
        Ok(ScriptedObserver::new(rounds))
    }
}

impl AccessObserver for ScriptedObserver {
    fn name(&self) -> &'static str {
        "scripted"
    }
    fn limits(&self) -> &'static str {
        "sees exactly the accesses it was given"
    }
    fn poll(&mut self, out: &mut Vec<Observation>) -> Result<(), ObserveError> {
        out.extend(self.rounds.pop_front().unwrap_or_default());
        self.regions_due = self.region_rounds.pop_front().unwrap_or_default();
        Ok(())
    }
    fn take_regions(&mut self, out: &mut Vec<RegionAccess>) {
        out.append(&mut self.regions_due);
    }
    fn arm_capacity(&self) -> usize {
        self.arm_capacity
    }
    fn arm(&mut self, addrs: &[u64]) -> bool {
        if self.arm_capacity == 0 {
            return false;
        }
        self.armed.push(addrs.to_vec());
        true
    }
    fn unwatchable(&mut self, out: &mut Vec<(u64, u64)>) {
        out.extend_from_slice(&self.unwatchable);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_replay_file_is_one_period_per_line() {
        let text = r#"[{"tid":7,"cpu":1,"cpu_node":0,"addr":4096,"page_node":null,"write":false,"time_ns":5}]

[]
"#;
        let mut o = ScriptedObserver::from_json_lines(text).unwrap();
        let mut out = Vec::new();
        o.poll(&mut out).unwrap();
        assert_eq!(out, vec![Observation { tid: 7, cpu: 1, cpu_node: 0, addr: 4096, page_node: None, write: false, time_ns: 5 }]);
        assert_eq!(o.rounds.len(), 1);
        let e = ScriptedObserver::from_json_lines("[]\n[{\"tid\":1}]").unwrap_err();
        assert!(e.starts_with("line 2: missing field"), "{e}");
    }
}
