//! `--device-change AT:SPEC`: a device that changes speed during a run (a
//! RAID controller's battery failing, a backup taking half the disk). The
//! schedule is checked against every run of a plan before any work starts
//! ([`check_schedule`]); during the measurement the sampler thread applies
//! each change with [`keel::Db::set_device`] when it falls due
//! ([`Pending`]), so no extra thread runs and a change lands between two
//! of the sampler's looks at the clock, well within 100 ms of its time.

use std::str::FromStr;
use std::time::{Duration, Instant};

use keel::io::ThrottleSpec;
use keel::{Db, Options};
use serde::{Deserialize, Serialize};

use super::{OltpError, OltpParams};

/// The command-line flag, for error messages.
pub const DEVICE_CHANGE_FLAG: &str = "--device-change";

/// One change of the device model during a run's measurement.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DeviceChange {
    /// Seconds since the measurement started at which the change is due.
    pub at_s: f64,
    /// The device from then on, as the engine prints it (a preset's name
    /// or `iops=..,bw=..,lat=..,seek=..,qd=..`).
    pub spec: String,
    /// Seconds since the measurement started at which the change was
    /// applied; absent in a plan's schedule, present in a run's result.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub applied_at_s: Option<f64>,
}

impl FromStr for DeviceChange {
    type Err = String;

    /// `AT:SPEC`: `AT` a time since the measurement started (`90`, `60s`,
    /// `1.5m`, `500ms`), `SPEC` a device spec or preset as `--device` takes.
    fn from_str(s: &str) -> Result<Self, String> {
        let Some((at, spec)) = s.split_once(':') else {
            let missing = if parse_at(s.trim()).is_ok() {
                "the SPEC is missing"
            } else {
                "no `:`"
            };
            return Err(format!(
                "`{s}` is not AT:SPEC ({missing}; e.g. 60s:iops=250 or 1m30s:hdd-raid10)"
            ));
        };
        let at_s = parse_at(at.trim()).map_err(|why| format!("`{s}`: {why}"))?;
        let spec: ThrottleSpec = spec.trim().parse().map_err(|e| format!("`{s}`: {e}"))?;
        Ok(DeviceChange {
            at_s,
            spec: spec.to_string(),
            applied_at_s: None,
        })
    }
}

impl std::fmt::Display for DeviceChange {
    /// `AT:SPEC` with AT in seconds (`60s:iops=250`), as `--device-change`
    /// takes it.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}s:{}", self.at_s, self.spec)
    }
}

/// A time since the measurement started: a number of seconds (`90`,
/// `1.5`), or numbers each with a unit `ms`, `s`, `m` (or `min`) or `h`,
/// added up (`60s`, `1.5m`, `500ms`, `1m30s`, `1h2m`).
pub(crate) fn parse_at(text: &str) -> Result<f64, String> {
    let not_a_time = || {
        format!(
            "`{text}` is not a time (seconds, e.g. 90, or with units ms, s, m, h, e.g. 60s, \
             1m30s, 500ms)"
        )
    };
    if let Ok(secs) = text.parse::<f64>() {
        return if secs.is_finite() && secs >= 0.0 && !text.starts_with(['+', '-']) {
            Ok(secs)
        } else {
            Err(not_a_time())
        };
    }
    let mut rest = text;
    let mut secs = 0.0;
    while !rest.is_empty() {
        let number_end = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let (number, after) = rest.split_at(number_end);
        let unit_end = after
            .find(|c: char| !c.is_ascii_alphabetic())
            .unwrap_or(after.len());
        let (unit, after) = after.split_at(unit_end);
        let Ok(n) = number.parse::<f64>() else {
            return Err(not_a_time());
        };
        let secs_per_unit = match unit {
            "ms" => 1e-3,
            "s" => 1.0,
            "m" | "min" => 60.0,
            "h" => 3600.0,
            "" => return Err(not_a_time()),
            other => {
                return Err(format!(
                    "unknown time unit `{other}` in `{text}` (expected ms, s, m or h; a bare \
                     number is seconds)"
                ))
            }
        };
        secs += n * secs_per_unit;
        rest = after;
    }
    if secs.is_finite() {
        Ok(secs)
    } else {
        Err(format!("`{text}` is too long"))
    }
}

/// A change scheduled during a run's measurement: a device change or an
/// option change.
pub(crate) trait Scheduled: Clone + std::fmt::Display {
    /// Seconds since the measurement started at which it is due.
    fn at_s(&self) -> f64;
    /// The change as applied `at_s` seconds after the measurement started.
    fn applied_at(&self, at_s: f64) -> Self;
    /// Make the change on `db`.
    fn apply(&self, db: &Db) -> Result<(), OltpError>;
}

impl Scheduled for DeviceChange {
    fn at_s(&self) -> f64 {
        self.at_s
    }
    fn applied_at(&self, at_s: f64) -> Self {
        DeviceChange {
            applied_at_s: Some(at_s),
            ..self.clone()
        }
    }
    fn apply(&self, db: &Db) -> Result<(), OltpError> {
        Ok(db.set_device(&self.spec)?)
    }
}

/// Check a schedule's times against one of its runs: in time order
/// (`strict`: no two at the same time), the last before the end of the
/// measurement. Errors name `flag` and the run.
pub(crate) fn check_times<C: Scheduled>(
    changes: &[C],
    strict: bool,
    params: &OltpParams,
    label: &str,
    flag: &'static str,
) -> Result<(), OltpError> {
    let bad = |why: String| Err(OltpError::param(flag, why));
    for pair in changes.windows(2) {
        let (a, b) = (&pair[0], &pair[1]);
        if strict && b.at_s() == a.at_s() {
            return bad(format!(
                "`{a}` and `{b}` are due at the same time; give one change per time"
            ));
        }
        if b.at_s() < a.at_s() {
            return bad(format!(
                "`{b}` is given after `{a}`; give the changes in time order"
            ));
        }
    }
    if let Some(last) = changes.last() {
        if last.at_s() >= params.time_s {
            return bad(format!(
                "`{last}` is not before the end of run `{label}`'s measurement (--time {}): \
                 a change at or after the end would never be applied",
                params.time_s
            ));
        }
    }
    Ok(())
}

/// Check a plan's schedule against one of its runs: times in increasing
/// order, each before the end of the measurement, on a device the engine
/// models (the engine refuses to change `device = unlimited`, whose files
/// pass through unwrapped). Errors name the flag and the run.
pub(crate) fn check_schedule(
    changes: &[DeviceChange],
    params: &OltpParams,
    options: &Options,
    label: &str,
) -> Result<(), OltpError> {
    if changes.is_empty() {
        return Ok(());
    }
    if options.device_spec()?.is_unlimited() {
        return Err(OltpError::param(
            DEVICE_CHANGE_FLAG,
            format!(
                "run `{label}` uses device = unlimited, whose files the engine passes through \
                 unmodelled, so its device cannot change; give a throttled --device, e.g. --device nvme"
            ),
        ));
    }
    check_times(changes, true, params, label, DEVICE_CHANGE_FLAG)
}

/// A run's changes of one kind not yet applied, against the start of its
/// measurement.
pub(crate) struct Pending<'a, C> {
    changes: &'a [C],
    t0: Instant,
    applied: Vec<C>,
}

impl<'a, C: Scheduled> Pending<'a, C> {
    /// `changes` in time order (see [`check_times`]), measured from `t0`.
    pub(crate) fn new(changes: &'a [C], t0: Instant) -> Self {
        Pending {
            changes,
            t0,
            applied: Vec::with_capacity(changes.len()),
        }
    }

    /// Nothing to apply: the warm-up, or a run without changes.
    pub(crate) fn none() -> Pending<'static, C> {
        Pending::new(&[], Instant::now())
    }

    /// When the next change is due.
    pub(crate) fn next_due(&self) -> Option<Instant> {
        self.changes
            .get(self.applied.len())
            .map(|c| self.t0 + Duration::from_secs_f64(c.at_s()))
    }

    /// Apply every change due by `now`, reporting each as applied.
    pub(crate) fn apply_due(
        &mut self,
        db: &Db,
        now: Instant,
        on_applied: &mut dyn FnMut(&C),
    ) -> Result<(), OltpError> {
        while self.next_due().is_some_and(|due| due <= now) {
            let change = &self.changes[self.applied.len()];
            change.apply(db)?;
            let applied = change.applied_at(self.t0.elapsed().as_secs_f64());
            on_applied(&applied);
            self.applied.push(applied);
        }
        Ok(())
    }

    /// The changes applied so far.
    pub(crate) fn into_applied(self) -> Vec<C> {
        self.applied
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn change(text: &str) -> DeviceChange {
        text.parse().unwrap()
    }

    #[test]
    fn at_spec_parses_times_in_every_unit_and_prints_the_spec_canonically() {
        for (text, at_s, spec) in [
            ("60s:iops=250", 60.0, "iops=250"),
            ("90:hdd-raid10", 90.0, "hdd-raid10"),
            (
                "1.5m:iops=1500,bw=300MiB,lat=200us,seek=5ms,qd=8",
                90.0,
                "hdd-raid10",
            ),
            (
                "500ms: sata-ssd,qd=1",
                0.5,
                "iops=30000,bw=468MiB,lat=100us,qd=1",
            ),
            ("0:unlimited", 0.0, "unlimited"),
            ("1h:NVME", 3600.0, "nvme"),
            ("1m30s:nvme", 90.0, "nvme"),
            ("1h2m3.5s:nvme", 3723.5, "nvme"),
            ("2min:nvme", 120.0, "nvme"),
        ] {
            let c = change(text);
            assert_eq!((c.at_s, c.spec.as_str()), (at_s, spec), "{text}");
            assert_eq!(c.applied_at_s, None);
        }
    }

    #[test]
    fn bad_values_name_what_is_wrong() {
        for (text, needle) in [
            ("iops=250", "is not AT:SPEC (no `:`"),
            ("60s", "`60s` is not AT:SPEC (the SPEC is missing"),
            ("60x:nvme", "unknown time unit `x`"),
            ("-5:nvme", "`-5` is not a time"),
            ("s:nvme", "`s` is not a time"),
            ("abc:sata-ssd", "`abc` is not a time"),
            ("1m30:nvme", "`1m30` is not a time"),
            ("inf:nvme", "`inf` is not a time"),
            ("1.2.3s:nvme", "`1.2.3s` is not a time"),
            ("60:ssd", "`ssd` is neither"),
            ("60:iops=fast", "`iops=fast`"),
            ("60:", "empty"),
        ] {
            let e = text.parse::<DeviceChange>().unwrap_err();
            assert!(e.contains(needle), "{text}: {e}");
        }
    }

    #[test]
    fn schedules_must_be_ordered_distinct_before_the_end_and_on_a_modelled_device() {
        let params = OltpParams {
            time_s: 10.0,
            ..OltpParams::default()
        };
        let mut nvme = Options::default();
        nvme.set("device", "nvme").unwrap();
        let check = |texts: &[&str], o: &Options| {
            let changes: Vec<_> = texts.iter().map(|t| change(t)).collect();
            check_schedule(&changes, &params, o, "run1").map_err(|e| e.to_string())
        };
        check(&[], &Options::default()).unwrap();
        check(&["0:iops=100", "5s:unlimited", "9.9:nvme"], &nvme).unwrap();
        for (texts, options, needle) in [
            (
                &["2:nvme", "2s:iops=5"][..],
                &nvme,
                "`2s:nvme` and `2s:iops=5` are due",
            ),
            (
                &["5:nvme", "2:iops=5"],
                &nvme,
                "`2s:iops=5` is given after `5s:nvme`",
            ),
            (&["10:iops=5"], &nvme, "not before the end of run `run1`"),
            (&["1m:iops=5"], &nvme, "`60s:iops=5` is not before the end"),
            (&["1m:iops=5"], &nvme, "(--time 10)"),
            (&["1:iops=5"], &Options::default(), "device = unlimited"),
        ] {
            let e = check(texts, options).unwrap_err();
            assert!(e.contains(DEVICE_CHANGE_FLAG), "{texts:?}: {e}");
            assert!(e.contains(needle), "{texts:?}: {e}");
        }
    }
}
