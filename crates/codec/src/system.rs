//! System messages inside a conversation, for the dialects that keep system
//! instructions only before it (Gemini's `systemInstruction`, the system
//! prompt of a Bedrock model that takes no `system` message): their text
//! joins the system prompt, in order, where the model still reads it as an
//! instruction of the operator rather than as words of the user. What that
//! costs is said: the instruction's place (`Field::SystemMessage`,
//! `converted`, when a turn came before it), and what it held beyond text.

use std::borrow::Cow;

use switchyard_ir::{Block, DropReason, Dropped, Field, Message, Request, Role, TextBlock};

/// The system prompt and the conversation as a dialect without system
/// messages writes them: `request.system` with the text of every
/// `Role::System` message after it, and the other messages. Borrowed when
/// there is none (the common case copies nothing).
pub fn fold<'r>(request: &'r Request, dropped: &mut Vec<Dropped>) -> (Cow<'r, [TextBlock]>, Cow<'r, [Message]>) {
    if !request.messages.iter().any(|message| message.role == Role::System) {
        return (Cow::Borrowed(&request.system), Cow::Borrowed(&request.messages));
    }
    let mut system = request.system.clone();
    let mut messages = Vec::with_capacity(request.messages.len());
    for message in &request.messages {
        if message.role != Role::System {
            messages.push(message.clone());
            continue;
        }
        if !messages.is_empty() {
            Dropped::push_once(dropped, Field::SystemMessage, DropReason::Converted);
        }
        // The system prompt has no place for a message's own members nor for
        // its tool changes, whoever wrote them.
        message.extra.report_under("messages", dropped);
        for block in &message.content {
            match block {
                Block::Text(text) => system.push(text.clone()),
                Block::Unmodelled(block) => block.report(dropped),
                // A reader keeps nothing else in a system message.
                _ => Dropped::push_once(dropped, Field::MisplacedBlock, DropReason::Unsupported),
            }
        }
    }
    (Cow::Owned(system), Cow::Owned(messages))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use switchyard_ir::{Protocol, Unmodelled};

    #[test]
    fn system_messages_join_the_system_prompt_and_a_late_one_is_reported() {
        let mut late = Message::text(Role::System, "now answer in french");
        late.extra.insert(Protocol::Anthropic, "clear_at".into(), json!("next_user_message"));
        late.content.push(Block::Unmodelled(Unmodelled {
            origin: Protocol::Anthropic,
            path: "messages.content.tool_addition".into(),
            value: json!({"type": "tool_addition", "tool": {"type": "tool_reference", "name": "f"}}),
            beside: false,
        }));
        let request = Request {
            system: vec![TextBlock::new("be brief")],
            messages: vec![
                Message::text(Role::System, "the project is a gateway"),
                Message::text(Role::User, "hi"),
                late,
                Message::text(Role::User, "again"),
            ],
            ..Request::default()
        };
        let mut dropped = Vec::new();
        let (system, messages) = fold(&request, &mut dropped);
        let texts: Vec<&str> = system.iter().map(|t| t.text.as_str()).collect();
        assert_eq!(texts, ["be brief", "the project is a gateway", "now answer in french"]);
        assert_eq!(&*messages, &[Message::text(Role::User, "hi"), Message::text(Role::User, "again")]);
        let paths: Vec<String> =
            dropped.iter().map(|d| d.extra_path.clone().unwrap_or_else(|| d.field.as_str().to_owned())).collect();
        assert_eq!(paths, ["system_message", "messages.clear_at", "messages.content.tool_addition"]);
        assert_eq!(dropped[0].reason, DropReason::Converted);

        // A system message before the first turn moves nothing.
        let head = Request { messages: request.messages[..2].to_vec(), ..Request::default() };
        let mut dropped = Vec::new();
        let (system, _) = fold(&head, &mut dropped);
        assert_eq!(system.len(), 1);
        assert!(dropped.is_empty(), "{dropped:?}");
    }

    #[test]
    fn a_conversation_without_system_messages_is_borrowed() {
        let request = Request { messages: vec![Message::text(Role::User, "hi")], ..Request::default() };
        let (system, messages) = fold(&request, &mut Vec::new());
        assert!(matches!((system, messages), (Cow::Borrowed(_), Cow::Borrowed(_))));
    }
}
