//! Property tests.
#[test]
fn dbg_print() {
    let body = super::data("requests/codex.json");
    let (out, _) = crate::protocol::translate::translate_request(crate::protocol::translate::Format::Responses, crate::protocol::translate::Format::Chat, &body, &Default::default(), "m").unwrap();
    println!("{}", serde_json::to_string_pretty(&super::json(&out)).unwrap());
    let (out, _) = crate::protocol::translate::translate_request(crate::protocol::translate::Format::Responses, crate::protocol::translate::Format::Messages, &body, &Default::default(), "m").unwrap();
    println!("{}", serde_json::to_string_pretty(&super::json(&out)).unwrap());
}
