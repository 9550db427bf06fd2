//! How the pilots' draws are scored: the score `−∇U(θ)` at each scored draw, exactly (a full
//! pass over the data) or by control variates at the mode (two independent minibatches), with
//! the stochastic scores' own noise measured draw by draw so that the error model can count it.

use crate::cost::Cost;
use crate::error::Result;
use crate::gradient::Subsample;
use crate::models::model::Model;
use crate::numeric::rng::stream;
use ndarray::{Array2, ArrayView2};

/// The total minibatch of one stochastic score under [`Scoring::Auto`] (two independent halves
/// of 128): at the validation example's posteriors and the quickstart's, the control-variate
/// score's noise at the pilots' draws is a few hundredths of a posterior variance per
/// coordinate in whitened units, a few per cent of the pilots' own Monte Carlo variance.
pub const SCORE_BATCH: usize = 16;

/// How [`tune`](super::tune) and [`tune_rr`](crate::tune_rr) score their pilots' draws
/// ([`TuneSettings::scoring`](super::TuneSettings::scoring)).
///
/// A scored draw's score `−∇U(θ)` enters the Stein moment errors of the mean and sd that choose
/// the step, and the kernel Stein discrepancy. Exact scores cost a full pass over the data each
/// (N datum gradients); the pilots score 8 × 4 × 200 draws, so at N = 10⁵ exact scoring alone
/// cost 6 400 epochs. The control-variate score
/// `−[∇U₀(θ) + ∇U_data(θ̂) + (N/b) Σ_{i∈B} (∇Uᵢ(θ) − ∇Uᵢ(θ̂))]` is unbiased, costs `2b` datum
/// gradients, and its noise is small where it is evaluated (within a few posterior sds of the
/// mode θ̂, where its minibatch terms nearly cancel). The Stein moment errors are linear in the
/// score, so they stay unbiased; their extra variance is measured at each draw from the
/// difference of two independent halves and added to the pilots' Monte Carlo variance in the
/// error model, and the KSD's diagonal is corrected for it (the stochastic Stein discrepancies
/// of Gorham, Raj & Mackey, NeurIPS 2020, which converge to the exact one).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Scoring {
    /// Exact scores when a full pass costs at most two stochastic scores (`N ≤ 4 ·`
    /// [`SCORE_BATCH`]), else [`ControlVariate`](Self::ControlVariate) with `batch_size =`
    /// [`SCORE_BATCH`]. The default.
    #[default]
    Auto,
    /// Exact full-data scores (N datum gradients per scored draw).
    Exact,
    /// Control-variate scores at the mode on `batch_size` data drawn with replacement, in two
    /// independent halves (their difference measures the score's noise): `2 · batch_size` datum
    /// gradients per scored draw, plus one full gradient at the mode for the whole tuning.
    ControlVariate {
        /// The data of one score, both halves together (at least 2; each half has
        /// `batch_size / 2`).
        batch_size: usize,
    },
}

impl Scoring {
    /// Checks the batch size.
    pub(crate) fn validate(&self) -> Result<()> {
        match self {
            Scoring::ControlVariate { batch_size } if *batch_size < 2 => Err(crate::error::Error::invalid(
                "scoring batch_size",
                *batch_size,
                "must be >= 2 (two independent halves)",
            )),
            _ => Ok(()),
        }
    }

    /// The half-batch of a stochastic score on `n_data` data, or `None` for exact scores.
    fn half_batch(&self, n_data: usize) -> Option<usize> {
        match *self {
            Scoring::Exact => None,
            Scoring::Auto if n_data <= 4 * SCORE_BATCH => None,
            Scoring::Auto => Some(SCORE_BATCH / 2),
            Scoring::ControlVariate { batch_size } if 2 * batch_size >= n_data => None,
            Scoring::ControlVariate { batch_size } => Some((batch_size / 2).max(1)),
        }
    }
}

/// The scores of a set of draws and, for stochastic scores, the noise measured at each.
pub(crate) struct ScoredDraws {
    /// `−∇U` (or its estimate) at each row of the draws.
    pub(crate) scores: Array2<f64>,
    /// Per draw, half the difference of the two halves' scores: a vector whose covariance is
    /// that of the score's own noise at the draw (`None` for exact scores).
    pub(crate) noise: Option<Array2<f64>>,
    /// The datum gradients spent.
    pub(crate) cost: Cost,
}

/// Scores draws as [`Scoring`] says (see there), once set up at the mode.
pub(crate) struct Scorer {
    /// For control-variate scores: the mode, `∇U_data(θ̂)` (without the prior) and the half
    /// batch.
    cv: Option<(Vec<f64>, Vec<f64>, usize)>,
}

/// The random stream of a pilot's stochastic scores.
const SCORE_STREAM: u64 = 0x5343_4f52;

impl Scorer {
    /// The scorer [`Scoring`] asks for at the mode: for control-variate scores, one full
    /// gradient there; under [`Scoring::Auto`] their minibatch sized from the per-datum noise
    /// measured at [`SCORE_PROBE_POINTS`] draws of the Laplace approximation (`laplace`, `scale`
    /// the `√Hⱼⱼ` the noise is measured in), so that a score's noise variance is about
    /// [`SCORE_NOISE_TARGET`] per coordinate on the posterior's scale — exact scores where that
    /// costs a full pass or more (on small, skewed data sets, whose control variates are noisy).
    /// The costs are added to `cost`.
    ///
    /// Errors: those of the model's gradient.
    pub(crate) fn new<M: Model + ?Sized>(
        model: &M,
        mode: &[f64],
        (laplace, scale): (&super::Laplace, &[f64]),
        scoring: Scoring,
        seed: u64,
        cost: &mut Cost,
    ) -> Result<Self> {
        let n_data = model.n_data();
        let Some(half) = scoring.half_batch(n_data) else {
            return Ok(Scorer { cv: None });
        };
        let all = crate::error::all_indices(n_data)?;
        let mut g0 = vec![0.0; mode.len()];
        model.grad_data_sum(mode, &all, &mut g0)?;
        cost.datum_gradients += n_data as u64;
        let half = match scoring {
            Scoring::Auto => {
                let nu = probe_noise(model, mode, &g0, (laplace, scale), seed, cost)?;
                let want = (nu / (2.0 * SCORE_NOISE_TARGET)).ceil();
                if !want.is_finite() || 4.0 * want >= n_data as f64 {
                    return Ok(Scorer { cv: None });
                }
                (want as usize).max(half)
            }
            _ => half,
        };
        Ok(Scorer { cv: Some((mode.to_vec(), g0, half)) })
    }

    /// Whether the scores are exact.
    pub(crate) fn is_exact(&self) -> bool {
        self.cv.is_none()
    }

    /// The datum gradients of one score.
    pub(crate) fn cost_per_score<M: Model + ?Sized>(&self, model: &M) -> u64 {
        match &self.cv {
            None => model.n_data() as u64,
            Some((_, _, half)) => 4 * *half as u64,
        }
    }

    /// The scores of the rows of `draws`; the stochastic ones from the stream `(seed, …)`, each
    /// refined until its noise is small on the posterior's scale: with `scale` the Laplace
    /// approximation's `√Hⱼⱼ`, a draw whose measured noise variance `Σⱼ (eⱼ/scaleⱼ)²/d` exceeds
    /// [`SCORE_NOISE_MAX`] is scored again on halves twice as large, up to exact (the final
    /// halves are fresh draws, so the score stays unbiased and its measured noise is its own).
    /// `None` if one is not finite (or the model fails at a draw).
    pub(crate) fn score<M: Model + ?Sized>(
        &self,
        model: &M,
        draws: ArrayView2<'_, f64>,
        scale: &[f64],
        seed: u64,
    ) -> Option<ScoredDraws> {
        let (n, d) = draws.dim();
        let Some((mode, g0, half)) = &self.cv else {
            let scores = super::exact_scores(model, draws)?;
            return Some(ScoredDraws { scores, noise: None, cost: Cost::gradients((n * model.n_data()) as u64) });
        };
        let n_data = model.n_data();
        let mut rng = stream(seed, &[SCORE_STREAM]);
        let mut scores = Array2::zeros((n, d));
        let mut noise = Array2::zeros((n, d));
        let mut work = Work::new(d);
        let mut cost = 0u64;
        let all = crate::error::all_indices(n_data).ok()?;
        for (i, row) in draws.outer_iter().enumerate() {
            let x = row.to_vec();
            model.grad_prior(&x, &mut work.prior).ok()?;
            let mut b = *half;
            loop {
                if 4 * b >= n_data && b <= SCORE_REFINE_MAX * *half {
                    // Exact: as cheap as the next refinement.
                    model.grad_data_sum(&x, &all, &mut work.at).ok()?;
                    cost += n_data as u64;
                    for j in 0..d {
                        scores[[i, j]] = -(work.prior[j] + work.at[j]);
                        noise[[i, j]] = 0.0;
                    }
                    break;
                }
                cost += 4 * b as u64;
                work.halves(model, &x, mode, g0, b, &mut rng)?;
                let e2 = (0..d)
                    .map(|j| {
                        let e = 0.5 * (work.s[0][j] - work.s[1][j]) / scale[j];
                        e * e
                    })
                    .sum::<f64>()
                    / d as f64;
                if e2 <= SCORE_NOISE_MAX || 2 * b > SCORE_REFINE_MAX * *half {
                    for j in 0..d {
                        scores[[i, j]] = 0.5 * (work.s[0][j] + work.s[1][j]);
                        noise[[i, j]] = 0.5 * (work.s[0][j] - work.s[1][j]);
                    }
                    break;
                }
                b *= 2;
            }
        }
        let finite = scores.iter().chain(noise.iter()).all(|v| v.is_finite());
        finite.then_some(ScoredDraws { scores, noise: Some(noise), cost: Cost::gradients(cost) })
    }
}

/// The most score noise a stochastic score keeps, as a variance per coordinate on the
/// posterior's scale (whitened units, averaged over the coordinates): a quarter of the
/// posterior's own variance there. Near the mode the control variate's noise is far below it
/// (its minibatch terms nearly cancel); at draws far out on a skewed posterior it is not, and
/// those draws are scored again on larger halves (up to exactly).
pub const SCORE_NOISE_MAX: f64 = 8.0 * SCORE_NOISE_TARGET;

/// The per-datum noise `ν` of a control-variate score, per coordinate on the posterior's scale:
/// at [`SCORE_PROBE_POINTS`] Laplace draws, the half-difference of two half-scores on
/// [`SCORE_PROBE_BATCH`] data each, whose squared scaled norm over d estimates `ν/(2b)`.
fn probe_noise<M: Model + ?Sized>(
    model: &M,
    mode: &[f64],
    g0: &[f64],
    (laplace, scale): (&super::Laplace, &[f64]),
    seed: u64,
    cost: &mut Cost,
) -> Result<f64> {
    let d = mode.len();
    let b = SCORE_PROBE_BATCH.min(model.n_data());
    let points = laplace.draws(mode, SCORE_PROBE_POINTS, seed ^ 0x7072_6f62)?;
    let mut rng = stream(seed, &[SCORE_STREAM, 0x7072]);
    let mut work = Work::new(d);
    let mut total = 0.0;
    for x in &points {
        model.grad_prior(x, &mut work.prior)?;
        let Some(()) = work.halves(model, x, mode, g0, b, &mut rng) else {
            return Ok(f64::INFINITY);
        };
        total += (0..d).map(|j| (0.5 * (work.s[0][j] - work.s[1][j]) / scale[j]).powi(2)).sum::<f64>() / d as f64;
    }
    cost.datum_gradients += (points.len() * 4 * b) as u64;
    Ok(2.0 * b as f64 * total / points.len() as f64)
}

/// Laplace draws at which [`Scoring::Auto`] measures the control variate's noise to size its minibatch.
pub const SCORE_PROBE_POINTS: usize = 200;

/// The data of each half-score of [`Scorer::new`]'s noise probe.
const SCORE_PROBE_BATCH: usize = 4;

/// The noise variance per coordinate, on the posterior's scale (whitened units), that
/// [`Scoring::Auto`] sizes a control-variate score's minibatch for: half the posterior's own. The
/// pilots' Stein estimates average it over hundreds of draws, against a Monte Carlo error that
/// their autocorrelation makes larger.
pub const SCORE_NOISE_TARGET: f64 = 0.5;

/// The most a pilot's scores may cost, as a share of its run: where a score costs more than a
/// few of its steps (a minibatch of 16 against a score's 64), every `k`-th stored draw is scored,
/// and the error model counts the fewer draws' larger Monte Carlo error.
pub(crate) const SCORE_SHARE: f64 = 0.5;

/// The most a stochastic score's halves grow, as a multiple of their first size: a pilot at a
/// step near the stability limit visits states far from the mode, where the control variate's
/// noise is large everywhere; its draws keep their measured noise (the error model counts it)
/// rather than costing a full pass each.
pub const SCORE_REFINE_MAX: usize = 2;

/// The buffers of [`Scorer::score`].
struct Work {
    prior: Vec<f64>,
    at: Vec<f64>,
    centre: Vec<f64>,
    s: [Vec<f64>; 2],
    sub: Option<(usize, Subsample)>,
}

impl Work {
    fn new(d: usize) -> Self {
        Work { prior: vec![0.0; d], at: vec![0.0; d], centre: vec![0.0; d], s: [vec![0.0; d], vec![0.0; d]], sub: None }
    }

    /// The two control-variate half-scores at `x` on fresh halves of `b` data, into `s`.
    fn halves<M: Model + ?Sized>(
        &mut self,
        model: &M,
        x: &[f64],
        mode: &[f64],
        g0: &[f64],
        b: usize,
        rng: &mut crate::numeric::rng::ChainRng,
    ) -> Option<()> {
        if self.sub.as_ref().is_none_or(|(size, _)| *size != b) {
            let mut sub = Subsample::new(b, true);
            sub.prepare(model.n_data()).ok()?;
            self.sub = Some((b, sub));
        }
        let (_, sub) = self.sub.as_mut()?;
        let scale = model.n_data() as f64 / b as f64;
        for s in &mut self.s {
            sub.draw(rng);
            model.grad_data_sum(x, sub.indices(), &mut self.at).ok()?;
            model.grad_data_sum(mode, sub.indices(), &mut self.centre).ok()?;
            for j in 0..x.len() {
                s[j] = -(self.prior[j] + g0[j] + scale * (self.at[j] - self.centre[j]));
            }
        }
        Some(())
    }
}
