//! Byte scans of [`Canonicalizer::plain`](super::Canonicalizer): the
//! checks that recognize an already canonical URL, written to run many
//! bytes a step (word-at-a-time arithmetic, or fixed-size windows the
//! compiler turns into vector instructions) rather than one branch a byte.

/// Eight copies of the byte `x`.
const fn splat(x: u8) -> u64 {
    u64::from_ne_bytes([x; 8])
}

/// The high bit of every byte of `w` that is zero, and no other bit (no
/// carry crosses a byte: `(x & 0x7f) + 0x7f` stays below 0x100).
fn zero_bytes(w: u64) -> u64 {
    const LOW7: u64 = splat(0x7f);
    !(((w & LOW7) + LOW7) | w) & !LOW7
}

/// The index of the first `x` in `b`, eight bytes a step.
pub(super) fn find_byte(b: &[u8], x: u8) -> Option<usize> {
    let mut i = 0;
    while let Some(word) = b.get(i..i + 8) {
        let w = u64::from_le_bytes(word.try_into().expect("8 bytes"));
        let z = zero_bytes(w ^ splat(x));
        if z != 0 {
            return Some(i + z.trailing_zeros() as usize / 8);
        }
        i += 8;
    }
    b[i..].iter().position(|&c| c == x).map(|p| i + p)
}

/// `FIRST[n][k]`: whether `k < n` (a mask loaded in one step).
static FIRST: [[bool; 16]; 17] = {
    let mut t = [[false; 16]; 17];
    let mut n = 0;
    while n <= 16 {
        let mut k = 0;
        while k < n {
            t[n][k] = true;
            k += 1;
        }
        n += 1;
    }
    t
};

/// Whether `bad(b[j - 1], b[j])` holds for some `j` in `1..=n` (`b` has
/// more than `n` bytes). Sixteen pairs a step, in windows of 17 bytes that
/// the compiler turns into vector instructions: pairs past `n` are masked
/// out, and a window that would run past the end of `b` is moved back to
/// end with it (looking again at pairs already looked at). One pair at a
/// time when `b` is shorter than a window.
#[inline(always)]
fn any_pair(b: &[u8], n: usize, bad: impl Fn(u8, u8) -> bool) -> bool {
    let Some(last) = b.len().checked_sub(17) else {
        return b[..=n].windows(2).any(|w| bad(w[0], w[1]));
    };
    let mut i = 0;
    while i < n {
        let start = i.min(last);
        let w = &b[start..start + 17];
        let mask = &FIRST[(n - start).min(16)];
        let mut v = [false; 16];
        for (k, v) in v.iter_mut().enumerate() {
            *v = bad(w[k], w[k + 1]) & mask[k];
        }
        if v.iter().fold(false, |any, &v| any | v) {
            return true;
        }
        i = start + 16;
    }
    false
}

/// Whether `c` is `-`, `.`, `/` or a digit (one range).
fn dash_dot_slash_digit(c: u8) -> bool {
    c.wrapping_sub(b'-') <= b'9' - b'-'
}

/// Whether `c` is `-`, `.` or `/`.
fn dash_dot_slash(c: u8) -> bool {
    c.wrapping_sub(b'-') <= b'/' - b'-'
}

/// Whether `b[1..=h]` is a host that `Simple::read` reads, written in
/// lowercase, where `b[0]` and `b[h + 1]` are the `/`s around it: labels
/// of `a-z`, `0-9` and `-`, none empty, none starting or ending with `-`,
/// the last one not starting with a digit (so not an IPv4 address in any
/// notation). A `--` anywhere is refused too (so no `xn--` label).
#[inline]
pub(super) fn plain_host(b: &[u8], h: usize) -> bool {
    // Every pair of `-`, `.` and `/` is an empty label, a label starting or
    // ending with `-`, or a `--`; the `/`s bound the first and last labels.
    let bad = |prev: u8, c: u8| {
        !(dash_dot_slash_digit(c) | c.is_ascii_lowercase())
            | (dash_dot_slash(prev) & dash_dot_slash(c))
    };
    if h == 0 || any_pair(b, h + 1, bad) {
        return false;
    }
    let host = &b[1..=h];
    let last_label = host.iter().rposition(|&c| c == b'.').map_or(0, |i| i + 1);
    !host[last_label].is_ascii_digit()
}

/// Whether `c` is not a byte of `FAST_PATH` (a test compares the two):
/// every byte but `!`, `$`, `&` to `:`, `=`, `@` to `Z`, `_`, `a` to `z`
/// and `~`. Comparisons, not a table, so that a window of them becomes
/// vector instructions.
fn path_byte_bad(c: u8) -> bool {
    !((c == b'!')
        | (c == b'$')
        | (c.wrapping_sub(b'&') <= b':' - b'&')
        | (c == b'=')
        | (c.wrapping_sub(b'@') <= b'Z' - b'@')
        | (c == b'_')
        | (c.wrapping_sub(b'a') <= b'z' - b'a')
        | (c == b'~'))
}

/// Whether `b[1..=n]` is a path of `FAST_PATH` bytes with no `.` after a
/// `/` (so no dot segment); `b[0]`, the byte before it, is only looked at
/// as the one before `b[1]`.
#[inline]
pub(super) fn plain_path(b: &[u8], n: usize) -> bool {
    !any_pair(b, n, |prev, c| {
        path_byte_bad(c) | ((prev == b'/') & (c == b'.'))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::canonical::tests::xorshift;
    use crate::canonical::FAST_PATH;

    /// Random strings of 0 to `max` bytes drawn from `alphabet`.
    fn strings(seed: u64, alphabet: &[u8], max: u64) -> impl Iterator<Item = Vec<u8>> + '_ {
        let mut next = xorshift(seed);
        std::iter::repeat_with(move || {
            let len = next() % (max + 1);
            (0..len)
                .map(|_| alphabet[(next() % alphabet.len() as u64) as usize])
                .collect()
        })
    }

    #[test]
    fn path_bytes_are_those_of_the_table() {
        for c in 0..=255u8 {
            assert_eq!(path_byte_bad(c), !FAST_PATH[usize::from(c)], "{c:#04x}");
        }
    }

    #[test]
    fn find_byte_finds_the_first() {
        let alphabet = [b'/', b'a', 0x80, 0xaf, b'/' ^ 0x80, 0, 0xff, b'.'];
        for b in strings(1, &alphabet, 40).take(100_000) {
            assert_eq!(
                find_byte(&b, b'/'),
                b.iter().position(|&c| c == b'/'),
                "{b:?}"
            );
        }
    }

    /// `any_pair` (windows, masks, a window moved back, the short case)
    /// agrees with a check of one pair at a time, for every `n`.
    #[test]
    fn any_pair_looks_at_every_pair_up_to_n() {
        let bad = |a: u8, b: u8| (a == b'x') & (b == b'y') | (b == b'z');
        for b in strings(2, b"xyzaxy", 60).take(20_000) {
            for n in 0..b.len() {
                let want = b[..=n].windows(2).any(|w| bad(w[0], w[1]));
                assert_eq!(any_pair(&b, n, bad), want, "{b:?} {n}");
            }
        }
    }

    /// `plain_host` against the rules it states, label by label.
    #[test]
    fn plain_host_follows_its_rules() {
        let want = |host: &[u8]| {
            let labels: Vec<&[u8]> = host.split(|&c| c == b'.').collect();
            let ok_label = |l: &&[u8]| {
                l.first().is_some_and(|&c| c != b'-')
                    && l.last().is_some_and(|&c| c != b'-')
                    && l.iter()
                        .all(|&c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'-')
            };
            labels.iter().all(ok_label)
                && !labels.last().unwrap()[0].is_ascii_digit()
                && !host.windows(2).any(|w| w == b"--")
        };
        for host in strings(3, b"ab9-.-xA_/:", 40).take(200_000) {
            let mut b = b"/".to_vec();
            b.extend_from_slice(&host);
            b.extend_from_slice(b"/path/after/the/host");
            let Some(h) = find_byte(&b[1..], b'/') else {
                continue;
            };
            if h != host.len() {
                continue;
            }
            assert_eq!(plain_host(&b, h), want(&host), "{host:?}");
        }
    }

    #[test]
    fn plain_path_matches_a_byte_by_byte_check() {
        let alphabet = b"/.aZ9?#%;~ \x80=&";
        for b in strings(4, alphabet, 60).take(100_000) {
            for n in 0..b.len() {
                let want = !b[..=n]
                    .windows(2)
                    .any(|w| !FAST_PATH[usize::from(w[1])] || w == b"/.");
                assert_eq!(plain_path(&b, n), want, "{b:?} {n}");
            }
        }
    }
}
