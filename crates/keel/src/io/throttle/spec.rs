//! [`ThrottleSpec`]: the parameters of a throttled device, parsed from and
//! printed as `iops=1500,bw=120MiB,lat=100us,seek=4ms,qd=8` or a preset name
//! (the presets and their reasons are in the parent module's documentation).

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

/// The parameters of a throttled device. `Default` is unlimited.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ThrottleSpec {
    /// Requests per second; `None`: no limit.
    pub iops: Option<f64>,
    /// Bytes per second; `None`: no limit.
    pub bw_bytes_per_s: Option<f64>,
    /// Service time of every request (and of a sync).
    pub lat: Duration,
    /// Extra time for a request that does not start where the previous request
    /// on the same file ended.
    pub seek: Duration,
    /// Most requests in service at once; `None`: unbounded.
    pub qd: Option<usize>,
}

const PRESET_NAMES: [&str; 4] = ["unlimited", "hdd-raid10", "sata-ssd", "nvme"];
const KEYS: &str = "iops, bw, lat, seek, qd";
const MIB: f64 = (1u64 << 20) as f64;

impl ThrottleSpec {
    /// No throttling at all.
    pub fn unlimited() -> Self {
        Self::default()
    }

    /// Eight 7.2k-rpm disks in RAID10 (see the module documentation).
    pub fn hdd_raid10() -> Self {
        Self {
            iops: Some(1500.0),
            bw_bytes_per_s: Some(300.0 * MIB),
            lat: Duration::from_micros(200),
            seek: Duration::from_millis(5),
            qd: Some(8),
        }
    }

    /// The seed reports' SATA SSD.
    pub fn sata_ssd() -> Self {
        Self {
            iops: Some(30_000.0),
            bw_bytes_per_s: Some(468.0 * MIB),
            lat: Duration::from_micros(100),
            seek: Duration::ZERO,
            qd: Some(32),
        }
    }

    /// A mid-range NVMe drive.
    pub fn nvme() -> Self {
        Self {
            iops: Some(200_000.0),
            bw_bytes_per_s: Some(2048.0 * MIB),
            lat: Duration::from_micros(20),
            seek: Duration::ZERO,
            qd: Some(128),
        }
    }

    /// The preset called `name` (case-insensitive).
    pub fn preset(name: &str) -> Option<Self> {
        match name.trim().to_ascii_lowercase().as_str() {
            "unlimited" => Some(Self::unlimited()),
            "hdd-raid10" => Some(Self::hdd_raid10()),
            "sata-ssd" => Some(Self::sata_ssd()),
            "nvme" => Some(Self::nvme()),
            _ => None,
        }
    }

    /// The name of the preset equal to this spec, if any.
    pub fn preset_name(&self) -> Option<&'static str> {
        PRESET_NAMES
            .into_iter()
            .find(|name| Self::preset(name).as_ref() == Some(self))
    }

    /// True when the spec throttles nothing (a queue depth alone costs
    /// nothing when every request takes no time).
    pub fn is_unlimited(&self) -> bool {
        self.iops.is_none()
            && self.bw_bytes_per_s.is_none()
            && self.lat.is_zero()
            && self.seek.is_zero()
    }

    /// Check the values a caller may have set by hand: rates positive and
    /// finite, queue depth at least 1.
    pub fn validate(&self) -> Result<(), ParseThrottleSpecError> {
        let bad = |reason: String| Err(ParseThrottleSpecError::new(&self.to_string(), reason));
        for (key, rate) in [("iops", self.iops), ("bw", self.bw_bytes_per_s)] {
            if let Some(rate) = rate.filter(|r| !(r.is_finite() && *r > 0.0)) {
                return bad(format!("`{key}` must be positive and finite, not {rate}"));
            }
        }
        if self.qd == Some(0) {
            return bad("`qd` must be at least 1".to_owned());
        }
        Ok(())
    }

    fn set(&mut self, key: &str, value: &str) -> Result<(), String> {
        match key {
            "iops" => self.iops = Some(parse_positive(value.strip_suffix("/s").unwrap_or(value))?),
            "bw" => self.bw_bytes_per_s = Some(parse_bytes(value)?),
            "lat" => self.lat = parse_duration(value)?,
            "seek" => self.seek = parse_duration(value)?,
            "qd" => match value.parse::<usize>() {
                Ok(qd) if qd > 0 => self.qd = Some(qd),
                _ => return Err("expected a whole number of at least 1".to_owned()),
            },
            _ => return Err(format!("unknown key (expected one of {KEYS})")),
        }
        Ok(())
    }
}

/// A throttle spec that cannot be parsed or holds an invalid value.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("invalid throttle spec `{spec}`: {reason}")]
pub struct ParseThrottleSpecError {
    /// The whole spec given.
    pub spec: String,
    /// What is wrong, naming the offending item.
    pub reason: String,
}

impl ParseThrottleSpecError {
    fn new(spec: &str, reason: String) -> Self {
        Self {
            spec: spec.to_owned(),
            reason,
        }
    }
}

impl FromStr for ThrottleSpec {
    type Err = ParseThrottleSpecError;

    /// `key=value` items separated by commas (keys `iops`, `bw`, `lat`,
    /// `seek`, `qd`, any subset, each at most once), or a preset name, which
    /// may be followed by items that override it: `sata-ssd,qd=1`.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let fail = |reason: String| ParseThrottleSpecError::new(s, reason);
        if s.trim().is_empty() {
            return Err(fail(format!(
                "empty (give `key=value` items with keys {KEYS}, or a preset)"
            )));
        }
        let mut spec = Self::default();
        let mut seen: Vec<&str> = Vec::new();
        for (i, item) in s.split(',').map(str::trim).enumerate() {
            let Some((key, value)) = item.split_once('=') else {
                match Self::preset(item) {
                    Some(preset) if i == 0 => {
                        spec = preset;
                        continue;
                    }
                    _ => {
                        return Err(fail(format!(
                        "`{item}` is neither `key=value` (keys {KEYS}) nor, first, a preset ({})",
                        PRESET_NAMES.join(", ")
                    )))
                    }
                }
            };
            let key = key.trim();
            if seen.contains(&key) {
                return Err(fail(format!("`{key}` is given twice")));
            }
            seen.push(key);
            spec.set(key, value.trim())
                .map_err(|reason| fail(format!("`{item}`: {reason}")))?;
        }
        Ok(spec)
    }
}

impl fmt::Display for ThrottleSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(name) = self.preset_name() {
            return f.write_str(name);
        }
        let mut items = Vec::new();
        if let Some(iops) = self.iops {
            items.push(format!("iops={iops}"));
        }
        if let Some(bw) = self.bw_bytes_per_s {
            items.push(format!("bw={}", format_bytes(bw)));
        }
        if !self.lat.is_zero() {
            items.push(format!("lat={}", format_duration(self.lat)));
        }
        if !self.seek.is_zero() {
            items.push(format!("seek={}", format_duration(self.seek)));
        }
        if let Some(qd) = self.qd {
            items.push(format!("qd={qd}"));
        }
        f.write_str(&items.join(","))
    }
}

impl serde::Serialize for ThrottleSpec {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> serde::Deserialize<'de> for ThrottleSpec {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

/// Split `"120MiB"` into `(120.0, "MiB")`.
fn split_number(value: &str) -> Result<(f64, &str), String> {
    let end = value
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(value.len());
    let (number, unit) = value.split_at(end);
    match number.parse::<f64>() {
        Ok(n) => Ok((n, unit.trim())),
        Err(_) => Err(format!("`{value}` does not start with a number")),
    }
}

fn parse_positive(value: &str) -> Result<f64, String> {
    match value.parse::<f64>() {
        Ok(v) if v.is_finite() && v > 0.0 => Ok(v),
        _ => Err(format!("`{value}` is not a positive number")),
    }
}

const BYTE_UNITS: [(&str, f64); 7] = [
    ("GiB", 1_073_741_824.0),
    ("GB", 1e9),
    ("MiB", 1_048_576.0),
    ("MB", 1e6),
    ("KiB", 1024.0),
    ("KB", 1e3),
    ("B", 1.0),
];

/// A bandwidth such as `120MiB`, `120MiB/s`, `1.5GB` or `4096` (bytes).
fn parse_bytes(value: &str) -> Result<f64, String> {
    let (n, unit) = split_number(value.strip_suffix("/s").unwrap_or(value))?;
    let mult = match unit {
        "" => 1.0,
        _ => BYTE_UNITS
            .iter()
            .find(|(name, _)| name.eq_ignore_ascii_case(unit))
            .map(|&(_, mult)| mult)
            .ok_or_else(|| {
                format!(
                    "unknown unit `{unit}` (expected B, KiB, MiB, GiB, KB, MB or GB per second)"
                )
            })?,
    };
    let bytes = n * mult;
    if bytes.is_finite() && bytes > 0.0 {
        Ok(bytes)
    } else {
        Err(format!("bandwidth `{value}` must be positive"))
    }
}

fn format_bytes(bytes: f64) -> String {
    if bytes.fract() != 0.0 || bytes >= 2f64.powi(63) {
        return format!("{bytes}B");
    }
    let mut n = bytes;
    let mut unit = "B";
    for (name, mult) in BYTE_UNITS {
        if bytes % mult == 0.0 {
            n = bytes / mult;
            unit = name;
            break;
        }
    }
    format!("{n}{unit}")
}

const TIME_UNITS: [(&str, u64); 5] = [
    ("s", 1_000_000_000),
    ("ms", 1_000_000),
    ("us", 1_000),
    ("µs", 1_000),
    ("ns", 1),
];

/// A time such as `100us`, `4ms`, `0.5s` or a bare `0`.
fn parse_duration(value: &str) -> Result<Duration, String> {
    let (n, unit) = split_number(value)?;
    let ns_per_unit = match TIME_UNITS
        .iter()
        .find(|(name, _)| *name == unit.to_ascii_lowercase())
    {
        Some(&(_, ns)) => ns,
        None if unit.is_empty() && n == 0.0 => 1,
        None if unit.is_empty() => return Err(format!("`{value}` needs a unit: ns, us, ms or s")),
        None => return Err(format!("unknown unit `{unit}` (expected ns, us, ms or s)")),
    };
    let ns = (n * ns_per_unit as f64).round();
    if ns >= u64::MAX as f64 {
        return Err(format!("`{value}` is too long"));
    }
    Ok(Duration::from_nanos(ns as u64))
}

fn format_duration(d: Duration) -> String {
    let ns = d.as_nanos();
    let (name, per) = TIME_UNITS
        .into_iter()
        .find(|&(_, per)| ns.is_multiple_of(u128::from(per)))
        .unwrap_or(("ns", 1));
    format!("{}{name}", ns / u128::from(per))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn spec_parses_every_key_and_prints_canonically() {
        let spec: ThrottleSpec = " iops=1500, bw=120MiB/s ,lat=100us,seek=4ms,qd=8"
            .parse()
            .unwrap();
        let want = ThrottleSpec {
            iops: Some(1500.0),
            bw_bytes_per_s: Some(120.0 * MIB),
            lat: Duration::from_micros(100),
            seek: ms(4),
            qd: Some(8),
        };
        assert_eq!(spec, want);
        assert_eq!(
            spec.to_string(),
            "iops=1500,bw=120MiB,lat=100us,seek=4ms,qd=8"
        );
        for text in [
            "bw=1GB",
            "bw=1536KiB",
            "bw=1001B",
            "lat=1s",
            "seek=250ns",
            "iops=0.5",
            "qd=1",
        ] {
            let spec: ThrottleSpec = text.parse().unwrap();
            assert_eq!(spec.to_string(), text);
        }
        let spec: ThrottleSpec = "bw=1.5MiB,lat=0.5ms,seek=0".parse().unwrap();
        assert_eq!(spec.to_string(), "bw=1536KiB,lat=500us");
        let spec: ThrottleSpec = "bw=2kb,lat=3MS,seek=7µs".parse().unwrap();
        assert_eq!(spec.to_string(), "bw=2KB,lat=3ms,seek=7us");
        assert_eq!(
            "bw=4096".parse::<ThrottleSpec>().unwrap().bw_bytes_per_s,
            Some(4096.0)
        );
    }

    #[test]
    fn presets_parse_and_print_by_name() {
        for name in PRESET_NAMES {
            let spec: ThrottleSpec = name.parse().unwrap();
            assert_eq!(spec.to_string(), name);
            assert_eq!(spec.preset_name(), Some(name));
        }
        let spelled: ThrottleSpec = "iops=1500,bw=300MiB,lat=200us,seek=5ms,qd=8"
            .parse()
            .unwrap();
        assert_eq!(spelled.to_string(), "hdd-raid10");
        assert_eq!(
            "SATA-SSD".parse::<ThrottleSpec>().unwrap(),
            ThrottleSpec::sata_ssd()
        );
        assert_eq!(
            ThrottleSpec::nvme().bw_bytes_per_s,
            Some(2.0 * 1024.0 * MIB)
        );
        let tuned: ThrottleSpec = "sata-ssd,qd=1".parse().unwrap();
        assert_eq!(tuned.to_string(), "iops=30000,bw=468MiB,lat=100us,qd=1");
        assert!(ThrottleSpec::unlimited().is_unlimited());
        assert!(!ThrottleSpec::nvme().is_unlimited());
    }

    #[test]
    fn spec_errors_name_the_bad_item() {
        let cases = [
            ("", "empty"),
            ("iops=fast", "`iops=fast`"),
            ("iops=-5", "`iops=-5`"),
            ("bw=12XB", "unknown unit `XB`"),
            ("bw=0MiB", "`bw=0MiB`"),
            ("lat=5", "needs a unit"),
            ("seek=3 hours", "unknown unit `hours`"),
            ("qd=0", "`qd=0`"),
            ("qd=2.5", "`qd=2.5`"),
            ("speed=9", "unknown key"),
            ("iops=1,iops=2", "`iops` is given twice"),
            ("iops=1,,qd=2", "`` is neither"),
            ("qd=2,nvme", "`nvme` is neither"),
            ("ssd", "`ssd` is neither"),
        ];
        for (text, needle) in cases {
            let err = text.parse::<ThrottleSpec>().unwrap_err();
            let message = err.to_string();
            assert!(message.contains(needle), "`{text}` gave: {message}");
            assert!(
                message.starts_with(&format!("invalid throttle spec `{text}`")),
                "{message}"
            );
        }
    }

    #[test]
    fn validate_rejects_hand_built_nonsense() {
        assert!(ThrottleSpec::hdd_raid10().validate().is_ok());
        let zero_qd = ThrottleSpec {
            qd: Some(0),
            ..ThrottleSpec::default()
        };
        assert!(zero_qd.validate().unwrap_err().reason.contains("qd"));
        let nan = ThrottleSpec {
            iops: Some(f64::NAN),
            ..ThrottleSpec::default()
        };
        assert!(nan.validate().unwrap_err().reason.contains("iops"));
    }

    #[test]
    fn spec_serde_uses_the_string_form() {
        #[derive(serde::Serialize, serde::Deserialize)]
        struct Opts {
            device: ThrottleSpec,
        }
        let text = toml::to_string(&Opts {
            device: ThrottleSpec::hdd_raid10(),
        })
        .unwrap();
        assert_eq!(text.trim(), "device = \"hdd-raid10\"");
        let opts: Opts = toml::from_str("device = \"iops=100,qd=2\"").unwrap();
        assert_eq!(opts.device.iops, Some(100.0));
        let err = toml::from_str::<Opts>("device = \"iops=\"")
            .err()
            .unwrap()
            .to_string();
        assert!(err.contains("invalid throttle spec"), "{err}");
    }
}
