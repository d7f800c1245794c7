//! `/proc/PID/maps`: one line per mapping, `START-END PERMS OFFSET DEV INODE [PATH]`. The live
//! agent walks the private anonymous mappings (heap, stacks, anonymous mmap) to find the pages
//! it may move (docs/live.md, "numalab attach").

use crate::error::{LinuxError, Result};
use crate::root::FsRoot;
use std::collections::BTreeMap;
use std::path::Path;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MapsEntry {
    pub start: u64,
    pub end: u64,
    /// `rwxp` / `r--s`: read, write, execute, private (`p`) or shared (`s`).
    pub perms: [u8; 4],
    pub inode: u64,
    /// A file, or a pseudo-path such as `[heap]`, `[stack]`, `[vdso]`; `None` for anonymous.
    pub path: Option<String>,
}

impl MapsEntry {
    pub fn bytes(&self) -> u64 {
        self.end - self.start
    }

    /// Private, anonymous and accessible: heap, stacks, anonymous mmap (also named ones,
    /// `[anon:…]`). File mappings, shared memory and the kernel's `[vdso]`, `[vvar]`,
    /// `[vsyscall]` are not.
    pub fn is_private_anon(&self) -> bool {
        let private = self.perms[3] == b'p';
        let accessible = self.perms[0] == b'r' || self.perms[1] == b'w';
        let anon = match &self.path {
            None => true,
            Some(p) => p == "[heap]" || p.starts_with("[stack") || p.starts_with("[anon:"),
        };
        private && accessible && self.inode == 0 && anon
    }
}

pub fn parse_maps(path: &Path, text: &str) -> Result<Vec<MapsEntry>> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line_no = i + 1;
        if line.trim().is_empty() {
            continue;
        }
        let err = |field: &str, message: &str| LinuxError::parse(path, line_no, field, message);
        let mut rest = line;
        let mut field = || {
            let t = rest.trim_start();
            let end = t.find(' ').unwrap_or(t.len());
            let (f, r) = t.split_at(end);
            rest = r;
            f
        };
        let range = field();
        let perms = field();
        let _offset = field();
        let _dev = field();
        let inode = field();
        let (start, end) = range.split_once('-').ok_or_else(|| err("range", "expected START-END"))?;
        let hex = |s: &str, name: &str| u64::from_str_radix(s, 16).map_err(|_| err(name, &format!("{s:?} is not hexadecimal")));
        let (start, end) = (hex(start, "start")?, hex(end, "end")?);
        if end < start {
            return Err(err("range", "end before start"));
        }
        let perms: [u8; 4] = perms.as_bytes().try_into().map_err(|_| err("perms", &format!("{perms:?} is not 4 characters")))?;
        let inode = inode.parse().map_err(|_| err("inode", &format!("{inode:?} is not a number")))?;
        // The path is the rest of the line after the padding; it may contain spaces.
        let path = rest.trim_start();
        let path = (!path.is_empty()).then(|| path.to_string());
        out.push(MapsEntry { start, end, perms, inode, path });
    }
    Ok(out)
}

/// `/proc/PID/smaps`: the `AnonHugePages` of every mapping (by its start address), in bytes:
/// how much of it transparent huge pages back.
pub fn parse_smaps_anon_huge(path: &Path, text: &str) -> Result<BTreeMap<u64, u64>> {
    let mut out = BTreeMap::new();
    let mut current: Option<u64> = None;
    for (i, line) in text.lines().enumerate() {
        let first = line.split_whitespace().next().unwrap_or("");
        if let Some(v) = line.strip_prefix("AnonHugePages:") {
            let start = current.ok_or_else(|| LinuxError::parse(path, i + 1, "AnonHugePages", "before any mapping line"))?;
            let kb = v.trim().strip_suffix("kB").map(str::trim).and_then(|n| n.parse::<u64>().ok());
            let kb = kb.ok_or_else(|| LinuxError::parse(path, i + 1, "AnonHugePages", format!("{:?} is not `N kB`", v.trim())))?;
            out.insert(start, kb * 1024);
        } else if let Some((a, _)) = first.split_once('-').filter(|_| !first.ends_with(':')) {
            current =
                Some(u64::from_str_radix(a, 16).map_err(|_| LinuxError::parse(path, i + 1, "start", format!("{a:?} is not hexadecimal")))?);
        }
    }
    Ok(out)
}

pub fn read_smaps_anon_huge(root: &FsRoot, pid: u32) -> Result<BTreeMap<u64, u64>> {
    let (path, text) = root.read(&format!("/proc/{pid}/smaps"))?;
    parse_smaps_anon_huge(&path, &text)
}

pub fn read_maps(root: &FsRoot, pid: u32) -> Result<Vec<MapsEntry>> {
    let (path, text) = root.read(&format!("/proc/{pid}/maps"))?;
    parse_maps(&path, &text)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Verbatim from Linux 6.18 (`cat /proc/self/maps`), anonymous lines with their trailing
    /// space.
    const MAPS: &str = "55af9709f000-55af970a1000 r--p 00000000 fe:00 247026                     /usr/bin/cat
55afd433d000-55afd435e000 rw-p 00000000 00:00 0                          [heap]
7f9dc2b54000-7f9dc2b76000 rw-p 00000000 00:00 0 
7f9dc2bd0000-7f9dc2bd1000 r--p 00000000 fe:00 316531                     /usr/lib/locale/C.utf8/LC_MESSAGES/SYS_LC_MESSAGES
7f9dc2dbc000-7f9dc2dc3000 r--s 00000000 fe:00 325737                     /usr/lib/x86_64-linux-gnu/gconv/gconv-modules.cache
7f9dc2dc6000-7f9dc2dca000 r--p 00000000 00:00 0                          [vvar]
7ffd6a1f0000-7ffd6a211000 rw-p 00000000 00:00 0                          [stack]
7f0000000000-7f0000001000 ---p 00000000 00:00 0 
ffffffffff600000-ffffffffff601000 --xp 00000000 00:00 0                  [vsyscall]
";

    #[test]
    fn parses_ranges_perms_and_paths() {
        let m = parse_maps(Path::new("maps"), MAPS).unwrap();
        assert_eq!(m.len(), 9);
        assert_eq!((m[0].start, m[0].end, &m[0].perms), (0x55af9709f000, 0x55af970a1000, b"r--p"));
        assert_eq!(m[0].path.as_deref(), Some("/usr/bin/cat"));
        assert_eq!(m[2].path, None);
        assert_eq!(m[2].bytes(), 0x22000);
        assert_eq!(m[3].path.as_deref(), Some("/usr/lib/locale/C.utf8/LC_MESSAGES/SYS_LC_MESSAGES"));
    }

    #[test]
    fn private_anonymous_mappings_are_heap_stack_and_anonymous_mmap() {
        let m = parse_maps(Path::new("maps"), MAPS).unwrap();
        let anon: Vec<Option<&str>> = m.iter().filter(|e| e.is_private_anon()).map(|e| e.path.as_deref()).collect();
        // Not the file, the shared cache, [vvar], the PROT_NONE guard page or [vsyscall].
        assert_eq!(anon, vec![Some("[heap]"), None, Some("[stack]")]);
    }

    #[test]
    fn smaps_gives_the_transparent_huge_page_bytes_of_each_mapping() {
        // Verbatim layout of Linux 6.1 smaps (two mappings, fields abridged to the ones around).
        let text = "7f61fe000000-7f6200000000 rw-p 00000000 00:00 0 
Size:              32768 kB
KernelPageSize:        4 kB
Anonymous:         32768 kB
LazyFree:              0 kB
AnonHugePages:     30720 kB
ShmemPmdMapped:        0 kB
VmFlags: rd wr mr mw me ac sd 
7ffd6a1f0000-7ffd6a211000 rw-p 00000000 00:00 0                          [stack]
Size:                132 kB
AnonHugePages:         0 kB
VmFlags: rd wr mr mw me gd ac 
";
        let m = parse_smaps_anon_huge(Path::new("smaps"), text).unwrap();
        assert_eq!(m, BTreeMap::from([(0x7f61fe000000, 30720 * 1024), (0x7ffd6a1f0000, 0)]));
        let e = parse_smaps_anon_huge(Path::new("smaps"), "AnonHugePages: 4 kB\n").unwrap_err().to_string();
        assert!(e.contains("before any mapping"), "{e}");
        let e = parse_smaps_anon_huge(Path::new("smaps"), "0-1000 rw-p 0 00:00 0\nAnonHugePages: x kB\n").unwrap_err().to_string();
        assert!(e.contains("smaps:2: field `AnonHugePages`"), "{e}");
    }

    #[test]
    fn errors_name_the_line_and_field() {
        let e = parse_maps(Path::new("/proc/7/maps"), "0-1 rw-p 0 00:00 0\nzz-10 rw-p 0 00:00 0\n").unwrap_err().to_string();
        assert_eq!(e, "/proc/7/maps:2: field `start`: \"zz\" is not hexadecimal");
        let e = parse_maps(Path::new("m"), "10-0 rw-p 0 00:00 0\n").unwrap_err().to_string();
        assert!(e.contains("end before start"), "{e}");
        let e = parse_maps(Path::new("m"), "0-10 rw 0 00:00 0\n").unwrap_err().to_string();
        assert!(e.contains("`perms`"), "{e}");
    }
}
