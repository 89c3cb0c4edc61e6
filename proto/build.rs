//! Compiles `gonka/**/*.proto` with protox (pure Rust) and prost-build: no system `protoc`.

use std::path::{Path, PathBuf};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    collect_protos(&root.join("gonka"), &mut files)?;
    files.sort();
    // The directory itself, so new .proto files are noticed too.
    println!("cargo:rerun-if-changed=gonka");
    for file in &files {
        println!("cargo:rerun-if-changed={}", file.display());
    }
    let descriptors = protox::compile(&files, [root])?;
    prost_build::Config::new()
        // `prost::Name` gives every message its `/gonka.<module>.v1.<Name>` type URL.
        .enable_type_names()
        .type_name_domain(["."], "")
        // Genesis files and CLI JSON output are rendered with serde; field names stay snake_case.
        .type_attribute(".", "#[derive(serde::Serialize, serde::Deserialize)]")
        .message_attribute(".", "#[serde(default)]")
        .compile_fds(descriptors)?;
    Ok(())
}

fn collect_protos(dir: &Path, out: &mut Vec<PathBuf>) -> std::io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        if path.is_dir() {
            collect_protos(&path, out)?;
        } else if path.extension().is_some_and(|ext| ext == "proto") {
            out.push(path);
        }
    }
    Ok(())
}
