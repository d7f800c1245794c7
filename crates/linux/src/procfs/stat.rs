//! `/proc/PID/stat`: the process's start time, which tells a process from a later one that
//! reuses its pid (the agent checks it before every `move_pages` call, so it never touches a
//! process it was not given).

use crate::error::{LinuxError, Result};
use crate::root::FsRoot;
use std::path::Path;

/// Field `n` (1-based, `n >= 3`) of a stat line, named `name` in errors. The command name
/// (field 2) is in parentheses and may itself contain spaces and parentheses: fields are
/// counted after the last `)`.
fn field<'t>(path: &Path, text: &'t str, n: usize, name: &str) -> Result<&'t str> {
    let after = text.rfind(')').map(|i| &text[i + 1..]).ok_or_else(|| LinuxError::parse(path, 1, name, "no `)` after the command name"))?;
    after.split_whitespace().nth(n - 3).ok_or_else(|| LinuxError::parse(path, 1, name, format!("fewer than {n} fields")))
}

fn number(path: &Path, text: &str, n: usize, name: &str) -> Result<u64> {
    let f = field(path, text, n, name)?;
    f.parse().map_err(|_| LinuxError::parse(path, 1, name, format!("{f:?} is not a number")))
}

/// Field 22, `starttime` (clock ticks after boot).
pub fn parse_start_time(path: &Path, text: &str) -> Result<u64> {
    number(path, text, 22, "starttime")
}

pub fn start_time(root: &FsRoot, pid: u32) -> Result<u64> {
    let (path, text) = root.read(&format!("/proc/{pid}/stat"))?;
    parse_start_time(&path, &text)
}

/// Field 3, the state letter: `R`, `S`, `D`, `Z` (zombie: exited, not yet reaped), `X` (dead), …
pub fn parse_state(path: &Path, text: &str) -> Result<char> {
    field(path, text, 3, "state")?.chars().next().ok_or_else(|| LinuxError::parse(path, 1, "state", "missing"))
}

/// `PF_EXITING` in field 9 (`flags`, include/linux/sched.h): the task has begun to exit and
/// its memory may already be half torn down.
pub const PF_EXITING: u64 = 0x4;

/// Field 9, the task's `PF_*` flags.
pub fn parse_flags(path: &Path, text: &str) -> Result<u64> {
    number(path, text, 9, "flags")
}

/// A zombie or dead task: it has exited and has no memory left.
fn exited(path: &Path, text: &str) -> bool {
    parse_state(path, text).map_or(true, |s| s == 'Z' || s == 'X')
}

/// The process is exiting or gone (no stat, a zombie, or `PF_EXITING` set): what its memory
/// maps show now is not what it ran with.
pub fn exiting(root: &FsRoot, pid: u32) -> bool {
    match root.read(&format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok((path, text)) => exited(&path, &text) || parse_flags(&path, &text).map_or(true, |f| f & PF_EXITING != 0),
    }
}

/// The process that started at `start` is gone: no such pid, a pid reused by a later process,
/// a process that has exited (zombie or dead), or one that has begun to exit (`PF_EXITING`:
/// the kernel's do_exit sets it before exit_mm releases the memory, so a task whose memory is
/// already gone always shows it). Such a process has no memory left to act on.
pub fn process_gone(root: &FsRoot, pid: u32, start: u64) -> bool {
    match root.read(&format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok((path, text)) => {
            parse_start_time(&path, &text).map_or(true, |t| t != start)
                || exited(&path, &text)
                || parse_flags(&path, &text).map_or(true, |f| f & PF_EXITING != 0)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn start_time_is_field_22_counted_after_the_command_name() {
        // Verbatim from Linux 6.18 (`cat /proc/self/stat`).
        let text = "5154 (cat) R 5152 5152 1480 0 -1 4194304 100 0 0 0 0 0 0 0 20 0 1 0 293070 3133440 396 18446744073709551615 93879116619776 93879116639657 140720658315552 0 0 0 0 0 0 0 0 0 17 0 0 0 0 0 0 93879116655664 93879116657280 93879719387136 140720658320066 140720658320086 140720658320086 140720658321387 0\n";
        assert_eq!(parse_start_time(Path::new("stat"), text).unwrap(), 293070);
        // A command name with spaces and a parenthesis.
        let odd = text.replace("(cat)", "(a) b (c)");
        assert_eq!(parse_start_time(Path::new("stat"), &odd).unwrap(), 293070);
        let e = parse_start_time(Path::new("/proc/1/stat"), "1 (init) S 0").unwrap_err().to_string();
        assert_eq!(e, "/proc/1/stat:1: field `starttime`: fewer than 22 fields");
    }

    #[test]
    fn exited_reused_and_missing_processes_are_gone() {
        let dir = tempfile::tempdir().unwrap();
        let stat =
            |state: &str, start: u64| format!("42 (app) {state} 1 42 42 0 -1 4194304 100 0 0 0 0 0 0 0 20 0 1 0 {start} 3133440 396\n");
        std::fs::create_dir_all(dir.path().join("proc/42")).unwrap();
        let root = FsRoot::at(dir.path());
        std::fs::write(dir.path().join("proc/42/stat"), stat("S", 500)).unwrap();
        assert!(!process_gone(&root, 42, 500));
        assert!(process_gone(&root, 42, 499), "a later process with the same pid");
        std::fs::write(dir.path().join("proc/42/stat"), stat("Z", 500)).unwrap();
        assert!(process_gone(&root, 42, 500), "exited, not yet reaped");
        assert!(process_gone(&root, 43, 500), "no such pid");
        // Still running (state R) but past the start of do_exit: the move_pages EINVAL seen in
        // CI when a target exited mid-move came from such a task, whose mm was already gone.
        std::fs::write(dir.path().join("proc/42/stat"), stat("R", 500).replace(" 4194304 ", " 4194308 ")).unwrap();
        assert!(process_gone(&root, 42, 500), "PF_EXITING set");
        assert_eq!(parse_state(Path::new("stat"), &stat("R", 1)).unwrap(), 'R');
        // Field 9 is 4194304 (PF_RANDOMIZE) in the sample: running, not exiting.
        std::fs::write(dir.path().join("proc/42/stat"), stat("S", 500)).unwrap();
        assert!(!exiting(&root, 42));
        std::fs::write(dir.path().join("proc/42/stat"), stat("S", 500).replace(" 4194304 ", " 4194308 ")).unwrap();
        assert!(exiting(&root, 42), "PF_EXITING set");
        assert!(exiting(&root, 43));
    }

    #[test]
    fn this_process_has_a_start_time() {
        assert!(start_time(&FsRoot::host(), std::process::id()).is_ok());
    }
}
