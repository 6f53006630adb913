//! Statements of docs/cli.md and docs/canonicalization.md that a test can
//! check cheaply: the examples of the rule tables, and the documented
//! behaviour of the binary.

mod cli_support;

use cli_support::*;
use timebloom::canonical::{canonicalize, Canonicalizer};

/// canonicalization.md, "The rules, in order": each row's example.
#[test]
fn the_rule_table_examples_give_what_the_table_shows() {
    let rows: &[(&str, Option<&str>)] = &[
        (" http://exa\tmple.com/a ", Some("http://example.com/a")),
        ("example.com/a", None),
        ("mailto:x@y", None),
        (
            "HTTP://Bücher.Example./",
            Some("http://xn--bcher-kva.example/"),
        ),
        ("https://u:p@example.com:443/", Some("https://example.com/")),
        (
            "http://example.com/a/./b/../c;jsessionid=F0",
            Some("http://example.com/a/c"),
        ),
        (
            "http://example.com/%7euser/a%2fb/%zz",
            Some("http://example.com/~user/a%2Fb/%25zz"),
        ),
        (
            "http://example.com/?b=2&&a=1&c",
            Some("http://example.com/?a=1&b=2&c"),
        ),
        (
            "http://example.com/?PHPSESSID=abc&x=1",
            Some("http://example.com/?x=1"),
        ),
        ("http://example.com/a#top", Some("http://example.com/a")),
    ];
    for (input, want) in rows {
        let got = canonicalize(input);
        match want {
            Some(w) => assert_eq!(got.as_deref(), Ok(*w), "{input:?}"),
            None => assert!(got.is_err(), "{input:?}: {got:?}"),
        }
    }
    let tracking = Canonicalizer::new().drop_tracking(true);
    assert_eq!(
        tracking
            .canonicalize("http://example.com/?utm_source=x&id=7")
            .unwrap(),
        "http://example.com/?id=7"
    );
    let www = Canonicalizer::new().drop_www(true);
    assert_eq!(
        www.canonicalize("https://www.example.com/").unwrap(),
        "https://example.com/"
    );
    assert_eq!(
        www.canonicalize("https://www.com/").unwrap(),
        "https://www.com/"
    );
    let slash = Canonicalizer::new().drop_trailing_slash(true);
    assert_eq!(
        slash.canonicalize("http://example.com/a//").unwrap(),
        "http://example.com/a"
    );
    // "Why we differ": `[` and `]` after the host are written escaped,
    // as `|`, `^`, `{`, `}` and the backquote are.
    for (a, b) in [
        ("http://example.com/x[1]", "http://example.com/x%5B1%5D"),
        ("http://example.com/?q=[1]", "http://example.com/?q=%5B1%5D"),
        (
            "http://example.com/|^{}`",
            "http://example.com/%7C%5E%7B%7D%60",
        ),
    ] {
        assert_eq!(canonicalize(a), canonicalize(b), "{a} vs {b}");
    }
    // "What stays apart on purpose".
    let plus = canonicalize("http://example.com/?q=a+b").unwrap();
    let space = canonicalize("http://example.com/?q=a%20b").unwrap();
    let escaped = canonicalize("http://example.com/?q=a%2Bb").unwrap();
    assert!(plus != space && space != escaped && plus != escaped);
    assert_ne!(
        canonicalize("http://example.com/?a").unwrap(),
        canonicalize("http://example.com/?a=").unwrap()
    );
    assert_eq!(
        canonicalize("http://example.com/a?").unwrap(),
        "http://example.com/a"
    );
    // Rule 3: a trailing dot that would leave a number stays.
    assert!(canonicalize("http://0x19../")
        .unwrap()
        .starts_with("http://0x19."));
    let own = Canonicalizer::new()
        .tracking_param("réf")
        .tracking_param("ref%5Fid");
    assert_eq!(
        own.canonicalize("http://example.com/?r%C3%A9f=1&ref_id=2&a=1")
            .unwrap(),
        "http://example.com/?a=1"
    );
}

/// cli.md, "Redis", **Arguments**: `--prefix` "needs `--redis`". `create`
/// and `stats` took it with a directory and went on without a word, so
/// `create crawl.tb --prefix crawl` made a directory engine that the
/// prefix meant nothing to.
#[test]
fn prefix_without_redis_is_refused_by_every_command() {
    let (_tmp, db) = temp_db();
    assert_exit(&cmd("add", &db, &[], b"a\n"), 0);
    let other = db.with_file_name("other");
    for (command, dir, rest) in [
        ("create", &other, &[][..]),
        ("stats", &db, &[][..]),
        ("add", &db, &[][..]),
        ("filter-new", &db, &[][..]),
        ("check", &db, &["a"][..]),
    ] {
        let mut args = vec!["--prefix", "crawl"];
        args.extend_from_slice(rest);
        let out = cmd(command, dir, &args, b"");
        assert_exit(&out, 2);
        assert_stderr_contains(&out, "--redis");
    }
    assert!(!other.exists(), "create made an engine");
}
