//! Property tests of the solver invariants.

use numalab_model::local_remote::{self, equivalent_network, Hardware, NetworkMode, RefMix};
use numalab_model::mva::{self, ApproxOptions, Network, StationKind, EXACT_STATE_LIMIT};
use numalab_model::roofline;
use proptest::prelude::*;

/// A random network: 1–4 stations (some delays), 1–3 classes, populations 0–4 (at least one
/// customer), demands 0–5, think times 0–5.
fn network() -> impl Strategy<Value = Network> {
    (1usize..=4, 1usize..=3).prop_flat_map(|(k, c)| {
        (
            prop::collection::vec(prop::bool::weighted(0.2), k),
            prop::collection::vec(prop::collection::vec(0.0f64..5.0, c), k),
            prop::collection::vec(0u32..=4, c),
            prop::collection::vec(0.0f64..5.0, c),
        )
            .prop_filter_map("needs a customer and demand", |(delay, demands, mut pops, think)| {
                if pops.iter().all(|&p| p == 0) {
                    pops[0] = 1;
                }
                let kinds = delay.iter().map(|&d| if d { StationKind::Delay } else { StationKind::Queue }).collect();
                Network::new(kinds, &demands, pops, think).ok()
            })
    })
}

fn solvers(net: &Network) -> Vec<(&'static str, mva::MvaSolution)> {
    vec![
        ("exact", mva::exact(net, EXACT_STATE_LIMIT).unwrap()),
        ("schweitzer", mva::schweitzer(net, ApproxOptions::default()).unwrap()),
        ("linearizer", mva::linearizer(net, ApproxOptions { tol: 1e-13, max_iter: 100_000 }).unwrap()),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    /// Little's law per station and for the whole cycle: Q_kc = X_c·R_kc and
    /// N_c = X_c·(Z_c + Σ_k R_kc).
    #[test]
    fn littles_law(net in network()) {
        for (name, s) in solvers(&net) {
            for c in 0..net.classes() {
                let n = net.population(c) as f64;
                let cycle = s.x(c) * (net.think(c) + s.response(c));
                prop_assert!((cycle - n).abs() < 1e-8 * n.max(1.0), "{name}: class {c}: {cycle} vs {n}");
                for k in 0..net.stations() {
                    prop_assert!((s.q(k, c) - s.x(c) * s.r(k, c)).abs() < 1e-12);
                }
            }
        }
    }

    /// Utilisations of queueing stations stay at or below 1, and every throughput respects the
    /// bottleneck bound X_c ≤ 1/max_k D_kc and the no-queueing bound X_c ≤ N_c/(Z_c + Σ D_kc).
    /// Exact MVA and Schweitzer hold them to rounding. The Linearizer is an approximation that
    /// can overshoot a saturated station slightly (e.g. one queue, a class with Z = 0: U = 1.0014;
    /// an independent re-implementation of §7.3 gives the same), so it gets 1% slack.
    #[test]
    fn bounds_hold(net in network()) {
        for (name, s) in solvers(&net) {
            let slack = if name == "linearizer" { 1e-2 } else { 1e-9 };
            for k in 0..net.stations() {
                if net.kind(k) == StationKind::Queue {
                    prop_assert!(s.station_utilization(k) <= 1.0 + slack, "{name}: U_{k} = {}", s.station_utilization(k));
                }
            }
            for c in 0..net.classes() {
                let dmax = (0..net.stations())
                    .filter(|&k| net.kind(k) == StationKind::Queue)
                    .map(|k| net.demand(k, c))
                    .fold(0.0, f64::max);
                if dmax > 0.0 {
                    prop_assert!(s.x(c) <= (1.0 + slack) / dmax, "{name}: X_{c} = {} above 1/{dmax}", s.x(c));
                }
                let dsum: f64 = (0..net.stations()).map(|k| net.demand(k, c)).sum();
                let n = net.population(c) as f64;
                if n > 0.0 {
                    prop_assert!(s.x(c) <= n / (net.think(c) + dsum) + 1e-9, "{name}: above N/(Z + D)");
                }
                for k in 0..net.stations() {
                    if n > 0.0 {
                        prop_assert!(s.r(k, c) >= net.demand(k, c) - 1e-12, "{name}: residence below demand");
                    } else {
                        prop_assert!(s.r(k, c) == 0.0 && s.x(c) == 0.0, "{name}: empty class moves");
                    }
                }
            }
        }
    }

    /// With one customer in the network, nobody queues: exact = Schweitzer = Linearizer and
    /// R_k = D_k.
    #[test]
    fn single_customer_is_exact(demands in prop::collection::vec(0.01f64..5.0, 1..5), z in 0.0f64..5.0) {
        let kinds = vec![StationKind::Queue; demands.len()];
        let net = Network::single_class(kinds, &demands, 1, z).unwrap();
        let sols = solvers(&net);
        let x = 1.0 / (z + demands.iter().sum::<f64>());
        for (name, s) in &sols {
            prop_assert!((s.x(0) - x).abs() < 1e-12 * x.max(1.0), "{name}");
            for (k, d) in demands.iter().enumerate() {
                prop_assert!((s.r(k, 0) - d).abs() < 1e-12, "{name}");
            }
        }
    }

    /// Single class: response time and throughput grow with the population (exact and
    /// Schweitzer).
    #[test]
    fn monotone_in_population(demands in prop::collection::vec(0.01f64..5.0, 1..4), z in 0.0f64..5.0) {
        let kinds = vec![StationKind::Queue; demands.len()];
        let mut last: Option<(f64, f64, f64, f64)> = None;
        for n in 1..=12u32 {
            let net = Network::single_class(kinds.clone(), &demands, n, z).unwrap();
            let e = mva::exact(&net, EXACT_STATE_LIMIT).unwrap();
            let s = mva::schweitzer(&net, ApproxOptions::default()).unwrap();
            let now = (e.response(0), e.x(0), s.response(0), s.x(0));
            if let Some(prev) = last {
                prop_assert!(now.0 >= prev.0 - 1e-12 && now.1 >= prev.1 - 1e-12, "exact at N={n}");
                prop_assert!(now.2 >= prev.2 - 1e-9 && now.3 >= prev.3 - 1e-9, "schweitzer at N={n}");
            }
            last = Some(now);
        }
    }

    /// The local/remote model equals generic Schweitzer on its equivalent network (Delay mode),
    /// its cycle is at least the uncontended one, and it grows as references become remote.
    #[test]
    fn local_remote_matches_generic_schweitzer(n in 2u32..=12, p_l in 0.0f64..=1.0, tau in 0.0f64..10.0, q_m in 0.0f64..1e-4) {
        let hw = Hardware { nodes: n, ..Hardware::gp1000() };
        let mix = RefMix { q_m, ..RefMix::plain(tau, p_l) };
        let s = local_remote::solve(&hw, &mix).unwrap();
        let g = mva::schweitzer(&equivalent_network(&hw, &mix).unwrap(), ApproxOptions::default()).unwrap();
        prop_assert!((1.0 / g.x(0) - s.r).abs() < 1e-9 * s.r);
        let uncontended = tau + p_l * hw.t_l + (1.0 - p_l) * (2.0 * hw.t_x + hw.t_l) + q_m * hw.c_mig;
        prop_assert!(s.r >= uncontended - 1e-12);
        let less_local = local_remote::solve(&hw, &RefMix { p_l: p_l * 0.9, ..mix }).unwrap();
        prop_assert!(less_local.r >= s.r - 1e-12);
        let queued = local_remote::solve(&Hardware { network: NetworkMode::Queue, ..hw.clone() }, &mix).unwrap();
        prop_assert!(queued.r >= s.r - 1e-12);
    }

    /// The roofline never exceeds the compute ceiling, grows with intensity, and the gain from a
    /// faster tier lies in [1, B_f/B_s] and falls as intensity rises.
    #[test]
    fn roofline_shape(peak in 1.0f64..1e4, bs in 1.0f64..500.0, ratio in 1.0f64..10.0, ai in 0.001f64..100.0) {
        let bf = bs * ratio;
        let p = roofline::attainable(peak, bs, ai);
        prop_assert!(p <= peak && p <= bs * ai + 1e-12);
        prop_assert!(roofline::attainable(peak, bs, ai * 1.5) >= p);
        let g = roofline::gain(peak, bs, bf, ai);
        prop_assert!((1.0 - 1e-12..=ratio + 1e-9).contains(&g));
        prop_assert!(roofline::gain(peak, bs, bf, ai * 1.5) <= g + 1e-12);
    }
}
