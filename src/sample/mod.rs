//! The trustworthy path in one call: [`Sample`].
//!
//! ```
//! use sgmcmc::prelude::*;
//!
//! let model = LogisticRegression::synthetic(20_000, 3, 10.0, 1)?;
//! // Nothing set by hand: the estimator (control variates or a plain minibatch, and the
//! // minibatch size), the step and the run's length are chosen for the default accuracy.
//! let fit = Sample::new(&model, Sgld::auto()).seed(1).run()?;
//! println!("{fit}"); // the target reached, the step, the verdict with its step bias, the table
//! assert!(fit.target.as_ref().is_some_and(|t| t.reached));
//! # Ok::<(), sgmcmc::Error>(())
//! ```
//!
//! By default it aims at an accuracy ([`DEFAULT_ACCURACY`] = 0.1: every mean within ±0.1
//! posterior sd and every sd within ±10 %, 95 %, Monte Carlo error and step bias together) under
//! a budget; [`draws`](Sample::draws) asks for a fixed length instead. [`Sample::run`] does, in
//! order, what the seven-call path does by hand:
//! 1. [`tune`](crate::tune::tune): the mode, the whitening (the default [`Precondition::Auto`](crate::tune::Precondition::Auto)),
//!    the choice of an [`Auto`](crate::Auto) estimator, the gradient-noise correction where the
//!    sampler takes one, and the step — for the shortest run its error model predicts to meet
//!    the target ([`TuneSettings::target_accuracy`](crate::tune::TuneSettings::target_accuracy)),
//!    or for exactly the run asked for;
//! 2. [`dispersed_starts`](crate::tune::dispersed_starts): one start per chain around the mode, twice the Laplace spread, so
//!    that split-R̂ can see chains that have not forgotten where they began;
//! 3. [`Runner`](crate::Runner), with the model checked at the starts;
//! 4. [`step_bias`](crate::step_bias): a coupled companion at half the step from the chains'
//!    last states (an antithetic triple per chain), at [`STEP_BIAS_COST`](crate::STEP_BIAS_COST) of the run's cost, grown
//!    up to [`STEP_BIAS_MAX_COST`](crate::STEP_BIAS_MAX_COST) where its own noise sets the bound
//!    ([`bias_check`](Sample::bias_check) fixes its cost; `None` turns it off);
//! 5. the verdict ([`Convergence`](crate::diagnostics::Convergence), with the step bias folded into the accuracy it states) and
//!    the summary table (with the bias beside the Monte Carlo errors);
//! 6. aiming at an accuracy: until the run converges and states a bound within the target, the
//!    same chains extended ([`Resume`](crate::Resume): the draws of one run of the final length) by what their
//!    own errors say is needed, then 4 and 5 again — at most [`MAX_EXTENSIONS`] times, within
//!    the [`budget`](Sample::budget) and the [`time_limit`](Sample::time_limit) — and
//!    [`Sampled::target`] says what was reached, or why not and how long a run would reach it.
//!
//! **On the user's scale.** For a model with an [`output_layout`](crate::Model::output_layout) (a
//! [`Constrained`](crate::Constrained) model, also under [`Tempered`](crate::Tempered)), every
//! draw of the run and of the bias check is mapped to the constrained scale first: R̂, ESS,
//! Monte Carlo errors, the step bias, the bound and the table are those of σ, τ, a simplex's
//! components, … as the user reads them, named after the blocks (a mean's error on log τ says
//! little about τ's, whose tail is heavier). [`Sampled::derived`] gives any function of the
//! parameters (θⱼ = μ + τ θ̃ⱼ, a prediction, a contrast) the same verdict and table.
//!
//! **Every sampler.** The path above is that of every [`Tunable`](crate::tune::Tunable)
//! [`Discretisation`](crate::samplers::Discretisation) (SGLD, pSGLD, SGHMC, SGNHT, cyclical SGLD,
//! …). [`Hamcmc`](crate::Hamcmc) is tuned and run the same way but has no companion at half the
//! step (its L-BFGS metric is not a discretisation): its bound is the Monte Carlo error alone and
//! an accuracy target is never declared reached ([`Target::why`] says so). [`Mala`](crate::Mala),
//! the exact reference, skips the tuner (it adapts in its burn-in, at least its `adapt_steps`):
//! the mode and the Hessian set its starts, and with no step bias its Monte Carlo bound is the
//! accuracy it states. Richardson–Romberg ([`RichardsonRomberg`](crate::RichardsonRomberg)) and
//! [`Multilevel`] have their own paths ([`SampledRr`], [`SampledMl`]).
//!
//! Every choice it made is in the [`Sampled`] it returns: the tuner's record ([`Tuned`](crate::tune::Tuned), whose
//! `reason` and `preconditioning` say why), the run's settings and output, the bias check. The
//! pieces stay public for experts: the same draws come from calling them in this order with
//! the settings recorded in [`Sampled`].

mod coupled;
mod run;
mod target;
pub use coupled::{Multilevel, SampledMl, SampledRr};
pub use target::{DEFAULT_ACCURACY, DEFAULT_BUDGET, DEFAULT_BUDGET_EPOCHS, MAX_EXTENSIONS, Target};

mod builder;
mod path;
pub use builder::{Derived, START_SPREAD, Sample, Sampled};
pub use path::SamplePath;
