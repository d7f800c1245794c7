//! Raw measurements into a machine file (pure; docs/calibration.md, "Measuring your own
//! machine"). The machine starts as `machine import` builds it from sysfs; measured values
//! replace its estimates, each listed in `[measured].fields`, and the estimates that remain
//! are listed in `[measured].estimates`.
//!
//! * `latency_ns`: the machine model has one local latency for every CPU node
//!   (docs/machines.md, "Validation"), so the diagonal is the mean of the local chases, and
//!   no remote entry is set below it. Pairs not measured (memoryless nodes) keep the import's
//!   SLIT scaling, rescaled to the measured local latency.
//! * `nodes[j].mem_bw_gbps`: the triad of node `j`'s cores on its own memory (GB/s as STREAM
//!   counts bytes, as docs/calibration.md asks of a calibrated `mem_bw_gbps`); a CPU-less
//!   node gets the best triad any CPU node reached on it.
//! * `link_bw_gbps`, `intra_socket_link_bw_gbps`: from direct pairs whose remote read stays
//!   below [`LINK_LIMITED`] of the memory node's local read (the link, not the memory, is the
//!   limit): the largest such remote read. Otherwise the link is not the bottleneck and only a
//!   lower bound is known (kept as an estimate).
//! * `core.mlp_stream`: Little's law on the single-thread triad and the local latency.
//! * `core.pause_cycles`: the time of one round of libgomp's barrier spin times the clock.
//! * `[published]`: the measured figures the simulator's calibration probes reproduce, with the
//!   host and date as their source.

use super::{Raw, Sizes};
use numalab_core::machine::{CoreParams, Figure, Machine, Measured, Published, Tier};

/// Bytes of one cache line: what one load of the kernels brings in, and the unit of the
/// lines-in-flight count (docs/machines.md, "Core parameters").
pub const LINE_BYTES: f64 = 64.0;
/// A remote read below this fraction of the memory node's local read is taken as link-limited.
pub const LINK_LIMITED: f64 = 0.9;
/// `[published].tolerance_pct` of a measured file [A]: about the run-to-run spread of these
/// measurements on an idle host (docs/calibration.md).
pub const TOLERANCE_PCT: f64 = 10.0;

/// Who measured what, where, when.
#[derive(Clone, Debug, PartialEq)]
pub struct HostId {
    /// UTC, `YYYY-MM-DD`.
    pub date: String,
    pub hostname: String,
    pub cpu_model: String,
    pub kernel_release: String,
    pub tool: String,
}

impl HostId {
    /// The `source` of every measured figure.
    pub fn source(&self) -> String {
        let cpu = if self.cpu_model.is_empty() { "CPU model not reported" } else { &self.cpu_model };
        format!("measured {} on host {} ({cpu}; Linux {}) by {}", self.date, self.hostname, self.kernel_release, self.tool)
    }
}

/// `YYYY-MM-DD` of a Unix time (UTC), by the civil-from-days algorithm of H. Hinnant,
/// "chrono-Compatible Low-Level Date Algorithms".
pub fn utc_date(unix_secs: u64) -> String {
    let z = (unix_secs / 86_400) as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!("{y:04}-{m:02}-{d:02}")
}

fn mean(v: &[f64]) -> f64 {
    v.iter().sum::<f64>() / v.len() as f64
}

/// Round to 3 significant decimals so the file stays readable.
fn r3(v: f64) -> f64 {
    (v * 1000.0).round() / 1000.0
}

/// The machine file: `imported` (with its `estimates`, from `export::to_machine`) with the
/// measurements of `raw` put in. `kernel_ids[i]` is the Linux id of node `i`.
pub fn build(
    imported: &Machine,
    estimates: &[String],
    kernel_ids: &[u32],
    raw: &Raw,
    host: &HostId,
    sizes: &Sizes,
) -> Result<(Machine, String), String> {
    let n = imported.nodes.len();
    if raw.chase_ns.len() != n || kernel_ids.len() != n {
        return Err(format!("measurements of {} nodes for a machine of {n}", raw.chase_ns.len()));
    }
    let mut m = imported.clone();
    let mut fields: Vec<String> = Vec::new();
    let mut kept: Vec<String> = Vec::new();
    let has_cpus: Vec<bool> = m.nodes.iter().map(|node| node.cores > 0).collect();
    let cpu = |i: usize| has_cpus[i];
    let cpu_nodes: Vec<usize> = (0..n).filter(|&i| cpu(i)).collect();

    // Latency.
    let locals: Vec<f64> = cpu_nodes.iter().map(|&i| raw.chase_ns[i][i]).filter(|&v| v > 0.0).collect();
    let local = if locals.is_empty() { None } else { Some(r3(mean(&locals))) };
    let mut scaled = false;
    if let Some(local) = local {
        for &i in &cpu_nodes {
            for j in 0..n {
                let v = raw.chase_ns[i][j];
                m.latency_ns[i][j] = if i == j {
                    local
                } else if v > 0.0 {
                    r3(v.max(local))
                } else {
                    scaled = true;
                    r3(m.slit[i][j] as f64 * local / 10.0)
                };
                if v > 0.0 {
                    fields.push(format!("latency_ns[{i}][{j}]"));
                }
            }
        }
        if scaled {
            kept.push(format!(
                "latency_ns: pairs not measured (a memoryless node) are slit[i][j] x {} ns (the measured local latency over 10)",
                r3(local / 10.0)
            ));
        }
    } else {
        kept.extend(estimates.iter().filter(|e| e.starts_with("latency_ns")).cloned());
    }

    // Memory bandwidth.
    let mut bw_estimated = false;
    for j in 0..n {
        if m.nodes[j].mem_bytes == 0 {
            continue;
        }
        let v = if cpu(j) { raw.triad_gbps[j][j] } else { cpu_nodes.iter().map(|&i| raw.triad_gbps[i][j]).fold(0.0, f64::max) };
        if v > 0.0 {
            m.nodes[j].mem_bw_gbps = r3(v);
            fields.push(format!("nodes[{j}].mem_bw_gbps"));
        } else {
            bw_estimated = true;
        }
    }
    if bw_estimated {
        kept.extend(estimates.iter().filter(|e| e.starts_with("mem_bw_gbps")).cloned());
    }

    // Links: direct pairs between CPU nodes, remote read against the memory node's own read.
    for cross in [true, false] {
        let mut limited: Vec<f64> = Vec::new();
        let mut free: Vec<(f64, f64)> = Vec::new();
        for &i in &cpu_nodes {
            for &j in &cpu_nodes {
                let (remote, own) = (raw.read_gbps[i][j], raw.read_gbps[j][j]);
                if i == j || m.hops[i][j] != 1 || (m.nodes[i].socket != m.nodes[j].socket) != cross || remote <= 0.0 || own <= 0.0 {
                    continue;
                }
                if remote < LINK_LIMITED * own {
                    limited.push(remote);
                } else {
                    free.push((remote, remote / own));
                }
            }
        }
        let name = if cross { "link_bw_gbps" } else { "intra_socket_link_bw_gbps" };
        if let Some(best) = limited.iter().copied().reduce(f64::max) {
            if cross {
                m.link_bw_gbps = r3(best);
            } else {
                m.intra_socket_link_bw_gbps = r3(best);
            }
            fields.push(name.to_string());
        } else if let Some(best) = free.iter().map(|f| f.0).reduce(f64::max) {
            let share = free.iter().map(|f| f.1).fold(f64::INFINITY, f64::min) * 100.0;
            if cross {
                m.link_bw_gbps = r3(m.link_bw_gbps.max(best));
                kept.push(format!(
                    "link_bw_gbps: {} GB/s, a lower bound: remote reads reached {share:.0} % or more of the local read, so the link did not limit them",
                    m.link_bw_gbps
                ));
            } else {
                kept.push(format!("intra_socket_link_bw_gbps: 0 (not limited): reads from a node of the same socket reached {share:.0} % or more of the local read"));
            }
        } else if cross {
            kept.extend(estimates.iter().filter(|e| e.starts_with("link_bw_gbps")).cloned());
        }
    }
    for e in estimates {
        let replaced = ["latency_ns", "mem_bw_gbps", "link_bw_gbps"].iter().any(|k| e.starts_with(k));
        if !replaced {
            kept.push(e.clone());
        }
    }

    // Published figures.
    let source = host.source();
    let how = format!(
        "{}best of {} passes, arrays of {} MiB over the team's threads, {} pages",
        if sizes.quick { "QUICK measurement (small buffers, few repetitions); " } else { "" },
        sizes.bw_trials,
        sizes.array_bytes >> 20,
        raw.backing.as_str()
    );
    let fig = |v: f64, note: String| Figure { value: r3(v), source: source.clone(), note, gap: String::new() };
    let own: Vec<usize> = cpu_nodes.iter().copied().filter(|&i| m.nodes[i].mem_bytes > 0 && raw.triad_gbps[i][i] > 0.0).collect();
    let mut p = Published {
        tolerance_pct: TOLERANCE_PCT,
        stream_triad_all_gbps: None,
        stream_triad_socket_gbps: None,
        stream_triad_thread_gbps: None,
        stream_triad_cpuless_gbps: None,
        stream_triad_cpuless_thread_gbps: None,
        latency_local_ns: None,
        latency_remote_ns: None,
        latency_contended_local_ns: None,
        latency_contended_remote_ns: None,
    };
    if let Some(&first) = own.first() {
        let node_triad = raw.triad_gbps[first][first];
        let all = raw.triad_all_gbps.or((cpu_nodes.len() == 1).then_some(node_triad));
        p.stream_triad_all_gbps =
            all.map(|v| fig(v, format!("STREAM triad, one thread per core of every CPU node, each on its own node; {how}")));
        let one_on_socket = cpu_nodes.iter().filter(|&&i| m.nodes[i].socket == m.nodes[first].socket).count() == 1;
        let socket = if one_on_socket { Some(node_triad) } else { raw.triad_socket_gbps };
        p.stream_triad_socket_gbps =
            socket.map(|v| fig(v, format!("STREAM triad, one thread per core of socket {}'s nodes; {how}", m.nodes[first].socket)));
        let thread = raw.triad_thread_gbps.or((m.nodes[first].cores == 1).then_some(node_triad));
        p.stream_triad_thread_gbps = thread.map(|v| fig(v, format!("STREAM triad, one thread on node {first}; {how}")));
    }
    if let Some(k) = (0..n).find(|&k| !cpu(k) && m.nodes[k].mem_bytes > 0) {
        let on_socket: Vec<usize> = cpu_nodes.iter().copied().filter(|&i| m.nodes[i].socket == m.nodes[k].socket).collect();
        if let [c] = on_socket[..] {
            if raw.triad_gbps[c][k] > 0.0 {
                p.stream_triad_cpuless_gbps =
                    Some(fig(raw.triad_gbps[c][k], format!("STREAM triad, the cores of node {c} on CPU-less node {k}; {how}")));
            }
        }
    }
    let chase_how = format!(
        "dependent pointer chase over {} MiB ({} pages), median of {} runs of {} loads",
        sizes.chase_bytes >> 20,
        raw.backing.as_str(),
        sizes.chase_trials,
        sizes.chase_loads
    );
    if let Some(local) = local {
        p.latency_local_ns = Some(fig(local, format!("{chase_how}; mean over {} CPU nodes on their own memory", locals.len())));
    }
    let remote: Vec<f64> = cpu_nodes
        .iter()
        .flat_map(|&i| cpu_nodes.iter().map(move |&j| (i, j)))
        .filter(|&(i, j)| m.hops[i][j] == 1 && m.nodes[j].tier == Tier::Dram && raw.chase_ns[i][j] > 0.0)
        .map(|(i, j)| raw.chase_ns[i][j])
        .collect();
    if !remote.is_empty() {
        p.latency_remote_ns = Some(fig(mean(&remote), format!("{chase_how}; mean over {} one-hop pairs of CPU nodes", remote.len())));
    }
    for (name, f) in p.figures() {
        if f.is_some() {
            fields.push(format!("published.{name}"));
        }
    }
    // Contended latency (docs/calibration.md, "Measuring your own machine"): the diagonal is
    // the chase latency at the loaded sweep's heaviest point, every other core of the node
    // streaming from it; pairs not measured stay 0.0.
    let mut contended = vec![vec![0.0; n]; n];
    for (i, row) in contended.iter_mut().enumerate() {
        let heaviest = raw
            .loaded
            .iter()
            .filter(|p| p.node as usize == i && p.load_threads > 0)
            .max_by(|a, b| a.intensity.total_cmp(&b.intensity).then(a.load_threads.cmp(&b.load_threads)));
        if let Some(p) = heaviest {
            row[i] = r3(p.latency_ns);
            fields.push(format!("latency_ns_contended[{i}][{i}]"));
        }
    }
    if contended.iter().flatten().any(|&v| v > 0.0) {
        m.latency_ns_contended = Some(contended);
    }
    // Streaming lines in flight per thread, by Little's law on the single-thread triad and the
    // local idle latency (docs/machines.md, "Core parameters"), so that the simulated
    // single-thread triad is compared with the measured one like with like.
    if let (Some(thread), Some(local), Some(&first)) = (p.stream_triad_thread_gbps.as_ref(), local, own.first()) {
        let mlp = r3(CoreParams::mlp_from_littles_law(thread.value, local, LINE_BYTES));
        if (1.0..=CoreParams::MAX_MLP_STREAM).contains(&mlp) {
            let core = m.core.get_or_insert_with(CoreParams::default);
            core.mlp_stream = Some(mlp);
            core.mlp_stream_source = format!(
                "Little's law: single-thread STREAM triad on node {first} ({} GB/s) x local idle latency ({local} ns) / {LINE_BYTES} B; {source}",
                thread.value
            );
            fields.push("core.mlp_stream".to_string());
        } else {
            kept.push(format!(
                "core.mlp_stream: not derived: Little's law on the single-thread triad ({} GB/s x {local} ns / {LINE_BYTES} B) gives {mlp} lines in flight, outside [1, {}] (below 1: the thread was not memory-bound); the simulator's sim.core.mlp_stream applies",
                thread.value,
                CoreParams::MAX_MLP_STREAM
            ));
        }
    }
    // Cycles per PAUSE, from the time one round of the barrier spin took (docs/machines.md,
    // "Core parameters"). The simulator turns cycles back into time with the same clock, so
    // a nominal clock that is not the one the core ran at changes nothing.
    if let Some(spin_ns) = raw.spin_ns {
        let cycles = r3(spin_ns * m.clock_ghz);
        if (1.0..=CoreParams::MAX_PAUSE_CYCLES).contains(&cycles) {
            let core = m.core.get_or_insert_with(CoreParams::default);
            core.pause_cycles = Some(cycles);
            core.pause_cycles_source = format!(
                "libgomp's barrier spin (a relaxed load and the spin-loop hint), median of {} runs of {} rounds on one CPU: {} ns a round x clock_ghz ({} GHz) = {cycles} cycles; {source}",
                super::spin::TRIALS,
                super::spin::rounds(sizes),
                r3(spin_ns),
                m.clock_ghz
            );
            fields.push("core.pause_cycles".to_string());
        } else {
            kept.push(format!(
                "core.pause_cycles: not derived: a round of the barrier spin took {} ns, {cycles} cycles at {} GHz, outside [1, {}]; the simulator's sim.core.pause_cycles applies",
                r3(spin_ns),
                m.clock_ghz,
                CoreParams::MAX_PAUSE_CYCLES
            ));
        }
    }
    m.published = Some(p);

    let round = |mm: &Vec<Vec<f64>>| mm.iter().map(|r| r.iter().map(|&v| r3(v)).collect()).collect();
    m.measured = Some(Measured {
        date: host.date.clone(),
        hostname: host.hostname.clone(),
        cpu_model: host.cpu_model.clone(),
        kernel_release: host.kernel_release.clone(),
        tool: host.tool.clone(),
        quick: sizes.quick,
        memory_backing: raw.backing.as_str().to_string(),
        kernel_node_ids: kernel_ids.to_vec(),
        fields,
        estimates: kept.clone(),
        chase_ns: round(&raw.chase_ns),
        read_gbps: round(&raw.read_gbps),
        triad_gbps: round(&raw.triad_gbps),
        loaded: raw
            .loaded
            .iter()
            .map(|p| numalab_core::machine::LoadedPoint { bandwidth_gbps: r3(p.bandwidth_gbps), latency_ns: r3(p.latency_ns), ..p.clone() })
            .collect(),
        pinning: raw.pinning.clone(),
    });
    let ids: Vec<String> = kernel_ids.iter().map(|i| i.to_string()).collect();
    m.description = format!(
        "measured {} on {} by numalab machine measure{} ({n} nodes; Linux node ids {})",
        host.date,
        host.hostname,
        if sizes.quick { " --quick" } else { "" },
        ids.join(",")
    );
    m.validate().map_err(|e| format!("the measured machine is invalid: {e}"))?;

    let mut text = format!("# numalab machine measured on host {} on {} by {}.\n", host.hostname, host.date, host.tool);
    text.push_str(&format!("# Host: {}; Linux {}. Buffers: {} pages.\n", host.cpu_model, host.kernel_release, raw.backing.as_str()));
    if sizes.quick {
        text.push_str("# QUICK measurement: small buffers and few repetitions; the numbers are rough.\n");
    }
    text.push_str(
        "# Measured values are listed in [measured].fields; every other value is read from sysfs\n# or is one of these estimates:\n",
    );
    for e in &kept {
        text.push_str(&format!("# estimate: {e}\n"));
    }
    text.push_str(&m.to_toml_string());
    Machine::from_toml_str(&text, "measured machine").map_err(|e| format!("the measured machine does not load back: {e}"))?;
    Ok((m, text))
}

#[cfg(test)]
mod tests {
    use super::super::{kernels::Backing, sizes};
    use super::*;
    use crate::export::{to_machine, ExportOptions};
    use crate::{FsRoot, Topology};
    use numalab_core::machine::{LoadedPoint, PinCheck};

    fn host() -> HostId {
        HostId {
            date: "2026-11-25".into(),
            hostname: "box".into(),
            cpu_model: "Test CPU 9000".into(),
            kernel_release: "6.1.0".into(),
            tool: "numalab machine measure 0.1.0".into(),
        }
    }

    /// The 2-node guest's captured sysfs (SLIT 10/21, CPUs 0-1 and 2-3).
    fn guest2() -> (Machine, Vec<String>) {
        let root = FsRoot::at(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/guest-2n"));
        let e = to_machine(&Topology::read(&root).unwrap(), &ExportOptions::default()).unwrap();
        (e.machine, e.estimates)
    }

    /// The same two nodes on two sockets (the guest puts both on socket 0).
    fn two_sockets() -> (Machine, Vec<String>) {
        let (mut m, e) = guest2();
        m.sockets = 2;
        m.nodes[1].socket = 1;
        m.validate().unwrap();
        (m, e)
    }

    fn raw2() -> Raw {
        let mut r = Raw::empty(2);
        r.backing = Backing::Thp;
        r.chase_ns = vec![vec![90.0, 150.0], vec![152.0, 94.0]];
        r.read_gbps = vec![vec![40.0, 20.0], vec![21.0, 42.0]];
        r.triad_gbps = vec![vec![30.0, 16.0], vec![17.0, 31.0]];
        r.triad_all_gbps = Some(60.0);
        r.triad_thread_gbps = Some(11.0);
        r.triad_socket_gbps = Some(58.0);
        r.loaded = vec![
            LoadedPoint { node: 0, load_threads: 0, intensity: 0.0, bandwidth_gbps: 0.0, latency_ns: 90.0 },
            LoadedPoint { node: 0, load_threads: 1, intensity: 1.0, bandwidth_gbps: 12.5, latency_ns: 130.0 },
        ];
        r.pinning = vec![PinCheck {
            what: "chase 0->1".into(),
            cpus_pinned: vec![0],
            cpus_seen: vec![0],
            mem_node: 1,
            pages_checked: 32,
            pages_on_node: 32,
            pages_elsewhere: vec![],
        }];
        r
    }

    #[test]
    fn measurements_replace_the_estimates_and_are_tagged() {
        let (imported, estimates) = guest2();
        let s = sizes(16 << 20, 1 << 30, false, true);
        let (m, text) = build(&imported, &estimates, &[0, 1], &raw2(), &host(), &s).unwrap();
        // One local latency: the mean of 90 and 94.
        assert_eq!(m.latency_ns, vec![vec![92.0, 150.0], vec![152.0, 92.0]]);
        assert_eq!(m.nodes[0].mem_bw_gbps, 30.0);
        assert_eq!(m.nodes[1].mem_bw_gbps, 31.0);
        // Remote reads at half the local read: the link limits, and the larger one is kept.
        // Both guest nodes are on socket 0: it is the intra-socket link; the cross-socket
        // capacity keeps its estimate.
        assert_eq!((m.intra_socket_link_bw_gbps, m.link_bw_gbps), (21.0, 20.0));
        let meas = m.measured.as_ref().unwrap();
        for f in [
            "latency_ns[0][1]",
            "nodes[1].mem_bw_gbps",
            "intra_socket_link_bw_gbps",
            "published.latency_remote_ns",
            "published.stream_triad_all_gbps",
        ] {
            assert!(meas.fields.iter().any(|x| x == f), "{f} not tagged measured: {:?}", meas.fields);
        }
        assert!(!meas.estimates.iter().any(|e| e.starts_with("latency_ns") || e.starts_with("mem_bw")), "{:?}", meas.estimates);
        assert!(meas.estimates.iter().any(|e| e.starts_with("link_bw_gbps: 20 GB/s")), "{:?}", meas.estimates);
        let (m2, _) = build(&two_sockets().0, &estimates, &[0, 1], &raw2(), &host(), &s).unwrap();
        assert_eq!((m2.intra_socket_link_bw_gbps, m2.link_bw_gbps), (0.0, 21.0));
        let meas2 = m2.measured.as_ref().unwrap();
        assert!(meas2.fields.iter().any(|f| f == "link_bw_gbps") && !meas2.estimates.iter().any(|e| e.starts_with("link_bw")), "{meas2:?}");
        assert!(meas.estimates.iter().any(|e| e.starts_with("os_costs")), "the import's other estimates stay: {:?}", meas.estimates);
        assert_eq!((meas.date.as_str(), meas.hostname.as_str(), meas.memory_backing.as_str()), ("2026-11-25", "box", "thp"));
        let p = m.published.as_ref().unwrap();
        assert_eq!(p.latency_local_ns.as_ref().unwrap().value, 92.0);
        assert_eq!(p.latency_remote_ns.as_ref().unwrap().value, 151.0);
        assert_eq!(p.stream_triad_all_gbps.as_ref().unwrap().value, 60.0);
        // Both nodes on socket 0: the socket figure is the socket's own run; with one node
        // per socket it is node 0's triad.
        assert_eq!(p.stream_triad_socket_gbps.as_ref().unwrap().value, 58.0);
        assert_eq!(m2.published.as_ref().unwrap().stream_triad_socket_gbps.as_ref().unwrap().value, 30.0);
        assert_eq!(p.stream_triad_thread_gbps.as_ref().unwrap().value, 11.0);
        // Little's law: 11 GB/s x 92 ns / 64 B = 15.8125 lines in flight, tagged measured.
        let core = m.core.as_ref().unwrap();
        assert_eq!(core.mlp_stream, Some(15.813));
        assert!(core.mlp_stream_source.starts_with("Little's law: single-thread STREAM triad on node 0 (11 GB/s) x local idle latency (92 ns) / 64 B; measured 2026-11-25 on host box"), "{}", core.mlp_stream_source);
        assert!(meas.fields.iter().any(|f| f == "core.mlp_stream"), "{:?}", meas.fields);
        // The contended diagonal is the loaded sweep's heaviest point; node 1 has no sweep in
        // the raw data, and no pair off the diagonal is measured: both stay 0.0.
        assert_eq!(m.latency_ns_contended, Some(vec![vec![130.0, 0.0], vec![0.0, 0.0]]));
        assert!(meas.fields.iter().any(|f| f == "latency_ns_contended[0][0]"), "{:?}", meas.fields);
        assert!(!meas.fields.iter().any(|f| f == "latency_ns_contended[1][1]"), "{:?}", meas.fields);
        let src = &p.latency_local_ns.as_ref().unwrap().source;
        assert!(src.starts_with("measured 2026-11-25 on host box (Test CPU 9000; Linux 6.1.0)"), "{src}");
        // The text loads back to the same machine, and says what it is.
        assert_eq!(Machine::from_toml_str(&text, "t").unwrap(), m);
        assert!(text.contains("# estimate: os_costs"), "{text}");
        assert!(!text.contains("QUICK"));
    }

    /// The barrier spin's round time times the file's clock (docs/machines.md, "Core
    /// parameters"): 58.333 ns at 2.4 GHz is 140 cycles; a round under a cycle (an emulated
    /// PAUSE) is kept out with the reason, and the simulator's value applies.
    #[test]
    fn the_barrier_spin_gives_cycles_per_pause() {
        let (mut imported, estimates) = guest2();
        imported.clock_ghz = 2.4;
        let mut r = raw2();
        r.spin_ns = Some(58.3333);
        let (m, text) = build(&imported, &estimates, &[0, 1], &r, &host(), &sizes(16 << 20, 1 << 30, false, true)).unwrap();
        let core = m.core.as_ref().unwrap();
        assert_eq!(core.pause_cycles, Some(140.0));
        assert_eq!(core.mlp_stream, Some(15.813), "the spin keeps the lines in flight");
        assert!(
            core.pause_cycles_source.starts_with(
                "libgomp's barrier spin (a relaxed load and the spin-loop hint), median of 5 runs of 1000000 rounds on one CPU: 58.333 ns a round x clock_ghz (2.4 GHz) = 140 cycles; measured 2026-11-25 on host box"
            ),
            "{}",
            core.pause_cycles_source
        );
        assert!(m.measured.as_ref().unwrap().fields.iter().any(|f| f == "core.pause_cycles"));
        assert_eq!(Machine::from_toml_str(&text, "t").unwrap(), m);

        r.spin_ns = Some(0.2);
        let (m, _) = build(&imported, &estimates, &[0, 1], &r, &host(), &sizes(16 << 20, 1 << 30, true, true)).unwrap();
        assert_eq!(m.pause_cycles(), None);
        let meas = m.measured.as_ref().unwrap();
        assert!(!meas.fields.iter().any(|f| f == "core.pause_cycles"));
        assert!(
            meas.estimates.iter().any(|e| e.starts_with(
                "core.pause_cycles: not derived: a round of the barrier spin took 0.2 ns, 0.48 cycles at 2.4 GHz, outside [1, 10000]"
            )),
            "{:?}",
            meas.estimates
        );
    }

    #[test]
    fn an_unlimited_link_is_a_lower_bound_and_a_quick_run_says_so() {
        let (imported, estimates) = two_sockets();
        let mut r = raw2();
        r.read_gbps = vec![vec![40.0, 39.0], vec![38.0, 42.0]];
        let s = sizes(16 << 20, 1 << 30, true, true);
        let (m, text) = build(&imported, &estimates, &[0, 1], &r, &host(), &s).unwrap();
        assert_eq!(m.link_bw_gbps, 39.0, "at least the largest remote read");
        let meas = m.measured.as_ref().unwrap();
        assert!(!meas.fields.iter().any(|f| f == "link_bw_gbps"));
        assert!(meas.estimates.iter().any(|e| e.starts_with("link_bw_gbps: 39 GB/s, a lower bound")), "{:?}", meas.estimates);
        assert!(meas.quick && text.contains("QUICK measurement"));
        assert!(m.published.as_ref().unwrap().latency_local_ns.as_ref().unwrap().note.contains("200000 loads"));
    }

    #[test]
    fn a_thread_that_was_not_memory_bound_leaves_the_simulators_mlp() {
        // Under emulation (qemu TCG) a thread streams far below what its latency allows:
        // 0.5 GB/s x 92 ns / 64 B = 0.72 lines in flight, not a memory-level parallelism.
        let (imported, estimates) = guest2();
        let mut r = raw2();
        r.triad_thread_gbps = Some(0.5);
        let (m, text) = build(&imported, &estimates, &[0, 1], &r, &host(), &sizes(1 << 20, 1 << 30, true, true)).unwrap();
        assert_eq!(m.core, None);
        let meas = m.measured.as_ref().unwrap();
        assert!(!meas.fields.iter().any(|f| f == "core.mlp_stream"));
        assert!(
            meas.estimates.iter().any(|e| e.starts_with("core.mlp_stream: not derived") && e.contains("gives 0.719 lines")),
            "{:?}",
            meas.estimates
        );
        assert!(text.contains("# estimate: core.mlp_stream: not derived"));
    }

    #[test]
    fn remote_latency_below_the_local_mean_is_raised_to_it() {
        // The validator wants no remote entry below the (single) local latency.
        let (imported, estimates) = guest2();
        let mut r = raw2();
        r.chase_ns = vec![vec![100.0, 95.0], vec![96.0, 90.0]];
        let (m, _) = build(&imported, &estimates, &[0, 1], &r, &host(), &sizes(1 << 20, 1 << 30, true, true)).unwrap();
        assert_eq!(m.latency_ns, vec![vec![95.0, 95.0], vec![96.0, 95.0]]);
        assert_eq!(m.measured.as_ref().unwrap().chase_ns[0][1], 95.0, "the raw value stays in [measured]");
    }

    #[test]
    fn a_bad_measured_table_is_refused_by_the_validator() {
        let (imported, estimates) = guest2();
        let (m, text) = build(&imported, &estimates, &[0, 1], &raw2(), &host(), &sizes(1 << 20, 1 << 30, true, true)).unwrap();
        let bad = text.replace("date = \"2026-11-25\"", "date = \"yesterday\"");
        let e = Machine::from_toml_str(&bad, "f.toml").unwrap_err().to_string();
        assert!(e.contains("measured.date = \"yesterday\" must be a date YYYY-MM-DD"), "{e}");
        let bad = text.replace("kernel_node_ids = [0, 1]", "kernel_node_ids = [0]");
        let e = Machine::from_toml_str(&bad, "f.toml").unwrap_err().to_string();
        assert!(e.contains("measured.kernel_node_ids has 1 entries; the machine has 2 nodes"), "{e}");
        let bad = text.replace("hostname = \"box\"", "hostname = \"box\"\nbogus = 1");
        let e = Machine::from_toml_str(&bad, "f.toml").unwrap_err().to_string();
        assert!(e.contains("unknown field `bogus`"), "{e}");
        assert!(m.measured.as_ref().unwrap().pinning[0].ok());
        // Measurements of the wrong size are refused before anything is built.
        assert!(build(&imported, &estimates, &[0], &Raw::empty(1), &host(), &sizes(1 << 20, 1 << 30, true, true)).is_err());
    }

    #[test]
    fn dates_are_utc_civil_dates() {
        assert_eq!(utc_date(0), "1970-01-01");
        assert_eq!(utc_date(951_782_400), "2000-02-29");
        assert_eq!(utc_date(1_795_564_800 + 86_399), "2026-11-25");
    }
}
