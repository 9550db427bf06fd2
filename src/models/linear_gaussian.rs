//! Bayesian linear regression with a Gaussian prior: the exactly solvable test model.

use super::{DataScalar, Rows, axpy, normal_array, prior_precision, row_dot};
use crate::error::{Result, check_len, check_positive};
use crate::models::model::Model;
use crate::numeric::prefetch::prefetch;
use crate::numeric::rng::stream;
use ndarray::{Array1, Array2, ArrayView2, AsArray, Ix2};

/// Bayesian linear regression `xᵢ = aᵢᵀθ + εᵢ`, `εᵢ ~ N(0, σx²)`, prior `θ ~ N(0, σθ² I)`.
///
/// Potentials (constants dropped): `U₀(θ) = ‖θ‖² / (2σθ²)`, `Uᵢ(θ) = (xᵢ − aᵢᵀθ)² / (2σx²)`.
///
/// The posterior is Gaussian with precision `P = I/σθ² + AᵀA/σx²` and mean
/// `μ = P⁻¹ Aᵀx / σx²`, available from [`posterior_mean`](Self::posterior_mean),
/// [`posterior_covariance`](Self::posterior_covariance) and
/// [`posterior_precision`](Self::posterior_precision) (computed once, by Cholesky).
///
/// The design is stored as `X`: f64 ([`new`](Self::new)), or f32
/// ([`new_f32`](LinearGaussian::<f32>::new_f32), [`to_f32`](Self::to_f32)), which halves the
/// memory a minibatch gathers; parameters and arithmetic are f64 either way (see
/// [`DataScalar`]), and the exact posterior is that of the stored design.
#[derive(Debug, Clone)]
pub struct LinearGaussian<X: DataScalar = f64> {
    rows: Rows<X>,
    targets: Vec<f64>,
    noise_var: f64,
    prior_var: f64,
    inv_noise: f64,
    inv_prior: f64,
    post_prec: Array2<f64>,
    post_cov: Array2<f64>,
    post_mean: Array1<f64>,
    true_theta: Option<Array1<f64>>,
}

impl LinearGaussian<f64> {
    /// The model for design `A` (N × d, one datum per row), targets `x` (N), noise variance
    /// `σx²` and prior variance `σθ²`.
    ///
    /// Errors: [`Error::EmptyData`](crate::Error::EmptyData) for N = 0 or d = 0, [`Error::DimensionMismatch`](crate::Error::DimensionMismatch) if
    /// `targets.len() != N`, [`Error::InvalidParameter`](crate::Error::InvalidParameter) for non-positive variances or non-finite
    /// data.
    pub fn new<'a>(
        design: impl AsArray<'a, f64, Ix2>,
        targets: &Array1<f64>,
        noise_var: f64,
        prior_var: f64,
    ) -> Result<Self> {
        Self::from_rows(Rows::from_array(design, "design")?, targets, noise_var, prior_var)
    }

    /// A synthetic data set: `aᵢ ~ N(0, I_d)`, `θ_true ~ N(0, σθ² I)`,
    /// `xᵢ = aᵢᵀθ_true + N(0, σx²)`, from a seeded generator.
    pub fn synthetic(n_data: usize, dim: usize, noise_var: f64, prior_var: f64, seed: u64) -> Result<Self> {
        Self::synthetic_scaled(n_data, dim, 1.0, noise_var, prior_var, seed)
    }

    /// As [`synthetic`](Self::synthetic) with `aᵢ ~ N(0, s² I_d)`, `s = design_sd`
    /// (the SGRRLD paper's §5.1 uses `aᵢ ~ N(0, 0.5)`).
    pub fn synthetic_scaled(
        n_data: usize,
        dim: usize,
        design_sd: f64,
        noise_var: f64,
        prior_var: f64,
        seed: u64,
    ) -> Result<Self> {
        check_positive("design_sd", design_sd)?;
        check_positive("noise_var", noise_var)?;
        check_positive("prior_var", prior_var)?;
        super::check_synthetic_size(n_data, dim)?;
        let mut rng = stream(seed, &[0x11_6a55]);
        let theta = normal_array(&mut rng, dim) * prior_var.sqrt();
        let design = Array2::from_shape_fn((n_data, dim), |_| design_sd * super::standard_normal(&mut rng));
        let noise = normal_array(&mut rng, n_data) * noise_var.sqrt();
        let targets = design.dot(&theta) + noise;
        let mut m = Self::new(&design, &targets, noise_var, prior_var)?;
        m.true_theta = Some(theta);
        Ok(m)
    }

    /// The same model with its design stored in f32 (each entry rounded to the nearest f32,
    /// relative error ≤ 2⁻²⁴): half the memory, and half the bytes a minibatch gathers. The exact
    /// posterior is recomputed for the rounded design; the gradients are those of the model on
    /// it, computed in f64 (see [`DataScalar`]).
    ///
    /// Errors: [`Error::InvalidParameter`](crate::Error::InvalidParameter) (`"design"`) if an entry is beyond f32's range;
    /// [`Error::LinearAlgebra`](crate::Error::LinearAlgebra) if the rounded posterior precision is not positive definite.
    pub fn to_f32(&self) -> Result<LinearGaussian<f32>> {
        let targets = Array1::from_vec(self.targets.clone());
        let mut m = LinearGaussian::from_rows(self.rows.convert("design")?, &targets, self.noise_var, self.prior_var)?;
        m.true_theta = self.true_theta.clone();
        Ok(m)
    }
}

impl LinearGaussian<f32> {
    /// The model for a design stored in f32 (N × d), targets x (N), noise variance `σx²` and
    /// prior variance `σθ²`: [`new`](LinearGaussian::new) for data that are f32 already.
    ///
    /// Errors: as [`new`](LinearGaussian::new).
    pub fn new_f32<'a>(
        design: impl AsArray<'a, f32, Ix2>,
        targets: &Array1<f64>,
        noise_var: f64,
        prior_var: f64,
    ) -> Result<Self> {
        Self::from_rows(Rows::from_array(design, "design")?, targets, noise_var, prior_var)
    }
}

impl<X: DataScalar> LinearGaussian<X> {
    /// The model on rows already stored (see [`new`](LinearGaussian::new)).
    fn from_rows(rows: Rows<X>, targets: &Array1<f64>, noise_var: f64, prior_var: f64) -> Result<Self> {
        check_len("targets", rows.n, targets.len())?;
        crate::error::check_entries("targets", targets, f64::is_finite, "every entry must be finite")?;
        check_positive("noise_var", noise_var)?;
        let inv_prior = prior_precision(prior_var)?;
        let inv_noise = 1.0 / noise_var;
        let mut post_prec = rows.weighted_gram(|_| inv_noise);
        for j in 0..rows.d {
            post_prec[[j, j]] += inv_prior;
        }
        let mut atx = Array1::zeros(rows.d);
        for i in 0..rows.n {
            axpy(targets[i] * inv_noise, rows.row(i), atx.as_slice_mut().expect("contiguous"));
        }
        let post_cov = crate::numeric::linalg::spd_inverse("posterior precision", &post_prec)?;
        let post_mean = crate::numeric::linalg::spd_solve("posterior precision", &post_prec, &atx)?;
        Ok(LinearGaussian {
            rows,
            targets: targets.to_vec(),
            noise_var,
            prior_var,
            inv_noise,
            inv_prior,
            post_prec,
            post_cov,
            post_mean,
            true_theta: None,
        })
    }

    /// The exact posterior mean `μ`.
    pub fn posterior_mean(&self) -> &Array1<f64> {
        &self.post_mean
    }

    /// The exact posterior covariance `P⁻¹`.
    pub fn posterior_covariance(&self) -> &Array2<f64> {
        &self.post_cov
    }

    /// The posterior precision `P = I/σθ² + AᵀA/σx²` (the Hessian of U, constant).
    pub fn posterior_precision(&self) -> &Array2<f64> {
        &self.post_prec
    }

    /// The parameter the synthetic data were generated from (None for user data).
    pub fn true_theta(&self) -> Option<&Array1<f64>> {
        self.true_theta.as_ref()
    }

    /// The design matrix A (N × d), as stored.
    pub fn design(&self) -> ArrayView2<'_, X> {
        ArrayView2::from_shape((self.rows.n, self.rows.d), self.rows.values()).expect("shape matches storage")
    }

    /// The targets x (N).
    pub fn targets(&self) -> &[f64] {
        &self.targets
    }

    /// The noise variance σx².
    pub fn noise_var(&self) -> f64 {
        self.noise_var
    }

    /// The prior variance σθ².
    pub fn prior_var(&self) -> f64 {
        self.prior_var
    }
}

impl<X: DataScalar> Model for LinearGaussian<X> {
    fn dim(&self) -> usize {
        self.rows.d
    }

    fn n_data(&self) -> usize {
        self.rows.n
    }

    fn grad_prior(&self, theta: &[f64], out: &mut [f64]) -> Result<()> {
        for (o, t) in out.iter_mut().zip(theta) {
            *o = t * self.inv_prior;
        }
        Ok(())
    }

    /// By blocks of 16 rows, as [`LogisticRegression`](crate::LogisticRegression): the rows'
    /// dot products, the residuals `(aᵢᵀθ − xᵢ)/σx²`, then the rows added in index order; on data
    /// larger than the L2 cache, rows are prefetched 16 ahead of use. Allocates nothing.
    #[inline]
    fn grad_data_sum(&self, theta: &[f64], idx: &[usize], out: &mut [f64]) -> Result<()> {
        out.fill(0.0);
        let targets = &self.targets;
        self.rows.add_gradient_blocks(
            theta,
            idx,
            out,
            |i| prefetch(&targets[i]),
            |block, z| {
                for (z, &i) in z.iter_mut().zip(block) {
                    *z = (*z - self.targets[i]) * self.inv_noise;
                }
            },
        );
        Ok(())
    }

    fn potential_prior(&self, theta: &[f64]) -> Result<f64> {
        Ok(0.5 * self.inv_prior * row_dot(theta, theta))
    }

    fn potential_data_sum(&self, theta: &[f64], idx: &[usize]) -> Result<f64> {
        Ok(idx
            .iter()
            .map(|&i| {
                let r = row_dot(self.rows.row(i), theta) - self.targets[i];
                0.5 * self.inv_noise * r * r
            })
            .sum())
    }

    fn hvp_prior(&self, _theta: &[f64], v: &[f64], out: &mut [f64]) -> Result<()> {
        for (o, x) in out.iter_mut().zip(v) {
            *o = x * self.inv_prior;
        }
        Ok(())
    }

    fn hvp_data_sum(&self, _theta: &[f64], v: &[f64], idx: &[usize], out: &mut [f64]) -> Result<()> {
        out.fill(0.0);
        for &i in idx {
            let a = self.rows.row(i);
            axpy(row_dot(a, v) * self.inv_noise, a, out);
        }
        Ok(())
    }
}
