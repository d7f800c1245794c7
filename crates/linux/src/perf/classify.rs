//! errno → status (perfutil §8). The probe opens every event alone; group-open errors of a
//! member whose probe succeeded mean "cannot be scheduled together", not "unsupported".

use super::sys::errno_name;
use numalab_core::profile::EventStatus;

/// Where the errno came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    /// The event opened alone as its own leader.
    Probe,
    /// The event added to a group after its probe succeeded.
    Member,
}

/// Context for the reason text.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Privilege {
    pub paranoid: Option<i32>,
    /// Counting per CPU (core/system scope) rather than per thread.
    pub per_cpu: bool,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Classified {
    pub status: EventStatus,
    pub reason: String,
    /// `true`: a member EINVAL; the group must be split, nothing is unsupported.
    pub split_group: bool,
}

fn c(status: EventStatus, reason: String) -> Classified {
    Classified { status, reason, split_group: false }
}

pub fn classify(errno: i32, phase: Phase, generic_hw: bool, pv: Privilege) -> Classified {
    let name = errno_name(errno);
    match errno {
        libc::ENOENT => c(EventStatus::Unsupported, format!("{name}: no PMU claims this event type, or the CPU model has no encoding for it (common in virtual machines)")),
        libc::EOPNOTSUPP => c(EventStatus::Unsupported, format!("{name}: the hardware lacks a feature this event needs")),
        libc::ENODEV => c(EventStatus::Unsupported, format!("{name}: not available on this CPU")),
        libc::EINVAL if phase == Phase::Member => Classified {
            status: EventStatus::NotCounted,
            reason: format!("{name} when added to the group although it opens alone: the events cannot be counted together on this PMU; use --repeat-split"),
            split_group: true,
        },
        libc::EINVAL if generic_hw => c(EventStatus::Unsupported, format!("{name}: the kernel's table for this CPU model marks the generic event invalid")),
        libc::EINVAL => c(EventStatus::Failed, format!("{name}: bad encoding or attribute (a bug to report)")),
        libc::EACCES => {
            let level = pv.paranoid.map(|p| format!("perf_event_paranoid = {p}")).unwrap_or_else(|| "perf_event_paranoid unknown".into());
            let what = if pv.per_cpu { "per-CPU counting needs perf_event_paranoid <= 0 or" } else { "needs" };
            c(EventStatus::Denied, format!("{name}: {level}; {what} CAP_PERFMON (Linux >= 5.8) or CAP_SYS_ADMIN; another user's thread needs ptrace-read access"))
        }
        libc::EPERM => c(EventStatus::Denied, format!("{name}: refused by a capability check, an LSM or kernel lockdown (on some non-x86 architectures: an unsupported exclude_user/exclude_kernel setting)")),
        libc::EBUSY => c(EventStatus::Failed, format!("{name}: busy, another event holds exclusive use of the PMU")),
        _ => c(EventStatus::Failed, format!("{name} ({errno})")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spec_table() {
        let pv = Privilege { paranoid: Some(2), per_cpu: false };
        assert_eq!(classify(libc::ENOENT, Phase::Probe, true, pv).status, EventStatus::Unsupported);
        assert_eq!(classify(libc::EOPNOTSUPP, Phase::Probe, true, pv).status, EventStatus::Unsupported);
        assert_eq!(classify(libc::EINVAL, Phase::Probe, true, pv).status, EventStatus::Unsupported);
        assert_eq!(classify(libc::EINVAL, Phase::Probe, false, pv).status, EventStatus::Failed);
        let m = classify(libc::EINVAL, Phase::Member, true, pv);
        assert!(m.split_group);
        assert_ne!(m.status, EventStatus::Unsupported);
        let d = classify(libc::EACCES, Phase::Probe, true, pv);
        assert_eq!(d.status, EventStatus::Denied);
        assert!(d.reason.contains("perf_event_paranoid = 2") && d.reason.contains("CAP_PERFMON"), "{}", d.reason);
        assert_eq!(classify(libc::EPERM, Phase::Probe, true, pv).status, EventStatus::Denied);
        let b = classify(libc::EBUSY, Phase::Probe, true, pv);
        assert_eq!((b.status, b.reason.contains("busy")), (EventStatus::Failed, true));
        assert!(classify(libc::EMFILE, Phase::Probe, false, pv).reason.starts_with("EMFILE"));
    }
}
