//! Output formats shared by every command: `--format table|json|csv` and `--out FILE`.

use anyhow::{Context, Result};
use clap::ValueEnum;
use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Format {
    Table,
    Json,
    Csv,
}

/// Options every command accepts.
#[derive(Clone, Debug, clap::Args)]
pub struct OutputOpts {
    /// Output format. Default: table on a terminal, JSON when piped; with --out, from the
    /// file's extension (.json, .csv, anything else: table).
    #[arg(long, global = true, value_enum)]
    pub format: Option<Format>,
    /// Write the result to FILE instead of standard output (`-`: standard output).
    #[arg(long, global = true, value_name = "FILE")]
    pub out: Option<PathBuf>,
}

impl OutputOpts {
    pub fn resolved_format(&self) -> Format {
        if let Some(f) = self.format {
            return f;
        }
        match &self.out {
            Some(p) => match p.extension().and_then(|e| e.to_str()) {
                Some("json") => Format::Json,
                Some("csv") => Format::Csv,
                _ => Format::Table,
            },
            None if std::io::stdout().is_terminal() => Format::Table,
            None => Format::Json,
        }
    }
}

/// Width at which a long text in the last column of a table wraps.
const WRAP_COLUMN: usize = 60;

/// Split `text` at spaces into lines of at most `width` characters (a longer word stays whole).
fn wrap(text: &str, width: usize) -> Vec<String> {
    textwrap::wrap(text, textwrap::Options::new(width).break_words(false)).into_iter().map(|line| line.into_owned()).collect()
}

/// A rectangular table of already-formatted cells.
#[derive(Clone, Debug, Default)]
pub struct Table {
    pub headers: Vec<String>,
    pub rows: Vec<Vec<String>>,
    /// Legends and caveats: printed to standard error with the table format (never in CSV
    /// or JSON, nor in a table written with `--out`).
    pub notes: Vec<String>,
}

impl Table {
    pub fn new<S: Into<String>>(headers: impl IntoIterator<Item = S>) -> Table {
        Table { headers: headers.into_iter().map(Into::into).collect(), rows: Vec::new(), notes: Vec::new() }
    }

    pub fn row<S: Into<String>>(&mut self, cells: impl IntoIterator<Item = S>) {
        self.rows.push(cells.into_iter().map(Into::into).collect());
    }

    pub fn render_text(&self) -> String {
        let cols = self.headers.len();
        // Numbers right-aligned, text left-aligned.
        let numeric: Vec<bool> =
            (0..cols).map(|i| self.rows.iter().all(|r| r.get(i).is_none_or(|c| c == "n/a" || c.parse::<f64>().is_ok()))).collect();
        // A long text in the last column (a description) wraps onto continuation lines.
        let last = cols.saturating_sub(1);
        let wrap_at = if cols > 1 && !numeric[last] { Some(WRAP_COLUMN) } else { None };
        let mut lines_of_rows: Vec<Vec<String>> = Vec::new();
        for r in &self.rows {
            match (wrap_at, r.get(last)) {
                (Some(w), Some(text)) if text.chars().count() > w => {
                    for (k, piece) in wrap(text, w).into_iter().enumerate() {
                        let mut row: Vec<String> = if k == 0 { r.clone() } else { vec![String::new(); cols] };
                        row[last] = piece;
                        lines_of_rows.push(row);
                    }
                }
                _ => lines_of_rows.push(r.clone()),
            }
        }
        let mut width: Vec<usize> = self.headers.iter().map(|h| h.chars().count()).collect();
        for r in &lines_of_rows {
            for (i, c) in r.iter().enumerate().take(cols) {
                width[i] = width[i].max(c.chars().count());
            }
        }
        let mut out = String::new();
        let line = |cells: &[String], out: &mut String| {
            let mut s = String::new();
            for (i, c) in cells.iter().enumerate().take(cols) {
                let pad = width[i] - c.chars().count();
                if i > 0 && !numeric[i] {
                    s.push_str("  ");
                }
                if !numeric[i] {
                    s.push_str(c);
                    s.push_str(&" ".repeat(pad));
                } else {
                    s.push_str("  ");
                    s.push_str(&" ".repeat(pad));
                    s.push_str(c);
                }
            }
            out.push_str(s.trim_end());
            out.push('\n');
        };
        line(&self.headers, &mut out);
        let rule: Vec<String> = width.iter().map(|w| "-".repeat(*w)).collect();
        line(&rule, &mut out);
        for r in &lines_of_rows {
            line(r, &mut out);
        }
        for n in &self.notes {
            out.push_str(n);
            out.push('\n');
        }
        out
    }

    /// RFC 4180 CSV (the `csv` crate: fields quoted only where they must be).
    pub fn render_csv(&self) -> String {
        let mut w = csv::WriterBuilder::new().flexible(true).from_writer(Vec::new());
        for r in std::iter::once(&self.headers).chain(self.rows.iter()) {
            w.write_record(r).expect("writing CSV to memory cannot fail");
        }
        let bytes = w.into_inner().expect("flushing CSV to memory cannot fail");
        String::from_utf8(bytes).expect("CSV of UTF-8 cells is UTF-8")
    }
}

/// Print a result in the chosen format. `json` is the machine contract; `table` the human view.
pub fn emit(opts: &OutputOpts, json: &serde_json::Value, table: &Table) -> Result<()> {
    let text = match opts.resolved_format() {
        Format::Json => {
            let mut s = serde_json::to_string_pretty(json)?;
            s.push('\n');
            s
        }
        Format::Table => {
            // Notes (legends, caveats) go to standard error, so the result stays the table.
            for n in &table.notes {
                eprintln!("{n}");
            }
            let mut bare = table.clone();
            bare.notes.clear();
            bare.render_text()
        }
        Format::Csv => table.render_csv(),
    };
    write_text(opts.out.as_deref(), &text)
}

/// The text of a command summary that shares the terminal with a program (`run`, `attach`):
/// `--format` if given, else from `--out`'s extension, else a table (with its notes).
pub fn render_summary(opts: &OutputOpts, json: &serde_json::Value, table: &Table) -> Result<String> {
    let format = opts.format.unwrap_or_else(|| if opts.out.is_some() { opts.resolved_format() } else { Format::Table });
    Ok(match format {
        Format::Json => format!("{}\n", serde_json::to_string_pretty(json)?),
        Format::Csv => table.render_csv(),
        Format::Table => table.render_text(),
    })
}

/// Write to a file or to standard output.
///
/// A regular file (or a new one) is replaced atomically: a temporary file in the same
/// directory, then a rename, so an interrupted run never leaves a truncated result. A
/// symlink is followed and its target written (the link stays). A device, FIFO or socket
/// (`/dev/stdout`, `/dev/null`, a named pipe) is written through, never replaced.
pub fn write_text(path: Option<&Path>, text: &str) -> Result<()> {
    match path {
        Some(p) => write_file(p, text.as_bytes()),
        None => {
            let mut stdout = std::io::stdout().lock();
            match stdout.write_all(text.as_bytes()).and_then(|()| stdout.flush()) {
                // A closed pipe (`numalab ... | head`) is not an error worth reporting.
                Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
                r => r.context("cannot write to standard output"),
            }
        }
    }
}

/// The file a path finally names: symlinks followed, also when the last one dangles.
fn resolve_target(p: &Path) -> Result<PathBuf> {
    let mut cur = p.to_path_buf();
    for _ in 0..40 {
        match std::fs::symlink_metadata(&cur) {
            Ok(m) if m.file_type().is_symlink() => {
                let link = std::fs::read_link(&cur).with_context(|| format!("cannot read the symlink {}", cur.display()))?;
                cur = match cur.parent() {
                    Some(dir) if link.is_relative() => dir.join(link),
                    _ => link,
                };
            }
            _ => return Ok(cur),
        }
    }
    Err(anyhow::Error::new(crate::scenario::Usage(format!("--out {}: too many levels of symbolic links", p.display()))))
}

fn write_file(p: &Path, bytes: &[u8]) -> Result<()> {
    // `/dev/stdout`, `/dev/fd/N`, `/proc/self/fd/N`: an open descriptor, whatever it is open
    // on (a terminal, a pipe, a file the shell redirected to) is written through.
    if p.starts_with("/dev") || p.starts_with("/proc") {
        if let Ok(m) = std::fs::metadata(p) {
            if !m.is_dir() {
                // A regular file behind it was opened by the shell (`>` truncated it already,
                // `>>` wants an append): append, never truncate.
                let mut f = std::fs::OpenOptions::new()
                    .write(true)
                    .append(m.is_file())
                    .open(p)
                    .with_context(|| format!("cannot open {}", p.display()))?;
                return match f.write_all(bytes).and_then(|()| f.flush()) {
                    Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
                    r => r.with_context(|| format!("cannot write {}", p.display())),
                };
            }
        }
    }
    let target = resolve_target(p)?;
    match std::fs::metadata(&target) {
        Ok(m) if m.is_dir() => {
            return Err(anyhow::Error::new(crate::scenario::Usage(format!("--out {} is a directory", p.display()))));
        }
        Ok(m) if !m.is_file() => {
            // Device, FIFO or socket: write through it.
            let mut f = std::fs::OpenOptions::new().write(true).open(&target).with_context(|| format!("cannot open {}", p.display()))?;
            return match f.write_all(bytes).and_then(|()| f.flush()) {
                Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
                r => r.with_context(|| format!("cannot write {}", p.display())),
            };
        }
        _ => {}
    }
    let dir = match target.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let name = target.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| "out".into());
    let tmp = dir.join(format!(".{name}.{}.numalab-tmp", std::process::id()));
    let result = (|| -> std::io::Result<()> {
        let mut f = std::fs::OpenOptions::new().write(true).create_new(true).open(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        // Keep the permissions of the file being replaced.
        if let Ok(m) = std::fs::metadata(&target) {
            std::fs::set_permissions(&tmp, m.permissions())?;
        }
        std::fs::rename(&tmp, &target)
    })();
    if let Err(e) = result {
        let _ = std::fs::remove_file(&tmp);
        return Err(e).with_context(|| format!("cannot write {}", p.display()));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_aligns_and_csv_escapes() {
        let mut t = Table::new(["policy", "time_s"]);
        t.row(["first-touch", "1.5"]);
        t.row(["a,b", "10.25"]);
        let text = t.render_text();
        assert_eq!(text.lines().next().unwrap(), "policy       time_s");
        assert!(text.contains("first-touch     1.5"));
        assert_eq!(t.render_csv(), "policy,time_s\nfirst-touch,1.5\n\"a,b\",10.25\n");
    }

    #[test]
    fn a_long_description_wraps_under_its_column() {
        let mut t = Table::new(["name", "description"]);
        let long = format!("{} {}", "word ".repeat(20).trim_end(), "x".repeat(WRAP_COLUMN + 5));
        t.row(["is-like", long.as_str()]);
        let text = t.render_text();
        let lines: Vec<&str> = text.lines().collect();
        // Header, rule, 100 characters of words over two lines, then the long word alone.
        assert_eq!(lines.len(), 5, "{text}");
        assert!(lines[2].starts_with("is-like  word word"));
        assert!(lines[3].starts_with("         word"), "a continuation line leaves the first column blank");
        assert_eq!(lines[4].trim(), "x".repeat(WRAP_COLUMN + 5), "a word longer than the column stays whole");
    }

    #[test]
    fn out_follows_symlinks_and_writes_through_fifos() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("target.txt");
        std::fs::write(&target, "old").unwrap();
        let link = dir.path().join("link.txt");
        std::os::unix::fs::symlink("target.txt", &link).unwrap();
        write_text(Some(&link), "new").unwrap();
        assert!(std::fs::symlink_metadata(&link).unwrap().file_type().is_symlink(), "the symlink survives");
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "new");
        // A dangling symlink: its target is created.
        let dangling = dir.path().join("dangling");
        std::os::unix::fs::symlink("made.txt", &dangling).unwrap();
        write_text(Some(&dangling), "x").unwrap();
        assert_eq!(std::fs::read_to_string(dir.path().join("made.txt")).unwrap(), "x");
        // /dev/null is written through and stays a device.
        write_text(Some(Path::new("/dev/null")), "gone").unwrap();
        assert!(!std::fs::metadata("/dev/null").unwrap().is_file());
        // A FIFO is written through, not replaced.
        let fifo = dir.path().join("fifo");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        assert_eq!(unsafe { libc_mkfifo(c.as_ptr(), 0o600) }, 0);
        let reader = {
            let fifo = fifo.clone();
            std::thread::spawn(move || std::fs::read_to_string(fifo).unwrap())
        };
        write_text(Some(&fifo), "through").unwrap();
        assert_eq!(reader.join().unwrap(), "through");
        use std::os::unix::fs::FileTypeExt;
        assert!(std::fs::symlink_metadata(&fifo).unwrap().file_type().is_fifo());
        // A directory is refused.
        assert!(write_text(Some(dir.path()), "x").unwrap_err().to_string().contains("is a directory"));
    }

    extern "C" {
        #[link_name = "mkfifo"]
        fn libc_mkfifo(path: *const std::ffi::c_char, mode: u32) -> i32;
    }
}
