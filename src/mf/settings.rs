//! The model ([`MfModel`]), the update rule ([`MfUpdate`]), the run's settings and its output.

use crate::error::{Error, Result, check_positive};
use crate::models::PmfTerms;
use crate::samplers::{HamcmcSettings, PsgldSettings, SgldSettings};
use ndarray::Array2;

/// The model of [`mf`](crate::mf): rank K, variances and the offset m.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct MfModel {
    /// The rank K ≥ 1.
    pub rank: usize,
    /// Noise variance σ_x².
    pub noise_var: f64,
    /// Prior variance σ_w² of W.
    pub prior_var_w: f64,
    /// Prior variance σ_h² of H.
    pub prior_var_h: f64,
    /// The offset m added to every prediction (e.g. the training mean; every worker must use the
    /// same value).
    pub offset: f64,
    /// The starting point: every entry of W and H drawn from `N(0, init_scale²)` (θ = 0 is a
    /// saddle point).
    pub init_scale: f64,
}

impl MfModel {
    /// Checks every field.
    pub fn validate(&self) -> Result<()> {
        self.terms().map(|_| ())
    }

    /// The model of [`Pmf`](crate::Pmf) `pmf` (its rank, variances and offset, the training
    /// mean), started from `N(0, init_scale²)`: the block sampler then targets `pmf`'s
    /// posterior, with the same gradient terms.
    pub fn from_pmf(pmf: &crate::models::Pmf, init_scale: f64) -> Self {
        let t = pmf.terms();
        MfModel {
            rank: t.k,
            noise_var: t.vars[0],
            prior_var_w: t.vars[1],
            prior_var_h: t.vars[2],
            offset: t.offset,
            init_scale,
        }
    }

    /// Pmf's terms of these constants (after checking every field).
    pub(super) fn terms(&self) -> Result<PmfTerms> {
        let terms = PmfTerms::new(self.rank, self.noise_var, self.prior_var_w, self.prior_var_h, self.offset)?;
        check_positive("init_scale", self.init_scale)?;
        if !self.offset.is_finite() {
            return Err(Error::invalid("offset", self.offset, "must be finite"));
        }
        Ok(terms)
    }
}

/// The update of a block-scheduled chain.
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub enum MfUpdate {
    /// SGLD: DSGLD.
    Sgld(SgldSettings),
    /// pSGLD (RMSprop preconditioner), as [`Psgld`](crate::Psgld).
    Psgld(PsgldSettings),
    /// HAMCMC, as [`Hamcmc`](crate::Hamcmc) (the paper's distributed runs use M = 2).
    Hamcmc(HamcmcSettings),
}

impl MfUpdate {
    /// Checks the settings.
    pub fn validate(&self) -> Result<()> {
        match self {
            MfUpdate::Sgld(s) => s.validate(),
            MfUpdate::Psgld(s) => s.validate(),
            MfUpdate::Hamcmc(s) => s.validate(),
        }
    }

    /// A short name: `"DSGLD"`, `"pSGLD"` or `"HAMCMC"`.
    pub fn name(&self) -> &'static str {
        match self {
            MfUpdate::Sgld(_) => "DSGLD",
            MfUpdate::Psgld(_) => "pSGLD",
            MfUpdate::Hamcmc(_) => "HAMCMC",
        }
    }
}

/// Length and evaluation of a block-scheduled run.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct MfRunSettings {
    /// Iterations (after HAMCMC's warm-up).
    pub n_iter: u64,
    /// Iterations before the predictive mean starts averaging.
    pub burn_in: u64,
    /// Evaluate the test RMSE every this many iterations (and at the last one); the predictive
    /// mean averages the samples at these iterations after burn-in. 0: never (no test set needed).
    pub eval_every: u64,
    /// The master seed.
    pub seed: u64,
}

impl Default for MfRunSettings {
    fn default() -> Self {
        MfRunSettings { n_iter: 1_000, burn_in: 100, eval_every: 10, seed: crate::numeric::rng::DEFAULT_SEED }
    }
}

/// One evaluation of the test RMSE.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct MfTracePoint {
    /// The iteration.
    pub iteration: u64,
    /// Sampling wall time so far on this process, in seconds (evaluations excluded).
    pub seconds: f64,
    /// RMSE of the current sample's predictions.
    pub rmse_sample: f64,
    /// RMSE of the predictive mean (the average of the predictions of the evaluated samples after
    /// burn-in), once there is one.
    pub rmse_mean: Option<f64>,
}

/// The result of a block-scheduled run (the same on every worker).
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq)]
pub struct MfOutput {
    /// The last W (I × K).
    pub w: Array2<f64>,
    /// The last H (J × K).
    pub h: Array2<f64>,
    /// The test RMSE at every evaluation.
    pub trace: Vec<MfTracePoint>,
    /// How often each diagonal was picked.
    pub diagonal_counts: Vec<u64>,
    /// HAMCMC pairs not used because `sᵀy ≤ 0` (0 for the other updates).
    pub skipped_pairs: u64,
    /// Sampling wall time on this process, in seconds (evaluations excluded).
    pub seconds: f64,
}

impl MfOutput {
    /// The last RMSE of the predictive mean (or of the sample, if no mean was formed).
    pub fn final_rmse(&self) -> Option<f64> {
        self.trace.last().map(|p| p.rmse_mean.unwrap_or(p.rmse_sample))
    }
}
