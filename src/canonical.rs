//! URL canonicalization: two spellings of one page become one key.
//!
//! A crawler that meets `HTTP://Example.COM:80/a` and `http://example.com/a`
//! must fetch the page once, so the key it deduplicates on is a canonical
//! form of the URL. [`canonicalize`] parses with the WHATWG URL parser (the
//! `url` crate: the parser browsers use, with IDNA) and then applies the
//! rules below, in this order. Every rule keeps two URLs apart that a server
//! may answer differently; the rules that lose information are opt-in
//! ([`Canonicalizer::strict`], or one by one).
//!
//! 1. **Whitespace**: whitespace before the URL is trimmed, and after it
//!    the C0 controls and spaces the URL standard trims (a trailing
//!    no-break space is part of the URL: a browser sends it as `%C2%A0`);
//!    tabs, carriage returns and newlines inside are dropped.
//! 2. **Parse**: only absolute `http` and `https` URLs with a host are
//!    accepted; anything else is a [`CanonicalError`].
//! 3. **Scheme and host**: lowercased; an internationalized host becomes
//!    punycode (IDNA); IPv4 hosts in any notation become dotted decimal;
//!    trailing dots of the host are removed (unless the name would then
//!    end in a number, which would make it an IPv4 address).
//! 4. **Port and userinfo**: the default port (80 for http, 443 for https)
//!    and any `user:password@` are dropped.
//! 5. **Path**: empty becomes `/`; `.` and `..` segments (also spelled
//!    `%2e`) are resolved; a `;jsessionid=...` path parameter is removed.
//! 6. **Percent-encoding** (path and query): hex digits become uppercase;
//!    encoded unreserved characters (`A-Z a-z 0-9 - . _ ~`) are decoded;
//!    encoded reserved characters (`%2F`, `%3F`, `%26`, ...) stay encoded, so
//!    `/a%2Fb` and `/a/b` stay two keys; every other byte (non-ASCII,
//!    space, `"<>\^{|}`...) is encoded; a `%` that starts no valid escape
//!    becomes `%25`.
//! 7. **Query**: parameters (split on `&`) are sorted by name, then value
//!    (a stable sort: equal pairs keep their order; `a` sorts before `a=`,
//!    so `?a=&a` becomes `?a&a=`); empty parameters
//!    (`&&`) are dropped, blank values (`a=`, `a`) are kept as written; a
//!    query left empty (a bare `?`) is dropped.
//! 8. **Session ids**: query parameters `jsessionid`, `phpsessid`,
//!    `aspsessionid*` (any value) and `sid` (when its value is 32 hex
//!    digits) are removed.
//! 9. **Fragment**: dropped.
//!
//! Opt-in rules, applied last:
//!
//! * **tracking**: removes `utm_*`, `gclid`, `fbclid`, `mc_eid` and the
//!   other names of [`TRACKING_PARAMS`], plus names you add;
//! * **www**: drops a leading `www.` of the host (when a dot remains;
//!   again while one leads);
//! * **trailing slash**: removes the trailing `/`s of a path other than `/`.
//!
//! `docs/canonicalization.md` compares these rules with other crawlers'.
//!
//! Most crawled URLs have a simple shape (an ASCII host that is neither an
//! IP address nor punycode, a path and query of bytes the parser copies as
//! they are), and most of those are already canonical. Two checks come
//! before the parser: one that recognizes an already canonical URL sixteen
//! bytes a step (then it is returned untouched, and
//! [`Canonicalizer::canonicalize_into_if_changed`] writes nothing), and a
//! one-pass reader that writes the canonical form of the other simple URLs
//! without the parser. Tests compare both with the parser's path on the
//! rule tables and on many generated URLs.
//!
//! ```
//! use timebloom::canonical::{canonicalize, Canonicalizer};
//!
//! assert_eq!(
//!     canonicalize("  HTTP://User@Example.COM:80/a/./b/../c?b=2&a=1#top ").unwrap(),
//!     "http://example.com/a/c?a=1&b=2"
//! );
//! let strict = Canonicalizer::strict();
//! assert_eq!(
//!     strict.canonicalize("https://www.example.com/a/?utm_source=x&id=7").unwrap(),
//!     "https://example.com/a?id=7"
//! );
//! assert!(canonicalize("not a url").is_err());
//! ```

use std::fmt;
use std::ops::Range;

use url::Url;

mod scan;

/// Query parameters removed by the tracking rule (compared ASCII
/// case-insensitively); every name starting with `utm_` is removed too.
pub const TRACKING_PARAMS: &[&str] = &[
    "gclid", "gbraid", "wbraid", "dclid", "fbclid", "msclkid", "mc_eid", "mc_cid", "igshid",
    "yclid",
];

/// Why a string has no canonical form.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum CanonicalError {
    /// Nothing but whitespace.
    Empty,
    /// The bytes are not UTF-8 text.
    NotUtf8,
    /// The URL parser refused it (relative, invalid host, bad port...).
    Parse {
        /// The parser's reason.
        reason: String,
    },
    /// A scheme other than http or https.
    UnsupportedScheme {
        /// The scheme found, lowercased.
        scheme: String,
    },
    /// A URL without a host (or a host that was only dots).
    NoHost,
}

impl fmt::Display for CanonicalError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CanonicalError::Empty => write!(f, "not a URL: empty"),
            CanonicalError::NotUtf8 => write!(f, "not a URL: not UTF-8 text"),
            CanonicalError::Parse { reason } => write!(f, "not a URL: {reason}"),
            CanonicalError::UnsupportedScheme { scheme } => {
                write!(f, "not an http(s) URL: scheme {scheme:?}")
            }
            CanonicalError::NoHost => write!(f, "not a URL: no host"),
        }
    }
}

impl std::error::Error for CanonicalError {}

/// Canonicalizes `input` with the default rules (1 to 9 of the module docs).
pub fn canonicalize(input: &str) -> Result<String, CanonicalError> {
    Canonicalizer::new().canonicalize(input)
}

/// Canonicalizes `input` with the default rules and every opt-in rule.
pub fn canonicalize_strict(input: &str) -> Result<String, CanonicalError> {
    Canonicalizer::strict().canonicalize(input)
}

/// A set of rules: the default ones always, opt-in ones as chosen.
#[derive(Clone, Debug, Default)]
pub struct Canonicalizer {
    drop_tracking: bool,
    extra_tracking: Vec<String>,
    drop_www: bool,
    drop_trailing_slash: bool,
}

impl Canonicalizer {
    /// The default rules only.
    pub fn new() -> Canonicalizer {
        Canonicalizer::default()
    }

    /// The default rules and every opt-in rule.
    pub fn strict() -> Canonicalizer {
        Canonicalizer {
            drop_tracking: true,
            extra_tracking: Vec::new(),
            drop_www: true,
            drop_trailing_slash: true,
        }
    }

    /// Removes tracking parameters ([`TRACKING_PARAMS`], `utm_*`, and the
    /// names given to [`Canonicalizer::tracking_param`]).
    pub fn drop_tracking(mut self, yes: bool) -> Canonicalizer {
        self.drop_tracking = yes;
        self
    }

    /// Adds a query parameter name (ASCII case-insensitive) to the tracking
    /// rule, and turns that rule on. The name is compared as rule 6 writes
    /// query names: `réf` also names the parameter written `r%C3%A9f`, and
    /// `ref%5Fid` the one written `ref_id`.
    pub fn tracking_param(mut self, name: &str) -> Canonicalizer {
        let mut normalized = Vec::with_capacity(name.len());
        normalize_pct(name.as_bytes(), QUERY_KEEP, &mut normalized);
        normalized.make_ascii_lowercase();
        // Rule 6 writes only ASCII: nothing is replaced.
        self.extra_tracking
            .push(String::from_utf8_lossy(&normalized).into_owned());
        self.drop_tracking = true;
        self
    }

    /// Drops a leading `www.` of the host.
    pub fn drop_www(mut self, yes: bool) -> Canonicalizer {
        self.drop_www = yes;
        self
    }

    /// Removes the trailing `/`s of a path other than `/`.
    pub fn drop_trailing_slash(mut self, yes: bool) -> Canonicalizer {
        self.drop_trailing_slash = yes;
        self
    }

    /// [`Canonicalizer::canonicalize`] of UTF-8 bytes (a line of input).
    pub fn canonicalize_bytes(&self, input: &[u8]) -> Result<String, CanonicalError> {
        let mut out = Vec::with_capacity(input.len());
        self.canonicalize_into(input, &mut out)?;
        String::from_utf8(out).map_err(|_| CanonicalError::NotUtf8)
    }

    /// Appends the canonical form of the UTF-8 bytes `input` to `out` (no
    /// allocation when `input` is already canonical).
    pub fn canonicalize_into(&self, input: &[u8], out: &mut Vec<u8>) -> Result<(), CanonicalError> {
        if !self.canonicalize_into_if_changed(input, out)? {
            out.extend_from_slice(input);
        }
        Ok(())
    }

    /// [`Canonicalizer::canonicalize_into`] that appends nothing when it
    /// finds `input` to be already canonical (the CLI's path: the line is
    /// then the key, without a copy). `Ok(false)`: `input` is its own
    /// canonical form; `Ok(true)`: the canonical form was appended to `out`
    /// (it may still equal `input`, when only the full rules could tell).
    pub fn canonicalize_into_if_changed(
        &self,
        input: &[u8],
        out: &mut Vec<u8>,
    ) -> Result<bool, CanonicalError> {
        if self.plain(input) {
            return Ok(false);
        }
        let start = out.len();
        if !self.one_pass(input, out)? {
            return Ok(false);
        }
        self.settle(out, start)?;
        Ok(true)
    }

    /// One pass of the rules over `input`: `Ok(false)` when the fast
    /// checks find it canonical (nothing appended), otherwise its form
    /// after one pass appended to `out`.
    fn one_pass(&self, input: &[u8], out: &mut Vec<u8>) -> Result<bool, CanonicalError> {
        if let Some(simple) = Simple::read(input) {
            if self.is_canonical(&simple) {
                return Ok(false);
            }
            self.rewrite(&simple, out)?;
            return Ok(true);
        }
        let s = std::str::from_utf8(input).map_err(|_| CanonicalError::NotUtf8)?;
        self.canonicalize_slow_into(s, out)?;
        Ok(true)
    }

    /// Applies the rules again to the form `out[start..]` until it stays
    /// the same, so that a canonical form is a fixed point: one pass can
    /// leave work for the next (`;%6Asessionid=` decodes into a session
    /// parameter, an escaped `sid` value into 32 hex digits; removing
    /// `;jsessionid=` can uncover a dot segment). The fast check
    /// recognizes most forms at once. On an
    /// error nothing stays appended.
    fn settle(&self, out: &mut Vec<u8>, start: usize) -> Result<(), CanonicalError> {
        let mut next = Vec::new();
        // Every pass that changes the form makes it shorter (a decoded
        // escape, a parameter or a segment less); the bound is
        // only a guard.
        for _ in 0..16 {
            if self.plain(&out[start..]) {
                return Ok(());
            }
            next.clear();
            match self.one_pass(&out[start..], &mut next) {
                Ok(true) if next[..] != out[start..] => {
                    out.truncate(start);
                    out.extend_from_slice(&next);
                }
                Ok(_) => return Ok(()),
                Err(e) => {
                    out.truncate(start);
                    return Err(e);
                }
            }
        }
        Ok(())
    }

    /// The canonical form of `input`, or why it has none.
    pub fn canonicalize(&self, input: &str) -> Result<String, CanonicalError> {
        self.canonicalize_bytes(input.as_bytes())
    }

    /// Every rule, step by step (no fast check in the first pass), as a
    /// string, settled as [`Self::canonicalize_into_if_changed`] settles.
    #[cfg(test)]
    fn canonicalize_slow(&self, input: &str) -> Result<String, CanonicalError> {
        let mut out = Vec::new();
        self.canonicalize_slow_into(input, &mut out)?;
        self.settle(&mut out, 0)?;
        String::from_utf8(out).map_err(|_| CanonicalError::NotUtf8)
    }

    /// Every rule, step by step (no fast check): appends the canonical form
    /// of `input` to `out`, or appends nothing and says why it has none.
    fn canonicalize_slow_into(&self, input: &str, out: &mut Vec<u8>) -> Result<(), CanonicalError> {
        // 1. Whitespace: any before the scheme; after the URL, only what
        //    the URL standard trims (C0 controls and space): a no-break
        //    space ending a query value is part of it (a browser sends
        //    `%C2%A0`).
        let trimmed = input.trim_start().trim_end_matches(|c: char| c <= ' ');
        if trimmed.is_empty() {
            return Err(CanonicalError::Empty);
        }
        let cleaned;
        let text = if trimmed.bytes().any(|b| matches!(b, b'\t' | b'\r' | b'\n')) {
            cleaned = trimmed.replace(['\t', '\r', '\n'], "");
            cleaned.as_str()
        } else {
            trimmed
        };
        // 2. Parse (also lowercases scheme and host, applies IDNA, drops the
        //    default port, resolves dot segments, makes an empty path "/").
        let url = Url::parse(text).map_err(|e| CanonicalError::Parse {
            reason: e.to_string(),
        })?;
        let scheme = url.scheme();
        if scheme != "http" && scheme != "https" {
            return Err(CanonicalError::UnsupportedScheme {
                scheme: scheme.to_string(),
            });
        }
        // 3. Host: trailing dots; 4. userinfo is never copied.
        let host = url.host_str().unwrap_or("");
        let query = url.query().map(str::as_bytes);
        let parts = (host.as_bytes(), url.port(), url.path().as_bytes(), query);
        self.emit(scheme.as_bytes(), parts, out)
    }

    /// Rules 3 to 9 from the parts of a parsed URL, appended to `out`
    /// (nothing is appended on an error). `scheme` and the parts (host,
    /// port, path, query) are as the WHATWG parser gives them: host
    /// lowercased, default port dropped, dot segments resolved; a host in
    /// another case is lowercased here.
    fn emit(
        &self,
        scheme: &[u8],
        parts: Parts<'_>,
        out: &mut Vec<u8>,
    ) -> Result<(), CanonicalError> {
        let (mut host, port, path, query) = parts;
        let mut bare = host;
        while let [rest @ .., b'.'] = bare {
            bare = rest;
        }
        // A host whose last label is a number is an IPv4 address to the
        // parser (which rewrites it, or refuses it): `0x19..` is a name,
        // `0x19` the address 0.0.0.25. Its dots stay.
        if !ends_in_number(bare) {
            host = bare;
        }
        if host.is_empty() {
            return Err(CanonicalError::NoHost);
        }
        while self.drop_www && strips_www(host) {
            host = &host[4..];
        }
        out.extend_from_slice(scheme);
        out.extend_from_slice(b"://");
        out.extend(host.iter().map(u8::to_ascii_lowercase));
        if let Some(port) = port {
            out.push(b':');
            push_decimal(port, out);
        }
        // 5. Path, 6. percent-encoding.
        let path_start = out.len();
        if path.iter().all(|&c| FAST_PATH[usize::from(c)]) {
            // What normalize_path would write: no `%`, no `;`, every byte kept.
            out.extend_from_slice(path);
        } else {
            normalize_path(path, out);
        }
        if out.len() == path_start {
            out.push(b'/');
        }
        while self.drop_trailing_slash && out.len() > path_start + 1 && out.ends_with(b"/") {
            out.pop();
        }
        // 7. Query, 8. session ids, tracking.
        if let Some(query) = query {
            if self.query_is_canonical(query) {
                // What push_query would write, without splitting and sorting.
                out.push(b'?');
                out.extend_from_slice(query);
            } else {
                self.push_query(query, out);
            }
        }
        // 9. The fragment is never copied.
        Ok(())
    }

    /// Appends the canonical form of a URL of the simple shape
    /// [`Simple::read`] accepts: its parts are what the WHATWG parser would
    /// give (the host only needs ASCII lowercasing), so this is the full
    /// rules without the parser.
    fn rewrite(&self, u: &Simple<'_>, out: &mut Vec<u8>) -> Result<(), CanonicalError> {
        let scheme: &[u8] = if u.https { b"https" } else { b"http" };
        self.emit(scheme, (u.host, u.port, u.path, u.query), out)
    }

    /// [`Self::rewrite`] as a string, settled.
    #[cfg(test)]
    fn rewrite_string(&self, u: &Simple<'_>) -> Result<String, CanonicalError> {
        let mut out = Vec::new();
        self.rewrite(u, &mut out)?;
        self.settle(&mut out, 0)?;
        String::from_utf8(out).map_err(|_| CanonicalError::NotUtf8)
    }

    /// Whether the URL read by [`Simple::read`] is its own canonical form.
    fn is_canonical(&self, u: &Simple<'_>) -> bool {
        let www = self.drop_www && strips_www(u.host);
        let slash = self.drop_trailing_slash && u.path.len() > 1 && u.path.ends_with(b"/");
        let rewritten = u.port_written || u.fragment || u.path.is_empty() || www || slash;
        u.scheme_lower
            && u.host_lower
            && !rewritten
            && u.query.is_none_or(|q| self.query_is_canonical(q))
    }

    /// Whether `b` is already canonical, decided in a few passes over its
    /// bytes (`false` also when unsure). It accepts a subset of what
    /// [`Simple::read`] reads and [`Self::is_canonical`] accepts: `http://`
    /// or `https://` in lowercase, a host as [`scan::plain_host`] wants it,
    /// `/`, a path of [`FAST_PATH`] bytes with no `/.` (so no dot segment),
    /// and an optional query after the first `?`, which is also the last
    /// (see [`Self::query_is_canonical`]); no port, fragment, `%` or `;`.
    fn plain(&self, b: &[u8]) -> bool {
        let rest = if let Some(rest) = b.strip_prefix(b"https://") {
            rest
        } else if let Some(rest) = b.strip_prefix(b"http://") {
            rest
        } else {
            return false;
        };
        // The host ends at the first `/`: a port, a query or a fragment
        // before it is a byte plain_host refuses.
        let Some(h) = scan::find_byte(rest, b'/') else {
            return false;
        };
        let s = b.len() - rest.len();
        if !scan::plain_host(&b[s - 1..], h) || (self.drop_www && strips_www(&rest[..h])) {
            return false;
        }
        // The query starts after the last `?`; a `?` before it is a byte
        // plain_path refuses.
        let q = rest.iter().rposition(|&c| c == b'?').unwrap_or(rest.len());
        let path = &rest[h..q];
        if !scan::plain_path(&rest[h - 1..], path.len()) {
            return false;
        }
        if self.drop_trailing_slash && path.len() > 1 && path.ends_with(b"/") {
            return false;
        }
        rest.get(q + 1..)
            .is_none_or(|query| self.query_is_canonical(query))
    }

    /// Whether rules 6 to 8 (and tracking) leave `query` as it is: only
    /// bytes kept literal, no empty parameter, parameters sorted, none
    /// removed.
    fn query_is_canonical(&self, query: &[u8]) -> bool {
        if query.is_empty() || !query.iter().all(|&c| FAST_QUERY[usize::from(c)]) {
            return false;
        }
        let mut prev: Option<(&[u8], &[u8])> = None;
        for param in query.split(|&c| c == b'&') {
            let eq = param.iter().position(|&c| c == b'=').unwrap_or(param.len());
            let (name, value) = param.split_at(eq);
            if param.is_empty() || prev.is_some_and(|p| p > (name, value)) {
                return false;
            }
            if self.removes(name, (!value.is_empty()).then_some(value)) {
                return false;
            }
            prev = Some((name, value));
        }
        true
    }

    /// Rules 6 to 8 (and tracking) on a query: appends `?` and the
    /// parameters kept, normalized and sorted, or nothing when none is kept.
    fn push_query(&self, query: &[u8], out: &mut Vec<u8>) {
        // Normalized names and `=value`s one after another in `text`; each
        // parameter kept is the ranges of its name and value there.
        let mut text = Vec::with_capacity(query.len());
        let mut params: Vec<(Range<usize>, Range<usize>)> = Vec::new();
        for param in query.split(|&c| c == b'&').filter(|p| !p.is_empty()) {
            let (name, value) = match param.iter().position(|&c| c == b'=') {
                Some(i) => (&param[..i], Some(&param[i..])),
                None => (param, None),
            };
            let start = text.len();
            normalize_pct(name, QUERY_KEEP, &mut text);
            if self.removes(&text[start..], value) {
                text.truncate(start);
                continue;
            }
            let name = start..text.len();
            if let Some(value) = value {
                text.push(b'=');
                normalize_pct(&value[1..], QUERY_KEEP, &mut text);
            }
            params.push((name.clone(), name.end..text.len()));
        }
        if params.is_empty() {
            return;
        }
        let part = |(n, v): &(Range<usize>, Range<usize>)| (&text[n.clone()], &text[v.clone()]);
        params.sort_by(|a, b| part(a).cmp(&part(b)));
        out.push(b'?');
        for (i, p) in params.iter().enumerate() {
            if i > 0 {
                out.push(b'&');
            }
            let (n, v) = part(p);
            out.extend_from_slice(n);
            out.extend_from_slice(v);
        }
    }

    /// Whether a parameter (normalized name, raw `=value`) is a session id or
    /// a tracking parameter to remove.
    fn removes(&self, name: &[u8], value: Option<&[u8]>) -> bool {
        let is = |n: &str| name.eq_ignore_ascii_case(n.as_bytes());
        let starts = |p: &str| {
            name.get(..p.len())
                .is_some_and(|h| h.eq_ignore_ascii_case(p.as_bytes()))
        };
        // Every session id name starts with one of these letters.
        let session = matches!(
            name.first().map(u8::to_ascii_lowercase),
            Some(b'j' | b'p' | b'a' | b's')
        );
        if session && (is("jsessionid") || is("phpsessid") || starts("aspsessionid")) {
            return true;
        }
        if session && is("sid") {
            let v = value.map_or(&b""[..], |v| v.get(1..).unwrap_or(b""));
            if v.len() == 32 && v.iter().all(u8::is_ascii_hexdigit) {
                return true;
            }
        }
        self.drop_tracking
            && (starts("utm_")
                || TRACKING_PARAMS.iter().any(|t| is(t))
                || self.extra_tracking.iter().any(|t| is(t)))
    }

    /// Whether `s` is already its own canonical form under these rules,
    /// decided without the parser (`false` also when unsure): a test checks
    /// that every string accepted here is a fixed point of the full rules.
    #[cfg(test)]
    fn already_canonical(&self, s: &str) -> bool {
        Simple::read(s.as_bytes()).is_some_and(|u| self.is_canonical(&u))
    }
}

/// Whether the last label of `host` is a number as the URL standard's
/// IPv4 parser reads one (decimal digits, or `0x` and hex digits), which
/// makes the parser treat the whole host as an IPv4 address.
fn ends_in_number(host: &[u8]) -> bool {
    let last = host.rsplit(|&c| c == b'.').next().unwrap_or_default();
    if last.is_empty() {
        return false;
    }
    match last {
        [b'0', b'x' | b'X', hex @ ..] => hex.iter().all(u8::is_ascii_hexdigit),
        digits => digits.iter().all(u8::is_ascii_digit),
    }
}

/// Whether the www rule changes `host` (in any case).
fn strips_www(host: &[u8]) -> bool {
    host.get(..4)
        .is_some_and(|w| w.eq_ignore_ascii_case(b"www."))
        && host[4..].contains(&b'.')
}

/// A host, a port, a path and a query, as [`Canonicalizer::emit`] takes them.
type Parts<'a> = (&'a [u8], Option<u16>, &'a [u8], Option<&'a [u8]>);

/// Appends `n` in decimal.
fn push_decimal(n: u16, out: &mut Vec<u8>) {
    let mut digits = [0u8; 5];
    let mut rest = n;
    let mut i = digits.len();
    loop {
        i -= 1;
        digits[i] = b'0' + (rest % 10) as u8;
        rest /= 10;
        if rest == 0 {
            break;
        }
    }
    out.extend_from_slice(&digits[i..]);
}

/// A URL of the simple shape most crawled URLs have, read in one pass over
/// its bytes: `http://` or `https://` (any case), a host of ASCII letters,
/// digits, hyphens and dots, an optional port, a path and a query of bytes
/// that the WHATWG parser copies as they are, an optional fragment.
///
/// For such a URL the parser's scheme, host, port, path and query are
/// these parts with the scheme and host lowercased and a default port
/// dropped, which is what makes [`Canonicalizer::rewrite`] equal to the
/// full rules (a test compares the two on many generated URLs):
///
/// * host: labels of `[A-Za-z0-9-]`, none empty (so no trailing dot),
///   none starting or ending with `-`, none starting with `xn--` (no
///   punycode to check), the last one not starting with a digit (so never
///   an IPv4 address in any notation); IDNA maps such a host to its ASCII
///   lowercase and nothing else;
/// * port: 1 to 5 digits without a leading zero, at most 65535;
/// * path: empty, or `/` then bytes of [`FAST_PATH`] (no `%`, `;`, `\`,
///   whitespace, controls or non-ASCII; nothing the parser encodes) with no
///   `.` or `..` segment;
/// * query: bytes of [`FAST_QUERY`] (nothing the parser encodes);
/// * fragment: anything that is UTF-8 (it is dropped; the parser never
///   fails on a fragment).
struct Simple<'a> {
    https: bool,
    /// The scheme was written in lowercase.
    scheme_lower: bool,
    host: &'a [u8],
    /// The host was written in lowercase.
    host_lower: bool,
    /// The port, unless absent or the scheme's default.
    port: Option<u16>,
    /// A `:port` was written (default or not).
    port_written: bool,
    path: &'a [u8],
    query: Option<&'a [u8]>,
    /// A `#` was written.
    fragment: bool,
}

/// The index of the first byte of `b` that `stop` marks, or `b.len()`:
/// eight bytes a step without a branch between them.
fn find_stop(b: &[u8], stop: &[bool; 256]) -> usize {
    let mut i = 0;
    while let Some(chunk) = b.get(i..i + 8) {
        if chunk
            .iter()
            .fold(false, |any, &c| any | stop[usize::from(c)])
        {
            break;
        }
        i += 8;
    }
    let tail = &b[i..];
    i + tail
        .iter()
        .position(|&c| stop[usize::from(c)])
        .unwrap_or(tail.len())
}

/// Whether the `.` at `path[i]` starts a `.` or `..` segment.
fn is_dot_segment(path: &[u8], i: usize) -> bool {
    let ends = |j: usize| matches!(path.get(j), None | Some(b'/' | b'?' | b'#'));
    let after_slash = i.checked_sub(1).and_then(|j| path.get(j)) == Some(&b'/');
    after_slash && (ends(i + 1) || (path.get(i + 1) == Some(&b'.') && ends(i + 2)))
}

impl<'a> Simple<'a> {
    /// The parts of `b`, or `None` when `b` does not have the simple shape.
    fn read(b: &'a [u8]) -> Option<Simple<'a>> {
        let (https, scheme_len) = if b.get(..7)?.eq_ignore_ascii_case(b"http://") {
            (false, 7)
        } else if b.get(..8)?.eq_ignore_ascii_case(b"https://") {
            (true, 8)
        } else {
            return None;
        };
        let scheme_lower = b[..scheme_len].iter().all(|c| !c.is_ascii_uppercase());
        let rest = &b[scheme_len..];

        // Host, label by label (one branch a byte until a `.` or the end).
        let mut label_start = 0;
        let mut i = 0;
        let end = loop {
            i += find_stop(&rest[i..], &HOST_STOP);
            let label = &rest[label_start..i];
            let ok = label.first().is_some_and(|&c| c != b'-')
                && label.last().is_some_and(|&c| c != b'-')
                && !label
                    .get(..4)
                    .is_some_and(|h| h.eq_ignore_ascii_case(b"xn--"));
            if !ok {
                return None;
            }
            match rest.get(i) {
                Some(b'.') => {
                    i += 1;
                    label_start = i;
                }
                None | Some(b'/' | b'?' | b'#' | b':') => break i,
                Some(_) => return None,
            }
        };
        if rest[label_start].is_ascii_digit() {
            return None; // the last label: an IPv4 address in some notation
        }
        let host = &rest[..end];
        let host_lower = !host.iter().any(u8::is_ascii_uppercase);
        let mut rest = &rest[end..];

        // Port.
        let mut port = None;
        let mut port_written = false;
        if let Some(after) = rest.strip_prefix(b":") {
            let digits = after.iter().take_while(|c| c.is_ascii_digit()).count();
            if digits == 0 || digits > 5 || after[0] == b'0' {
                return None;
            }
            let value = after[..digits]
                .iter()
                .fold(0u32, |v, &c| v * 10 + u32::from(c - b'0'));
            let value = u16::try_from(value).ok()?;
            if !matches!(after.get(digits), None | Some(b'/' | b'?' | b'#')) {
                return None;
            }
            if value != if https { 443 } else { 80 } {
                port = Some(value);
            }
            port_written = true;
            rest = &after[digits..];
        }

        // Path: kept bytes, no dot segment (one branch a byte until a `.`
        // or the end).
        let mut i = 0;
        loop {
            i += find_stop(&rest[i..], &PATH_STOP);
            match rest.get(i) {
                Some(b'.') => {
                    if is_dot_segment(rest, i) {
                        return None;
                    }
                    i += 1;
                }
                None | Some(b'?' | b'#') => break,
                Some(_) => return None,
            }
        }
        let path = &rest[..i];
        let mut rest = &rest[i..];

        // Query.
        let mut query = None;
        if let Some(after) = rest.strip_prefix(b"?") {
            let end = find_stop(after, &QUERY_STOP);
            query = Some(&after[..end]);
            rest = &after[end..];
        }

        // Fragment: dropped, but the input must be UTF-8.
        let fragment = match rest.split_first() {
            None => false,
            Some((b'#', frag)) => {
                std::str::from_utf8(frag).ok()?;
                true
            }
            Some(_) => return None,
        };
        Some(Simple {
            https,
            scheme_lower,
            host,
            host_lower,
            port,
            port_written,
            path,
            query,
            fragment,
        })
    }
}

/// Characters kept literal in a path: `/` and the sub-delimiters `:@!$&'()*+,;=`.
const PATH_KEEP: &[u8] = b"/:@!$&'()*+,;=";
/// Characters kept literal inside a query parameter's name or value.
const QUERY_KEEP: &[u8] = b"/?:@!$'()*+,;=";

fn is_unreserved(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~')
}

/// A byte-indexed table: `true` for the unreserved characters and `extra`.
const fn table(extra: &[u8]) -> [bool; 256] {
    let mut t = [false; 256];
    let mut c = 0;
    while c < 256 {
        let b = c as u8;
        t[c] = b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~');
        c += 1;
    }
    let mut i = 0;
    while i < extra.len() {
        t[extra[i] as usize] = true;
        i += 1;
    }
    t
}

/// Bytes the fast check accepts in a path and in a query.
static FAST_PATH: [bool; 256] = table(b"/:@!$&'()*+,=");
static FAST_QUERY: [bool; 256] = table(b"&/?:@!$()*+,;=");
/// Bytes that end a query in [`Simple::read`]: those not in [`FAST_QUERY`].
static QUERY_STOP: [bool; 256] = stops(&FAST_QUERY, 0);
/// Bytes that end a run of path bytes in [`Simple::read`]: `.` (checked
/// for a dot segment) and every byte not in [`FAST_PATH`].
static PATH_STOP: [bool; 256] = stops(&FAST_PATH, b'.');
/// Bytes that end a run of host bytes in [`Simple::read`]: all but ASCII
/// letters, digits and `-`.
static HOST_STOP: [bool; 256] = {
    let mut t = [true; 256];
    let mut c = 0;
    while c < 256 {
        t[c] = !((c as u8).is_ascii_alphanumeric() || c == b'-' as usize);
        c += 1;
    }
    t
};

/// The bytes not in `keep`, plus `also` (unless 0).
const fn stops(keep: &[bool; 256], also: u8) -> [bool; 256] {
    let mut t = [true; 256];
    let mut c = 1;
    while c < 256 {
        t[c] = !keep[c] || c == also as usize;
        c += 1;
    }
    t
}

fn hex_value(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

fn push_encoded(b: u8, out: &mut Vec<u8>) {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    out.extend_from_slice(&[b'%', HEX[usize::from(b >> 4)], HEX[usize::from(b & 15)]]);
}

/// Rule 6 on one component: unreserved bytes literal, `keep` bytes as they
/// were written (literal or encoded), everything else encoded in uppercase.
fn normalize_pct(b: &[u8], keep: &[u8], out: &mut Vec<u8>) {
    let mut i = 0;
    while let Some(&c) = b.get(i) {
        if c == b'%' {
            let hi = b.get(i + 1).copied().and_then(hex_value);
            let lo = b.get(i + 2).copied().and_then(hex_value);
            if let (Some(hi), Some(lo)) = (hi, lo) {
                let v = hi << 4 | lo;
                if is_unreserved(v) {
                    out.push(v);
                } else {
                    push_encoded(v, out);
                }
                i += 3;
                continue;
            }
            push_encoded(b'%', out);
        } else if is_unreserved(c) || keep.contains(&c) {
            out.push(c);
        } else {
            push_encoded(c, out);
        }
        i += 1;
    }
}

/// Rules 5 and 6 on a parsed path: drops `;jsessionid=...` parameters
/// (up to the next `;` or `/`), then normalizes percent-encoding.
fn normalize_path(b: &[u8], out: &mut Vec<u8>) {
    const SESSION: &[u8] = b";jsessionid=";
    let mut start = 0;
    let mut i = 0;
    while i < b.len() {
        let hit = b
            .get(i..i + SESSION.len())
            .is_some_and(|w| w.eq_ignore_ascii_case(SESSION));
        if hit {
            normalize_pct(&b[start..i], PATH_KEEP, out);
            let end = (b.iter().skip(i + 1))
                .position(|&c| c == b';' || c == b'/')
                .map_or(b.len(), |p| i + 1 + p);
            start = end;
            i = end;
        } else {
            i += 1;
        }
    }
    normalize_pct(&b[start..], PATH_KEEP, out);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percent_normalization_of_one_component() {
        let n = |s: &str| {
            let mut o = Vec::new();
            normalize_pct(s.as_bytes(), PATH_KEEP, &mut o);
            String::from_utf8(o).unwrap()
        };
        assert_eq!(n("/a%7eb%2fc%2Fd"), "/a~b%2Fc%2Fd");
        assert_eq!(n("/%zz%4"), "/%25zz%254");
        assert_eq!(n("/a^b|c"), "/a%5Eb%7Cc");
        assert_eq!(n("%"), "%25");
    }

    /// Pieces of URLs, tricky ones included, for the randomized tests.
    const PIECES: &[&str] = &[
        "http://",
        "https://",
        "HTTP://",
        "www.",
        "a",
        "b",
        "Z",
        "0",
        "9",
        "xn--",
        "-",
        ".",
        "..",
        "/",
        "/.",
        "/..",
        "?",
        "&",
        "=",
        "#",
        "%",
        "%2e",
        "%41",
        ";",
        ";jsessionid=",
        ":",
        ":80",
        "@",
        "'",
        "!",
        "~",
        "_",
        " ",
        "\\",
        "utm_x",
        "sid",
        "phpsessid",
        "é",
        "com",
        "0x1",
        "1.2",
        "gclid",
        "x=1",
        "a=",
        "b=2",
    ];

    /// The rule sets the randomized tests run: default, strict, and each
    /// opt-in rule alone.
    fn rule_sets() -> [Canonicalizer; 5] {
        [
            Canonicalizer::new(),
            Canonicalizer::strict(),
            Canonicalizer::new().drop_www(true),
            Canonicalizer::new().drop_trailing_slash(true),
            Canonicalizer::new().tracking_param("b"),
        ]
    }

    /// A xorshift generator of pseudo-random numbers from `seed`.
    pub(super) fn xorshift(mut seed: u64) -> impl FnMut() -> u64 {
        move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        }
    }

    /// Every string the fast check accepts is a fixed point of the full
    /// rules (checked on random strings built from tricky pieces).
    #[test]
    fn fast_path_accepts_only_fixed_points() {
        let rules = [
            Canonicalizer::new(),
            Canonicalizer::strict(),
            Canonicalizer::new().tracking_param("b"),
        ];
        let mut next = xorshift(0x9e37_79b9_7f4a_7c15);
        let mut accepted = 0;
        for _ in 0..400_000 {
            let r = next();
            let mut s = String::from(if r & 1 == 0 { "http://" } else { "https://" });
            s.push_str(["", "a.com/", "www.b.org/", "x.y/p?"][(r >> 1) as usize % 4]);
            for _ in 0..(r >> 8) % 12 {
                s.push_str(PIECES[(next() % PIECES.len() as u64) as usize]);
            }
            for c in &rules {
                if c.already_canonical(&s) {
                    accepted += 1;
                    let full = c.canonicalize_slow(&s);
                    assert_eq!(full.as_deref(), Ok(s.as_str()), "{s:?} {c:?}");
                }
            }
        }
        assert!(
            accepted > 10_000,
            "only {accepted} accepted: the test checks too little"
        );
    }

    /// Every string [`Canonicalizer::plain`] accepts is one the one-pass
    /// reader reads and finds canonical, and a fixed point of the full rules
    /// (parser included); checked on random strings of tricky pieces, for
    /// several rule sets. Most strings near the common shape are accepted.
    #[test]
    fn plain_accepts_only_what_the_full_rules_keep() {
        const MORE: &[&str] = &[
            "/", "/", "/", "a", "b", "-", "--", ".", "?", "&", "=", "x=1", "b=2", "~", "_", "A",
            "/.a", "a.", ":", "@", "'", "%41", ";", "#", "é", "\\", " ", "\t",
        ];
        // The first pieces of MORE most of the time (the common shape),
        // any piece sometimes.
        let pieces: Vec<&str> = MORE.iter().chain(PIECES).copied().collect();
        let rules = rule_sets();
        let mut next = xorshift(0x853c_49e6_748f_ea9b);
        let piece = move |r: u64| {
            let n = if r.is_multiple_of(4) {
                pieces.len()
            } else {
                16
            };
            pieces[(r >> 2) as usize % n]
        };
        let (mut tried, mut accepted) = (0, 0);
        for _ in 0..300_000 {
            let r = next();
            let mut s = String::from(["http://", "https://", "HTTP://"][(r % 3) as usize]);
            s.push_str(
                [
                    "a.com/",
                    "www.b.org/",
                    "x-y.z/p?",
                    "a-.b/",
                    "0.a/",
                    "a.0/",
                    "",
                ][(r >> 2) as usize % 7],
            );
            for _ in 0..(r >> 8) % 24 {
                s.push_str(piece(next()));
            }
            for c in &rules {
                tried += 1;
                if !c.plain(s.as_bytes()) {
                    continue;
                }
                accepted += 1;
                let simple = Simple::read(s.as_bytes());
                assert!(simple.is_some_and(|u| c.is_canonical(&u)), "{s:?} {c:?}");
                assert_eq!(
                    c.canonicalize_slow(&s).as_deref(),
                    Ok(s.as_str()),
                    "{s:?} {c:?}"
                );
            }
        }
        assert!(
            accepted > tried / 20,
            "only {accepted} of {tried} accepted: the test checks too little"
        );
    }

    /// The one-pass reader's rewrite agrees with the full rules (parser
    /// included) on every string it accepts, and so do `canonicalize` and
    /// `canonicalize_into`; checked on random strings of tricky pieces.
    #[test]
    fn simple_rewrite_agrees_with_the_full_rules() {
        const HOSTS: &[&str] = &[
            "a.com",
            "Example.COM",
            "WWW.b.org",
            "www.com",
            "x.Y",
            "a-b.c",
            "XN--a.b",
            "xN--bcher-kva.example",
            "a.1b",
            "a.B1",
            "1.2.3.4",
            "0x7F.1",
            "a..b",
            "a.",
            ".a",
            "-a.b",
            "a-.b",
            "a.b-",
            "",
            "A",
            "ab--c.d",
            "www.WWW.x",
            "w.0x",
            "localhost",
        ];
        const MORE: &[&str] = &[
            "/",
            "?",
            ":443",
            ":8080",
            ":080",
            ":0",
            ":65535",
            ":65536",
            ":123456",
            "\\t",
            "utm_x=1",
            "sid=0123456789abcdef0123456789ABCDEF",
            "phpsessid=q",
            "JSESSIONID=x",
            "aspsessionidx=1",
            "A=1",
            "?a=1&b=2",
            "?b=2&a=1",
            "&&",
            "#frag",
            "#a b",
            "#é",
            "*",
            "+",
            "$",
            ",",
            "(",
            ")",
            "[",
            "]",
            "{",
            "|",
            "^",
            "`",
            "\"",
            "<",
            ">",
            "\u{0}",
            "\u{7f}",
            "\r\n",
            "?&",
            "==",
            "/./",
            "/../",
        ];
        let pieces: Vec<&str> = PIECES.iter().chain(MORE).copied().collect();
        let rules = rule_sets();
        let mut next = xorshift(0x2545_f491_4f6c_dd1d);
        let (mut read, mut rewritten) = (0, 0);
        for _ in 0..1_000_000 {
            let r = next();
            let mut s = String::from(
                [
                    "http://", "https://", "HTTP://", "HttpS://", "http:/", "ftp://",
                ][(r % 6) as usize],
            );
            s.push_str(HOSTS[(r >> 3) as usize % HOSTS.len()]);
            for _ in 0..(r >> 16) % 8 {
                s.push_str(pieces[(next() % pieces.len() as u64) as usize]);
            }
            let Some(simple) = Simple::read(s.as_bytes()) else {
                continue;
            };
            read += 1;
            for c in &rules {
                let full = c.canonicalize_slow(&s);
                let fast = if c.is_canonical(&simple) {
                    Ok(s.clone())
                } else {
                    rewritten += 1;
                    c.rewrite_string(&simple)
                };
                assert_eq!(fast, full, "{s:?} {c:?}");
                assert_eq!(c.canonicalize(&s), full, "{s:?} {c:?}");
                let mut out = b"x".to_vec();
                let into = c.canonicalize_into(s.as_bytes(), &mut out);
                assert_eq!(
                    into.map(|()| out),
                    full.map(|f| format!("x{f}").into_bytes())
                );
            }
        }
        assert!(
            read > 50_000 && rewritten > 50_000,
            "only {read} read, {rewritten} rewritten: the test checks too little"
        );
    }

    /// A fragment that is not UTF-8 is an error, as on the full path.
    #[test]
    fn bytes_that_are_not_utf8_are_refused_on_every_path() {
        let c = Canonicalizer::new();
        for input in [
            &b"http://a.com/#\xff"[..],
            b"HTTP://A.com/x#\xc3",
            b"http://a.com/\xff",
        ] {
            let mut out = Vec::new();
            assert_eq!(
                c.canonicalize_into(input, &mut out),
                Err(CanonicalError::NotUtf8)
            );
            assert!(out.is_empty());
        }
    }
}
