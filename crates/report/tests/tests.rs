//! The report crate's integration tests, one binary (one link instead of one per file),
//! each file a module of `suite`.

mod suite {
    mod aggregate;
    mod common;
    mod exporters;
    mod hostile_input;
    mod shape;
    mod solution_document;
    mod solution_print;
}
