//! Mean-value analysis of closed, product-form queueing networks (docs/model.md §1).
//!
//! A network has `K` stations, each a load-independent FCFS/PS queue or a delay (infinite
//! server), and `C` customer classes with populations `N_c` and think times `Z_c`. Station `k`
//! asks class `c` for a total demand `D_kc` (visits × service time) per cycle.
//!
//! Solvers:
//! - [`exact`]: Reiser–Lavenberg exact MVA over every population vector (§7.1);
//! - [`schweitzer`]: Schweitzer–Bard approximate MVA (§7.2);
//! - [`linearizer`]: Chandy–Neuse Linearizer with three refinement rounds (§7.3).
//!
//! All three return an [`MvaSolution`] with per-class throughput `X_c` and per-station-and-class
//! residence time `R_kc`, queue length `Q_kc` and utilisation `U_kc = X_c·D_kc`.

use crate::error::ModelError;

/// Kind of service station.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StationKind {
    /// Load-independent queueing station: an arriving customer waits behind the queue it sees.
    Queue,
    /// Delay (infinite-server) station: residence time equals the demand.
    Delay,
}

/// A closed queueing network. Demands are stored station-major: `demand[k * C + c]`.
#[derive(Clone, Debug, PartialEq)]
pub struct Network {
    kinds: Vec<StationKind>,
    classes: usize,
    demand: Vec<f64>,
    population: Vec<u32>,
    think: Vec<f64>,
}

impl Network {
    /// Build a network. `demands[k][c]` is station `k`'s demand for class `c`; `population` and
    /// `think` have one entry per class.
    pub fn new(kinds: Vec<StationKind>, demands: &[Vec<f64>], population: Vec<u32>, think: Vec<f64>) -> Result<Network, ModelError> {
        let classes = population.len();
        if kinds.is_empty() {
            return Err(ModelError::network("no stations"));
        }
        if classes == 0 {
            return Err(ModelError::network("no classes"));
        }
        if think.len() != classes {
            return Err(ModelError::network(format!("{} think times for {} classes", think.len(), classes)));
        }
        if demands.len() != kinds.len() {
            return Err(ModelError::network(format!("{} demand rows for {} stations", demands.len(), kinds.len())));
        }
        let mut demand = Vec::with_capacity(kinds.len() * classes);
        for (k, row) in demands.iter().enumerate() {
            if row.len() != classes {
                return Err(ModelError::network(format!("station {k} has {} demands for {} classes", row.len(), classes)));
            }
            for (c, &d) in row.iter().enumerate() {
                if !(d.is_finite() && d >= 0.0) {
                    return Err(ModelError::network(format!("demand of station {k}, class {c} is {d}; must be finite and >= 0")));
                }
                demand.push(d);
            }
        }
        for (c, &z) in think.iter().enumerate() {
            if !(z.is_finite() && z >= 0.0) {
                return Err(ModelError::network(format!("think time of class {c} is {z}; must be finite and >= 0")));
            }
        }
        for c in 0..classes {
            let cycle: f64 = think[c] + (0..kinds.len()).map(|k| demand[k * classes + c]).sum::<f64>();
            if population[c] > 0 && cycle <= 0.0 {
                return Err(ModelError::network(format!("class {c} has customers but zero think time and zero demand everywhere")));
            }
        }
        Ok(Network { kinds, classes, demand, population, think })
    }

    /// Convenience constructor for one class.
    pub fn single_class(kinds: Vec<StationKind>, demands: &[f64], population: u32, think: f64) -> Result<Network, ModelError> {
        let rows: Vec<Vec<f64>> = demands.iter().map(|&d| vec![d]).collect();
        Network::new(kinds, &rows, vec![population], vec![think])
    }

    pub fn stations(&self) -> usize {
        self.kinds.len()
    }

    pub fn classes(&self) -> usize {
        self.classes
    }

    pub fn kind(&self, k: usize) -> StationKind {
        self.kinds[k]
    }

    pub fn demand(&self, k: usize, c: usize) -> f64 {
        self.demand[k * self.classes + c]
    }

    pub fn population(&self, c: usize) -> u32 {
        self.population[c]
    }

    pub fn think(&self, c: usize) -> f64 {
        self.think[c]
    }

    /// The same network with a different population vector (used by sweeps and tests).
    pub fn with_population(&self, population: Vec<u32>) -> Result<Network, ModelError> {
        if population.len() != self.classes {
            return Err(ModelError::network("population vector has the wrong length"));
        }
        let mut n = self.clone();
        n.population = population;
        Ok(n)
    }
}

/// Result of an MVA solve. Matrices are station-major (`[k * C + c]`).
#[derive(Clone, Debug, PartialEq)]
pub struct MvaSolution {
    classes: usize,
    throughput: Vec<f64>,
    residence: Vec<f64>,
    queue: Vec<f64>,
    utilization: Vec<f64>,
    /// Fixed-point iterations used (0 for exact MVA).
    pub iterations: u64,
}

impl MvaSolution {
    fn from_parts(net: &Network, throughput: Vec<f64>, residence: Vec<f64>, iterations: u64) -> MvaSolution {
        let c_n = net.classes;
        let mut queue = vec![0.0; residence.len()];
        let mut utilization = vec![0.0; residence.len()];
        for k in 0..net.stations() {
            for c in 0..c_n {
                queue[k * c_n + c] = throughput[c] * residence[k * c_n + c];
                utilization[k * c_n + c] = throughput[c] * net.demand(k, c);
            }
        }
        MvaSolution { classes: c_n, throughput, residence, queue, utilization, iterations }
    }

    /// Throughput `X_c` (cycles per time unit).
    pub fn x(&self, c: usize) -> f64 {
        self.throughput[c]
    }

    /// Residence time `R_kc` of class `c` at station `k`, per cycle.
    pub fn r(&self, k: usize, c: usize) -> f64 {
        self.residence[k * self.classes + c]
    }

    /// Mean number `Q_kc` of class-`c` customers at station `k`.
    pub fn q(&self, k: usize, c: usize) -> f64 {
        self.queue[k * self.classes + c]
    }

    /// Utilisation `U_kc = X_c·D_kc`.
    pub fn u(&self, k: usize, c: usize) -> f64 {
        self.utilization[k * self.classes + c]
    }

    /// Total queue at station `k`, all classes.
    pub fn station_queue(&self, k: usize) -> f64 {
        (0..self.classes).map(|c| self.q(k, c)).sum()
    }

    /// Total utilisation of station `k`, all classes.
    pub fn station_utilization(&self, k: usize) -> f64 {
        (0..self.classes).map(|c| self.u(k, c)).sum()
    }

    /// Response time of class `c` over all stations, think time excluded.
    pub fn response(&self, c: usize) -> f64 {
        let k_n = self.residence.len() / self.classes;
        (0..k_n).map(|k| self.r(k, c)).sum()
    }
}

/// Default refusal limit of exact MVA, in population vectors (docs/model.md §1).
pub const EXACT_STATE_LIMIT: u64 = 10_000_000;

/// Exact multi-class MVA (Reiser–Lavenberg). Visits every population vector `m ≤ N`, so the
/// cost is `Π_c (N_c + 1)`; runs above `state_limit` vectors are refused.
pub fn exact(net: &Network, state_limit: u64) -> Result<MvaSolution, ModelError> {
    let c_n = net.classes;
    let k_n = net.stations();
    // Mixed-radix index over population vectors; digit c has radix N_c + 1. Lexicographic order
    // visits m - e_c (smaller index) before m, which is all the recursion needs.
    let states_f: f64 = net.population.iter().map(|&n| n as f64 + 1.0).product();
    if states_f > state_limit as f64 {
        return Err(ModelError::StateSpaceTooLarge { states: states_f, limit: state_limit });
    }
    let states = states_f as usize;
    let mut stride = vec![1usize; c_n];
    for c in 1..c_n {
        stride[c] = stride[c - 1] * (net.population[c - 1] as usize + 1);
    }
    // Total queue per station for every population vector.
    let mut qtot = vec![0.0f64; states * k_n];
    let mut m = vec![0u32; c_n];
    let mut x = vec![0.0; c_n];
    let mut r = vec![0.0; k_n * c_n];
    for idx in 1..states {
        // Advance the mixed-radix counter.
        for (mc, &nc) in m.iter_mut().zip(&net.population) {
            if *mc < nc {
                *mc += 1;
                break;
            }
            *mc = 0;
        }
        for c in 0..c_n {
            if m[c] == 0 {
                x[c] = 0.0;
                for k in 0..k_n {
                    r[k * c_n + c] = 0.0;
                }
                continue;
            }
            let prev = idx - stride[c];
            let mut total = net.think[c];
            for k in 0..k_n {
                let d = net.demand(k, c);
                let rk = match net.kinds[k] {
                    StationKind::Queue => d * (1.0 + qtot[prev * k_n + k]),
                    StationKind::Delay => d,
                };
                r[k * c_n + c] = rk;
                total += rk;
            }
            x[c] = m[c] as f64 / total;
        }
        for k in 0..k_n {
            qtot[idx * k_n + k] = (0..c_n).map(|c| x[c] * r[k * c_n + c]).sum();
        }
    }
    if states == 1 {
        // N = 0: nothing moves.
        x.iter_mut().for_each(|v| *v = 0.0);
        r.iter_mut().for_each(|v| *v = 0.0);
    }
    Ok(MvaSolution::from_parts(net, x, r, 0))
}

/// Options of the approximate solvers.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ApproxOptions {
    /// Stop when `max |Q' − Q| < tol`.
    pub tol: f64,
    /// Iteration cap; reaching it is an error.
    pub max_iter: u64,
}

impl Default for ApproxOptions {
    /// Schweitzer defaults of docs/model.md §1: tol 1e-12, cap 100 000.
    fn default() -> Self {
        ApproxOptions { tol: 1e-12, max_iter: 100_000 }
    }
}

/// Schweitzer–Bard approximate MVA (docs/model.md §1). Classes with `N_c = 0` are dropped
/// (their throughput and queues are 0).
pub fn schweitzer(net: &Network, opts: ApproxOptions) -> Result<MvaSolution, ModelError> {
    let pops: Vec<f64> = net.population.iter().map(|&n| n as f64).collect();
    let zero_f = vec![0.0; net.stations() * net.classes * net.classes];
    let mut q = initial_queues(net, &pops);
    let (x, r, it) = core(net, &pops, &zero_f, &mut q, opts, "Schweitzer MVA")?;
    Ok(MvaSolution::from_parts(net, x, r, it))
}

/// Linearizer (Chandy–Neuse; docs/model.md §1): three rounds of refinement of the fractional
/// deviations `F`, then a final core solve. Core tolerance `opts.tol` (the spec uses 1e-13).
pub fn linearizer(net: &Network, opts: ApproxOptions) -> Result<MvaSolution, ModelError> {
    let c_n = net.classes;
    let k_n = net.stations();
    let pops: Vec<f64> = net.population.iter().map(|&n| n as f64).collect();
    // f[(k * C + c) * C + j]: deviation of class c's per-customer queue at k when one class-j
    // customer is removed.
    let mut f = vec![0.0; k_n * c_n * c_n];
    let mut q = initial_queues(net, &pops);
    let mut iterations = 0;
    let mut q_minus: Vec<Vec<f64>> = vec![Vec::new(); c_n];
    for _round in 0..3 {
        let (_, _, it) = core(net, &pops, &f, &mut q, opts, "Linearizer")?;
        iterations += it;
        for j in 0..c_n {
            if pops[j] == 0.0 {
                continue;
            }
            let mut pj = pops.clone();
            pj[j] -= 1.0;
            let mut qj: Vec<f64> = (0..k_n * c_n)
                .map(|i| {
                    let c = i % c_n;
                    if pops[c] > 0.0 {
                        q[i] * pj[c] / pops[c]
                    } else {
                        0.0
                    }
                })
                .collect();
            let (_, _, it) = core(net, &pj, &f, &mut qj, opts, "Linearizer")?;
            iterations += it;
            q_minus[j] = qj;
        }
        for j in 0..c_n {
            if pops[j] == 0.0 {
                continue;
            }
            let mut pj = pops.clone();
            pj[j] -= 1.0;
            for k in 0..k_n {
                for c in 0..c_n {
                    let idx = (k * c_n + c) * c_n + j;
                    f[idx] = if pj[c] > 0.0 && pops[c] > 0.0 { q_minus[j][k * c_n + c] / pj[c] - q[k * c_n + c] / pops[c] } else { 0.0 };
                }
            }
        }
    }
    let (x, r, it) = core(net, &pops, &f, &mut q, opts, "Linearizer")?;
    iterations += it;
    Ok(MvaSolution::from_parts(net, x, r, iterations))
}

fn initial_queues(net: &Network, pops: &[f64]) -> Vec<f64> {
    let k_n = net.stations();
    let c_n = net.classes;
    let mut q = vec![0.0; k_n * c_n];
    for k in 0..k_n {
        for c in 0..c_n {
            q[k * c_n + c] = pops[c] / k_n as f64;
        }
    }
    q
}

/// Schweitzer-style fixed point at population `pops`, in which class `c` arriving at station `k`
/// sees `A_kc = Σ_j (n − e_c)_j · (Q_kj/n_j + F_kjc)` (terms with `(n − e_c)_j = 0` omitted).
/// With `F = 0` this is exactly Schweitzer's `Σ_j Q_kj − Q_kc/n_c`. Updates `q` in place and
/// returns `(X, R, iterations)`.
fn core(
    net: &Network,
    pops: &[f64],
    f: &[f64],
    q: &mut [f64],
    opts: ApproxOptions,
    solver: &'static str,
) -> Result<(Vec<f64>, Vec<f64>, u64), ModelError> {
    let c_n = net.classes;
    let k_n = net.stations();
    let mut x = vec![0.0; c_n];
    let mut r = vec![0.0; k_n * c_n];
    let mut q_new = vec![0.0; k_n * c_n];
    let mut residual = f64::INFINITY;
    for it in 1..=opts.max_iter {
        for c in 0..c_n {
            if pops[c] == 0.0 {
                continue;
            }
            let mut total = net.think[c];
            for k in 0..k_n {
                let d = net.demand(k, c);
                let rk = match net.kinds[k] {
                    StationKind::Delay => d,
                    StationKind::Queue => {
                        let mut a = 0.0;
                        for j in 0..c_n {
                            let nj = if j == c { pops[j] - 1.0 } else { pops[j] };
                            if nj <= 0.0 {
                                continue;
                            }
                            a += nj * (q[k * c_n + j] / pops[j] + f[(k * c_n + j) * c_n + c]);
                        }
                        d * (1.0 + a)
                    }
                };
                r[k * c_n + c] = rk;
                total += rk;
            }
            x[c] = pops[c] / total;
        }
        residual = 0.0;
        for k in 0..k_n {
            for c in 0..c_n {
                let v = x[c] * r[k * c_n + c];
                residual = residual.max((v - q[k * c_n + c]).abs());
                q_new[k * c_n + c] = v;
            }
        }
        q.copy_from_slice(&q_new);
        if residual < opts.tol {
            return Ok((x, r, it));
        }
    }
    Err(ModelError::NoConvergence { solver, iterations: opts.max_iter, residual })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::assert_printed;
    use StationKind::{Delay, Queue};

    /// docs/model.md §1, test vectors: two classes, CPU demands (1, 2), disk (3, 4), Z = 0, N = (1, 1).
    fn two_class() -> Network {
        Network::new(vec![Queue, Queue], &[vec![1.0, 2.0], vec![3.0, 4.0]], vec![1, 1], vec![0.0, 0.0]).unwrap()
    }

    #[test]
    fn exact_two_class_vector() {
        let s = exact(&two_class(), EXACT_STATE_LIMIT).unwrap();
        assert!((s.x(0) - 3.0 / 19.0).abs() < 1e-12);
        assert!((s.x(1) - 2.0 / 19.0).abs() < 1e-12);
        assert_printed(s.x(0), "0.157895");
        assert_printed(s.x(1), "0.105263");
        // R_cpu = (4/3, 2.5), R_disk = (5.0, 7.0)
        assert_printed(s.r(0, 0), "1.3333");
        assert_printed(s.r(0, 1), "2.5");
        assert_printed(s.r(1, 0), "5.0");
        assert_printed(s.r(1, 1), "7.0");
        // Exact rationals behind the printed values.
        for (got, want) in [(s.r(0, 0), 4.0 / 3.0), (s.r(0, 1), 2.5), (s.r(1, 0), 5.0), (s.r(1, 1), 7.0)] {
            assert!((got - want).abs() < 1e-12, "{got} vs {want}");
        }
        assert_printed(s.station_queue(0), "0.473684");
        assert_printed(s.station_queue(1), "1.526316");
    }

    #[test]
    fn schweitzer_two_class_vector() {
        let s = schweitzer(&two_class(), ApproxOptions::default()).unwrap();
        assert_printed(s.x(0), "0.153746");
        assert_printed(s.x(1), "0.103990");
        assert_printed(s.q(0, 0), "0.191857");
        assert_printed(s.q(0, 1), "0.247883");
        assert_printed(s.r(0, 0), "1.247883");
        assert_printed(s.r(0, 1), "2.383714");
        assert_printed(s.r(1, 0), "5.256351");
        assert_printed(s.r(1, 1), "7.232572");
    }

    #[test]
    fn linearizer_two_class_vector() {
        let s = linearizer(&two_class(), ApproxOptions { tol: 1e-13, max_iter: 100_000 }).unwrap();
        assert_printed(s.x(0), "0.158014");
        assert_printed(s.x(1), "0.105315");
    }

    #[test]
    fn single_class_vectors() {
        for (n, ex, sw) in [(5, "1.441277", "1.395537"), (10, "1.932253", "1.833647")] {
            let net = Network::single_class(vec![Queue, Queue], &[0.5, 0.3], n, 2.0).unwrap();
            let e = exact(&net, EXACT_STATE_LIMIT).unwrap();
            let s = schweitzer(&net, ApproxOptions::default()).unwrap();
            assert_printed(e.x(0), ex);
            assert_printed(s.x(0), sw);
        }
    }

    #[test]
    fn delay_station_adds_its_demand_only() {
        let net = Network::single_class(vec![Delay, Queue], &[4.0, 1.0], 3, 0.0).unwrap();
        let s = exact(&net, EXACT_STATE_LIMIT).unwrap();
        assert_eq!(s.r(0, 0), 4.0);
        // Same as a think time of 4 in front of the single queue.
        let z = Network::single_class(vec![Queue], &[1.0], 3, 4.0).unwrap();
        let sz = exact(&z, EXACT_STATE_LIMIT).unwrap();
        assert!((s.x(0) - sz.x(0)).abs() < 1e-12);
    }

    #[test]
    fn exact_refuses_large_state_spaces() {
        let net = Network::new(vec![Queue], &[vec![1.0, 1.0]], vec![999, 999], vec![0.0, 0.0]).unwrap();
        let e = exact(&net, 100_000).unwrap_err();
        assert!(e.to_string().contains("1000000 population vectors"), "{e}");
    }

    #[test]
    fn zero_population_class_is_dropped() {
        let net = Network::new(vec![Queue, Queue], &[vec![1.0, 2.0], vec![3.0, 4.0]], vec![2, 0], vec![1.0, 1.0]).unwrap();
        let single = Network::single_class(vec![Queue, Queue], &[1.0, 3.0], 2, 1.0).unwrap();
        for (a, b) in [
            (exact(&net, EXACT_STATE_LIMIT).unwrap(), exact(&single, EXACT_STATE_LIMIT).unwrap()),
            (schweitzer(&net, ApproxOptions::default()).unwrap(), schweitzer(&single, ApproxOptions::default()).unwrap()),
        ] {
            assert!((a.x(0) - b.x(0)).abs() < 1e-12);
            assert_eq!(a.x(1), 0.0);
            assert_eq!(a.q(0, 1), 0.0);
        }
    }

    #[test]
    fn malformed_networks_are_rejected() {
        let e = Network::new(vec![Queue], &[vec![1.0]], vec![1, 1], vec![0.0, 0.0]).unwrap_err();
        assert!(e.to_string().contains("station 0 has 1 demands for 2 classes"), "{e}");
        let e = Network::new(vec![Queue], &[vec![-1.0]], vec![1], vec![0.0]).unwrap_err();
        assert!(e.to_string().contains("must be finite and >= 0"), "{e}");
        let e = Network::new(vec![Queue], &[vec![0.0]], vec![1], vec![0.0]).unwrap_err();
        assert!(e.to_string().contains("zero think time and zero demand"), "{e}");
        let e = Network::new(vec![Queue, Queue], &[vec![1.0]], vec![1], vec![0.0]).unwrap_err();
        assert!(e.to_string().contains("1 demand rows for 2 stations"), "{e}");
    }

    #[test]
    fn schweitzer_reports_non_convergence() {
        let net = Network::single_class(vec![Queue, Queue], &[0.5, 0.3], 10, 2.0).unwrap();
        let e = schweitzer(&net, ApproxOptions { tol: 1e-12, max_iter: 2 }).unwrap_err();
        assert!(e.to_string().contains("Schweitzer MVA did not converge in 2 iterations"), "{e}");
    }
}
