//! `keel backup SRC DEST`: a consistent copy of a closed database.
//!
//! The database is opened read-only (`Db::open_read_only`: a shared lock,
//! nothing written) and copied with `Db::backup`. A database another
//! process has open is refused: the copy of a running database is made by
//! that process, through the API. A database whose last run crashed is
//! refused too (a read-only open replays no redo): open it once, or run
//! `keel check`, which recovers it, then back it up.

use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use clap::Args;
use keel::Db;

use crate::engine_args::EngineArgs;

/// `keel backup`'s arguments.
#[derive(Args)]
pub struct BackupArgs {
    /// The database directory to copy (closed: not open in any process).
    src: PathBuf,
    /// Where the copy goes: a new or empty directory.
    dest: PathBuf,
    /// Then open the copy (recovering it to the end of its redo) and check
    /// every tree in it, as `keel check` does.
    #[arg(long)]
    verify: bool,
    #[command(flatten)]
    engine: EngineArgs,
}

pub fn run(args: BackupArgs) -> Result<()> {
    let header = crate::check::read_header(&args.src).map_err(anyhow::Error::msg)?;
    let opts = crate::check::options(&args.engine, Some(&header))?;
    let db = match Db::open_read_only(&args.src, opts.clone()) {
        Ok(db) => db,
        Err(keel::Error::Locked { pid, .. }) => bail!(
            "{} is open in {}: keel backup copies a closed database; a running one is copied \
             by the process that has it open, with Db::backup",
            args.src.display(),
            keel::io::lock::holder(pid)
        ),
        Err(e) => return Err(e).with_context(|| format!("opening {}", args.src.display())),
    };
    let rep = db.backup(&args.dest).with_context(|| {
        format!(
            "backing up {} into {}",
            args.src.display(),
            args.dest.display()
        )
    })?;
    drop(db);
    println!("{rep}");
    if args.verify {
        let mut o = opts;
        o.read_only = false;
        let copy = Db::open(&args.dest, o)
            .with_context(|| format!("opening the copy in {}", args.dest.display()))?;
        let trees = copy
            .check()
            .with_context(|| format!("checking the copy in {}", args.dest.display()))?;
        copy.close()?;
        println!(
            "verified: the copy opens and its {} trees (the catalog's included) check out",
            trees.len()
        );
    }
    Ok(())
}
