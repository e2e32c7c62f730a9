//! Command and setting templates: `{name}` is replaced by the value of that name (an
//! axis, a var or a built-in), `{{` and `}}` stand for braces. Values are inserted as
//! they are, unquoted: the sweep file's author writes the shell command.

use std::collections::BTreeMap;

/// The names the sweep sets itself.
pub const BUILTINS: [&str; 5] = ["point", "repeat", "point_dir", "sweep_dir", "run_dir"];

/// Why a template cannot be used.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum TemplateError {
    /// A `{` without its `}`.
    #[error("'{{{0}' is not closed: write {{name}}, or {{{{ for a brace")]
    Unclosed(String),
    /// `{}`.
    #[error("'{{}}' names nothing: write {{name}}, or {{{{ for a brace")]
    Empty,
    /// A name the sweep does not define.
    #[error("{{{name}}} is not a name of this sweep; known: {known}")]
    UnknownName {
        /// The name used.
        name: String,
        /// The names there are, comma separated.
        known: String,
    },
    /// A name without a value where the template is used.
    #[error("{{{0}}} has no value here")]
    NoValue(String),
}

/// A parsed template.
#[derive(Clone, Debug, PartialEq)]
pub struct Template {
    parts: Vec<Part>,
}

#[derive(Clone, Debug, PartialEq)]
enum Part {
    Text(String),
    Name(String),
}

impl Template {
    /// Parses `text`; an unclosed or empty `{}` is an error.
    pub fn parse(text: &str) -> Result<Template, TemplateError> {
        let mut parts = Vec::new();
        let mut lit = String::new();
        let mut chars = text.chars().peekable();
        while let Some(c) = chars.next() {
            match c {
                '{' if chars.peek() == Some(&'{') => {
                    chars.next();
                    lit.push('{');
                }
                '}' if chars.peek() == Some(&'}') => {
                    chars.next();
                    lit.push('}');
                }
                '{' => {
                    let mut name = String::new();
                    loop {
                        match chars.next() {
                            Some('}') => break,
                            Some(c) => name.push(c),
                            None => {
                                return Err(TemplateError::Unclosed(name));
                            }
                        }
                    }
                    let name = name.trim().to_string();
                    if name.is_empty() {
                        return Err(TemplateError::Empty);
                    }
                    if !lit.is_empty() {
                        parts.push(Part::Text(std::mem::take(&mut lit)));
                    }
                    parts.push(Part::Name(name));
                }
                c => lit.push(c),
            }
        }
        if !lit.is_empty() {
            parts.push(Part::Text(lit));
        }
        Ok(Template { parts })
    }

    /// Every name used is one of `known`.
    pub fn check(self, known: &[&str]) -> Result<Template, TemplateError> {
        for p in &self.parts {
            if let Part::Name(n) = p {
                if !known.contains(&n.as_str()) {
                    return Err(TemplateError::UnknownName {
                        name: n.clone(),
                        known: known.join(", "),
                    });
                }
            }
        }
        Ok(self)
    }

    /// The text with every name replaced.
    pub fn render(&self, names: &BTreeMap<String, String>) -> Result<String, TemplateError> {
        let mut out = String::new();
        for p in &self.parts {
            match p {
                Part::Text(t) => out.push_str(t),
                Part::Name(n) => match names.get(n) {
                    Some(v) => out.push_str(v),
                    None => return Err(TemplateError::NoValue(n.clone())),
                },
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names() -> BTreeMap<String, String> {
        [("dev", "/dev/loop3"), ("compression", "zstd")]
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn names_are_replaced_and_double_braces_kept() {
        let t = Template::parse("mount -o compress={compression} {dev} && echo {{x}}").unwrap();
        assert_eq!(
            t.render(&names()).unwrap(),
            "mount -o compress=zstd /dev/loop3 && echo {x}"
        );
    }

    #[test]
    fn unknown_and_unclosed_names_are_refused() {
        let e = Template::parse("mkfs {devv}")
            .unwrap()
            .check(&["dev"])
            .unwrap_err()
            .to_string();
        assert!(e.contains("{devv} is not a name"), "{e}");
        assert!(
            Template::parse("echo {dev")
                .unwrap_err()
                .to_string()
                .contains("not closed")
        );
        assert_eq!(
            Template::parse("echo {}").unwrap_err().to_string(),
            "'{}' names nothing: write {name}, or {{ for a brace"
        );
        assert_eq!(
            Template::parse("echo {de").unwrap_err().to_string(),
            "'{de' is not closed: write {name}, or {{ for a brace"
        );
    }
}
