//! A cursor into a JSON document that remembers where it is, so every error names the field
//! ("results.json: field results[1].runs[3].exec_time_s is missing").

use crate::error::{ReportError, Result};
use serde_json::Value;

/// A value of a result document and the field path that leads to it.
pub struct Cursor<'a> {
    pub value: &'a Value,
    /// The file, as the user named it.
    pub file: &'a str,
    at: String,
}

impl<'a> Cursor<'a> {
    pub fn root(value: &'a Value, file: &'a str) -> Cursor<'a> {
        Cursor { value, file, at: String::new() }
    }

    fn child(&self, name: &str) -> String {
        if self.at.is_empty() {
            name.to_string()
        } else {
            format!("{}.{name}", self.at)
        }
    }

    pub fn field_path(&self) -> String {
        if self.at.is_empty() {
            "(document)".into()
        } else {
            self.at.clone()
        }
    }

    pub fn missing(&self, name: &str) -> ReportError {
        ReportError::Missing { path: self.file.into(), field: self.child(name) }
    }

    pub fn wrong(&self, expected: &'static str) -> ReportError {
        ReportError::WrongType { path: self.file.into(), field: self.field_path(), expected }
    }

    /// A field that must be present (it may be `null`).
    pub fn get(&self, name: &str) -> Result<Cursor<'a>> {
        match self.value.as_object() {
            None => Err(self.wrong("an object")),
            Some(m) => match m.get(name) {
                Some(v) => Ok(Cursor { value: v, file: self.file, at: self.child(name) }),
                None => Err(self.missing(name)),
            },
        }
    }

    /// A field that may be absent; `null` counts as absent (docs/json.md: undefined is null).
    pub fn opt(&self, name: &str) -> Option<Cursor<'a>> {
        match self.value.as_object().and_then(|m| m.get(name)) {
            None | Some(Value::Null) => None,
            Some(v) => Some(Cursor { value: v, file: self.file, at: self.child(name) }),
        }
    }

    pub fn items(&self) -> Result<Vec<Cursor<'a>>> {
        let a = self.value.as_array().ok_or_else(|| self.wrong("an array"))?;
        Ok(a.iter().enumerate().map(|(i, v)| Cursor { value: v, file: self.file, at: format!("{}[{i}]", self.at) }).collect())
    }

    pub fn f64(&self) -> Result<f64> {
        match self.value.as_f64() {
            Some(x) if x.is_finite() => Ok(x),
            _ => Err(self.wrong("a finite number")),
        }
    }

    pub fn str(&self) -> Result<&'a str> {
        self.value.as_str().ok_or_else(|| self.wrong("a string"))
    }

    pub fn f64_field(&self, name: &str) -> Result<f64> {
        self.get(name)?.f64()
    }

    /// A numeric field that may be missing from older documents or `null` for a run.
    pub fn opt_f64_field(&self, name: &str) -> Result<Option<f64>> {
        match self.opt(name) {
            None => Ok(None),
            Some(n) => n.f64().map(Some),
        }
    }

    pub fn str_field(&self, name: &str) -> Result<&'a str> {
        self.get(name)?.str()
    }

    pub fn f64_list(&self) -> Result<Vec<f64>> {
        self.items()?.iter().map(|n| n.f64()).collect()
    }
}
