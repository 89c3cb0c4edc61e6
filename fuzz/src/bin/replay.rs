//! Runs every file of the corpus through the target bodies, without instrumentation: the
//! cheap check that the corpus (seeds and saved finds) still passes.
//!
//! `replay [--corpus DIR] [TARGET...]`: every target by default, each over `DIR/<target>/`
//! (default `corpus/` beside this crate's Cargo.toml). A panic fails the run and names the
//! file. A path to a single file with one target name replays just that file.

use std::path::{Path, PathBuf};
use std::time::Instant;

fn main() {
    let mut corpus = Path::new(env!("CARGO_MANIFEST_DIR")).join("corpus");
    let mut names = Vec::new();
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--corpus" => corpus = PathBuf::from(args.next().expect("--corpus DIR")),
            _ => names.push(arg),
        }
    }
    // `replay TARGET FILE`: one input.
    if let [name, file] = names.as_slice() {
        if Path::new(file).is_file() {
            let run = gonka_fuzz::target(name).unwrap_or_else(|| panic!("no target {name}"));
            run(&std::fs::read(file).expect("reading the input"));
            println!("{name}: {file} passed");
            return;
        }
    }
    let targets: Vec<_> = if names.is_empty() {
        gonka_fuzz::TARGETS.to_vec()
    } else {
        names
            .iter()
            .map(|n| {
                (gonka_fuzz::TARGETS.iter().find(|(t, _)| t == n).copied())
                    .unwrap_or_else(|| panic!("no target {n}"))
            })
            .collect()
    };
    for (name, run) in targets {
        let dir = corpus.join(name);
        let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()))
            .map(|e| e.expect("a directory entry").path())
            .filter(|p| p.is_file())
            .collect();
        files.sort();
        let started = Instant::now();
        for file in &files {
            let data = std::fs::read(file).expect("reading a corpus file");
            let outcome = std::panic::catch_unwind(|| run(&data));
            if outcome.is_err() {
                eprintln!("{name}: {} panicked", file.display());
                std::process::exit(1);
            }
        }
        println!(
            "{name}: {} inputs passed in {:.2} s",
            files.len(),
            started.elapsed().as_secs_f64()
        );
    }
}
