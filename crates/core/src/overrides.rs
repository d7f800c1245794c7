//! `--set key=value` overrides on a TOML tree, e.g. `machine.nodes[2].mem_bw_gbps=40`.
//!
//! Values are parsed as TOML (`40`, `2.5`, `true`, `"text"`, `[1, 2]`); a bare word that is
//! not valid TOML is taken as a string, so `--set policy.name=round-4k` works unquoted.

use thiserror::Error;
use toml::Value;

#[derive(Debug, Error, Clone, PartialEq)]
pub enum OverrideError {
    #[error("override '{0}' is not of the form key=value")]
    Syntax(String),
    #[error("override '{raw}': {problem}")]
    Path { raw: String, problem: String },
}

#[derive(Debug, Clone, PartialEq)]
enum Step {
    Key(String),
    Index(usize),
}

fn parse_path(raw: &str, path: &str) -> Result<Vec<Step>, OverrideError> {
    let bad = |problem: String| OverrideError::Path { raw: raw.to_string(), problem };
    let mut steps = Vec::new();
    for part in path.split('.') {
        let (key, mut rest) = match part.find('[') {
            Some(i) => (&part[..i], &part[i..]),
            None => (part, ""),
        };
        if key.is_empty() {
            return Err(bad(format!("empty key in path '{path}'")));
        }
        steps.push(Step::Key(key.to_string()));
        while !rest.is_empty() {
            let close = rest.find(']').ok_or_else(|| bad(format!("unclosed '[' in '{part}'")))?;
            let idx: usize = rest[1..close].parse().map_err(|_| bad(format!("index '{}' is not a whole number", &rest[1..close])))?;
            steps.push(Step::Index(idx));
            rest = &rest[close + 1..];
            if !rest.is_empty() && !rest.starts_with('[') {
                return Err(bad(format!("unexpected '{rest}' after an index")));
            }
        }
    }
    Ok(steps)
}

fn parse_value(text: &str) -> Value {
    let wrapped = format!("v = {text}");
    match wrapped.parse::<toml::Table>() {
        Ok(mut t) => t.remove("v").unwrap_or_else(|| Value::String(text.to_string())),
        Err(_) => Value::String(text.to_string()),
    }
}

/// Apply one `key=value` override to `root`. Missing tables along the path are created; an
/// array index must exist (we never invent a node or a region).
pub fn apply(root: &mut Value, raw: &str) -> Result<(), OverrideError> {
    let (path, value) = raw.split_once('=').ok_or_else(|| OverrideError::Syntax(raw.to_string()))?;
    let steps = parse_path(raw, path.trim())?;
    let bad = |problem: String| OverrideError::Path { raw: raw.to_string(), problem };
    let mut cur = root;
    for (i, step) in steps.iter().enumerate() {
        let last = i + 1 == steps.len();
        match step {
            Step::Key(k) => {
                let table = cur.as_table_mut().ok_or_else(|| bad(format!("'{k}' is looked up in a value that is not a table")))?;
                if last {
                    table.insert(k.clone(), parse_value(value.trim()));
                    return Ok(());
                }
                cur = table.entry(k.clone()).or_insert_with(|| Value::Table(Default::default()));
            }
            Step::Index(idx) => {
                let arr = cur.as_array_mut().ok_or_else(|| bad(format!("[{idx}] indexes a value that is not an array")))?;
                let len = arr.len();
                let slot = arr.get_mut(*idx).ok_or_else(|| bad(format!("index {idx} is out of range (the array has {len} entries)")))?;
                if last {
                    *slot = parse_value(value.trim());
                    return Ok(());
                }
                cur = slot;
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tree() -> Value {
        toml::from_str("[machine]\nname='x'\n[[machine.nodes]]\nmem_bw_gbps=1.0\n[[machine.nodes]]\nmem_bw_gbps=2.0\n").unwrap()
    }

    #[test]
    fn sets_a_node_field_by_index() {
        let mut t = tree();
        apply(&mut t, "machine.nodes[1].mem_bw_gbps=40").unwrap();
        assert_eq!(t["machine"]["nodes"][1]["mem_bw_gbps"].as_integer(), Some(40));
        assert_eq!(t["machine"]["nodes"][0]["mem_bw_gbps"].as_float(), Some(1.0));
    }

    #[test]
    fn bare_words_are_strings_and_tables_are_created() {
        let mut t = tree();
        apply(&mut t, "policy.name=round-4k").unwrap();
        assert_eq!(t["policy"]["name"].as_str(), Some("round-4k"));
        apply(&mut t, "policy.weights=[1, 2]").unwrap();
        assert_eq!(t["policy"]["weights"].as_array().unwrap().len(), 2);
    }

    #[test]
    fn errors_name_the_problem() {
        let mut t = tree();
        assert_eq!(apply(&mut t, "nonsense"), Err(OverrideError::Syntax("nonsense".into())));
        let e = apply(&mut t, "machine.nodes[5].mem_bw_gbps=1").unwrap_err().to_string();
        assert!(e.contains("index 5 is out of range (the array has 2 entries)"), "{e}");
        let e = apply(&mut t, "machine.name[0]=1").unwrap_err().to_string();
        assert!(e.contains("not an array"), "{e}");
        let e = apply(&mut t, "machine.nodes[x]=1").unwrap_err().to_string();
        assert!(e.contains("not a whole number"), "{e}");
    }
}
