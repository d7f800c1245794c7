//! Ping-pong of threads between nodes (docs/metrics.md, `pingpong_returns`): a cross-node
//! migration whose thread's next cross-node migration takes it back to the node it left. The
//! round trip's length goes into a histogram with fixed edges.

use numalab_core::NodeId;
use serde::{Deserialize, Serialize};

/// Upper edges of the round-trip histogram, seconds; the last bin is open.
pub const INTERVAL_EDGES_S: [f64; 6] = [0.001, 0.01, 0.1, 1.0, 10.0, 100.0];

/// Round-trip times: `counts[k]` trips took less than `edges_s[k]` (and at least the previous
/// edge); `counts[edges_s.len()]` took 100 s or more.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct IntervalHistogram {
    pub edges_s: Vec<f64>,
    pub counts: Vec<u64>,
}

#[derive(Clone, Debug)]
pub struct PingPong {
    /// Per thread: the node it left in its last cross-node migration and when.
    last_departure: Vec<Option<(NodeId, f64)>>,
    pub returns: u64,
    counts: Vec<u64>,
}

impl PingPong {
    pub fn new(threads: usize) -> PingPong {
        PingPong { last_departure: vec![None; threads], returns: 0, counts: vec![0; INTERVAL_EDGES_S.len() + 1] }
    }

    /// A thread moved from node `from` to node `to` at `at_ns`.
    pub fn record(&mut self, thread: usize, from: NodeId, to: NodeId, at_ns: f64) {
        if from == to {
            return;
        }
        if let Some((left, when)) = self.last_departure[thread] {
            if left == to {
                self.returns += 1;
                let s = (at_ns - when) / 1e9;
                let bin = INTERVAL_EDGES_S.iter().position(|&e| s < e).unwrap_or(INTERVAL_EDGES_S.len());
                self.counts[bin] += 1;
            }
        }
        self.last_departure[thread] = Some((from, at_ns));
    }

    pub fn histogram(&self) -> IntervalHistogram {
        IntervalHistogram { edges_s: INTERVAL_EDGES_S.to_vec(), counts: self.counts.clone() }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_return_to_the_node_left_is_counted_with_its_round_trip() {
        let mut p = PingPong::new(2);
        p.record(0, 0, 1, 0.0);
        p.record(0, 1, 2, 1e6);
        assert_eq!(p.returns, 0, "0 -> 1 -> 2 is no return");
        p.record(0, 2, 1, 3e6);
        assert_eq!(p.returns, 1, "2 -> 1 returns to the node left 2 ms earlier");
        p.record(1, 0, 1, 0.0);
        p.record(1, 1, 0, 5e8);
        p.record(1, 0, 1, 5e8 + 2e10);
        assert_eq!(p.returns, 3);
        let h = p.histogram();
        assert_eq!(h.counts, vec![0, 1, 0, 1, 0, 1, 0], "2 ms, 0.5 s and 20 s round trips");
        assert_eq!(h.counts.len(), h.edges_s.len() + 1);
    }

    #[test]
    fn moves_within_a_node_are_not_trips() {
        let mut p = PingPong::new(1);
        p.record(0, 1, 1, 0.0);
        p.record(0, 1, 1, 1.0);
        assert_eq!(p.returns, 0);
    }
}
