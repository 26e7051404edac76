//! Percentiles (nearest rank) of a sample.

use serde::Serialize;

#[derive(Debug, Clone, Serialize)]
pub struct Summary {
    pub n: usize,
    pub min: f64,
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
    pub max: f64,
    pub mean: f64,
}

/// The p-th percentile (0..=100) of a sorted, non-empty sample, by nearest rank.
pub fn pct(sorted: &[f64], p: f64) -> f64 {
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

pub fn summary(values: &[f64]) -> Option<Summary> {
    if values.is_empty() {
        return None;
    }
    let mut v = values.to_vec();
    v.sort_by(|a, b| a.total_cmp(b));
    Some(Summary {
        n: v.len(),
        min: v[0],
        p50: pct(&v, 50.0),
        p90: pct(&v, 90.0),
        p99: pct(&v, 99.0),
        max: v[v.len() - 1],
        mean: v.iter().sum::<f64>() / v.len() as f64,
    })
}

/// 12345.6 → "12,346"
pub fn thousands(v: f64) -> String {
    if !v.is_finite() {
        return "–".into();
    }
    let s = format!("{:.0}", v.abs());
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    if v < 0.0 { format!("-{out}") } else { out }
}
