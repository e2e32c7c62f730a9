//! Sizes on the command line: `256MiB`, `1.5GiB`, `4KB`, `32K`, `1048576`. The parsers
//! live in the workload crate so that flags and configuration files read sizes alike.

pub use edbstress_engine::prepare::human_bytes;
pub use edbstress_workload::units::{parse_page_size, parse_size};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn human() {
        assert_eq!(human_bytes(512), "512 B");
        assert_eq!(human_bytes(3 << 29), "1.5 GiB");
    }
}
