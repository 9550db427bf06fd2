//! SGLD and SGLD-CV on Bayesian probabilistic matrix factorisation (PMF): held-out RMSE against
//! cost and wall time, in the setting of Baker et al. (2019), §5.2 (MovieLens-100k-sized data).
//!
//! Run with `cargo run --release --example pmf_ratings` (synthetic data; 24 s wall and CPU on an
//! idle 2-core machine), or `cargo run --release --example pmf_ratings -- path/to/u.data` for a
//! ratings file in the MovieLens `u.data` format (`user item rating [timestamp]` per line; the step sizes were tuned
//! on the synthetic set only). The last line of stdout is `RESULT {json}`, a one-line
//! machine-readable summary; an SVG plot of RMSE against cost is written to
//! `target/pmf_ratings.svg`.
//!
//! # Set-up
//!
//! - Data: `Ratings::synthetic(943, 1682, 10, 100_000, 0.8, seed)` — the shape of MovieLens-100k
//!   (943 users, 1682 items, 100 000 ratings), true rank 10, true ratings of unit variance around 3
//!   plus N(0, 0.8²) noise (so no method can beat an RMSE of about 0.8, and predicting the mean
//!   gives about 1.3; MovieLens ratings have sd 1.13) — split 90/10 into train/test by
//!   `Ratings::split(0.1, seed)`.
//! - Model: `Pmf` with K = 10, noise variance 0.8², prior variances 1/√K (the generator's), offset
//!   the training mean; d = (943 + 1682)·10 = 26 250 parameters for about 90 000 training ratings.
//! - Both samplers use minibatches of n = 1000 ratings and a constant step, and get the same budget
//!   of 1000 epochs of datum gradients (an epoch is N), setup included, so SGLD-CV (2n datum
//!   gradients per iteration, plus its setup) makes fewer than half as many iterations. Each chain
//!   is driven by our own loop over `Sampler::step` with the stream `sgmcmc::rng::stream(seed, &[0])`.
//! - SGLD starts from `pmf.random_start(0.1, seed)` (θ = 0 is a saddle).
//! - SGLD-CV is centred by `ControlVariate::from_sgd` from the same random start: 50 passes of SGD
//!   with minibatch 1000 and steps h_k = 2000 (1000 + k)^(−0.6) on U/N (test RMSE of the centre
//!   0.984; L-BFGS, `find_mode`, reaches the MAP's 0.972 in about 55 full-gradient evaluations, a
//!   similar cost). The SGD cost (50 epochs, plus one for the full gradient at the centre) is
//!   counted, and the chain starts at the centre. The library's default SGD step (a = 1) does not
//!   move PMF's factors at all: the potential is normalised by N, but a user's factors see only
//!   about 100 of the 90 000 ratings, so their curvature in U/N is about 10⁻³ of a global
//!   parameter's and the steps must be ~10³ times larger (a = 3000 already diverges).
//! - Running posterior-mean prediction: `Pmf::predict` averaged over every 5th draw after a burn-in
//!   of the first 50 epochs of cost (setup included, so SGLD-CV, whose SGD already cost 51 epochs,
//!   keeps every draw).
//!
//! Step sizes were tuned by a grid search on this synthetic set (running-mean RMSE after a budget
//! of 500 epochs): SGLD γ = 1e-4: 0.9642, 2e-4: 0.9626, 3e-4: 0.9640, 5e-4: 0.9703, 2e-3:
//! diverges; SGLD-CV γ = 1e-4: 0.9700, 2e-4: 0.9656, 3e-4: 0.9645, 5e-4: 0.9656, 1e-3: 0.9964
//! (its draws spread too wide: draw RMSE 1.24), 3e-3: diverges. Full-gradient Langevin (no
//! gradient noise at all) is still accurate at γ = 2e-3, with a draw RMSE of about 1.08.
//!
//! # How to read the output
//!
//! One table per method, one row per 50 epochs of cost (the plot has a point every 10): the
//! iteration, the wall time (setup included), the cost (datum gradients / N, setup included), the
//! test RMSE of the current draw θ_k, and that of the running posterior-mean prediction. The draw
//! RMSE (≈ 1.10) stays well above the posterior-mean RMSE: single PMF draws are noisy (posterior
//! sds of the factors are ~0.15 with about 100 ratings per user); the posterior mean is what a
//! Bayesian prediction uses.
//!
//! What it shows here: both methods end at the same posterior-mean RMSE (0.9617 and 0.9619 after
//! 1000 epochs; 0.9626 and 0.9635 after 500), and per datum gradient SGLD-CV does **not** beat
//! SGLD: SGLD is ahead early (0.9672 against 0.9732 at 150 epochs) and they meet at about 650
//! epochs. PMF is outside the regime of Baker et al.'s theory: its parameters are local (each
//! factor is informed by ~50–100 ratings), so the posterior does not concentrate relative to the
//! per-rating gradients, and the control variate's noise (which grows with ‖θ − θ̂‖² and with
//! N/n) stays large: it limits SGLD-CV's step about as much as the plain minibatch noise limits
//! SGLD's (SGLD-CV's draws become too wide above γ ≈ 5e-4, while full-gradient Langevin is
//! accurate at 2e-3). Per second of wall time SGLD-CV is slightly ahead, because an iteration's
//! fixed O(d) work (26 250 Gaussian draws and vector updates) dominates the 20 flops per rating:
//! an SGLD-CV iteration costs 1.2–1.3 times an SGLD iteration in time but 2 times in datum
//! gradients. The control variate cannot cache the centre gradients here (`cache_centre_gradients`
//! would store N × d = 2.4·10⁹ numbers).

use plotters::prelude::*;
use sgmcmc::StepSize;
use sgmcmc::observe::Observer;
use sgmcmc::observe::{Control, Progress};
use sgmcmc::prelude::*;
use sgmcmc::{GradientEstimator, Pmf, Ratings, SgdSettings};
use std::sync::Mutex;
use std::time::Instant;

/// Synthetic data: MovieLens-100k's shape.
const N_USERS: usize = 943;
const N_ITEMS: usize = 1682;
const N_RATINGS: usize = 100_000;
/// Rank of the synthetic truth.
const TRUE_RANK: usize = 10;
/// Noise sd of the synthetic ratings.
const NOISE_SD: f64 = 0.8;
const DATA_SEED: u64 = 7;
/// Fraction of ratings held out for testing.
const TEST_FRACTION: f64 = 0.1;
const SPLIT_SEED: u64 = 8;

/// The model's rank K, noise variance σ_x² and prior variance σ_w² = σ_h² = 1/√K.
const RANK: usize = 10;
const NOISE_VAR: f64 = NOISE_SD * NOISE_SD;
fn prior_var() -> f64 {
    1.0 / (RANK as f64).sqrt()
}

/// Minibatch size n (ratings, drawn with replacement), for both methods and SGD.
const BATCH_SIZE: usize = 1000;
/// Budget per method in epochs of datum gradients (setup included).
const BUDGET_EPOCHS: f64 = 1000.0;
/// Burn-in of the running posterior-mean prediction, in epochs of cost (setup included).
const BURN_IN_EPOCHS: f64 = 50.0;
/// A checkpoint every FINE_EPOCHS epochs of cost (for the plot), printed every CHECK_EPOCHS.
const FINE_EPOCHS: f64 = 10.0;
const CHECK_EPOCHS: f64 = 50.0;
/// Predictions are accumulated from every PRED_THIN-th draw after burn-in.
const PRED_THIN: u64 = 5;

/// SGLD's step γ and SGLD-CV's (tuned separately, see the module docs).
const SGLD_STEP: f64 = 2e-4;
const SGLD_CV_STEP: f64 = 3e-4;
/// SGD for the centre: passes, and steps h_k = SGD_A (SGD_B + k)^(−SGD_C) on U/N.
const SGD_PASSES: f64 = 50.0;
const SGD_A: f64 = 2000.0;
const SGD_B: f64 = 1000.0;
const SGD_C: f64 = 0.6;

/// Scale and seed of the random start (shared by SGLD and the SGD of SGLD-CV).
const INIT_SCALE: f64 = 0.1;
const INIT_SEED: u64 = 3;
/// Seeds of the chains' streams and of SGD.
const SGLD_SEED: u64 = 11;
const SGLD_CV_SEED: u64 = 12;
const SGD_SEED: u64 = 13;

/// Where the plot goes (relative to the working directory, the crate root under `cargo run`).
const PLOT_PATH: &str = "target/pmf_ratings.svg";

type Res<T> = Result<T, Box<dyn std::error::Error>>;

/// An error message that `main` prints as it is (its `Debug` is its text, unquoted).
struct Message(String);

impl std::fmt::Debug for Message {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::fmt::Display for Message {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Message {}

/// One checkpoint of a chain.
struct Checkpoint {
    /// Whether the row is printed (every CHECK_EPOCHS, the start and the end).
    printed: bool,
    iteration: u64,
    wall_s: f64,
    datum_gradients: u64,
    rmse_draw: f64,
    rmse_mean: f64,
}

/// What one method did.
struct Trace {
    name: &'static str,
    step: f64,
    n_iter: u64,
    burn_in: u64,
    setup_gradients: u64,
    setup_s: f64,
    start_rmse: f64,
    rows: Vec<Checkpoint>,
}

impl Trace {
    fn last(&self) -> Res<&Checkpoint> {
        self.rows.last().ok_or_else(|| format!("{}: no checkpoint", self.name).into())
    }
}

fn main() -> Res<()> {
    let t_total = Instant::now();
    let path = std::env::args().nth(1);
    let (ratings, source) = match &path {
        Some(p) => {
            let r = Ratings::load(p).map_err(|e| {
                Message(format!(
                    "could not load ratings from {p:?}: {e}\n  expected the MovieLens `u.data` format (one rating \
                     per line: `user item rating [timestamp]`); ml-100k is at \
                     https://grouplens.org/datasets/movielens/100k/ — or run without an argument to use synthetic data"
                ))
            })?;
            (r, format!("file {p}"))
        }
        None => (
            Ratings::synthetic(N_USERS, N_ITEMS, TRUE_RANK, N_RATINGS, NOISE_SD, DATA_SEED)?,
            format!("synthetic (true rank {TRUE_RANK}, noise sd {NOISE_SD})"),
        ),
    };
    let (train, test) = ratings.split(TEST_FRACTION, SPLIT_SEED)?;
    if train.is_empty() || test.is_empty() {
        return Err(format!("too few ratings to split: {} train, {} test", train.len(), test.len()).into());
    }
    let (n_train, n_test) = (train.len(), test.len());
    let pmf = Pmf::new(train, RANK, NOISE_VAR, prior_var(), prior_var())?;
    let n = pmf.n_data();
    let d = pmf.dim();
    // θ = 0 predicts the training mean everywhere.
    let baseline = pmf.rmse(&vec![0.0; d], &test)?;
    let theta0 = pmf.random_start(INIT_SCALE, INIT_SEED);

    println!("Bayesian PMF: SGLD vs SGLD-CV, held-out RMSE against cost (Baker et al. 2019, Sect. 5.2)");
    println!(
        "  data: {source}; {} users x {} items, {} ratings: {n_train} train / {n_test} test",
        ratings.n_users(),
        ratings.n_items(),
        ratings.len()
    );
    println!(
        "  model: rank K = {RANK}, noise variance {NOISE_VAR:.3}, prior variance {:.3}, offset (training mean) \
         {:.3}; d = {d}",
        prior_var(),
        pmf.offset()
    );
    println!(
        "  minibatch n = {BATCH_SIZE}; budget {BUDGET_EPOCHS} epochs per method (1 epoch = {n} datum gradients, \
         setup included); running mean over every {PRED_THIN}th draw after the first {BURN_IN_EPOCHS} epochs of cost"
    );
    println!("  baseline (predict the training mean): test RMSE {baseline:.4}");

    // --- SGLD from the random start. ------------------------------------------------------------
    // Iterations that fit in the budget, and burn-in iterations, for a chain costing `per_iter` datum
    // gradients per iteration (and once more at `init`) after a setup of `setup` datum gradients.
    let budget = BUDGET_EPOCHS * n as f64;
    let burn = BURN_IN_EPOCHS * n as f64;
    let fit = |setup: u64, per_iter: usize| -> Res<(u64, u64)> {
        let per = per_iter as f64;
        let n_iter = ((budget - setup as f64 - per) / per).floor();
        if n_iter < 1.0 {
            return Err(format!("the budget of {BUDGET_EPOCHS} epochs does not cover the setup").into());
        }
        let burn_in = ((burn - setup as f64 - per) / per).ceil().max(0.0);
        Ok((n_iter as u64, burn_in as u64))
    };
    let (sgld_iter, sgld_burn) = fit(0, BATCH_SIZE)?;
    let sgld = Sgld::new(SgldSettings::constant(SGLD_STEP), Minibatch::new(BATCH_SIZE))?;
    let sgld_trace = traced_run(&pmf, &test, "SGLD", sgld, &theta0, sgld_iter, sgld_burn, (0, 0.0), SGLD_SEED)?;
    print_trace(&sgld_trace, "random start", n);

    // --- SGLD-CV: SGD centre from the same start, then the chain from the centre. ----------------
    let t_setup = Instant::now();
    let sgd = SgdSettings {
        batch_size: BATCH_SIZE,
        n_passes: SGD_PASSES,
        step_size: StepSize::Shifted { a: SGD_A, b: SGD_B, c: SGD_C },
        seed: SGD_SEED,
    };
    let cv =
        ControlVariate::from_sgd(&pmf, &theta0, &sgd, CvSettings { batch_size: BATCH_SIZE, ..CvSettings::default() })?;
    let setup_s = t_setup.elapsed().as_secs_f64();
    let setup = cv.setup_cost().datum_gradients;
    let centre = cv.centre().to_vec();
    let (cv_iter, cv_burn) = fit(setup, 2 * BATCH_SIZE)?;
    let sgld_cv = Sgld::new(SgldSettings::constant(SGLD_CV_STEP), cv)?;
    let cv_trace =
        traced_run(&pmf, &test, "SGLD-CV", sgld_cv, &centre, cv_iter, cv_burn, (setup, setup_s), SGLD_CV_SEED)?;
    print_trace(
        &cv_trace,
        &format!(
            "SGD centre ({SGD_PASSES} passes, h_k = {SGD_A} ({SGD_B} + k)^-{SGD_C} on U/N): {:.1} epochs, {setup_s:.2} s",
            setup as f64 / n as f64
        ),
        n,
    );

    // --- Summary. ---------------------------------------------------------------------------------
    let (s_last, c_last) = (sgld_trace.last()?, cv_trace.last()?);
    println!();
    println!("Summary after {BUDGET_EPOCHS} epochs each (baseline {baseline:.4}):");
    for (t, last) in [(&sgld_trace, s_last), (&cv_trace, c_last)] {
        println!(
            "  {:>7}: gamma {:.0e}, {} iterations, posterior-mean RMSE {:.4}, last-draw RMSE {:.4}, cost {:.1} epochs \
             ({} datum gradients, setup {}), wall {:.1} s",
            t.name,
            t.step,
            t.n_iter,
            last.rmse_mean,
            last.rmse_draw,
            last.datum_gradients as f64 / n as f64,
            last.datum_gradients,
            t.setup_gradients,
            last.wall_s
        );
    }

    match plot(&[&sgld_trace, &cv_trace], baseline, n) {
        Ok(()) => println!("  plot: {PLOT_PATH}"),
        Err(e) => eprintln!("warning: could not write the plot {PLOT_PATH}: {e}"),
    }
    let total_seconds = t_total.elapsed().as_secs_f64();
    println!("total time {total_seconds:.1} s");

    // --- Machine-readable summary (hand-formatted JSON). ----------------------------------------
    let dataset = format!(
        "{{\"source\":{},\"n_users\":{},\"n_items\":{},\"n_ratings\":{},\"n_train\":{n_train},\"n_test\":{n_test},\
         \"test_fraction\":{TEST_FRACTION},\"synthetic_true_rank\":{},\"synthetic_noise_sd\":{}}}",
        json_str(&source),
        ratings.n_users(),
        ratings.n_items(),
        ratings.len(),
        if path.is_none() { TRUE_RANK.to_string() } else { "null".into() },
        if path.is_none() { num(NOISE_SD) } else { "null".into() },
    );
    let mut fields: Vec<(String, String)> = vec![
        ("dataset".into(), dataset),
        ("rank".into(), RANK.to_string()),
        ("dim".into(), d.to_string()),
        ("batch_size".into(), BATCH_SIZE.to_string()),
        ("budget_epochs".into(), num(BUDGET_EPOCHS)),
        ("baseline_rmse".into(), num(baseline)),
    ];
    for (key, t) in [("sgld", &sgld_trace), ("sgldcv", &cv_trace)] {
        let last = t.last()?;
        let arr = |f: &dyn Fn(&Checkpoint) -> f64| {
            format!("[{}]", t.rows.iter().filter(|r| r.printed).map(|r| num(f(r))).collect::<Vec<_>>().join(","))
        };
        fields.extend([
            (format!("{key}_step"), num(t.step)),
            (format!("{key}_n_iter"), t.n_iter.to_string()),
            (format!("{key}_burn_in_iter"), t.burn_in.to_string()),
            (format!("{key}_final_rmse_mean"), num(last.rmse_mean)),
            (format!("{key}_final_rmse_draw"), num(last.rmse_draw)),
            (format!("{key}_start_rmse"), num(t.start_rmse)),
            (format!("{key}_datum_gradients"), last.datum_gradients.to_string()),
            (format!("{key}_setup_gradients"), t.setup_gradients.to_string()),
            (format!("{key}_setup_s"), num(t.setup_s)),
            (format!("{key}_wall_s"), num(last.wall_s)),
            (format!("{key}_trace_epochs"), arr(&|r| r.datum_gradients as f64 / n as f64)),
            (format!("{key}_trace_rmse_draw"), arr(&|r| r.rmse_draw)),
            (format!("{key}_trace_rmse_mean"), arr(&|r| r.rmse_mean)),
        ]);
    }
    fields.push(("total_seconds".into(), num(total_seconds)));
    let body: Vec<String> = fields.iter().map(|(k, v)| format!("\"{k}\":{v}")).collect();
    println!("RESULT {{{}}}", body.join(","));
    Ok(())
}

/// Runs one chain of `sampler` for `n_iter` iterations on the library's runner, with an
/// observer that accumulates predictions on `test` from every `PRED_THIN`-th draw after
/// `burn_in`, and records a checkpoint each time the cost (setup included) passes a multiple of
/// `FINE_EPOCHS` epochs, and at the end. The chain uses the stream `(seed, [0])`.
#[allow(clippy::too_many_arguments)]
fn traced_run<E: GradientEstimator>(
    pmf: &Pmf,
    test: &Ratings,
    name: &'static str,
    sampler: Sgld<E>,
    theta0: &[f64],
    n_iter: u64,
    burn_in: u64,
    (setup_gradients, setup_s): (u64, f64),
    seed: u64,
) -> Res<Trace> {
    let step = match sampler.settings().step_size {
        StepSize::Constant(g) => g,
        _ => return Err("traced_run expects a constant step".into()),
    };
    let tracer = Tracer {
        pmf,
        test,
        tests: (0..test.len()).filter_map(|k| test.get(k)).collect(),
        burn_in,
        setup_gradients,
        setup_s,
        t0: Instant::now(),
        state: Mutex::new(TraceState::default()),
    };
    // The observer does the work; the run itself keeps only its last draw.
    let settings =
        RunSettings { n_iter, burn_in: n_iter - 1, n_chains: 1, seed, parallel: false, ..Default::default() };
    Runner::new(pmf, &sampler).start(theta0).settings(settings).observers(&[&tracer]).run()?;
    let state = tracer.state.into_inner().map_err(|_| "tracer poisoned")?;
    if let Some(e) = state.error {
        return Err(e.into());
    }
    Ok(Trace { name, step, n_iter, burn_in, setup_gradients, setup_s, start_rmse: state.start_rmse, rows: state.rows })
}

/// The observer of [`traced_run`].
struct Tracer<'a> {
    pmf: &'a Pmf,
    test: &'a Ratings,
    tests: Vec<(usize, usize, f64)>,
    burn_in: u64,
    setup_gradients: u64,
    setup_s: f64,
    t0: Instant,
    state: Mutex<TraceState>,
}

#[derive(Default)]
struct TraceState {
    pred_sum: Vec<f64>,
    n_pred: u64,
    start_rmse: f64,
    rows: Vec<Checkpoint>,
    next_fine: f64,
    next_print: f64,
    error: Option<String>,
}

impl Tracer<'_> {
    /// The next multiple of `every` epochs after `c` datum gradients.
    fn after(&self, c: u64, every: f64) -> f64 {
        let epoch = self.pmf.n_data() as f64;
        ((c as f64 / epoch / every).floor() + 1.0) * every * epoch
    }

    fn track(&self, p: &Progress<'_>, st: &mut TraceState) -> sgmcmc::Result<()> {
        let c = self.setup_gradients + p.cost.datum_gradients;
        if p.iteration == 0 {
            st.pred_sum = vec![0.0; self.tests.len()];
            st.start_rmse = self.pmf.rmse(p.position, self.test)?;
            st.rows.push(Checkpoint {
                printed: true,
                iteration: 0,
                wall_s: self.setup_s + self.t0.elapsed().as_secs_f64(),
                datum_gradients: c,
                rmse_draw: st.start_rmse,
                rmse_mean: f64::NAN,
            });
            st.next_fine = self.after(c, FINE_EPOCHS);
            st.next_print = self.after(c, CHECK_EPOCHS);
            return Ok(());
        }
        let k = p.iteration;
        if k > self.burn_in && (k - self.burn_in).is_multiple_of(PRED_THIN) {
            for (s, &(u, i, _)) in st.pred_sum.iter_mut().zip(&self.tests) {
                *s += self.pmf.predict(p.position, u, i);
            }
            st.n_pred += 1;
        }
        if c as f64 >= st.next_fine || k == p.n_iter {
            let printed = c as f64 >= st.next_print || k == p.n_iter;
            st.next_fine = self.after(c, FINE_EPOCHS);
            st.next_print = self.after(c, CHECK_EPOCHS);
            let rmse_mean = if st.n_pred == 0 {
                f64::NAN
            } else {
                let m = st.n_pred as f64;
                let se: f64 = st.pred_sum.iter().zip(&self.tests).map(|(s, t)| (s / m - t.2).powi(2)).sum();
                (se / self.tests.len() as f64).sqrt()
            };
            st.rows.push(Checkpoint {
                printed,
                iteration: k,
                wall_s: self.setup_s + self.t0.elapsed().as_secs_f64(),
                datum_gradients: c,
                rmse_draw: self.pmf.rmse(p.position, self.test)?,
                rmse_mean,
            });
        }
        Ok(())
    }

    fn visit(&self, p: &Progress<'_>) -> Control {
        let Ok(mut st) = self.state.lock() else { return Control::Stop };
        match self.track(p, &mut st) {
            Ok(()) => Control::Continue,
            Err(e) => {
                st.error = Some(e.to_string());
                Control::Stop
            }
        }
    }
}

impl Observer for Tracer<'_> {
    fn init(&self, p: &Progress<'_>) -> Control {
        self.visit(p)
    }

    fn observe(&self, p: &Progress<'_>) -> Control {
        self.visit(p)
    }
}

fn print_trace(t: &Trace, start: &str, n: usize) {
    println!();
    println!(
        "{}: gamma = {:.0e}, {} iterations (burn-in {} for the running mean); start: {start}, test RMSE {:.4}",
        t.name, t.step, t.n_iter, t.burn_in, t.start_rmse
    );
    println!("{:>9} {:>9} {:>10} {:>11} {:>11}", "iteration", "wall (s)", "epochs", "RMSE draw", "RMSE mean");
    for r in t.rows.iter().filter(|r| r.printed) {
        let mean = if r.rmse_mean.is_finite() { format!("{:.4}", r.rmse_mean) } else { "-".into() };
        println!(
            "{:>9} {:>9.2} {:>10.1} {:>11.4} {:>11}",
            r.iteration,
            r.wall_s,
            r.datum_gradients as f64 / n as f64,
            r.rmse_draw,
            mean
        );
    }
}

/// Two panels against cost in epochs: the RMSE of the current draws with the baseline (top), and
/// the RMSE of the running posterior-mean predictions (bottom, on its own scale).
fn plot(traces: &[&Trace], baseline: f64, n: usize) -> Res<()> {
    let path = std::path::Path::new(PLOT_PATH);
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let root = SVGBackend::new(path, (900, 900)).into_drawing_area();
    root.fill(&WHITE)?;
    let (top, bottom) = root.split_vertically(450);
    let colours = [RGBColor(0, 114, 178), RGBColor(213, 94, 0)];
    let x_hi = BUDGET_EPOCHS * 1.02;
    type Panel<'a, 'b> =
        (&'a DrawingArea<SVGBackend<'b>, plotters::coord::Shift>, &'static str, fn(&Checkpoint) -> f64, bool);
    let panels: [Panel; 2] = [
        (&top, "Bayesian PMF: test RMSE of the current draw", |r| r.rmse_draw, true),
        (&bottom, "test RMSE of the running posterior-mean prediction", |r| r.rmse_mean, false),
    ];
    for (area, title, pick, with_baseline) in panels {
        let series: Vec<Vec<(f64, f64)>> = traces
            .iter()
            .map(|t| {
                t.rows
                    .iter()
                    .map(|r| (r.datum_gradients as f64 / n as f64, pick(r)))
                    .filter(|p| p.1.is_finite())
                    .collect()
            })
            .collect();
        let ys = series.iter().flatten().map(|p| p.1).chain(with_baseline.then_some(baseline));
        let (lo, hi) = ys.fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), y| (lo.min(y), hi.max(y)));
        if !(lo.is_finite() && hi.is_finite()) {
            return Err("no finite RMSE to plot".into());
        }
        let pad = 0.05 * (hi - lo).max(1e-3);
        let mut chart = ChartBuilder::on(area)
            .caption(title, ("sans-serif", 20))
            .margin(15)
            .x_label_area_size(45)
            .y_label_area_size(70)
            .build_cartesian_2d(0.0..x_hi, (lo - pad)..(hi + pad))?;
        chart
            .configure_mesh()
            .x_desc("cost (epochs of datum gradients, setup included)")
            .y_desc("test RMSE")
            .light_line_style(RGBColor(235, 235, 235))
            .draw()?;
        for ((t, pts), colour) in traces.iter().zip(series).zip(colours) {
            let style = ShapeStyle::from(&colour).stroke_width(2);
            chart
                .draw_series(LineSeries::new(pts, style))?
                .label(format!("{} (gamma = {:.0e})", t.name, t.step))
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 24, y)], style));
        }
        if with_baseline {
            let grey = ShapeStyle::from(&RGBColor(120, 120, 120)).stroke_width(1);
            chart
                .draw_series(DashedLineSeries::new(vec![(0.0, baseline), (x_hi, baseline)], 6, 4, grey))?
                .label("predict the training mean")
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 24, y)], grey));
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperRight)
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .label_font(("sans-serif", 14))
            .draw()?;
    }
    root.present()?;
    Ok(())
}

/// A JSON string literal (escapes quotes, backslashes and control characters).
fn json_str(s: &str) -> String {
    let mut out = String::from("\"");
    for ch in s.chars() {
        match ch {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// A JSON number (a non-finite value becomes `null`).
fn num(x: f64) -> String {
    if x.is_finite() { format!("{x}") } else { "null".to_string() }
}
