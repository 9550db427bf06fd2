//! Cost accounting in the crate's cost unit: evaluations on single data items.

use std::ops::{Add, AddAssign, Sub, SubAssign};

/// Work done, counted per data item, so that methods are compared on cost, not on iterations.
///
/// One minibatch gradient of size n counts n `datum_gradients`; one full gradient counts N; an
/// "epoch" is N. One-off setup passes (a full gradient at a control-variate centre, an
/// optimiser's iterations) are included by whoever makes them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[non_exhaustive]
pub struct Cost {
    /// Gradients `∇Uᵢ(θ)` of single data items evaluated.
    pub datum_gradients: u64,
    /// Potentials `Uᵢ(θ)` of single data items evaluated (MALA's acceptance test, diagnostics).
    pub datum_potentials: u64,
    /// Hessian-vector products `∇²Uᵢ(θ) v` of single data items evaluated.
    pub datum_hvps: u64,
}

impl Cost {
    /// A cost of `datum_gradients` gradient evaluations and nothing else.
    pub fn gradients(datum_gradients: u64) -> Self {
        Cost { datum_gradients, ..Cost::default() }
    }

    /// Datum-gradient evaluations divided by N: the cost in epochs.
    pub fn epochs(&self, n_data: usize) -> f64 {
        self.datum_gradients as f64 / n_data as f64
    }
}

impl Add for Cost {
    type Output = Cost;
    fn add(self, o: Cost) -> Cost {
        Cost {
            datum_gradients: self.datum_gradients + o.datum_gradients,
            datum_potentials: self.datum_potentials + o.datum_potentials,
            datum_hvps: self.datum_hvps + o.datum_hvps,
        }
    }
}

impl AddAssign for Cost {
    fn add_assign(&mut self, o: Cost) {
        *self = *self + o;
    }
}

impl Sub for Cost {
    type Output = Cost;
    /// The work done between two readings of a counter (`later − earlier`); saturates at 0.
    fn sub(self, o: Cost) -> Cost {
        Cost {
            datum_gradients: self.datum_gradients.saturating_sub(o.datum_gradients),
            datum_potentials: self.datum_potentials.saturating_sub(o.datum_potentials),
            datum_hvps: self.datum_hvps.saturating_sub(o.datum_hvps),
        }
    }
}

impl SubAssign for Cost {
    fn sub_assign(&mut self, o: Cost) {
        *self = *self - o;
    }
}

impl std::iter::Sum for Cost {
    fn sum<I: Iterator<Item = Cost>>(iter: I) -> Cost {
        iter.fold(Cost::default(), |a, b| a + b)
    }
}
