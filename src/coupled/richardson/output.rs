//! What a Richardson–Romberg run returns ([`RrOutput`]): the extrapolated, coarse and fine
//! estimates, their verdict and table (quantiles of the signed measure).

use crate::cost::Cost;
use crate::coupled::richardson::NoiseCoupling;
use crate::error::{Error, Result, check_len};
use crate::numeric::rng::ChainRng;
use crate::run::{Divergence, RunSettings};
use crate::samplers::Discretisation;
use crate::trace::estimate::Estimate;
use ndarray::Array1;
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// The result of a [`Runner`](crate::run::runner::Runner) of Richardson–Romberg replicates; also
/// its checkpoint ([`save`](Self::save), [`load`](Self::load),
/// [`Resume`](crate::run::runner::Resume)).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RrOutput<S> {
    /// The extrapolated (signed) estimate `2·π̂_{γ/2} − π̂_γ`, pooled over replicates.
    pub estimate: Estimate,
    /// Chain A alone (step γ): plain SGLD / SGHMC at step γ.
    pub coarse: Estimate,
    /// Chain B alone (step γ/2).
    pub fine: Estimate,
    /// Final states `(A, B)` of each replicate that did not diverge.
    pub chains: Vec<(S, S)>,
    /// Total cost (three minibatch gradients per iteration per replicate, plus setup once).
    pub cost: Cost,
    /// The one-off setup cost included in `cost`.
    pub setup_cost: Cost,
    /// Wall time of the whole run (summed over resumptions).
    pub wall_time: Duration,
    /// The settings of the run.
    pub settings: RunSettings,
    /// Iterations (of chain A) each replicate did, in replicate order.
    pub iterations: Vec<u64>,
    /// Replicates that diverged, under [`OnDivergence::Report`](crate::OnDivergence::Report).
    pub divergences: Vec<Divergence>,
    /// Per replicate: the generators where they stopped (to resume).
    pub(super) streams: Vec<[ChainRng; 4]>,
    pub(super) coupling: NoiseCoupling,
    pub(super) model: crate::run::checkpoint::ModelFingerprint,
}

impl<S: Discretisation + serde::Serialize + serde::de::DeserializeOwned> RrOutput<S> {
    /// Saves the Richardson–Romberg run to `path` (see [`RunOutput::save`](crate::RunOutput::save)).
    ///
    /// Errors: [`Error::Io`].
    pub fn save(&self, path: impl AsRef<std::path::Path>) -> Result<()> {
        crate::run::checkpoint::save(path.as_ref(), "richardson-romberg", std::any::type_name::<S>(), self)
    }

    /// Loads a Richardson–Romberg run saved by [`save`](Self::save) with the same sampler type.
    ///
    /// Errors: as [`RunOutput::load`](crate::RunOutput::load).
    pub fn load(path: impl AsRef<std::path::Path>) -> Result<Self> {
        crate::run::checkpoint::load(path.as_ref(), "richardson-romberg", std::any::type_name::<S>())
    }
}

impl<S> RrOutput<S> {
    /// The extrapolated estimate of replicate `c` alone.
    ///
    /// Errors: [`Error::NoSamples`] if `c` is out of range.
    pub fn replicate(&self, c: usize) -> Result<Estimate> {
        let none = || Error::NoSamples { reason: "no such replicate" };
        let fine = self.fine.part(c).ok_or_else(none)?;
        let coarse = self.coarse.part(c).ok_or_else(none)?;
        Estimate::combine([fine, coarse.scaled(-1.0)])
    }

    /// The discretisation-bias estimate of the mean, `mean(B) − mean(A)` ≈ `(π_{γ/2} − π_γ)(θ)`,
    /// which is about minus half of plain SGLD's bias at step γ.
    pub fn bias_estimate_mean(&self) -> Result<Array1<f64>> {
        Ok(self.fine.mean()? - self.coarse.mean()?)
    }

    /// Whether every replicate that did not diverge did all `settings.n_iter` iterations.
    pub fn is_complete(&self) -> bool {
        self.iterations.iter().all(|&k| k >= self.settings.n_iter)
    }

    /// Whether the replicates of the **extrapolated** estimate mixed, and its Monte Carlo error:
    /// per replicate and kept iteration t the extrapolated draw
    /// `z_t = (w_B b_{2t} + w_B b_{2t+1} − w_A a_t) / w_t` (B's two draws and A's one, with their
    /// weights; for a constant step `b_{2t} + b_{2t+1} − a_t`) is one step of a Markov chain (the
    /// coupled pair) whose weighted mean is the extrapolated mean, so its split-R̂, ESS and
    /// MCSE over the replicates are those of [`estimate`](Self::estimate)'s means; the MCSE of
    /// each extrapolated sd is that of the same combination of squared deviations (delta method).
    /// [`Convergence::error_bound`](crate::diagnostics::Convergence::error_bound) is then the
    /// run's own accuracy claim. The fine or coarse chains alone
    /// ([`diagnostics::convergence`](crate::diagnostics::convergence) of [`fine`](Self::fine)) do
    /// not measure the extrapolation's larger variance.
    ///
    /// Errors: as [`summary_table`](Self::summary_table).
    pub fn convergence(&self) -> Result<crate::trace::diagnostics::Convergence> {
        Ok(crate::trace::diagnostics::convergence_of(&self.extrapolated_rows()?, self.fine.n_parts()))
    }

    /// The summary table of the extrapolated estimate (what
    /// [`diagnostics::summary_table`](crate::diagnostics::summary_table) gives for a plain run;
    /// it cannot take [`estimate`](Self::estimate), whose parts have different lengths): mean
    /// and sd of the signed measure; MCSE, ESS and R̂ of the extrapolated draws per replicate
    /// (see [`convergence`](Self::convergence)); the 5/50/95 % quantiles and the interval from
    /// the signed measure's distribution function `F(x) = (Σ_B w 1[b ≤ x] − Σ_A w 1[a ≤ x]) / Σ w`
    /// (made non-decreasing by its running maximum), in [`Convention::ArviZ1`]: the 89 %
    /// equal-tailed interval (`eti89_lb`, `eti89_ub`). A signed measure has no HDI: the rows'
    /// `hdi` holds the 94 % equal-tailed interval. Rows failing R̂ ≤ 1.01 or ESS ≥ 400 are
    /// marked `*` as usual.
    ///
    /// Errors: [`Error::NotStored`] for a run that kept only running moments,
    /// [`Error::DimensionMismatch`] if a replicate's chain B did not keep two draws per draw of
    /// A, and as [`diagnostics::summary_of_weighted_draws`](crate::diagnostics::summary_of_weighted_draws).
    ///
    /// [`Convention::ArviZ1`]: crate::diagnostics::Convention::ArviZ1
    pub fn summary_table(&self) -> Result<crate::trace::diagnostics::SummaryTable> {
        let rows = self.extrapolated_rows()?;
        crate::trace::diagnostics::SummaryTable::new((0..rows.len()).map(|j| format!("θ[{j}]")).collect(), rows)
    }

    /// One [`Summary`](crate::diagnostics::Summary) per coordinate of the extrapolated estimate.
    fn extrapolated_rows(&self) -> Result<Vec<crate::trace::diagnostics::Summary>> {
        extrapolated_rows(&self.coarse, &self.fine)
    }
}

/// One [`Summary`](crate::diagnostics::Summary) per coordinate of the extrapolated estimate of a
/// Richardson–Romberg run's chains A (`coarse`) and B (`fine`), as [`RrOutput::summary_table`]
/// describes (also of their draws mapped alike, e.g. to a constrained scale).
pub(crate) fn extrapolated_rows(coarse: &Estimate, fine: &Estimate) -> Result<Vec<crate::trace::diagnostics::Summary>> {
    use crate::trace::diagnostics::{Convention, summary_of_weighted_draws};
    let m = fine.n_parts();
    check_len("replicates of chain A", m, coarse.n_parts())?;
    let stored = || Error::NotStored { what: "samples (the run kept only running moments)" };
    let mut pairs = Vec::with_capacity(m);
    for c in 0..m {
        let (b, a) = (fine.samples(c).ok_or_else(stored)?, coarse.samples(c).ok_or_else(stored)?);
        check_len("draws of chain B (two per draw of chain A)", 2 * a.draws().nrows(), b.draws().nrows())?;
        pairs.push((b, a));
    }
    let n = pairs.first().map_or(0, |(_, a)| a.draws().nrows());
    for (_, a) in &pairs {
        check_len("draws per replicate", n, a.draws().nrows())?;
    }
    let d = fine.dim();
    let w = ndarray::Array2::from_shape_fn((m, n), |(c, t)| {
        let (b, a) = &pairs[c];
        b.weights()[2 * t] + b.weights()[2 * t + 1] - a.weights()[t]
    });
    let extrapolated = |c: usize, t: usize, f: &dyn Fn(f64) -> f64, j: usize| {
        let (b, a) = &pairs[c];
        let (bw, aw) = (b.weights(), a.weights());
        let (bd, ad) = (b.draws(), a.draws());
        (bw[2 * t] * f(bd[[2 * t, j]]) + bw[2 * t + 1] * f(bd[[2 * t + 1, j]]) - aw[t] * f(ad[[t, j]])) / w[[c, t]]
    };
    let mut rows = Vec::with_capacity(d);
    let mut signed: Vec<(f64, f64)> = Vec::with_capacity(3 * m * n);
    for j in 0..d {
        let z = ndarray::Array2::from_shape_fn((m, n), |(c, t)| extrapolated(c, t, &|x| x, j));
        let mut row = summary_of_weighted_draws(z.view(), w.view())?;
        let mu = row.mean;
        let v = ndarray::Array2::from_shape_fn((m, n), |(c, t)| extrapolated(c, t, &|x| (x - mu) * (x - mu), j));
        let var = summary_of_weighted_draws(v.view(), w.view())?;
        let sd = var.mean.max(0.0).sqrt();
        row.sd = sd;
        row.mcse_sd = var.mcse_mean / (2.0 * sd);
        // Quantiles of the signed measure.
        signed.clear();
        for (b, a) in &pairs {
            signed.extend(b.draws().column(j).iter().zip(b.weights()).map(|(&x, &w)| (x, w)));
            signed.extend(a.draws().column(j).iter().zip(a.weights()).map(|(&x, &w)| (x, -w)));
        }
        let q = signed_quantiles(&mut signed, &[0.03, 0.05, 0.055, 0.5, 0.945, 0.95, 0.97]);
        row.hdi = (q[0], q[6]);
        row.q05 = q[1];
        row.interval = (q[2], q[4]);
        row.median = q[3];
        row.q95 = q[5];
        row.convention = Convention::ArviZ1;
        row.weighted = true;
        rows.push(row);
    }
    Ok(rows)
}

/// The `ps` quantiles (ascending) of the signed measure `points` (value, weight): the smallest
/// value where the running maximum of the normalised cumulative weight reaches p. Sorts `points`.
fn signed_quantiles(points: &mut [(f64, f64)], ps: &[f64]) -> Vec<f64> {
    points.sort_by(|a, b| a.0.total_cmp(&b.0));
    let total: f64 = points.iter().map(|p| p.1).sum();
    let mut out = Vec::with_capacity(ps.len());
    let (mut cum, mut run_max, mut k) = (0.0, f64::NEG_INFINITY, 0);
    for &(x, w) in points.iter() {
        cum += w;
        run_max = run_max.max(cum / total);
        while k < ps.len() && run_max >= ps[k] {
            out.push(x);
            k += 1;
        }
    }
    while out.len() < ps.len() {
        out.push(points.last().map_or(f64::NAN, |p| p.0));
    }
    out
}
