//! [`Sample`] for the coupled methods: Richardson–Romberg pairs ([`SampledRr`]) and multilevel
//! SGLD ([`Multilevel`], [`SampledMl`]).

use super::builder::{START_SPREAD, Sample};
use super::path::SamplePath;
use super::path::sealed::Sealed;
use crate::coupled::mlsgld::{AdaptiveSettings, MlSgld, MlSgldSettings, MlmcResult, RmseTarget};
use crate::coupled::richardson::{RichardsonRomberg, RrOutput, extrapolated_rows};
use crate::coupled::tune_rr::{TunedRr, tune_rr};
use crate::error::{Error, Result};
use crate::gradient::SubsampledEstimator;
use crate::models::Layout;
use crate::models::model::Model;
use crate::run::RunSettings;
use crate::run::runner::Runner;
use crate::sample::builder::outside_chains;
use crate::samplers::Discretisation;
use crate::trace::diagnostics::{Convergence, SummaryTable, convergence_of};
use crate::trace::estimate::Estimate;
use crate::tune::{Preconditioned, Tunable, dispersed_starts};

impl<M: Model + ?Sized, S: Tunable + Discretisation> Sealed<M> for RichardsonRomberg<S> {}

/// The trustworthy path for a Richardson–Romberg extrapolation (SGRRLD, SGRRHMC): chooses
/// chain A's step for this run with [`tune_rr`] (the mode, the whitening, the step from the
/// extrapolated measure's Stein moment errors), starts the replicate pairs dispersed around the
/// mode, runs them ([`Runner`]) and states the verdict and table of the
/// **extrapolated** draws (as [`RrOutput::convergence`] and [`RrOutput::summary_table`]; on
/// the constrained scale with the blocks' names for a model with an
/// [`output_layout`](Model::output_layout), both chains' draws mapped before they are
/// combined). The extrapolation removes the step's first-order bias, so there is no step-bias
/// companion: the stated bound is the extrapolated draws' Monte Carlo error
/// ([`bias_check`](Sample::bias_check) is ignored).
///
/// ```
/// use sgmcmc::prelude::*;
///
/// let model = LinearGaussian::synthetic(1_000, 2, 1.0, 10.0, 42)?;
/// let sgld = Sgld::new(SgldSettings::default(), Minibatch::new(100))?;
/// let fit = Sample::new(&model, RichardsonRomberg::new(sgld)).draws(2_000).seed(1).run()?;
/// println!("{fit}"); // chain A's step, the verdict, the extrapolated table
/// # Ok::<(), sgmcmc::Error>(())
/// ```
///
/// Errors: invalid settings; those of [`tune_rr`], [`dispersed_starts`] and
/// [`Runner`]; [`Error::DimensionMismatch`] for a start or names not of the model's
/// dimension.
impl<M: Model + ?Sized, S: Tunable + Discretisation> SamplePath<M> for RichardsonRomberg<S> {
    type Output = SampledRr<S>;

    fn sample(this: Sample<'_, M, RichardsonRomberg<S>>) -> Result<SampledRr<S>> {
        outside_chains(|| this.run_inner())
    }
}

impl<'m, M: Model + ?Sized, S: Tunable + Discretisation> Sample<'m, M, RichardsonRomberg<S>> {
    fn run_inner(self) -> Result<SampledRr<S>> {
        let (settings, layout, theta0, ts) = self.plan()?;
        let names = self.reported_names(layout.as_ref(), layout.as_ref().map_or(self.model.dim(), Layout::dim))?;
        let tuned = tune_rr(self.model, &self.sampler, &theta0, &ts)?;
        let starts =
            self.chain_starts_or(|| dispersed_starts(self.model, &tuned.mode, self.chains, START_SPREAD, self.seed))?;
        let output = Runner::new(self.model, &tuned.rr).starts(&starts).settings(settings).run()?;
        let rows = match &layout {
            Some(l) => {
                let f = |phi: &[f64], theta: &mut [f64]| l.forward(phi, theta, None);
                let (coarse, fine) = (output.coarse.map_draws(l.dim(), f)?, output.fine.map_draws(l.dim(), f)?);
                extrapolated_rows(&coarse, &fine)?
            }
            None => extrapolated_rows(&output.coarse, &output.fine)?,
        };
        let convergence = convergence_of(&rows, output.fine.n_parts()).named(&names);
        let table = SummaryTable::new(names, rows)?;
        Ok(SampledRr { tuned, output, convergence, table, settings })
    }
}

/// What [`Sample::run`] made for a Richardson–Romberg extrapolation, and every choice on the
/// way.
#[non_exhaustive]
#[derive(Debug, Clone)]
pub struct SampledRr<S> {
    /// The tuner's record: mode, whitening, chain A's step and why ([`TunedRr::reason`]).
    pub tuned: TunedRr<S>,
    /// The run: both chains' draws, the extrapolated estimate, cost, wall time.
    pub output: RrOutput<S>,
    /// The verdict on the extrapolated draws (on the constrained scale for a model with an
    /// [`output_layout`](Model::output_layout)); its bound is their Monte Carlo error.
    pub convergence: Convergence,
    /// The extrapolated draws' summary table (a signed measure: equal-tailed intervals, see
    /// [`RrOutput::summary_table`]).
    pub table: SummaryTable,
    /// The run's settings.
    pub settings: RunSettings,
}

impl<S> SampledRr<S> {
    /// The extrapolated estimate (signed weights), on the sampler's coordinates.
    ///
    /// A derived quantity's extrapolated expectation is
    /// [`estimate().expectation(f)`](Estimate::expectation): the signed weights extrapolate any
    /// `f(θ)` as they do the coordinates. Its error is not stated (no `derived` table here, as
    /// [`Sampled::derived`](super::Sampled::derived) gives for one chain per start): for a
    /// checked derived quantity, run the path of a single sampler.
    pub fn estimate(&self) -> &Estimate {
        &self.output.estimate
    }
}

impl<S> std::fmt::Display for SampledRr<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(
            f,
            "Richardson–Romberg: chain A's step {:.4e}, chain B's {:.4e}{} ({} replicate pairs x {} kept draws of A)",
            self.tuned.step_size,
            0.5 * self.tuned.step_size,
            if self.tuned.whitening.is_some() { " in whitened coordinates" } else { "" },
            self.settings.n_chains,
            self.settings.n_iter - self.settings.burn_in,
        )?;
        writeln!(f, "{}", self.convergence)?;
        write!(f, "{}", self.table)
    }
}

/// Multilevel SGLD on the trustworthy path: what `Sample::new(&model, Multilevel::new(estimator))`
/// runs ([`MlSgld::sgld_tuned`], then [`MlSgld::run_adaptive`] with every mean and sd at a
/// target accuracy). Build it with [`new`](Self::new) and the setters.
#[non_exhaustive]
#[derive(Debug, Clone)]
pub struct Multilevel<E> {
    /// The gradient estimator of every level (a [`ControlVariate`](crate::ControlVariate) or a
    /// plain [`Minibatch`](crate::Minibatch)).
    pub estimator: E,
    /// The multilevel settings before tuning (h₀ and the horizon are tuned; `keep_points` is
    /// set, the seed is [`Sample::seed`]'s).
    pub settings: MlSgldSettings,
    /// The target: every coordinate's mean to this RMSE in posterior sds and every sd to this
    /// relative RMSE ([`RmseTarget::Moments`]). Default 0.1.
    pub accuracy: f64,
    /// The most datum gradients the run may spend ([`AdaptiveSettings::max_cost`]); default
    /// none.
    pub max_cost: Option<u64>,
}

impl<E> Multilevel<E> {
    /// Multilevel SGLD with `estimator`, the default settings and accuracy 0.1.
    pub fn new(estimator: E) -> Self {
        Multilevel { estimator, settings: MlSgldSettings::default(), accuracy: 0.1, max_cost: None }
    }

    /// Every mean to RMSE `accuracy` posterior sds and every sd to relative RMSE `accuracy`.
    pub fn accuracy(mut self, accuracy: f64) -> Self {
        self.accuracy = accuracy;
        self
    }

    /// The most datum gradients the run may spend.
    pub fn max_cost(mut self, max_cost: u64) -> Self {
        self.max_cost = Some(max_cost);
        self
    }
}

impl<M: Model + ?Sized, E: SubsampledEstimator> Sealed<M> for Multilevel<E> {}

/// The trustworthy path for multilevel SGLD: [`MlSgld::sgld_tuned`] (the mode, the whitening,
/// h₀ and the horizon from the whitened curvature, h₀ capped at the gradient noise's limit),
/// then Giles' adaptive multilevel Monte Carlo ([`MlSgld::run_adaptive`]) with every
/// coordinate's mean and sd at the target [`Multilevel::accuracy`]
/// ([`RmseTarget::Moments`]), doubling the horizon itself where level 0 has not relaxed.
/// The paths are independent, so there is no R̂: the run's verdict is its bias tests, which
/// it passes or returns an error, and its stated accuracy is
/// [`MomentErrors::error_bound`](crate::MomentErrors::error_bound) (standard errors and
/// remaining biases together). [`draws`](Sample::draws), [`chains`](Sample::chains),
/// [`burn_in`](Sample::burn_in) and [`bias_check`](Sample::bias_check) do not apply; the
/// tuner's planned run is left as they give it. The estimates are of the sampler's
/// coordinates (φ for a constrained model, rows named `phi[j]`; names given with
/// [`names`](Sample::names) name these d coordinates).
///
/// ```
/// use sgmcmc::prelude::*;
/// use sgmcmc::Multilevel;
///
/// let model = LinearGaussian::synthetic(500, 2, 1.0, 10.0, 42)?;
/// let fit = Sample::new(&model, Multilevel::new(Minibatch::new(25)).accuracy(0.2)).seed(1).run()?;
/// println!("{fit}"); // h₀, levels, cost, every mean and sd with its error bars
/// assert!(fit.moments.error_bound.is_finite());
/// # Ok::<(), sgmcmc::Error>(())
/// ```
///
/// Errors: those of [`MlSgld::sgld_tuned`] and [`MlSgld::run_adaptive`] (a budget exhausted,
/// level 0 not relaxed after the doublings); [`Error::InvalidParameter`] for an accuracy that
/// is not finite and positive; [`Error::DimensionMismatch`] for a start or names not of the
/// model's dimension.
impl<M: Model + ?Sized, E: SubsampledEstimator> SamplePath<M> for Multilevel<E> {
    type Output = SampledMl<E>;

    fn sample(this: Sample<'_, M, Multilevel<E>>) -> Result<SampledMl<E>> {
        outside_chains(|| this.run_inner())
    }
}

impl<'m, M: Model + ?Sized, E: SubsampledEstimator> Sample<'m, M, Multilevel<E>> {
    fn run_inner(self) -> Result<SampledMl<E>> {
        let (_, layout, theta0, ts) = self.plan()?;
        crate::error::check_positive("accuracy", self.sampler.accuracy)?;
        // The estimates are of the sampler's coordinates: φ for a constrained model.
        let d = self.model.dim();
        let names = match (&layout, &self.names) {
            (Some(_), None) => (0..d).map(|j| format!("phi[{j}]")).collect(),
            _ => self.reported_names(None, d)?,
        };
        let settings = MlSgldSettings { keep_points: true, seed: self.seed, ..self.sampler.settings };
        let (ml, setup) = MlSgld::sgld_tuned(self.model, settings, self.sampler.estimator.clone(), &theta0, &ts)?;
        let g = whitened_square_mean(setup.whitening.clone());
        let target = AdaptiveSettings {
            target: RmseTarget::Moments(self.sampler.accuracy),
            max_cost: self.sampler.max_cost,
            ..Default::default()
        };
        let result = ml.run_adaptive(self.model, &g, &target)?;
        let moments = result.moments.clone().ok_or(Error::NotStored { what: "the multilevel run's end points" })?;
        Ok(SampledMl { h0: ml.h0(), ml, setup, result, moments, names })
    }
}

/// What [`Sample::run`] made for multilevel SGLD, and every choice on the way.
#[non_exhaustive]
#[derive(Debug, Clone)]
pub struct SampledMl<E> {
    /// The tuned level-0 step.
    pub h0: f64,
    /// The tuned multilevel sampler (its horizon before any doubling).
    pub ml: MlSgld<crate::samplers::Sgld<E>>,
    /// The tuner's record: mode, whitening, curvature, cost.
    pub setup: Preconditioned<crate::samplers::Sgld<E>>,
    /// The adaptive run: levels, cost, horizon doublings, the signed measure of the end points.
    pub result: MlmcResult,
    /// Every coordinate's mean and sd with their standard errors, remaining biases and the
    /// stated accuracy ([`MomentErrors::error_bound`](crate::MomentErrors::error_bound)).
    pub moments: crate::coupled::mlsgld::MomentErrors,
    /// The rows' names.
    pub names: Vec<String>,
}

impl<E> SampledMl<E> {
    /// The signed measure of the kept end points (weights `±1/N_l`).
    ///
    /// A derived quantity's multilevel expectation is
    /// [`estimate()?.expectation(f)`](Estimate::expectation) (the telescoping weights apply to
    /// any `f(θ)`); its error is not stated — the levels were sized for the coordinates' means
    /// and sds ([`moments`](Self::moments)), not for `f`.
    pub fn estimate(&self) -> Option<&Estimate> {
        self.result.measure.as_ref()
    }

    /// The scalar g the run targeted besides every mean and sd: the mean squared whitened
    /// coordinate `‖φ‖²/d` (about 1 under the Laplace approximation), for further runs of
    /// [`ml`](Self::ml) comparable with this one.
    pub fn g(&self) -> impl Fn(&[f64]) -> f64 + Send + Sync + use<E> {
        whitened_square_mean(self.setup.whitening.clone())
    }
}

/// `θ ↦ ‖φ‖²/d` with φ the whitened θ (θ itself without a whitening).
fn whitened_square_mean(w: Option<std::sync::Arc<crate::samplers::Whitening>>) -> impl Fn(&[f64]) -> f64 + Send + Sync {
    move |t: &[f64]| -> f64 {
        let mut phi = t.to_vec();
        if let Some(w) = &w {
            w.to_phi(t, &mut phi);
        }
        phi.iter().map(|x| x * x).sum::<f64>() / t.len() as f64
    }
}

impl<E> std::fmt::Display for SampledMl<E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let r = &self.result;
        writeln!(
            f,
            "multilevel SGLD: h₀ {:.4e}{}, {} levels, horizon {} ({} doubling(s)), {:.3e} datum gradients",
            self.h0,
            if self.setup.whitening.is_some() { " in whitened coordinates" } else { "" },
            r.levels.len(),
            r.horizon,
            r.horizon_doublings,
            r.cost.datum_gradients as f64,
        )?;
        writeln!(
            f,
            "bias tests passed: means within ±{:.3} sd, sds within ±{:.1} % ({:.0} %, all coordinates; standard errors and \
             remaining biases)",
            self.moments.error_bound,
            100.0 * self.moments.error_bound,
            100.0 * crate::trace::diagnostics::BOUND_PROB
        )?;
        let m = &self.moments;
        let width = self.names.iter().map(String::len).max().unwrap_or(4).max(4);
        writeln!(
            f,
            "{:width$}  {:>10} {:>10} {:>9} {:>9} {:>9} {:>9}",
            "", "mean", "sd", "se_mean", "se_sd", "bias_mean", "bias_sd"
        )?;
        for (j, name) in self.names.iter().enumerate() {
            writeln!(
                f,
                "{name:width$}  {:>10.4} {:>10.4} {:>9.4} {:>9.4} {:>9.4} {:>9.4}",
                m.mean[j], m.sd[j], m.se_mean[j], m.se_sd[j], m.bias_mean[j], m.bias_sd[j]
            )?;
        }
        Ok(())
    }
}
