//! `--output text|json` rendering.

use serde_json::Value;

/// Output format of a command.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Output {
    /// Lines for people.
    Text,
    /// One JSON document for programs.
    Json,
}

impl Output {
    /// Prints `json` as JSON, or `text` lines for people.
    pub fn print(self, json: Value, text: impl FnOnce() -> String) {
        match self {
            Output::Json => println!(
                "{}",
                serde_json::to_string_pretty(&json).expect("JSON values serialise")
            ),
            Output::Text => println!("{}", text()),
        }
    }
}
