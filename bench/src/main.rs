//! The floor of allot's benchmarks: the same input merely parsed or read, with the crates
//! allot itself uses, so that `scripts/bench.sh` can report each command as a ratio to it
//! (absolute times vary between machines; ratios much less).
//!
//! - `floor kdl FILE...`: parses each file as a KDL document with the kdl crate, as
//!   allot's front end does before anything else; prints the number of nodes.
//! - `floor csv FILE`: reads every record of a CSV file with the csv crate, as allot's
//!   trace reader does; prints the number of records.

use std::process::ExitCode;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.split_first() {
        Some((mode, files)) if mode == "kdl" && !files.is_empty() => kdl(files),
        Some((mode, [file])) if mode == "csv" => csv(file),
        _ => Err("usage: floor kdl FILE... | floor csv FILE".to_string()),
    };
    match result {
        Ok(count) => {
            println!("{count}");
            ExitCode::SUCCESS
        }
        Err(message) => {
            eprintln!("floor: {message}");
            ExitCode::FAILURE
        }
    }
}

/// Parses every file; the number of nodes of all the documents, children included.
fn kdl(files: &[String]) -> Result<usize, String> {
    let mut nodes = 0;
    for file in files {
        let text = std::fs::read_to_string(file).map_err(|e| format!("{file}: {e}"))?;
        let document = kdl::KdlDocument::parse_v2(&text).map_err(|e| format!("{file}: {e}"))?;
        let mut stack: Vec<&kdl::KdlDocument> = vec![&document];
        while let Some(document) = stack.pop() {
            nodes += document.nodes().len();
            stack.extend(document.nodes().iter().filter_map(|n| n.children()));
        }
    }
    Ok(nodes)
}

/// Reads every record; their number.
fn csv(file: &str) -> Result<usize, String> {
    let mut reader =
        csv::ReaderBuilder::new().flexible(true).from_path(file).map_err(|e| format!("{file}: {e}"))?;
    let mut record = csv::StringRecord::new();
    let mut count = 0;
    while reader.read_record(&mut record).map_err(|e| format!("{file}: {e}"))? {
        count += 1;
    }
    Ok(count)
}
