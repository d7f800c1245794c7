//! Probing events and counting one event group over a set of places (threads or CPUs).

use super::classify::{classify, Classified, Phase, Privilege};
use super::encoding::{encode, Encoding};
use super::read::{parse_group_read, GroupRead};
use super::sys::{self, PerfEventAttr};
use numalab_core::profile::EventStatus;
use std::os::fd::{AsRawFd, OwnedFd};

/// Where a group counts: one thread on any CPU (`pid = tid, cpu = -1`) or everything on one
/// CPU (`pid = -1, cpu`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Place {
    Thread(i32),
    Cpu(i32),
}

impl Place {
    fn pid_cpu(self) -> (i32, i32) {
        match self {
            Place::Thread(t) => (t, -1),
            Place::Cpu(c) => (-1, c),
        }
    }
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OpenOpts {
    /// Count threads and processes the place creates after the open.
    pub inherit: bool,
    /// Enable at the target's `exec` (a launched command), instead of by ioctl.
    pub enable_on_exec: bool,
    /// `exclude_kernel = exclude_hv = 1` (kernel counting refused, perfutil §7.1).
    pub user_only: bool,
}

fn attr(enc: Encoding, leader: bool, opts: OpenOpts) -> PerfEventAttr {
    let mut flags = 0;
    if leader {
        // Only a leader may be pinned; pinned groups never multiplex silently.
        flags |= sys::FLAG_DISABLED | sys::FLAG_PINNED;
        if opts.enable_on_exec {
            flags |= sys::FLAG_ENABLE_ON_EXEC;
        }
    }
    if opts.inherit {
        flags |= sys::FLAG_INHERIT;
    }
    if opts.user_only {
        flags |= sys::FLAG_EXCLUDE_KERNEL | sys::FLAG_EXCLUDE_HV;
    }
    let read_format =
        sys::PERF_FORMAT_GROUP | sys::PERF_FORMAT_ID | sys::PERF_FORMAT_TOTAL_TIME_ENABLED | sys::PERF_FORMAT_TOTAL_TIME_RUNNING;
    PerfEventAttr::counting(enc.type_, enc.config, read_format, flags)
}

/// Probe outcome of one event.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Probed {
    pub id: String,
    pub encoding: Option<Encoding>,
    /// `None`: the event opens.
    pub problem: Option<Classified>,
    /// Opened only with kernel counting excluded.
    pub needs_user_only: bool,
}

/// Open every event alone, as its own disabled leader at `place` (perfutil §8 probe).
pub fn probe(ids: &[String], place: Place, pv: Privilege) -> Vec<Probed> {
    ids.iter()
        .map(|id| {
            let Some(enc) = encode(id) else {
                return Probed {
                    id: id.clone(),
                    encoding: None,
                    problem: Some(Classified {
                        status: EventStatus::Unsupported,
                        reason: format!("no encoding for `{id}` on Linux (needs an uncore PMU or a raw event)"),
                        split_group: false,
                    }),
                    needs_user_only: false,
                };
            };
            let (pid, cpu) = place.pid_cpu();
            let full = sys::perf_event_open(&attr(enc, true, OpenOpts::default()), pid, cpu, -1);
            match full {
                Ok(_) => Probed { id: id.clone(), encoding: Some(enc), problem: None, needs_user_only: false },
                Err(libc::EACCES) => {
                    // Kernel counting refused: retry once user-only (perfutil §7.1).
                    let user = sys::perf_event_open(&attr(enc, true, OpenOpts { user_only: true, ..Default::default() }), pid, cpu, -1);
                    match user {
                        Ok(_) => Probed { id: id.clone(), encoding: Some(enc), problem: None, needs_user_only: true },
                        Err(e) => Probed {
                            id: id.clone(),
                            encoding: Some(enc),
                            problem: Some(classify(e, Phase::Probe, enc.is_generic_hw(), pv)),
                            needs_user_only: false,
                        },
                    }
                }
                Err(e) => Probed {
                    id: id.clone(),
                    encoding: Some(enc),
                    problem: Some(classify(e, Phase::Probe, enc.is_generic_hw(), pv)),
                    needs_user_only: false,
                },
            }
        })
        .collect()
}

/// One opened group at one place.
#[derive(Debug)]
pub struct Group {
    pub place: Place,
    leader: OwnedFd,
    _members: Vec<OwnedFd>,
    /// Kernel event id of each member, in the order of the group's events.
    ids: Vec<u64>,
}

/// Opening failed at member `index` with `errno` (index 0 is the leader).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OpenFailure {
    pub index: usize,
    pub errno: i32,
}

impl Group {
    pub fn open(encodings: &[Encoding], place: Place, opts: OpenOpts) -> Result<Group, OpenFailure> {
        let (pid, cpu) = place.pid_cpu();
        let Some((&first, rest)) = encodings.split_first() else {
            return Err(OpenFailure { index: 0, errno: libc::EINVAL });
        };
        let leader = sys::perf_event_open(&attr(first, true, opts), pid, cpu, -1).map_err(|errno| OpenFailure { index: 0, errno })?;
        let mut ids = vec![sys::event_id(leader.as_raw_fd()).map_err(|errno| OpenFailure { index: 0, errno })?];
        let mut members = Vec::new();
        for (k, &enc) in rest.iter().enumerate() {
            let fd = sys::perf_event_open(&attr(enc, false, opts), pid, cpu, leader.as_raw_fd())
                .map_err(|errno| OpenFailure { index: k + 1, errno })?;
            ids.push(sys::event_id(fd.as_raw_fd()).map_err(|errno| OpenFailure { index: k + 1, errno })?);
            members.push(fd);
        }
        Ok(Group { place, leader, _members: members, ids })
    }

    pub fn enable(&self) -> Result<(), i32> {
        sys::enable_group(self.leader.as_raw_fd())
    }

    pub fn disable(&self) -> Result<(), i32> {
        sys::disable_group(self.leader.as_raw_fd())
    }

    pub fn reset(&self) -> Result<(), i32> {
        sys::reset_group(self.leader.as_raw_fd())
    }

    /// Read the group; `Ok(None)` when the kernel returns 0 bytes (pinned group in error
    /// state: not schedulable).
    pub fn read(&self) -> Result<Option<GroupRead>, String> {
        let mut buf = vec![0u8; 8 * (3 + 2 * self.ids.len())];
        let n = sys::read_fd(self.leader.as_raw_fd(), &mut buf).map_err(|e| format!("{} reading the group", sys::errno_name(e)))?;
        if n == 0 {
            return Ok(None);
        }
        parse_group_read(&buf[..n]).map(Some)
    }

    /// Values in the order of the group's events; `None` for an id missing from the read.
    pub fn values(&self, r: &GroupRead) -> Vec<Option<u64>> {
        self.ids.iter().map(|&id| r.value_of(id)).collect()
    }
}

/// Accumulated reading of one event over all places of a [`CounterSet`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Total {
    pub value: u64,
    pub enabled_ns: u64,
    pub running_ns: u64,
}

/// Result of reading a set: per event a total, or why there is none.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SetReading {
    Values(Vec<Total>),
    NotSchedulable,
    Failed(String),
}

/// One group of events opened at many places (every thread of a process, or every CPU).
#[derive(Debug)]
pub struct CounterSet {
    pub events: Vec<String>,
    encodings: Vec<Encoding>,
    opts: OpenOpts,
    pub groups: Vec<Group>,
}

impl CounterSet {
    pub fn new(events: Vec<String>, encodings: Vec<Encoding>, opts: OpenOpts) -> CounterSet {
        CounterSet { events, encodings, opts, groups: Vec::new() }
    }

    /// Open the group at one more place (a thread found later, or a CPU).
    pub fn add(&mut self, place: Place) -> Result<(), OpenFailure> {
        let g = Group::open(&self.encodings, place, self.opts)?;
        self.groups.push(g);
        Ok(())
    }

    pub fn has(&self, place: Place) -> bool {
        self.groups.iter().any(|g| g.place == place)
    }

    pub fn enable(&self) {
        // A thread that exited keeps its counters readable; ESRCH-like errors are harmless.
        for g in &self.groups {
            let _ = g.enable();
        }
    }

    pub fn disable(&self) {
        for g in &self.groups {
            let _ = g.disable();
        }
    }

    pub fn read(&self) -> SetReading {
        let mut totals = vec![Total::default(); self.events.len()];
        for g in &self.groups {
            match g.read() {
                Ok(Some(r)) => {
                    for (k, v) in g.values(&r).into_iter().enumerate() {
                        let Some(v) = v else {
                            return SetReading::Failed(format!("event {} missing from the group read", self.events[k]));
                        };
                        totals[k].value += v;
                        totals[k].enabled_ns += r.time_enabled_ns;
                        totals[k].running_ns += r.time_running_ns;
                    }
                }
                Ok(None) => return SetReading::NotSchedulable,
                Err(e) => return SetReading::Failed(e),
            }
        }
        SetReading::Values(totals)
    }
}
