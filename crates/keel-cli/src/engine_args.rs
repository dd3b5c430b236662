//! The engine options every command that opens a database takes:
//! `--config FILE.toml`, `--set KEY=VALUE` (repeatable) and `--device SPEC`,
//! applied in that order so that the more specific flag wins. A command
//! whose own flags or defaults belong in between (a shorthand flag, a
//! value read from a file header, a preset) applies them with
//! [`EngineArgs::options_with`] or [`EngineArgs::apply_overrides`].

use std::ffi::OsString;
use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::Args;
use keel::Options;

/// Engine options shared by every command that opens a database.
#[derive(Args, Debug, Clone)]
pub struct EngineArgs {
    /// TOML file with engine options.
    #[arg(long, value_name = "FILE.toml")]
    pub config: Option<PathBuf>,
    /// Set one engine option, e.g. --set buffer_pool_size=64MiB (repeatable).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub sets: Vec<String>,
    /// Device model: unlimited, hdd-raid10, sata-ssd, nvme, or a spec like iops=1500,bw=120MiB,lat=100us,seek=4ms,qd=8.
    #[arg(long, value_name = "SPEC")]
    pub device: Option<String>,
}

impl EngineArgs {
    /// The --config file's options (the defaults without one), then each
    /// --set in order, then --device; validated.
    pub fn options(&self) -> Result<Options> {
        self.options_with(|_| Ok(()))
    }

    /// Like [`options`](Self::options), with `between` applied after the
    /// --config file and before --set and --device, which still win.
    pub fn options_with(
        &self,
        between: impl FnOnce(&mut Options) -> Result<()>,
    ) -> Result<Options> {
        let mut o = match &self.config {
            // The library's error names the file, the line, the option
            // and the value: the flag is all there is to add.
            Some(p) => Options::from_toml_file(p).context("--config")?,
            None => Options::default(),
        };
        between(&mut o)?;
        self.apply_overrides(&mut o)?;
        Ok(o)
    }

    /// Each --set in order, then --device, over `o`; then the whole is
    /// validated. Errors name the flag and the option.
    pub fn apply_overrides(&self, o: &mut Options) -> Result<()> {
        for s in &self.sets {
            o.apply_sets([s.as_str()])
                .with_context(|| format!("--set {s}"))?;
        }
        if let Some(d) = &self.device {
            o.set("device", d)
                .with_context(|| format!("--device {d}"))?;
        }
        o.validate()?;
        Ok(())
    }

    /// The same flags again, for a child process that takes them too.
    pub fn to_args(&self) -> Vec<OsString> {
        let mut args = Vec::new();
        if let Some(p) = &self.config {
            let mut a = OsString::from("--config=");
            a.push(p);
            args.push(a);
        }
        for s in &self.sets {
            args.push(format!("--set={s}").into());
        }
        if let Some(d) = &self.device {
            args.push(format!("--device={d}").into());
        }
        args
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        engine: EngineArgs,
    }

    fn parse(argv: &[&str]) -> EngineArgs {
        Cli::try_parse_from(std::iter::once("keel").chain(argv.iter().copied()))
            .unwrap()
            .engine
    }

    #[test]
    fn config_then_sets_in_order_then_device() {
        let dir = tempfile::tempdir().unwrap();
        let toml = dir.path().join("k.toml");
        std::fs::write(&toml, "io_capacity = 400\ndevice = \"nvme\"\n").unwrap();
        let e = parse(&[
            "--device",
            "sata-ssd",
            "--set",
            "io_capacity=500",
            "--config",
            toml.to_str().unwrap(),
            "--set",
            "io_capacity=600",
            "--set",
            "device=hdd-raid10",
        ]);
        let o = e.options().unwrap();
        assert_eq!((o.io_capacity, o.device.as_str()), (600, "sata-ssd"));
        // What comes between the file and the flags loses to the flags only.
        let o = e
            .options_with(|o| {
                o.set("io_capacity", "700")?;
                o.set("log_file_size", "2MiB")?;
                Ok(())
            })
            .unwrap();
        assert_eq!((o.io_capacity, o.log_file_size), (600, 2 << 20));
        // A child given the same flags gets the same options.
        let argv: Vec<String> = e
            .to_args()
            .into_iter()
            .map(|a| a.into_string().unwrap())
            .collect();
        let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
        assert_eq!(
            parse(&argv).options().unwrap().entries(),
            e.options().unwrap().entries()
        );
    }

    #[test]
    fn a_config_file_error_names_the_file_line_option_and_value() {
        let dir = tempfile::tempdir().unwrap();
        let toml = dir.path().join("k.toml");
        std::fs::write(&toml, "io_capacity = 400\nflush_policy = \"adaptive\"\n").unwrap();
        let e = parse(&["--config", toml.to_str().unwrap()])
            .options()
            .unwrap_err();
        let want = format!(
            "--config: {}, line 2: option `flush_policy`: `\"adaptive\"` is not accepted; \
             expected `classic` or `steady`",
            toml.display()
        );
        assert_eq!(format!("{e:#}"), want);
    }

    #[test]
    fn errors_name_the_flag_and_the_option() {
        let e = parse(&["--set", "io_capacity=lots"]).options().unwrap_err();
        let text = format!("{e:#}");
        assert!(
            text.contains("--set io_capacity=lots") && text.contains("`io_capacity`"),
            "{text}"
        );
        // A device spec is checked with the rest, by validation.
        let e = parse(&["--device", "iops=fast"]).options().unwrap_err();
        let text = format!("{e:#}");
        assert!(
            text.contains("`device`") && text.contains("iops=fast"),
            "{text}"
        );
        let e = parse(&["--config", "/nonexistent/k.toml"])
            .options()
            .unwrap_err();
        assert!(format!("{e:#}").contains("/nonexistent/k.toml"), "{e:#}");
        // The OS error once, however the chain is printed.
        for text in [format!("{e:#}"), format!("{e:?}")] {
            assert_eq!(text.matches("(os error 2)").count(), 1, "{text}");
        }
        // Each option alone is fine; together they are not: validation
        // names the option.
        let e = parse(&["--set", "io_capacity=300", "--set", "io_capacity_max=200"])
            .options()
            .unwrap_err();
        assert!(format!("{e:#}").contains("io_capacity"), "{e:#}");
    }
}
