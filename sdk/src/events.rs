//! Typed events: every state change emits one, so `tx_search` and `block_search` work.

/// One attribute of an event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventAttribute {
    /// Attribute name.
    pub key: String,
    /// Attribute value, rendered as text.
    pub value: String,
    /// Whether CometBFT indexes it for searches.
    pub index: bool,
}

/// An event with a kind (e.g. `transfer`) and ordered attributes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    /// Event type, as CometBFT calls it.
    pub kind: String,
    /// Attributes in emission order.
    pub attributes: Vec<EventAttribute>,
}

impl Event {
    /// An event with no attributes yet.
    pub fn new(kind: impl Into<String>) -> Self {
        Self {
            kind: kind.into(),
            attributes: Vec::new(),
        }
    }

    /// Adds an indexed attribute.
    pub fn attr(mut self, key: impl Into<String>, value: impl ToString) -> Self {
        self.attributes.push(EventAttribute {
            key: key.into(),
            value: value.to_string(),
            index: true,
        });
        self
    }
}
