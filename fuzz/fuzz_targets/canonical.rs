//! Arbitrary bytes as a line of input to URL canonicalization, under each
//! rule set the tests use: no panic; a canonical form is a fixed point (its
//! own canonical form); the fast checks and the full rules agree (the full
//! rules run alone when the line starts with a space, which they trim), and
//! `canonicalize_into_if_changed` answers as `canonicalize_bytes` does.
#![no_main]

use libfuzzer_sys::fuzz_target;
use timebloom::canonical::Canonicalizer;

fuzz_target!(|data: &[u8]| {
    let rule_sets = [
        Canonicalizer::new(),
        Canonicalizer::strict(),
        Canonicalizer::new().drop_www(true),
        Canonicalizer::new().drop_trailing_slash(true),
        Canonicalizer::new().tracking_param("id"),
    ];
    let mut spaced = b" ".to_vec();
    spaced.extend_from_slice(data);
    for c in &rule_sets {
        let fast = c.canonicalize_bytes(data);
        let full = c.canonicalize_bytes(&spaced);
        assert_eq!(fast, full, "fast and full paths: {data:?} {c:?}");
        let mut out = Vec::new();
        match c.canonicalize_into_if_changed(data, &mut out) {
            Ok(false) => assert_eq!(fast.as_deref().map(str::as_bytes), Ok(data)),
            Ok(true) => assert_eq!(Ok(out), fast.clone().map(String::into_bytes)),
            Err(e) => assert_eq!(Err(e), fast),
        }
        if let Ok(once) = &fast {
            assert_eq!(
                c.canonicalize(once).as_ref(),
                Ok(once),
                "not a fixed point: {data:?} {c:?}"
            );
        }
    }
});
