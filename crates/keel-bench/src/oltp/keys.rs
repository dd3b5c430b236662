//! Key distributions, as sysbench defines them (`--rand-type`).

use std::fmt;
use std::str::FromStr;

use rand::Rng;
use serde::{Deserialize, Serialize};

/// How row ids are chosen.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RandType {
    /// Every id equally likely.
    Uniform,
    /// sysbench's default: 75 % of the picks fall on the lowest 1 % of the
    /// ids (`--rand-spec-pct=1 --rand-spec-res=75`).
    Special,
    /// sysbench's pareto with h = 0.2 (80 % of the picks on 20 % of the ids).
    Pareto,
    /// Zipfian with exponent 0.8 (sysbench's `--rand-zipfian-exp` default).
    Zipf,
}

impl RandType {
    /// Every distribution, in the order `--help` lists them.
    pub const ALL: [RandType; 4] = [
        RandType::Uniform,
        RandType::Special,
        RandType::Pareto,
        RandType::Zipf,
    ];
}

impl fmt::Display for RandType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            RandType::Uniform => "uniform",
            RandType::Special => "special",
            RandType::Pareto => "pareto",
            RandType::Zipf => "zipf",
        })
    }
}

impl FromStr for RandType {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        RandType::ALL
            .into_iter()
            .find(|r| r.to_string() == s)
            .ok_or_else(|| format!("`{s}` is not one of uniform, special, pareto, zipf"))
    }
}

const SPECIAL_PCT: f64 = 1.0;
const SPECIAL_RES: f64 = 75.0;
const PARETO_H: f64 = 0.2;
const ZIPF_THETA: f64 = 0.8;

/// Draws ids in `1..=n` from one distribution.
#[derive(Clone, Debug)]
pub struct KeyGen {
    kind: RandType,
    n: u64,
    zipf: Option<Zipf>,
}

/// Gray et al.'s zipfian generator ("Quickly generating billion-record
/// synthetic databases", SIGMOD '94), the one YCSB and sysbench use.
#[derive(Clone, Debug)]
struct Zipf {
    zetan: f64,
    alpha: f64,
    eta: f64,
    half_pow_theta: f64,
}

impl Zipf {
    fn new(n: u64, theta: f64) -> Zipf {
        let zeta = |n: u64| (1..=n).map(|i| 1.0 / (i as f64).powf(theta)).sum::<f64>();
        let zetan = zeta(n);
        let zeta2 = zeta(2.min(n));
        Zipf {
            zetan,
            alpha: 1.0 / (1.0 - theta),
            eta: (1.0 - (2.0 / n as f64).powf(1.0 - theta)) / (1.0 - zeta2 / zetan),
            half_pow_theta: 0.5f64.powf(theta),
        }
    }

    fn draw(&self, n: u64, u: f64) -> u64 {
        let uz = u * self.zetan;
        if uz < 1.0 {
            return 1;
        }
        if uz < 1.0 + self.half_pow_theta {
            return 2.min(n);
        }
        let r = 1 + (n as f64 * (self.eta * u - self.eta + 1.0).powf(self.alpha)) as u64;
        r.clamp(1, n)
    }
}

impl KeyGen {
    /// A generator of ids in `1..=n` (`n` ≥ 1).
    pub fn new(kind: RandType, n: u64) -> KeyGen {
        let n = n.max(1);
        let zipf = (kind == RandType::Zipf).then(|| Zipf::new(n, ZIPF_THETA));
        KeyGen { kind, n, zipf }
    }

    /// The distribution.
    pub fn kind(&self) -> RandType {
        self.kind
    }

    /// One id in `1..=n`.
    pub fn next(&self, rng: &mut impl Rng) -> u64 {
        let n = self.n;
        match self.kind {
            RandType::Uniform => rng.gen_range(1..=n),
            RandType::Special => {
                let hot = ((n as f64 * SPECIAL_PCT / 100.0) as u64).clamp(1, n);
                if hot == n || rng.gen_bool(SPECIAL_RES / 100.0) {
                    rng.gen_range(1..=hot)
                } else {
                    rng.gen_range(hot + 1..=n)
                }
            }
            RandType::Pareto => {
                let power = PARETO_H.ln() / (1.0 - PARETO_H).ln();
                let u: f64 = rng.gen();
                (1 + (n as f64 * u.powf(power)) as u64).min(n)
            }
            RandType::Zipf => match &self.zipf {
                Some(z) => z.draw(n, rng.gen()),
                None => rng.gen_range(1..=n),
            },
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use rand::rngs::SmallRng;
    use rand::SeedableRng;

    /// Share of `draws` picks that land on the lowest `pct` % of 1..=n.
    fn low_share(kind: RandType, n: u64, pct: f64) -> f64 {
        let g = KeyGen::new(kind, n);
        let mut rng = SmallRng::seed_from_u64(1);
        let draws = 100_000;
        let limit = (n as f64 * pct / 100.0) as u64;
        let mut low = 0;
        for _ in 0..draws {
            let id = g.next(&mut rng);
            assert!((1..=n).contains(&id), "{kind}: {id} outside 1..={n}");
            if id <= limit {
                low += 1;
            }
        }
        low as f64 / draws as f64
    }

    #[test]
    fn distributions_stay_in_range_and_have_their_skew() {
        let n = 10_000;
        let u = low_share(RandType::Uniform, n, 1.0);
        assert!((0.007..0.013).contains(&u), "uniform {u}");
        let s = low_share(RandType::Special, n, 1.0);
        assert!((0.73..0.77).contains(&s), "special {s}");
        let p = low_share(RandType::Pareto, n, 20.0);
        assert!((0.77..0.83).contains(&p), "pareto {p}");
        let z = low_share(RandType::Zipf, n, 1.0);
        assert!(z > 0.2, "zipf {z}");
        for r in RandType::ALL {
            assert_eq!(r.to_string().parse::<RandType>().unwrap(), r);
        }
        assert!("gauss".parse::<RandType>().is_err());
        assert_eq!(
            KeyGen::new(RandType::Zipf, 1).next(&mut SmallRng::seed_from_u64(2)),
            1
        );
    }
}
