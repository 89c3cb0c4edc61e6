//! AFL++ entry point of the `tx_check` target ([`gonka_fuzz::targets::tx_check`]).

fn main() {
    afl::fuzz!(|data: &[u8]| {
        gonka_fuzz::targets::tx_check::run(data);
    });
}
