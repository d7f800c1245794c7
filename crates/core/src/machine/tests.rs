use super::presets;
use super::*;

#[test]
fn every_preset_loads_and_validates() {
    for name in presets::names() {
        let m = presets::load(name).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(m.name, name);
        // Round trip through the canonical serialisation.
        let again = Machine::from_toml_str(&m.to_toml_string(), "roundtrip").unwrap();
        assert_eq!(again, m);
    }
}

#[test]
fn amd48_matches_the_spec_counts() {
    let m = presets::load("amd48").unwrap();
    assert_eq!(m.node_count(), 8);
    assert_eq!(m.total_cores(), 48);
    assert_eq!(m.total_mem_bytes(), 128 << 30);
    assert_eq!(m.latency_ns[0][3], 174.1);
    let cpus = m.cpu_table();
    assert_eq!(cpus.cpus(), 48);
    assert_eq!(cpus.node_of_cpu[6], 1);
    assert_eq!(cpus.first_cpu_of_node[7], 42);
}

#[test]
fn cpu_less_nodes_are_memory_only() {
    let m = presets::load("xeon-max-hbm-flat").unwrap();
    assert_eq!(m.cpu_nodes(), vec![0, 1]);
    assert_eq!(m.memory_nodes(), vec![0, 1, 2, 3]);
    assert_eq!(m.cpu_table().cpus(), 2 * 56 * 2);
}

#[test]
fn routes_follow_the_lowest_numbered_neighbour() {
    let m = presets::load("amd48").unwrap();
    let ic = m.interconnect();
    // node_pair sharing: every direct pair direction is a link (intra-socket pairs included).
    let direct_pairs: usize = (0..8).map(|a| (0..8).filter(|&b| m.hops[a][b] == 1).count()).sum();
    assert_eq!(ic.links.len(), direct_pairs);
    // 0 -> 3 is two hops; lowest neighbour of 0 one hop from 3 is node 1.
    let r = ic.route(0, 3);
    assert_eq!(r.len(), 2);
    assert_eq!(ic.links[r[0] as usize].name, "0->1");
    assert_eq!(ic.links[r[1] as usize].name, "1->3");
    // Narrow direction of the inter-package link 0-2: 2 -> 0.
    let back = ic.route(2, 0);
    assert_eq!(ic.links[back[0] as usize].capacity_gbps, 3.22);
    assert_eq!(ic.links[ic.route(0, 2)[0] as usize].capacity_gbps, 6.44);
}

#[test]
fn socket_pair_links_are_shared() {
    let m = presets::load("server-a-4n").unwrap();
    let ic = m.interconnect();
    // Two intra-socket pairs x 2 directions + one shared link per socket direction.
    assert_eq!(ic.links.len(), 4 + 2);
    assert_eq!(ic.route(0, 2), ic.route(1, 3));
    // CPU-less HBM behind socket 0 on xeon-max: 0 -> 2 crosses no limited link (intra = 0).
    let x = presets::load("xeon-max-hbm-flat").unwrap();
    let xi = x.interconnect();
    assert!(xi.route(2, 0).is_empty());
    assert_eq!(xi.route(3, 0).len(), 1, "HBM of socket 1 reaches socket 0 over UPI");
}

#[test]
fn parse_errors_name_origin_line_and_key() {
    let text = presets::text("server-a-2n").unwrap().replace("smt = 1", "smt = 1\nbogus_field = 3");
    let e = Machine::from_toml_str(&text, "my-box.toml").unwrap_err().to_string();
    assert!(e.starts_with("my-box.toml:"), "{e}");
    assert!(e.contains("bogus_field"), "{e}");
    let line = e.split(':').nth(1).unwrap().parse::<usize>().unwrap();
    assert_eq!(text.lines().nth(line - 1).unwrap(), "bogus_field = 3");

    let e = Machine::from_toml_str("name = ", "bad.toml").unwrap_err().to_string();
    assert!(e.starts_with("bad.toml:1"), "{e}");
}

#[test]
fn validation_rejects_inconsistent_machines() {
    let base = presets::text("server-a-4n").unwrap();
    let cases = [
        (base.replace("[80.0, 88.0, 138.0, 138.0]", "[80.0, 70.0, 138.0, 138.0]"), "below the local latency"),
        (base.replace("[10, 11, 21, 21]", "[10, 12, 21, 21]"), "slit is not symmetric"),
        (base.replacen("socket = 1", "socket = 7", 1), "is not below `sockets`"),
        (
            base.replacen("mem_bw_gbps = 50.0", "mem_bw_gbps = 0.0", 1),
            "`nodes[0].mem_bw_gbps` = 0 GB/s: must be a finite number in [0.001, 100000]",
        ),
    ];
    for (text, want) in cases {
        let e = Machine::from_toml_str(&text, "x").unwrap_err().to_string();
        assert!(e.contains(want), "wanted '{want}' in '{e}'");
    }
    let e = presets::load("nope").unwrap_err().to_string();
    assert!(e.contains("valid presets: amd48, "), "{e}");
}

#[test]
fn hops_must_be_shortest_paths() {
    let text = presets::text("amd48").unwrap().replacen("[0, 1, 1, 2, 1, 2, 1, 2]", "[0, 1, 1, 3, 1, 2, 1, 2]", 1);
    let e = Machine::from_toml_str(&text, "x").unwrap_err().to_string();
    assert!(e.contains("symmetric") || e.contains("shortest path"), "{e}");
}

/// `[core] mlp_stream` (docs/machines.md, "Core parameters"): parsed, round-tripped, and
/// absent unless the machine states it.
#[test]
fn core_mlp_stream_parses_and_round_trips() {
    let base = presets::text("amd48").unwrap();
    let m = Machine::from_toml_str(base, "t").unwrap();
    assert_eq!(m.mlp_stream(), None, "amd48 states no mlp_stream: the simulator's value applies");
    let text = base.replacen("[[nodes]]", "[core]\nmlp_stream = 12.5\nmlp_stream_source = \"a test\"\n\n[[nodes]]", 1);
    let m = Machine::from_toml_str(&text, "t").unwrap();
    assert_eq!(m.mlp_stream(), Some(12.5));
    assert_eq!(m.core.as_ref().unwrap().mlp_stream_source, "a test");
    let again = Machine::from_toml_str(&m.to_toml_string(), "roundtrip").unwrap();
    assert_eq!(again, m);
}

#[test]
fn core_mlp_stream_out_of_range_is_refused_with_the_key() {
    let base = presets::text("amd48").unwrap();
    let with = |core: &str| base.replacen("[[nodes]]", &format!("[core]\n{core}\n\n[[nodes]]"), 1);
    for (core, want) in [
        ("mlp_stream = 0.5", "core.mlp_stream = 0.5: lines in flight per thread must be a finite number in [1, 256]"),
        ("mlp_stream = 300.0", "core.mlp_stream = 300: lines in flight per thread must be a finite number in [1, 256]"),
        ("mlp_stream = nan", "core.mlp_stream = NaN"),
        ("mlp_stream_source = \"x\"", "core.mlp_stream_source is set but core.mlp_stream is not"),
    ] {
        let e = Machine::from_toml_str(&with(core), "f.toml").unwrap_err().to_string();
        assert!(e.contains(want), "{core}: {e}");
    }
    let e = Machine::from_toml_str(&with("mlp_random = 4.0"), "f.toml").unwrap_err().to_string();
    assert!(e.contains("unknown field `mlp_random`"), "{e}");
}

/// Every preset that states `[core] mlp_stream` names its source, and the value is Little's
/// law on the published single-thread triad and local latency it cites.
#[test]
fn preset_mlp_stream_is_littles_law_on_its_published_figures() {
    let mut stated = 0;
    for name in presets::names() {
        let m = presets::load(name).unwrap();
        let Some(core) = &m.core else { continue };
        let Some(mlp) = core.mlp_stream else { continue };
        assert!(!core.mlp_stream_source.trim().is_empty(), "{name}: no source");
        let p = m.published.as_ref().unwrap_or_else(|| panic!("{name}: mlp_stream without published figures"));
        let first = m.cpu_nodes()[0] as usize;
        // The single-thread triad it cites: on the first CPU node's own memory, or (a machine
        // whose published single-thread figure is on its CPU-less node) on that node.
        let (thread, latency) = match (&p.stream_triad_thread_gbps, &p.stream_triad_cpuless_thread_gbps) {
            (Some(f), _) => (f.value, m.latency_ns[first][first]),
            (None, Some(f)) => {
                let cpuless = m.memory_nodes().into_iter().find(|&n| m.nodes[n as usize].cores == 0).unwrap() as usize;
                (f.value, m.latency_ns[first][cpuless])
            }
            (None, None) => panic!("{name}: mlp_stream without a published single-thread triad"),
        };
        let want = CoreParams::mlp_from_littles_law(thread, latency, 64.0);
        assert!((mlp - want).abs() < 0.01, "{name}: mlp_stream {mlp}, Little's law gives {want}");
        stated += 1;
    }
    assert!(stated >= 4, "knl-7250-flat, xeon-e5-2690-2s/-1n and xeon-max-hbm-flat state their mlp_stream");
}

/// `[core] pause_cycles` (docs/machines.md, "Core parameters"): parsed, round-tripped,
/// refused out of range or as a source without a value, naming the key.
#[test]
fn core_pause_cycles_parses_and_is_checked() {
    let base = presets::text("amd48").unwrap();
    let with = |core: &str| base.replacen("[[nodes]]", &format!("[core]\n{core}\n\n[[nodes]]"), 1);
    let m = Machine::from_toml_str(&with("pause_cycles = 65.0\npause_cycles_source = \"a test\""), "t").unwrap();
    assert_eq!(m.pause_cycles(), Some(65.0));
    assert_eq!(Machine::from_toml_str(&m.to_toml_string(), "roundtrip").unwrap(), m);
    for (core, want) in [
        ("pause_cycles = 0.0", "core.pause_cycles = 0: cycles per PAUSE must be a finite number in [1, 10000]"),
        ("pause_cycles = 14000.0", "core.pause_cycles = 14000: cycles per PAUSE must be a finite number in [1, 10000]"),
        ("pause_cycles = inf", "core.pause_cycles = inf"),
        ("pause_cycles_source = \"x\"", "core.pause_cycles_source is set but core.pause_cycles is not"),
    ] {
        let e = Machine::from_toml_str(&with(core), "f.toml").unwrap_err().to_string();
        assert!(e.contains(want), "{core}: {e}");
    }
}

/// The presets that state a PAUSE latency cite it: the Skylake-SP presets 140 cycles, the
/// Sandy Bridge-EP ones 10 (Intel's optimization manual); the others take the simulator's.
#[test]
fn preset_pause_cycles_are_sourced() {
    let mut stated = Vec::new();
    for name in presets::names() {
        let m = presets::load(name).unwrap();
        let Some(cycles) = m.pause_cycles() else { continue };
        let source = &m.core.as_ref().unwrap().pause_cycles_source;
        assert!(source.contains("Optimization Reference Manual"), "{name}: {source}");
        stated.push((name, cycles));
    }
    assert_eq!(
        stated,
        [("xeon-e5-2690-2s", 10.0), ("xeon-e5-2690-1n", 10.0), ("server-a-4n", 140.0), ("server-a-2n", 140.0), ("server-b-8n", 140.0)]
    );
}
