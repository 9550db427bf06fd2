//! One linear regression with an intercept, two coefficients and an unknown noise scale σ > 0
//! (`y ~ N(b0 + xᵀβ, σ²)`, `b0, β ~ N(0, 3²)`, `σ ~ Exponential(1)`) written three ways on its
//! natural scale — by hand, as a forward-mode AD density, and as the GLM family — each to be
//! wrapped in the same [`layout`]. Shared by `tests/autodiff.rs` and `examples/three_ways.rs`
//! (feature `forward-ad`).

use sgmcmc::ad::DualDensity;
use sgmcmc::ad::num_dual::DualNum;
use sgmcmc::ndarray::{Array1, Array2};
use sgmcmc::{Constrained, Family, Glm, GlmSettings, Layout, Model, Prior};

pub const P: usize = 2;
pub const PRIOR_SD: f64 = 3.0;
pub const RATE: f64 = 1.0;

pub struct Data {
    pub x: Vec<[f64; P]>,
    pub y: Vec<f64>,
}

/// `n` deterministic rows.
pub fn data(n: usize) -> Data {
    let x: Vec<[f64; P]> =
        (0..n).map(|i| [((i * 7) % 13) as f64 / 6.0 - 1.0, ((i * 5) % 11) as f64 / 5.0 - 1.0]).collect();
    let y = x.iter().enumerate().map(|(i, r)| 0.5 + 1.5 * r[0] - r[1] + 0.3 * (((i * 3) % 7) as f64 - 3.0)).collect();
    Data { x, y }
}

pub fn layout() -> Layout {
    Layout::new().real("b0", &[]).real("beta", &[P]).positive("sigma", &[])
}

/// 1. By hand: θ = (b0, β₁, β₂, σ), gradients written out.
pub struct Hand(pub Data);

impl Model for Hand {
    fn dim(&self) -> usize {
        P + 2
    }
    fn n_data(&self) -> usize {
        self.0.y.len()
    }
    fn grad_prior(&self, t: &[f64], out: &mut [f64]) -> sgmcmc::Result<()> {
        for j in 0..=P {
            out[j] = t[j] / (PRIOR_SD * PRIOR_SD);
        }
        out[P + 1] = RATE;
        Ok(())
    }
    fn grad_data_sum(&self, t: &[f64], idx: &[usize], out: &mut [f64]) -> sgmcmc::Result<()> {
        out.fill(0.0);
        let s = t[P + 1];
        for &i in idx {
            let r = self.0.y[i] - t[0] - t[1] * self.0.x[i][0] - t[2] * self.0.x[i][1];
            out[0] -= r / (s * s);
            out[1] -= r * self.0.x[i][0] / (s * s);
            out[2] -= r * self.0.x[i][1] / (s * s);
            out[P + 1] += 1.0 / s - r * r / (s * s * s);
        }
        Ok(())
    }
}

/// 2. Forward-mode AD: one datum's potential, generic over the scalar.
pub struct Dual(pub Data);

impl DualDensity for Dual {
    fn dim(&self) -> usize {
        P + 2
    }
    fn n_data(&self) -> usize {
        self.0.y.len()
    }
    #[inline(always)]
    fn datum<D: DualNum<Primitive = f64> + Copy>(&self, t: &[D], i: usize) -> D {
        let r = -(t[0] + t[1] * self.0.x[i][0] + t[2] * self.0.x[i][1]) + self.0.y[i];
        r * r / (t[3] * t[3] * 2.0) + t[3].ln()
    }
    fn prior<D: DualNum<Primitive = f64> + Copy>(&self, t: &[D]) -> D {
        (t[0] * t[0] + t[1] * t[1] + t[2] * t[2]) / (2.0 * PRIOR_SD * PRIOR_SD) + t[3] * RATE
    }
}

/// 3. The GLM family (Gaussian, intercept, the same prior), constrained by its own layout.
pub fn glm(d: &Data) -> sgmcmc::Result<Constrained<Glm>> {
    let x = Array2::from_shape_fn((d.y.len(), P), |(i, j)| d.x[i][j]);
    let settings = GlmSettings {
        prior: Prior::normal(0.0, PRIOR_SD),
        prior_intercept: Prior::normal(0.0, PRIOR_SD),
        centred_intercept: false,
        prior_aux: Prior::exponential(RATE),
        autoscale: false,
        ..Default::default()
    };
    Glm::new(Family::Gaussian, &x, &Array1::from(d.y.clone()), &settings)?.constrained()
}
