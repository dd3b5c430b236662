//! `--hold-view AT:FOR`: a long-running read view during a run's
//! measurement, as a long report query or a transaction someone forgot to
//! close leaves one. At AT a thread of its own (not one of the clients)
//! begins a REPEATABLE-READ transaction on Keel's `Db`, reads one row so
//! that its snapshot is taken, and keeps the transaction open for FOR
//! seconds (or until the run ends), then rolls it back. The writers are not
//! stopped: they go on committing, the history list grows because purge
//! cannot remove what the view might still read, and purge catches up once
//! the view is gone. The schedule is checked against every run of a plan
//! before any work starts ([`check_hold_view`]); the sampler reports the
//! opening and the release as they happen, and the report marks both on
//! every chart.

use std::str::FromStr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use keel::{Db, Isolation};
use serde::{Deserialize, Serialize};

use super::device_change::parse_at;
use super::rows::{primary_key, table_name};
use super::runner::sleep_until;
use super::{OltpError, OltpParams};

/// The command-line flag, for error messages.
pub const HOLD_VIEW_FLAG: &str = "--hold-view";

/// A read view held open during a run's measurement: the schedule, and in
/// a run's result when it was opened and released.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct HoldView {
    /// Seconds since the measurement started at which the view is due to
    /// open.
    pub at_s: f64,
    /// Seconds it is to be held (the run's end releases it sooner).
    pub for_s: f64,
    /// Seconds since the measurement started at which the view was opened
    /// (its snapshot taken); absent in a plan's schedule, and in a run's
    /// result if the run ended before it was due.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub opened_at_s: Option<f64>,
    /// Seconds since the measurement started at which the view was
    /// released (its transaction rolled back); absent where it was never
    /// opened.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub released_at_s: Option<f64>,
    /// True when the end of the run released it, before FOR had passed.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub until_end: bool,
}

impl HoldView {
    /// When the view is due to be released: AT + FOR.
    pub fn release_due_s(&self) -> f64 {
        self.at_s + self.for_s
    }

    /// Whether a run of `params` ends before the view is due to be
    /// released (it is then held until the end).
    pub fn held_until_end(&self, params: &OltpParams) -> bool {
        self.release_due_s() >= params.time_s
    }

    /// A note on the schedule for a run of `params` named `label`, when
    /// the view outlasts it: said before the run starts.
    pub fn note(&self, params: &OltpParams, label: &str) -> Option<String> {
        self.held_until_end(params).then(|| {
            format!(
                "{HOLD_VIEW_FLAG} {self}: AT + FOR = {} s is not before the end of run \
                 `{label}`'s measurement (--time {}): the view is held until the run ends",
                self.release_due_s(),
                params.time_s
            )
        })
    }
}

impl FromStr for HoldView {
    type Err = String;

    /// `AT:FOR`: `AT` a time since the measurement started, `FOR` how long
    /// to hold the view, each as `--set-at` takes a time (`90`, `60s`,
    /// `1.5m`, `500ms`).
    fn from_str(s: &str) -> Result<Self, String> {
        let example = "e.g. 0:300 or 30s:2m";
        let Some((at, hold)) = s.split_once(':') else {
            return Err(format!("`{s}` is not AT:FOR (no `:`; {example})"));
        };
        let at_s = parse_at(at.trim()).map_err(|why| format!("`{s}`: {why}"))?;
        let for_s = parse_at(hold.trim()).map_err(|why| format!("`{s}`: {why}"))?;
        if for_s <= 0.0 {
            return Err(format!(
                "`{s}`: FOR must be more than 0 (how long the view is held; {example})"
            ));
        }
        Ok(HoldView {
            at_s,
            for_s,
            opened_at_s: None,
            released_at_s: None,
            until_end: false,
        })
    }
}

impl std::fmt::Display for HoldView {
    /// `AT:FOR` in seconds (`30s:120s`), as `--hold-view` takes it.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}s:{}s", self.at_s, self.for_s)
    }
}

/// Check a plan's held view against one of its runs: it must open before
/// the end of the measurement (it may outlast it: it is then held until
/// the end, see [`HoldView::note`]). Errors name the flag and the run.
pub(crate) fn check_hold_view(
    view: &HoldView,
    params: &OltpParams,
    label: &str,
) -> Result<(), OltpError> {
    if view.at_s >= params.time_s {
        return Err(OltpError::param(
            HOLD_VIEW_FLAG,
            format!(
                "`{view}` opens the view at {} s, not before the end of run `{label}`'s \
                 measurement (--time {}): it would never be opened",
                view.at_s, params.time_s
            ),
        ));
    }
    Ok(())
}

/// What the holding thread shares with the sampler: the start of the
/// measurement (set by the sampler), and when the view was opened and
/// released (set by the holder).
pub(crate) struct Holder<'a> {
    view: &'a HoldView,
    t0: OnceLock<Instant>,
    state: Mutex<HoldView>,
    /// Whether the opening, and the release, were reported ([`news`](Self::news)).
    told: (AtomicBool, AtomicBool),
}

impl<'a> Holder<'a> {
    /// A holder of `view`, not started.
    pub(crate) fn new(view: &'a HoldView) -> Self {
        Holder {
            view,
            t0: OnceLock::new(),
            state: Mutex::new(view.clone()),
            told: (AtomicBool::new(false), AtomicBool::new(false)),
        }
    }

    /// The measurement started at `t0`: the schedule counts from it.
    pub(crate) fn start(&self, t0: Instant) {
        let _ = self.t0.set(t0);
    }

    /// The view as it stands: its schedule and the times so far.
    pub(crate) fn state(&self) -> HoldView {
        self.state.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// What happened since the last call: the view as it was opened, if
    /// that was not reported yet, and as it was released, likewise.
    pub(crate) fn news(&self) -> (Option<HoldView>, Option<HoldView>) {
        let v = self.state();
        let new = |done: bool, told: &AtomicBool| done && !told.swap(true, Ordering::AcqRel);
        let opened = new(v.opened_at_s.is_some(), &self.told.0).then(|| HoldView {
            released_at_s: None,
            until_end: false,
            ..v.clone()
        });
        let released = new(v.released_at_s.is_some(), &self.told.1).then_some(v);
        (opened, released)
    }

    fn record(&self, f: impl FnOnce(&mut HoldView)) {
        f(&mut self.state.lock().unwrap_or_else(|p| p.into_inner()));
    }

    /// The holding thread's work: wait for the measurement to start and
    /// for AT, open a REPEATABLE-READ transaction and read row 1 of
    /// `sbtest1` (the snapshot is taken then), hold it until AT + FOR or
    /// until `stop` is raised (the run ended), then roll it back. Returns
    /// at once when `stop` is raised before the view opens.
    pub(crate) fn hold(&self, db: &Db, stop: &AtomicBool) -> Result<(), keel::Error> {
        let t0 = loop {
            if stop.load(Ordering::Relaxed) {
                return Ok(());
            }
            if let Some(t0) = self.t0.get() {
                break *t0;
            }
            std::thread::sleep(POLL);
        };
        let secs = |s: f64| Duration::from_secs_f64(s);
        if !sleep_until(t0 + secs(self.view.at_s), stop) {
            return Ok(());
        }
        let table = db.table(&table_name(1))?;
        let txn = db.begin_with(Isolation::RepeatableRead);
        txn.get(&table, &primary_key(1))?;
        let opened = t0.elapsed().as_secs_f64();
        self.record(|v| v.opened_at_s = Some(opened));
        let full = sleep_until(t0 + secs(self.view.release_due_s()), stop);
        drop(txn);
        let released = t0.elapsed().as_secs_f64();
        self.record(|v| {
            v.released_at_s = Some(released);
            v.until_end = !full;
        });
        Ok(())
    }
}

/// Longest sleep between looks at the stop flag while the run starts.
const POLL: Duration = Duration::from_millis(20);

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn at_for_parses_times_in_every_unit() {
        for (text, at_s, for_s) in [
            ("0:300", 0.0, 300.0),
            ("30s:2m", 30.0, 120.0),
            (" 0.5 : 1.5 ", 0.5, 1.5),
            ("1m30s:500ms", 90.0, 0.5),
        ] {
            let v: HoldView = text.parse().unwrap();
            assert_eq!((v.at_s, v.for_s), (at_s, for_s), "{text}");
            assert_eq!((v.opened_at_s, v.released_at_s), (None, None));
        }
        assert_eq!(
            "30s:2m".parse::<HoldView>().unwrap().to_string(),
            "30s:120s"
        );
    }

    #[test]
    fn bad_values_name_what_is_wrong() {
        for (text, needle) in [
            ("300", "is not AT:FOR (no `:`"),
            ("x:5", "`x` is not a time"),
            ("5:10y", "unknown time unit `y`"),
            ("5:0", "FOR must be more than 0"),
            ("-1:5", "`-1` is not a time"),
        ] {
            let e = text.parse::<HoldView>().unwrap_err();
            assert!(e.contains(needle), "{text}: {e}");
        }
    }

    #[test]
    fn the_view_must_open_before_the_end_and_may_outlast_it() {
        let params = OltpParams {
            time_s: 10.0,
            ..OltpParams::default()
        };
        let v: HoldView = "2:5".parse().unwrap();
        check_hold_view(&v, &params, "run1").unwrap();
        assert!(!v.held_until_end(&params) && v.note(&params, "run1").is_none());
        let long: HoldView = "5:1m".parse().unwrap();
        check_hold_view(&long, &params, "run1").unwrap();
        let note = long.note(&params, "run1").unwrap();
        assert!(note.contains("held until the run ends"), "{note}");
        assert!(note.contains(HOLD_VIEW_FLAG), "{note}");
        let late: HoldView = "10:1".parse().unwrap();
        let e = check_hold_view(&late, &params, "run1")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains(HOLD_VIEW_FLAG) && e.contains("run `run1`"),
            "{e}"
        );
        assert!(
            e.contains("never be opened") && e.contains("(--time 10)"),
            "{e}"
        );
    }
}
