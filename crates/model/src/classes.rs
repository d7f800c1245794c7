//! Page classes of the workload model (docs/model.md §3) and their TOML file format.
//!
//! A class file has an optional `name` and `description` and one table per class present,
//! named `PR`, `RO`, `RM`, `SS` or `SP`, each with all six parameters:
//!
//! ```toml
//! name = "my-workload"
//! [SS]
//! pages = 8                   # P_c
//! reads = 5000                # R_c, per (page, process) pair over the run
//! writes = 5000               # W_c
//! run_granularity = 2500      # r_c
//! write_granularity = 2500    # w_c (inf allowed)
//! sharers = 2                 # M_c
//! ```
//!
//! A missing class has no pages. Unknown keys are errors. Parsing takes text, never a path: the
//! caller reads the file and passes its name as `origin` for error messages.

use crate::error::ModelError;
use serde::Deserialize;
use toml::Spanned;

/// The five page classes, in the spec's order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ClassKind {
    /// Code and private data, replicated locally before the run.
    Pr,
    /// Shared, never modified.
    Ro,
    /// Shared, read far more often than modified.
    Rm,
    /// Read-write shared sequentially (migration pays).
    Ss,
    /// Read-write shared in parallel (too fine-grained for migration).
    Sp,
}

impl ClassKind {
    pub const ALL: [ClassKind; 5] = [ClassKind::Pr, ClassKind::Ro, ClassKind::Rm, ClassKind::Ss, ClassKind::Sp];

    pub fn as_str(self) -> &'static str {
        match self {
            ClassKind::Pr => "PR",
            ClassKind::Ro => "RO",
            ClassKind::Rm => "RM",
            ClassKind::Ss => "SS",
            ClassKind::Sp => "SP",
        }
    }

    /// Case-insensitive parse of `PR`, `RO`, `RM`, `SS`, `SP`.
    pub fn parse(s: &str) -> Option<ClassKind> {
        ClassKind::ALL.into_iter().find(|k| k.as_str().eq_ignore_ascii_case(s))
    }

    pub fn index(self) -> usize {
        self as usize
    }

    /// Read-only or read-mostly: the ideal policy replicates these (or leaves them static).
    pub fn is_read_shared(self) -> bool {
        matches!(self, ClassKind::Ro | ClassKind::Rm)
    }
}

/// One of the six per-class parameters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClassField {
    Pages,
    Reads,
    Writes,
    RunGranularity,
    WriteGranularity,
    Sharers,
}

impl ClassField {
    pub const ALL: [ClassField; 6] = [
        ClassField::Pages,
        ClassField::Reads,
        ClassField::Writes,
        ClassField::RunGranularity,
        ClassField::WriteGranularity,
        ClassField::Sharers,
    ];

    /// The key in the class file.
    pub fn as_str(self) -> &'static str {
        match self {
            ClassField::Pages => "pages",
            ClassField::Reads => "reads",
            ClassField::Writes => "writes",
            ClassField::RunGranularity => "run_granularity",
            ClassField::WriteGranularity => "write_granularity",
            ClassField::Sharers => "sharers",
        }
    }

    /// The spec's symbol.
    pub fn symbol(self) -> &'static str {
        match self {
            ClassField::Pages => "P",
            ClassField::Reads => "R",
            ClassField::Writes => "W",
            ClassField::RunGranularity => "r",
            ClassField::WriteGranularity => "w",
            ClassField::Sharers => "M",
        }
    }

    /// Parse a key or the spec's symbol (`P`, `R`, `W`, `r`, `w`, `M`).
    pub fn parse(s: &str) -> Option<ClassField> {
        ClassField::ALL.into_iter().find(|f| f.as_str() == s || f.symbol() == s)
    }
}

/// Parameters of one page class (docs/model.md §3.1). Counts are means, so all are `f64`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ClassParams {
    /// `P_c`: pages in the class.
    pub pages: f64,
    /// `R_c`: reads one process issues to one page over the run.
    pub reads: f64,
    /// `W_c`: writes likewise.
    pub writes: f64,
    /// `r_c`: references one processor makes to a page before another processor uses it.
    pub run_granularity: f64,
    /// `w_c`: references one processor makes to a page between writes by others (∞ allowed).
    pub write_granularity: f64,
    /// `M_c`: processors that use a page.
    pub sharers: f64,
}

impl ClassParams {
    /// A class with no pages.
    pub const ABSENT: ClassParams =
        ClassParams { pages: 0.0, reads: 0.0, writes: 0.0, run_granularity: 1.0, write_granularity: f64::INFINITY, sharers: 1.0 };

    pub fn get(&self, f: ClassField) -> f64 {
        match f {
            ClassField::Pages => self.pages,
            ClassField::Reads => self.reads,
            ClassField::Writes => self.writes,
            ClassField::RunGranularity => self.run_granularity,
            ClassField::WriteGranularity => self.write_granularity,
            ClassField::Sharers => self.sharers,
        }
    }

    pub fn set(&mut self, f: ClassField, v: f64) {
        match f {
            ClassField::Pages => self.pages = v,
            ClassField::Reads => self.reads = v,
            ClassField::Writes => self.writes = v,
            ClassField::RunGranularity => self.run_granularity = v,
            ClassField::WriteGranularity => self.write_granularity = v,
            ClassField::Sharers => self.sharers = v,
        }
    }

    /// `T_c = R_c + W_c`, references per (page, process) pair.
    pub fn refs_per_pair(&self) -> f64 {
        self.reads + self.writes
    }
}

/// A workload's five page classes, with where they came from (for error messages).
#[derive(Clone, Debug, PartialEq)]
pub struct ClassSet {
    pub name: String,
    pub description: String,
    /// File path or `preset:NAME`.
    pub origin: String,
    classes: [ClassParams; 5],
    /// Source line of every field (0 = not from a file).
    lines: [[u32; 6]; 5],
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFile {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    description: Option<String>,
    #[serde(rename = "PR", default)]
    pr: Option<RawClass>,
    #[serde(rename = "RO", default)]
    ro: Option<RawClass>,
    #[serde(rename = "RM", default)]
    rm: Option<RawClass>,
    #[serde(rename = "SS", default)]
    ss: Option<RawClass>,
    #[serde(rename = "SP", default)]
    sp: Option<RawClass>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawClass {
    pages: Spanned<f64>,
    reads: Spanned<f64>,
    writes: Spanned<f64>,
    run_granularity: Spanned<f64>,
    write_granularity: Spanned<f64>,
    sharers: Spanned<f64>,
}

fn line_of(text: &str, offset: usize) -> usize {
    text[..offset.min(text.len())].matches('\n').count() + 1
}

impl ClassSet {
    /// Build from parameters (no file). `origin` names the set in errors. Validates §5.3 rules
    /// that do not depend on the node count.
    pub fn new(name: &str, origin: &str, classes: [ClassParams; 5]) -> Result<ClassSet, ModelError> {
        let set = ClassSet { name: name.to_string(), description: String::new(), origin: origin.to_string(), classes, lines: [[0; 6]; 5] };
        set.validate()?;
        Ok(set)
    }

    /// Parse and validate a class file. `origin` (a path or `preset:NAME`) prefixes errors,
    /// which carry the line of the offending key or value.
    pub fn from_toml_str(text: &str, origin: &str) -> Result<ClassSet, ModelError> {
        let raw: RawFile = toml::from_str(text).map_err(|e| ModelError::ClassParse {
            origin: origin.to_string(),
            line: e.span().map(|s| line_of(text, s.start)),
            message: e.message().trim().to_string(),
        })?;
        let mut classes = [ClassParams::ABSENT; 5];
        let mut lines = [[0u32; 6]; 5];
        for (kind, rc) in
            [(ClassKind::Pr, raw.pr), (ClassKind::Ro, raw.ro), (ClassKind::Rm, raw.rm), (ClassKind::Ss, raw.ss), (ClassKind::Sp, raw.sp)]
        {
            let Some(rc) = rc else { continue };
            let i = kind.index();
            let fields = [&rc.pages, &rc.reads, &rc.writes, &rc.run_granularity, &rc.write_granularity, &rc.sharers];
            for (f, v) in ClassField::ALL.iter().zip(fields) {
                classes[i].set(*f, *v.get_ref());
                lines[i][*f as usize] = line_of(text, v.span().start) as u32;
            }
        }
        let set = ClassSet {
            name: raw.name.unwrap_or_default(),
            description: raw.description.unwrap_or_default(),
            origin: origin.to_string(),
            classes,
            lines,
        };
        set.validate()?;
        Ok(set)
    }

    pub fn get(&self, k: ClassKind) -> &ClassParams {
        &self.classes[k.index()]
    }

    pub fn params(&self) -> &[ClassParams; 5] {
        &self.classes
    }

    /// Change one parameter (sweeps) and re-validate; on error the set is left unchanged.
    pub fn set(&mut self, k: ClassKind, f: ClassField, v: f64) -> Result<(), ModelError> {
        let old = self.classes[k.index()].get(f);
        self.classes[k.index()].set(f, v);
        let line = self.lines[k.index()][f as usize];
        self.lines[k.index()][f as usize] = 0;
        let checked = self.validate();
        if checked.is_err() {
            self.classes[k.index()].set(f, old);
            self.lines[k.index()][f as usize] = line;
        }
        checked
    }

    fn invalid(&self, k: ClassKind, f: ClassField, problem: String) -> ModelError {
        let line = self.lines[k.index()][f as usize];
        ModelError::ClassInvalid {
            origin: self.origin.clone(),
            line: (line > 0).then_some(line as usize),
            class: k.as_str(),
            field: f.as_str(),
            problem,
        }
    }

    /// Rules of docs/model.md §3.2 that do not depend on `n`: counts finite and ≥ 0, at least one
    /// reference per pair when the class has pages, `M ≥ 1` (`M_PR = 1`), `1 ≤ r ≤ w`, RO never
    /// written (`W_RO = 0`, `w_RO = ∞`), and at least one reference in the whole workload.
    pub fn validate(&self) -> Result<(), ModelError> {
        use ClassField::*;
        for k in ClassKind::ALL {
            let c = self.get(k);
            for f in [Pages, Reads, Writes, Sharers, RunGranularity] {
                let v = c.get(f);
                if !(v.is_finite() && v >= 0.0) {
                    return Err(self.invalid(k, f, format!("{v} must be finite and >= 0")));
                }
            }
            if c.write_granularity.is_nan() || c.write_granularity < 0.0 {
                return Err(self.invalid(k, WriteGranularity, format!("{} must be >= 0", c.write_granularity)));
            }
            if c.pages > 0.0 && c.refs_per_pair() <= 0.0 {
                return Err(self.invalid(k, Reads, "a class with pages needs reads + writes > 0".to_string()));
            }
            if c.sharers < 1.0 {
                return Err(self.invalid(k, Sharers, format!("{} must be >= 1", c.sharers)));
            }
            if k == ClassKind::Pr && c.sharers != 1.0 {
                return Err(self.invalid(k, Sharers, format!("{} must be 1: PR pages are private", c.sharers)));
            }
            if c.run_granularity < 1.0 {
                return Err(self.invalid(k, RunGranularity, format!("{} must be >= 1", c.run_granularity)));
            }
            if c.run_granularity > c.write_granularity {
                return Err(self.invalid(
                    k,
                    WriteGranularity,
                    format!(
                        "{} is below run_granularity {}; need r <= w (another processor's write is also its reference)",
                        c.write_granularity, c.run_granularity
                    ),
                ));
            }
            if k == ClassKind::Ro {
                if c.writes != 0.0 {
                    return Err(self.invalid(k, Writes, format!("{} must be 0: RO pages are never written", c.writes)));
                }
                if c.write_granularity != f64::INFINITY {
                    return Err(self.invalid(
                        k,
                        WriteGranularity,
                        format!("{} must be inf: RO pages are never written", c.write_granularity),
                    ));
                }
            }
        }
        if ClassKind::ALL.iter().all(|&k| self.get(k).pages == 0.0) {
            return Err(ModelError::ClassInvalid {
                origin: self.origin.clone(),
                line: None,
                class: "all",
                field: "pages",
                problem: "no class has pages; the workload makes no references".to_string(),
            });
        }
        Ok(())
    }

    /// The rule that depends on the machine: `M_c ≤ n` for every class with pages.
    pub fn check_nodes(&self, n: u32) -> Result<(), ModelError> {
        for k in ClassKind::ALL {
            let c = self.get(k);
            if c.pages > 0.0 && c.sharers > n as f64 {
                return Err(self.invalid(k, ClassField::Sharers, format!("{} sharers on a {n}-node machine; need M <= n", c.sharers)));
            }
        }
        Ok(())
    }

    /// Write the set back as TOML in the file format.
    pub fn to_toml_string(&self) -> String {
        let mut s = String::new();
        if !self.name.is_empty() {
            s.push_str(&format!("name = {:?}\n", self.name));
        }
        if !self.description.is_empty() {
            s.push_str(&format!("description = {:?}\n", self.description));
        }
        for k in ClassKind::ALL {
            let c = self.get(k);
            if c.pages == 0.0 {
                continue;
            }
            s.push_str(&format!("\n[{}]\n", k.as_str()));
            for f in ClassField::ALL {
                let v = c.get(f);
                let text = if v.is_infinite() { "inf".to_string() } else { format!("{v:?}") };
                s.push_str(&format!("{} = {}\n", f.as_str(), text));
            }
        }
        s
    }
}

/// Built-in page-class sets: `(name, TOML text)`.
pub const PRESETS: &[(&str, &str)] = &[("dunx-synth-8c", include_str!("../presets/classes/dunx-synth-8c.toml"))];

pub fn preset_names() -> Vec<&'static str> {
    PRESETS.iter().map(|(n, _)| *n).collect()
}

/// Load a built-in page-class set.
pub fn preset(name: &str) -> Result<ClassSet, ModelError> {
    let text = PRESETS
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, t)| *t)
        .ok_or_else(|| ModelError::UnknownClassPreset { name: name.to_string(), valid: preset_names().join(", ") })?;
    ClassSet::from_toml_str(text, &format!("preset:{name}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str =
        "name = \"t\"\n[SS]\npages = 8\nreads = 5000\nwrites = 5000\nrun_granularity = 2500\nwrite_granularity = 2500\nsharers = 2\n";

    #[test]
    fn parses_a_minimal_file() {
        let s = ClassSet::from_toml_str(GOOD, "x.toml").unwrap();
        assert_eq!(s.name, "t");
        assert_eq!(s.get(ClassKind::Ss).pages, 8.0);
        assert_eq!(s.get(ClassKind::Pr).pages, 0.0);
    }

    #[test]
    fn preset_is_the_spec_workload() {
        let s = preset("dunx-synth-8c").unwrap();
        let ro = s.get(ClassKind::Ro);
        assert_eq!((ro.pages, ro.reads, ro.writes, ro.sharers), (16.0, 20000.0, 0.0, 8.0));
        assert!(ro.write_granularity.is_infinite());
        let sp = s.get(ClassKind::Sp);
        assert_eq!((sp.run_granularity, sp.write_granularity), (100.0, 200.0));
        // Round trip through the writer.
        let back = ClassSet::from_toml_str(&s.to_toml_string(), "round-trip").unwrap();
        assert_eq!(back.params(), s.params());
    }

    #[test]
    fn unknown_preset_lists_the_valid_ones() {
        let e = preset("nope").unwrap_err();
        assert_eq!(e.to_string(), "unknown page-class preset 'nope'; valid presets: dunx-synth-8c");
    }

    #[test]
    fn unknown_key_is_reported_with_line() {
        let text = GOOD.replace("sharers = 2", "sharers = 2\nshares = 3");
        let e = ClassSet::from_toml_str(&text, "c.toml").unwrap_err();
        let msg = e.to_string();
        assert!(msg.starts_with("c.toml:9: unknown field `shares`"), "{msg}");
    }

    #[test]
    fn unknown_class_table_is_rejected() {
        let e = ClassSet::from_toml_str("[XX]\npages = 1\n", "c.toml").unwrap_err();
        assert!(e.to_string().starts_with("c.toml:1: unknown field `XX`"), "{e}");
    }

    #[test]
    fn malformed_toml_names_the_line() {
        let text = GOOD.replace("reads = 5000", "reads = = 5000");
        let e = ClassSet::from_toml_str(&text, "c.toml").unwrap_err();
        assert!(e.to_string().starts_with("c.toml:4:"), "{e}");
    }

    #[test]
    fn missing_field_is_reported() {
        let text = GOOD.replace("sharers = 2\n", "");
        let e = ClassSet::from_toml_str(&text, "c.toml").unwrap_err();
        assert!(e.to_string().contains("missing field `sharers`"), "{e}");
    }

    #[test]
    fn semantic_errors_carry_class_field_and_line() {
        let text = GOOD.replace("write_granularity = 2500", "write_granularity = 100");
        let e = ClassSet::from_toml_str(&text, "c.toml").unwrap_err();
        assert_eq!(
            e.to_string(),
            "c.toml:7: class SS, field 'write_granularity': 100 is below run_granularity 2500; need r <= w (another processor's write is also its reference)"
        );
        let text = "[RO]\npages = 1\nreads = 10\nwrites = 1\nrun_granularity = 5\nwrite_granularity = inf\nsharers = 2\n";
        let e = ClassSet::from_toml_str(text, "ro.toml").unwrap_err();
        assert_eq!(e.to_string(), "ro.toml:4: class RO, field 'writes': 1 must be 0: RO pages are never written");
        let text = GOOD.replace("sharers = 2", "sharers = 0.5");
        let e = ClassSet::from_toml_str(&text, "c.toml").unwrap_err();
        assert!(e.to_string().contains("c.toml:8: class SS, field 'sharers': 0.5 must be >= 1"), "{e}");
        let text = GOOD.replace("pages = 8", "pages = -1");
        let e = ClassSet::from_toml_str(&text, "c.toml").unwrap_err();
        assert!(e.to_string().contains("c.toml:3: class SS, field 'pages': -1 must be finite and >= 0"), "{e}");
    }

    #[test]
    fn private_class_must_have_one_sharer() {
        let text = "[PR]\npages = 1\nreads = 10\nwrites = 1\nrun_granularity = 11\nwrite_granularity = 11\nsharers = 2\n";
        let e = ClassSet::from_toml_str(text, "pr.toml").unwrap_err();
        assert!(e.to_string().contains("class PR, field 'sharers': 2 must be 1"), "{e}");
    }

    #[test]
    fn empty_workload_is_rejected() {
        let e = ClassSet::from_toml_str("name = \"empty\"\n", "e.toml").unwrap_err();
        assert!(e.to_string().contains("no class has pages"), "{e}");
    }

    #[test]
    fn sharers_above_node_count() {
        let s = preset("dunx-synth-8c").unwrap();
        s.check_nodes(8).unwrap();
        let e = s.check_nodes(4).unwrap_err();
        assert!(e.to_string().contains("class RO, field 'sharers': 8 sharers on a 4-node machine"), "{e}");
        assert!(e.to_string().starts_with("preset:dunx-synth-8c:"), "{e}");
    }

    #[test]
    fn set_revalidates() {
        let mut s = preset("dunx-synth-8c").unwrap();
        s.set(ClassKind::Ss, ClassField::RunGranularity, 1200.0).unwrap();
        assert_eq!(s.get(ClassKind::Ss).run_granularity, 1200.0);
        let e = s.set(ClassKind::Ss, ClassField::RunGranularity, 9000.0).unwrap_err();
        assert!(e.to_string().contains("class SS, field 'write_granularity': 2500 is below run_granularity 9000"), "{e}");
        assert_eq!(s.get(ClassKind::Ss).run_granularity, 1200.0);
    }
}
