//! Shell completion, two ways:
//!
//! - `kubectl-sexton completion bash|zsh|fish|powershell|elvish`: a script for the binary
//!   itself (clap_complete, generated from the same command tree as the parser);
//! - `kubectl sexton <TAB>`: kubectl (≥ 1.26) completes a plugin's arguments by running
//!   `kubectl_complete-sexton ARGS... WORD` from the PATH and reading Cobra's protocol: one
//!   candidate a line (`value\tdescription`), then `:DIRECTIVE` (4: no file names; 0: file
//!   names too). `kubectl_complete-sexton` is this binary under that name (a link or a copy),
//!   and [`kubectl_complete`] answers it from the command tree.

use clap::{Arg, Args, Command};
use clap_complete::Shell;

use crate::shared::exit::Exit;
use crate::shared::logging;

/// The name kubectl runs for completion of `kubectl sexton ...`.
pub const KUBECTL_COMPLETE: &str = "kubectl_complete-sexton";

/// Cobra's directives: candidates only, or file names too.
const NO_FILES: u8 = 4;
const FILES: u8 = 0;

#[derive(Args, Debug)]
#[command(
    about = "Print a shell completion script (bash: `source <(kubectl-sexton completion bash)`)",
    long_about = "Print a completion script for the kubectl-sexton binary. For `kubectl sexton <TAB>` (kubectl 1.26 or later), put this binary on the PATH also as kubectl_complete-sexton (a link or a copy): kubectl runs it to complete a plugin's arguments."
)]
pub struct CompletionFlags {
    /// The shell
    #[arg(value_enum)]
    shell: Shell,
}

/// `kubectl-sexton completion SHELL`.
pub fn main(flags: CompletionFlags, mut cmd: Command) -> Exit {
    let mut script = Vec::new();
    clap_complete::generate(flags.shell, &mut cmd, "kubectl-sexton", &mut script);
    logging::stdout_line(String::from_utf8_lossy(&script).trim_end());
    Exit::Ok
}

/// `kubectl_complete-sexton ARGS... WORD`: the candidates for WORD after ARGS, in Cobra's
/// protocol.
pub fn kubectl_complete(mut cmd: Command, args: &[String]) -> Exit {
    cmd.build();
    let empty = String::new();
    let (word, before) = args.split_last().unwrap_or((&empty, &[]));
    let (candidates, directive) = candidates(&cmd, before, word);
    let mut out: String = candidates.iter().map(|c| format!("{c}\n")).collect();
    out.push_str(&format!(":{directive}"));
    logging::stdout_line(&out);
    Exit::Ok
}

/// The candidates for `word` after the words `before`, and the directive.
fn candidates(root: &Command, before: &[String], word: &str) -> (Vec<String>, u8) {
    let mut cmd = root;
    let mut value_of: Option<&Arg> = None;
    for w in before {
        if value_of.take().is_some() {
            continue;
        }
        if w.starts_with('-') {
            value_of = flag(cmd, w).filter(|a| a.get_action().takes_values() && !w.contains('='));
        } else if let Some(sub) = cmd.find_subcommand(w) {
            cmd = sub;
        }
    }
    if let Some(arg) = value_of {
        let values = arg.get_possible_values();
        if values.is_empty() {
            return (vec![], FILES);
        }
        let names = values
            .iter()
            .map(|v| v.get_name().to_string())
            .filter(|v| v.starts_with(word))
            .collect();
        return (names, NO_FILES);
    }
    if word.starts_with('-') {
        return (flags(cmd, word), NO_FILES);
    }
    let subcommands = cmd
        .get_subcommands()
        .filter(|s| s.get_name() != "help" && s.get_name().starts_with(word))
        .map(|s| described(s.get_name(), s.get_about().map(ToString::to_string)))
        .collect();
    (subcommands, NO_FILES)
}

/// The argument a flag word (`--output`, `-o`, `--output=json`) names.
fn flag<'a>(cmd: &'a Command, word: &str) -> Option<&'a Arg> {
    let name = word.split('=').next().unwrap_or(word);
    if let Some(long) = name.strip_prefix("--") {
        return cmd.get_arguments().find(|a| a.get_long() == Some(long));
    }
    let mut short = name.strip_prefix('-')?.chars();
    let c = short.next()?;
    cmd.get_arguments().find(|a| a.get_short() == Some(c))
}

/// The flags of `cmd` (long, and short where there is one) that start with `word`.
fn flags(cmd: &Command, word: &str) -> Vec<String> {
    let mut out = vec![];
    for a in cmd.get_arguments().filter(|a| !a.is_hide_set()) {
        let help = a.get_help().map(ToString::to_string);
        let names = a
            .get_long()
            .map(|l| format!("--{l}"))
            .into_iter()
            .chain(a.get_short().map(|s| format!("-{s}")));
        for name in names.filter(|n| n.starts_with(word)) {
            out.push(described(&name, help.clone()));
        }
    }
    out
}

/// `value\tdescription` (the description's first line), as Cobra writes a candidate.
fn described(value: &str, description: Option<String>) -> String {
    match description.as_deref().and_then(|d| d.lines().next()) {
        Some(d) if !d.is_empty() => format!("{value}\t{d}"),
        _ => value.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::{Parser, Subcommand, ValueEnum};

    #[derive(Parser)]
    struct Cli {
        #[command(subcommand)]
        command: Sub,
    }

    #[derive(Subcommand)]
    enum Sub {
        /// Look
        Doctor {
            #[arg(short, long, value_enum, default_value = "text")]
            output: Out,
            #[arg(short = 'f', long)]
            filename: Vec<String>,
        },
        /// Inject
        Inject,
    }

    #[derive(Clone, ValueEnum)]
    enum Out {
        Text,
        Json,
    }

    fn complete(words: &[&str]) -> (Vec<String>, u8) {
        let mut cmd = <Cli as clap::CommandFactory>::command();
        cmd.build();
        let words: Vec<String> = words.iter().map(|w| w.to_string()).collect();
        let (word, before) = words.split_last().unwrap();
        candidates(&cmd, before, word)
    }

    #[test]
    fn subcommands_flags_and_values() {
        assert_eq!(
            complete(&[""]),
            (
                vec!["doctor\tLook".into(), "inject\tInject".into()],
                NO_FILES
            )
        );
        assert_eq!(complete(&["d"]).0, ["doctor\tLook"]);
        assert_eq!(
            complete(&["doctor", "-o", "j"]),
            (vec!["json".into()], NO_FILES)
        );
        assert_eq!(complete(&["doctor", "--output", ""]).0, ["text", "json"]);
        assert_eq!(complete(&["doctor", "-f", ""]), (vec![], FILES));
        assert_eq!(complete(&["doctor", "-o", "json", "--f"]).0, ["--filename"]);
        assert!(complete(&["doctor", "-"]).0.contains(&"-o".to_string()));
    }
}
