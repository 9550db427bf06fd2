//! Automatic step sizes: a curvature rule from the mode, refined by kernel Stein discrepancy on
//! short pilot runs.
//!
//! [`tune`] takes a model and a sampler (whatever step it was built with) and returns the sampler
//! with a chosen constant step, plus a record of everything tried:
//!
//! 1. **Mode**: the posterior mode θ̂ by [`find_mode`](crate::find_mode) from the starting point
//!    (or the starting point itself, if [`TuneSettings::find_mode`] is off).
//! 2. **Curvature** ([`curvature`]): `λ_max(∇²U(θ̂))` and `λ_min` from Hessian-vector products
//!    — the model's own ([`Model::hvp_prior`](crate::Model::hvp_prior), [`Model::hvp_data_sum`](crate::Model::hvp_data_sum)) or central differences
//!    of full gradients: the exact eigenvalues of the dense Hessian up to
//!    [`DENSE_CURVATURE_MAX_DIM`], Lanczos with full reorthogonalisation above. Then the
//!    whitening of [`TuneSettings::precondition`] and the curvature the whitened sampler sees.
//!    With a whitening, SGLD, SGHMC, SGNHT and pSGLD (any estimator with
//!    [independent draws](crate::GradientEstimator::independent_draws): minibatch, control variates,
//!    Taylor) also get their injected noise corrected by their estimator's noise
//!    ([`TuneSettings::correct_gradient_noise`], on by default; see [`GradientNoise`](crate::GradientNoise)): its
//!    covariance V̂ is measured in the whitened coordinates at `clamp(200 d, 10 000, 20 000)`
//!    Laplace draws, and each step injects `√(2h)·S z`, `S Sᵀ = I − (h/2) V̂` (SGHMC:
//!    `I − η V̂/(2α)`; SGNHT: `I − h V̂/(2A)`), so that with the minibatch noise the step carries
//!    the noise of its exact-gradient scheme. Up to the limit `h = 2/λ_max(V̂)` (SGHMC:
//!    `η = 2α/λ_max(V̂)`; SGNHT: `h = 2A/λ_max(V̂)`) this
//!    removes plain SGLD's dominant error, the variance inflation `≈ h V/2` of the minibatch noise
//!    (about `h N/(2n)` in whitened units), and leaves ULA's discretisation bias, at the limit
//!    about `n/(2N)` of a variance; where the limit is below half the curvature step the candidates of step 4 stop at it.
//!    pSGLD's step `θ ← θ − h G ∇Ũ + √(2hG) z` under its RMSprop metric G gets the minibatch
//!    noise as `h² G V G`: its increment is shaped by `S Sᵀ ≈ I − (h/2) G^{1/2} V̂ G^{1/2}`, a
//!    cubic series evaluated every step with the current G (see [`Psgld`](crate::Psgld)), up to
//!    the limit where `(h/2) λ_max(Ĝ^{1/2} V̂ Ĝ^{1/2}) = `[`PSGLD_CORRECTION_TARGET`] (Ĝ the
//!    metric RMSprop settles at), where the series leaves at most 0.5 % of a variance.
//! 3. **Centre**: a sampler-specific step from the curvature ([`Tunable::centre_step`]): for
//!    SGLD (any estimator, so SGLD-CV too) and SGHMC `1/λ_max` (half the Euler stability limit
//!    `2/λ_max`; for SGHMC's `η = h²` the leapfrog limit is `4/λ_max`); for pSGLD
//!    `1/λ_max(G^{1/2}∇²U G^{1/2})` with its RMSprop preconditioner G as it settles at the mode;
//!    for HAMCMC `1/λ_max(H ∇²U)` with the L-BFGS matrix H its warm-up builds at the mode.
//! 4. **Selection**: pilot runs (4 chains each) from the mode at `centre × factor` for each factor of
//!    [`TuneSettings::factors`] (default `2⁻⁶ … 2¹`), scored by the kernel Stein discrepancy
//!    of their draws with **exact** full-data scores, as Gorham & Mackey (NeurIPS 2015, ICML
//!    2017) chose SGLD step sizes; the kernel is their IMQ plus linear Stein moment terms
//!    ([`TuneSettings::moment_weight`]) so that errors in the posterior variances count. A pilot
//!    that diverges or runs away is recorded as a failure. The grid is extended by factors of 2
//!    until two scored candidates lie on each side of the smallest KSD (at most
//!    [`TuneSettings::max_extensions`] times, never above a step that failed).
//! 5. **The step for the planned run**: the minimiser of a prediction of the planned run's
//!    ([`TuneSettings::planned_run`]) *worst* error in posterior sds — the largest error of a
//!    posterior mean or sd over the coordinates, what the validation example reports — built per
//!    coordinate from what each pilot measured: its Monte Carlo error, from the pilot chains'
//!    effective sample sizes (iterations per effective draw `τ_j(h) = κ_j h^{−γ}`, γ = 1 for the
//!    overdamped Langevin schemes — SGLD, pSGLD, SGHMC at fixed friction — whose
//!    `τ·h` tends to a constant as h → 0 ([`Tunable::mixing_exponent`]), else fitted),
//!    scaled to the planned run's length; and its bias, from the Stein moment errors of the mean
//!    and the sd (exact Stein identities, in sds of the Laplace approximation) at the steps
//!    above the smallest KSD, as the first-order slope in `h` of a weighted fit with a free
//!    second-order term, counted where it stands out of the pilots' own Monte Carlo error
//!    (Bonferroni over the 2d slopes); then checked against the pilots directly: where the
//!    errors of an unbroken run of at least two pilots up to the largest scored step all stand
//!    out of their noise with one sign, β is at least the smallest of their slopes `|e|/h` and,
//!    where their slopes confirm a growth at least linear (then `β ≤ e/h` at every step), at most
//!    the smallest of their upper bounds `(|e| + z·se)/h` (without the floor a bias that swamps the pilots from
//!    the smallest steps on — uncorrected pSGLD at N/n = 200 — was fitted away and the chosen step's
//!    variances were 5.7× the posterior's). The prediction is `max_j β_j² h² + K h^{−γ}/N`, N the planned kept
//!    draws × chains and `K = E[max of 2d squared normals] · max_j κ_j` (the worst of 2d reported
//!    errors). When the gradient-noise correction's limit capped the candidates (where it is below
//!    half the curvature step: the minibatch noise dominates), the same minimiser up to the limit
//!    with `β² ≥` [`Tunable::exact_gradient_bias_slope`]`²` ([`ULA_SD_BIAS_SLOPE`] for SGLD and
//!    SGHMC, `Ĝ_max/4` for pSGLD): below the limit the bias left is the exact-gradient
//!    scheme's, at least whitened ULA's on a Gaussian (sd factor `≈ 1 + h/4`), which pilots at
//!    such small steps rarely resolve. No chosen step exceeds the limit.
//!    When no pilot showed bias otherwise (every larger step failed, as for SGNHT under strong uncorrected
//!    minibatch noise), the KSD curve decides as before: the minimiser of `D²(h) ≈ r·a/h + b·h² +
//!    c` fitted to every candidate's discrepancy (least squares weighted by each candidate's KSD
//!    standard error, floored at 10 %), with the Monte Carlo term scaled by `r` = the pilots' kept
//!    draws over the planned run's, clamped to the grid; with no convex fit, the smallest-KSD
//!    candidate scaled by `r^(1/3)` when the planned run is longer than the pilots. Every
//!    gradient spent — mode, curvature, centre, pilots and scoring — is counted in
//!    [`Tuned::cost`].
//!
//! [`precondition`] stops before the selection: it returns the mode, the curvature before and
//! after whitening and the sampler in whitened coordinates, for methods that choose their step
//! from the curvature alone (multilevel SGLD: [`MlSgld::sgld_tuned`](crate::MlSgld::sgld_tuned)).
//!
//! Why not the KSD alone: the KSD of a pilot is an average over coordinates at the pilot's
//! length, while a user reads the worst coordinate of a run of another length. On the validation
//! example's calendar-year regression the KSD fit chose a third of the best step for SGLD and
//! pSGLD at 5 000 × 4 draws (errors 1.64× and 1.66× the best): the slowest coordinate (log σ)
//! needed more draws than the average said. The per-coordinate prediction follows the worst one.
//!
#![doc = include_str!("../../docs/guide/tuning.md")]

pub use crate::models::hessian::HESSIAN_ROWS;
pub use crate::samplers::{PSGLD_CORRECTION_TARGET, PSGLD_WHITENED_DAMPING, ULA_SD_BIAS_SLOPE};

mod curvature;
pub use curvature::{Curvature, CurvatureSettings, DENSE_CURVATURE_MAX_DIM, curvature};

mod centre;
mod hamcmc;
mod tunable;
pub use tunable::{GRADIENT_NOISE_POINTS_MAX, GRADIENT_NOISE_POINTS_MIN, NoiseCorrected, Tunable};
mod settings;
pub use settings::{
    CONVERGENCE_ERROR_RATIO, CONVERGENCE_MARGIN, CORRECTION_MARGIN, Objective, PILOT_MIN_ITERATIONS, PILOT_SHARE,
    PlannedRun, Precondition, TUNE_DECREMENT_TOL, Trial, TuneSettings, Tuned,
};
mod grid;
pub use grid::dispersed_starts;
pub(crate) use grid::{GridPilot, Laplace, exact_scores, moments_norm2, noise_norm, pilot_grid};
mod predict;
pub(crate) use predict::discrepancy_fit_minimiser_scaled;
pub use predict::predicted_max_rhat;
pub(crate) mod geometry;
pub use geometry::{DENSE_WHITENING_MAX_DIM, Preconditioned, WARM_START_FRACTION, WARM_START_MIN_N, precondition};
pub(crate) use geometry::{Setup, setup};
mod auto;
pub use auto::{AUTO_MIN_BATCH, AUTO_STEP};
mod reason;
mod score;
pub(crate) use score::Scorer;
pub use score::{SCORE_BATCH, SCORE_NOISE_MAX, SCORE_NOISE_TARGET, SCORE_PROBE_POINTS, Scoring};

mod tuner;
pub use tuner::tune;

#[cfg(test)]
mod tests;
