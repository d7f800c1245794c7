//! The roofline model with one bandwidth ceiling per memory tier (docs/model.md §5).
//!
//! ```text
//! P_att(I) = min(P_peak, B_tier · I)        attainable GFLOP/s at arithmetic intensity I (flop/B)
//! I*_tier  = P_peak / B_tier                ridge point
//! gain     = P_att,fast(I) / P_att,slow(I)  expected gain of moving from a slow to a fast tier
//! ```
//!
//! Bandwidths are GB/s (10^9 B/s), so `B·I` is in GFLOP/s. A tier's ceiling is the sum of the
//! bandwidths of the machine's memory nodes of that tier (the whole-machine roofline, to go with
//! the whole-machine `peak_gflops_dp`).

use crate::error::ModelError;
use numalab_core::{Machine, Tier};

/// Attainable performance `min(P_peak, B·I)` (GFLOP/s).
pub fn attainable(peak_gflops: f64, bw_gbps: f64, ai: f64) -> f64 {
    peak_gflops.min(bw_gbps * ai)
}

/// Ridge point `P_peak / B` (flop/B).
pub fn ridge(peak_gflops: f64, bw_gbps: f64) -> f64 {
    peak_gflops / bw_gbps
}

/// Expected gain of moving from a tier with bandwidth `slow_gbps` to one with `fast_gbps`.
pub fn gain(peak_gflops: f64, slow_gbps: f64, fast_gbps: f64, ai: f64) -> f64 {
    attainable(peak_gflops, fast_gbps, ai) / attainable(peak_gflops, slow_gbps, ai)
}

/// Which ceiling limits a kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Bound {
    Memory,
    Compute,
}

impl Bound {
    pub fn as_str(self) -> &'static str {
        match self {
            Bound::Memory => "memory",
            Bound::Compute => "compute",
        }
    }
}

/// Which bandwidth figure of a node makes the ceiling.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum BandwidthKind {
    /// Nominal peak (`mem_peak_gbps`, falling back to the sustained figure when absent). The
    /// The test vectors of docs/model.md §5 use these.
    #[default]
    Peak,
    /// Sustained (`mem_bw_gbps`).
    Sustained,
}

impl BandwidthKind {
    pub fn as_str(self) -> &'static str {
        match self {
            BandwidthKind::Peak => "peak",
            BandwidthKind::Sustained => "sustained",
        }
    }
}

/// One tier's bandwidth ceiling.
#[derive(Clone, Debug, PartialEq)]
pub struct TierCeiling {
    pub tier: Tier,
    /// Memory nodes of the tier.
    pub nodes: Vec<u32>,
    pub bw_gbps: f64,
}

/// A machine's roofline: the compute ceiling and one bandwidth ceiling per tier, slowest first.
#[derive(Clone, Debug, PartialEq)]
pub struct Roofline {
    pub peak_gflops: f64,
    pub tiers: Vec<TierCeiling>,
}

impl Roofline {
    /// Build from explicit ceilings (sorted by bandwidth, slowest first).
    pub fn new(peak_gflops: f64, mut tiers: Vec<TierCeiling>) -> Result<Roofline, ModelError> {
        if !(peak_gflops.is_finite() && peak_gflops > 0.0) {
            return Err(ModelError::param("peak_gflops", peak_gflops, "must be finite and > 0"));
        }
        if tiers.is_empty() {
            return Err(ModelError::InvalidParameter {
                name: "tiers".to_string(),
                value: 0.0,
                problem: "a roofline needs at least one memory tier".to_string(),
            });
        }
        for t in &tiers {
            if !(t.bw_gbps.is_finite() && t.bw_gbps > 0.0) {
                return Err(ModelError::InvalidParameter {
                    name: format!("bandwidth of tier {}", t.tier.as_str()),
                    value: t.bw_gbps,
                    problem: "must be finite and > 0".to_string(),
                });
            }
        }
        tiers.sort_by(|a, b| a.bw_gbps.total_cmp(&b.bw_gbps).then(a.tier.cmp(&b.tier)));
        Ok(Roofline { peak_gflops, tiers })
    }

    /// The machine's roofline. `peak_override` replaces (or supplies a missing)
    /// `peak_gflops_dp`.
    pub fn from_machine(m: &Machine, kind: BandwidthKind, peak_override: Option<f64>) -> Result<Roofline, ModelError> {
        let peak = peak_override.or(m.peak_gflops_dp).ok_or_else(|| ModelError::MachineLacks {
            machine: m.name.clone(),
            field: "peak_gflops_dp",
            what: "compute ceiling",
        })?;
        let mut tiers: Vec<TierCeiling> = Vec::new();
        for (i, node) in m.nodes.iter().enumerate() {
            if node.mem_bytes == 0 {
                continue;
            }
            let bw = match kind {
                BandwidthKind::Peak => node.mem_peak_gbps.unwrap_or(node.mem_bw_gbps),
                BandwidthKind::Sustained => node.mem_bw_gbps,
            };
            match tiers.iter_mut().find(|t| t.tier == node.tier) {
                Some(t) => {
                    t.nodes.push(i as u32);
                    t.bw_gbps += bw;
                }
                None => tiers.push(TierCeiling { tier: node.tier, nodes: vec![i as u32], bw_gbps: bw }),
            }
        }
        Roofline::new(peak, tiers).map_err(|e| ModelError::Machine { machine: m.name.clone(), problem: e.to_string() })
    }

    pub fn tier_index(&self, tier: Tier) -> Option<usize> {
        self.tiers.iter().position(|t| t.tier == tier)
    }

    /// `P_att` on tier `idx` (GFLOP/s).
    pub fn attainable(&self, idx: usize, ai: f64) -> f64 {
        attainable(self.peak_gflops, self.tiers[idx].bw_gbps, ai)
    }

    /// Ridge point of tier `idx` (flop/B).
    pub fn ridge(&self, idx: usize) -> f64 {
        ridge(self.peak_gflops, self.tiers[idx].bw_gbps)
    }

    /// Memory-bound below the ridge point, compute-bound at or above it.
    pub fn bound(&self, idx: usize, ai: f64) -> Bound {
        if ai < self.ridge(idx) {
            Bound::Memory
        } else {
            Bound::Compute
        }
    }

    /// Gain of moving from tier `slow` to tier `fast`.
    pub fn gain(&self, slow: usize, fast: usize, ai: f64) -> f64 {
        self.attainable(fast, ai) / self.attainable(slow, ai)
    }

    pub fn slowest(&self) -> usize {
        0
    }

    pub fn fastest(&self) -> usize {
        self.tiers.len() - 1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64) -> bool {
        ((a - b) / b).abs() < 1e-9
    }

    fn knl() -> Roofline {
        let m = numalab_core::machine::presets::load("knl-7250-flat").unwrap();
        Roofline::from_machine(&m, BandwidthKind::Peak, None).unwrap()
    }

    #[test]
    fn hydm_vectors() {
        let r = knl();
        assert_eq!(r.peak_gflops, 3046.4);
        let ddr = r.tier_index(Tier::Dram).unwrap();
        let mc = r.tier_index(Tier::Mcdram).unwrap();
        assert_eq!((ddr, mc), (r.slowest(), r.fastest()));
        assert!(close(r.attainable(ddr, 1.0), 100.0));
        assert!(close(r.attainable(mc, 1.0), 400.0));
        assert!(close(r.attainable(mc, 10.0), 3046.4));
        assert!(close(r.attainable(ddr, 50.0), 3046.4));
        assert!(close(r.gain(ddr, mc, 1.0), 4.0));
        assert!(close(r.gain(ddr, mc, 20.0), 1.5232));
        // Ridge points of the tier table: 30.46 and 7.62 flop/B (printed to 2 decimals).
        assert!((r.ridge(ddr) - 30.46).abs() <= 0.005);
        assert!((r.ridge(mc) - 7.62).abs() <= 0.005);
        assert_eq!(r.bound(mc, 7.0), Bound::Memory);
        assert_eq!(r.bound(mc, 8.0), Bound::Compute);
    }

    #[test]
    fn gain_regimes() {
        let r = knl();
        // I <= I*_fast: B_f / B_s; I >= I*_slow: 1.
        assert!(close(r.gain(0, 1, 7.0), 4.0));
        assert!(close(r.gain(0, 1, 31.0), 1.0));
        let g = r.gain(0, 1, 15.0);
        assert!(g > 1.0 && g < 4.0);
    }

    #[test]
    fn sustained_bandwidth_uses_mem_bw() {
        let m = numalab_core::machine::presets::load("knl-7250-flat").unwrap();
        let r = Roofline::from_machine(&m, BandwidthKind::Sustained, None).unwrap();
        assert_eq!(r.tiers[0].bw_gbps, 88.4);
        assert_eq!(r.tiers[1].bw_gbps, 350.0);
    }

    #[test]
    fn tiers_sum_their_nodes() {
        let m = numalab_core::machine::presets::load("gp1000").unwrap();
        let e = Roofline::from_machine(&m, BandwidthKind::Peak, None).unwrap_err();
        assert_eq!(e.to_string(), "machine 'gp1000': no compute ceiling (peak_gflops_dp); give it explicitly");
        let r = Roofline::from_machine(&m, BandwidthKind::Peak, Some(0.1)).unwrap();
        assert_eq!(r.tiers.len(), 1);
        assert_eq!(r.tiers[0].nodes.len(), 8);
        let per_node = m.nodes[0].mem_bw_gbps;
        assert!((r.tiers[0].bw_gbps - 8.0 * per_node).abs() < 1e-12);
    }

    #[test]
    fn rejects_bad_ceilings() {
        let e = Roofline::new(0.0, vec![]).unwrap_err();
        assert!(e.to_string().contains("'peak_gflops' = 0"), "{e}");
        let e = Roofline::new(1.0, vec![TierCeiling { tier: Tier::Dram, nodes: vec![0], bw_gbps: 0.0 }]).unwrap_err();
        assert!(e.to_string().contains("bandwidth of tier dram"), "{e}");
    }
}
