//! README.md, "Platforms": the targets it says a build refuses are refused
//! by `src/lib.rs` (a `compile_error!` under each condition, naming the
//! reason), and docs/format.md's little-endian words are what this build
//! writes. A refused target cannot run a test, so this checks the source
//! of the refusal; `cargo check --target s390x-unknown-linux-gnu` (or
//! `i686-unknown-linux-gnu`) shows it fire.

use std::fs;

fn read(rel: &str) -> String {
    fs::read_to_string(format!("{}/{rel}", env!("CARGO_MANIFEST_DIR"))).unwrap()
}

/// The text of README.md's "Platforms" section.
fn platforms() -> String {
    let readme = read("README.md");
    let start = readme
        .find("\n## Platforms\n")
        .expect("README.md has a \"Platforms\" section");
    let rest = &readme[start + 1..];
    let end = rest[3..].find("\n## ").map_or(rest.len(), |e| e + 3);
    rest[..end].to_string()
}

/// The `compile_error!` message right after `cfg` in src/lib.rs.
fn refusal(lib: &str, cfg: &str) -> String {
    let at = lib
        .find(cfg)
        .unwrap_or_else(|| panic!("src/lib.rs has no {cfg}"));
    let after = lib[at + cfg.len()..].trim_start();
    assert!(
        after.starts_with("compile_error!("),
        "{cfg} in src/lib.rs is not followed by a compile_error!"
    );
    let msg = &after[..after.find(");").unwrap()];
    msg.to_string()
}

#[test]
fn big_endian_and_32_bit_targets_are_refused_as_the_readme_says() {
    let doc = platforms();
    for (words, why) in [
        ("big-endian", "little-endian"),
        ("32-bit", "usize"),
        ("compile_error!", "src/lib.rs"),
    ] {
        assert!(doc.contains(words), "README's Platforms lacks {words:?}");
        assert!(doc.contains(why), "README's Platforms lacks {why:?}");
    }
    let lib = read("src/lib.rs");
    let big = refusal(&lib, "#[cfg(target_endian = \"big\")]");
    assert!(big.contains("little-endian") && big.contains("docs/format.md"));
    assert!(big.contains("Platforms"));
    let narrow = refusal(&lib, "#[cfg(not(target_pointer_width = \"64\"))]");
    assert!(narrow.contains("64-bit") && narrow.contains("usize"));
    assert!(narrow.contains("Platforms"));
}

#[test]
fn every_target_the_readme_names_has_its_status() {
    let doc = platforms();
    for status in [
        "**Tested:**",
        "**Builds, not tested:**",
        "**Does not build:**",
        "**Refused when compiled:**",
    ] {
        assert!(doc.contains(status), "README's Platforms lacks {status}");
    }
    for target in [
        "Linux on x86_64",
        "aarch64",
        "macOS",
        "Windows",
        "s390x",
        "i686",
    ] {
        assert!(doc.contains(target), "README's Platforms lacks {target}");
    }
}

/// The words this build writes are docs/format.md's: little-endian (the
/// property the big-endian refusal protects; `tests/format_spec.rs`
/// decodes whole files the same way).
#[test]
fn this_build_writes_little_endian_words() {
    assert!(read("docs/format.md").contains("Everything here is little-endian."));
    assert_eq!(1u64.to_ne_bytes(), 1u64.to_le_bytes());
    assert_eq!(usize::BITS, 64);
}
