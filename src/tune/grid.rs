//! The candidate grid shared by [`tune`] and [`tune_rr`](crate::tune_rr) ([`pilot_grid`]), one
//! pilot of [`tune`] ([`pilot`]), the Laplace approximation that scores it, and
//! [`dispersed_starts`].

use crate::cost::Cost;
use crate::error::{Error, Result, all_finite, check_len};
use crate::models::hessian::dense_hessian;
use crate::models::model::{Model, check_shape};
use crate::numeric::rng::{fill_standard_normal, stream};
use crate::run::runner::Runner;
use crate::trace::diagnostics::ksd_imq;
use crate::tune::score::{SCORE_SHARE, ScoredDraws, Scorer};
use crate::tune::settings::Tuned;
use crate::tune::settings::{PilotErrors, Trial, TuneSettings};
use crate::tune::tunable::Tunable;
use ndarray::Array2;
use rayon::prelude::*;
use std::sync::Arc;

/// A pilot as the candidate grid sees it: the step it ran at and its score (smaller is better;
/// `None` for a pilot that failed). [`Trial`] for [`tune`], the Richardson–Romberg pilots of
/// [`tune_rr`](crate::tune_rr).
pub(crate) trait GridPilot {
    /// The step the pilot ran at.
    fn step_size(&self) -> f64;
    /// Its score, `None` if it failed.
    fn score(&self) -> Option<f64>;
}

impl GridPilot for Trial {
    fn step_size(&self) -> f64 {
        self.step_size
    }

    fn score(&self) -> Option<f64> {
        self.ksd
    }
}

/// The index and score of the best-scored pilot.
pub(crate) fn best_scored<P: GridPilot>(pilots: &[P]) -> Option<(usize, f64)> {
    pilots.iter().enumerate().filter_map(|(i, p)| p.score().map(|k| (i, k))).min_by(|a, b| a.1.total_cmp(&b.1))
}

/// The candidate grid of [`tune`] and [`tune_rr`](crate::tune_rr), run once for both: the
/// pilots at `centre × factor` for each of [`TuneSettings::factors`] in parallel (pilot i gets
/// index i for its random streams), sorted by step, failures kept as pilots without a score.
/// Then, so that a fit has its minimum bracketed, the grid is extended by factors of 2 until two
/// scored candidates lie on each side of the best score: below the smallest step while fewer than
/// two scored candidates are below the best, else above the largest while fewer than two are
/// above it — never above a step that failed, nor above `limit` — at most
/// [`TuneSettings::max_extensions`] times (extension e gets index `factors.len() + e`).
///
/// `pilot(h, index)` runs one pilot; its errors (not a failed pilot: a failure is a pilot with
/// no score) stop the grid.
pub(crate) fn pilot_grid<P, F>(centre: f64, settings: &TuneSettings, limit: Option<f64>, pilot: F) -> Result<Vec<P>>
where
    P: GridPilot + Send,
    F: Fn(f64, u64) -> Result<P> + Sync,
{
    let mut pilots: Vec<P> =
        settings.factors.par_iter().enumerate().map(|(i, f)| pilot(centre * f, i as u64)).collect::<Result<_>>()?;
    pilots.sort_by(|a, b| a.step_size().total_cmp(&b.step_size()));
    let mut extensions = 0;
    while extensions < settings.max_extensions {
        let Some((i, _)) = best_scored(&pilots) else { break };
        let below = pilots[..i].iter().filter(|p| p.score().is_some()).count();
        let above = pilots[i + 1..].iter().filter(|p| p.score().is_some()).count();
        let top = pilots[pilots.len() - 1].step_size();
        let top_failed = pilots.last().is_some_and(|p| p.score().is_none());
        let down = below < 2;
        let step = if down {
            pilots[0].step_size() / 2.0
        } else if above < 2 && !top_failed && limit.is_none_or(|l| top * 2.0 <= l) {
            top * 2.0
        } else {
            break;
        };
        let p = pilot(step, (settings.factors.len() + extensions) as u64)?;
        if down {
            pilots.insert(0, p);
        } else {
            pilots.push(p);
        }
        extensions += 1;
    }
    Ok(pilots)
}

/// One pilot: a run from the mode at `step`, its draws thinned and scored by the pilots'
/// [`Scorer`] (exact or control-variate scores; see [`Scoring`]).
#[allow(clippy::too_many_arguments)]
pub(super) fn pilot<M: Model + ?Sized, S: Tunable>(
    model: &M,
    sampler: &S,
    mode: &[f64],
    (scale, laplace, scorer): (&[f64], &Laplace, &Scorer),
    step: f64,
    index: u64,
    settings: &TuneSettings,
) -> Result<Trial> {
    let s = sampler.with_step_size(step)?;
    let kept = settings.pilot_iterations - settings.pilot_burn_in;
    let rs = settings.pilot_run(settings.pilot_chains, settings.pilot_thin(), index, 0);
    let out = match Runner::new(model, &s).start(mode).settings(rs).run() {
        Ok(out) => out,
        Err(e) if e.is_divergence() => return Ok(Trial::failed(step, settings, e.to_string(), Cost::default())),
        Err(e) => return Err(e),
    };
    let mut cost = out.cost - out.setup_cost;
    let stored = out.estimate.stacked_draws()?;
    let chains = settings.pilot_chains;
    // The draws scored: every `stride`-th stored draw of each chain, so that stochastic scores
    // cost at most SCORE_SHARE of the pilot run itself (all of them when they cost less; exact
    // scores, sized so by the scorer where a pass is cheap, for all of them).
    let per_stored = stored.nrows() / chains;
    let budget = SCORE_SHARE * cost.datum_gradients.max(1) as f64;
    let stride = match scorer.is_exact() {
        true => 1,
        false => ((stored.nrows() as f64 * scorer.cost_per_score(model) as f64 / budget).ceil() as usize)
            .clamp(1, per_stored.max(1)),
    };
    let per = per_stored.div_ceil(stride);
    let picked: Vec<usize> = (0..chains).flat_map(|c| (0..per).map(move |i| c * per_stored + i * stride)).collect();
    let mut draws = stored.select(ndarray::Axis(0), &picked);
    let n = draws.nrows();
    let Some(ScoredDraws { mut scores, noise, cost: scoring }) = scorer.score(model, draws.view(), scale, rs.seed)
    else {
        cost.datum_gradients += scorer.cost_per_score(model) * n as u64;
        return Ok(Trial::failed(step, settings, "non-finite score at a draw".into(), cost));
    };
    cost += scoring;
    // The Stein moment terms on the raw draws, then the IMQ KSD on whitened coordinates
    // x'ⱼ = (xⱼ − θ̂ⱼ)·√Hⱼⱼ, whose scores are sⱼ/√Hⱼⱼ. With stochastic scores, every squared
    // term is corrected for the score noise's own variance (measured draw by draw).
    let rows = |c: usize| ndarray::Slice::from(c * per..(c + 1) * per);
    // The pooled draws' moment vectors serve the moment term and the error model.
    let (mean, second) = laplace.moment_vectors(draws.view(), scores.view(), mode);
    let moment_noise = noise.as_ref().map(|e| laplace.moment_noise(draws.view(), e.view(), mode));
    let moments: Vec<f64> = if settings.moment_weight > 0.0 {
        let noise2 = |v: &(Vec<f64>, Vec<f64>)| noise_norm(v);
        let stacked =
            std::iter::once(moments_norm2(&(mean.clone(), second.clone())) - moment_noise.as_ref().map_or(0.0, noise2));
        let each = (0..chains).map(|c| {
            let (x, sc) = (draws.slice_axis(ndarray::Axis(0), rows(c)), scores.slice_axis(ndarray::Axis(0), rows(c)));
            let own = noise
                .as_ref()
                .map_or(0.0, |e| noise2(&laplace.moment_noise(x, e.slice_axis(ndarray::Axis(0), rows(c)), mode)));
            laplace.moment_discrepancy2(x, sc, mode) - own
        });
        stacked.chain(each).map(|m| settings.moment_weight * m).collect()
    } else {
        vec![0.0; chains + 1]
    };
    let errors = pilot_errors(stored.view(), chains, kept, (mean, &second), moment_noise, n);
    let raw = Arc::new(stored);
    for mut row in draws.outer_iter_mut() {
        row.iter_mut().zip(scale).zip(mode).for_each(|((x, s), m)| *x = (*x - m) * s);
    }
    for mut row in scores.outer_iter_mut() {
        row.iter_mut().zip(scale).for_each(|(v, s)| *v /= s);
    }
    // The squared norms of the (scaled) noise per draw: the V-statistic's diagonal carries
    // k(x, x) = c^{2β} times each.
    let noise_norm2: Option<Vec<f64>> = noise
        .as_ref()
        .map(|e| e.outer_iter().map(|r| r.iter().zip(scale).map(|(v, s)| (v / s) * (v / s)).sum()).collect());
    let diagonal = settings.ksd.c.powf(2.0 * settings.ksd.beta);
    let discrepancy = |x: ndarray::ArrayView2<'_, f64>,
                       s: ndarray::ArrayView2<'_, f64>,
                       m: f64,
                       range: std::ops::Range<usize>|
     -> Result<f64> {
        let imq = ksd_imq(x, s, None, settings.ksd)?;
        let m2 = range.len() as f64;
        let bias = noise_norm2.as_ref().map_or(0.0, |e| diagonal * e[range].iter().sum::<f64>() / (m2 * m2));
        Ok(((imq * imq - bias).max(0.0) + m).max(0.0).sqrt())
    };
    let ksd = discrepancy(draws.view(), scores.view(), moments[0], 0..n)?;
    let ksd_se = if chains > 1 {
        let each: Vec<f64> = (0..chains)
            .map(|c| {
                discrepancy(
                    draws.slice_axis(ndarray::Axis(0), rows(c)),
                    scores.slice_axis(ndarray::Axis(0), rows(c)),
                    moments[c + 1],
                    c * per..(c + 1) * per,
                )
            })
            .collect::<Result<_>>()?;
        let m = each.iter().sum::<f64>() / chains as f64;
        let var = each.iter().map(|k| (k - m).powi(2)).sum::<f64>() / (chains - 1) as f64;
        Some((var / chains as f64).sqrt())
    } else {
        None
    };
    let (iterations, burn_in) = (settings.pilot_iterations, settings.pilot_burn_in);
    Ok(Trial {
        step_size: step,
        iterations,
        burn_in,
        ksd: Some(ksd),
        ksd_se,
        failure: None,
        cost,
        errors: Some(errors),
        draws: Some(raw),
    })
}

/// Above this dimension the Laplace covariance of the moment terms is taken diagonal
/// (`1/Hⱼⱼ`) instead of the dense `∇²U(θ̂)⁻¹` (d² numbers).
pub(super) const DENSE_LAPLACE_MAX_DIM: usize = 2_000;

/// The Laplace approximation at the mode, `Σ̂ = ∇²U(θ̂)⁻¹`, that the Stein moment terms use.
pub(crate) struct Laplace {
    /// `Σ̂`, or `None` when it is taken diagonal (`1/Hⱼⱼ`: too large, or H not positive
    /// definite).
    pub(super) cov: Option<Array2<f64>>,
    /// `√Σ̂ⱼⱼ`.
    pub(crate) sd: Vec<f64>,
}

impl Laplace {
    /// `Σⱼ (m_j² + M_jj²/4)/d` on draws x with scores s (rows), where with `v = Σ̂ s` and
    /// `u = x − θ̂`: `m_j = mean(v_j)/σ_j` and `M_jj = mean(v_j u_j)/σ_j² + 1`. `M_jj/2` is, to
    /// first order, the relative error of the sd, so means and sds count equally in sd units.
    ///
    /// These are the Stein identities `E[A g] = 0` (exact under the posterior, whatever its shape)
    /// of the test functions `g = Σ̂ e_j` and `g = Σ̂ e_j u_j`, scaled by the Laplace sds: for a
    /// Gaussian posterior equal to its Laplace approximation, `m_j` is the error of the mean of
    /// coordinate j in posterior sds and `M_jj` the relative error of its second moment about θ̂.
    /// It is the squared Stein discrepancy of a (matrix-valued) linear kernel, so a kernel Stein
    /// discrepancy of the IMQ kernel plus this term is one too.
    pub(super) fn moment_discrepancy2(
        &self,
        draws: ndarray::ArrayView2<'_, f64>,
        scores: ndarray::ArrayView2<'_, f64>,
        mode: &[f64],
    ) -> f64 {
        moments_norm2(&self.moment_vectors(draws, scores, mode))
    }

    /// The vectors `(m, M_diag)` of [`moment_discrepancy2`](Self::moment_discrepancy2). Both are
    /// linear in the sample's measure (`M_jj − 1` is), so those of a signed combination of samples
    /// are the same combination of theirs.
    pub(crate) fn moment_vectors(
        &self,
        draws: ndarray::ArrayView2<'_, f64>,
        scores: ndarray::ArrayView2<'_, f64>,
        mode: &[f64],
    ) -> (Vec<f64>, Vec<f64>) {
        let (n, d) = draws.dim();
        let (mut m, mut mm) = (vec![0.0; d], vec![0.0; d]);
        self.for_each_cov_row(draws, scores, |x, v| {
            for j in 0..d {
                m[j] += v[j];
                mm[j] += v[j] * (x[j] - mode[j]);
            }
        });
        let n = n as f64;
        let means = (0..d).map(|j| m[j] / (n * self.sd[j])).collect();
        let seconds = (0..d).map(|j| mm[j] / (n * self.sd[j] * self.sd[j]) + 1.0).collect();
        (means, seconds)
    }

    /// The variances that a stochastic score's noise adds to the moment vectors `(m, M_diag)` of
    /// [`moment_vectors`](Self::moment_vectors), from `noise`, per draw a vector with the
    /// covariance of that draw's score noise (see [`ScoredDraws::noise`]): the noise is independent
    /// from draw to draw, so with `w = Σ̂ e`, `Var(m_j) = Σᵢ w_ij² / (n σ_j)²` and
    /// `Var(M_jj) = Σᵢ (w_ij u_ij)² / (n σ_j²)²`, each an unbiased estimate.
    pub(crate) fn moment_noise(
        &self,
        draws: ndarray::ArrayView2<'_, f64>,
        noise: ndarray::ArrayView2<'_, f64>,
        mode: &[f64],
    ) -> (Vec<f64>, Vec<f64>) {
        let (n, d) = draws.dim();
        let (mut m, mut mm) = (vec![0.0; d], vec![0.0; d]);
        self.for_each_cov_row(draws, noise, |x, w| {
            for j in 0..d {
                m[j] += w[j] * w[j];
                let u = w[j] * (x[j] - mode[j]);
                mm[j] += u * u;
            }
        });
        let n2 = (n * n) as f64;
        let means = (0..d).map(|j| m[j] / (n2 * self.sd[j] * self.sd[j])).collect();
        let seconds = (0..d).map(|j| mm[j] / (n2 * self.sd[j].powi(4))).collect();
        (means, seconds)
    }

    /// Calls `f(x_i, Σ̂ s_i)` for each row i of `draws` and `scores`.
    fn for_each_cov_row(
        &self,
        draws: ndarray::ArrayView2<'_, f64>,
        scores: ndarray::ArrayView2<'_, f64>,
        mut f: impl FnMut(ndarray::ArrayView1<'_, f64>, &[f64]),
    ) {
        let (n, d) = draws.dim();
        let mut v = vec![0.0; d];
        // From KSD_GRAM_MIN_DIM, all the rows' Σ̂ s at once: a matrix product (Σ̂ is symmetric).
        let product = match &self.cov {
            Some(c) if d >= crate::trace::diagnostics::KSD_GRAM_MIN_DIM => {
                let mut out = Array2::zeros((n, d));
                ndarray::linalg::general_mat_mul(1.0, &scores, c, 0.0, &mut out);
                Some(out)
            }
            _ => None,
        };
        for (i, (x, s)) in draws.outer_iter().zip(scores.outer_iter()).enumerate() {
            match (&product, &self.cov) {
                (Some(p), _) => v.iter_mut().zip(p.row(i)).for_each(|(v, p)| *v = *p),
                (None, Some(c)) => v.iter_mut().zip(c.outer_iter()).for_each(|(v, row)| *v = row.dot(&s)),
                (None, None) => v.iter_mut().zip(&s).zip(&self.sd).for_each(|((v, s), sd)| *v = s * sd * sd),
            }
            f(x, &v);
        }
    }
}

/// `Σⱼ (Var m_j + Var M_jj/4)/d` of the noise variances `(Var m, Var M_diag)` of
/// [`Laplace::moment_noise`]: what the score noise adds, in expectation, to
/// [`moments_norm2`] of the moment vectors.
pub(crate) fn noise_norm((m, mm): &(Vec<f64>, Vec<f64>)) -> f64 {
    m.iter().zip(mm).map(|(a, b)| a + 0.25 * b).sum::<f64>() / m.len() as f64
}

/// `Σⱼ (m_j² + M_jj²/4)/d` of moment vectors `(m, M_diag)`.
pub(crate) fn moments_norm2((m, mm): &(Vec<f64>, Vec<f64>)) -> f64 {
    m.iter().zip(mm).map(|(a, b)| a * a + 0.25 * b * b).sum::<f64>() / m.len() as f64
}

/// Exact scores `−∇U` (full data, prior included) at each row of `draws`; `None` if one is not
/// finite.
pub(crate) fn exact_scores<M: Model + ?Sized>(model: &M, draws: ndarray::ArrayView2<'_, f64>) -> Option<Array2<f64>> {
    let (n, d) = draws.dim();
    let all = crate::error::all_indices(model.n_data()).ok()?;
    let mut scores = Array2::zeros((n, d));
    let (mut g, mut tmp) = (vec![0.0; d], vec![0.0; d]);
    for (i, row) in draws.outer_iter().enumerate() {
        let x = row.to_vec();
        model.grad_data_sum(&x, &all, &mut g).ok()?;
        model.grad_prior(&x, &mut tmp).ok()?;
        for j in 0..d {
            scores[[i, j]] = -(g[j] + tmp[j]);
        }
    }
    scores.iter().all(|v| v.is_finite()).then_some(scores)
}

impl Laplace {
    /// `n` draws `θ̂ + L z` from `N(θ̂, Σ̂)` (`Σ̂ = L Lᵀ`; diagonal: `σ ⊙ z`), `z` from the seeded
    /// stream.
    pub(crate) fn draws(&self, mode: &[f64], n: usize, seed: u64) -> Result<Vec<Vec<f64>>> {
        let d = mode.len();
        let l = match &self.cov {
            Some(c) => Some(crate::numeric::linalg::cholesky_lower("Laplace covariance", c)?),
            None => None,
        };
        let mut rng = stream(seed, &[0x6c61_706c]);
        let mut z = vec![0.0; d];
        let mut out = Vec::with_capacity(n);
        for _ in 0..n {
            fill_standard_normal(&mut rng, &mut z);
            let x: Vec<f64> = match &l {
                Some(l) => (0..d).map(|i| mode[i] + (0..=i).map(|k| l[[i, k]] * z[k]).sum::<f64>()).collect(),
                None => (0..d).map(|i| mode[i] + self.sd[i] * z[i]).collect(),
            };
            out.push(x);
        }
        Ok(out)
    }
}

/// `√(∇²U(θ̂))ⱼⱼ` for each coordinate: the IMQ KSD is computed on coordinates scaled to unit
/// posterior curvature, so that the kernel's width (c = 1) is on the posterior's own scale in
/// every direction. Also the Laplace covariance for the moment terms (dense when the Hessian is
/// dense and positive definite, else diagonal).
pub(super) fn ksd_scaling(dense: Option<&Array2<f64>>, diag: &[f64]) -> (Vec<f64>, Laplace) {
    let diag_of = |hjj: f64| if hjj > 0.0 && hjj.is_finite() { hjj } else { 1.0 };
    let scale: Vec<f64> = diag.iter().map(|&h| diag_of(h).sqrt()).collect();
    if let Some(Ok(cov)) = dense.map(|h| crate::numeric::linalg::spd_inverse("Hessian at the mode", h)) {
        let d = diag.len();
        return (scale, Laplace { sd: (0..d).map(|j| cov[[j, j]].sqrt()).collect(), cov: Some(cov) });
    }
    let laplace = Laplace { sd: scale.iter().map(|s| 1.0 / s).collect(), cov: None };
    (scale, laplace)
}

/// `n` starting points spread around the mode, for chains whose R̂ must be able to see that they
/// did not mix: `θ = mode + scale · L⁻ᵀ z`, `z ~ N(0, I)` from the seeded stream, where
/// `∇²U(mode) = L Lᵀ` — draws from the Laplace approximation `N(mode, scale² ∇²U⁻¹)`. The Hessian
/// comes from d Hessian-vector products (the model's, or central differences of full gradients).
/// `scale = 2` gives the over-dispersed starts Gelman & Rubin recommend.
///
/// ```
/// use sgmcmc::prelude::*;
/// use sgmcmc::{tune::dispersed_starts, find_mode};
///
/// let model = LogisticRegression::synthetic(1_000, 3, 10.0, 1)?;
/// let mode = find_mode(&model, &[0.0; 3], &ModeSettings::default())?.theta;
/// let starts = dispersed_starts(&model, &mode, 4, 2.0, 7)?;
/// let sgld = Sgld::new(SgldSettings::constant(1e-4), Minibatch::new(50))?;
/// let settings = RunSettings { n_iter: 2_000, burn_in: 500, n_chains: 4, ..Default::default() };
/// let out = Runner::new(&model, &sgld).starts(&starts).settings(settings).run()?;
/// assert_eq!(out.chains.len(), 4);
/// # Ok::<(), sgmcmc::Error>(())
/// ```
///
/// Errors: [`Error::DimensionMismatch`] / [`Error::NonFiniteStart`] for a bad mode;
/// [`Error::InvalidParameter`] for `n = 0` or a non-positive `scale`; a linear-algebra error if
/// the Hessian at `mode` is not positive definite (not a mode).
pub fn dispersed_starts<M: Model + ?Sized>(
    model: &M,
    mode: &[f64],
    n: usize,
    scale: f64,
    seed: u64,
) -> Result<Vec<Vec<f64>>> {
    check_shape(model)?;
    let d = model.dim();
    check_len("mode", d, mode.len())?;
    if !all_finite(mode) {
        return Err(Error::NonFiniteStart { what: "mode" });
    }
    if n == 0 {
        return Err(Error::invalid("n", n, "must be >= 1"));
    }
    crate::error::check_positive("scale", scale)?;
    let h = dense_hessian(model, mode, &mut Cost::default())?;
    dispersed_starts_from(&h, mode, n, scale, seed)
}

/// [`dispersed_starts`] from a given Hessian at the mode (the tuner's, see
/// [`TuneSettings::hessian_rows`]).
pub(crate) fn dispersed_starts_from(
    h: &Array2<f64>,
    mode: &[f64],
    n: usize,
    scale: f64,
    seed: u64,
) -> Result<Vec<Vec<f64>>> {
    let d = mode.len();
    check_len("Hessian rows", d, h.nrows())?;
    let l = crate::numeric::linalg::cholesky_lower("Hessian at the mode (for dispersed starts)", h)?;
    let mut rng = stream(seed, &[0x6469_7370]);
    let mut z = vec![0.0; d];
    let mut starts = Vec::with_capacity(n);
    for _ in 0..n {
        fill_standard_normal(&mut rng, &mut z);
        // Back-substitution Lᵀ x = z.
        let mut x = vec![0.0; d];
        for i in (0..d).rev() {
            let s: f64 = ((i + 1)..d).map(|k| l[[k, i]] * x[k]).sum();
            x[i] = (z[i] - s) / l[[i, i]];
        }
        starts.push(mode.iter().zip(&x).map(|(m, x)| m + scale * x).collect());
    }
    Ok(starts)
}

impl Trial {
    /// A pilot that failed (diverged, ran away, or met a non-finite score), with its cost.
    fn failed(step: f64, settings: &TuneSettings, why: String, cost: Cost) -> Trial {
        let (iterations, burn_in) = (settings.pilot_iterations, settings.pilot_burn_in);
        Trial {
            step_size: step,
            iterations,
            burn_in,
            ksd: None,
            ksd_se: None,
            failure: Some(why),
            cost,
            errors: None,
            draws: None,
        }
    }
}

/// What a pilot measured per coordinate for the error model: its autocorrelation times (kept
/// iterations per effective draw over its `chains` chains of `kept` iterations) and the Stein
/// moment errors of its mean and sd (`mean`, `second`: the moment vectors of its draws), with
/// the variances its stochastic scores add to them (`noise`, from [`Laplace::moment_noise`]).
fn pilot_errors(
    draws: ndarray::ArrayView2<'_, f64>,
    chains: usize,
    kept: u64,
    (mean, second): (Vec<f64>, &[f64]),
    noise: Option<(Vec<f64>, Vec<f64>)>,
    scored: usize,
) -> PilotErrors {
    let per = draws.nrows() / chains;
    let iterations = (kept * chains as u64) as f64;
    let tau = (0..draws.ncols())
        .map(|j| {
            let x = Array2::from_shape_fn((chains, per), |(c, i)| draws[[c * per + i, j]]);
            let ess = crate::trace::diagnostics::ess_mean(x.view()).unwrap_or(f64::NAN);
            iterations / ess
        })
        .collect();
    let d = draws.ncols();
    let (mut mean_noise, mut sd_noise): (Vec<f64>, Vec<f64>) = match noise {
        // The sd's error is M_jj/2: a quarter of M_jj's variance.
        Some((m, mm)) => (m, mm.iter().map(|v| 0.25 * v).collect()),
        None => (vec![0.0; d], vec![0.0; d]),
    };
    // The Stein errors come from the `scored` draws, whose effective number is at most theirs:
    // their Monte Carlo variance (per unit of the posterior's variance) is at least `1/scored`,
    // above the error model's `τ/N` where the scored draws are further apart than τ.
    let tau: Vec<f64> = tau;
    for j in 0..d {
        let extra = (1.0 / scored.max(1) as f64 - tau[j] / iterations).max(0.0);
        mean_noise[j] += extra;
        sd_noise[j] += 0.5 * extra;
    }
    PilotErrors { tau, mean, sd: second.iter().map(|m| m / 2.0).collect(), mean_noise, sd_noise }
}

impl<S> Tuned<S> {
    /// [`dispersed_starts`] around the tuned mode, from the Hessian the tuning estimated there
    /// (no further Hessian-vector products; the model's own Hessian where the tuning kept none).
    ///
    /// Errors: as [`dispersed_starts`].
    pub fn dispersed_starts<M: Model + ?Sized>(
        &self,
        model: &M,
        n: usize,
        scale: f64,
        seed: u64,
    ) -> Result<Vec<Vec<f64>>> {
        match &self.hessian {
            Some(h) => {
                if n == 0 {
                    return Err(Error::invalid("n", n, "must be >= 1"));
                }
                crate::error::check_positive("scale", scale)?;
                dispersed_starts_from(h, &self.mode, n, scale, seed)
            }
            None => dispersed_starts(model, &self.mode, n, scale, seed),
        }
    }
}
