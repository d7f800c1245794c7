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
    /// Write the result to FILE instead of standard output.
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

/// A rectangular table of already-formatted cells.
#[derive(Clone, Debug, Default)]
pub struct Table {
    pub headers: Vec<String>,
    pub rows: Vec<Vec<String>>,
    /// Lines printed under a table (not in CSV).
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
        let mut width: Vec<usize> = self.headers.iter().map(|h| h.chars().count()).collect();
        for r in &self.rows {
            for (i, c) in r.iter().enumerate().take(cols) {
                width[i] = width[i].max(c.chars().count());
            }
        }
        // Numbers right-aligned, text left-aligned.
        let numeric: Vec<bool> =
            (0..cols).map(|i| self.rows.iter().all(|r| r.get(i).is_none_or(|c| c == "n/a" || c.parse::<f64>().is_ok()))).collect();
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
        for r in &self.rows {
            line(r, &mut out);
        }
        for n in &self.notes {
            out.push_str(n);
            out.push('\n');
        }
        out
    }

    pub fn render_csv(&self) -> String {
        let esc = |c: &String| {
            if c.contains([',', '"', '\n']) {
                format!("\"{}\"", c.replace('"', "\"\""))
            } else {
                c.clone()
            }
        };
        let mut out = String::new();
        for r in std::iter::once(&self.headers).chain(self.rows.iter()) {
            out.push_str(&r.iter().map(esc).collect::<Vec<_>>().join(","));
            out.push('\n');
        }
        out
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
        Format::Table => table.render_text(),
        Format::Csv => table.render_csv(),
    };
    write_text(opts.out.as_deref(), &text)
}

/// Write to a file (atomically: temp file then rename, so an interrupted run never leaves a
/// truncated result) or to standard output.
pub fn write_text(path: Option<&Path>, text: &str) -> Result<()> {
    match path {
        Some(p) => {
            let tmp = p.with_extension(format!("{}.tmp", p.extension().and_then(|e| e.to_str()).unwrap_or("out")));
            std::fs::write(&tmp, text).with_context(|| format!("cannot write {}", tmp.display()))?;
            std::fs::rename(&tmp, p).with_context(|| format!("cannot write {}", p.display()))?;
            Ok(())
        }
        None => {
            let mut stdout = std::io::stdout().lock();
            match stdout.write_all(text.as_bytes()) {
                // A closed pipe (`numalab ... | head`) is not an error worth reporting.
                Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
                r => r.context("cannot write to standard output"),
            }
        }
    }
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
}
