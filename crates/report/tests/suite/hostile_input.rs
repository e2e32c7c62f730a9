//! Arbitrary bytes into the results.json loader must never panic (the stable-toolchain
//! equivalent of the `results` cargo-fuzz target in `fuzz/`).

use edbstress_report::export::read_results;
use proptest::prelude::*;

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn results_bytes_never_panic(data in prop::collection::vec(any::<u8>(), 0..400)) {
        let _ = read_results(&data);
    }

    #[test]
    fn results_like_json_never_panics(
        version in prop_oneof![Just("1".to_string()), any::<i64>().prop_map(|v| v.to_string()), Just("\"1\"".to_string())],
        body in "[ -~]{0,80}",
    ) {
        let text = format!("{{\"schema_version\": {version}, {body}}}");
        let _ = read_results(text.as_bytes());
    }
}
