//! `keel iobench`: the device characterization of Dimitri Kravtchuk's
//! IObench runs ("MySQL Performance: Linux I/O and Fusion-io", 2012), fio-style,
//! through the engine's own device layer. The work is in
//! `keel_bench::iobench`; this file parses the flags and prints progress.

use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use clap::Args;
use keel::io::ThrottleSpec;
use keel_bench::iobench::{self, Event, IobenchConfig, IobenchReport, Method, Mode};

/// Measure what the device and the file system can really do: random and
/// sequential I/O over a sweep of block sizes, workers, files and methods.
#[derive(Args, Debug, Clone)]
#[command(
    after_help = "Every comma list is swept: the cases are the cartesian product, run one after \
                  another, each for --time seconds after a short warm-up. Example, the sweep of \
                  \"MySQL Performance: Linux I/O and Fusion-io\" (Dimitri Kravtchuk, 23 October \
                  2012): keel iobench --mode rrnd,wrnd,rwrnd --bs 4k,16k \
                  --threads 1,4,16,64,128,256 --files 1,2,4,8 --method direct,fsync --dir /data. \
                  The engine's flusher against the device it runs on: keel iobench --mode \
                  wrnd,flush --bs 16k --threads 1,4,16,32 --device sata-ssd --file-size 256MiB"
)]
pub struct IobenchArgs {
    /// Access patterns, comma-separated: rrnd (random reads), wrnd (random
    /// writes), rwrnd (random mix, --read-pct reads), seqr, seqw (sequential:
    /// each worker streams through its own region of a file), flush (the
    /// engine's own page flusher: a database in --dir with page_size = --bs,
    /// data_files = --files, flush_method = --method, device = --device and
    /// a table of --file-size held whole in the buffer pool; each round
    /// updates random rows until 4096 random pages are dirty (at most an
    /// eighth of the table's pages), untimed, then times Db::flush_at_depth,
    /// which writes them with exactly --threads page writes in flight; IOPS =
    /// pages written / seconds of the timed flushes, --time and --warmup
    /// counting only those seconds; pages a page cleaner writes during a
    /// timed flush count, those it writes before it neither count nor are
    /// timed). With wrnd and flush both measured, "flush ÷ wrnd" is printed
    /// for each block size, threads and files, and written to the JSON.
    #[arg(
        long,
        value_name = "MODES",
        value_delimiter = ',',
        default_value = "rrnd,wrnd,rwrnd"
    )]
    pub mode: Vec<Mode>,
    /// Block sizes (bytes per operation), comma-separated, with units: 4k,16k.
    #[arg(long, value_name = "SIZES", value_delimiter = ',', default_value = "4k,16k", value_parser = parse_bs)]
    pub bs: Vec<usize>,
    /// Numbers of concurrent workers, comma-separated. Each worker is a
    /// thread with one request in flight, so N workers make a queue depth of N.
    #[arg(
        long,
        value_name = "COUNTS",
        value_delimiter = ',',
        default_value = "1,4,16,64"
    )]
    pub threads: Vec<usize>,
    /// Numbers of data files the requests are spread over, comma-separated
    /// (one hot file can serialize writers in the file system, as "MySQL
    /// Performance: Linux I/O and Fusion-io" by Dimitri Kravtchuk, 23 October
    /// 2012, measured).
    #[arg(
        long,
        value_name = "COUNTS",
        value_delimiter = ',',
        default_value = "1"
    )]
    pub files: Vec<usize>,
    /// Total size of the data files of a case, split evenly over --files
    /// (1GiB, 512m, ...). Make it larger than RAM to keep buffered reads
    /// (fsync, dsync) from being served by the page cache.
    #[arg(long, value_name = "SIZE", default_value = "1GiB", value_parser = parse_size)]
    pub file_size: u64,
    /// Write methods, comma-separated: direct (O_DIRECT, aligned buffers, no
    /// sync), fsync (buffered write() then fdatasync() per write, on that
    /// descriptor), dsync (opened with O_DSYNC).
    #[arg(
        long,
        value_name = "METHODS",
        value_delimiter = ',',
        default_value = "direct"
    )]
    pub method: Vec<Method>,
    /// Share of reads in the rwrnd mode, in percent.
    #[arg(long, value_name = "PCT", default_value_t = 50, value_parser = clap::value_parser!(u8).range(0..=100))]
    pub read_pct: u8,
    /// Measured seconds per case (fractions allowed), after the warm-up.
    #[arg(long, value_name = "S", default_value = "10", value_parser = parse_seconds)]
    pub time: Duration,
    /// Unmeasured seconds before each case [default: a fifth of --time,
    /// between 0.2 and 2].
    #[arg(long, value_name = "S", value_parser = parse_seconds_or_zero)]
    pub warmup: Option<Duration>,
    /// Directory for the data files; it must exist and hold --file-size of
    /// free space (checked before anything is written).
    #[arg(long, value_name = "DIR", default_value = ".")]
    pub dir: PathBuf,
    /// Device model the files are accessed through, as the engine does:
    /// unlimited (the real disk), hdd-raid10, sata-ssd, nvme, or a spec like
    /// iops=2000,bw=120MiB,lat=100us,seek=4ms,qd=8.
    #[arg(long, value_name = "SPEC", default_value = "unlimited")]
    pub device: ThrottleSpec,
    /// Write the results as JSON to FILE.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Write an HTML page (index.html, self-contained, works offline) with
    /// IOPS and MiB/s against workers to DIR.
    #[arg(long, value_name = "DIR")]
    pub report: Option<PathBuf>,
    /// Leave the data files in --dir afterwards; a later run with the same
    /// --file-size and --files reuses them instead of writing them again.
    /// (The flush mode's database is always removed.)
    #[arg(long)]
    pub keep_files: bool,
    /// Mode flush: write each batch to the doublewrite area and sync it
    /// before writing the pages in place, as the engine does by default
    /// (off: the pages go straight to the data files, like wrnd's writes).
    #[arg(long)]
    pub doublewrite: bool,
}

fn parse_size(s: &str) -> Result<u64, String> {
    match keel::Options::parse_size(s)? {
        0 => Err(format!("`{s}` must be more than 0 bytes")),
        n => Ok(n),
    }
}

fn parse_bs(s: &str) -> Result<usize, String> {
    usize::try_from(parse_size(s)?).map_err(|_| format!("`{s}` is too large"))
}

fn parse_seconds_or_zero(s: &str) -> Result<Duration, String> {
    let t = s.trim();
    let number = t.strip_suffix('s').unwrap_or(t);
    number
        .trim()
        .parse::<f64>()
        .ok()
        .and_then(|secs| Duration::try_from_secs_f64(secs).ok())
        .ok_or_else(|| format!("`{s}` is not a number of seconds"))
}

fn parse_seconds(s: &str) -> Result<Duration, String> {
    match parse_seconds_or_zero(s)? {
        d if d.is_zero() => Err(format!("`{s}`: the time must be positive")),
        d => Ok(d),
    }
}

impl IobenchArgs {
    /// The library's configuration for these flags.
    pub fn config(&self) -> IobenchConfig {
        IobenchConfig {
            modes: self.mode.clone(),
            block_sizes: self.bs.clone(),
            threads: self.threads.clone(),
            files: self.files.clone(),
            methods: self.method.clone(),
            file_size_bytes: self.file_size,
            read_pct: self.read_pct,
            time: self.time,
            warmup: self
                .warmup
                .unwrap_or_else(|| IobenchConfig::default_warmup(self.time)),
            dir: self.dir.clone(),
            device: self.device.clone(),
            keep_files: self.keep_files,
            doublewrite: self.doublewrite,
            ..IobenchConfig::default()
        }
    }
}

/// Run `keel iobench`.
pub fn run(args: IobenchArgs) -> Result<()> {
    let config = args.config();
    if let Some(json) = &args.json {
        check_parent(json)?;
    }
    let mut progress = Progress::new(&config);
    let report = iobench::run(&config, &mut |event| progress.on(event))
        .with_context(|| format!("keel iobench in {}", config.dir.display()))?;
    progress.clear();
    finish(&args, &report)
}

/// Fail early, not after the sweep, if the JSON file cannot be written.
fn check_parent(path: &std::path::Path) -> Result<()> {
    let parent = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => return Ok(()),
    };
    if !parent.is_dir() {
        bail!(
            "--json {}: directory {} does not exist",
            path.display(),
            parent.display()
        );
    }
    Ok(())
}

fn finish(args: &IobenchArgs, report: &IobenchReport) -> Result<()> {
    let failed: Vec<_> = report.cases.iter().filter(|c| c.errors > 0).collect();
    for case in &failed {
        eprintln!(
            "warning: {}: {} failed operations, first: {}",
            case.case(),
            case.errors,
            case.first_error.as_deref().unwrap_or("?")
        );
    }
    if let Some(ratios) = iobench::flush_ratio_table(&report.flush_vs_wrnd) {
        println!("{ratios}");
    }
    if let Some(path) = &args.json {
        report.write_json(path)?;
        println!("JSON written to {}", path.display());
    }
    if let Some(dir) = &args.report {
        let page = iobench::write_html_report(report, dir)?;
        println!("report written to {}", page.display());
    }
    Ok(())
}

/// Prints the plan, the table rows, and a progress line with the time left.
struct Progress {
    terminal: bool,
    header_done: bool,
    line_open: bool,
    config: IobenchConfig,
}

impl Progress {
    fn new(config: &IobenchConfig) -> Self {
        Self {
            terminal: std::io::stderr().is_terminal(),
            header_done: false,
            line_open: false,
            config: config.clone(),
        }
    }

    fn on(&mut self, event: &Event<'_>) {
        match event {
            Event::Start {
                cases,
                nominal,
                machine,
            } => {
                println!(
                    "keel iobench: {cases} case(s), {} s each after {} s of warm-up: \
                     about {} plus writing the files",
                    trim_secs(self.config.time),
                    trim_secs(self.config.warmup),
                    human(*nominal)
                );
                println!("{}", self.data_note(machine));
            }
            Event::Preparing { files, file_bytes } => self.status(&format!(
                "writing {files} data file(s) of {} in full...",
                iobench::format_size(*file_bytes)
            )),
            Event::Prepared {
                files,
                written_bytes,
                elapsed,
            } => self.prepared(*files, *written_bytes, *elapsed),
            Event::Loading {
                bs,
                files,
                data_bytes,
            } => self.status(&format!(
                "flush: loading a table of {} ({} pages, {files} data file(s))...",
                iobench::format_size(*data_bytes),
                iobench::format_bs(*bs)
            )),
            Event::Loaded {
                rows,
                data_bytes,
                elapsed,
            } => {
                self.clear();
                eprintln!(
                    "flush: loaded {rows} rows, {} of pages, and flushed them in {:.1} s",
                    iobench::format_size(*data_bytes),
                    elapsed.as_secs_f64()
                );
            }
            Event::CaseStart {
                index,
                total,
                case,
                remaining,
            } => self.status(&format!(
                "[{}/{total}] {case}: {} s... about {} left",
                index + 1,
                trim_secs(self.config.warmup + self.config.time),
                human(*remaining)
            )),
            Event::CaseDone { result, .. } => {
                self.clear();
                if !self.header_done {
                    println!("{}", iobench::table_header());
                    self.header_done = true;
                }
                println!("{}", iobench::table_row(result));
            }
            _ => {}
        }
    }

    fn data_note(&self, machine: &iobench::MachineInfo) -> String {
        format!(
            "{} on {} ({}, logical block {} B), device model {}\n{}",
            machine.dir,
            machine.filesystem,
            machine.block_device.as_deref().unwrap_or("no block device"),
            machine.logical_block_bytes,
            machine.device_model,
            iobench::data_size_note(&self.config, machine.ram_bytes)
        )
    }

    fn prepared(&mut self, files: usize, written: u64, elapsed: Duration) {
        self.clear();
        if written == 0 {
            eprintln!("reusing the {files} kept data file(s)");
            return;
        }
        let mib_s = written as f64 / (1 << 20) as f64 / elapsed.as_secs_f64().max(1e-9);
        eprintln!(
            "wrote {} in {files} file(s) in {:.1} s ({mib_s:.0} MiB/s)",
            iobench::format_size(written),
            elapsed.as_secs_f64()
        );
    }

    /// A progress line: rewritten in place on a terminal, one line each
    /// otherwise.
    fn status(&mut self, text: &str) {
        self.clear();
        if self.terminal {
            eprint!("{text}");
            // Progress only: a failed flush of stderr loses nothing.
            let _ = std::io::stderr().flush();
            self.line_open = true;
        } else {
            eprintln!("{text}");
        }
    }

    fn clear(&mut self) {
        if self.line_open {
            eprint!("\r\x1b[K");
            self.line_open = false;
        }
    }
}

fn trim_secs(d: Duration) -> String {
    let s = format!("{:.2}", d.as_secs_f64());
    s.trim_end_matches('0').trim_end_matches('.').to_owned()
}

/// `1h02m`, `5m20s`, `12s`.
fn human(d: Duration) -> String {
    let s = d.as_secs();
    match s {
        0..=59 => format!("{s}s"),
        60..=3599 => format!("{}m{:02}s", s / 60, s % 60),
        _ => format!("{}h{:02}m", s / 3600, s % 3600 / 60),
    }
}
