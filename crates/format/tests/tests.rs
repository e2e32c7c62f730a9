//! The format crate's integration tests, one binary (one link instead of one per file):
//! checksums, database header, log formats, slotted pages and hostile input, each a
//! module of `suite`.

mod suite {
    mod checksum;
    mod header;
    mod hostile_input;
    mod log;
    mod log_sector512;
    mod page;
}
