//! The catalogue of vendors' injected sidecars (sexton-inject's `Catalogue`) as the commands
//! read it: the built-in vendors, an admin's additions (`--sidecar-catalogue FILE`, a YAML or
//! JSON list in the catalogue's form), or none (`--recognise=false`). `inject`, `webhook`,
//! `controller` and `doctor` take the same flags.

use std::path::PathBuf;

use clap::{ArgAction, Args};
use serde_json::Value;
use sexton_inject::{Catalogue, CatalogueError};

use super::manifest::yaml_as_kubernetes_reads_it;

/// An admin's catalogue file above this size is refused: it is read whole.
const MAX_FILE: u64 = 1 << 20;

#[derive(Args, Debug, Clone)]
pub struct CatalogueFlags {
    /// Recognise other vendors' injected sidecars (Istio, Linkerd, Vault, Consul, Dapr, Datadog, Cloud SQL, Kuma, OpenTelemetry) in run-to-completion pods, without a declaration: false turns it off
    #[arg(long, env = "SEXTON_RECOGNISE", value_name = "BOOL", default_value_t = true, action = ArgAction::Set)]
    recognise: bool,
    /// More vendors' sidecars to recognise: a YAML or JSON list of entries in the catalogue's form (docs/webhook.md), tried before the built-in ones
    #[arg(long, env = "SEXTON_SIDECAR_CATALOGUE", value_name = "FILE")]
    sidecar_catalogue: Option<PathBuf>,
}

#[derive(Debug, thiserror::Error)]
pub enum CatalogueFileError {
    #[error("--sidecar-catalogue {path}: {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("--sidecar-catalogue {path}: larger than {MAX_FILE} bytes")]
    TooLarge { path: String },
    #[error("--sidecar-catalogue {path}: not YAML or JSON: {message}")]
    Parse { path: String, message: String },
    #[error("--sidecar-catalogue {path}: {source}")]
    Invalid {
        path: String,
        #[source]
        source: CatalogueError,
    },
}

impl CatalogueFlags {
    /// The catalogue the flags ask for.
    pub fn load(&self) -> Result<Catalogue, CatalogueFileError> {
        if !self.recognise {
            return Ok(Catalogue::empty());
        }
        let Some(file) = &self.sidecar_catalogue else {
            return Ok(Catalogue::default());
        };
        let path = file.display().to_string();
        let io = |source| CatalogueFileError::Io {
            path: path.clone(),
            source,
        };
        if std::fs::metadata(file).map_err(io)?.len() > MAX_FILE {
            return Err(CatalogueFileError::TooLarge { path });
        }
        let text = std::fs::read_to_string(file).map_err(io)?;
        let parse = |message: String| CatalogueFileError::Parse {
            path: path.clone(),
            message,
        };
        let value: Value = if text.trim_start().starts_with(['{', '[']) {
            serde_json::from_str(&text).map_err(|e| parse(e.to_string()))?
        } else {
            serde_saphyr::from_str_with_options(&text, yaml_as_kubernetes_reads_it())
                .map_err(|e| parse(e.to_string()))?
        };
        // (an empty file: no additions)
        let value = if value.is_null() {
            Value::Array(vec![])
        } else {
            value
        };
        Catalogue::with_extra(&value).map_err(|source| CatalogueFileError::Invalid { path, source })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flags(recognise: bool, file: Option<PathBuf>) -> CatalogueFlags {
        CatalogueFlags {
            recognise,
            sidecar_catalogue: file,
        }
    }

    #[test]
    fn off_builtin_and_an_admins_file() {
        assert!(flags(false, None).load().unwrap().vendors.is_empty());
        let builtin = flags(true, None).load().unwrap();
        assert!(builtin.vendors.iter().any(|v| v.name == "Istio"));
        let dir = std::env::temp_dir().join(format!("sexton-catalogue-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let yaml = dir.join("c.yaml");
        std::fs::write(
            &yaml,
            "- name: Acme\n  containers: [acme-proxy]\n  markers: [{on: label, key: acme.example/injected}]\n",
        )
        .unwrap();
        let c = flags(true, Some(yaml.clone())).load().unwrap();
        assert_eq!(c.vendors[0].name, "Acme");
        assert_eq!(c.vendors.len(), builtin.vendors.len() + 1);
        std::fs::write(&yaml, "- name: Acme\n  containers: [a]\n  markers: []\n").unwrap();
        let e = flags(true, Some(yaml.clone()))
            .load()
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("--sidecar-catalogue ") && e.contains("`markers` is empty"),
            "{e}"
        );
        std::fs::write(&yaml, "[1, 2").unwrap();
        let e = flags(true, Some(yaml)).load().unwrap_err().to_string();
        assert!(e.contains("not YAML or JSON"), "{e}");
        let e = flags(true, Some(dir.join("absent")))
            .load()
            .unwrap_err()
            .to_string();
        assert!(e.contains("absent"), "{e}");
        std::fs::remove_dir_all(dir).unwrap();
    }
}
