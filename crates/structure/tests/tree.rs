//! The workspace's source tree keeps the project's shape rules: files under 1,000 lines,
//! functions under 150, no history in code or docs, no import circle between files.

use std::path::Path;

use edbstress_structure::{Finding, check_tree};

/// Findings not yet removed, each with the part of the tree it belongs to (path, item,
/// owner; `item` is empty for a whole file). The list only shrinks: an entry that no
/// longer matches anything fails the test, so none lingers after its fix.
const ALLOWED: &[(&str, &str, &str)] = &[];

fn allowed(f: &Finding) -> bool {
    ALLOWED
        .iter()
        .any(|(path, item, _)| f.path == *path && f.item == *item)
}

#[test]
fn the_tree_has_no_long_files_long_functions_history_or_import_circles() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let findings = check_tree(&root).unwrap_or_else(|e| panic!("cannot check the tree: {e}"));
    let mut problems: Vec<String> = findings
        .iter()
        .filter(|f| !allowed(f))
        .map(ToString::to_string)
        .collect();
    for (path, item, owner) in ALLOWED {
        if !findings.iter().any(|f| f.path == *path && f.item == *item) {
            problems.push(format!(
                "{path}: {item} (allowed for {owner}) is fixed: remove it from ALLOWED"
            ));
        }
    }
    assert!(
        problems.is_empty(),
        "the source tree breaks its shape rules:\n{}",
        problems.join("\n")
    );
}
