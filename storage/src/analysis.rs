//! The one text analysis of catalogue search: how a text becomes searchable words. The index
//! ([`crate::search`], tokenizer [`WordTokenizer`]), the query (`search:` arguments and
//! `catalogueSearch`, [`words`]), the limit on query words (`graphql.maxSearchTerms`) and the
//! highlighted snippets all go through [`analyze`], so a text matches the same way everywhere.
//!
//! **The rule.** A word is a maximal run of letters, digits and combining marks (Unicode
//! `Alphabetic`/`Numeric` and `Mn`/`Mc`/`Me`). Its searchable form is its compatibility
//! decomposition (NFKD) without combining marks, lower-cased: `Á`, `á` and `a` + U+0301 are all
//! `a`, `ﬁ` is `fi`, a full-width `Ａ` is `a`. A character that the decomposition turns into a
//! separator (`½` → `1⁄2`) splits the word there. A searchable form longer than
//! [`MAX_WORD_BYTES`] is cut to that many bytes (at a character boundary), so a long identifier
//! still matches itself. A text with no letter or digit has no word.
//!
//! Changing this rule changes what the index holds: bump `PAYLOAD_PREFIX` in [`crate::search`]
//! so that existing indexes are rebuilt on open.

use std::ops::Range;
use tantivy::tokenizer::{Token, TokenStream, Tokenizer};
use unicode_normalization::char::is_combining_mark;
use unicode_normalization::UnicodeNormalization;

/// Longest searchable form of a word, in bytes (UTF-8); longer ones are cut.
pub const MAX_WORD_BYTES: usize = 64;

/// One word of a text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Word {
    /// Where the word is in the analysed text (bytes). Words that one run of the text splits
    /// into (`½` → `1`, `2`) share the run's span.
    pub span: Range<usize>,
    /// Its searchable form (see the module documentation).
    pub text: String,
}

/// The words of `text`, in order (see the module documentation for the rule).
pub fn analyze(text: &str) -> Vec<Word> {
    let mut out = Vec::new();
    let mut start = None;
    for (i, c) in text.char_indices() {
        match (is_word_char(c), start) {
            (true, None) => start = Some(i),
            (false, Some(s)) => {
                fold_run(&text[s..i], s, &mut out);
                start = None;
            }
            _ => {}
        }
    }
    if let Some(s) = start {
        fold_run(&text[s..], s, &mut out);
    }
    out
}

/// The searchable forms of the words of `text`, in order.
pub fn words(text: &str) -> Vec<String> {
    analyze(text).into_iter().map(|w| w.text).collect()
}

fn is_word_char(c: char) -> bool {
    c.is_alphanumeric() || is_combining_mark(c)
}

/// Appends the searchable words of one run of word characters starting at byte `at`.
fn fold_run(run: &str, at: usize, out: &mut Vec<Word>) {
    let span = at..at + run.len();
    let mut word = String::new();
    let mut push = |word: &mut String| {
        if !word.is_empty() {
            out.push(Word { span: span.clone(), text: std::mem::take(word) });
        }
    };
    for c in run.nfkd().filter(|c| !is_combining_mark(*c)) {
        for l in c.to_lowercase().filter(|l| !is_combining_mark(*l)) {
            if !l.is_alphanumeric() {
                push(&mut word);
            } else if word.len() + l.len_utf8() <= MAX_WORD_BYTES {
                word.push(l);
            }
        }
    }
    push(&mut word);
}

/// The tantivy tokenizer of the catalogue's word fields: the words of [`analyze`], positions
/// counted from 0.
#[derive(Clone, Copy, Debug, Default)]
pub struct WordTokenizer;

/// The tokens of one text ([`WordTokenizer`]).
pub struct WordStream {
    words: std::vec::IntoIter<Word>,
    token: Token,
    started: bool,
}

impl Tokenizer for WordTokenizer {
    type TokenStream<'a> = WordStream;

    fn token_stream<'a>(&'a mut self, text: &'a str) -> WordStream {
        WordStream { words: analyze(text).into_iter(), token: Token::default(), started: false }
    }
}

impl TokenStream for WordStream {
    fn advance(&mut self) -> bool {
        let Some(word) = self.words.next() else { return false };
        let position = if self.started { self.token.position + 1 } else { 0 };
        self.started = true;
        self.token = Token { offset_from: word.span.start, offset_to: word.span.end, position, text: word.text, position_length: 1 };
        true
    }

    fn token(&self) -> &Token {
        &self.token
    }

    fn token_mut(&mut self) -> &mut Token {
        &mut self.token
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accents_in_any_form_and_case_fold_to_the_same_word() {
        for text in ["á", "Á", "a\u{0301}", "A\u{0301}", "a"] {
            assert_eq!(words(text), ["a"], "{text:?}");
        }
        assert_eq!(words("Café Crème"), ["cafe", "creme"]);
        assert_eq!(words("Straße"), ["straße"]);
        assert_eq!(words("ﬁle Ａpi"), ["file", "api"]);
        assert_eq!(words("İstanbul"), ["istanbul"]);
        assert_eq!(words("Привет мир"), ["привет", "мир"]);
    }

    #[test]
    fn separators_punctuation_and_symbols_are_not_words() {
        for text in ["", "   ", "*", "?", "\"", "🚀🔥", "\u{0301}", "-- / --", "\u{200b}"] {
            assert!(words(text).is_empty(), "{text:?}: {:?}", words(text));
        }
        assert_eq!(words("payments-api/v2 ✓ order_2"), ["payments", "api", "v2", "order", "2"]);
        // A compatibility decomposition that yields a separator splits the word.
        assert_eq!(words("½"), ["1", "2"]);
    }

    #[test]
    fn long_words_are_cut_at_a_character_boundary_and_still_match_themselves() {
        let long = "x".repeat(100);
        assert_eq!(words(&long), ["x".repeat(MAX_WORD_BYTES)]);
        let accented = "é".repeat(100);
        let w = words(&accented);
        assert_eq!(w, ["e".repeat(MAX_WORD_BYTES)]);
        let wide = "日".repeat(30);
        let w = words(&wide);
        assert_eq!(w[0].chars().count(), MAX_WORD_BYTES / 3);
        assert!(w[0].len() <= MAX_WORD_BYTES);
    }

    #[test]
    fn spans_point_at_the_original_text() {
        let text = "Zürich a\u{0301}b ½";
        let spans: Vec<(&str, String)> = analyze(text).into_iter().map(|w| (&text[w.span], w.text)).collect();
        assert_eq!(
            spans,
            [("Zürich", "zurich".to_string()), ("a\u{0301}b", "ab".to_string()), ("½", "1".to_string()), ("½", "2".to_string())]
        );
    }

    #[test]
    fn the_tokenizer_yields_the_words_with_positions() {
        let mut tokenizer = WordTokenizer;
        let mut stream = tokenizer.token_stream("Ünïcode API, v2");
        let mut tokens = Vec::new();
        while let Some(t) = stream.next() {
            tokens.push((t.text.clone(), t.position, t.offset_from, t.offset_to));
        }
        assert_eq!(tokens, [("unicode".to_string(), 0, 0, 9), ("api".to_string(), 1, 10, 13), ("v2".to_string(), 2, 15, 17)]);
    }
}
