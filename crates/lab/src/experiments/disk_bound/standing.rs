//! Who is ahead, and by how much: the rates of a sweep spread over the best peer's capacity,
//! and per rate or window which server has the lowest 95th percentile and mean and how amped
//! compares with the best peer. Pure functions over numbers, so the summary's claims are
//! unit-tested.

/// Lowest and highest share of the reference capacity a default sweep offers.
pub const SPREAD: (f64, f64) = (0.4, 0.9);

/// `n` rates from 40 % to 90 % of `capacity` req/s, evenly spaced, rounded to whole req/s
/// (one rate: 90 %).
pub fn spread_rates(capacity: f64, n: usize) -> Vec<f64> {
    let (lo, hi) = SPREAD;
    let at = |share: f64| (capacity * share).round().max(1.0);
    match n {
        0 => Vec::new(),
        1 => vec![at(hi)],
        _ => (0..n).map(|i| at(lo + (hi - lo) * i as f64 / (n - 1) as f64)).collect(),
    }
}

/// One server's numbers in one cell (a rate or a window).
#[derive(Clone, Debug, PartialEq)]
pub struct Entry {
    pub server: String,
    /// A peer (not amped in any architecture).
    pub peer: bool,
    pub p95: f64,
    pub mean: f64,
}

/// The standing of one cell.
#[derive(Clone, Debug, PartialEq)]
pub struct Standing {
    /// The server with the lowest 95th percentile, and its value.
    pub lowest_p95: (String, f64),
    /// The server with the lowest mean, and its value.
    pub lowest_mean: (String, f64),
    /// The best peer by 95th percentile ÷ amped's (> 1: amped lower), when both ran.
    pub p95_ratio: Option<(String, f64)>,
    /// The best peer by mean ÷ amped's.
    pub mean_ratio: Option<(String, f64)>,
    /// amped's p95 and mean are both at most every peer's (ties count). amped's own other
    /// architectures and options are not peers: the claim is amped's default against the
    /// other servers (issue 9's wording), and who is lowest of all is named above.
    pub amped_ahead: bool,
}

fn lowest(entries: &[&Entry], f: fn(&Entry) -> f64) -> Option<(String, f64)> {
    entries
        .iter()
        .filter(|e| f(e).is_finite())
        .min_by(|a, b| f(a).total_cmp(&f(b)))
        .map(|e| (e.server.clone(), f(e)))
}

/// The standing of `entries` (servers without a finite value are left out). `amped` names
/// the server the claims are about.
pub fn standing(entries: &[Entry], amped: &str) -> Option<Standing> {
    let all: Vec<&Entry> = entries.iter().collect();
    let lowest_p95 = lowest(&all, |e| e.p95)?;
    let lowest_mean = lowest(&all, |e| e.mean)?;
    let me = entries.iter().find(|e| e.server == amped && e.p95.is_finite() && e.mean.is_finite());
    let peers: Vec<&Entry> = entries.iter().filter(|e| e.peer).collect();
    let ratio = |f: fn(&Entry) -> f64| {
        let me = me?;
        let (name, v) = lowest(&peers, f)?;
        (f(me) > 0.0).then(|| (name, v / f(me)))
    };
    Some(Standing {
        p95_ratio: ratio(|e| e.p95),
        mean_ratio: ratio(|e| e.mean),
        amped_ahead: me.is_some_and(|m| {
            let at_most = |f: fn(&Entry) -> f64| lowest(&peers, f).is_none_or(|(_, v)| f(m) <= v);
            at_most(|e| e.p95) && at_most(|e| e.mean)
        }),
        lowest_p95,
        lowest_mean,
    })
}

/// The first cell (in the order given) where amped is not below every peer in both, with its
/// label; `None` when the claim holds in every cell that has a standing.
pub fn first_break(cells: &[(String, Option<Standing>)]) -> Option<&str> {
    cells
        .iter()
        .find(|(_, s)| s.as_ref().is_some_and(|s| !s.amped_ahead))
        .map(|(label, _)| label.as_str())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_spread_from_40_to_90_percent_of_the_capacity() {
        assert_eq!(spread_rates(1000.0, 4), vec![400.0, 567.0, 733.0, 900.0]);
        assert_eq!(spread_rates(1000.0, 2), vec![400.0, 900.0]);
        assert_eq!(spread_rates(1000.0, 1), vec![900.0]);
        assert_eq!(spread_rates(1.0, 3), vec![1.0, 1.0, 1.0], "at least 1 req/s");
        assert!(spread_rates(500.0, 0).is_empty());
        let r = spread_rates(2345.0, 6);
        assert!(r.windows(2).all(|w| w[0] < w[1]), "{r:?}");
    }

    fn e(server: &str, peer: bool, p95: f64, mean: f64) -> Entry {
        Entry { server: server.into(), peer, p95, mean }
    }

    #[test]
    fn the_standing_names_the_lowest_and_amped_against_the_best_peer() {
        let cells = [
            e("amped", false, 2.0, 1.0),
            e("sped", false, 1.5, 3.0),
            e("nginx", true, 20.0, 5.0),
            e("h2o", true, 40.0, 4.0),
        ];
        let s = standing(&cells, "amped").unwrap();
        assert_eq!(s.lowest_p95, ("sped".into(), 1.5));
        assert_eq!(s.lowest_mean, ("amped".into(), 1.0));
        assert_eq!(s.p95_ratio, Some(("nginx".into(), 10.0)));
        assert_eq!(s.mean_ratio, Some(("h2o".into(), 4.0)));
        assert!(s.amped_ahead, "sped's p95 is lower, but sped is not a peer");
        let behind = [e("amped", false, 2.0, 1.0), e("nginx", true, 20.0, 0.5)];
        assert!(!standing(&behind, "amped").unwrap().amped_ahead, "a peer's mean is lower");

        let ahead = [e("amped", false, 1.0, 1.0), e("nginx", true, 1.0, 2.0)];
        assert!(standing(&ahead, "amped").unwrap().amped_ahead, "a tie counts");
        let no_amped = [e("nginx", true, 3.0, 2.0), e("h2o", true, f64::NAN, 1.0)];
        let s = standing(&no_amped, "amped").unwrap();
        assert_eq!((s.p95_ratio, s.amped_ahead), (None, false));
        assert_eq!(s.lowest_p95.0, "nginx", "NaN values are left out");
        assert!(standing(&[], "amped").is_none());
    }

    #[test]
    fn the_first_break_is_where_the_claim_stops_holding() {
        let holds = standing(&[e("amped", false, 1.0, 1.0), e("nginx", true, 2.0, 2.0)], "amped");
        let breaks = standing(&[e("amped", false, 3.0, 1.0), e("nginx", true, 2.0, 2.0)], "amped");
        let cells = vec![
            ("400 req/s".to_string(), holds.clone()),
            ("600 req/s".to_string(), None),
            ("800 req/s".to_string(), breaks.clone()),
            ("900 req/s".to_string(), breaks),
        ];
        assert_eq!(first_break(&cells), Some("800 req/s"));
        assert_eq!(first_break(&cells[..2]), None);
    }
}
