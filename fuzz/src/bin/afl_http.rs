//! AFL++ entry point of the `http` target ([`gonka_fuzz::targets::http`]).

fn main() {
    afl::fuzz!(|data: &[u8]| {
        gonka_fuzz::targets::http::run(data);
    });
}
