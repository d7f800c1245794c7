//! The real [`Launcher`]: `fork`, the planned calls, `exec`, wait.
//!
//! Signals while the program runs, as `time(1)` and `system(3)` do: the agent ignores SIGINT
//! and SIGQUIT (a terminal sends them to the whole foreground group, so the program gets its
//! own and the agent lives to print the summary) and forwards SIGTERM and SIGHUP to the
//! program. The child gets back the dispositions the agent started with.

use super::launch::{ChildExit, Launcher};
use super::syscall::SysCall;
use super::ActError;
use std::ffi::OsString;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::Command;
use std::sync::atomic::{AtomicI32, Ordering};
use std::time::Instant;

/// Launches real programs.
#[derive(Debug, Default)]
pub struct SystemLauncher;

/// The program's pid while it runs, for the forwarding handler (0: none).
static CHILD_PID: AtomicI32 = AtomicI32::new(0);

extern "C" fn forward(signal: libc::c_int) {
    let pid = CHILD_PID.load(Ordering::SeqCst);
    if pid > 0 {
        // SAFETY: kill is async-signal-safe.
        unsafe { libc::kill(pid, signal) };
    }
}

const IGNORED: [libc::c_int; 2] = [libc::SIGINT, libc::SIGQUIT];
const FORWARDED: [libc::c_int; 2] = [libc::SIGTERM, libc::SIGHUP];

fn set_action(signal: libc::c_int, handler: libc::sighandler_t) -> libc::sigaction {
    // SAFETY: sigaction with zeroed, then filled, structures of the right type.
    unsafe {
        let mut new: libc::sigaction = std::mem::zeroed();
        new.sa_sigaction = handler;
        libc::sigemptyset(&mut new.sa_mask);
        new.sa_flags = libc::SA_RESTART;
        let mut old: libc::sigaction = std::mem::zeroed();
        libc::sigaction(signal, &new, &mut old);
        old
    }
}

fn restore(signal: libc::c_int, old: &libc::sigaction) {
    // SAFETY: restores a disposition sigaction returned.
    unsafe { libc::sigaction(signal, old, std::ptr::null_mut()) };
}

impl Launcher for SystemLauncher {
    fn probe(&mut self, calls: &[SysCall]) -> Vec<Result<(), i32>> {
        // Memory policy and affinity are per thread: a thread that ends takes them with it.
        let calls = calls.to_vec();
        std::thread::spawn(move || calls.iter().map(SysCall::invoke).collect()).join().unwrap_or_else(|_| vec![Err(libc::EIO)])
    }

    fn run(&mut self, argv: &[OsString], calls: &[SysCall]) -> Result<ChildExit, ActError> {
        spawn(argv, calls, &[])?.wait()
    }
}

/// A launched program that is still running, with the agent's signal dispositions of
/// `numalab run` in force (SIGINT/SIGQUIT ignored, SIGTERM/SIGHUP forwarded) until
/// [`RunningChild::wait`] restores them.
pub struct RunningChild {
    child: std::process::Child,
    program: String,
    start: Instant,
    old_ignored: Vec<libc::sigaction>,
    old_forwarded: Vec<libc::sigaction>,
}

impl RunningChild {
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The program has ended (it is a zombie waiting for [`RunningChild::wait`]): checked
    /// with `waitid(WNOWAIT)`, which leaves it unreaped so its pid cannot be reused meanwhile.
    pub fn exited(&self) -> bool {
        // SAFETY: waitid on our own child with a zeroed siginfo it fills.
        unsafe {
            let mut info: libc::siginfo_t = std::mem::zeroed();
            let r = libc::waitid(libc::P_PID, self.child.id(), &mut info, libc::WEXITED | libc::WNOHANG | libc::WNOWAIT);
            r == 0 && info.si_pid() != 0
        }
    }

    /// Wait for the program to end and restore the agent's signal dispositions.
    pub fn wait(mut self) -> Result<ChildExit, ActError> {
        let status = self.child.wait();
        CHILD_PID.store(0, Ordering::SeqCst);
        for (s, old) in FORWARDED.iter().zip(&self.old_forwarded).chain(IGNORED.iter().zip(&self.old_ignored)) {
            restore(*s, old);
        }
        let program = std::mem::take(&mut self.program);
        let status = status.map_err(|source| ActError::Spawn { program, source })?;
        Ok(ChildExit { code: status.code(), signal: status.signal(), wall: self.start.elapsed() })
    }
}

/// Start `argv` with `calls` made in the child before `exec` and `env` added to its
/// environment; the agent's signal dispositions change as the module says.
pub fn spawn(argv: &[OsString], calls: &[SysCall], env: &[(OsString, OsString)]) -> Result<RunningChild, ActError> {
    if argv.is_empty() {
        return Err(ActError::NoCommand);
    }
    let program = argv[0].to_string_lossy().into_owned();
    let start = Instant::now();
    let old_ignored: Vec<libc::sigaction> = IGNORED.iter().map(|&s| set_action(s, libc::SIG_IGN)).collect();
    let child_restore = old_ignored.clone();
    let calls = calls.to_vec();
    let mut cmd = Command::new(&argv[0]);
    cmd.args(&argv[1..]);
    for (k, v) in env {
        cmd.env(k, v);
    }
    // SAFETY: the closure only makes system calls (SysCall::invoke, sigaction) on data
    // prepared before the fork; it allocates nothing.
    unsafe {
        cmd.pre_exec(move || {
            for (s, old) in IGNORED.iter().zip(&child_restore) {
                restore(*s, old);
            }
            for c in &calls {
                c.invoke().map_err(std::io::Error::from_raw_os_error)?;
            }
            Ok(())
        });
    }
    let child = match cmd.spawn() {
        Ok(c) => c,
        Err(source) => {
            for (s, old) in IGNORED.iter().zip(&old_ignored) {
                restore(*s, old);
            }
            return Err(ActError::Spawn { program, source });
        }
    };
    CHILD_PID.store(child.id() as i32, Ordering::SeqCst);
    let old_forwarded: Vec<libc::sigaction> =
        FORWARDED.iter().map(|&s| set_action(s, forward as *const () as libc::sighandler_t)).collect();
    Ok(RunningChild { child, program, start, old_ignored, old_forwarded })
}
