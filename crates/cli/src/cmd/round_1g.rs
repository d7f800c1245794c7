//! round-1g on live Linux (docs/live.md, "round-1g for launched programs" and "round-1g by
//! moving pages"): the range map from the policy and the host, and the agent's loop that
//! moves a launched program's pages to their range's node while it runs.
use crate::cmd::attach::{move_record, PageRecord};
use crate::scenario::{usage, Usage};
use anyhow::Result;
use numalab_linux::act::pages::{MoveOptions, PageOutcome, SystemPageMover};
use numalab_linux::act::range_bind;
use numalab_linux::act::range_move::{RangeMap, RangeMover, RangeTotals, MIN_RANGE_BYTES};
use numalab_linux::act::RunningChild;
use numalab_linux::export::{to_machine, ExportOptions};
use numalab_linux::procfs::maps::read_maps;
use numalab_linux::{FsRoot, Topology};
use numalab_policy::statics::{Round1G, Round1GConfig};
use numalab_policy::{DynPolicy, Policy, PolicyEnv};
use std::sync::Arc;
use std::time::{Duration, Instant};

pub(crate) const PAGE_BYTES: u64 = 4096;

/// The policy's home nodes (policy ids, in rotation order) on this host, and the range size
/// from `NUMALAB_R1G_RANGE_BYTES` (default 1 GiB).
pub(crate) fn range_map(policy: &dyn DynPolicy, topo: &Topology) -> Result<RangeMap> {
    let config: Round1GConfig = toml::Value::Table(policy.config_toml()).try_into().map_err(|e| Usage(format!("round-1g: {e}")))?;
    if !config.holes.is_empty() {
        usage!("round-1g: holes are guest-physical ranges of a simulated vm; a live process has none");
    }
    let machine = to_machine(topo, &ExportOptions::default()).map_err(|m| Usage(format!("this host's topology: {m}")))?.machine;
    let home = Round1G::new(config, &PolicyEnv::new(Arc::new(machine))).map_err(|e| Usage(e.to_string()))?.home_nodes().to_vec();
    let range_bytes = range_bind::range_bytes(std::env::var_os(range_bind::RANGE_ENV).as_deref()).map_err(|e| Usage(e.to_string()))?;
    Ok(RangeMap { home, kernel_ids: topo.nodes.iter().map(|n| n.id).collect(), range_bytes })
}

/// Whether the agent can move pages per range of this size (see [`MIN_RANGE_BYTES`]).
pub(crate) fn agent_moves(map: &RangeMap) -> bool {
    map.range_bytes >= MIN_RANGE_BYTES
}

pub(crate) fn small_range_note(range_bytes: u64) -> String {
    format!(
        "{}={range_bytes}: below 2 MiB a transparent huge page can span two ranges, so the agent does not move pages per range; only the preload library's binding applies",
        range_bind::RANGE_ENV
    )
}

/// What the agent did while the program ran.
pub(crate) struct RangeRun {
    pub totals: RangeTotals,
    /// Why the agent stopped moving before the program ended (a permission error, ...).
    pub error: Option<String>,
    pub records: Vec<PageRecord>,
}

/// Until `child` exits (or `duration` passes: the program runs on): every `period`, read its
/// maps and make one pass (docs/live.md, "round-1g by moving pages"). The program is never
/// waited for here (it stays unreaped, so its pid cannot name another process meanwhile).
pub(crate) fn correct_while_running(
    child: &RunningChild,
    map: RangeMap,
    period: Duration,
    duration: Option<Duration>,
    opts: &MoveOptions,
    log: bool,
    start: Instant,
) -> RangeRun {
    let mut run = RangeRun { totals: RangeTotals::default(), error: None, records: Vec::new() };
    let pid = child.pid();
    // Bound to the program's start time; a program already gone has nothing to move.
    let Ok(mut mover) = SystemPageMover::for_process(pid) else {
        return run;
    };
    let mut r = RangeMover::new(map, PAGE_BYTES);
    let root = FsRoot::host();
    'passes: loop {
        let t = Instant::now();
        while t.elapsed() < period {
            if child.exited() {
                break 'passes;
            }
            std::thread::sleep(period.saturating_sub(t.elapsed()).min(Duration::from_millis(10)));
        }
        if child.exited() || duration.is_some_and(|d| start.elapsed() >= d) {
            break;
        }
        let Ok(maps) = read_maps(&root, pid) else { break };
        let records = &mut run.records;
        let mut hear = |m: &_, o: PageOutcome| {
            if log {
                records.push(move_record("range_scan", start.elapsed().as_nanos() as u64, m, Some(o)));
            }
        };
        match r.pass(&mut mover, pid as i32, &maps, opts, &mut hear) {
            Ok(true) => {}
            Ok(false) => break,
            Err(e) => {
                run.error = Some(e.to_string());
                break;
            }
        }
    }
    run.totals = r.totals;
    run
}
