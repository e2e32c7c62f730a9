//! File and function lengths.

use proc_macro2::Span;
use syn::visit::Visit;

use crate::{Finding, Rule};

/// The file itself, if it has more than `max` lines.
pub fn long_file(path: &str, source: &str, max: usize) -> Option<Finding> {
    let lines = source.lines().count();
    (lines > max).then(|| Finding {
        rule: Rule::LongFile { lines },
        path: path.to_string(),
        line: 0,
        item: String::new(),
    })
}

/// Every function or method in `source` longer than `max` lines,
/// counted from its `fn` keyword to its closing brace (attributes and doc comments
/// excluded). Methods are named with their type (`fn Type::name`), nested functions
/// with their enclosing one.
pub fn long_functions(path: &str, source: &str, max: usize) -> Result<Vec<Finding>, syn::Error> {
    let file = syn::parse_file(source)?;
    let mut walk = FunctionLengths {
        path,
        max,
        scope: Vec::new(),
        found: Vec::new(),
    };
    walk.visit_file(&file);
    Ok(walk.found)
}

struct FunctionLengths<'a> {
    path: &'a str,
    max: usize,
    /// Names enclosing the current item (impl types, traits, functions).
    scope: Vec<String>,
    found: Vec<Finding>,
}

impl FunctionLengths<'_> {
    fn measure(&mut self, name: &syn::Ident, start: Span, end: Span) {
        let first = start.start().line;
        let lines = end.end().line.saturating_sub(first) + 1;
        if lines > self.max {
            let mut qualified = self.scope.clone();
            qualified.push(name.to_string());
            self.found.push(Finding {
                rule: Rule::LongFunction { lines },
                path: self.path.to_string(),
                line: first,
                item: format!("fn {}", qualified.join("::")),
            });
        }
    }

    fn within(&mut self, name: String, walk: impl FnOnce(&mut Self)) {
        self.scope.push(name);
        walk(self);
        self.scope.pop();
    }
}

impl<'ast> Visit<'ast> for FunctionLengths<'_> {
    fn visit_item_fn(&mut self, f: &'ast syn::ItemFn) {
        self.measure(
            &f.sig.ident,
            f.sig.fn_token.span,
            f.block.brace_token.span.close(),
        );
        self.within(f.sig.ident.to_string(), |w| syn::visit::visit_item_fn(w, f));
    }

    fn visit_impl_item_fn(&mut self, f: &'ast syn::ImplItemFn) {
        self.measure(
            &f.sig.ident,
            f.sig.fn_token.span,
            f.block.brace_token.span.close(),
        );
        self.within(f.sig.ident.to_string(), |w| {
            syn::visit::visit_impl_item_fn(w, f)
        });
    }

    fn visit_trait_item_fn(&mut self, f: &'ast syn::TraitItemFn) {
        if let Some(block) = &f.default {
            self.measure(
                &f.sig.ident,
                f.sig.fn_token.span,
                block.brace_token.span.close(),
            );
        }
        self.within(f.sig.ident.to_string(), |w| {
            syn::visit::visit_trait_item_fn(w, f)
        });
    }

    fn visit_item_impl(&mut self, i: &'ast syn::ItemImpl) {
        let name = type_name(&i.self_ty);
        self.within(name, |w| syn::visit::visit_item_impl(w, i));
    }

    fn visit_item_trait(&mut self, t: &'ast syn::ItemTrait) {
        self.within(t.ident.to_string(), |w| syn::visit::visit_item_trait(w, t));
    }

    fn visit_item_mod(&mut self, m: &'ast syn::ItemMod) {
        self.within(m.ident.to_string(), |w| syn::visit::visit_item_mod(w, m));
    }
}

/// The last path segment of an impl's type (`Foo` for `impl<T> a::Foo<T>`).
fn type_name(ty: &syn::Type) -> String {
    match ty {
        syn::Type::Path(p) => p
            .path
            .segments
            .last()
            .map(|s| s.ident.to_string())
            .unwrap_or_default(),
        syn::Type::Reference(r) => type_name(&r.elem),
        _ => "_".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn body(lines: usize) -> String {
        (0..lines)
            .map(|i| format!("    let _x{i} = {i};\n"))
            .collect()
    }

    #[test]
    fn a_function_over_the_limit_is_named_with_its_type_and_line() {
        let source = format!(
            "struct S;\n\nimpl S {{\n    /// Docs do not count.\n    fn long(&self) {{\n{}    }}\n    fn short(&self) {{}}\n}}\n",
            body(8)
        );
        // `fn long` spans its signature line, 8 body lines and the closing brace: 10.
        let found = long_functions("a.rs", &source, 9).unwrap();
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[0].item, "fn S::long");
        assert_eq!(found[0].line, 5);
        assert_eq!(found[0].rule, Rule::LongFunction { lines: 10 });
        assert!(long_functions("a.rs", &source, 10).unwrap().is_empty());
    }

    #[test]
    fn nested_and_module_functions_are_found() {
        let source = format!(
            "mod inner {{\n    fn outer() {{\n        fn nested() {{\n{}        }}\n    }}\n}}\n",
            body(5)
        );
        let found = long_functions("b.rs", &source, 6).unwrap();
        let items: Vec<&str> = found.iter().map(|f| f.item.as_str()).collect();
        assert_eq!(items, ["fn inner::outer", "fn inner::outer::nested"]);
    }

    #[test]
    fn a_file_over_the_limit_is_reported_with_its_length() {
        let text = "x\n".repeat(12);
        assert_eq!(
            long_file("c.rs", &text, 11).map(|f| f.rule),
            Some(Rule::LongFile { lines: 12 })
        );
        assert_eq!(long_file("c.rs", &text, 12), None);
    }

    #[test]
    fn source_that_does_not_parse_is_an_error() {
        assert!(long_functions("d.rs", "fn (", 10).is_err());
    }
}
