//! Replays the regression corpus (`corpus/<target>/*`) through the fuzz targets: no input may
//! panic. Files named `repro-*` are reproducers of bugs fixed in the hardening issue; each
//! must be rejected with the error text given in `corpus/expected.txt`
//! (`target/file<TAB>needle` lines).

use numalab_fuzz::{target, TARGETS};
use std::path::Path;

#[test]
fn the_corpus_replays_without_panics_and_reproducers_give_their_errors() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("corpus");
    let expected = std::fs::read_to_string(root.join("expected.txt")).unwrap();
    let mut want = std::collections::BTreeMap::new();
    for line in expected.lines().filter(|l| !l.trim().is_empty() && !l.starts_with('#')) {
        let (file, needle) = line.split_once('\t').unwrap_or_else(|| panic!("bad expected.txt line: {line}"));
        want.insert(file.to_string(), needle.to_string());
    }
    let mut replayed = 0;
    for t in TARGETS {
        let dir = root.join(t.name);
        let Ok(rd) = std::fs::read_dir(&dir) else { continue };
        let mut files: Vec<_> = rd.filter_map(|e| e.ok()).map(|e| e.path()).collect();
        files.sort();
        for f in files {
            let data = std::fs::read(&f).unwrap();
            let key = format!("{}/{}", t.name, f.file_name().unwrap().to_string_lossy());
            let r = std::panic::catch_unwind(|| (target(t.name).unwrap().run)(&data));
            let r = r.unwrap_or_else(|_| panic!("{key} panics"));
            if let Some(needle) = want.get(&key) {
                let e = r.expect_err(&format!("{key} must be rejected"));
                assert!(e.contains(needle.as_str()), "{key}: wanted '{needle}' in '{e}'");
            } else if key.contains("/repro-") {
                panic!("{key}: a reproducer without an expected error in expected.txt");
            }
            replayed += 1;
        }
    }
    for k in want.keys() {
        assert!(root.join(k).exists(), "expected.txt names {k}, which is not in the corpus");
    }
    assert!(replayed >= 30, "only {replayed} corpus files");
}
