//! `/proc/PID/stat`: the process's start time, which tells a process from a later one that
//! reuses its pid (the agent checks it before every `move_pages` call, so it never touches a
//! process it was not given).

use crate::error::{LinuxError, Result};
use crate::root::FsRoot;
use std::path::Path;

/// Field 22, `starttime` (clock ticks after boot). The command name (field 2) is in
/// parentheses and may itself contain spaces and parentheses: fields are counted after the
/// last `)`.
pub fn parse_start_time(path: &Path, text: &str) -> Result<u64> {
    let err = |m: &str| LinuxError::parse(path, 1, "starttime", m);
    let after = text.rfind(')').map(|i| &text[i + 1..]).ok_or_else(|| err("no `)` after the command name"))?;
    // Fields 3.. follow; starttime is field 22, the 20th of them.
    let field = after.split_whitespace().nth(19).ok_or_else(|| err("fewer than 22 fields"))?;
    field.parse().map_err(|_| err(&format!("{field:?} is not a number")))
}

pub fn start_time(root: &FsRoot, pid: u32) -> Result<u64> {
    let (path, text) = root.read(&format!("/proc/{pid}/stat"))?;
    parse_start_time(&path, &text)
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
    fn this_process_has_a_start_time() {
        assert!(start_time(&FsRoot::host(), std::process::id()).is_ok());
    }
}
