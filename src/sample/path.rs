//! The one [`Sample::run`]: what the builder drives is a [`SamplePath`], whose implementations
//! live beside their paths (`sample/run.rs`: every tuned [`Discretisation`](crate::Discretisation),
//! HAMCMC, MALA; `sample/coupled.rs`: Richardson–Romberg and multilevel SGLD).

use super::builder::Sample;
use crate::error::Result;
use crate::models::model::Model;

/// What [`Sample`] can drive, and what its run returns: how the sampler (or coupled method) is
/// set up from the model, run, checked and judged. Sealed: implemented in this crate, for
///
/// | `S` | the path | [`Output`](Self::Output) |
/// |---|---|---|
/// | any [`Tunable`](crate::tune::Tunable) + [`Discretisation`](crate::Discretisation) (SGLD, SGHMC, SGNHT, pSGLD, a kernel of your own with [`TunableKernel`](crate::TunableKernel)) | [`tune`](crate::tune::tune), dispersed starts, the run, the step-bias companion, the verdict, extensions towards the accuracy | [`Sampled<S>`](crate::Sampled) |
/// | [`Hamcmc`](crate::Hamcmc) | the same without the companion (not a `Discretisation`) | `Sampled<Hamcmc<E>>` |
/// | [`ReSgld`](crate::ReSgld) | [`tune`](crate::tune::tune) of its τ = 1 replica as SGLD, the ladder on that step, the run, the step-bias companion of the τ = 1 replica, the verdict on its draws | `Sampled<ReSgld<E>>` |
/// | [`Mala`](crate::Mala) | the mode and Hessian, MALA's own adaptation, the verdict (no step bias) | `Sampled<Mala>` |
/// | [`RichardsonRomberg`](crate::RichardsonRomberg) | [`tune_rr`](crate::tune_rr), the pairs, the extrapolated verdict | [`SampledRr<S>`](crate::SampledRr) |
/// | [`Multilevel`](crate::Multilevel) | [`MlSgld::sgld_tuned`](crate::MlSgld::sgld_tuned), adaptive MLMC to the target | [`SampledMl<E>`](crate::SampledMl) |
pub trait SamplePath<M: Model + ?Sized>: Sized + sealed::Sealed<M> {
    /// What [`Sample::run`] returns for this sampler.
    type Output;

    /// The path itself (called by [`Sample::run`]).
    #[doc(hidden)]
    fn sample(builder: Sample<'_, M, Self>) -> Result<Self::Output>;
}

pub(crate) mod sealed {
    /// Seals [`SamplePath`](super::SamplePath): implemented beside each path's impl.
    pub trait Sealed<M: ?Sized> {}
}

impl<'m, M: Model + ?Sized, S: SamplePath<M>> Sample<'m, M, S> {
    /// Sets up, runs, checks and judges (see the [module docs](crate::sample)): for a tuned
    /// sampler, tunes it, starts the chains dispersed around the mode, runs them, checks the
    /// step's bias with a companion at half the step and states the verdict; aiming at an
    /// accuracy (the default), extends the chains until the stated bound meets it or the budget
    /// ends the run. Each kind of sampler's path and output: [`SamplePath`].
    ///
    /// Errors: invalid settings (no draws, no chain, a bias-check cost outside (0, 10], an
    /// accuracy that is not positive); those of the path's set-up ([`tune`](crate::tune::tune),
    /// [`tune_rr`](crate::tune_rr), [`MlSgld::sgld_tuned`](crate::MlSgld::sgld_tuned), the mode
    /// search), of [`dispersed_starts`](crate::tune::dispersed_starts), the
    /// [`Runner`](crate::Runner) and the step-bias check;
    /// [`Error::DimensionMismatch`](crate::Error::DimensionMismatch) for a start or names not of
    /// the model's dimension.
    pub fn run(self) -> Result<S::Output> {
        S::sample(self)
    }
}
