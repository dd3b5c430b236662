//! The field reports ("seeds") the scenario presets reproduce, cited as
//! published. `docs/field-reports.md` says what Keel takes from each; a
//! test keeps the two in agreement.

/// One field report.
#[derive(Debug, PartialEq)]
pub struct Seed {
    /// The number presets and docs use for it.
    pub number: u32,
    /// The article's title, as published.
    pub title: &'static str,
    /// Who wrote it.
    pub author: &'static str,
    /// Where it was published.
    pub venue: &'static str,
    /// When (day month year, or the year where the day is not known).
    pub date: &'static str,
}

impl Seed {
    /// `"Title", Author, Venue, Date`.
    pub fn citation(&self) -> String {
        format!(
            "\"{}\", {}, {}, {}",
            self.title, self.author, self.venue, self.date
        )
    }
}

/// Every seed, by number. Seed 3 has a second article (buffer pool
/// instances in MySQL 5.6, by the same author); `docs/field-reports.md`
/// cites both.
pub const SEEDS: &[Seed] = &[
    Seed {
        number: 1,
        title: "Disaster: MySQL 5.5 Flushing",
        author: "Vadim Tkachenko",
        venue: "MySQL Performance Blog (Percona)",
        date: "18 September 2011",
    },
    Seed {
        number: 2,
        title: "Benchmarks of new innodb_flush_neighbor_pages",
        author: "Vadim Tkachenko",
        venue: "MySQL Performance Blog (Percona)",
        date: "17 January 2012",
    },
    Seed {
        number: 3,
        title: "MySQL Performance: Linux I/O and Fusion-io",
        author: "Dimitri Kravtchuk",
        venue: "dimitrik.free.fr",
        date: "23 October 2012",
    },
    Seed {
        number: 4,
        title: "More on Checkpoints in InnoDB MySQL 8",
        author: "Vadim Tkachenko",
        venue: "Percona Database Performance Blog",
        date: "27 August 2020",
    },
    Seed {
        number: 5,
        title: "MySQL LRU Flushing and I/O Capacity",
        author: "Daniel Nichter",
        venue: "Hack MySQL (hackmysql.com)",
        date: "2021",
    },
];

/// The seed numbered `number`.
pub fn seed(number: u32) -> Option<&'static Seed> {
    SEEDS.iter().find(|s| s.number == number)
}

/// The seeds' citations, one line each, for `--preset list`.
pub fn seeds_text() -> String {
    let mut out = String::from("Field reports (seeds) the presets and keel iobench reproduce:\n");
    for s in SEEDS {
        out.push_str(&format!("  {}. {}\n", s.number, s.citation()));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::oltp::PRESETS;

    #[test]
    fn every_preset_cites_a_seed_whose_title_it_names() {
        for p in PRESETS {
            let s = seed(p.seed).unwrap_or_else(|| panic!("{}: no seed {}", p.name, p.seed));
            assert_eq!(p.seed_title, s.title, "{}", p.name);
        }
    }

    #[test]
    fn the_field_reports_page_cites_every_seed_as_the_code_does() {
        let page = include_str!("../../../../docs/field-reports.md");
        for s in SEEDS {
            let heading = format!("## {}. ", s.number);
            let section = page
                .split("\n## ")
                .find(|sec| format!("## {sec}").starts_with(&heading))
                .unwrap_or_else(|| panic!("docs/field-reports.md has no section {heading}"));
            let flat = section.split_whitespace().collect::<Vec<_>>().join(" ");
            for part in [s.title, s.author, s.date] {
                assert!(
                    flat.contains(part),
                    "seed {}: {part:?} not in {flat:?}",
                    s.number
                );
            }
        }
        assert!(seeds_text().lines().count() > SEEDS.len());
    }
}
