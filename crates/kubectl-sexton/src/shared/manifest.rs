//! Reading and writing manifests: multi-document YAML or JSON (a stream of objects), from
//! files, directories (their `.yaml`, `.yml` and `.json` files, in name order) or stdin.
//! The output keeps the input's format: JSON if every input was JSON, else YAML.

use std::io::Read;
use std::path::{Path, PathBuf};

use clap::{Args, ValueEnum};
use serde_json::Value;

/// `-f`: the manifests `inject` and `uninject` read.
#[derive(Args, Debug)]
pub struct Filenames {
    /// Manifest file, directory (its .yaml, .yml and .json files) or - for stdin; repeatable
    #[arg(
        short = 'f',
        long = "filename",
        value_name = "FILE|DIR|-",
        required = true
    )]
    pub filename: Vec<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    Yaml,
    Json,
}

/// `-o` of the commands that write manifests (`inject`, `uninject`).
#[derive(Args, Debug)]
pub struct ManifestOutput {
    /// Output format (default: the input's: JSON if every input is JSON, else YAML)
    #[arg(short, long, value_enum)]
    pub output: Option<Format>,
}

/// A manifest source that could not be read; the message names it.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    #[error("-f {path}: {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("-f {path}: not YAML or JSON: {message}")]
    Parse { path: String, message: String },
    #[error("-f {path}: document {index} is not an object (a Kubernetes resource)")]
    NotAnObject { path: String, index: usize },
    #[error("-f {0}: no .yaml, .yml or .json files in this directory")]
    EmptyDir(String),
}

/// The documents of every source, in order, and the output format.
pub fn read_all(sources: &[String]) -> Result<(Vec<Value>, Format), ReadError> {
    let mut docs = vec![];
    let mut all_json = true;
    for source in sources {
        for (path, text) in texts(source)? {
            let (mut d, format) = parse(&path, &text)?;
            all_json &= format == Format::Json;
            docs.append(&mut d);
        }
    }
    let format = if all_json && !docs.is_empty() {
        Format::Json
    } else {
        Format::Yaml
    };
    Ok((docs, format))
}

/// The documents of every source, file by file (`-` for stdin), for reports that name
/// the file each document came from (`kubectl sexton doctor -f`).
pub fn read_each(sources: &[String]) -> Result<Vec<(String, Vec<Value>)>, ReadError> {
    let mut files = vec![];
    for source in sources {
        for (path, text) in texts(source)? {
            let (docs, _) = parse(&path, &text)?;
            files.push((path, docs));
        }
    }
    Ok(files)
}

/// The texts a source names: stdin, a file, or a directory's manifest files.
fn texts(source: &str) -> Result<Vec<(String, String)>, ReadError> {
    let io = |path: &str, source| ReadError::Io {
        path: path.to_string(),
        source,
    };
    if source == "-" {
        let mut s = String::new();
        std::io::stdin()
            .read_to_string(&mut s)
            .map_err(|e| io("-", e))?;
        return Ok(vec![("-".into(), s)]);
    }
    let path = Path::new(source);
    if !path.is_dir() {
        let text = std::fs::read_to_string(path).map_err(|e| io(source, e))?;
        return Ok(vec![(source.into(), text)]);
    }
    let mut files: Vec<PathBuf> = std::fs::read_dir(path)
        .map_err(|e| io(source, e))?
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.is_file()
                && matches!(
                    p.extension().and_then(|e| e.to_str()),
                    Some("yaml" | "yml" | "json")
                )
        })
        .collect();
    if files.is_empty() {
        return Err(ReadError::EmptyDir(source.into()));
    }
    files.sort();
    files
        .into_iter()
        .map(|p| {
            let name = p.display().to_string();
            std::fs::read_to_string(&p)
                .map(|t| (name.clone(), t))
                .map_err(|e| io(&name, e))
        })
        .collect()
}

/// The documents of one text: JSON if it starts like JSON, else YAML. Empty documents
/// (`---` alone, comments only) are dropped.
fn parse(path: &str, text: &str) -> Result<(Vec<Value>, Format), ReadError> {
    let parse_error = |message: String| ReadError::Parse {
        path: path.into(),
        message,
    };
    let json = text.trim_start().starts_with(['{', '[']);
    let docs: Vec<Value> = if json {
        serde_json::Deserializer::from_str(text)
            .into_iter::<Value>()
            .collect::<Result<_, _>>()
            .map_err(|e| parse_error(e.to_string()))?
    } else {
        serde_saphyr::from_str_multiple_with_options::<Value, Vec<Value>>(
            text,
            yaml_as_kubernetes_reads_it(),
        )
        .map_err(|e| parse_error(e.to_string()))?
    };
    let docs: Vec<Value> = docs.into_iter().filter(|d| !d.is_null()).collect();
    if let Some(index) = docs.iter().position(|d| !d.is_object()) {
        return Err(ReadError::NotAnObject {
            path: path.into(),
            index,
        });
    }
    Ok((docs, if json { Format::Json } else { Format::Yaml }))
}

/// YAML as kubectl and the API server read it (YAML 1.1, sigs.k8s.io/yaml): `0755` is
/// octal (a `defaultMode` of 493), `yes`/`on` are booleans.
pub fn yaml_as_kubernetes_reads_it() -> serde_saphyr::Options {
    let mut options = serde_saphyr::Options::default();
    options.legacy_octal_numbers = true;
    options
}

/// The documents as text in `format`: YAML documents separated by `---`, or JSON objects
/// one after another (as kubectl reads them).
pub fn write(docs: &[Value], format: Format) -> String {
    match format {
        Format::Yaml => {
            serde_saphyr::to_string_multiple(docs).expect("JSON values serialize as YAML")
        }
        Format::Json => docs
            .iter()
            .map(|d| serde_json::to_string_pretty(d).expect("JSON serializes") + "\n")
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn yaml_and_json_streams_round_trip_and_strings_stay_strings() {
        let (m, _) = parse("t", "defaultMode: 0755\nx: 0x1F\ny: yes\n").unwrap();
        assert_eq!(
            m[0],
            serde_json::json!({"defaultMode": 493, "x": 31, "y": true})
        );
        let yaml = "# c\n---\na: 1\nb: \"yes\"\nc: \"0755\"\nd: \"1.10\"\ne: \"null\"\nf: \"\"\ng: \"on\"\n---\n---\nkind: X\n";
        let (docs, f) = parse("t", yaml).unwrap();
        assert_eq!((docs.len(), f), (2, Format::Yaml));
        let again = write(&docs, Format::Yaml);
        let (back, _) = parse("t", &again).unwrap();
        assert_eq!(back, docs, "{again}");
        for s in ["yes", "0755", "1.10", "null", "", "on"] {
            assert!(
                back[0].as_object().unwrap().values().any(|v| v == s),
                "{s} lost in\n{again}"
            );
        }
        let (docs, f) = parse("t", "{\"a\": 1}\n{\"b\": [2]}").unwrap();
        assert_eq!((docs.len(), f), (2, Format::Json));
        let (back, _) = parse("t", &write(&docs, Format::Json)).unwrap();
        assert_eq!(back, docs);
        assert!(matches!(
            parse("t", "- 1\n- 2\n"),
            Err(ReadError::NotAnObject { .. })
        ));
        assert!(matches!(
            parse("t", "a: [1\n"),
            Err(ReadError::Parse { .. })
        ));
    }
}
