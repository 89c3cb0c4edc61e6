//! AFL++ entry point of the `msgs` target ([`gonka_fuzz::targets::msgs`]).

fn main() {
    afl::fuzz!(|data: &[u8]| {
        gonka_fuzz::targets::msgs::run(data);
    });
}
