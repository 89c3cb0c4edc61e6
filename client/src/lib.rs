//! gonka-client
