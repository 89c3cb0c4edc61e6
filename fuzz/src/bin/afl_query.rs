//! AFL++ entry point of the `query` target ([`gonka_fuzz::targets::query`]).

fn main() {
    afl::fuzz!(|data: &[u8]| {
        gonka_fuzz::targets::query::run(data);
    });
}
