//! A local estimate of a request's input tokens, for `count_tokens` on a
//! provider that cannot count.
//!
//! It is an estimate, and answers labelled as one should say so. No
//! tokenizer is bundled; the heuristic is the one tokenizers average out to
//! on code and English: about four characters per token for ASCII text and
//! about one token per character for other scripts (CJK runs close to one),
//! over everything the provider will read: system prompt, messages, tool
//! calls and results, reasoning, and the tool definitions with their
//! schemas (counting those matters: leaving them out undercounts a coding
//! agent's request by thousands of tokens). Each message costs four tokens
//! of framing, each tool ten; an image counts as its worst case under
//! Anthropic's formula (1600 tokens), a PDF as 1500 tokens per estimated page.

use super::message::{Media, Part, Request, Tool, ToolKind};

const PER_MESSAGE: u64 = 4;
const PER_TOOL: u64 = 10;
const IMAGE: u64 = 1600;
const PDF_PAGE: u64 = 1500;
/// Bytes of a PDF per page, for a page count from the size alone.
const PDF_PAGE_BYTES: u64 = 60_000;
const AUDIO: u64 = 500;

/// Tokens of `text` by the heuristic above.
pub fn text_tokens(text: &str) -> u64 {
    let (mut ascii, mut other) = (0u64, 0u64);
    for c in text.chars() {
        if c.is_ascii() {
            ascii += 1;
        } else {
            other += 1;
        }
    }
    ascii.div_ceil(4) + other
}

/// The estimated input tokens of `req`. Never fails, never zero for a
/// request with content.
pub fn estimate_input_tokens(req: &Request) -> u64 {
    let system: u64 = req.system.iter().map(part).sum::<u64>() + if req.system.is_empty() { 0 } else { PER_MESSAGE };
    let turns: u64 = req.turns.iter().map(|t| PER_MESSAGE + t.parts.iter().map(part).sum::<u64>()).sum();
    let tools: u64 = req.tools.iter().map(tool).sum();
    system + turns + tools
}

fn part(p: &Part) -> u64 {
    match p {
        Part::Text { text, .. } | Part::Refusal { text } => text_tokens(text),
        Part::Reasoning { text, .. } => text_tokens(text),
        Part::Image { .. } => IMAGE,
        Part::Document { source: Media::Text(t), title, .. } => {
            text_tokens(t) + title.as_deref().map_or(0, text_tokens)
        }
        Part::Document { source: Media::Base64 { data, .. }, .. } => {
            let bytes = (data.len() as u64) * 3 / 4;
            bytes.div_ceil(PDF_PAGE_BYTES).max(1) * PDF_PAGE
        }
        Part::Document { .. } => PDF_PAGE,
        Part::Audio { .. } => AUDIO,
        Part::ToolCall { name, args, .. } => text_tokens(name) + text_tokens(args) + PER_MESSAGE,
        Part::ToolResult { content, .. } => PER_MESSAGE + content.iter().map(part).sum::<u64>(),
    }
}

fn tool(t: &Tool) -> u64 {
    let body = match &t.kind {
        ToolKind::Function { schema, .. } => text_tokens(&schema.to_string()),
        ToolKind::Custom { format } => format.as_ref().map_or(0, |f| text_tokens(&f.to_string())),
        ToolKind::Hosted { raw, .. } => text_tokens(&raw.to_string()),
    };
    PER_TOOL + text_tokens(&t.name) + t.description.as_deref().map_or(0, text_tokens) + body
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::translate::message::{Role, Turn};

    #[test]
    fn text_counts_by_script() {
        assert_eq!(text_tokens(""), 0);
        assert_eq!(text_tokens("abcd"), 1);
        assert_eq!(text_tokens("abcde"), 2);
        assert_eq!(text_tokens("日本語"), 3);
    }

    #[test]
    fn every_part_of_a_request_counts() {
        let base =
            Request { turns: vec![Turn::new(Role::User, vec![Part::text("hello there")])], ..Request::default() };
        let small = estimate_input_tokens(&base);
        assert_eq!(small, PER_MESSAGE + 3);
        let mut more = base.clone();
        more.system.push(Part::text("x".repeat(400)));
        assert_eq!(estimate_input_tokens(&more), small + 100 + PER_MESSAGE);
        let mut image = base.clone();
        image.turns[0].parts.push(Part::Image {
            source: Media::Url("https://x/y.png".into()),
            detail: None,
            cache: None,
        });
        assert_eq!(estimate_input_tokens(&image), small + IMAGE);
        assert_eq!(estimate_input_tokens(&Request::default()), 0);
    }
}
