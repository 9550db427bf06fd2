//! SG-MCMC against NUTS on the model both are built for: Bayesian logistic regression, d = 20,
//! synthetic data at N = 10³, 10⁴, 10⁵ and 10⁶, and a real data set (the Wisconsin breast-cancer
//! data of `data/`, features standardised, d = 31). On one thread each, on the same data and the
//! same model code, the time to a verdict:
//!
//! - **sgmcmc**: `Sample::new(&model, Sgld::auto()).run()`, the default path with nothing set by
//!   hand — mode, whitening, the choice of gradient estimator and minibatch, tuning, dispersed
//!   starts, the run, the step-bias check — aiming at its default accuracy (every mean within ±0.1
//!   posterior sd and every sd within ±10 %, 95 %, Monte Carlo error and step bias together),
//!   extending its chains until it states that;
//! - **NUTS**: nuts-rs 0.19 (the engine of nutpie) with its default adaptation (400 tuning draws,
//!   diagonal mass matrix), 4 chains, until every mean's Monte Carlo standard error is at most
//!   0.05 posterior sd (what a ±0.1 sd 95 % statement needs). Its log density and gradient are
//!   the crate's own model code (`Model::potential_and_grad_data_sum`, one fused pass over the
//!   data), so the ratio compares the samplers, not the kernels.
//!
//! Each method's actual worst error is measured against a reference computed apart (importance
//! sampling from the widened Laplace approximation, antithetic pairs, its own standard error
//! printed). The example prints the table (times, their ratio, both errors, sgmcmc's stated
//! bound), the crossover N where the two times meet (log-log interpolation), writes
//! `docs/vs-nuts.md` and ends with `RESULT {json}`.
//!
//! `cargo run --release --example vs_nuts` (about 15 minutes, most of it NUTS at N = 10⁶ and the
//! references); `-- quick` runs N = 10³ and 10⁴ only, `-- real` the real data set alone, and
//! neither writes anything.

mod support;
#[path = "support/vs_nuts.rs"]
mod vs_nuts;

use sgmcmc::prelude::*;
use std::fmt::Write as _;
use std::time::Instant;
#[allow(unused_imports)]
use support::{cholesky_lower, normals, spd_inverse};
use vs_nuts::{errors, moments, nuts_until, reference};

/// Parameters of the synthetic regressions.
const DIM: usize = 20;
/// Prior variance of the coefficients.
const PRIOR_VAR: f64 = 10.0;
/// Seed of the synthetic data.
const DATA_SEED: u64 = 2026;
/// NUTS's chains.
const CHAINS: usize = 4;
/// NUTS's target: every mean's MCSE at most this many posterior sds.
const NUTS_MCSE: f64 = 0.05;
/// Antithetic pairs of the reference.
const REFERENCE_PAIRS: usize = 2_000;
/// Below this ESS of the importance weights the reference is a long NUTS run instead.
const REFERENCE_MIN_ESS: f64 = 1_000.0;
/// Draws per chain of a NUTS reference.
const REFERENCE_NUTS_DRAWS: u64 = 10_000;

/// One row of the table.
struct Row {
    name: String,
    n: usize,
    d: usize,
    nuts_s: f64,
    nuts_gradients: u64,
    nuts_draws: u64,
    nuts_err: (f64, f64),
    nuts_mcse: f64,
    sg_s: f64,
    sg_tune_s: f64,
    sg_epochs: f64,
    sg_setup_epochs: f64,
    sg_draws: u64,
    sg_err: (f64, f64),
    sg_bound: f64,
    sg_reached: bool,
    ref_se: f64,
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let quick = std::env::args().any(|a| a == "quick");
    // `real`: the real data set's row alone (a check; nothing written).
    let real_only = std::env::args().any(|a| a == "real");
    let sizes: &[usize] = if real_only {
        &[]
    } else if quick {
        &[1_000, 10_000]
    } else {
        &[1_000, 10_000, 100_000, 1_000_000]
    };
    let one = rayon::ThreadPoolBuilder::new().num_threads(1).build()?;
    let mut out = String::new();
    macro_rules! say {
        ($($t:tt)*) => {{ let line = format!($($t)*); println!("{line}"); writeln!(out, "{line}").ok(); }};
    }
    say!(
        "sgmcmc vs NUTS: Bayesian logistic regression, one thread each, time to a ±0.1 sd verdict \
         (sgmcmc: Sample::new(&model, Sgld::auto()).run(), its default accuracy target; \
         NUTS: nuts-rs defaults, {CHAINS} chains, until every mean's MCSE ≤ {NUTS_MCSE} sd)"
    );
    let mut rows = Vec::new();
    for &n in sizes {
        let model = LogisticRegression::synthetic(n, DIM, PRIOR_VAR, DATA_SEED)?;
        rows.push(compare(&model, &format!("synthetic N = {n}"), &one, &mut |l| say!("{l}"))?);
    }
    if !quick || real_only {
        let model = support::wdbc_standardised(PRIOR_VAR)?;
        rows.push(compare(&model, "wdbc (real, standardised)", &one, &mut |l| say!("{l}"))?);
    }
    say!("");
    say!(
        "| data | N | d | NUTS s | sgmcmc s | NUTS / sgmcmc | NUTS error (mean, sd) | sgmcmc error (mean, sd) | sgmcmc stated | sgmcmc setup epochs | reference se |"
    );
    say!("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |");
    for r in &rows {
        say!(
            "| {} | {} | {} | {:.2} | {:.2} | **{:.1}** | {:.3}, {:.3} | {:.3}, {:.3} | ±{:.3}{} | {:.1} | {:.3} |",
            r.name,
            r.n,
            r.d,
            r.nuts_s,
            r.sg_s,
            r.nuts_s / r.sg_s,
            r.nuts_err.0,
            r.nuts_err.1,
            r.sg_err.0,
            r.sg_err.1,
            r.sg_bound,
            if r.sg_reached { "" } else { " (not reached)" },
            r.sg_setup_epochs,
            r.ref_se
        );
    }
    let synthetic: Vec<&Row> = rows.iter().filter(|r| r.name.starts_with("synthetic")).collect();
    let crossover = crossover(&synthetic);
    say!("");
    match crossover {
        Some(c) => {
            say!("crossover (NUTS as fast as sgmcmc): N ≈ {c:.0} (log-log interpolation between the synthetic rows)")
        }
        None => say!("crossover: not between the synthetic rows (sgmcmc is faster at every N, or slower at every N)"),
    }
    let within = rows.iter().all(|r| r.sg_err.0.max(r.sg_err.1) <= r.sg_bound + 2.0 * r.ref_se);
    say!("sgmcmc's actual error inside its stated bound (plus twice the reference's error) at every N: {within}");
    if !quick && !real_only {
        let doc = format!(
            "# sgmcmc against NUTS\n\nWritten by `cargo run --release --example vs_nuts` (sgmcmc {}); regenerate it with the same \
             command. What is compared and how: the example's documentation (`examples/vs_nuts.rs`).\n\n```text\n{out}```\n",
            env!("CARGO_PKG_VERSION")
        );
        std::fs::write("docs/vs-nuts.md", doc)?;
        println!("report written to docs/vs-nuts.md");
    }
    let json: Vec<String> = rows
        .iter()
        .map(|r| {
            format!(
                "{{\"data\":\"{}\",\"n\":{},\"d\":{},\"nuts_s\":{:.4},\"sgmcmc_s\":{:.4},\"ratio\":{:.3},\"nuts_gradients\":{},\"nuts_draws\":{},\"nuts_mcse\":{:.4},\"nuts_error\":[{:.4},{:.4}],\"sgmcmc_error\":[{:.4},{:.4}],\"sgmcmc_bound\":{:.4},\"sgmcmc_reached\":{},\"sgmcmc_draws\":{},\"sgmcmc_tune_s\":{:.4},\"sgmcmc_epochs\":{:.2},\"sgmcmc_setup_epochs\":{:.2},\"reference_se\":{:.4}}}",
                r.name, r.n, r.d, r.nuts_s, r.sg_s, r.nuts_s / r.sg_s, r.nuts_gradients, r.nuts_draws, r.nuts_mcse,
                r.nuts_err.0, r.nuts_err.1, r.sg_err.0, r.sg_err.1, r.sg_bound, r.sg_reached, r.sg_draws, r.sg_tune_s,
                r.sg_epochs, r.sg_setup_epochs, r.ref_se
            )
        })
        .collect();
    let cross = crossover.map_or("null".to_string(), |c| format!("{c:.0}"));
    println!("RESULT {{\"rows\":[{}],\"crossover_n\":{cross},\"errors_within_bounds\":{within}}}", json.join(","));
    Ok(())
}

/// Both methods on `model`, one thread each, and the reference on every thread.
fn compare(
    model: &LogisticRegression,
    name: &str,
    one: &rayon::ThreadPool,
    say: &mut dyn FnMut(String),
) -> Result<Row, Box<dyn std::error::Error>> {
    let (n, d) = (model.n_data(), model.dim());
    // sgmcmc: the default path with nothing set by hand (`Sgld::auto()`: the tuner chooses the
    // estimator and its minibatch, the step and the length for the default accuracy).
    let (fit, sg_s) = one.install(|| -> Result<_, sgmcmc::Error> {
        let t = Instant::now();
        let fit = Sample::new(model, Sgld::auto()).seed(1).run()?;
        Ok((fit, t.elapsed().as_secs_f64()))
    })?;
    let chosen =
        fit.tuned.preconditioning.split("; ").find(|p| p.starts_with("gradient estimator chosen")).unwrap_or("");
    let target = fit.target.clone().expect("an accuracy target");
    let run_epochs = fit.output.cost.epochs(n);
    let setup_epochs = fit.tuned.cost.epochs(n) + fit.bias.as_ref().map_or(0.0, |b| b.cost.epochs(n));
    say(format!(
        "{name}: sgmcmc {sg_s:.2} s (tuning {:.2} s), {target}; run {:.1} epochs, setup {:.1} epochs; {}",
        fit.tuned.wall_time.as_secs_f64(),
        run_epochs,
        setup_epochs,
        chosen.split(" (").next().unwrap_or(chosen)
    ));
    // NUTS.
    let nuts = one.install(|| nuts_until(model, CHAINS, NUTS_MCSE, 7, 200_000))?;
    say(format!(
        "{name}: NUTS {:.2} s: {} tuning + {} draws per chain, {} gradient passes, {} divergences, max MCSE {:.3} sd{}",
        nuts.seconds,
        nuts.tune,
        nuts.draws,
        nuts.gradients,
        nuts.divergences,
        nuts.max_mcse,
        if nuts.reached { "" } else { " (target not reached)" }
    ));
    // The reference.
    let mode = model.map()?.to_vec();
    let hessian = model.hessian(&mode)?;
    let mut r = reference(model, &mode, &hessian, REFERENCE_PAIRS, 11)?;
    say(format!(
        "{name}: reference by importance sampling, {} draws, weights' ESS {:.0}, max standard error {:.4} ({:.1} s)",
        r.draws, r.ess, r.max_se, r.seconds
    ));
    if r.ess < REFERENCE_MIN_ESS {
        // The Laplace approximation is too far from the posterior for importance sampling:
        // a long NUTS run instead (on every thread's worth of patience: it is not timed).
        r = vs_nuts::nuts_reference(model, CHAINS, REFERENCE_NUTS_DRAWS, 13)?;
        say(format!(
            "{name}: the importance weights' ESS is below {REFERENCE_MIN_ESS}: reference by NUTS instead, {} chains x \
             {REFERENCE_NUTS_DRAWS} draws, max standard error {:.4} ({:.1} s)",
            CHAINS, r.max_se, r.seconds
        ));
    }
    let (m, s) = moments(fit.estimate());
    let sg_err = errors(&m, &s, &r);
    let nuts_err = errors(&nuts.mean, &nuts.sd, &r);
    say(format!(
        "{name}: errors against the reference: NUTS means {:.3} sd, sds {:.1} %; sgmcmc means {:.3} sd, sds {:.1} % (stated ±{:.3}); NUTS / sgmcmc time {:.1}",
        nuts_err.0,
        100.0 * nuts_err.1,
        sg_err.0,
        100.0 * sg_err.1,
        target.bound,
        nuts.seconds / sg_s
    ));
    Ok(Row {
        name: name.to_string(),
        n,
        d,
        nuts_s: nuts.seconds,
        nuts_gradients: nuts.gradients,
        nuts_draws: nuts.draws,
        nuts_err,
        nuts_mcse: nuts.max_mcse,
        sg_s,
        sg_tune_s: fit.tuned.wall_time.as_secs_f64(),
        sg_epochs: run_epochs,
        sg_setup_epochs: setup_epochs,
        sg_draws: target.draws,
        sg_err,
        sg_bound: target.bound,
        sg_reached: target.reached,
        ref_se: r.max_se,
    })
}

/// The N where the NUTS / sgmcmc time ratio crosses 1, interpolated in log N and log ratio.
fn crossover(rows: &[&Row]) -> Option<f64> {
    rows.windows(2).find_map(|w| {
        let (a, b) = (w[0], w[1]);
        let (ra, rb) = ((a.nuts_s / a.sg_s).ln(), (b.nuts_s / b.sg_s).ln());
        (ra <= 0.0 && rb > 0.0).then(|| {
            let t = -ra / (rb - ra);
            ((a.n as f64).ln() + t * ((b.n as f64).ln() - (a.n as f64).ln())).exp()
        })
    })
}
