//! The local/remote NUMA machine model of docs/model.md §2: one process per node alternating
//! between computing (mean `tau`) and one memory reference, local with probability `p_l`.
//!
//! Provenance (tags of the spec): the queue structure and equations (1)–(4) are stated by the
//! seed **[S]**; the form of `R_f` (5) and the whole wait-time solution of §4 are the spec's
//! reconstruction **[R]**. The regression vectors of §8(b) test that reconstruction, not the
//! seed's lost equations. Time unit: microseconds.
//!
//! [`solve`] allocates nothing and converges in a few dozen iterations.

use crate::error::ModelError;
use numalab_core::Machine;

/// How the network ports (queues A and C) are modelled.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum NetworkMode {
    /// No waiting at the network ports, `w_n = 0` (spec default).
    #[default]
    Delay,
    /// Ports are queues: `w_n = t_x·X·p_r·(w_n + t_x)` [R].
    Queue,
}

impl NetworkMode {
    pub fn as_str(self) -> &'static str {
        match self {
            NetworkMode::Delay => "delay",
            NetworkMode::Queue => "queue",
        }
    }
}

/// Hardware parameters (docs/model.md §2.1). Times in microseconds.
#[derive(Clone, Debug, PartialEq)]
pub struct Hardware {
    /// Nodes `n` (processor + memory module each).
    pub nodes: u32,
    /// Memory service time of one reference, `t_l`.
    pub t_l: f64,
    /// Network transfer time of a short message, `t_x` (uncontended remote time is `2 t_x + t_l`).
    pub t_x: f64,
    /// Migration, replication and coherency-fault costs `C_mig`, `C_rep`, `C_coh`.
    pub c_mig: f64,
    pub c_rep: f64,
    pub c_coh: f64,
    /// Multiplies all three fault costs (and the break-even counts derived from them).
    pub cost_scale: f64,
    pub network: NetworkMode,
    /// Optional page-copy load `b·t_bm` added to the module queues per migration/replication
    /// (§4, [D], off when 0; not used by the test vectors).
    pub copy_time: f64,
}

impl Hardware {
    /// The GP1000 values of docs/model.md §2.1: `n = 8`, `t_l = 0.6`, `t_x = 3.45` [R],
    /// `C_mig = 4500`, `C_rep = 4600`, `C_coh = 2100`.
    pub fn gp1000() -> Hardware {
        Hardware {
            nodes: 8,
            t_l: 0.6,
            t_x: 3.45,
            c_mig: 4500.0,
            c_rep: 4600.0,
            c_coh: 2100.0,
            cost_scale: 1.0,
            network: NetworkMode::Delay,
            copy_time: 0.0,
        }
    }

    /// Derive the parameters from a machine preset: `n` = number of nodes, `t_l` = local
    /// latency, `t_x` = half the remote-minus-local latency (so that `2 t_x + t_l` is the remote
    /// latency; the mean over node pairs when the machine is not uniform), fault costs from
    /// `costs_ms`. `costs_us` replaces missing `costs_ms` (order: migrate, replicate, coherency).
    ///
    /// Returns the parameters and notes on approximations made (non-uniform remote latency).
    pub fn from_machine(m: &Machine, costs_us: Option<[f64; 3]>) -> Result<(Hardware, Vec<String>), ModelError> {
        let err = |problem: String| ModelError::Machine { machine: m.name.clone(), problem };
        let n = m.nodes.len();
        if let Some(i) = m.nodes.iter().position(|nd| nd.cores == 0 || nd.mem_bytes == 0) {
            return Err(err(format!(
                "node {i} lacks CPUs or memory; the local/remote model needs a processor and a memory module on every node"
            )));
        }
        let mut notes = Vec::new();
        let local: f64 = (0..n).map(|i| m.latency_ns[i][i]).sum::<f64>() / n as f64 / 1000.0;
        let (mut lo, mut hi, mut sum) = (f64::INFINITY, 0.0f64, 0.0);
        for i in 0..n {
            for j in 0..n {
                if i != j {
                    let v = m.latency_ns[i][j] / 1000.0;
                    lo = lo.min(v);
                    hi = hi.max(v);
                    sum += v;
                }
            }
        }
        let remote = if n > 1 { sum / (n * (n - 1)) as f64 } else { local };
        if n > 1 && hi - lo > 1e-9 * hi {
            notes.push(format!("remote latency is not uniform ({lo}..{hi} us); the model uses the mean, {remote:.4} us"));
        }
        let (c_mig, c_rep, c_coh) = match (m.costs_ms, costs_us) {
            (_, Some([a, b, c])) => (a, b, c),
            (Some(c), None) => (c.migrate * 1000.0, c.replicate * 1000.0, c.coherency_fault * 1000.0),
            (None, None) => {
                return Err(ModelError::MachineLacks {
                    machine: m.name.clone(),
                    field: "costs_ms",
                    what: "migration, replication and coherency-fault costs",
                })
            }
        };
        let hw = Hardware {
            nodes: n as u32,
            t_l: local,
            t_x: (remote - local) / 2.0,
            c_mig,
            c_rep,
            c_coh,
            cost_scale: 1.0,
            network: NetworkMode::Delay,
            copy_time: 0.0,
        };
        hw.validate()?;
        Ok((hw, notes))
    }

    /// Combine local read and write times by the read fraction `f_r` (§2.1 [D]).
    pub fn mixed_local_time(f_r: f64, t_lr: f64, t_lw: f64) -> f64 {
        f_r * t_lr + (1.0 - f_r) * t_lw
    }

    /// Uncontended remote penalty `Δ = (2 t_x + t_l) − t_l`.
    pub fn remote_penalty(&self) -> f64 {
        2.0 * self.t_x
    }

    /// Check ranges: `n ≥ 1`, times finite and ≥ 0 (`t_l > 0`), `cost_scale ≥ 0`.
    pub fn validate(&self) -> Result<(), ModelError> {
        if self.nodes == 0 {
            return Err(ModelError::param("n", 0.0, "need at least one node"));
        }
        if !(self.t_l.is_finite() && self.t_l > 0.0) {
            return Err(ModelError::param("t_l", self.t_l, "must be finite and > 0"));
        }
        for (name, v) in [
            ("t_x", self.t_x),
            ("c_mig", self.c_mig),
            ("c_rep", self.c_rep),
            ("c_coh", self.c_coh),
            ("cost_scale", self.cost_scale),
            ("copy_time", self.copy_time),
        ] {
            if !(v.is_finite() && v >= 0.0) {
                return Err(ModelError::param(name, v, "must be finite and >= 0"));
            }
        }
        Ok(())
    }
}

/// Per-reference software parameters (§2.2): compute time and the reference/fault mix.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RefMix {
    /// Mean compute time between references, `tau` (us).
    pub tau: f64,
    /// Probability that a reference is local.
    pub p_l: f64,
    /// Per-reference probabilities of a migration, replication and coherency fault.
    pub q_m: f64,
    pub q_r: f64,
    pub q_c: f64,
    /// Other faults (first touch, ...) per reference and their mean cost (us) [D]; 0 by default.
    pub q_o: f64,
    pub c_o: f64,
}

impl RefMix {
    /// A mix with only local/remote references and no faults.
    pub fn plain(tau: f64, p_l: f64) -> RefMix {
        RefMix { tau, p_l, q_m: 0.0, q_r: 0.0, q_c: 0.0, q_o: 0.0, c_o: 0.0 }
    }
}

/// Solution of the local/remote model for one mix.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Solution {
    /// Mean time between successive references of one processor, `R = tau + R_r + R_f` (us).
    pub r: f64,
    /// Memory part `R_r = p_l T_l + p_r T_r`.
    pub r_r: f64,
    /// Fault part `R_f`.
    pub r_f: f64,
    /// Local reference time `T_l = w_l + t_l`.
    pub t_local: f64,
    /// Remote reference time `T_r = 2 w_n + 2 t_x + w_r + t_l`.
    pub t_remote: f64,
    pub w_l: f64,
    pub w_r: f64,
    pub w_n: f64,
    /// Reference rate per processor, `X = 1/R` (per us).
    pub x: f64,
    pub iterations: u32,
}

/// Convergence threshold on the waits, `max|Δw|` (§4).
pub const WAIT_TOL: f64 = 1e-12;
/// Iteration cap of the wait fixed point (§4).
pub const WAIT_MAX_ITER: u32 = 10_000;

/// Solve equations (1)–(5) with the §4 waits by fixed-point iteration [R]. No allocation.
pub fn solve(hw: &Hardware, mix: &RefMix) -> Result<Solution, ModelError> {
    check_mix(hw, mix)?;
    let n = hw.nodes;
    let p_l = mix.p_l;
    let p_r = if n == 1 { 0.0 } else { (1.0 - p_l).max(0.0) };
    let t_l = hw.t_l;
    let t_x = hw.t_x;
    let r_f = hw.cost_scale * (mix.q_m * hw.c_mig + mix.q_r * hw.c_rep + mix.q_c * hw.c_coh) + mix.q_o * mix.c_o;
    let others = if n > 1 { (n as f64 - 2.0) / (n as f64 - 1.0) } else { 0.0 };
    let copy = (mix.q_m + mix.q_r) * hw.copy_time;
    let (mut w_l, mut w_r, mut w_n) = (0.0f64, 0.0f64, 0.0f64);
    let mut residual = f64::INFINITY;
    for it in 1..=WAIT_MAX_ITER {
        let t_local = w_l + t_l;
        let t_remote = 2.0 * w_n + 2.0 * t_x + w_r + t_l;
        let r = mix.tau + p_l * t_local + p_r * t_remote + r_f;
        let x = 1.0 / r;
        let q_own = x * p_l * (w_l + t_l);
        let q_in = x * p_r * (w_r + t_l) + x * copy;
        let nl = t_l * q_in;
        let nr = if n > 1 { t_l * (q_own + q_in * others) } else { 0.0 };
        let nn = match hw.network {
            NetworkMode::Delay => 0.0,
            NetworkMode::Queue => t_x * x * p_r * (w_n + t_x),
        };
        residual = (nl - w_l).abs().max((nr - w_r).abs()).max((nn - w_n).abs());
        w_l = nl;
        w_r = nr;
        w_n = nn;
        if residual < WAIT_TOL {
            let t_local = w_l + t_l;
            let t_remote = 2.0 * w_n + 2.0 * t_x + w_r + t_l;
            let r_r = p_l * t_local + p_r * t_remote;
            let r = mix.tau + r_r + r_f;
            return Ok(Solution { r, r_r, r_f, t_local, t_remote, w_l, w_r, w_n, x: 1.0 / r, iterations: it });
        }
    }
    Err(ModelError::NoConvergence { solver: "local/remote wait iteration", iterations: WAIT_MAX_ITER as u64, residual })
}

fn check_mix(hw: &Hardware, mix: &RefMix) -> Result<(), ModelError> {
    if !(mix.tau.is_finite() && mix.tau >= 0.0) {
        return Err(ModelError::param("tau", mix.tau, "must be finite and >= 0"));
    }
    if !(0.0..=1.0).contains(&mix.p_l) {
        return Err(ModelError::param("p_l", mix.p_l, "must lie in [0, 1]"));
    }
    if hw.nodes == 1 && 1.0 - mix.p_l > 1e-9 {
        return Err(ModelError::param("p_l", mix.p_l, "a 1-node machine has no remote memory; p_l must be 1"));
    }
    for (name, v) in [("q_m", mix.q_m), ("q_r", mix.q_r), ("q_c", mix.q_c), ("q_o", mix.q_o), ("c_o", mix.c_o)] {
        if !(v.is_finite() && v >= 0.0) {
            return Err(ModelError::param(name, v, "must be finite and >= 0"));
        }
    }
    if mix.tau + hw.t_l <= 0.0 {
        return Err(ModelError::param("tau", mix.tau, "tau + t_l must be > 0"));
    }
    Ok(())
}

/// The generic-MVA network equivalent to the §4 model in Delay mode (required equivalence
/// check): `n` classes of one customer, `n` module queues; class `c` asks `p_l·t_l` of module
/// `c` and `p_r·t_l/(n−1)` of every other module; think time `tau + R_f + 2 p_r t_x`.
pub fn equivalent_network(hw: &Hardware, mix: &RefMix) -> Result<crate::mva::Network, ModelError> {
    check_mix(hw, mix)?;
    let n = hw.nodes as usize;
    let p_r = 1.0 - mix.p_l;
    let r_f = hw.cost_scale * (mix.q_m * hw.c_mig + mix.q_r * hw.c_rep + mix.q_c * hw.c_coh) + mix.q_o * mix.c_o;
    let remote_each = if n > 1 { p_r * hw.t_l / (n as f64 - 1.0) } else { 0.0 };
    let demands: Vec<Vec<f64>> = (0..n).map(|k| (0..n).map(|c| if k == c { mix.p_l * hw.t_l } else { remote_each }).collect()).collect();
    crate::mva::Network::new(vec![crate::mva::StationKind::Queue; n], &demands, vec![1; n], vec![mix.tau + r_f + 2.0 * p_r * hw.t_x; n])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::assert_printed;

    fn hw16(network: NetworkMode) -> Hardware {
        Hardware { nodes: 16, network, ..Hardware::gp1000() }
    }

    #[test]
    fn all_local_is_tau_plus_t_l() {
        let s = solve(&hw16(NetworkMode::Delay), &RefMix::plain(2.0, 1.0)).unwrap();
        assert_printed(s.r, "2.600");
        assert_eq!(s.w_l, 0.0);
    }

    #[test]
    fn static_sixteenth_delay() {
        let s = solve(&hw16(NetworkMode::Delay), &RefMix::plain(2.0, 1.0 / 16.0)).unwrap();
        assert_printed(s.r, "9.10824");
        assert_printed(s.w_l, "0.039493");
        assert_printed(s.w_r, "0.039493");
        assert_printed(s.t_remote, "7.53949");
        assert!(s.iterations < 100, "{}", s.iterations);
    }

    #[test]
    fn half_local_delay() {
        let s = solve(&hw16(NetworkMode::Delay), &RefMix::plain(2.0, 0.5)).unwrap();
        assert_printed(s.r, "6.09703");
        assert_printed(s.w_l, "0.032549");
        assert_printed(s.w_r, "0.061503");
    }

    #[test]
    fn mostly_local_with_migrations() {
        let mix = RefMix { q_m: 1e-5, ..RefMix::plain(2.0, 0.99) };
        let s = solve(&hw16(NetworkMode::Delay), &mix).unwrap();
        assert_printed(s.r, "2.71693");
        assert!((s.r_f - 0.045).abs() < 1e-12);
    }

    #[test]
    fn static_sixteenth_queue_network() {
        let s = solve(&hw16(NetworkMode::Queue), &RefMix::plain(2.0, 1.0 / 16.0)).unwrap();
        assert_printed(s.r, "11.60025");
        assert_printed(s.w_n, "1.33382");
    }

    #[test]
    fn equals_generic_schweitzer_in_delay_mode() {
        for (n, p_l, q_m) in [(16, 1.0 / 16.0, 0.0), (16, 0.5, 0.0), (8, 0.3, 2e-5), (2, 0.7, 0.0), (3, 0.0, 1e-4)] {
            let hw = Hardware { nodes: n, ..Hardware::gp1000() };
            let mix = RefMix { q_m, ..RefMix::plain(2.0, p_l) };
            let s = solve(&hw, &mix).unwrap();
            let net = equivalent_network(&hw, &mix).unwrap();
            let g = crate::mva::schweitzer(&net, crate::mva::ApproxOptions::default()).unwrap();
            for c in 0..n as usize {
                assert!((1.0 / g.x(c) - s.r).abs() < 1e-9, "n={n} p_l={p_l}: {} vs {}", 1.0 / g.x(c), s.r);
            }
        }
    }

    #[test]
    fn one_node_needs_all_local() {
        let hw = Hardware { nodes: 1, ..Hardware::gp1000() };
        let s = solve(&hw, &RefMix::plain(2.0, 1.0)).unwrap();
        assert!((s.r - 2.6).abs() < 1e-12);
        assert_eq!(s.w_r, 0.0);
        let e = solve(&hw, &RefMix::plain(2.0, 0.5)).unwrap_err();
        assert!(e.to_string().contains("1-node machine has no remote memory"), "{e}");
    }

    #[test]
    fn bad_inputs_are_rejected() {
        let hw = Hardware::gp1000();
        let e = solve(&hw, &RefMix::plain(-1.0, 1.0)).unwrap_err();
        assert_eq!(e.to_string(), "parameter 'tau' = -1: must be finite and >= 0");
        let e = solve(&hw, &RefMix::plain(2.0, 1.5)).unwrap_err();
        assert!(e.to_string().contains("'p_l' = 1.5: must lie in [0, 1]"), "{e}");
        let e = solve(&hw, &RefMix { q_c: f64::NAN, ..RefMix::plain(2.0, 1.0) }).unwrap_err();
        assert!(e.to_string().contains("'q_c'"), "{e}");
    }

    #[test]
    fn cost_scale_multiplies_fault_costs() {
        let mix = RefMix { q_m: 1e-4, q_r: 2e-5, q_c: 1e-5, ..RefMix::plain(2.0, 1.0) };
        let a = solve(&Hardware::gp1000(), &mix).unwrap();
        let b = solve(&Hardware { cost_scale: 2.0, ..Hardware::gp1000() }, &mix).unwrap();
        assert!((a.r_f - (0.45 + 0.092 + 0.021)).abs() < 1e-12);
        assert!((b.r_f - 2.0 * a.r_f).abs() < 1e-12);
    }

    #[test]
    fn gp1000_preset_gives_spec_parameters() {
        let m = numalab_core::machine::presets::load("gp1000").unwrap();
        let (hw, notes) = Hardware::from_machine(&m, None).unwrap();
        assert!(notes.is_empty(), "{notes:?}");
        assert_eq!(hw.nodes, 8);
        assert!((hw.t_l - 0.6).abs() < 1e-12);
        assert!((hw.t_x - 3.45).abs() < 1e-12);
        assert_eq!((hw.c_mig, hw.c_rep, hw.c_coh), (4500.0, 4600.0, 2100.0));
    }

    #[test]
    fn cpu_less_nodes_do_not_fit_the_model() {
        let m = numalab_core::machine::presets::load("knl-7250-flat").unwrap();
        let e = Hardware::from_machine(&m, Some([1.0, 1.0, 1.0])).unwrap_err();
        assert!(e.to_string().starts_with("machine 'knl-7250-flat': node 1 lacks CPUs or memory"), "{e}");
    }

    #[test]
    fn machine_without_costs_needs_explicit_costs() {
        let m = numalab_core::machine::presets::load("amd48").unwrap();
        let e = Hardware::from_machine(&m, None).unwrap_err();
        assert_eq!(e.to_string(), "machine 'amd48': no migration, replication and coherency-fault costs (costs_ms); give it explicitly");
        let (hw, notes) = Hardware::from_machine(&m, Some([10.0, 11.0, 5.0])).unwrap();
        assert_eq!(hw.nodes, 8);
        assert!(notes[0].contains("remote latency is not uniform"), "{notes:?}");
    }
}
