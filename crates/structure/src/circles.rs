//! Import circles between the files of a crate, from their `use` items.
//!
//! A file imports another when one of its `use` items names a path inside that file's
//! module (`use crate::a::b::Item` imports `a/b.rs`, or `a.rs` when `a` has no file
//! `b`). Imports between a module and its own ancestors or descendants (a parent
//! re-exporting its child, a child using its parent's types, `use super::*` in tests)
//! are how Rust nests modules and are not counted; a circle is files that reach each
//! other through the other imports.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use syn::visit::Visit;

use crate::{Finding, Rule};

/// Every import circle between the files of one crate. `src` names the crate's source
/// directory in the findings; `files` are its files as (path under `src`, source text).
/// Each circle is reported once, as its shortest loop from its first file.
pub fn import_circles(src: &str, files: &[(String, String)]) -> Result<Vec<Finding>, syn::Error> {
    let modules: BTreeMap<Vec<String>, &str> = files
        .iter()
        .map(|(path, _)| (module_of(path), path.as_str()))
        .collect();
    let mut edges: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    for (path, source) in files {
        let file = syn::parse_file(source)?;
        let here = module_of(path);
        let mut uses = UsePaths {
            module: here.clone(),
            paths: Vec::new(),
        };
        uses.visit_file(&file);
        for used in uses.paths {
            let Some(target) = longest_module(&modules, &used) else {
                continue;
            };
            if target.starts_with(&here) || here.starts_with(&target) {
                continue;
            }
            edges
                .entry(path.as_str())
                .or_default()
                .insert(modules[&target]);
        }
    }
    let mut found = Vec::new();
    for component in strongly_connected(&edges) {
        let first = component[0];
        let members: BTreeSet<&str> = component.iter().copied().collect();
        let cycle = shortest_loop(&edges, &members, first);
        found.push(Finding {
            rule: Rule::ImportCircle,
            path: src.to_string(),
            line: 0,
            item: cycle.join(" -> "),
        });
    }
    Ok(found)
}

/// The module a file under `src` holds: `a/b.rs` and `a/b/mod.rs` hold `a::b`;
/// `lib.rs` and `main.rs` the crate root.
fn module_of(path: &str) -> Vec<String> {
    let stem = path.strip_suffix(".rs").unwrap_or(path);
    let mut parts: Vec<String> = stem.split('/').map(str::to_string).collect();
    if parts.last().is_some_and(|p| p == "mod") || matches!(stem, "lib" | "main") {
        parts.pop();
    }
    parts
}

/// The deepest module with a file of its own that `path` lies in.
fn longest_module(modules: &BTreeMap<Vec<String>, &str>, path: &[String]) -> Option<Vec<String>> {
    (0..=path.len())
        .rev()
        .map(|n| path[..n].to_vec())
        .find(|m| modules.contains_key(m))
}

/// The crate-absolute paths a file's `use` items name (external crates left out).
struct UsePaths {
    /// The module being walked (the file's, then inline modules within it).
    module: Vec<String>,
    paths: Vec<Vec<String>>,
}

impl<'ast> Visit<'ast> for UsePaths {
    fn visit_item_mod(&mut self, m: &'ast syn::ItemMod) {
        self.module.push(m.ident.to_string());
        syn::visit::visit_item_mod(self, m);
        self.module.pop();
    }

    fn visit_item_use(&mut self, u: &'ast syn::ItemUse) {
        let mut flat = Vec::new();
        flatten(&u.tree, &mut Vec::new(), &mut flat);
        for segments in flat {
            if let Some(absolute) = self.absolute(&segments) {
                self.paths.push(absolute);
            }
        }
    }
}

impl UsePaths {
    /// `segments` from the crate root. A first segment other than `crate`, `self` or
    /// `super` is relative to the current module (a child module, as the 2018 edition
    /// reads it); another crate's path (`std::...`) thus resolves into the current file
    /// and counts for nothing.
    fn absolute(&self, segments: &[String]) -> Option<Vec<String>> {
        let (first, rest) = segments.split_first()?;
        match first.as_str() {
            "crate" => Some(rest.to_vec()),
            "self" => Some([self.module.clone(), rest.to_vec()].concat()),
            "super" => {
                let mut base = self.module.clone();
                base.pop();
                let mut rest = rest;
                while let Some((next, tail)) = rest.split_first() {
                    if next != "super" {
                        break;
                    }
                    base.pop();
                    rest = tail;
                }
                Some([base, rest.to_vec()].concat())
            }
            _ => Some([self.module.clone(), segments.to_vec()].concat()),
        }
    }
}

/// Every path a use tree names, as segments (`a::{b, c::*}` gives `a::b` and `a::c`).
fn flatten(tree: &syn::UseTree, prefix: &mut Vec<String>, out: &mut Vec<Vec<String>>) {
    match tree {
        syn::UseTree::Path(p) => {
            prefix.push(p.ident.to_string());
            flatten(&p.tree, prefix, out);
            prefix.pop();
        }
        syn::UseTree::Name(n) => out.push([prefix.clone(), vec![n.ident.to_string()]].concat()),
        syn::UseTree::Rename(r) => out.push([prefix.clone(), vec![r.ident.to_string()]].concat()),
        syn::UseTree::Glob(_) => out.push(prefix.clone()),
        syn::UseTree::Group(g) => {
            for item in &g.items {
                flatten(item, prefix, out);
            }
        }
    }
}

/// The strongly connected components with more than one file, each sorted, in order of
/// their first file (Tarjan's algorithm).
fn strongly_connected<'a>(edges: &BTreeMap<&'a str, BTreeSet<&'a str>>) -> Vec<Vec<&'a str>> {
    struct Tarjan<'e, 'a> {
        edges: &'e BTreeMap<&'a str, BTreeSet<&'a str>>,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on_stack: BTreeSet<&'a str>,
        out: Vec<Vec<&'a str>>,
    }
    impl<'a> Tarjan<'_, 'a> {
        fn visit(&mut self, v: &'a str) {
            let n = self.index.len();
            self.index.insert(v, n);
            self.low.insert(v, n);
            self.stack.push(v);
            self.on_stack.insert(v);
            for &w in self.edges.get(v).into_iter().flatten() {
                if !self.index.contains_key(w) {
                    self.visit(w);
                    let low = self.low[v].min(self.low[w]);
                    self.low.insert(v, low);
                } else if self.on_stack.contains(w) {
                    let low = self.low[v].min(self.index[w]);
                    self.low.insert(v, low);
                }
            }
            if self.low[v] == self.index[v] {
                let mut component = Vec::new();
                while let Some(w) = self.stack.pop() {
                    self.on_stack.remove(w);
                    component.push(w);
                    if w == v {
                        break;
                    }
                }
                if component.len() > 1 {
                    component.sort();
                    self.out.push(component);
                }
            }
        }
    }
    let mut t = Tarjan {
        edges,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        out: Vec::new(),
    };
    for &v in edges.keys() {
        if !t.index.contains_key(v) {
            t.visit(v);
        }
    }
    t.out.sort();
    t.out
}

/// The shortest loop from `start` back to itself through `members` (breadth first).
fn shortest_loop<'a>(
    edges: &BTreeMap<&'a str, BTreeSet<&'a str>>,
    members: &BTreeSet<&'a str>,
    start: &'a str,
) -> Vec<&'a str> {
    let mut came_from: BTreeMap<&str, &str> = BTreeMap::new();
    let mut queue = VecDeque::from([start]);
    while let Some(v) = queue.pop_front() {
        for &w in edges.get(v).into_iter().flatten() {
            if !members.contains(w) {
                continue;
            }
            if w == start {
                let mut path = vec![v];
                let mut at = v;
                while at != start {
                    at = came_from[at];
                    path.push(at);
                }
                path.reverse();
                path.push(start);
                return path;
            }
            if !came_from.contains_key(w) && w != start {
                came_from.insert(w, v);
                queue.push_back(w);
            }
        }
    }
    vec![start]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn files(list: &[(&str, &str)]) -> Vec<(String, String)> {
        list.iter()
            .map(|(p, s)| (p.to_string(), s.to_string()))
            .collect()
    }

    fn circles(list: &[(&str, &str)]) -> Vec<String> {
        import_circles("x/src", &files(list))
            .unwrap()
            .into_iter()
            .map(|f| f.item)
            .collect()
    }

    #[test]
    fn two_files_importing_each_other_are_a_circle() {
        let found = circles(&[
            ("lib.rs", "mod a; mod b;"),
            ("a.rs", "use crate::b::Thing;"),
            ("b.rs", "pub use crate::a::{Other, inner::*};"),
        ]);
        assert_eq!(found, ["a.rs -> b.rs -> a.rs"]);
    }

    #[test]
    fn a_longer_circle_through_nested_modules_and_super_is_found_once() {
        let found = circles(&[
            ("lib.rs", ""),
            ("a/mod.rs", "mod x;"),
            ("a/x.rs", "use crate::b::B;"),
            ("b.rs", "fn f() { use crate::c::C; }"),
            ("c/mod.rs", "mod inner { use super::super::a::x::X; }"),
            ("d.rs", "use crate::a::x::X;"),
        ]);
        assert_eq!(found, ["a/x.rs -> b.rs -> c/mod.rs -> a/x.rs"]);
    }

    #[test]
    fn parents_children_tests_and_other_crates_are_not_circles() {
        let found = circles(&[
            ("lib.rs", "pub use a::Thing; use crate::b::B;"),
            ("a/mod.rs", "pub use self::child::Thing; use crate::b::B;"),
            (
                "a/child.rs",
                "use super::Parent; use crate::a::Parent as P;",
            ),
            (
                "b.rs",
                "use std::a::Thing; use other_crate::a::X; use crate::Root; \
                 #[cfg(test)] mod tests { use super::*; }",
            ),
        ]);
        assert!(found.is_empty(), "{found:?}");
    }
}
