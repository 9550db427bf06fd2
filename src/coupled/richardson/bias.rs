//! A run's own step bias ([`discretisation_bias`], [`BiasReport`]) from a companion at half the step.

use crate::cost::Cost;
use crate::coupled::richardson::RichardsonRomberg;
use crate::error::{Error, Result};
use crate::models::model::Model;
use crate::run::RunSettings;
use crate::run::runner::Runner;
use crate::samplers::Discretisation;

/// What [`discretisation_bias`] found: the run of the sampler at its own step h (chain A of a
/// Richardson–Romberg pair), and per coordinate the estimated bias of its mean and sd with their
/// standard errors, next to the Monte Carlo error of its mean.
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq)]
pub struct BiasReport {
    /// The run's posterior means (chains at step h, pooled).
    pub mean: Vec<f64>,
    /// The run's posterior sds.
    pub sd: Vec<f64>,
    /// The Monte Carlo standard error of each mean (from the spread of the chain means).
    pub mcse_mean: Vec<f64>,
    /// The estimated bias of each mean, `2 (π̂_h − π̂_{h/2})`.
    pub bias_mean: Vec<f64>,
    /// Its standard error (from the spread over chains; NaN with one chain).
    pub bias_mean_se: Vec<f64>,
    /// The estimated bias of each sd, `2 (sd_h − sd_{h/2})`.
    pub bias_sd: Vec<f64>,
    /// Its standard error.
    pub bias_sd_se: Vec<f64>,
    /// The number of chain pairs.
    pub chains: usize,
    /// Everything spent: about three times a plain run (the companion makes two half steps per
    /// step).
    pub cost: Cost,
    /// Whether the run's chains (at step h) mixed, and their Monte Carlo error bound
    /// ([`diagnostics::convergence`](crate::diagnostics::convergence) of them).
    pub convergence: crate::trace::diagnostics::Convergence,
    /// The run's own accuracy claim with its step bias: the largest over coordinates of
    /// `max(z·MCSE_mean + |bias_mean|, z·MCSE_sd + |bias_sd|) / (sd − z·MCSE_sd − |bias_sd|)`
    /// (the MCSEs by ESS as in the summary table, z and the units as
    /// [`Convergence::error_bound`](crate::diagnostics::Convergence::error_bound), the bias
    /// estimates as point values; ∞ when the denominator is not positive): every mean within
    /// that many posterior sds and every sd within that fraction, with about 95 % probability if
    /// the first-order bias estimate holds.
    pub error_bound: f64,
}

impl BiasReport {
    /// Coordinates whose estimated bias of the mean or of the sd is both distinguishable from
    /// zero (above 3 standard errors) and above the mean's Monte Carlo error: where the step, not
    /// the run length, limits the accuracy.
    pub fn biased(&self) -> Vec<usize> {
        (0..self.mean.len())
            .filter(|&j| {
                let m = self.bias_mean[j].abs() > (3.0 * self.bias_mean_se[j]).max(self.mcse_mean[j]);
                let s = self.bias_sd[j].abs() > (3.0 * self.bias_sd_se[j]).max(self.mcse_mean[j]);
                m || s
            })
            .collect()
    }
}

impl std::fmt::Display for BiasReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{:>6} {:>12} {:>10} {:>10} {:>12} {:>10} {:>12} {:>10}",
            "", "mean", "mcse_mean", "sd", "bias_mean", "± se", "bias_sd", "± se"
        )?;
        let biased = self.biased();
        for j in 0..self.mean.len() {
            write!(
                f,
                "\nθ[{j:>3}] {:>12.4e} {:>10.2e} {:>10.3e} {:>12.2e} {:>10.2e} {:>12.2e} {:>10.2e}{}",
                self.mean[j],
                self.mcse_mean[j],
                self.sd[j],
                self.bias_mean[j],
                self.bias_mean_se[j],
                self.bias_sd[j],
                self.bias_sd_se[j],
                if biased.contains(&j) { " !" } else { "" }
            )?;
        }
        if !biased.is_empty() {
            write!(
                f,
                "\n! the estimated step bias is above 3 standard errors and the Monte Carlo error: a smaller step \
                 (or Richardson–Romberg) would be more accurate"
            )?;
        }
        write!(
            f,
            "\nthe run at step h: {}\nwith its step bias: means within ±{:.3} sd, sds within ±{:.1} % ({:.0} %, all coordinates)",
            self.convergence,
            self.error_bound,
            100.0 * self.error_bound,
            100.0 * crate::trace::diagnostics::BOUND_PROB
        )?;
        Ok(())
    }
}

/// Estimates the bias that the step size (discretisation and minibatch noise) leaves in a run of
/// `sampler`: each chain runs with a companion at half the step driven by the same Brownian path
/// and independent minibatches of the same size (a Richardson–Romberg pair, run by the [`Runner`](crate::run::runner::Runner)); to first
/// order in h, `π̂_h − π = 2 (π̂_h − π̂_{h/2})`, for the means and the sds, averaged over chains with
/// standard errors from their spread. The run itself (chains at step h) is reported alongside,
/// with the Monte Carlo error of its means, so that one table shows which error dominates. Needs
/// a constant step and at least 2 chains (`settings.n_chains`) for the standard errors. Costs
/// about three times the plain run.
///
/// Errors: as a Richardson–Romberg run; [`Error::NoSamples`] if a chain kept nothing.
///
/// ```
/// use sgmcmc::prelude::*;
/// use sgmcmc::discretisation_bias;
///
/// let model = LinearGaussian::synthetic(1_000, 2, 1.0, 10.0, 3)?;
/// let sgld = Sgld::new(SgldSettings::constant(2e-4), Minibatch::new(10))?;
/// let settings = RunSettings { n_iter: 20_000, burn_in: 1_000, n_chains: 4, ..Default::default() };
/// let report = discretisation_bias(&model, &sgld, &[0.0, 0.0], &settings)?;
/// println!("{report}");
/// assert_eq!(report.mean.len(), 2);
/// # Ok::<(), sgmcmc::Error>(())
/// ```
pub fn discretisation_bias<M: Model + ?Sized, S: Discretisation>(
    model: &M,
    sampler: &S,
    theta0: &[f64],
    settings: &RunSettings,
) -> Result<BiasReport> {
    let out = Runner::new(model, &RichardsonRomberg::new(sampler.clone())).start(theta0).settings(*settings).run()?;
    let d = out.coarse.dim();
    let k = out.coarse.n_parts();
    let none = || Error::NoSamples { reason: "a chain kept no draw" };
    // Per chain: its means, and the bias estimates of the means and of the sds.
    type PerChain = (Vec<f64>, Vec<f64>, Vec<f64>);
    let mut per: Vec<PerChain> = Vec::with_capacity(k);
    for c in 0..k {
        let (a, b) = (out.coarse.part(c).ok_or_else(none)?, out.fine.part(c).ok_or_else(none)?);
        let (ma, va, mb, vb) = (a.mean()?, a.variance()?, b.mean()?, b.variance()?);
        let bias_m = (0..d).map(|j| 2.0 * (ma[j] - mb[j])).collect();
        let bias_s = (0..d).map(|j| 2.0 * (va[j].max(0.0).sqrt() - vb[j].max(0.0).sqrt())).collect();
        per.push((ma.to_vec(), bias_m, bias_s));
    }
    let kf = k as f64;
    let mean_se = |f: &dyn Fn(&PerChain) -> f64| -> (f64, f64) {
        let m = per.iter().map(f).sum::<f64>() / kf;
        let se = if k > 1 {
            (per.iter().map(|p| (f(p) - m).powi(2)).sum::<f64>() / (kf - 1.0) / kf).sqrt()
        } else {
            f64::NAN
        };
        (m, se)
    };
    let (mean, var) = (out.coarse.mean()?, out.coarse.variance()?);
    let rows = crate::trace::diagnostics::summary(&out.coarse)?;
    let convergence = crate::trace::diagnostics::convergence_of(&rows, k);
    let z = crate::trace::diagnostics::bound_z(d);
    let mut r = BiasReport {
        mean: mean.to_vec(),
        sd: var.iter().map(|v| v.max(0.0).sqrt()).collect(),
        mcse_mean: Vec::with_capacity(d),
        bias_mean: Vec::with_capacity(d),
        bias_mean_se: Vec::with_capacity(d),
        bias_sd: Vec::with_capacity(d),
        bias_sd_se: Vec::with_capacity(d),
        chains: k,
        cost: out.cost,
        convergence,
        error_bound: 0.0,
    };
    for (j, row) in rows.iter().enumerate() {
        r.mcse_mean.push(mean_se(&|p| p.0[j]).1);
        let (b, se) = mean_se(&|p| p.1[j]);
        r.bias_mean.push(b);
        r.bias_mean_se.push(se);
        let (b, se) = mean_se(&|p| p.2[j]);
        r.bias_sd.push(b);
        r.bias_sd_se.push(se);
        let a_m = z * row.mcse_mean + r.bias_mean[j].abs();
        let a_sd = z * row.mcse_sd + r.bias_sd[j].abs();
        let worst = crate::trace::diagnostics::relative_bound(a_m, a_sd, r.sd[j]);
        r.error_bound = crate::trace::diagnostics::nan_max(r.error_bound, worst);
    }
    Ok(r)
}
