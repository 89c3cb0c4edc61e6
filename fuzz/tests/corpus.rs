//! The committed corpus (seeds and every saved find of the fuzzer) still passes every target
//! body: what `fuzz/run.sh --replay` checks, run by the test suite without instrumentation.

use std::path::Path;

#[test]
fn every_corpus_input_passes_its_target() {
    let corpus = Path::new(env!("CARGO_MANIFEST_DIR")).join("corpus");
    for (name, run) in gonka_fuzz::TARGETS {
        let dir = corpus.join(name);
        let mut files: Vec<_> = std::fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()))
            .map(|e| e.unwrap().path())
            .filter(|p| p.is_file())
            .collect();
        files.sort();
        assert!(!files.is_empty(), "{} holds no input", dir.display());
        for file in &files {
            let data = std::fs::read(file).unwrap();
            if std::panic::catch_unwind(|| run(&data)).is_err() {
                panic!(
                    "{name}: {} panicked (reproduce: fuzz/run.sh --replay, or cargo run -p gonka-fuzz --bin replay -- {name} {})",
                    file.display(),
                    file.display()
                );
            }
        }
    }
}
