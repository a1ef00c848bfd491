//! Word-level text helpers every rule shares: which characters are CJK, and a text's words.

/// Han, kana and Hangul: scripts that do not separate words with spaces.
pub fn is_cjk(c: char) -> bool {
    matches!(c as u32,
        0x3040..=0x30FF    // Hiragana, Katakana
        | 0x3400..=0x4DBF  // CJK Extension A
        | 0x4E00..=0x9FFF  // CJK Unified Ideographs
        | 0xAC00..=0xD7AF  // Hangul syllables
        | 0xF900..=0xFAFF  // CJK Compatibility Ideographs
        | 0x20000..=0x2FFFF)
}

/// Lower-cased words, apostrophes kept (so "don't" is one word, with `’` read as `'`); CJK
/// characters separate words and are left out (rules match CJK phrases on the text itself).
pub fn words(text: &str) -> Vec<String> {
    text.to_lowercase()
        .split(|c: char| !(c.is_alphanumeric() || c == '\'' || c == '’') || is_cjk(c))
        .filter(|w| !w.is_empty())
        .map(|w| w.replace('’', "'"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_keep_apostrophes_and_drop_cjk() {
        assert_eq!(words("Don’t use MySQL, use PostgreSQL!"), ["don't", "use", "mysql", "use", "postgresql"]);
        assert_eq!(words("用户喜欢Python和Go"), ["python", "go"]);
        assert!(is_cjk('中') && is_cjk('カ') && is_cjk('한') && !is_cjk('，') && !is_cjk('a'));
    }
}
