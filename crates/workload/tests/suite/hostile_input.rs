//! Arbitrary text into the configuration parser must never panic (the stable-toolchain
//! equivalent of the `config` cargo-fuzz target in `fuzz/`).

use edbstress_workload::config::{ConfigFile, RunConfig};
use proptest::prelude::*;

/// Lines that look like configuration: known keys with odd values, and noise.
fn config_text() -> impl Strategy<Value = String> {
    let key = prop::sample::select(vec![
        "databases",
        "database_size",
        "threads",
        "op_mix",
        "duration",
        "sample_interval",
        "checkpoint_depth",
        "cache_max",
        "cache_min",
        "page_size",
        "test",
        "profile",
        "db_paths",
        "seed",
        "lazy_commit_pct",
        "bdm",
        "compressibility",
        "[section]",
    ]);
    let value = prop_oneof![
        Just("-1".to_string()),
        Just("\"12XB\"".to_string()),
        Just("\"50/20/20/20\"".to_string()),
        Just("18446744073709551616".to_string()),
        Just("[\"a\", 1]".to_string()),
        Just("nan".to_string()),
        any::<i64>().prop_map(|v| v.to_string()),
        "\"[ -~]{0,12}\"",
    ];
    prop_oneof![
        prop::collection::vec((key, value), 0..8).prop_map(|lines| {
            lines
                .into_iter()
                .map(|(k, v)| format!("{k} = {v}\n"))
                .collect()
        }),
        ".{0,200}",
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn config_files_never_panic(text in config_text()) {
        if let Ok(layer) = ConfigFile::parse(&text) {
            if let Ok(config) = RunConfig::resolve(&[layer]) {
                let _ = config.validate();
                let _ = config.to_toml();
            }
        }
    }

    #[test]
    fn config_bytes_never_panic(data in prop::collection::vec(any::<u8>(), 0..400)) {
        let _ = ConfigFile::parse(&String::from_utf8_lossy(&data));
    }
}
