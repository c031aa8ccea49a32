//! What a duplex session's in-process fake is to the relay that drives it
//! (`mock_realtime`, `mock_live`): client messages in, the server messages
//! each answers with out, in order, at once; nothing said unasked.

/// One fake upstream session.
pub trait FakeSession: Send {
    /// The server messages answering one client message.
    fn on_client(&mut self, text: &str) -> Vec<String>;
}

impl FakeSession for crate::mock_realtime::FakeRealtime {
    fn on_client(&mut self, text: &str) -> Vec<String> {
        crate::mock_realtime::FakeRealtime::on_client(self, text)
    }
}
