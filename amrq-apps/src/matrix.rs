//! Sparse lower-triangular factors for the triangular solve: a seeded generator of
//! power-grid-like factors with the sizes of the Harwell–Boeing matrices the Remote
//! Queues paper used, a Matrix Market reader, and the sequential solve.
//!
//! The generator is synthetic: those matrices are not in any package registry here.
//! A power grid is a sparse, nearly planar graph of buses with a few long lines, and
//! the incomplete factor of its matrix keeps the graph's edges below the diagonal. So
//! each off-diagonal entry links a row to an earlier one: a near neighbour (within 16
//! rows) nine times in ten, any earlier row otherwise. The entries are negative, and
//! the diagonal is one more than the row's absolute sum, so the factor is diagonally
//! dominant and the solve is well conditioned.

use crate::next;

/// A sparse lower-triangular matrix, by rows.
#[derive(Debug, Clone, PartialEq)]
pub struct Lower {
    /// Each row's off-diagonal entries `(column, value)`, columns below the row.
    pub rows: Vec<Vec<(usize, f64)>>,
    /// The diagonal (never zero).
    pub diag: Vec<f64>,
}

/// The paper's factors: name, rows, non-zeros (diagonal included).
pub const PAPER: [(&str, usize, usize); 3] = [
    ("bcsprw05", 274, 759),
    ("bcsprw06", 1454, 1923),
    ("bcsprw10", 5300, 8271),
];

impl Lower {
    /// Rows.
    pub fn n(&self) -> usize {
        self.diag.len()
    }

    /// Non-zeros, the diagonal included.
    pub fn nnz(&self) -> usize {
        self.n() + self.rows.iter().map(Vec::len).sum::<usize>()
    }

    /// A power-grid-like factor of `n` rows and `nnz` non-zeros (the diagonal
    /// included), the same for the same `seed` (see the module documentation).
    ///
    /// ```
    /// let l = amrq_apps::matrix::Lower::power_grid_like(274, 759, 5);
    /// assert_eq!((l.n(), l.nnz()), (274, 759));
    /// assert!(l.rows.iter().enumerate().all(|(i, r)| r.iter().all(|&(j, _)| j < i)));
    /// ```
    pub fn power_grid_like(n: usize, nnz: usize, seed: u64) -> Self {
        let off = nnz.saturating_sub(n).min(n * n.saturating_sub(1) / 2);
        let mut rows: Vec<Vec<(usize, f64)>> = vec![Vec::new(); n];
        let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
        let mut placed = 0;
        while placed < off {
            let i = 1 + (next(&mut x) % (n as u64 - 1)) as usize;
            let j = if next(&mut x) % 10 < 9 {
                i.saturating_sub(1 + (next(&mut x) % 16) as usize)
            } else {
                (next(&mut x) % i as u64) as usize
            };
            if rows[i].iter().any(|&(c, _)| c == j) {
                continue;
            }
            let v = -(0.1 + (next(&mut x) % 1000) as f64 / 2500.0);
            rows[i].push((j, v));
            placed += 1;
        }
        for r in &mut rows {
            r.sort_by_key(|e| e.0);
        }
        let diag = rows
            .iter()
            .map(|r| 1.0 + r.iter().map(|e| e.1.abs()).sum::<f64>())
            .collect();
        Lower { rows, diag }
    }

    /// Reads a Matrix Market file (`coordinate`, `real`, `integer` or `pattern`,
    /// `general` or `symmetric`) and keeps its lower triangle. A pattern's
    /// off-diagonal entries are −1. A missing diagonal entry is one more than its row's
    /// absolute sum.
    ///
    /// ```
    /// let text = "%%MatrixMarket matrix coordinate real general\n3 3 4\n1 1 2\n2 1 -1\n3 2 -1\n1 3 5\n";
    /// let l = amrq_apps::matrix::Lower::from_matrix_market(text).unwrap();
    /// assert_eq!(l.rows[1], vec![(0, -1.0)]);
    /// assert_eq!((l.diag[0], l.diag[1]), (2.0, 2.0)); // row 1: 1 + |−1|
    /// assert_eq!(l.nnz(), 5); // (1, 3) is above the diagonal: dropped
    /// ```
    pub fn from_matrix_market(text: &str) -> Result<Self, String> {
        let mut lines = text.lines();
        let header = lines.next().unwrap_or_default().to_ascii_lowercase();
        if !header.starts_with("%%matrixmarket matrix coordinate") {
            return Err(format!(
                "not a coordinate Matrix Market file (its first line: {header:?})"
            ));
        }
        let pattern = header.contains("pattern");
        if header.contains("complex") {
            return Err("complex matrices are not supported".into());
        }
        let mut data = lines.filter(|l| !l.starts_with('%') && !l.trim().is_empty());
        let size: Vec<usize> = data
            .next()
            .ok_or("no size line")?
            .split_whitespace()
            .map(|t| t.parse().map_err(|e| format!("size line: {e}")))
            .collect::<Result<_, _>>()?;
        let [n, cols, _] = size[..] else {
            return Err("the size line must be `rows columns entries`".into());
        };
        if n != cols || n == 0 {
            return Err(format!(
                "{n} × {cols}: a triangular solve needs a square matrix"
            ));
        }
        let mut rows: Vec<Vec<(usize, f64)>> = vec![Vec::new(); n];
        let mut diag = vec![None; n];
        for (k, line) in data.enumerate() {
            let t: Vec<&str> = line.split_whitespace().collect();
            let at = |i: usize| -> Result<usize, String> {
                let v: usize = t
                    .get(i)
                    .ok_or(format!("entry {k}: too few fields"))?
                    .parse()
                    .map_err(|e| format!("entry {k}: {e}"))?;
                (1..=n)
                    .contains(&v)
                    .then_some(v - 1)
                    .ok_or(format!("entry {k}: index {v} outside 1..={n}"))
            };
            let (i, j) = (at(0)?, at(1)?);
            let v = match pattern {
                true => -1.0,
                false => t
                    .get(2)
                    .ok_or(format!("entry {k}: no value"))?
                    .parse::<f64>()
                    .map_err(|e| format!("entry {k}: {e}"))?,
            };
            match i.cmp(&j) {
                std::cmp::Ordering::Equal if v != 0.0 => diag[i] = Some(v),
                std::cmp::Ordering::Greater if v != 0.0 => rows[i].push((j, v)),
                _ => {}
            }
        }
        for r in &mut rows {
            r.sort_by_key(|e| e.0);
            r.dedup_by_key(|e| e.0);
        }
        let diag = diag
            .into_iter()
            .zip(&rows)
            .map(|(d, r)| d.unwrap_or_else(|| 1.0 + r.iter().map(|e| e.1.abs()).sum::<f64>()))
            .collect();
        Ok(Lower { rows, diag })
    }

    /// The sequential forward substitution: x with L·x = b.
    ///
    /// ```
    /// let l = amrq_apps::matrix::Lower { rows: vec![vec![], vec![(0, -1.0)]], diag: vec![2.0, 4.0] };
    /// assert_eq!(l.solve(&[2.0, 3.0]), vec![1.0, 1.0]);
    /// ```
    pub fn solve(&self, b: &[f64]) -> Vec<f64> {
        let mut x = vec![0.0; self.n()];
        for (i, row) in self.rows.iter().enumerate() {
            let s = row.iter().fold(b[i], |s, &(j, v)| s - v * x[j]);
            x[i] = s / self.diag[i];
        }
        x
    }

    /// The longest chain of dependences (rows in the critical path): the solve's
    /// parallelism is `n / depth` at best.
    ///
    /// ```
    /// let l = amrq_apps::matrix::Lower { rows: vec![vec![], vec![(0, -1.0)], vec![]], diag: vec![1.0; 3] };
    /// assert_eq!(l.depth(), 2);
    /// ```
    pub fn depth(&self) -> usize {
        let mut level = vec![0usize; self.n()];
        for (i, row) in self.rows.iter().enumerate() {
            level[i] = 1 + row.iter().map(|&(j, _)| level[j]).max().unwrap_or(0);
        }
        level.into_iter().max().unwrap_or(0)
    }
}
