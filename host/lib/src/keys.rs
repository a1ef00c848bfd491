//! Store keys as the stores range over them.

/// The smallest byte string above every key that starts with `prefix` (none: no bound), so a
/// prefix scan is a key range.
pub(crate) fn prefix_end(prefix: &[u8]) -> Option<Vec<u8>> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < 0xff {
            end.push(last + 1);
            return Some(end);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_prefix_ends_above_every_key_it_starts() {
        assert_eq!(prefix_end(b"m/"), Some(b"m0".to_vec()));
        assert_eq!(prefix_end(b"a\xff"), Some(b"b".to_vec()));
        assert_eq!(prefix_end(b"\xff\xff"), None);
        assert_eq!(prefix_end(b""), None);
    }
}
