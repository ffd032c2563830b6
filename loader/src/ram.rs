//! The machine's RAM as one sorted list of disjoint ranges, from memory-map entries that may
//! come in any order and touch or overlap.

use alloc::vec::Vec;
use mtex_platform::Region;

/// Sorts `ranges`, drops empty ones and merges those that touch or overlap.
pub fn merge(mut ranges: Vec<Region>) -> Vec<Region> {
    ranges.retain(|r| r.size != 0);
    ranges.sort_unstable_by_key(|r| r.base);
    let mut out: Vec<Region> = Vec::with_capacity(ranges.len());
    for r in ranges {
        match out.last_mut() {
            Some(last) if r.base <= last.end() => {
                last.size = last.size.max(r.end() - last.base);
            }
            _ => out.push(r),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn adjacent_and_overlapping_ranges_merge() {
        let r = |b, s| Region::new(b, s);
        let merged = merge(alloc::vec![
            r(0x5000, 0x1000),
            r(0x1000, 0x1000),
            r(0x2000, 0x2000),
            r(0x9000, 0),
            r(0x3000, 0x500),
            r(0x8000, 0x1000),
        ]);
        assert_eq!(
            merged,
            [r(0x1000, 0x3000), r(0x5000, 0x1000), r(0x8000, 0x1000)]
        );
        assert!(merge(Vec::new()).is_empty());
    }
}
