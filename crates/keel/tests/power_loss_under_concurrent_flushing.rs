#![allow(clippy::unwrap_used)]
//! Power loss while 4 writers commit bank transfers and 4 page cleaners
//! flush 4 buffer pool instances under pressure (doublewrite, neighbor
//! flushing, a tiny pool and the smallest log). The device loses every
//! unsynced write, a random subset of them, or a random subset of their
//! 4 KiB sectors (torn pages). After each recovery the total balance is
//! unchanged, every acknowledged transfer is present and every tree checks
//! out.
//!
//! Keel syncs right after every write (redo at each commit, a doublewrite
//! batch before its in-place writes, the data files after them), so a
//! crash at a random instant almost never finds an unsynced write and every
//! mode would look alike. These scenarios therefore crash *at a sync*, of
//! any file, after a random number of syncs: the writes it was about to
//! make durable are pending, and each test asserts its mode did to them
//! what it claims (lost, kept or lost, torn). One more scenario unplugs at a
//! random instant, for the races between the calls.
//!
//! `KEEL_POWER_LOSS_CYCLES=n` runs every scenario for `n` cycles instead of
//! its CI count; `KEEL_TEST_SEED` replays a printed seed (see
//! `common::crash_cycles`).

mod common;

use common::crash_cycles::{cycles, run, run_in_mode, run_slowed, Crash, Mode, Setup};
use keel::{DoublewriteMode, PageCompression};

/// Syncs (of any file) a crash at a sync lets through first.
const SYNCS: std::ops::Range<u64> = 0..8000;

fn at_any_sync(mode: Mode) -> Crash {
    Crash::At {
        point: ".sync",
        after: SYNCS,
        mode,
    }
}

#[test]
fn power_loss_drops_every_unsynced_write() {
    let t = run("drops_every_unsynced_write", cycles(25), |_| {
        at_any_sync(Mode::DropUnsynced)
    });
    t.assert_ran();
    t.assert_cleaners_flushed();
    assert!(t.writes_lost > 0, "no crash found a write to drop: {t:?}");
    assert_eq!((t.writes_kept, t.writes_torn), (0, 0), "{t:?}");
    assert_eq!(t.torn_in_image, 0, "dropping writes tore a page: {t:?}");
}

#[test]
fn power_loss_keeps_a_random_subset_of_unsynced_writes() {
    let t = run("keeps_a_random_subset", cycles(25), |_| {
        at_any_sync(Mode::Random)
    });
    t.assert_ran();
    t.assert_cleaners_flushed();
    assert!(t.writes_kept > 0 && t.writes_lost > 0, "{t:?}");
    assert_eq!(t.writes_torn, 0, "{t:?}");
}

#[test]
fn power_loss_tears_unsynced_writes_at_4k_sectors() {
    let t = run("tears_unsynced_writes", cycles(25), |_| {
        at_any_sync(Mode::Torn)
    });
    t.assert_ran();
    t.assert_cleaners_flushed();
    assert!(t.writes_torn > 0, "no crash tore a write: {t:?}");
}

/// In-place writes are pending when the power fails at a data-file sync:
/// the torn crash tears some of them, and the doublewrite copies repair
/// every one. The in-place writes are slowed down (100 µs before each takes
/// effect), so that more of them are pending at the crash, and the window
/// between the engine's bookkeeping and its write is wide.
#[test]
fn torn_in_place_writes_are_repaired_from_doublewrite() {
    let slow = "/data-.write:delay=100us";
    let t = run_slowed("torn_in_place_writes", cycles(25), slow, |_| Crash::At {
        point: "/data-.sync",
        after: 0..100,
        mode: Mode::Torn,
    });
    t.assert_ran();
    assert!(t.torn_in_image > 0, "no crash tore a page in place: {t:?}");
    assert!(t.torn_repaired > 0, "recovery repaired no torn page: {t:?}");
}

/// `page_compression = zstd`: pages go to their places as compressed
/// images (one 4 KiB block each for these accounts' pages of 8 KiB, so
/// none can tear at 4 KiB sectors; a torn image of several blocks is
/// `doublewrite::repair_tests::a_torn_compressed_image_is_restored_from_its_copy`),
/// the rest of each slot keeping an older image, and the power fails at
/// any sync in any mode, or during the open after a process crash. Every
/// recovery reads them back: the balance, the acknowledged transfers and
/// the trees check as in every scenario.
#[test]
fn power_loss_with_compressed_pages() {
    let modes = [Mode::DropUnsynced, Mode::Random, Mode::Torn];
    let setup = Setup {
        mode: DoublewriteMode::On,
        compression: PageCompression::Zstd,
    };
    let t = run_in_mode(
        "power_loss_with_compressed_pages",
        cycles(25),
        setup,
        |rng| {
            if rand::Rng::gen_bool(rng, 0.25) {
                kill_then_power_loss_in_open(rng)
            } else {
                at_any_sync(modes[rand::Rng::gen_range(rng, 0..3)])
            }
        },
    );
    t.assert_ran();
    t.assert_cleaners_flushed();
    assert!(
        t.write_back["num_pages_page_compressed"] > 0,
        "no page was written compressed: {t:?}"
    );
}

/// The test pulls the plug at a random instant, in a random mode: crashes
/// that fall between the engine's calls rather than at one.
#[test]
fn power_loss_at_a_random_instant() {
    let modes = [Mode::DropUnsynced, Mode::Random, Mode::Torn];
    let t = run("power_loss_at_a_random_instant", cycles(25), |rng| {
        Crash::Unplug(modes[rand::Rng::gen_range(rng, 0..3)])
    });
    t.assert_ran();
    t.assert_cleaners_flushed();
}

/// The process dies while commits are written to the log and not yet
/// synced; the next open replays that tail, and the power fails while it
/// writes (at any write or sync of the open, in a random mode). Recovery
/// syncs the log before it replays anything, so no page the open made
/// durable can be newer than the durable log: every transfer acknowledged
/// before or after survives the next recovery, and the next cycle's.
#[test]
fn power_loss_during_the_open_after_a_process_crash() {
    let t = run(
        "power_loss_during_the_open_after_a_process_crash",
        cycles(25),
        kill_then_power_loss_in_open,
    );
    t.assert_ran();
}

/// The same under `doublewrite = atomic` (a device that promises untorn
/// page writes), where no doublewrite repair runs at the open and syncs
/// the data files: the page writes the dead process never synced are made
/// durable by recovery itself before the open's checkpoint passes their
/// redo, or a power loss right after that open loses them.
#[test]
fn power_loss_during_the_open_after_a_process_crash_without_doublewrite() {
    let t = run_in_mode(
        "power_loss_during_the_open_without_doublewrite",
        cycles(25),
        DoublewriteMode::Atomic,
        kill_then_power_loss_in_open,
    );
    t.assert_ran();
}

/// A process crash, then a power loss at any of the next open's first ten
/// writes or syncs (of any file), in a random mode.
fn kill_then_power_loss_in_open(rng: &mut rand::rngs::SmallRng) -> Crash {
    let modes = [Mode::DropUnsynced, Mode::Random, Mode::Torn];
    let points = [".write", ".sync"];
    Crash::KillThenPowerLossInOpen {
        point: points[rand::Rng::gen_range(rng, 0..2)],
        after: 0..10,
        mode: modes[rand::Rng::gen_range(rng, 0..3)],
    }
}
