//! Running the engine in real time (docs/live.md, "Stopping"): a round every period until the
//! target exits, a deadline passes, or SIGINT/SIGTERM arrives; then the engine's `finish`
//! restores the thread affinities it changed. The signal handlers only set a flag; the loop
//! notices it within 10 ms.

use super::engine::{LiveEngine, LiveError, LiveIo, LiveSummary, RoundEnd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// Set by SIGINT and SIGTERM while [`StopOnSignals`] is installed.
static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: libc::c_int) {
    STOP.store(true, Ordering::SeqCst);
}

const SIGNALS: [libc::c_int; 2] = [libc::SIGINT, libc::SIGTERM];

/// SIGINT and SIGTERM stop the agent cleanly while this lives; the previous dispositions come
/// back when it is dropped.
pub struct StopOnSignals {
    old: Vec<libc::sigaction>,
}

impl StopOnSignals {
    pub fn install() -> StopOnSignals {
        STOP.store(false, Ordering::SeqCst);
        let old = SIGNALS
            .iter()
            .map(|&s| {
                // SAFETY: sigaction with zeroed, then filled, structures of the right type; the
                // handler only stores to an atomic, which is async-signal-safe.
                unsafe {
                    let mut new: libc::sigaction = std::mem::zeroed();
                    new.sa_sigaction = on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t;
                    libc::sigemptyset(&mut new.sa_mask);
                    new.sa_flags = libc::SA_RESTART;
                    let mut old: libc::sigaction = std::mem::zeroed();
                    libc::sigaction(s, &new, &mut old);
                    old
                }
            })
            .collect();
        StopOnSignals { old }
    }

    pub fn stopped() -> bool {
        STOP.load(Ordering::SeqCst)
    }

    /// [`StopReason::Signal`] once SIGINT or SIGTERM arrived: `drive`'s `stop` for `attach`.
    pub fn reason() -> Option<StopReason> {
        Self::stopped().then_some(StopReason::Signal)
    }
}

impl Drop for StopOnSignals {
    fn drop(&mut self) {
        for (s, old) in SIGNALS.iter().zip(&self.old) {
            // SAFETY: restores a disposition sigaction returned.
            unsafe { libc::sigaction(*s, old, std::ptr::null_mut()) };
        }
    }
}

/// Why the loop ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    TargetExited,
    Deadline,
    Signal,
}

/// Rounds every `period` (time measured from `start`) until the target exits, `duration`
/// passes or `stop()` names a reason (a signal; for a launched program, its exit, which the
/// launcher sees before procfs does: an exited child stays a zombie until it is reaped); then
/// `finish`. An error ends the loop too, after the affinities are restored.
pub fn drive(
    mut engine: LiveEngine,
    io: &mut LiveIo,
    start: Instant,
    period: Duration,
    duration: Option<Duration>,
    stop: &mut dyn FnMut() -> Option<StopReason>,
) -> Result<(LiveSummary, StopReason), LiveError> {
    let mut reason = StopReason::Deadline;
    let mut failed = None;
    let mut next = start.elapsed();
    loop {
        if let Some(r) = stop() {
            reason = r;
            break;
        }
        if duration.is_some_and(|d| start.elapsed() >= d) {
            break;
        }
        // One reading of the clock: two could straddle `next` and the subtraction underflow
        // (it did, in a TCG guest).
        let now = start.elapsed();
        if now < next {
            std::thread::sleep((next - now).min(Duration::from_millis(10)));
            continue;
        }
        next += period;
        match engine.round(io, start.elapsed().as_nanos() as u64) {
            Ok(RoundEnd::Continue) => {}
            Ok(RoundEnd::TargetGone) => {
                reason = StopReason::TargetExited;
                break;
            }
            Err(e) => {
                failed = Some(e);
                break;
            }
        }
    }
    let summary = engine.finish(io)?;
    match failed {
        Some(e) => Err(e),
        None => Ok((summary, reason)),
    }
}
