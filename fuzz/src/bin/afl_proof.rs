//! AFL++ entry point of the `proof` target ([`gonka_fuzz::targets::proof`]).

fn main() {
    afl::fuzz!(|data: &[u8]| {
        gonka_fuzz::targets::proof::run(data);
    });
}
