//! The configuration file parser (TOML layers) and resolving a layer into a run
//! configuration with its validation.
#![no_main]

use edbstress_workload::config::{ConfigFile, RunConfig};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    if let Ok(layer) = ConfigFile::parse(&text) {
        if let Ok(config) = RunConfig::resolve(&[layer]) {
            let _ = config.validate();
            let _ = config.to_toml();
        }
    }
});
