#![allow(clippy::unwrap_used)]
//! `keel iobench --mode wrnd,flush` end to end, tiny: the engine's flusher
//! measured beside the device, and `flush ÷ wrnd` in stdout and the JSON.

mod common;

use common::keel;

/// A directory on the disk the project is built on (O_DIRECT works there,
/// unlike on a tmpfs).
fn scratch() -> tempfile::TempDir {
    tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap()
}

#[test]
fn iobench_flush_beside_wrnd_prints_and_writes_the_ratio() {
    let dir = scratch();
    let data = dir.path().join("data");
    std::fs::create_dir(&data).unwrap();
    let json = dir.path().join("iobench.json");
    let report = dir.path().join("report");
    let args = [
        "iobench",
        "--mode",
        "wrnd,flush",
        "--bs",
        "16k",
        "--threads",
        "1,4",
        "--device",
        "sata-ssd",
        "--time",
        "0.3",
        "--warmup",
        "0.1",
        "--file-size",
        "4MiB",
        "--dir",
        data.to_str().unwrap(),
        "--json",
        json.to_str().unwrap(),
        "--report",
        report.to_str().unwrap(),
    ];
    let run = keel(&args);
    let out = run.text();
    assert!(run.ok(), "{out}");
    // The table: two flush rows with positive IOPS and their ratio.
    let flush_rows: Vec<&str> = run
        .stdout
        .lines()
        .filter(|l| l.split_whitespace().take(2).eq(["flush", "16k"]))
        .collect();
    assert_eq!(flush_rows.len(), 2, "{out}");
    for row in &flush_rows {
        let iops: f64 = row.split_whitespace().nth(5).unwrap().parse().unwrap();
        assert!(iops > 0.0, "{row}");
        assert!(
            row.contains("flush÷wrnd") && row.contains("doublewrite off"),
            "{row}"
        );
    }
    // The summary block, one line per depth.
    let summary: Vec<&str> = run
        .stdout
        .lines()
        .skip_while(|l| !l.starts_with("flush ÷ wrnd"))
        .take(4)
        .collect();
    assert_eq!(summary.len(), 4, "{out}");
    assert!(summary[0].contains("device sata-ssd"), "{out}");
    for (line, threads) in summary[2..].iter().zip(["1", "4"]) {
        let cols: Vec<&str> = line.split_whitespace().collect();
        assert_eq!((cols[0], cols[1]), ("16k", threads), "{line}");
        assert!(cols[6].parse::<f64>().unwrap() > 0.0, "{line}");
    }
    // The JSON.
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let ratios = doc["flush_vs_wrnd"].as_array().unwrap();
    assert_eq!(ratios.len(), 2, "{doc}");
    for r in ratios {
        assert!(r["ratio"].as_f64().unwrap() > 0.0, "{r}");
        assert_eq!(r["device"], "sata-ssd");
    }
    let flush: Vec<_> = doc["cases"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["mode"] == "flush")
        .collect();
    assert_eq!(flush.len(), 2);
    for c in flush {
        assert!(c["iops"].as_f64().unwrap() > 0.0, "{c}");
        assert!(c["flush"]["vs_wrnd"].as_f64().unwrap() > 0.0, "{c}");
        assert_eq!(c["flush"]["doublewrite"], false);
    }
    let page = std::fs::read_to_string(report.join("index.html")).unwrap();
    assert!(page.contains("flush ÷ wrnd"));
    // Neither the data files nor the flush database are left behind.
    assert_eq!(std::fs::read_dir(&data).unwrap().count(), 0);
}

#[test]
fn iobench_flush_refuses_a_page_size_the_engine_does_not_take() {
    let dir = scratch();
    let run = keel(&[
        "iobench",
        "--mode",
        "flush",
        "--bs",
        "12k",
        "--dir",
        dir.path().to_str().unwrap(),
    ]);
    let out = run.text();
    assert!(!run.ok(), "{out}");
    assert!(
        out.contains("--bs 12k cannot be used with --mode flush") && out.contains("page_size"),
        "{out}"
    );
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
}

#[test]
fn iobench_help_describes_the_flush_mode() {
    let run = keel(&["iobench", "--help"]);
    assert!(run.ok(), "{}", run.text());
    for needle in [
        "flush (the engine's own page flusher",
        "--doublewrite",
        "4096",
    ] {
        assert!(run.stdout.contains(needle), "{needle}: {}", run.stdout);
    }
}
