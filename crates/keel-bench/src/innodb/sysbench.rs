//! sysbench's side: the arguments that give it the workload of
//! `OltpParams`, and the parsing of what it prints (the per-interval lines
//! of `--report-interval`, the latency histogram of `--histogram=on` and
//! the final statistics).

use hdrhistogram::Histogram;

use crate::oltp::{OltpError, OltpParams, RandType};

/// sysbench's arguments for `params` against the server on `socket`
/// (without the command, `prepare` or `run`).
pub fn args(params: &OltpParams, socket: &str, db: &str) -> Vec<String> {
    let rand = match params.rand_type {
        RandType::Uniform => "uniform",
        RandType::Special => "special",
        RandType::Pareto => "pareto",
        RandType::Zipf => "zipfian",
    };
    let mut a = vec![
        format!("oltp_{}", params.workload),
        "--db-driver=mysql".into(),
        format!("--mysql-socket={socket}"),
        "--mysql-user=root".into(),
        format!("--mysql-db={db}"),
        format!("--tables={}", params.tables),
        format!("--table-size={}", params.table_size),
        format!("--threads={}", params.threads),
        format!("--rand-type={rand}"),
        format!("--range-size={}", params.range_size),
        format!("--rand-seed={}", params.seed),
        // Deadlocks and lock waits are retried, as Keel's bench retries them.
        "--mysql-ignore-errors=1213,1205".into(),
    ];
    if params.rate > 0.0 {
        a.push(format!("--rate={}", params.rate.round().max(1.0) as u64));
    }
    a
}

/// The arguments of the measured `run` after [`args`].
pub fn run_args(params: &OltpParams) -> Vec<String> {
    vec![
        format!("--time={}", params.time_s.ceil().max(1.0) as u64),
        format!(
            "--report-interval={}",
            params.report_interval_s.round().max(1.0) as u64
        ),
        "--histogram=on".into(),
        "--percentile=95".into(),
        "run".into(),
    ]
}

/// One `--report-interval` line.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct IntervalLine {
    /// Seconds since the run started, at the interval's end.
    pub t_s: f64,
    /// Transactions per second.
    pub tps: f64,
    /// Queries per second.
    pub qps: f64,
    /// 95th percentile latency, ms.
    pub lat_p95_ms: f64,
    /// Errors (ignored deadlocks and lock-wait timeouts) per second.
    pub err_per_s: f64,
}

/// The number after `key` among `tokens`.
fn after(tokens: &[&str], key: &str) -> Option<f64> {
    let i = tokens.iter().position(|t| *t == key)?;
    tokens.get(i + 1)?.parse().ok()
}

/// Parse `[ 12s ] thds: 8 tps: 453.97 qps: 9083.42 (r/w/o: ...) lat
/// (ms,95%): 30.26 err/s: 0.00 reconn/s: 0.00`; `None` for any other line.
pub fn parse_interval(line: &str) -> Option<IntervalLine> {
    let rest = line.trim_start().strip_prefix('[')?;
    let (time, rest) = rest.split_once(']')?;
    let t_s: f64 = time.trim().strip_suffix('s')?.parse().ok()?;
    let tokens: Vec<&str> = rest.split_whitespace().collect();
    Some(IntervalLine {
        t_s,
        tps: after(&tokens, "tps:")?,
        qps: after(&tokens, "qps:")?,
        lat_p95_ms: after(&tokens, "(ms,95%):")?,
        err_per_s: after(&tokens, "err/s:").unwrap_or(0.0),
    })
}

/// What sysbench prints after the run.
#[derive(Debug)]
pub struct Final {
    /// Every transaction's latency (µs), from the histogram.
    pub latency_us: Histogram<u64>,
    /// The longest transaction, ms (the histogram's buckets round it).
    pub max_ms: Option<f64>,
    /// Transactions, as sysbench counted them.
    pub transactions: Option<u64>,
}

/// Parse the histogram and final statistics out of sysbench's `output`.
pub fn parse_final(output: &str) -> Result<Final, OltpError> {
    let mut latency_us = Histogram::new_with_bounds(1, 3_600_000_000, 3)
        .map_err(|e| OltpError::Data(format!("cannot create a latency histogram: {e}")))?;
    let mut in_histogram = false;
    let (mut max_ms, mut transactions) = (None, None);
    let mut in_latency = false;
    for line in output.lines() {
        let t = line.trim();
        if t.starts_with("Latency histogram") {
            in_histogram = true;
            continue;
        }
        if in_histogram {
            if t.starts_with("value") {
                continue;
            }
            let Some((value, bar)) = t.split_once('|') else {
                in_histogram = false;
                continue;
            };
            let (Ok(ms), Some(Ok(count))) = (
                value.trim().parse::<f64>(),
                bar.split_whitespace().last().map(str::parse::<u64>),
            ) else {
                in_histogram = false;
                continue;
            };
            let us = ((ms * 1000.0).round() as u64).max(1);
            latency_us.saturating_record_n(us, count);
            continue;
        }
        if t.starts_with("transactions:") {
            transactions = t.split_whitespace().nth(1).and_then(|n| n.parse().ok());
        }
        if t.starts_with("Latency (ms):") {
            in_latency = true;
        } else if in_latency && t.starts_with("max:") {
            max_ms = t.split_whitespace().nth(1).and_then(|n| n.parse().ok());
            in_latency = false;
        }
    }
    if latency_us.is_empty() {
        return Err(OltpError::Data(
            "sysbench printed no latency histogram (was the run cut short?)".into(),
        ));
    }
    Ok(Final {
        latency_us,
        max_ms,
        transactions,
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    const OUTPUT: &str = "Threads started!

[ 1s ] thds: 4 tps: 1057.73 qps: 21221.51 (r/w/o: 14869.14/4231.92/2120.45) lat (ms,95%): 5.28 err/s: 1.00 reconn/s: 0.00
[ 2s ] thds: 4 tps: 0.00 qps: 0.00 (r/w/o: 0.00/0.00/0.00) lat (ms,95%): 0.00 err/s: 0.00 reconn/s: 0.00
Latency histogram (values are in milliseconds)
       value  ------------- distribution ------------- count
       0.811 |                                         1
       5.280 |**********                               8
    4128.515 |*                                        1
 
SQL statistics:
    transactions:                        10   (5.00 per sec.)

Latency (ms):
         min:                                    0.81
         avg:                                    3.76
         max:                                 4130.34
         95th percentile:                        5.57
";

    #[test]
    fn interval_lines_and_the_final_statistics_parse() {
        let lines: Vec<IntervalLine> = OUTPUT.lines().filter_map(parse_interval).collect();
        assert_eq!(lines.len(), 2);
        assert_eq!(
            lines[0],
            IntervalLine {
                t_s: 1.0,
                tps: 1057.73,
                qps: 21221.51,
                lat_p95_ms: 5.28,
                err_per_s: 1.0
            }
        );
        assert_eq!(lines[1].tps, 0.0);
        assert!(parse_interval("Threads started!").is_none());
        let f = parse_final(OUTPUT).unwrap();
        assert_eq!(f.latency_us.len(), 10);
        assert_eq!(f.transactions, Some(10));
        assert_eq!(f.max_ms, Some(4130.34));
        assert!(f.latency_us.max() >= 4_120_000);
        assert!(parse_final("no histogram").is_err());
    }

    #[test]
    fn the_workload_reaches_sysbench() {
        let p = OltpParams {
            tables: 8,
            table_size: 200_000,
            threads: 8,
            time_s: 120.0,
            ..OltpParams::default()
        };
        let a = args(&p, "/tmp/s", "sbtest");
        for want in [
            "oltp_read_write",
            "--tables=8",
            "--table-size=200000",
            "--threads=8",
            "--rand-type=special",
            "--mysql-socket=/tmp/s",
        ] {
            assert!(a.contains(&want.to_string()), "{want} missing from {a:?}");
        }
        assert!(run_args(&p).contains(&"--time=120".to_string()));
    }
}
