//! Placeholder until the benchmark lands: `cargo bench -p gonka-llm`.
fn main() {}
