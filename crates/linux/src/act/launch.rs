//! Launching a program under a static policy (docs/live.md, "numalab run").
//!
//! The plan is a list of [`LaunchAction`]s, each realised by one system call made in the
//! child between `fork` and `exec`: `set_mempolicy` (inherited by every thread the program
//! creates and kept across `exec`) and `sched_setaffinity` (the same). Before forking, the
//! agent makes the same calls in a throwaway thread of its own ([`Launcher::probe`]): the
//! kernel's refusal (a mode older kernels lack, a node outside the cpuset) is then reported
//! by name, which an errno coming back from the forked child could not be.

use super::mempolicy::{mode_name, KernelMempolicy};
use super::syscall::{cpu_mask, errno_text, SysCall};
use super::ActError;
use crate::topology::Topology;
use numalab_policy::MempolicyIntent;
use serde::Serialize;
use std::ffi::OsString;
use std::time::{Duration, Instant};

/// One thing the agent does to a launched program.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum LaunchAction {
    /// The memory policy of every thread the program will have.
    SetMempolicy(KernelMempolicy),
    /// The CPUs the program may run on: every CPU of `nodes` (kernel node ids).
    SetAffinity { nodes: Vec<u32>, cpus: Vec<u32> },
}

impl LaunchAction {
    pub fn syscall(&self) -> SysCall {
        match self {
            LaunchAction::SetMempolicy(k) => {
                let (nodemask, maxnode) = k.mask_and_maxnode();
                SysCall::SetMempolicy { mode: k.mode_value(), nodemask, maxnode }
            }
            LaunchAction::SetAffinity { cpus, .. } => SysCall::SchedSetaffinity { tid: 0, mask: cpu_mask(cpus) },
        }
    }

    /// One line for the summary.
    pub fn describe(&self) -> String {
        match self {
            LaunchAction::SetMempolicy(k) if k.nodes.is_empty() => format!("memory policy {}", mode_name(k.mode)),
            LaunchAction::SetMempolicy(k) => format!("memory policy {} on nodes {}", mode_name(k.mode), list(&k.nodes)),
            LaunchAction::SetAffinity { nodes, cpus } => format!("CPUs {} (nodes {})", list(cpus), list(nodes)),
        }
    }

    fn refusal_hint(&self, errno: i32) -> String {
        match self {
            LaunchAction::SetMempolicy(k) if errno == libc::EINVAL => match k.needs_kernel() {
                Some(v) => format!(" (mode {} needs Linux {v} or later)", mode_name(k.mode)),
                None => " (a node outside this process's cpuset, or a kernel without the mode)".into(),
            },
            LaunchAction::SetAffinity { .. } if errno == libc::EINVAL => " (no CPU of these nodes is in this process's cpuset)".into(),
            _ => String::new(),
        }
    }
}

fn list(v: &[u32]) -> String {
    v.iter().map(u32::to_string).collect::<Vec<_>>().join(",")
}

/// The plan for a static policy: its memory policy, then (with `cpus_on`) the CPUs of those
/// nodes. Node numbers of the intent and of `cpus_on` are the machine's (`0..n`, the host's
/// online nodes in ascending order); the actions carry the kernel's ids.
pub fn static_plan(intent: &MempolicyIntent, topo: &Topology, cpus_on: &[u32]) -> Result<Vec<LaunchAction>, ActError> {
    let kernel_ids: Vec<u32> = topo.nodes.iter().map(|n| n.id).collect();
    let mut plan = vec![LaunchAction::SetMempolicy(KernelMempolicy::from_intent(intent, &kernel_ids)?)];
    plan.extend(cpu_plan(topo, cpus_on)?);
    Ok(plan)
}

/// The CPUs of the nodes `cpus_on` (machine node numbers) as one action; none for an empty
/// list. A dynamic policy's launch plan is this alone: its pages start where the kernel's
/// default policy puts them (first touch), as in the simulator.
pub fn cpu_plan(topo: &Topology, cpus_on: &[u32]) -> Result<Option<LaunchAction>, ActError> {
    if cpus_on.is_empty() {
        return Ok(None);
    }
    let mut nodes = Vec::new();
    let mut cpus = Vec::new();
    for &n in cpus_on {
        let node = topo.nodes.get(n as usize).ok_or(ActError::NoSuchNode { node: n, nodes: topo.nodes.len() })?;
        if node.cpus.is_empty() {
            return Err(ActError::CpuLessNode { node: n });
        }
        if !nodes.contains(&node.id) {
            nodes.push(node.id);
            cpus.extend_from_slice(&node.cpus);
        }
    }
    nodes.sort_unstable();
    cpus.sort_unstable();
    Ok(Some(LaunchAction::SetAffinity { nodes, cpus }))
}

/// How a launched program ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct ChildExit {
    /// Exit code, if it exited.
    pub code: Option<i32>,
    /// Signal number, if a signal ended it.
    pub signal: Option<i32>,
    #[serde(skip)]
    pub wall: Duration,
}

impl ChildExit {
    /// The status a shell would report: the code, or 128 + the signal.
    pub fn shell_status(&self) -> i32 {
        match (self.code, self.signal) {
            (Some(c), _) => c,
            (None, Some(s)) => 128 + s,
            (None, None) => 1,
        }
    }
}

/// Starts programs; the real one forks and execs, the fake records.
pub trait Launcher {
    /// Make `calls` in a throwaway thread of this process: the kernel's answer to each.
    fn probe(&mut self, calls: &[SysCall]) -> Vec<Result<(), i32>>;
    /// Start `argv`, making `calls` in the child before `exec`, and wait for it to end.
    fn run(&mut self, argv: &[OsString], calls: &[SysCall]) -> Result<ChildExit, ActError>;
}

/// What became of an action: the decision log's `outcome`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ActionOutcome {
    Applied,
    /// `--dry-run`: decided, never made.
    DryRun,
}

/// One line of the decision log (`numalab.decisions/1`, docs/json.md).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ActionRecord {
    pub run: u32,
    /// Time since the agent started.
    pub time_ns: u64,
    pub cause: LaunchCause,
    pub decision: LaunchAction,
    pub outcome: ActionOutcome,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum LaunchCause {
    Launch,
}

/// What `numalab run` did.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct LaunchReport {
    pub actions: Vec<ActionRecord>,
    pub exit: ChildExit,
    pub wall_s: f64,
}

/// The plan's system calls, each first made once by `launcher.probe`: a call the kernel
/// refuses is an error naming the call, the errno and what it needs.
pub fn checked_calls(launcher: &mut dyn Launcher, plan: &[LaunchAction]) -> Result<Vec<SysCall>, ActError> {
    let calls: Vec<SysCall> = plan.iter().map(LaunchAction::syscall).collect();
    for ((action, call), answer) in plan.iter().zip(&calls).zip(launcher.probe(&calls)) {
        if let Err(errno) = answer {
            return Err(ActError::KernelRefused {
                call: call.name(),
                what: action.describe(),
                errno,
                reason: format!("{}{}", errno_text(errno), action.refusal_hint(errno)),
            });
        }
    }
    Ok(calls)
}

/// The decision-log records of a plan carried out (or not, in a dry run) at `time_ns`.
pub fn action_records(plan: &[LaunchAction], dry_run: bool, time_ns: u64) -> Vec<ActionRecord> {
    let outcome = if dry_run { ActionOutcome::DryRun } else { ActionOutcome::Applied };
    plan.iter().map(|a| ActionRecord { run: 0, time_ns, cause: LaunchCause::Launch, decision: a.clone(), outcome }).collect()
}

/// Probe, then launch and wait. `dry_run` launches the program unchanged and records every
/// action as `dry_run`.
pub fn launch(launcher: &mut dyn Launcher, argv: &[OsString], plan: &[LaunchAction], dry_run: bool) -> Result<LaunchReport, ActError> {
    let start = Instant::now();
    if argv.is_empty() {
        return Err(ActError::NoCommand);
    }
    let calls = if dry_run { Vec::new() } else { checked_calls(launcher, plan)? };
    let actions = action_records(plan, dry_run, start.elapsed().as_nanos() as u64);
    let exit = launcher.run(argv, &calls)?;
    Ok(LaunchReport { actions, exit, wall_s: start.elapsed().as_secs_f64() })
}

/// CPU time (user + system) this process has used so far: the agent's own overhead.
pub fn own_cpu_seconds() -> f64 {
    // SAFETY: getrusage fills the zeroed struct we pass.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) } != 0 {
        return 0.0;
    }
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 * 1e-6;
    secs(ru.ru_utime) + secs(ru.ru_stime)
}

/// Records what it is asked to do and runs nothing.
#[derive(Debug, Default)]
pub struct RecordingLauncher {
    /// Calls probed, in order.
    pub probed: Vec<SysCall>,
    /// Programs launched, with the calls made in the child.
    pub launched: Vec<(Vec<OsString>, Vec<SysCall>)>,
    /// The probe answers `Err(errno)` for the call at this index.
    pub refuse: Option<(usize, i32)>,
    /// How every launched program ends.
    pub exit_code: i32,
}

impl Launcher for RecordingLauncher {
    fn probe(&mut self, calls: &[SysCall]) -> Vec<Result<(), i32>> {
        self.probed.extend_from_slice(calls);
        (0..calls.len()).map(|i| if self.refuse.map(|(j, _)| j) == Some(i) { Err(self.refuse.unwrap().1) } else { Ok(()) }).collect()
    }

    fn run(&mut self, argv: &[OsString], calls: &[SysCall]) -> Result<ChildExit, ActError> {
        self.launched.push((argv.to_vec(), calls.to_vec()));
        Ok(ChildExit { code: Some(self.exit_code), signal: None, wall: Duration::ZERO })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::act::system::SystemLauncher;
    use crate::act::ActError;
    use numalab_policy::MempolicyMode;

    fn interleave(nodes: &[u32]) -> LaunchAction {
        LaunchAction::SetMempolicy(KernelMempolicy { mode: MempolicyMode::Interleave, nodes: nodes.to_vec(), caveat: None })
    }

    fn argv(args: &[&str]) -> Vec<OsString> {
        args.iter().map(OsString::from).collect()
    }

    #[test]
    fn a_plan_becomes_exactly_these_calls_probed_then_made_in_the_child() {
        let plan = [interleave(&[0, 1]), LaunchAction::SetAffinity { nodes: vec![1], cpus: vec![2, 3] }];
        let mut fake = RecordingLauncher { exit_code: 7, ..Default::default() };
        let r = launch(&mut fake, &argv(&["./app", "-x"]), &plan, false).unwrap();
        let calls = vec![
            SysCall::SetMempolicy { mode: 3, nodemask: vec![0b11], maxnode: 65 },
            SysCall::SchedSetaffinity { tid: 0, mask: vec![0b1100] },
        ];
        assert_eq!(fake.probed, calls);
        assert_eq!(fake.launched, vec![(argv(&["./app", "-x"]), calls)]);
        assert_eq!(r.exit.shell_status(), 7);
        assert_eq!(r.actions.len(), 2);
        assert!(r.actions.iter().all(|a| a.outcome == ActionOutcome::Applied));
        assert_eq!(r.actions[1].decision, plan[1]);
    }

    #[test]
    fn dry_run_launches_the_program_unchanged_and_probes_nothing() {
        let plan = [interleave(&[0, 1])];
        let mut fake = RecordingLauncher::default();
        let r = launch(&mut fake, &argv(&["./app"]), &plan, true).unwrap();
        assert!(fake.probed.is_empty());
        assert_eq!(fake.launched, vec![(argv(&["./app"]), vec![])]);
        assert_eq!(r.actions[0].outcome, ActionOutcome::DryRun);
    }

    #[test]
    fn a_refused_call_stops_before_launch_and_names_the_kernel_version() {
        let plan = [LaunchAction::SetMempolicy(KernelMempolicy { mode: MempolicyMode::PreferredMany, nodes: vec![0, 1], caveat: None })];
        let mut fake = RecordingLauncher { refuse: Some((0, libc::EINVAL)), ..Default::default() };
        let e = launch(&mut fake, &argv(&["./app"]), &plan, false).unwrap_err().to_string();
        assert!(fake.launched.is_empty());
        assert_eq!(
            e,
            "the kernel refused set_mempolicy for memory policy preferred_many on nodes 0,1: Invalid argument (mode preferred_many needs Linux 5.15 or later)"
        );
    }

    fn guest_2n() -> Topology {
        let root = crate::FsRoot::at(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/guest-2n"));
        Topology::read(&root).unwrap()
    }

    #[test]
    fn static_plans_on_the_captured_two_node_guest() {
        let t = guest_2n();
        let bind1 = MempolicyIntent { mode: MempolicyMode::Bind, nodes: vec![1], caveat: None };
        let plan = static_plan(&bind1, &t, &[0]).unwrap();
        assert_eq!(plan[0], LaunchAction::SetMempolicy(KernelMempolicy { mode: MempolicyMode::Bind, nodes: vec![1], caveat: None }));
        assert_eq!(plan[1], LaunchAction::SetAffinity { nodes: vec![0], cpus: vec![0, 1] });
        assert_eq!(plan[1].describe(), "CPUs 0,1 (nodes 0)");
        let e = static_plan(&bind1, &t, &[2]).unwrap_err().to_string();
        assert_eq!(e, "node 2 does not exist: this host has 2 nodes");
    }

    #[test]
    fn cpu_less_nodes_cannot_run_the_program() {
        let root = crate::FsRoot::at(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/guest-4n"));
        let t = Topology::read(&root).unwrap();
        let local = MempolicyIntent { mode: MempolicyMode::Local, nodes: vec![], caveat: None };
        let e = static_plan(&local, &t, &[3]).unwrap_err().to_string();
        assert_eq!(e, "node 3 has no CPUs: --cpus-on needs nodes with CPUs");
        assert_eq!(static_plan(&local, &t, &[1, 2, 1]).unwrap()[1], LaunchAction::SetAffinity { nodes: vec![1, 2], cpus: vec![2, 3] });
    }

    #[test]
    fn no_command_is_an_error() {
        let e = launch(&mut RecordingLauncher::default(), &[], &[], false).unwrap_err().to_string();
        assert!(e.contains("no command"), "{e}");
    }

    #[test]
    fn decision_log_records_are_the_documented_json() {
        let rec =
            ActionRecord { run: 0, time_ns: 5, cause: LaunchCause::Launch, decision: interleave(&[0, 1]), outcome: ActionOutcome::Applied };
        assert_eq!(
            serde_json::to_string(&rec).unwrap(),
            r#"{"run":0,"time_ns":5,"cause":{"event":"launch"},"decision":{"kind":"set_mempolicy","mode":"interleave","nodes":[0,1]},"outcome":"applied"}"#
        );
        let aff = LaunchAction::SetAffinity { nodes: vec![1], cpus: vec![2, 3] };
        assert_eq!(serde_json::to_string(&aff).unwrap(), r#"{"kind":"set_affinity","nodes":[1],"cpus":[2,3]}"#);
    }

    /// The real launcher on this host: the program sees the affinity and memory policy set
    /// between fork and exec, and its exit code comes back.
    #[test]
    fn the_system_launcher_applies_the_calls_in_the_child() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("status");
        let script =
            format!("grep Cpus_allowed_list /proc/self/status > {0}; head -n 1 /proc/self/numa_maps >> {0}; exit 3", out.display());
        let plan = [
            LaunchAction::SetMempolicy(KernelMempolicy { mode: MempolicyMode::Local, nodes: vec![], caveat: None }),
            LaunchAction::SetAffinity { nodes: vec![0], cpus: vec![0] },
        ];
        let r = launch(&mut SystemLauncher, &argv(&["sh", "-c", &script]), &plan, false).unwrap();
        assert_eq!(r.exit.code, Some(3));
        let text = std::fs::read_to_string(&out).unwrap();
        assert!(text.starts_with("Cpus_allowed_list:\t0\n"), "{text}");
        assert!(text.lines().nth(1).unwrap().contains(" local "), "{text}");
        // Without the calls the same program keeps the defaults.
        launch(&mut SystemLauncher, &argv(&["sh", "-c", &script]), &plan, true).unwrap();
        let text = std::fs::read_to_string(&out).unwrap();
        assert!(text.lines().nth(1).unwrap().contains(" default "), "{text}");
    }

    #[test]
    fn a_missing_program_is_a_spawn_error_naming_it() {
        let e = launch(&mut SystemLauncher, &argv(&["/nonexistent/numalab-test-prog"]), &[], false).unwrap_err();
        assert_eq!(e.to_string(), "cannot run /nonexistent/numalab-test-prog");
        let ActError::Spawn { source, .. } = e else { panic!("{e:?}") };
        assert_eq!(source.kind(), std::io::ErrorKind::NotFound);
    }
}
