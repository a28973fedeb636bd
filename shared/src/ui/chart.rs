//! The small chart of a table page: total records and total data files over time, as two
//! polylines of an inline SVG (no script, no image request). A history of any length is
//! sampled down to at most [`MAX_POINTS`] snapshots, so a big table's chart costs the same as
//! a small one's. Only numbers and dates this module formats reach the SVG.

use iceberg::spec::SnapshotRef;

use super::history::format_ms;

/// Most snapshots a chart plots.
pub const MAX_POINTS: usize = 120;
pub const WIDTH: u32 = 600;
pub const HEIGHT: u32 = 140;
const PAD: f64 = 4.0;

/// What the template draws.
pub struct Chart {
    /// `x,y` pairs of the records line.
    pub records: String,
    /// `x,y` pairs of the data files line.
    pub files: String,
    pub max_records: u64,
    pub max_files: u64,
    pub from: String,
    pub to: String,
    pub points: usize,
}

/// The chart of a history given newest first; `None` when no snapshot carries totals.
pub fn chart(newest_first: &[&SnapshotRef]) -> Option<Chart> {
    let oldest_first: Vec<&SnapshotRef> = newest_first.iter().rev().copied().collect();
    let sampled = sample(&oldest_first, MAX_POINTS);
    let total = |s: &SnapshotRef, key: &str| {
        s.summary()
            .additional_properties
            .get(key)
            .and_then(|v| v.parse::<u64>().ok())
    };
    let points: Vec<(i64, u64, u64)> = sampled
        .iter()
        .filter_map(|s| {
            Some((
                s.timestamp_ms(),
                total(s, "total-records")?,
                total(s, "total-data-files")?,
            ))
        })
        .collect();
    let (first, last) = (points.first()?, points.last()?);
    let max_records = points.iter().map(|p| p.1).max().unwrap_or(0);
    let max_files = points.iter().map(|p| p.2).max().unwrap_or(0);
    let n = points.len();
    let x = |i: usize| {
        if n == 1 {
            f64::from(WIDTH) / 2.0
        } else {
            PAD + (f64::from(WIDTH) - 2.0 * PAD) * i as f64 / (n - 1) as f64
        }
    };
    let y = |v: u64, max: u64| {
        let h = f64::from(HEIGHT) - 2.0 * PAD;
        let share = if max == 0 { 0.0 } else { v as f64 / max as f64 };
        PAD + h * (1.0 - share)
    };
    let line = |values: Vec<u64>, max: u64| {
        values
            .into_iter()
            .enumerate()
            .map(|(i, v)| format!("{:.1},{:.1}", x(i), y(v, max)))
            .collect::<Vec<_>>()
            .join(" ")
    };
    Some(Chart {
        records: line(points.iter().map(|p| p.1).collect(), max_records),
        files: line(points.iter().map(|p| p.2).collect(), max_files),
        max_records,
        max_files,
        from: format_ms(first.0),
        to: format_ms(last.0),
        points: n,
    })
}

/// At most `max` items spread evenly over `items`, always keeping the first and the last.
fn sample<'a, T>(items: &[&'a T], max: usize) -> Vec<&'a T> {
    if items.len() <= max || max < 2 {
        return items.to_vec();
    }
    let last = items.len() - 1;
    (0..max).map(|i| items[i * last / (max - 1)]).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sampling_is_bounded_and_keeps_both_ends() {
        let items: Vec<u32> = (0..10_000).collect();
        let refs: Vec<&u32> = items.iter().collect();
        let picked = sample(&refs, MAX_POINTS);
        assert_eq!(picked.len(), MAX_POINTS);
        assert_eq!(*picked[0], 0);
        assert_eq!(*picked[MAX_POINTS - 1], 9_999);
        assert!(picked.windows(2).all(|w| w[0] < w[1]));
        assert_eq!(sample(&refs[..3], MAX_POINTS).len(), 3);
    }
}
