//! The command line (clap derive). Flags are only collected here; their meaning, defaults and
//! validation live in [`crate::config`] (one definition per setting).
//!
//! Exit codes: 0 success, 1 failure (message on stderr), 2 usage error (clap).

use crate::config::{Raw, SETTINGS};
use clap::{Args, Parser, Subcommand};
use std::collections::BTreeMap;
use std::path::PathBuf;

/// The ControlPlane read model server: projector, redb store and GraphQL API in one process.
#[derive(Debug, Parser)]
#[command(name = "control-plane", version, about, propagate_version = true)]
pub struct Cli {
    /// Log format: text or json (env CP_LOG_FORMAT; default text). RUST_LOG sets the filter.
    #[arg(long, global = true, value_name = "FORMAT")]
    pub log_format: Option<String>,
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Project a source into the read model and serve GraphQL, health and metrics.
    #[command(after_long_help = crate::config::settings_help())]
    Serve(ServeArgs),
    /// Dry run over a manifests directory: parse and translate every document and print, per
    /// document, what would be projected (OK: kind, key, required parents) or why not (SKIP,
    /// FAIL, IGNORED), objects defined twice (DUPLICATE), objects of one kind with one natural
    /// key (CONFLICT) and a summary. Exits 1 when any document fails to parse or translate.
    #[command(after_long_help = crate::check::outcomes_help())]
    Check(CheckArgs),
    /// Schema commands.
    Schema {
        /// What to do with the schema.
        #[command(subcommand)]
        command: SchemaCommand,
    },
    /// Snapshots of the read model: export, restore, verify.
    Snapshot {
        /// What to do.
        #[command(subcommand)]
        command: SnapshotCommand,
    },
}

/// `snapshot` subcommands (format: `storage::snapshot`).
#[derive(Debug, Subcommand)]
pub enum SnapshotCommand {
    /// Export the read model into FILE: offline from a data directory no server is running on,
    /// or online from a running server (`GET /admin/v1/snapshot`, admin token).
    #[command(group(clap::ArgGroup::new("from").required(true).args(["data_dir", "server"])))]
    Export {
        /// The data directory to export (offline).
        #[arg(long, value_name = "DIR")]
        data_dir: Option<PathBuf>,
        /// Base URL of a running server (online), e.g. http://127.0.0.1:8080.
        #[arg(long, value_name = "URL")]
        server: Option<String>,
        /// Admin bearer token for --server.
        #[arg(long, value_name = "T", env = "CP_ADMIN_TOKEN", hide_env_values = true, requires = "server")]
        token: Option<String>,
        /// The snapshot file to write.
        #[arg(long, value_name = "FILE")]
        out: PathBuf,
    },
    /// Restore a snapshot into a data directory. No server may run on it. The store is built in
    /// a staging directory inside DIR and moved into place when complete, so DIR may be a
    /// volume's mount point and is left as it was on any error. The restored store is then
    /// reconciled with whatever source a server started on it reads (objects that source no
    /// longer has are swept).
    Restore {
        /// The snapshot file.
        #[arg(long = "in", value_name = "FILE")]
        input: PathBuf,
        /// The data directory to restore into.
        #[arg(long, value_name = "DIR")]
        data_dir: PathBuf,
        /// Replace the read model in a non-empty DIR. Refused anyway when DIR holds anything but
        /// a data directory's files (readmodel.redb, search/).
        #[arg(long)]
        force: bool,
    },
    /// Check a snapshot file's structure, checksum and content; print its header. The file is
    /// given as FILE or, as for `restore`, as `--in FILE` (exactly one of them).
    #[command(group(clap::ArgGroup::new("snapshot").required(true).args(["file", "input"])))]
    Verify {
        /// The snapshot file.
        #[arg(value_name = "FILE")]
        file: Option<PathBuf>,
        /// The snapshot file (the spelling of `restore --in`).
        #[arg(long = "in", value_name = "FILE")]
        input: Option<PathBuf>,
    },
}

/// `schema` subcommands.
#[derive(Debug, Subcommand)]
pub enum SchemaCommand {
    /// Print the GraphQL schema (SDL) to stdout.
    Print,
}

/// Flags of `serve`. Every value is optional here; defaults come from [`crate::config`].
#[derive(Debug, Default, Clone, Args)]
pub struct ServeArgs {
    /// YAML config file (keys as in the table below).
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Object source: kube (default without --manifests) or manifests.
    #[arg(long, value_name = "SOURCE", value_parser = ["kube", "manifests"])]
    pub source: Option<String>,
    /// Pin the clock to this RFC 3339 time (tests, demos).
    #[arg(long, value_name = "RFC3339")]
    pub now: Option<String>,
    /// The flag of every setting of the config file ([`crate::config::SETTINGS`]).
    #[command(flatten)]
    pub settings: SettingFlags,
}

/// The values given to the settings' flags, by setting key: one flag per setting of the config
/// file, generated from its row of [`crate::config::SETTINGS`] (name, value name, help line,
/// repeatable for a list, conflicts).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct SettingFlags(BTreeMap<&'static str, Vec<String>>);

impl SettingFlags {
    /// The flag layer of [`crate::config::load`]: each given setting's value (its last, or all
    /// for a list).
    pub(crate) fn layer(&self) -> BTreeMap<&'static str, Raw> {
        let list = |key: &str| SETTINGS.iter().any(|s| s.key == key && s.list);
        self.0
            .iter()
            .filter_map(|(key, values)| {
                let raw = if list(key) { Raw::List(values.clone()) } else { Raw::One(values.last()?.clone()) };
                Some((*key, raw))
            })
            .collect()
    }
}

impl clap::FromArgMatches for SettingFlags {
    fn from_arg_matches(matches: &clap::ArgMatches) -> Result<Self, clap::Error> {
        let mut flags = SettingFlags::default();
        flags.update_from_arg_matches(matches)?;
        Ok(flags)
    }

    fn update_from_arg_matches(&mut self, matches: &clap::ArgMatches) -> Result<(), clap::Error> {
        for s in SETTINGS.iter().filter(|s| s.flag().is_some()) {
            if let Some(values) = matches.get_many::<String>(s.key) {
                self.0.insert(s.key, values.cloned().collect());
            }
        }
        Ok(())
    }
}

impl Args for SettingFlags {
    fn augment_args(cmd: clap::Command) -> clap::Command {
        SETTINGS.iter().fold(cmd, |cmd, s| {
            let Some(flag) = s.flag() else { return cmd };
            let arg = clap::Arg::new(s.key)
                .long(flag.trim_start_matches('-').to_string())
                .value_name(s.value_name)
                // A value that starts with `-` (`-1s`) is the setting's value, refused by its
                // parser with the setting named, not taken for a flag.
                .allow_hyphen_values(true)
                .help(format!("{} [{}, {}, default: {}]", s.doc, s.key, s.env, s.default))
                .action(if s.list { clap::ArgAction::Append } else { clap::ArgAction::Set });
            cmd.arg(s.conflicts_with.iter().fold(arg, |arg, id| arg.conflicts_with(*id)))
        })
    }

    fn augment_args_for_update(cmd: clap::Command) -> clap::Command {
        Self::augment_args(cmd)
    }
}

/// Flags of `check`.
#[derive(Debug, Clone, Args)]
pub struct CheckArgs {
    /// The manifests directory to check.
    #[arg(long, value_name = "DIR")]
    pub manifests: PathBuf,
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn cli_definition_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn manifests_and_source_conflict_is_a_usage_error() {
        let err = Cli::try_parse_from(["control-plane", "serve", "--manifests", "x", "--source", "kube"]).unwrap_err();
        assert_eq!(err.exit_code(), 2);
        let err = Cli::try_parse_from(["control-plane", "serve", "--bogus"]).unwrap_err();
        assert_eq!(err.exit_code(), 2);
    }

    #[test]
    fn every_setting_of_the_file_has_a_flag_in_the_help_and_its_conflicts_hold() {
        let mut cli = Cli::command();
        let help = cli.find_subcommand_mut("serve").expect("serve").render_long_help().to_string();
        for s in SETTINGS.iter().filter(|s| s.in_file) {
            let flag = s.flag().expect("a setting of the file has a flag");
            assert!(help.contains(&format!("{flag} <{}>", s.value_name)), "{flag} is not in serve --help");
        }
        let err = Cli::try_parse_from(["control-plane", "serve", "--manifests", "x", "--kube-url", "http://a"]).unwrap_err();
        assert_eq!(err.kind(), clap::error::ErrorKind::ArgumentConflict);
        let err = Cli::try_parse_from(["control-plane", "serve", "--graphql-max-page-size"]).unwrap_err();
        assert_eq!(err.kind(), clap::error::ErrorKind::InvalidValue, "a flag without its value");
    }

    #[test]
    fn serve_flags_parse() {
        let cli = Cli::try_parse_from([
            "control-plane",
            "serve",
            "--manifests",
            "w",
            "--auth",
            "mock",
            "--trusted-issuer",
            "https://a",
            "--trusted-issuer",
            "https://b",
            "--log-format",
            "json",
        ])
        .unwrap();
        let Command::Serve(args) = cli.command else { panic!("expected serve") };
        let issuers = args.settings.layer().remove("security.trustedIssuers");
        assert!(matches!(&issuers, Some(Raw::List(l)) if *l == ["https://a", "https://b"]), "{issuers:?}");
        assert!(matches!(args.settings.layer().remove("security.mode"), Some(Raw::One(m)) if m == "mock"));
        assert_eq!(cli.log_format.as_deref(), Some("json"));
    }
}
