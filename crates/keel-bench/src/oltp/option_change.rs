//! `--set-at AT:KEY=VALUE`: an engine option changed during a run's
//! measurement with [`keel::Db::set_option`], as a DBA changes a flushing
//! knob with `SET GLOBAL` (or switches `flush_policy` between `classic` and
//! `steady`). The schedule is checked against every run of a plan before
//! any work starts ([`check_option_schedule`]: each key one that changes at
//! run time, each value valid after the ones before it); during the
//! measurement the sampler applies each change as it falls due, as it does
//! device changes (`device_change::Pending`), and the report marks it on
//! every chart.

use std::str::FromStr;

use keel::{Db, Options, RUNTIME_OPTIONS};
use serde::{Deserialize, Serialize};

use super::device_change::{check_times, parse_at, Scheduled};
use super::{OltpError, OltpParams};

/// The command-line flag, for error messages.
pub const SET_AT_FLAG: &str = "--set-at";

/// One change of an engine option during a run's measurement.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct OptionChange {
    /// Seconds since the measurement started at which the change is due.
    pub at_s: f64,
    /// The option (one of `keel::RUNTIME_OPTIONS` but `device` and
    /// `fill_factor`).
    pub key: String,
    /// Its new value, as `--set` takes it.
    pub value: String,
    /// Seconds since the measurement started at which the change was
    /// applied; absent in a plan's schedule, present in a run's result.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub applied_at_s: Option<f64>,
}

/// Run-time options nothing reads during a measurement: only a bulk load
/// (`Table::bulk_load`) reads `fill_factor`, when it starts, and none runs
/// while the clients do. `--set-at` refuses them, as the bench refuses any
/// option that would be silently ignored.
const NOT_READ_DURING_A_RUN: &[&str] = &["fill_factor"];

/// The options `--set-at` changes: the run-time ones, `device` aside
/// (`--device-change` changes it, and checks its schedule against the
/// device model), and those in [`NOT_READ_DURING_A_RUN`].
fn settable() -> Vec<&'static str> {
    RUNTIME_OPTIONS
        .iter()
        .copied()
        .filter(|k| *k != "device" && !NOT_READ_DURING_A_RUN.contains(k))
        .collect()
}

impl FromStr for OptionChange {
    type Err = String;

    /// `AT:KEY=VALUE`: `AT` a time since the measurement started (`90`,
    /// `60s`, `1.5m`, `500ms`), `KEY` an option that changes at run time.
    fn from_str(s: &str) -> Result<Self, String> {
        let example = "e.g. 60s:flush_policy=steady or 1m:io_capacity=2000";
        let Some((at, assignment)) = s.split_once(':') else {
            return Err(format!("`{s}` is not AT:KEY=VALUE (no `:`; {example})"));
        };
        let at_s = parse_at(at.trim()).map_err(|why| format!("`{s}`: {why}"))?;
        let Some((key, value)) = assignment.split_once('=') else {
            return Err(format!(
                "`{s}` is not AT:KEY=VALUE (no `=` after the time; {example})"
            ));
        };
        let (key, value) = (key.trim(), value.trim());
        if key == "device" {
            return Err(format!(
                "`{s}`: the device changes with --device-change AT:SPEC, which checks that the \
                 run's device is modelled"
            ));
        }
        if NOT_READ_DURING_A_RUN.contains(&key) {
            return Err(format!(
                "`{s}`: `{key}` is read only when a bulk load starts, and none runs during the \
                 measurement, so the change would do nothing: give it with --set"
            ));
        }
        if !settable().contains(&key) {
            let kind = if Options::restart_only().iter().any(|k| k == key) {
                "needs a restart (it takes effect when the database is opened: give it with \
                 --set)"
            } else {
                "is not an option"
            };
            return Err(format!(
                "`{s}`: `{key}` {kind}; the options that change during a run are {}",
                settable().join(", ")
            ));
        }
        if value.is_empty() {
            return Err(format!("`{s}`: the value of `{key}` is empty"));
        }
        Ok(OptionChange {
            at_s,
            key: key.to_string(),
            value: value.to_string(),
            applied_at_s: None,
        })
    }
}

impl std::fmt::Display for OptionChange {
    /// `AT:KEY=VALUE` with AT in seconds (`60s:io_capacity=2000`), as
    /// `--set-at` takes it.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}s:{}={}", self.at_s, self.key, self.value)
    }
}

impl Scheduled for OptionChange {
    fn at_s(&self) -> f64 {
        self.at_s
    }
    fn applied_at(&self, at_s: f64) -> Self {
        OptionChange {
            applied_at_s: Some(at_s),
            ..self.clone()
        }
    }
    fn apply(&self, db: &Db) -> Result<(), OltpError> {
        Ok(db.set_option(&self.key, &self.value)?)
    }
}

/// Check a plan's option changes against one of its runs: in time order
/// (several may share a time: they are applied in the order given), each
/// before the end of the measurement, and each value valid on the run's
/// options with the changes before it made (as `Db::set_option` will check
/// it). Errors name the flag, the change and the run.
pub(crate) fn check_option_schedule(
    changes: &[OptionChange],
    params: &OltpParams,
    options: &Options,
    label: &str,
) -> Result<(), OltpError> {
    check_times(changes, false, params, label, SET_AT_FLAG)?;
    let mut o = options.clone();
    for c in changes {
        o.set(&c.key, &c.value)
            .and_then(|()| o.validate())
            .map_err(|e| OltpError::param(SET_AT_FLAG, format!("`{c}` in run `{label}`: {e}")))?;
    }
    Ok(())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn change(text: &str) -> OptionChange {
        text.parse().unwrap()
    }

    #[test]
    fn at_key_value_parses_and_prints_back() {
        let c = change("1m:flush_policy=steady");
        assert_eq!(
            (c.at_s, c.key.as_str(), c.value.as_str()),
            (60.0, "flush_policy", "steady")
        );
        assert_eq!(c.to_string(), "60s:flush_policy=steady");
        assert_eq!(change(" 90 : io_capacity = 2000 ").value, "2000");
        assert_eq!(change("500ms:lock_wait_timeout=0.5").at_s, 0.5);
    }

    #[test]
    fn every_run_time_option_but_the_device_and_fill_factor_can_change_mid_run() {
        let mut expected: Vec<&str> = RUNTIME_OPTIONS.to_vec();
        expected.retain(|k| !matches!(*k, "device" | "fill_factor"));
        assert_eq!(settable(), expected);
        for k in settable() {
            assert!(format!("1s:{k}=1").parse::<OptionChange>().is_ok(), "{k}");
        }
    }

    #[test]
    fn bad_changes_name_what_is_wrong() {
        for (text, needle) in [
            ("io_capacity=5", "no `:`"),
            ("60s:io_capacity", "no `=` after the time"),
            ("60x:io_capacity=5", "unknown time unit `x`"),
            ("60:page_size=8192", "`page_size` needs a restart"),
            ("60:buffer_pool_size=1GiB", "give it with --set"),
            ("60:io_capactiy=300", "`io_capactiy` is not an option"),
            (
                "60:io_capactiy=300",
                "change during a run are flush_policy, io_capacity",
            ),
            ("60:device=nvme", "--device-change"),
            ("60:fill_factor=70", "only when a bulk load starts"),
            ("60:fill_factor=70", "give it with --set"),
            ("60:io_capacity=", "empty"),
        ] {
            let e = text.parse::<OptionChange>().unwrap_err();
            assert!(e.contains(needle), "{text}: {e}");
        }
    }

    #[test]
    fn schedules_must_be_ordered_before_the_end_and_valid_in_turn() {
        let params = OltpParams {
            time_s: 10.0,
            ..OltpParams::default()
        };
        let o = Options::default();
        let check = |texts: &[&str]| {
            let changes: Vec<_> = texts.iter().map(|t| change(t)).collect();
            check_option_schedule(&changes, &params, &o, "run1").map_err(|e| e.to_string())
        };
        check(&[]).unwrap();
        check(&[
            "2:flush_policy=classic",
            "2:io_capacity=1000",
            "5:io_capacity_max=3000",
            "9.5:flush_policy=steady",
        ])
        .unwrap();
        for (texts, needle) in [
            (
                &["5:io_capacity=300", "2:io_capacity=400"][..],
                "give the changes in time order",
            ),
            (&["10:io_capacity=300"], "not before the end of run `run1`"),
            (&["1:io_capacity=50"], "`1s:io_capacity=50` in run `run1`"),
            (&["1:io_capacity=50"], "below InnoDB's minimum"),
            (&["1:flush_policy=fast"], "`1s:flush_policy=fast`"),
            (
                &["1:io_capacity_max=3000", "2:io_capacity=4000"],
                "`2s:io_capacity=4000`",
            ),
        ] {
            let e = check(texts).unwrap_err();
            assert!(e.contains(SET_AT_FLAG), "{texts:?}: {e}");
            assert!(e.contains(needle), "{texts:?}: {e}");
        }
    }
}
