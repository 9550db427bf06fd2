//! Small real data sets shipped with the crate, for examples and tests.
//!
//! - [`digits`]: the UCI optical handwritten digits (1 797 × 64, 10 classes), as shipped by
//!   scikit-learn; source, licence (CC BY 4.0) and checksum in `data/README.md`.

use crate::error::{Error, Result};
use ndarray::Array2;

/// The digits file, compiled in (265 kB).
const DIGITS_CSV: &str = include_str!("../data/digits.csv");

/// A classification data set: features (one row per item) and integer class labels.
#[derive(Debug, Clone, PartialEq)]
pub struct Classification {
    /// Features, N × p.
    pub features: Array2<f64>,
    /// Class labels in `0..n_classes`.
    pub labels: Vec<usize>,
    /// The number of classes.
    pub n_classes: usize,
}

impl Classification {
    /// A seeded random split: `(train, test)` with `round(test_fraction · N)` test items, the
    /// rest for training; each part keeps the original order of its items. Same seed, same split.
    ///
    /// Errors: [`Error::InvalidParameter`] unless `test_fraction` is in (0, 1) and both parts
    /// are non-empty.
    pub fn split(&self, test_fraction: f64, seed: u64) -> Result<(Classification, Classification)> {
        let n = self.labels.len();
        if !(test_fraction > 0.0 && test_fraction < 1.0) {
            return Err(Error::invalid("test_fraction", test_fraction, "must be in (0, 1)"));
        }
        let n_test = (test_fraction * n as f64).round() as usize;
        if n_test == 0 || n_test == n {
            return Err(Error::invalid("test_fraction", test_fraction, "leaves one part empty"));
        }
        // A seeded Fisher–Yates shuffle picks the test items.
        let mut rng = crate::numeric::rng::stream(seed, &[0x5917]);
        let mut perm: Vec<usize> = (0..n).collect();
        for j in 0..n_test {
            let k = j + crate::gradient::uniform_below(&mut rng, (n - j) as u64) as usize;
            perm.swap(j, k);
        }
        let mut is_test = vec![false; n];
        for &i in &perm[..n_test] {
            is_test[i] = true;
        }
        let pick = |want: bool| {
            let rows: Vec<usize> = (0..n).filter(|&i| is_test[i] == want).collect();
            Classification {
                features: self.features.select(ndarray::Axis(0), &rows),
                labels: rows.iter().map(|&i| self.labels[i]).collect(),
                n_classes: self.n_classes,
            }
        };
        Ok((pick(false), pick(true)))
    }

    /// The number of items N.
    pub fn len(&self) -> usize {
        self.labels.len()
    }

    /// Whether there is no item.
    pub fn is_empty(&self) -> bool {
        self.labels.is_empty()
    }
}

/// The UCI optical handwritten digits: 1 797 images of 8 × 8 pixels with values 0..16 (64
/// features, as stored: not scaled) and labels 0–9.
///
/// Source: E. Alpaydin, C. Kaynak, *Optical Recognition of Handwritten Digits*, UCI Machine
/// Learning Repository, 1998 (CC BY 4.0), the test-set copy shipped with scikit-learn
/// (`load_digits`); see `data/README.md`.
///
/// ```
/// let digits = sgmcmc::datasets::digits()?;
/// assert_eq!(digits.features.dim(), (1_797, 64));
/// assert_eq!(digits.n_classes, 10);
/// let (train, test) = digits.split(0.2, 0)?;
/// assert_eq!((train.len(), test.len()), (1_438, 359));
/// # Ok::<(), sgmcmc::Error>(())
/// ```
pub fn digits() -> Result<Classification> {
    parse_digits(DIGITS_CSV)
}

/// Parses a digits file: one item per line, 64 integer features in 0..16 then the label 0–9,
/// comma-separated, no header (scikit-learn's `digits.csv`).
///
/// Errors: [`Error::Parse`] with the line for a wrong field count, a non-integer field, a value
/// out of range; [`Error::EmptyData`] for no line.
pub fn parse_digits(text: &str) -> Result<Classification> {
    let mut values = Vec::new();
    let mut labels = Vec::new();
    for (ln, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        let fields: Vec<&str> = line.split(',').collect();
        if fields.len() != 65 {
            return Err(Error::Parse { line: ln + 1, reason: format!("{} fields, expected 65", fields.len()) });
        }
        for (j, f) in fields.iter().enumerate() {
            let v: u32 = f.trim().parse().map_err(|_| Error::Parse {
                line: ln + 1,
                reason: format!("field {} = {f:?} is not a non-negative integer", j + 1),
            })?;
            if j < 64 {
                if v > 16 {
                    return Err(Error::Parse { line: ln + 1, reason: format!("pixel {} = {v} above 16", j + 1) });
                }
                values.push(f64::from(v));
            } else {
                if v > 9 {
                    return Err(Error::Parse { line: ln + 1, reason: format!("label {v} above 9") });
                }
                labels.push(v as usize);
            }
        }
    }
    if labels.is_empty() {
        return Err(Error::EmptyData { what: "digits file has no item" });
    }
    let features = Array2::from_shape_vec((labels.len(), 64), values)
        .map_err(|e| Error::Parse { line: 0, reason: e.to_string() })?;
    Ok(Classification { features, labels, n_classes: 10 })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn digits_load_with_known_counts() {
        let d = digits().unwrap();
        assert_eq!(d.features.dim(), (1_797, 64));
        // Class counts of scikit-learn's load_digits().
        let mut counts = [0usize; 10];
        for &l in &d.labels {
            counts[l] += 1;
        }
        assert_eq!(counts, [178, 182, 177, 183, 181, 182, 181, 179, 174, 180]);
        assert_eq!(d.features.row(0).iter().take(8).copied().collect::<Vec<_>>(), [0., 0., 5., 13., 9., 1., 0., 0.]);
        let (tr, te) = d.split(0.2, 3).unwrap();
        assert_eq!((tr.len(), te.len()), (1_438, 359));
        assert_eq!(d.split(0.2, 3).unwrap(), (tr, te));
        assert!(d.split(0.0, 3).is_err());
    }

    #[test]
    fn corrupt_digits_are_parse_errors() {
        assert!(matches!(parse_digits("1,2,3"), Err(Error::Parse { line: 1, .. })));
        let mut row = vec!["0"; 64];
        row.push("3");
        let good = row.join(",");
        assert_eq!(parse_digits(&good).unwrap().len(), 1);
        let bad_pixel = good.replacen('0', "17", 1);
        assert!(matches!(parse_digits(&format!("{good}\n{bad_pixel}")), Err(Error::Parse { line: 2, .. })));
        assert!(matches!(parse_digits(&good.replace(",3", ",x")), Err(Error::Parse { .. })));
        assert!(matches!(parse_digits(""), Err(Error::EmptyData { .. })));
    }
}
